//! A noisy neighbour: tenant A keeps 100,000 one-step jobs queued (topped up as they
//! run) while tenant B submits 100 jobs at a steady rate; B's enqueue→start latency is
//! measured four ways — on an idle host (B alone) and beside A with fair claiming, in
//! alternating rounds; then once each beside A with fair claiming off (submission order,
//! as before issue 15) and beside A with fair claiming and A's running limit at three
//! quarters of the host's concurrency (so that a worker is free when B's job arrives, as
//! an operator would set a noisy tenant).
//!
//! Then the slots case (issue 39): A's 200 steps spin on the CPU until their 10 s deadline,
//! more than the host's pool of slots, and B submits 30 jobs at 10/s meanwhile; B's
//! enqueue→start is printed beside the idle figure, with its enqueue→finish (B's step shares
//! the cores with A's spinners). And the host-call case (issue 53): A's 200 steps draw
//! `wasi:random` as fast as the host lets them (1 MiB a call, the most a call may ask,
//! from their first turn on), B likewise.
//!
//! Latency is read as the `latency` section reads it: the job's `created_at` and the
//! `started_at` its first claim stamped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;
use tokio::time::MissedTickBehavior;

use super::stats::Summary;
use super::{Context, requests};
use spindle::engine::{Engine, SubmitRequest};
use spindle::store::{TenantId, TenantLimits};

/// Jobs tenant A keeps queued.
const BACKLOG: u64 = 100_000;
/// Jobs per top-up of A's backlog: small, as a steady stream of submissions is, so that
/// B's submissions do not queue behind one large insert.
const TOP_UP_BATCH: usize = 100;
/// Jobs tenant B submits, and how many per second.
const PROBES: u64 = 100;
const PROBE_RATE: u64 = 20;

/// Rounds of the idle and the fair run: each is B's 100 jobs, and a p99 of 100 samples
/// is nearly their largest, which one passing stall on a shared machine decides. The
/// rounds alternate, so a slow spell of the machine falls on both, and their samples
/// are pooled.
const ROUNDS: usize = 3;

/// A's steps that spin to their deadline (or draw randomness), and how long that is.
const SPINNERS: usize = 200;
/// Each drawing step's draws of 1 MiB: a few seconds of host calls in a loop.
const DRAWS: u32 = 2_000;
const SPIN_DEADLINE_MS: u64 = 10_000;
/// B's jobs beside them, and how many per second.
const SPIN_PROBES: u64 = 30;
const SPIN_PROBE_RATE: u64 = 10;

/// The noisy-tenant figures.
#[derive(Clone, Debug, Serialize)]
pub struct Noisy {
    /// Jobs A kept queued.
    pub backlog: u64,
    /// B's jobs per run, and their rate (jobs/s).
    pub probes: u64,
    /// See [`probes`](Self::probes).
    pub probe_rate: u64,
    /// Rounds of the idle and the fair run, pooled in `idle_ms` and `fair_ms`.
    pub rounds: usize,
    /// B's enqueue→start on an idle host, milliseconds (all rounds).
    pub idle_ms: Summary,
    /// B's enqueue→start beside A, fair claiming on, milliseconds (all rounds).
    pub fair_ms: Summary,
    /// Each round's p99, idle and fair, milliseconds.
    pub round_p99_ms: Vec<(f64, f64)>,
    /// B's enqueue→start beside A, fair claiming off, milliseconds (one run).
    pub unfair_ms: Summary,
    /// B's enqueue→start beside A limited to `limited_running` steps at once, fair
    /// claiming on, milliseconds (one run).
    pub limited_ms: Summary,
    /// A's running limit in that run.
    pub limited_running: u32,
    /// A's jobs run per second while B was measured, fair claiming on.
    pub fair_noisy_rate: f64,
    /// The slots case: A's steps spinning to their deadline, B's jobs beside them.
    pub spinners: Spinners,
    /// The host-call case: A's steps drawing randomness, 1 MiB a call, B's jobs beside them.
    pub drawers: Spinners,
}

/// B beside A's busy steps.
#[derive(Clone, Debug, Serialize)]
pub struct Spinners {
    /// What A's steps do: `spin` (compute) or `draw` (host calls).
    pub busy: &'static str,
    /// A's steps that spin to their deadline, and the deadline (ms).
    pub spinners: usize,
    /// See [`spinners`](Self::spinners).
    pub deadline_ms: u64,
    /// The host's pool and reserve.
    pub pool: usize,
    /// See [`pool`](Self::pool).
    pub reserve: usize,
    /// A's steps running when B's first job was submitted.
    pub a_running: usize,
    /// B's jobs.
    pub probes: u64,
    /// B's enqueue→start, milliseconds.
    pub start_ms: Summary,
    /// B's enqueue→finish, milliseconds.
    pub finish_ms: Summary,
}

