//! The dispatcher: finds ready work through the store's indexes, claims it in batches,
//! runs each claimed step on a bounded pool, and keeps the queue moving (delayed jobs
//! promoted when due, lapsed claims rescued, after-commit effects run).
//!
//! It wakes promptly on new work: the engine signals in-process submissions, and the
//! store's ready signals relay other hosts' commits (PostgreSQL's `LISTEN`). A poll
//! interval is only the fallback.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use spindle_core::job::{JobEvent, StepReport};
use spindle_core::{Fence, JobId};
use tokio::sync::{Mutex, Semaphore, watch};
use tokio::task::JoinSet;

use crate::engine::{Engine, NextFilter};
use crate::slots::Slots;
use crate::store::ClaimFilter;

/// Dispatcher settings.
#[derive(Clone, Debug)]
pub struct DispatcherConfig {
    /// Steps run at once on this host (default 192). Bounded so the sandbox pool (256
    /// slots by default) and the database connections are never oversubscribed. With
    /// durable commits, throughput grows with the jobs in flight (each waits for its
    /// claim's and its outcome's commit), so the default leaves room for it.
    pub concurrency: usize,
    /// Most jobs claimed per transaction (default 64).
    pub claim_batch: u32,
    /// Longest the dispatcher sleeps without a signal (default 1 s): the fallback that
    /// catches a missed notification.
    pub poll_interval: Duration,
    /// How often lapsed claims are rescued and the outbox is drained (default 1 s).
    pub maintenance_interval: Duration,
    /// Only these kinds and tenants (default: all), for hosts dedicated to some work.
    pub filter: crate::store::ClaimFilter,
    /// Slots beyond `concurrency` that only a tenant under its share of the host may take
    /// while the pool is full (default 12, a sixteenth of the default pool; `spindle serve`
    /// sets a sixteenth of its `--concurrency`; 0: none). With them, one tenant's long steps
    /// holding every slot never keep another tenant's jobs from starting; a tenant alone
    /// still uses the whole pool.
    pub fair_reserve: usize,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        Self {
            concurrency: 192,
            claim_batch: 64,
            poll_interval: Duration::from_secs(1),
            maintenance_interval: Duration::from_secs(1),
            filter: crate::store::ClaimFilter::default(),
            fair_reserve: spindle_core::capacity::SlotShare::default_reserve(192),
        }
    }
}

/// A running dispatcher.
#[derive(Debug)]
pub struct Dispatcher {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    in_flight: Arc<Mutex<HashMap<JobId, Fence>>>,
    engine: Arc<Engine>,
}

impl Dispatcher {
    /// Starts dispatching with `engine`.
    pub fn start(engine: Arc<Engine>, config: DispatcherConfig) -> Self {
        let (stop, stopped) = watch::channel(false);
        let in_flight = Arc::new(Mutex::new(HashMap::new()));
        let mut tasks = JoinSet::new();
        tasks.spawn(dispatch_loop(engine.clone(), config.clone(), stopped.clone(), in_flight.clone()));
        tasks.spawn(maintenance_loop(engine.clone(), config.clone(), stopped.clone()));
        tasks.spawn(relay_loop(engine.clone(), config, stopped.clone()));
        tasks.spawn(meter_loop(engine.clone(), stopped.clone()));
        tasks.spawn(sample_loop(engine.clone(), stopped.clone()));
        tasks.spawn(relay_ready_signals(engine.clone(), stopped));
        Self { stop, tasks, in_flight, engine }
    }

