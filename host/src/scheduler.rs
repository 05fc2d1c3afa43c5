//! The scheduler: one host at a time (the `scheduler` singleton lease, as the
//! reconciler's) fires the due cron schedules, each through the engine and the core's
//! schedule machine ([`Workflows::fire_due_schedules`](crate::engine::Workflows::fire_due_schedules), `docs/state-machines.md`).
//!
//! It wakes when the soonest schedule is due, and at least every [`INTERVAL`] (to renew
//! its lease and see schedules other hosts created). A pass that runs late loses
//! nothing: every time between two passes is one of the schedule's due times.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::{Engine, EngineError};
use crate::singleton::SingletonLoop;

/// The singleton lease's name.
pub const LEASE: &str = "scheduler";
/// Longest the holder waits between passes.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// How long the lease lasts past a pass: a host that dies hands it over within twice
/// this.
const LEASE_FOR: Duration = Duration::from_secs(5);

/// One pass, if this host holds the scheduler lease: answers the jobs submitted.
pub async fn fire_due(engine: &Engine) -> Result<usize, EngineError> {
    if !crate::singleton::hold(engine, LEASE, LEASE_FOR).await? {
        return Ok(0);
    }
    engine.workflows().fire_due_schedules().await
}

/// How long to wait before the next pass: until the soonest schedule is due, at most
/// [`INTERVAL`].
async fn until_next(engine: &Engine) -> Duration {
    match engine.workflows().next_schedule_at().await {
        Ok(Some(at)) => at.since(engine.now()).clamp(Duration::from_millis(1), INTERVAL),
        Ok(None) => INTERVAL,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the next schedule's time");
            INTERVAL
        }
    }
}

/// The scheduler's loop on this host.
#[derive(Debug)]
pub struct Scheduler(SingletonLoop);

impl Scheduler {
    /// Starts firing due schedules while this host holds the lease.
    pub fn start(engine: Arc<Engine>) -> Self {
        Self(SingletonLoop::start_paced(engine, LEASE, |engine| async move {
            if let Err(e) = fire_due(&engine).await {
                tracing::error!(error = %e, "firing schedules failed");
            }
            until_next(&engine).await
        }))
    }

    /// Stops it and gives up the lease.
    pub async fn stop(self) {
        self.0.stop().await;
    }
}