/// Runs the measurements, each on a fresh database.
pub async fn measure(ctx: &Context) -> anyhow::Result<Noisy> {
    let (mut idle, mut fair, mut round_p99_ms, mut rates) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (mut idle_round, _) = run(ctx, "noisy-idle", None, true, None).await?;
        let (mut fair_round, rate) = run(ctx, "noisy-fair", Some(BACKLOG), true, None).await?;
        round_p99_ms.push((p99(&mut idle_round)?, p99(&mut fair_round)?));
        idle.extend(idle_round);
        fair.extend(fair_round);
        rates.push(rate);
    }
    let (mut unfair, _) = run(ctx, "noisy-unfair", Some(BACKLOG), false, None).await?;
    let limited_running = u32::try_from(ctx.settings.concurrency * 3 / 4).unwrap_or(u32::MAX).max(1);
    let (mut limited, _) = run(ctx, "noisy-limited", Some(BACKLOG), true, Some(limited_running)).await?;
    let spinners = beside_busy_steps(ctx, Busy::Spin).await?;
    let drawers = beside_busy_steps(ctx, Busy::Draw).await?;
    Ok(Noisy {
        backlog: BACKLOG,
        probes: PROBES,
        probe_rate: PROBE_RATE,
        rounds: ROUNDS,
        idle_ms: Summary::of(&mut idle).context("no idle job measured")?,
        fair_ms: Summary::of(&mut fair).context("no fair job measured")?,
        round_p99_ms,
        unfair_ms: Summary::of(&mut unfair).context("no job measured")?,
        limited_ms: Summary::of(&mut limited).context("no job measured")?,
        limited_running,
        fair_noisy_rate: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
        spinners,
        drawers,
    })
}

/// What A's busy steps do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Busy {
    /// Compute until their deadline (`hostile`'s `spin`).
    Spin,
    /// Draw `wasi:random` 1 MiB a call, [`DRAWS`] times (`hog`).
    Draw,
}

