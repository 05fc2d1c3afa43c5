//! `spindle bench`: what a host does per second and per job, measured against a fresh
//! database for every scenario, on SQLite or PostgreSQL; and `spindle demo` ([`demo`]),
//! Spindle's main job on the embedded default. A crate of their own: the host's crate
//! carries neither, nor their progress bars.
//!
//! Each section measures one thing and returns plain figures; [`report`] prints them
//! (a table, or JSON) and checks them against the targets. Nothing here changes how the
//! engine, store, dispatcher or sandbox behave: the harness drives a real [`Host`]
//! through its public API and reads what it stores.
//!
//! | section | what it measures |
//! |---|---|
//! | [`throughput`] | jobs/s of one-step (`throughput1`) and three-step (`throughput3`) no-op jobs, and of one-step jobs of a lean kind (`throughput1-lean`) |
//! | [`validation`] | bulk submission to a kind without and with an input schema |
//! | [`submit`] | 64 clients submitting one job per call to one tenant |
//! | [`wal`] | PostgreSQL: WAL bytes, index entries and heap writes per one-step job (`pg_walinspect`) |
//! | [`scale_out`] | PostgreSQL: one-step jobs/s with 1, 2 and 3 `spindle serve` hosts on one database |
//! | [`latency`] | enqueue→start p50/p99 at a steady rate, from the stored `created_at` and `started_at` |
//! | [`sandbox`] | instantiate + call of a no-op step, pooling on and off |
//! | [`compile`] | compile time and cache-load time of each example component |
//! | [`memory`] | resident memory with 10,000 queued and 100 running jobs |
//! | [`claim`] | time to claim the next job with 1,000 vs 1,000,000 queued |
//! | [`phases`] | where one job's time goes: claim, sandbox, settle, one worker |
//! | [`outbound`] | one outbound HTTP call per step: overhead over a bare client, jobs/s |
//! | [`fan_out`] | one step's 1,000 children, ten times: outcome to all running, last child to parent woken (p50/p99 beside the targets) |

pub mod claim;
pub mod command;
pub mod compile;
pub mod database;
pub mod demo;
mod demo_services;
pub mod fan_out;
pub mod languages;
pub mod latency;
pub mod machine;
pub mod memory;
pub mod noisy;
pub mod outbound;
pub mod phases;
pub mod progress;
pub mod report;
pub mod retention;
pub mod sandbox;
pub mod scale_out;
pub mod sql_submit;
pub mod stats;
pub mod submit;
pub mod throughput;
pub mod validation;
pub mod wal;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;
use spindle_core::JobState;

use database::{Databases, Fresh};
use progress::{Progress, Task};
use report::Report;
use spindle::dispatcher::Dispatcher;
use spindle::engine::{Engine, SubmitRequest};
use spindle::host::{Host, HostConfig};
use spindle::reconciler::Reconciler;
use spindle::store::sql::{Ty, Value};
use spindle::store::{Backend, TenantId};
use spindle_core::Record;

/// A part of the benchmark, for `--only`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    /// Resident memory with 10,000 queued and 100 running jobs. Runs first, before the
    /// other sections have grown the process's heap.
    Memory,
    /// Per-step sandbox overhead, pooling on and off.
    Sandbox,
    /// Compile and cache-load time of each example component.
    Compile,
    /// Where one job's time goes (claim, sandbox, settle), one worker.
    Phases,
    /// Throughput of one-step no-op jobs.
    Throughput1,
    /// Throughput of three-step no-op jobs.
    Throughput3,
    /// Throughput of one-step no-op jobs of a lean kind (`record: lean`: the job row
    /// alone, no step or history rows).
    #[value(name = "throughput1-lean")]
    #[serde(rename = "throughput1-lean")]
    Throughput1Lean,
    /// Bulk submission (host stopped) to a kind without and with an input schema.
    Validation,
    /// 64 clients submitting one job per call to one tenant (host stopped).
    ConcurrentSubmit,
    /// PostgreSQL: what one-step jobs write to the WAL, by record type, per job.
    Wal,
    /// PostgreSQL: aggregate throughput of 1, 2 and 3 host processes on one database.
    ScaleOut,
    /// Enqueue→start latency at a steady rate.
    Latency,
    /// Claim latency with few and many queued jobs.
    Claim,
    /// One outbound HTTP call per step: the overhead over a bare client, and jobs/s.
    Outbound,
    /// One step fanning out 1,000 children and joining them, ten times.
    FanOut,
    /// One tenant's backlog of 100,000 jobs beside another's steady trickle, fair claiming
    /// on and off.
    NoisyTenant,
    /// PostgreSQL: submitting from an application's own transaction (`spindle.submit`):
    /// commit → admitted at a steady rate, and in bulk beside the `POST /v1/jobs` path.
    SqlSubmit,
    /// The database over a million jobs with retention (not in the default set: run it
    /// with `--only retention`).
    Retention,
    /// The greet kind in each guest language: size, deploy and cache-load time, first
    /// and steady step, host memory per loaded version (not in the default set: run it
    /// with `--only languages`, alone, so that the resident set is its own).
    Languages,
}

