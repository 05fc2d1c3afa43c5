//! What the engine counts for metrics and the benchmark.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters the engine keeps for metrics.
#[derive(Debug, Default)]
pub struct Counters {
    /// Step outcomes committed.
    pub steps_settled: AtomicU64,
    /// Sandbox faults.
    pub sandbox_faults: AtomicU64,
    /// Operational alerts (late success after failure, failed effects).
    pub alerts: AtomicU64,
    /// Writes that lost a version race and were derived again.
    pub conflicts: AtomicU64,
    /// Commits refused because the claim was stale.
    pub stale_commits: AtomicU64,
    /// Claims that had lapsed by the time their step was to run, and were not run.
    pub lapsed_before_run: AtomicU64,
    /// Steps this host is running now (from the guest's start to its outcome's commit).
    pub steps_running: AtomicU64,
    /// Sum of step call durations, microseconds.
    pub step_micros: AtomicU64,
    /// Step call durations: how many fell at or under each of [`STEP_BUCKETS`].
    pub step_buckets: [AtomicU64; STEP_BUCKETS.len()],
    /// Step calls measured.
    pub step_calls: AtomicU64,
    /// Claim transactions, the jobs they took, and the time they took (µs).
    pub claims: AtomicU64,
    /// See [`claims`](Self::claims).
    pub claimed_jobs: AtomicU64,
    /// See [`claims`](Self::claims).
    pub claim_micros: AtomicU64,
    /// Group-commit transactions, the writes they carried, and their time (µs).
    pub flushes: AtomicU64,
    /// See [`flushes`](Self::flushes).
    pub flushed_writes: AtomicU64,
    /// See [`flushes`](Self::flushes).
    pub flush_micros: AtomicU64,
    /// Next jobs claimed inside group commits, for the workers whose outcome they carried.
    pub claimed_in_commits: AtomicU64,
}

/// Upper bounds (seconds) of the step-duration histogram's buckets.
pub const STEP_BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, f64::INFINITY];

impl Counters {
    /// Records one step call's duration.
    pub fn observe_step(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.step_micros.fetch_add(micros, Ordering::Relaxed);
        self.step_calls.fetch_add(1, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        for (bound, bucket) in STEP_BUCKETS.iter().zip(&self.step_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
