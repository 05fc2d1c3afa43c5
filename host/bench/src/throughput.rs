//! End-to-end throughput of trivial jobs: `noop` (one step) or `noop3` (three steps),
//! of a kind that keeps a full record or a lean one (the job row alone).
//!
//! Two runs on fresh databases, both durable (the backend's settings as reported):
//!
//! - **live**: the host runs; the clock starts, `jobs` are submitted in bulk
//!   (`submit_many`, `submit_batch` jobs per transaction) while the dispatcher already
//!   works, and the clock stops when the last step outcome has committed. This is the
//!   headline figure: jobs/s from bulk submission to all settled.
//! - **drain**: the jobs are submitted with the host stopped (timed: the enqueue rate),
//!   then the host starts and the clock runs until all have settled (the drain rate,
//!   the figure graphile-worker's own performance test reports).
//!
//! On SQLite the one-step kind runs live a second time at `synchronous=FULL` (a commit
//! also survives an OS crash), so the price of that durability is printed beside the
//! default's figure.
//!
//! "Settled" is read from the engine's `steps_settled` counter, which it bumps after each
//! outcome commits; the run then checks in the database that every job succeeded.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::ensure;
use serde::Serialize;
use spindle_core::{JobState, Record};

use super::{Context, count_in_state, stats, submit_bulk, wait_settled};
use spindle::store::{Backend, SqliteSync};

/// One throughput measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Throughput {
    /// The kind (`noop` or `noop3`).
    pub kind: String,
    /// What the kind keeps of its jobs (`full` or `lean`).
    pub record: String,
    /// Steps per job.
    pub steps_per_job: u64,
    /// Jobs per run.
    pub jobs: usize,
    /// The dispatcher's concurrency.
    pub concurrency: usize,
    /// Submission while the host runs.
    pub live: LiveRun,
    /// SQLite, one-step jobs: the live run again at `synchronous=FULL`.
    pub live_full: Option<LiveRun>,
    /// Submission first, then drain.
    pub drain: DrainRun,
}

/// The live run.
#[derive(Clone, Debug, Serialize)]
pub struct LiveRun {
    /// Seconds until the last submission committed.
    pub submit_secs: f64,
    /// Seconds until the last outcome committed.
    pub total_secs: f64,
    /// Jobs per second, bulk submission to all settled.
    pub jobs_per_sec: f64,
    /// Mean time inside the sandbox per step during the run, µs (the engine's counter).
    pub sandbox_us_per_step: f64,
    /// CPU the host process used, in percent of one core (100 = one core busy).
    pub host_cpu_percent: Option<f64>,
    /// Claim transactions: how many, jobs per transaction, mean milliseconds each.
    pub claims: Transactions,
    /// Group commits of step outcomes: how many, writes per transaction, mean ms each.
    pub group_commits: Transactions,
    /// Next jobs claimed inside those group commits (a worker's next job shares its
    /// previous job's commit).
    pub claimed_in_commits: u64,
}

/// How a kind of transaction fared over a run: where a saturated pipeline spends its time.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Transactions {
    /// Transactions run.
    pub count: u64,
    /// Mean jobs (or writes) per transaction.
    pub per_transaction: f64,
    /// Mean milliseconds per transaction.
    pub mean_ms: f64,
    /// Their total time as a share of the run (1.0: one always in flight).
    pub busy: f64,
}

impl Transactions {
    fn of(count: u64, items: u64, micros: u64, run_secs: f64) -> Self {
        let n = count.max(1) as f64;
        Self {
            count,
            per_transaction: items as f64 / n,
            mean_ms: micros as f64 / n / 1000.0,
            busy: micros as f64 / 1e6 / run_secs.max(1e-9),
        }
    }
}

/// The drain run.
#[derive(Clone, Debug, Serialize)]
pub struct DrainRun {
    /// Seconds to submit every job (host stopped).
    pub enqueue_secs: f64,
    /// Jobs submitted per second.
    pub enqueue_jobs_per_sec: f64,
    /// Seconds from starting the host to all settled.
    pub drain_secs: f64,
    /// Jobs settled per second while draining.
    pub drain_jobs_per_sec: f64,
    /// Jobs per second, submission start to all settled.
    pub end_to_end_jobs_per_sec: f64,
}

/// Measures `kind`, whose jobs have `steps_per_job` steps, deployed keeping `record`.
pub async fn measure(ctx: &Context, kind: &str, steps_per_job: u64, record: Record) -> anyhow::Result<Throughput> {
    let run = Run { kind, steps_per_job, record };
    let live_full = if ctx.databases.backend() == Backend::Sqlite && steps_per_job == 1 {
        Some(live(ctx, &run, SqliteSync::Full).await?)
    } else {
        None
    };
    let live = live(ctx, &run, SqliteSync::Normal).await?;
    let drain = drain(ctx, &run).await?;
    Ok(Throughput {
        kind: kind.into(),
        record: record.as_str().into(),
        steps_per_job,
        jobs: ctx.settings.jobs,
        concurrency: ctx.settings.concurrency,
        live,
        live_full,
        drain,
    })
}

