//! Where one job's time goes, with one worker and nothing else running: the engine's
//! public steps called in sequence and timed around each call.
//!
//! `noop` jobs are submitted in bulk, then in a loop: [`Execution::claim`] a batch of 32,
//! then [`Execution::execute`] each claimed job in turn (kind lookup, sandbox call, settle:
//! one version-checked transaction). The engine's own counter gives the time inside the
//! sandbox, so execute − sandbox is the settle and lookup. The kind-version lookup that
//! `execute` does before every step is timed on its own.
//!
//! [`Execution::claim`]: spindle::engine::Execution::claim
//! [`Execution::execute`]: spindle::engine::Execution::execute

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde::Serialize;

use super::Context;
use super::stats::Summary;
use spindle::engine::Outcome;

/// Jobs run through.
const JOBS: usize = 2_000;
/// Claim batch (the dispatcher's default).
const BATCH: u32 = 32;

/// One worker's phase figures.
#[derive(Clone, Debug, Serialize)]
pub struct Phases {
    /// Jobs run.
    pub jobs: usize,
    /// Submitting (bulk), µs per job.
    pub submit_us_per_job: f64,
    /// Claiming a batch of 32, µs per claimed job.
    pub claim_us_per_job: f64,
    /// `execute` per job, µs.
    pub execute_us: Summary,
    /// Inside the sandbox per step, µs (mean, the engine's counter).
    pub sandbox_us: f64,
    /// Looking up the job's kind version (a store read), µs.
    pub kind_lookup_us: Summary,
    /// Jobs per second one worker achieves this way.
    pub sequential_jobs_per_sec: f64,
}

/// Runs the breakdown on a fresh database.
pub async fn measure(ctx: &Context) -> anyhow::Result<Phases> {
    let scenario = ctx.open("phases", 1).await?;
    ctx.deploy(&scenario, "noop").await?;
    let engine = scenario.host.engine.clone();
    let task = ctx.progress.task("phases: one worker, noop", Some(JOBS as u64));
    let started = Instant::now();
    for _ in 0..JOBS / 500 {
        engine.submission().submit_many(&ctx.tenant, super::requests("noop", b"{}", 500)).await?;
    }
    let submit_us_per_job = started.elapsed().as_secs_f64() * 1e6 / JOBS as f64;

    let mut lookups = Vec::new();
    for _ in 0..500 {
        let t = Instant::now();
        engine.registry().version(&ctx.tenant, "noop", 1).await?;
        lookups.push(t.elapsed().as_secs_f64() * 1e6);
    }

    let (mut claim_secs, mut claimed_jobs, mut executes) = (0.0, 0usize, Vec::with_capacity(JOBS));
    let run_started = Instant::now();
    loop {
        let t = Instant::now();
        let claimed = engine.execution().claim(BATCH).await?;
        claim_secs += t.elapsed().as_secs_f64();
        if claimed.is_empty() {
            break;
        }
        claimed_jobs += claimed.len();
        for record in claimed {
            let t = Instant::now();
            let executed = engine.execution().execute(record).await;
            executes.push(t.elapsed().as_secs_f64() * 1e6);
            ensure!(matches!(executed.outcome, Outcome::Settled(_)), "a step did not settle: {:?}", executed.outcome);
        }
        task.set(claimed_jobs as u64);
    }
    let run_secs = run_started.elapsed().as_secs_f64();
    ensure!(claimed_jobs == JOBS, "claimed {claimed_jobs} of {JOBS} jobs");
    let counters = engine.counters();
    let sandbox_us = counters.step_micros.load(Ordering::Relaxed) as f64
        / counters.steps_settled.load(Ordering::Relaxed).max(1) as f64;
    let execute_us = Summary::of(&mut executes).context("no samples")?;
    let phases = Phases {
        jobs: JOBS,
        submit_us_per_job,
        claim_us_per_job: claim_secs * 1e6 / claimed_jobs as f64,
        execute_us,
        sandbox_us,
        kind_lookup_us: Summary::of(&mut lookups).context("no samples")?,
        sequential_jobs_per_sec: JOBS as f64 / run_secs,
    };
    task.finish(&format!(
        "claim {:.0} µs/job, execute {:.0} µs/job (sandbox {:.0} µs)",
        phases.claim_us_per_job, phases.execute_us.mean, phases.sandbox_us
    ));
    ctx.close(scenario, Duration::ZERO).await;
    Ok(phases)
}
