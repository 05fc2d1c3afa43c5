//! Host memory with 10,000 queued and 100 running jobs.
//!
//! 10,100 jobs of the `scripted` kind whose first step waits to be told to stop
//! (`{"first": "wait-for-stop"}`: it heartbeats every 5 ms) on a host whose dispatcher
//! runs 100 steps at once. Once the store shows 100 running and 10,000 pending, the
//! resident set is sampled for a few seconds. The host is then shut down with a short
//! grace: the waiting steps are handed back (their claims released) and the database is
//! dropped.
//!
//! The figure is the whole process (the harness is a small part of it); on PostgreSQL
//! the server's memory is not in it. The peak since the section began (`VmHWM`, reset
//! when the section starts) is reported beside it.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde::Serialize;

use super::{Context, stats, submit_bulk};
use spindle::store::JobStore;

/// Jobs waiting.
const QUEUED: usize = 10_000;
/// Jobs running.
const RUNNING: usize = 100;

/// The memory figures.
#[derive(Clone, Debug, Serialize)]
pub struct Memory {
    /// Jobs queued while sampling.
    pub queued: i64,
    /// Jobs running while sampling.
    pub running: i64,
    /// Largest resident set sampled in the steady state, MiB.
    pub steady_rss_mib: f64,
    /// Peak resident set since the section began (includes submitting the jobs), MiB.
    pub section_peak_rss_mib: Option<f64>,
}

/// Runs the measurement on a fresh database.
pub async fn measure(ctx: &Context) -> anyhow::Result<Memory> {
    let mut scenario = ctx.open("memory", RUNNING).await?;
    ctx.deploy(&scenario, "scripted").await?;
    scenario.start();
    let engine = scenario.host.engine.clone();
    let task = ctx.progress.task(format!("memory: {QUEUED} queued + {RUNNING} running"), None);
    let input = br#"{"first": "wait-for-stop"}"#;
    submit_bulk(ctx, &engine, "scripted", input, QUEUED + RUNNING, &task, || 0).await?;
    let started = Instant::now();
    let (queued, running) = loop {
        let depths = scenario.host.store.depths().await?;
        let count = |state: &str| depths.iter().filter(|d| d.state == state).map(|d| d.count).sum::<i64>();
        let (pending, running) = (count("pending"), count("running"));
        task.note(format!("{running} running, {pending} pending"));
        if running >= RUNNING as i64 && pending >= QUEUED as i64 {
            break (pending, running);
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("expected {RUNNING} running and {QUEUED} pending jobs; saw {running} and {pending}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Let the running steps settle into their heartbeat rhythm, then sample.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut steady = 0f64;
    for _ in 0..30 {
        steady = steady.max(stats::rss_mib().unwrap_or(0.0));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let section_peak_rss_mib = stats::peak_rss_mib();
    task.finish(&format!("{steady:.0} MiB resident with {queued} queued and {running} running"));
    ctx.close(scenario, Duration::from_millis(500)).await;
    Ok(Memory { queued, running, steady_rss_mib: steady, section_peak_rss_mib })
}
