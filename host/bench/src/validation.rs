//! What checking inputs against a kind's schema costs a bulk submission.
//!
//! The same payment-shaped input is submitted in bulk, host stopped (the drain run's
//! enqueue), to `noop`, which declares no schema, and to `typed-noop`, which is `noop`
//! with `payment-saga`'s input schema (three required fields, a length, a range and a
//! pattern). Each is measured `ROUNDS` times on fresh databases, which of the two goes
//! first alternating from round to round, and the median is kept. Runs of half a second
//! differ by more than a check costs, so the check alone is also timed in-process,
//! against the schema the host compiled at deploy, and given as a share of the untyped
//! submission's time per job: the figure the noise cannot move.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

use super::progress::Task;
use super::{Context, stats, submit_bulk};

/// The input both kinds are given, valid for `typed-noop`'s schema.
const INPUT: &[u8] = br#"{"account": "acct-1", "amount_cents": 1200, "card": "4242424242424242"}"#;
/// Enqueue runs per kind.
const ROUNDS: usize = 5;
/// Checks timed in-process.
const CHECKS: usize = 100_000;

/// The validation section's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    /// Jobs per enqueue run.
    pub jobs: usize,
    /// Jobs submitted per second to `noop` (no schema), median of the rounds.
    pub untyped_jobs_per_sec: f64,
    /// Jobs submitted per second to `typed-noop` (schema checked), median of the rounds.
    pub typed_jobs_per_sec: f64,
    /// `typed / untyped`: 1.0 means validation costs nothing measurable.
    pub ratio: f64,
    /// Every round's figures, untyped then typed.
    pub rounds: Vec<(f64, f64)>,
    /// One check of the input against the compiled schema, in-process, µs.
    pub check_us: f64,
    /// `check_us` over the untyped submission's µs per job.
    pub check_share: f64,
}

/// Measures both kinds' enqueue rates and the bare check.
pub async fn measure(ctx: &Context) -> anyhow::Result<Validation> {
    let jobs = ctx.settings.jobs;
    let task = ctx.progress.task(format!("typed inputs: {jobs} submissions without and with a schema"), None);
    let mut rounds = Vec::with_capacity(ROUNDS);
    let mut check_us = f64::NAN;
    for round in 0..ROUNDS {
        let (untyped, typed) = if round % 2 == 0 {
            let untyped = enqueue(ctx, "noop", jobs, &task).await?;
            (untyped, enqueue(ctx, "typed-noop", jobs, &task).await?)
        } else {
            let typed = enqueue(ctx, "typed-noop", jobs, &task).await?;
            (enqueue(ctx, "noop", jobs, &task).await?, typed)
        };
        if round == 0 {
            check_us = bare_check(ctx).await?;
        }
        rounds.push((untyped, typed));
        task.note(format!("round {}: {untyped:.0} vs {typed:.0} jobs/s", round + 1));
    }
    let median = |pick: fn(&(f64, f64)) -> f64| {
        let mut figures: Vec<f64> = rounds.iter().map(pick).collect();
        stats::Summary::of(&mut figures).map_or(f64::NAN, |s| s.p50)
    };
    let untyped_jobs_per_sec = median(|r| r.0);
    let typed_jobs_per_sec = median(|r| r.1);
    let ratio = typed_jobs_per_sec / untyped_jobs_per_sec;
    let check_share = check_us / (1e6 / untyped_jobs_per_sec);
    task.finish(&format!(
        "{untyped_jobs_per_sec:.0} → {typed_jobs_per_sec:.0} jobs/s ({:+.1} %), check {check_us:.2} µs ({:.1} % of a submission)",
        (ratio - 1.0) * 100.0,
        check_share * 100.0
    ));
    Ok(Validation { jobs, untyped_jobs_per_sec, typed_jobs_per_sec, ratio, rounds, check_us, check_share })
}

/// Jobs per second submitting `jobs` of `kind` in bulk, host stopped, on a fresh database.
async fn enqueue(ctx: &Context, kind: &str, jobs: usize, task: &Task) -> anyhow::Result<f64> {
    let scenario = ctx.open(&format!("{kind}-enqueue"), ctx.settings.concurrency).await?;
    ctx.deploy(&scenario, kind).await?;
    let engine = scenario.host.engine.clone();
    let started = Instant::now();
    submit_bulk(ctx, &engine, kind, INPUT, jobs, task, || 0).await?;
    let rate = jobs as f64 / started.elapsed().as_secs_f64();
    ctx.close(scenario, Duration::ZERO).await;
    Ok(rate)
}

/// µs per check of [`INPUT`] against `typed-noop`'s schema as the host compiled it.
async fn bare_check(ctx: &Context) -> anyhow::Result<f64> {
    let scenario = ctx.open("typed-noop-check", 1).await?;
    ctx.deploy(&scenario, "typed-noop").await?;
    let current = scenario.host.registry.current(&ctx.tenant, "typed-noop").await?;
    let schema = current.kind.input_schema.clone().context("typed-noop declares an input schema")?;
    let started = Instant::now();
    for _ in 0..CHECKS {
        anyhow::ensure!(schema.check(std::hint::black_box(INPUT)).is_ok(), "the input follows typed-noop's schema");
    }
    let micros = started.elapsed().as_secs_f64() * 1e6 / CHECKS as f64;
    ctx.close(scenario, Duration::ZERO).await;
    Ok(micros)
}
