//! The database over a long run with retention: waves of one-step jobs run through a
//! host whose finished jobs are kept for no time at all, pruned after each wave, and the
//! database's size read after each. Without retention it grows with every job; with it,
//! it levels off at what one wave needs.
//!
//! Jobs in all: `--jobs` (a million by default for this section, in waves of 50,000).
//! Size: SQLite's database and log files after a checkpoint; PostgreSQL's
//! `pg_database_size`.

use std::time::Duration;

use serde::Serialize;

use super::{Context, submit_bulk, wait_settled};
use spindle::pruner::{RetentionPolicy, prune_once};
use spindle::store::Backend;
use spindle::store::sql::{Db, Ty};

/// Jobs per wave.
const WAVE: usize = 50_000;

/// One wave's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Wave {
    /// Jobs run so far.
    pub jobs: u64,
    /// Jobs the pruner deleted after this wave.
    pub pruned: u64,
    /// The database's size after it, MiB.
    pub database_mib: f64,
}

/// The size of the database behind `db`, bytes.
async fn database_bytes(db: &Db, path: Option<&std::path::Path>) -> anyhow::Result<u64> {
    match db.backend() {
        Backend::Sqlite => {
            db.checkpoint().await?;
            let path = path.ok_or_else(|| anyhow::anyhow!("a SQLite database without a path"))?;
            let mut bytes = 0;
            for suffix in ["", "-wal"] {
                bytes += std::fs::metadata(format!("{}{suffix}", path.display())).map_or(0, |m| m.len());
            }
            Ok(bytes)
        }
        Backend::Postgres => {
            let rows = db.fetch("SELECT pg_database_size(current_database())", vec![], &[Ty::Int]).await?;
            Ok(u64::try_from(rows.first().map_or(0, |r| r.int(0, "bench row").expect("a decodable row"))).unwrap_or(0))
        }
    }
}

/// Runs the waves on a fresh database.
pub async fn measure(ctx: &Context, jobs: usize) -> anyhow::Result<Vec<Wave>> {
    let mut scenario = ctx.open("retention", ctx.settings.concurrency).await?;
    ctx.deploy(&scenario, "noop").await?;
    scenario.start();
    let engine = scenario.host.engine.clone();
    let keep_none = RetentionPolicy { keep: Duration::ZERO, per_pass: u64::MAX, ..RetentionPolicy::default() };
    let url = scenario.host.config().database_url();
    let path =
        url.strip_prefix("sqlite://").map(|rest| std::path::PathBuf::from(rest.split('?').next().unwrap_or(rest)));
    let task = ctx.progress.task(format!("retention: {jobs} jobs in waves of {WAVE}"), Some(jobs as u64));
    let mut waves = Vec::new();
    let mut done = 0usize;
    while done < jobs {
        let n = WAVE.min(jobs - done);
        let settled_before = engine.counters().steps_settled.load(std::sync::atomic::Ordering::Relaxed);
        submit_bulk(ctx, &engine, "noop", b"{}", n, &task, || 0).await?;
        wait_settled(&engine, settled_before + n as u64, Duration::from_secs(600), &task).await?;
        done += n;
        let pruned = prune_once(&engine, &keep_none).await?.unwrap_or(0);
        let bytes = database_bytes(scenario.host.store.db(), path.as_deref()).await?;
        let wave = Wave { jobs: done as u64, pruned, database_mib: bytes as f64 / f64::from(1 << 20) };
        task.note(format!("{done} jobs, {:.1} MiB", wave.database_mib));
        waves.push(wave);
    }
    task.finish(&format!("{} waves", waves.len()));
    ctx.close(scenario, Duration::from_millis(500)).await;
    Ok(waves)
}
