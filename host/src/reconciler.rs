//! The reconciler (seed 001): settles jobs that went silent from execution evidence.
//!
//! Every `interval` (default 5 min) the host that holds the `reconciler` singleton lease
//! (one host at a time across all hosts sharing the database; the lease, not an
//! election, decides) selects open jobs silent for the threshold (default 15 min)
//! through an index, probes each one's execution and hands the evidence to the job
//! machine, which decides: reset the trailing misses, count one, or settle.
//!
//! Evidence, from what the store records of the execution:
//!
//! | the job | evidence |
//! |---|---|
//! | a live claim | alive |
//! | a lapsed claim (its host stopped renewing) | missing |
//! | no claim, in the dispatch queue, its pinned component loads | alive (waiting its turn) |
//! | no claim and not in the dispatch queue (a lost dispatch) | missing |
//! | no claim; its pinned component is gone or does not load | missing (nothing can run it) |
//! | a failed step, job still open | failed |
//! | its last step completed, job still open | succeeded |

use std::sync::Arc;

use spindle_core::job::JobEvent;
use spindle_core::step::StepState;
use spindle_core::{Evidence, JobState, ReconcilePolicy};

use crate::engine::{Engine, EngineError, Writer};
use crate::singleton::SingletonLoop;
use crate::store::JobRecord;

/// The singleton lease's name.
pub const LEASE: &str = "reconciler";

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Candidates examined.
    pub examined: usize,
    /// Jobs settled (failed, succeeded or cancelled).
    pub settled: usize,
    /// Probes that found no execution but did not settle yet.
    pub misses: usize,
}

/// A running reconciler loop.
#[derive(Debug)]
pub struct Reconciler(SingletonLoop);

impl Reconciler {
    /// Starts reconciling every `policy.interval`.
    pub fn start(engine: Arc<Engine>, policy: ReconcilePolicy) -> Self {
        let interval = policy.interval;
        Self(SingletonLoop::start(engine, LEASE, interval, move |engine| async move {
            match reconcile_once(&engine, &policy).await {
                Ok(Some(report)) if report.settled > 0 || report.misses > 0 => {
                    tracing::info!(?report, "reconciliation pass");
                }
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "reconciliation pass failed"),
            }
        }))
    }

    /// Stops the loop and gives up the lease.
    pub async fn stop(self) {
        self.0.stop().await;
    }
}

/// Runs one pass if this host holds (or can take) the reconciler lease; `None` when
/// another host holds it.
pub async fn reconcile_once(engine: &Engine, policy: &ReconcilePolicy) -> Result<Option<PassReport>, EngineError> {
    let now = engine.now();
    if !crate::singleton::hold(engine, LEASE, policy.interval).await? {
        return Ok(None);
    }
    let mut report = PassReport::default();
    let candidates = engine.silent_jobs(now.minus(policy.silence), policy.batch).await?;
    for id in candidates {
        report.examined += 1;
        let Some(record) = engine.load(id).await? else { continue };
        if matches!(record.job.state, JobState::Paused | JobState::Waiting) {
            // Nothing runs a paused or waiting job, by design: no evidence to gather.
            continue;
        }
        let evidence = probe(engine, &record).await;
        let before = record.job.probe_misses;
        let result =
            engine.apply(None, id, Writer::Recovery, |_| Some(JobEvent::Reconcile { evidence, policy: *policy })).await;
        match result {
            Ok(after) if after.job.state.is_final() => report.settled += 1,
            Ok(after) if after.job.probe_misses > before => report.misses += 1,
            Ok(_) => {}
            // The job moved on (it reported, or is no longer silent): nothing to do.
            Err(EngineError::Refused { .. } | EngineError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(report))
}

/// What the store records of a job's execution.
async fn probe(engine: &Engine, record: &JobRecord) -> Evidence {
    let job = &record.job;
    let now = engine.now();
    if let Some(claim) = &job.claim {
        return if claim.expires_at > now { Evidence::Alive } else { Evidence::Missing };
    }
    if job.steps.iter().any(|s| s.state == StepState::Failed) {
        return Evidence::Failed;
    }
    if job.steps.last().is_some_and(|s| s.state == StepState::Completed) {
        return Evidence::Succeeded;
    }
    if !job.queue.is_waiting() {
        // The core never leaves an open, unclaimed, unpaused job idle; a stored one that
        // is can never be dispatched.
        tracing::warn!(job = %job.id, "an open job is missing from the dispatch queue");
        return Evidence::Missing;
    }
    match engine.registry().version(&record.tenant, &record.kind, record.kind_version).await {
        Ok(_) => Evidence::Alive,
        Err(e) => {
            tracing::warn!(job = %job.id, kind = %record.kind, version = record.kind_version, error = %e, "no execution can run this job");
            Evidence::Missing
        }
    }
}