/// A generous bound: at 100 steps/s the run would still finish.
fn timeout(steps: u64) -> Duration {
    Duration::from_secs(60 + steps / 100)
}

/// What a run measures: the kind, its steps per job and its record.
struct Run<'a> {
    kind: &'a str,
    steps_per_job: u64,
    record: Record,
}

impl Run<'_> {
    /// The kind as progress lines and scenario names show it.
    fn label(&self) -> String {
        match self.record {
            Record::Full => self.kind.to_owned(),
            Record::Lean => format!("{} (lean)", self.kind),
        }
    }
}

async fn live(ctx: &Context, run: &Run<'_>, sync: SqliteSync) -> anyhow::Result<LiveRun> {
    let Run { kind, steps_per_job, record } = *run;
    let jobs = ctx.settings.jobs;
    let target = jobs as u64 * steps_per_job;
    let label = match sync {
        SqliteSync::Normal => "live",
        SqliteSync::Full => "live, synchronous=FULL",
    };
    let name = run.label();
    let mut scenario = ctx
        .open_with(&format!("{kind}-{}-{label}", record.as_str()), ctx.settings.concurrency, |c| c.sqlite_sync = sync)
        .await?;
    ctx.deploy_keeping(&scenario, kind, record).await?;
    scenario.start();
    let engine = scenario.host.engine.clone();
    let task = ctx.progress.task(format!("{name} × {jobs}: {label}"), Some(target));
    let cpu_before = stats::process_cpu_secs();
    let started = Instant::now();
    let settled = || engine.counters().steps_settled.load(Ordering::Relaxed);
    submit_bulk(ctx, &engine, kind, b"{}", jobs, &task, settled).await?;
    let submit_secs = started.elapsed().as_secs_f64();
    wait_settled(&engine, target, timeout(target), &task).await?;
    let total_secs = started.elapsed().as_secs_f64();
    let cpu = stats::process_cpu_secs().zip(cpu_before).map(|(after, before)| (after - before) / total_secs * 100.0);
    let counters = engine.counters();
    let sandbox_us_per_step = counters.step_micros.load(Ordering::Relaxed) as f64
        / counters.steps_settled.load(Ordering::Relaxed).max(1) as f64;
    let succeeded = count_in_state(&scenario.host, JobState::Succeeded).await?;
    ensure!(succeeded == jobs as i64, "{succeeded} of {jobs} {kind} jobs succeeded");
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let run = LiveRun {
        submit_secs,
        total_secs,
        jobs_per_sec: jobs as f64 / total_secs,
        sandbox_us_per_step,
        host_cpu_percent: cpu,
        claims: Transactions::of(
            load(&counters.claims),
            load(&counters.claimed_jobs),
            load(&counters.claim_micros),
            total_secs,
        ),
        group_commits: Transactions::of(
            load(&counters.flushes),
            load(&counters.flushed_writes),
            load(&counters.flush_micros),
            total_secs,
        ),
        claimed_in_commits: load(&counters.claimed_in_commits),
    };
    task.finish(&format!("{:.0} jobs/s", run.jobs_per_sec));
    ctx.close(scenario, Duration::from_secs(5)).await;
    Ok(run)
}

async fn drain(ctx: &Context, run: &Run<'_>) -> anyhow::Result<DrainRun> {
    let Run { kind, steps_per_job, record } = *run;
    let jobs = ctx.settings.jobs;
    let target = jobs as u64 * steps_per_job;
    let mut scenario = ctx.open(&format!("{kind}-{}-drain", record.as_str()), ctx.settings.concurrency).await?;
    ctx.deploy_keeping(&scenario, kind, record).await?;
    let engine = scenario.host.engine.clone();
    let task = ctx.progress.task(format!("{} × {jobs}: enqueue, then drain", run.label()), Some(target));
    let started = Instant::now();
    let mut submitted = 0u64;
    let mut left = jobs;
    while left > 0 {
        let take = left.min(ctx.settings.submit_batch.max(1));
        engine.submission().submit_many(&ctx.tenant, super::requests(kind, b"{}", take)).await?;
        left -= take;
        submitted += take as u64;
        task.note(format!("{submitted} submitted"));
    }
    let enqueue_secs = started.elapsed().as_secs_f64();
    let drain_started = Instant::now();
    scenario.start();
    wait_settled(&engine, target, timeout(target), &task).await?;
    let drain_secs = drain_started.elapsed().as_secs_f64();
    let succeeded = count_in_state(&scenario.host, JobState::Succeeded).await?;
    ensure!(succeeded == jobs as i64, "{succeeded} of {jobs} {kind} jobs succeeded");
    let run = DrainRun {
        enqueue_secs,
        enqueue_jobs_per_sec: jobs as f64 / enqueue_secs,
        drain_secs,
        drain_jobs_per_sec: jobs as f64 / drain_secs,
        end_to_end_jobs_per_sec: jobs as f64 / (enqueue_secs + drain_secs),
    };
    task.finish(&format!("enqueue {:.0} jobs/s, drain {:.0} jobs/s", run.enqueue_jobs_per_sec, run.drain_jobs_per_sec));
    ctx.close(scenario, Duration::from_secs(5)).await;
    Ok(run)
}