/// B's jobs beside A's busy steps, more of them than the pool.
async fn beside_busy_steps(ctx: &Context, busy: Busy) -> anyhow::Result<Spinners> {
    let s = &ctx.settings;
    let (label, kind, input, what) = match busy {
        Busy::Spin => ("noisy-spinners", "hostile", b"{}".to_vec(), "spinning steps"),
        Busy::Draw => (
            "noisy-drawers",
            "hog",
            format!(r#"{{"draw": {}, "times": {DRAWS}}}"#, spindle_runtime::MAX_RANDOM_DRAW).into_bytes(),
            "steps drawing randomness",
        ),
    };
    let mut scenario = ctx.open(label, s.concurrency).await?;
    let reserve = scenario.host.config().dispatcher.fair_reserve;
    let engine = scenario.host.engine.clone();
    let bytes = ctx.guest_bytes(kind)?;
    scenario.host.registry.deploy(&ctx.tenant, kind, &bytes, engine.now()).await.context("deploying A's kind")?;
    let limits = TenantLimits { max_step_timeout_ms: Some(SPIN_DEADLINE_MS), ..TenantLimits::unlimited() };
    engine.capacity().set_tenant_limits(&ctx.tenant, limits).await.context("A's step deadline")?;
    let (quiet, _) = engine.tenancy().create_tenant("quiet").await.context("creating tenant B")?;
    let noop = ctx.guest_bytes("noop")?;
    scenario.host.registry.deploy(&quiet.id, "noop", &noop, engine.now()).await.context("deploying for B")?;
    let task = ctx.progress.task(format!("noisy tenant: B beside A's {SPINNERS} {what}"), Some(SPIN_PROBES));
    engine.submission().submit_many(&ctx.tenant, requests(kind, &input, SPINNERS)).await.context("A's busy steps")?;
    scenario.start();
    // B starts once A's spinners hold the pool.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let a_running = loop {
        let running = engine.capacity().of(&ctx.tenant).await?.live.iter().map(|l| l.running).sum::<u64>();
        if running as usize >= s.concurrency.min(SPINNERS) {
            break running as usize;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "A's busy steps never filled the pool ({running} running)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / SPIN_PROBE_RATE as f64));
    interval.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut ids = Vec::new();
    for i in 0..SPIN_PROBES {
        interval.tick().await;
        let request = SubmitRequest { kind: "noop".into(), input: b"{}".to_vec(), ..Default::default() };
        ids.push(engine.submission().submit(&quiet.id, request).await.context("B's submission")?.record().job.id);
        task.set(i);
    }
    let (mut start, mut finish) = (Vec::new(), Vec::new());
    for id in ids {
        let job = wait_for(&engine, &quiet.id, id, "finish", |job| job.state.is_final()).await?;
        let created = job.created_at.as_micros();
        start.push((job.started_at.context("a started job without started_at")?.as_micros() - created) as f64 / 1000.0);
        finish
            .push((job.settled_at.context("a settled job without settled_at")?.as_micros() - created) as f64 / 1000.0);
    }
    let start_ms = Summary::of(&mut start).context("no job measured")?;
    let finish_ms = Summary::of(&mut finish).context("no job measured")?;
    task.finish(&format!("B's enqueue→start p50 {:.2} ms, p99 {:.2} ms", start_ms.p50, start_ms.p99));
    ctx.close(scenario, Duration::ZERO).await;
    Ok(Spinners {
        busy: match busy {
            Busy::Spin => "spin",
            Busy::Draw => "draw",
        },
        spinners: SPINNERS,
        deadline_ms: SPIN_DEADLINE_MS,
        pool: s.concurrency,
        reserve,
        a_running,
        probes: SPIN_PROBES,
        start_ms,
        finish_ms,
    })
}

/// B's job `id` once `reached` holds of it (within two minutes), `what` naming the moment.
async fn wait_for(
    engine: &Arc<Engine>,
    tenant: &TenantId,
    id: spindle_core::JobId,
    what: &str,
    reached: impl Fn(&spindle_core::Job) -> bool,
) -> anyhow::Result<spindle_core::Job> {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let job = engine.operations().job(tenant, id).await?.job;
        if reached(&job) {
            return Ok(job);
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "B's job {id} did not {what} within two minutes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn p99(samples: &mut [f64]) -> anyhow::Result<f64> {
    Ok(Summary::of(samples).context("no job measured")?.p99)
}

/// B's latencies beside a backlog of `backlog` jobs of A (none: idle) running at most
/// `a_running` at once, and A's rate.
async fn run(
    ctx: &Context,
    label: &str,
    backlog: Option<u64>,
    fair: bool,
    a_running: Option<u32>,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let s = &ctx.settings;
    let mut scenario = ctx.open_with(label, s.concurrency, |config| config.fair_claims = fair).await?;
    ctx.deploy(&scenario, "noop").await?;
    let engine = scenario.host.engine.clone();
    let (quiet, _) = engine.tenancy().create_tenant("quiet").await.context("creating tenant B")?;
    let noop = ctx.guest_bytes("noop")?;
    scenario.host.registry.deploy(&quiet.id, "noop", &noop, engine.now()).await.context("deploying for B")?;
    if let Some(max) = a_running {
        let limits = TenantLimits { max_running: Some(max), ..TenantLimits::unlimited() };
        engine.capacity().set_tenant_limits(&ctx.tenant, limits).await.context("limiting A")?;
    }
    let what = match (backlog, fair, a_running) {
        (None, _, _) => "idle host".to_owned(),
        (Some(_), true, None) => "fair claiming".to_owned(),
        (Some(_), false, _) => "fair claiming off".to_owned(),
        (Some(_), true, Some(max)) => format!("fair claiming, A limited to {max} running"),
    };
    let task = ctx.progress.task(format!("noisy tenant: B beside {what}"), Some(PROBES));
    // A's backlog, then a top-up that keeps it there while B is measured.
    let stop = Arc::new(AtomicBool::new(false));
    let mut topping = None;
    if let Some(backlog) = backlog {
        let mut left = backlog;
        while left > 0 {
            let take = left.min(s.submit_batch.max(1) as u64);
            engine
                .submission()
                .submit_many(&ctx.tenant, requests("noop", b"{}", take as usize))
                .await
                .context("A's backlog")?;
            left -= take;
        }
        topping = Some(tokio::spawn(top_up(engine.clone(), ctx.tenant.clone(), backlog, TOP_UP_BATCH, stop.clone())));
    }
    let settled_before = engine.counters().steps_settled.load(Ordering::Relaxed);
    scenario.start();
    let started = std::time::Instant::now();
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / PROBE_RATE as f64));
    interval.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut ids = Vec::new();
    for i in 0..PROBES {
        interval.tick().await;
        let request = SubmitRequest { kind: "noop".into(), input: b"{}".to_vec(), ..Default::default() };
        ids.push(engine.submission().submit(&quiet.id, request).await.context("B's submission")?.record().job.id);
        task.set(i);
    }
    let mut latencies = Vec::new();
    for id in ids {
        let job = wait_for(&engine, &quiet.id, id, "start", |job| job.started_at.is_some()).await?;
        let start = job.started_at.context("a started job without started_at")?;
        latencies.push((start.as_micros() - job.created_at.as_micros()) as f64 / 1000.0);
    }
    let noisy_rate = (engine.counters().steps_settled.load(Ordering::Relaxed) - settled_before) as f64
        / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    if let Some(topping) = topping {
        topping.await.context("the top-up task")??;
    }
    let summary = Summary::of(&mut latencies.clone()).context("no job measured")?;
    task.finish(&format!("B's enqueue→start p50 {:.2} ms, p99 {:.2} ms", summary.p50, summary.p99));
    ctx.close(scenario, Duration::ZERO).await;
    Ok((latencies, noisy_rate))
}

/// Keeps about `backlog` of A's jobs queued: a batch whenever that many have run.
async fn top_up(
    engine: Arc<Engine>,
    tenant: TenantId,
    backlog: u64,
    batch: usize,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let batch = batch.max(1) as u64;
    let mut submitted = backlog;
    while !stop.load(Ordering::Relaxed) {
        let settled = engine.counters().steps_settled.load(Ordering::Relaxed);
        if submitted.saturating_sub(settled) + batch <= backlog {
            engine
                .submission()
                .submit_many(&tenant, requests("noop", b"{}", batch as usize))
                .await
                .context("topping up")?;
            submitted += batch;
        } else {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    Ok(())
}
