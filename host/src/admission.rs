//! The loop that admits what applications submitted in their own PostgreSQL
//! transactions (`spindle.submit`): woken by `LISTEN spindle_submissions` as each such
//! transaction commits, and every second besides (a notification lost with a
//! connection, a submission left queued by a host that died), it hands the queued
//! submissions to the engine (`engine::admission`), which admits or refuses each.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::engine::Engine;

/// Submissions one pass takes.
const BATCH: u32 = 100;

/// Longest a committed submission waits for a pass when no notification came.
const SWEEP: Duration = Duration::from_secs(1);

/// A running admission loop.
#[derive(Debug)]
pub struct Admission {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Admission {
    /// Admits SQL submissions until stopped; `None` on a store with no SQL door (SQLite).
    pub fn start(engine: Arc<Engine>) -> Option<Self> {
        if !engine.submission().has_sql_door() {
            return None;
        }
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut signals = engine.submission().sql_submission_signals();
            loop {
                loop {
                    match engine.submission().admit_sql(BATCH).await {
                        // A pass ends at its rows or its bytes: another follows while
                        // one found anything.
                        Ok(pass) if pass.admitted + pass.refused > 0 => {}
                        Ok(_) => break,
                        Err(e) => {
                            tracing::warn!(error = %e, "admitting SQL submissions failed; trying again");
                            break;
                        }
                    }
                }
                tokio::select! {
                    () = signals.next() => {}
                    () = tokio::time::sleep(SWEEP) => {}
                    _ = stopped.changed() => break,
                }
            }
        });
        Some(Self { stop, task })
    }

    /// Stops admitting.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}