    /// Stops claiming, lets running steps finish for up to `grace`, then hands back the
    /// claims of those still running (they run again elsewhere, no attempt consumed).
    pub async fn shutdown(mut self, grace: Duration) {
        let _ = self.stop.send(true);
        let drained = tokio::time::timeout(grace, async { while self.tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            self.tasks.abort_all();
            while self.tasks.join_next().await.is_some() {}
        }
        let left: Vec<(JobId, Fence)> = self.in_flight.lock().await.drain().collect();
        for (id, fence) in left {
            let result = self
                .engine
                .apply_holder(id, |record| {
                    record
                        .job
                        .claim
                        .as_ref()
                        .filter(|c| c.fence == fence)
                        .map(|_| JobEvent::Report { fence, report: StepReport::Release })
                })
                .await;
            match result {
                Ok(_) => tracing::info!(job = %id, %fence, "handed a running step back at shutdown"),
                Err(e) => {
                    tracing::warn!(job = %id, %fence, error = %e, "could not hand a step back; its claim will lapse")
                }
            }
        }
    }
}

async fn dispatch_loop(
    engine: Arc<Engine>,
    config: DispatcherConfig,
    mut stopped: watch::Receiver<bool>,
    in_flight: Arc<Mutex<HashMap<JobId, Fence>>>,
) {
    let pool = config.concurrency.max(1);
    let permits = Arc::new(Semaphore::new(pool));
    let reserve = Arc::new(Semaphore::new(config.fair_reserve));
    let slots = Arc::new(Slots::default());
    let wake = engine.wake_signal();
    let mut running: JoinSet<()> = JoinSet::new();
    loop {
        if *stopped.borrow() {
            break;
        }
        while running.try_join_next().is_some() {}
        // The pool first, passing over tenants at their share while others have work
        // ready; when it is full, the reserve, for tenants under their share only.
        let (from, free, filter) = if permits.available_permits() > 0 {
            let pass_over = slots.over_share(pool, None);
            (&permits, permits.available_permits(), ClaimFilter { pass_over, ..config.filter.clone() })
        } else {
            let except = slots.over_share(pool, None);
            (&reserve, reserve.available_permits(), ClaimFilter { except, ..config.filter.clone() })
        };
        let from_reserve = Arc::ptr_eq(from, &reserve);
        // A reserve claim first reads whether it would find anything: while one tenant
        // fills the pool, each wake-up would otherwise take the writer's turn for nothing.
        let worth_it = !from_reserve || free == 0 || engine.execution().any_ready(&filter).await.unwrap_or(true);
        let claimed = if free == 0 || !worth_it {
            Vec::new()
        } else {
            let limit = u32::try_from(free).unwrap_or(u32::MAX).min(config.claim_batch);
            match engine.execution().claim_filtered(limit, &filter).await {
                Ok(claimed) => claimed,
                Err(e) => {
                    tracing::error!(error = %e, "claiming failed");
                    Vec::new()
                }
            }
        };
        let got = claimed.len();
        for record in claimed {
            let Ok(permit) = from.clone().acquire_owned().await else { break };
            let Some(fence) = record.job.claim.as_ref().map(|c| c.fence) else { continue };
            let id = record.job.id;
            slots.take(&record.tenant, engine.slot_weight(&record.tenant).await);
            in_flight.lock().await.insert(id, fence);
            let (engine, in_flight, stopped, filter, slots) =
                (engine.clone(), in_flight.clone(), stopped.clone(), config.filter.clone(), slots.clone());
            // A worker: run the job, and while work is ready and the dispatcher is not
            // stopping, settle it and claim the next one in the same transaction. A
            // reserve slot runs one job: the next claim is the dispatcher's to decide.
            running.spawn(async move {
                let mut current = (id, record);
                loop {
                    let (id, record) = current;
                    let tenant = record.tenant.clone();
                    let next: Option<NextFilter<'_>> = (!from_reserve && !*stopped.borrow()).then(|| {
                        let (slots, tenant, filter) = (slots.clone(), tenant.clone(), filter.clone());
                        Box::new(move || ClaimFilter { pass_over: slots.over_share(pool, Some(&tenant)), ..filter })
                            as NextFilter<'_>
                    });
                    let (_, next) = engine.execution().execute_then_claim(record, next).await;
                    slots.free(&tenant);
                    let mut in_flight = in_flight.lock().await;
                    in_flight.remove(&id);
                    let Some(next) = next else { break };
                    let Some(fence) = next.job.claim.as_ref().map(|c| c.fence) else { break };
                    slots.take(&next.tenant, engine.slot_weight(&next.tenant).await);
                    in_flight.insert(next.job.id, fence);
                    current = (next.job.id, next);
                }
                drop(permit);
            });
        }
        if got > 0 && (permits.available_permits() > 0 || reserve.available_permits() > 0) {
            continue;
        }
        // Nothing ready (or no room): sleep until signalled, a step ends, the next
        // delayed job is due, or the poll interval passes.
        let mut sleep_for = config.poll_interval;
        if got == 0 {
            match engine.execution().promote_due().await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "promoting due jobs failed"),
            }
            if let Ok(Some(due)) = engine.next_due().await {
                sleep_for = sleep_for.min(due.since(engine.now()).max(Duration::from_millis(1)));
            }
        }
        tokio::select! {
            () = wake.notified() => {}
            Some(_) = running.join_next(), if !running.is_empty() => {}
            () = tokio::time::sleep(sleep_for) => {}
            _ = stopped.changed() => {}
        }
    }
    // Stopped: let what runs finish (the caller bounds how long by aborting).
    while running.join_next().await.is_some() {}
}