impl Section {
    /// Every section, in the order they run.
    pub fn all() -> Vec<Self> {
        vec![
            Self::Memory,
            Self::Sandbox,
            Self::Compile,
            Self::Phases,
            Self::Throughput1,
            Self::Throughput3,
            Self::Throughput1Lean,
            Self::Validation,
            Self::ConcurrentSubmit,
            Self::Wal,
            Self::ScaleOut,
            Self::Latency,
            Self::Claim,
            Self::Outbound,
            Self::FanOut,
            Self::NoisyTenant,
            Self::SqlSubmit,
        ]
    }
}

/// What to measure and how hard.
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    /// The store's backend.
    #[serde(serialize_with = "report::backend_name")]
    pub backend: Backend,
    /// PostgreSQL: the admin URL fresh databases are created through.
    #[serde(skip)]
    pub database_url: Option<String>,
    /// Jobs per throughput run.
    pub jobs: usize,
    /// The dispatcher's concurrency (steps running at once).
    pub concurrency: usize,
    /// Jobs per `submit_many` call (one transaction) when submitting in bulk.
    pub submit_batch: usize,
    /// Jobs per second of the latency probe.
    pub latency_rate: u32,
    /// Seconds the latency probe measures.
    pub latency_secs: u64,
    /// Seconds of warm-up before it measures.
    pub warmup_secs: u64,
    /// Jobs the `retention` section runs.
    pub retention_jobs: usize,
    /// Queue depths the claim section measures at.
    pub queued: Vec<u64>,
    /// Sections to run.
    pub sections: Vec<Section>,
    /// Where the built guest components are.
    pub guests: PathBuf,
    /// Where scenario directories go (SQLite files, caches).
    pub work_dir: PathBuf,
    /// The `languages` section's one language, when it runs in a process of its own.
    pub language: Option<String>,
    /// Versions the `languages` section's shared host deploys (0: none).
    pub shared_versions: usize,
}

/// What every section shares: the settings, the databases, a compiled-component cache.
#[derive(Debug)]
pub struct Context {
    /// The settings.
    pub settings: Settings,
    /// Fresh databases.
    pub databases: Databases,
    /// The compiled-component cache the scenarios' hosts share (so a scenario does not
    /// recompile `noop`; compile time is the `compile` section's business).
    cache_dir: PathBuf,
    /// The tenant jobs run under.
    pub tenant: TenantId,
    /// Progress output.
    pub progress: Progress,
}

/// A host on a fresh database.
///
/// The scenario starts and stops the host's background loops itself, exactly as
/// [`Host`] does (a [`Dispatcher`] with the host's dispatcher settings and its database
/// for `LISTEN`, a [`Reconciler`] with its policy), so that a section can start them at
/// the moment it chooses and the harness depends only on their public constructors.
#[derive(Debug)]
pub struct Scenario {
    /// The host (its loops not started).
    pub host: Host,
    fresh: Fresh,
    dispatcher: Option<Dispatcher>,
    reconciler: Option<Reconciler>,
}

impl Scenario {
    /// Its database's URL.
    pub fn url(&self) -> &str {
        &self.fresh.url
    }

