//! Retention: finished jobs are kept for a while (30 days by default; a tenant may have
//! a time of its own), then deleted with their steps, history and queued effects, so a
//! busy host's database stays the size of its recent work instead of growing for ever.
//! The verdicts of SQL submissions (`spindle.submit`) go after the host's default time.
//!
//! One host at a time prunes (the `pruner` singleton lease, as the reconciler's), every
//! `interval`, in batches that each commit on their own: a pass never holds the database
//! for long, and never takes more than `per_pass` jobs.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::{Engine, EngineError};
use crate::singleton::SingletonLoop;
use crate::store::{PruneScope, TenantId};

/// The singleton lease's name.
pub const LEASE: &str = "pruner";

/// How long finished jobs are kept, and how pruning paces itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// How long a finished job is kept after it settled (default 30 days).
    pub keep: Duration,
    /// How often a pass runs (default 1 min).
    pub interval: Duration,
    /// Jobs deleted per transaction (default 1,000).
    pub batch: u32,
    /// Most jobs one pass deletes (default 100,000); the next pass goes on.
    pub per_pass: u64,
    /// A pass that deleted at least this many jobs vacuums their tables (default 10,000):
    /// at a high rate PostgreSQL's autovacuum comes by too seldom to keep the space of
    /// deleted rows reusable, and the tables grow though their rows do not.
    pub vacuum_after: u64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self {
            keep: Duration::from_secs(30 * 86_400),
            interval: Duration::from_secs(60),
            batch: 1_000,
            per_pass: 100_000,
            vacuum_after: 10_000,
        }
    }
}

/// A running pruner loop.
#[derive(Debug)]
pub struct Pruner(SingletonLoop);

impl Pruner {
    /// Starts pruning every `policy.interval`.
    pub fn start(engine: Arc<Engine>, policy: RetentionPolicy) -> Self {
        let interval = policy.interval;
        Self(SingletonLoop::start(engine, LEASE, interval, move |engine| {
            let policy = policy.clone();
            async move {
                match prune_once(&engine, &policy).await {
                    Ok(Some(pruned)) if pruned > 0 => tracing::info!(pruned, "finished jobs pruned"),
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = %e, "pruning failed"),
                }
            }
        }))
    }

    /// Stops the loop and gives up the lease.
    pub async fn stop(self) {
        self.0.stop().await;
    }
}

/// Runs one pass if this host holds (or can take) the pruner lease; answers how many jobs
/// it deleted, `None` when another host holds the lease.
pub async fn prune_once(engine: &Engine, policy: &RetentionPolicy) -> Result<Option<u64>, EngineError> {
    let now = engine.now();
    if !crate::singleton::hold(engine, LEASE, policy.interval).await? {
        return Ok(None);
    }
    let overrides: Vec<(TenantId, Duration)> = engine.tenancy().retention_overrides().await?;
    let mut scopes: Vec<(PruneScope, Duration)> =
        overrides.iter().map(|(tenant, keep)| (PruneScope::Tenant(tenant.clone()), *keep)).collect();
    scopes.push((PruneScope::AllBut(overrides.into_iter().map(|(tenant, _)| tenant).collect()), policy.keep));
    let mut pruned = 0;
    for (scope, keep) in scopes {
        let before = now.minus(keep);
        while pruned < policy.per_pass {
            let n = engine.prune(before, &scope, policy.batch).await?;
            pruned += n;
            if n < u64::from(policy.batch) {
                break;
            }
        }
    }
    // The verdicts of SQL submissions are kept as long as the host keeps finished jobs.
    let before = now.minus(policy.keep);
    while engine.prune_sql_submissions(before, policy.batch).await? >= u64::from(policy.batch) {}
    if pruned >= policy.vacuum_after.max(1) {
        engine.reclaim_pruned().await?;
    }
    Ok(Some(pruned))
}
