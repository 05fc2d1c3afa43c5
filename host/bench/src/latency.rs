//! Enqueue→start latency at a steady rate: one `noop` job submitted every `1/rate`
//! seconds (open loop: each submission is its own task, so a slow one does not delay
//! the next), a warm-up that is not counted, then the measured window.
//!
//! The latency is read from what the store kept, not from added instrumentation: the
//! job machine's `created_at` (taken by `submit` before its insert) and `started_at`
//! (taken by the claim that started its first step), microsecond timestamps of the same
//! clock. `started_at` is the claim's own `now`, read as the claim transaction begins;
//! the sandbox call follows that transaction's commit. Enqueue→settled (`settled_at`,
//! the outcome's commit time) is reported beside it as the upper bound.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;
use tokio::time::MissedTickBehavior;

use super::stats::Summary;
use super::{Context, wait_settled};
use spindle::engine::SubmitRequest;

/// The latency probe's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// Jobs per second offered.
    pub rate: u32,
    /// Seconds of warm-up (not counted).
    pub warmup_secs: u64,
    /// Seconds measured.
    pub secs: u64,
    /// The rate achieved over the measured window, jobs/s.
    pub achieved_rate: f64,
    /// Enqueue→start, milliseconds.
    pub start_ms: Summary,
    /// Enqueue→settled (outcome committed), milliseconds.
    pub settled_ms: Summary,
}

/// Runs the probe on a fresh database.
pub async fn measure(ctx: &Context) -> anyhow::Result<Latency> {
    let s = &ctx.settings;
    let rate = s.latency_rate.max(1);
    let warmup = s.warmup_secs * u64::from(rate);
    let measured = s.latency_secs * u64::from(rate);
    let total = warmup + measured;
    let mut scenario = ctx.open("latency", s.concurrency).await?;
    ctx.deploy(&scenario, "noop").await?;
    scenario.start();
    let engine = scenario.host.engine.clone();
    let task = ctx.progress.task(format!("latency: {rate}/s, {}+{} s", s.warmup_secs, s.latency_secs), Some(total));
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    interval.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut submissions = Vec::new();
    let mut window_started = None;
    for i in 0..total {
        interval.tick().await;
        if i == warmup {
            window_started = Some(Instant::now());
        }
        let (engine, tenant) = (engine.clone(), ctx.tenant.clone());
        let request = SubmitRequest { kind: "noop".into(), input: b"{}".to_vec(), ..Default::default() };
        submissions
            .push((i >= warmup, tokio::spawn(async move { engine.submission().submit(&tenant, request).await })));
        if i % u64::from(rate) == 0 {
            task.set(i);
        }
    }
    let window = window_started.map_or(1.0, |t| t.elapsed().as_secs_f64());
    let mut ids = Vec::new();
    for (counted, submission) in submissions {
        let inserted = submission.await.context("a submission task")?.context("submitting")?;
        if counted {
            ids.push(inserted.record().job.id);
        }
    }
    wait_settled(&engine, total, Duration::from_secs(60), &task).await?;
    let (mut start, mut settled) = (Vec::new(), Vec::new());
    for id in ids {
        let job = engine.operations().job(&ctx.tenant, id).await?.job;
        let ms = |at: spindle_core::Timestamp| (at.as_micros() - job.created_at.as_micros()) as f64 / 1000.0;
        start.push(ms(job.started_at.context("a settled job without started_at")?));
        settled.push(ms(job.settled_at.context("a settled job without settled_at")?));
    }
    let start_ms = Summary::of(&mut start).context("no job measured")?;
    let settled_ms = Summary::of(&mut settled).context("no job measured")?;
    task.finish(&format!("enqueue→start p50 {:.2} ms, p99 {:.2} ms", start_ms.p50, start_ms.p99));
    ctx.close(scenario, Duration::from_secs(5)).await;
    Ok(Latency {
        rate,
        warmup_secs: s.warmup_secs,
        secs: s.latency_secs,
        achieved_rate: measured as f64 / window,
        start_ms,
        settled_ms,
    })
}