    /// Starts dispatching and reconciling (what `Host::start` does).
    pub fn start(&mut self) {
        let config = self.host.config();
        if self.dispatcher.is_none() {
            self.dispatcher = Some(Dispatcher::start(self.host.engine.clone(), config.dispatcher.clone()));
        }
        if self.reconciler.is_none() {
            self.reconciler = Some(Reconciler::start(self.host.engine.clone(), config.reconcile));
        }
    }
}

impl Context {
    /// A host with the default configuration but `concurrency`, on a fresh database.
    pub async fn open(&self, label: &str, concurrency: usize) -> anyhow::Result<Scenario> {
        self.open_with(label, concurrency, |_| {}).await
    }

    /// [`open`](Self::open), the configuration changed by `tweak` first.
    pub async fn open_with(
        &self,
        label: &str,
        concurrency: usize,
        tweak: impl FnOnce(&mut HostConfig),
    ) -> anyhow::Result<Scenario> {
        let fresh = self.databases.fresh(label).await?;
        let mut config = HostConfig::in_dir(&fresh.dir);
        config.database_url = Some(fresh.url.clone());
        config.dispatcher.concurrency = concurrency;
        config.sandbox.cache_dir = Some(self.cache_dir.clone());
        tweak(&mut config);
        let host = Host::open(config).await.with_context(|| format!("opening a host on {}", fresh.url))?;
        Ok(Scenario { host, fresh, dispatcher: None, reconciler: None })
    }

    /// Deploys the example kind `kind` from the guests directory.
    pub async fn deploy(&self, scenario: &Scenario, kind: &str) -> anyhow::Result<()> {
        self.deploy_keeping(scenario, kind, Record::Full).await
    }

    /// [`deploy`](Self::deploy), the kind keeping `record` of its jobs.
    pub async fn deploy_keeping(&self, scenario: &Scenario, kind: &str, record: Record) -> anyhow::Result<()> {
        let bytes = self.guest_bytes(kind)?;
        let now = scenario.host.engine.now();
        let deployment = spindle::capabilities::Deployment { record, ..Default::default() };
        scenario
            .host
            .registry
            .deploy_with(&self.tenant, kind, &bytes, &deployment, now)
            .await
            .with_context(|| format!("deploying {kind}"))?;
        Ok(())
    }

    /// The built component of `kind`.
    pub fn guest_bytes(&self, kind: &str) -> anyhow::Result<Vec<u8>> {
        let path = self.settings.guests.join(format!("{kind}.wasm"));
        std::fs::read(&path).with_context(|| format!("reading {} (build it with `cargo xtask guests`)", path.display()))
    }

    /// Shuts the scenario's host down (handing back what still runs after `grace`) and
    /// drops its database.
    pub async fn close(&self, scenario: Scenario, grace: Duration) {
        // What `Host::shutdown` does: the reconciler, then the dispatcher, then the store.
        if let Some(reconciler) = scenario.reconciler {
            reconciler.stop().await;
        }
        if let Some(dispatcher) = scenario.dispatcher {
            dispatcher.shutdown(grace).await;
        }
        scenario.host.store.db().close().await;
        drop(scenario.host);
        self.databases.drop_fresh(scenario.fresh).await;
    }
}

/// `n` submissions of `kind` with input `input`.
pub fn requests(kind: &str, input: &[u8], n: usize) -> Vec<SubmitRequest> {
    (0..n).map(|_| SubmitRequest { kind: kind.into(), input: input.to_vec(), ..Default::default() }).collect()
}

/// Submits `n` jobs of `kind` with `input`, in transactions of the settings'
/// `submit_batch` jobs one after the other, updating `task` with `progress_of()` between
/// transactions.
pub async fn submit_bulk(
    ctx: &Context,
    engine: &Engine,
    kind: &str,
    input: &[u8],
    n: usize,
    task: &Task,
    progress_of: impl Fn() -> u64,
) -> anyhow::Result<()> {
    let mut left = n;
    while left > 0 {
        let take = left.min(ctx.settings.submit_batch.max(1));
        engine.submission().submit_many(&ctx.tenant, requests(kind, input, take)).await.context("submitting")?;
        left -= take;
        task.set(progress_of());
    }
    Ok(())
}