async fn maintenance_loop(engine: Arc<Engine>, config: DispatcherConfig, mut stopped: watch::Receiver<bool>) {
    loop {
        if let Err(e) = engine.execution().rescue_lapsed(256).await {
            tracing::error!(error = %e, "rescuing lapsed claims failed");
        }
        if let Err(e) = engine.execution().run_outbox(64).await {
            tracing::error!(error = %e, "running after-commit effects failed");
        }
        tokio::select! {
            () = tokio::time::sleep(config.maintenance_interval) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// Runs the workflow relay (children counted for their parents, children cancelled)
/// whenever a write on this host queued work for it (the writer's own signal: a child's
/// settlement wakes its parent's count at once), when a count it had to put off is due,
/// and every maintenance interval as a safety net (and for what a host that died
/// queued).
async fn relay_loop(engine: Arc<Engine>, config: DispatcherConfig, mut stopped: watch::Receiver<bool>) {
    let wake = engine.relay_signal();
    let mut retry_at = None;
    loop {
        match engine.workflows().run_relay(1_000).await {
            Ok(pass) if pass.ran > 0 => {
                if let Some(at) = pass.retry_at {
                    retry_at = Some(retry_at.map_or(at, |earlier: spindle_core::Timestamp| earlier.min(at)));
                }
                continue;
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "running workflow effects failed"),
        }
        let mut sleep_for = config.maintenance_interval;
        if let Some(at) = retry_at.take() {
            sleep_for = sleep_for.min(at.since(engine.now()).max(Duration::from_millis(1)));
        }
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(sleep_for) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// How often metered usage is added to the store.
const METER_INTERVAL: Duration = Duration::from_secs(1);

/// Adds metered usage to the store every [`METER_INTERVAL`], and once more when stopped.
async fn meter_loop(engine: Arc<Engine>, mut stopped: watch::Receiver<bool>) {
    loop {
        let stop = tokio::select! {
            () = tokio::time::sleep(METER_INTERVAL) => false,
            _ = stopped.changed() => true,
        };
        if let Err(e) = engine.capacity().flush_usage().await {
            tracing::warn!(error = %e, "could not store metered usage; it is kept for the next try");
        }
        if stop {
            return;
        }
    }
}

/// Counts the steps running, per tenant, for the running-over-time chart.
async fn sample_loop(engine: Arc<Engine>, mut stopped: watch::Receiver<bool>) {
    loop {
        if let Err(e) = engine.capacity().sample_running().await {
            tracing::debug!(error = %e, "could not count the running steps");
        }
        tokio::select! {
            () = tokio::time::sleep(crate::engine::SAMPLE_EVERY) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// Wakes the dispatcher when the store signals that another host made work ready.
async fn relay_ready_signals(engine: Arc<Engine>, mut stopped: watch::Receiver<bool>) {
    let mut signals = engine.ready_signals();
    loop {
        tokio::select! {
            () = signals.next() => engine.wake_signal().notify_one(),
            _ = stopped.changed() => return,
        }
    }
}