/// Waits until the engine has settled `target` step outcomes, polling its counter every
/// millisecond; fails after `timeout`.
pub async fn wait_settled(engine: &Arc<Engine>, target: u64, timeout: Duration, task: &Task) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let settled = engine.counters().steps_settled.load(std::sync::atomic::Ordering::Relaxed);
        task.set(settled);
        if settled >= target {
            return Ok(());
        }
        if started.elapsed() > timeout {
            anyhow::bail!("only {settled} of {target} step outcomes settled within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// How many jobs are in `state`.
pub async fn count_in_state(host: &Host, state: JobState) -> anyhow::Result<i64> {
    let rows = host
        .store
        .db()
        .fetch("SELECT COUNT(*) FROM jobs WHERE state = $1", vec![Value::from(state.as_str())], &[Ty::Int])
        .await?;
    Ok(rows.first().map_or(0, |r| r.int(0, "bench row").expect("a decodable row")))
}

/// Runs the sections `settings` asks for and gathers their figures.
pub async fn run(settings: Settings, progress: Progress) -> anyhow::Result<Report> {
    let databases = Databases::new(settings.backend, settings.database_url.clone(), &settings.work_dir)?;
    let cache_dir = settings.work_dir.join("artifacts");
    let ctx = Context { settings, databases, cache_dir, tenant: TenantId::default_tenant(), progress };
    let result = run_sections(&ctx).await;
    ctx.databases.cleanup().await;
    let _ = std::fs::remove_dir_all(&ctx.cache_dir);
    result
}

async fn run_sections(ctx: &Context) -> anyhow::Result<Report> {
    let mut report = Report::new(ctx.settings.clone(), machine::Machine::current());
    {
        // The durability in force, as the database reports it.
        let probe = ctx.open("settings", 1).await?;
        let (durability, server) = database::durability(probe.host.store.db()).await?;
        report.durability = durability;
        report.server = server;
        ctx.close(probe, Duration::ZERO).await;
    }
    let mut sections = ctx.settings.sections.clone();
    sections.sort();
    sections.dedup();
    for section in sections {
        // Each section's peak is its own: the kernel's high-water mark starts again here.
        let reset = stats::reset_peak();
        match section {
            Section::Memory => report.memory = Some(memory::measure(ctx).await?),
            Section::Sandbox => report.sandbox = sandbox::measure(ctx).await?,
            Section::Compile => report.compile = compile::measure(ctx).await?,
            Section::Phases => report.phases = Some(phases::measure(ctx).await?),
            Section::Throughput1 => report.throughput1 = Some(throughput::measure(ctx, "noop", 1, Record::Full).await?),
            Section::Throughput3 => {
                report.throughput3 = Some(throughput::measure(ctx, "noop3", 3, Record::Full).await?)
            }
            Section::Throughput1Lean => {
                report.throughput1_lean = Some(throughput::measure(ctx, "noop", 1, Record::Lean).await?);
            }
            Section::Validation => report.validation = Some(validation::measure(ctx).await?),
            Section::ConcurrentSubmit => report.concurrent_submit = Some(submit::measure(ctx).await?),
            Section::Wal => report.wal = wal::measure(ctx).await?,
            Section::ScaleOut => report.scale_out = scale_out::measure(ctx).await?,
            Section::Latency => report.latency = Some(latency::measure(ctx).await?),
            Section::Claim => report.claim = claim::measure(ctx).await?,
            Section::Outbound => report.outbound = Some(outbound::measure(ctx).await?),
            Section::FanOut => report.fan_out = Some(fan_out::measure(ctx).await?),
            Section::NoisyTenant => report.noisy_tenant = Some(noisy::measure(ctx).await?),
            Section::SqlSubmit => report.sql_submit = sql_submit::measure(ctx).await?,
            Section::Retention => {
                report.retention = retention::measure(ctx, ctx.settings.retention_jobs).await?;
            }
            Section::Languages => (report.languages, report.shared_host) = languages::measure(ctx).await?,
        }
        if let Some(peak) = stats::peak_rss_mib() {
            report.peaks.push(report::SectionPeak { section, peak_rss_mib: peak, since_section_start: reset });
        }
    }
    Ok(report)
}
