//! Fan-out latency through a whole host: a `workflow` job whose step creates 1,000
//! `noop` children (join all), run several times, each timed from what the host
//! stored:
//!
//! - the parent's outcome (its `awaiting_children` history entry, written in the
//!   transaction that creates the children) to the last child's first step starting
//!   (the children's `started_at`): target 100 ms;
//! - the last child settling (its `settled_at`) to the parent woken (its `wait_over`
//!   entry): target 20 ms; and to the parent completed (its step called again);
//! - on PostgreSQL, the same on three hosts sharing the database: the parent woken to
//!   its step run again and completed, target 50 ms (every wake reaches a claimer).

use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde::Serialize;
use spindle_core::{HistoryEvent, JobId, JobState, Timestamp};

use super::Context;
use super::stats::Summary;
use spindle::engine::SubmitRequest;
use spindle::store::sql::{Ty, Value};

/// Children in each fan-out.
pub const CHILDREN: usize = 1_000;
/// Fan-outs measured.
pub const RUNS: usize = 10;
/// Target: the parent's outcome to every child running, ms.
pub const TARGET_ALL_RUNNING_MS: f64 = 100.0;
/// Target: the last child settled to the parent woken, ms.
pub const TARGET_PARENT_WOKEN_MS: f64 = 20.0;
/// Target on three hosts sharing one PostgreSQL database: the parent woken to its step
/// run again and completed (every wake reaches a claimer, none waits for the poll), ms.
pub const TARGET_THREE_HOSTS_WAKE_MS: f64 = 50.0;
/// Hosts of the shared-database runs.
pub const HOSTS: usize = 3;

/// The section's figures: summaries over the runs, in ms.
#[derive(Clone, Debug, Serialize)]
pub struct FanOutBench {
    /// Children per fan-out.
    pub children: usize,
    /// Fan-outs measured.
    pub runs: usize,
    /// The parent's outcome to the last child's first step starting.
    pub to_all_running_ms: Summary,
    /// The parent's outcome to the last child settling.
    pub to_all_settled_ms: Summary,
    /// The last child settling to the parent woken.
    pub last_child_to_parent_woken_ms: Summary,
    /// The last child settling to the parent completed (its step called again).
    pub last_child_to_parent_completed_ms: Summary,
    /// Children per second, outcome to all settled (the median run's).
    pub children_per_sec: f64,
    /// PostgreSQL: the same fan-outs with [`HOSTS`] hosts on one database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<SharedFanOut>,
}

/// Fan-outs on [`HOSTS`] host processes sharing one database.
#[derive(Clone, Debug, Serialize)]
pub struct SharedFanOut {
    /// Hosts.
    pub hosts: usize,
    /// The last child settling to the parent woken.
    pub last_child_to_parent_woken_ms: Summary,
    /// The parent woken to its step run again and the parent settled (each host warmed
    /// first: a host's first step of a kind loads the component).
    pub woken_to_parent_completed_ms: Summary,
}

/// One fan-out's times, ms.
struct Run {
    all_running: f64,
    all_settled: f64,
    woken: f64,
    completed: f64,
}

/// Runs the fan-outs, one after another, on a fresh host.
pub async fn measure(ctx: &Context) -> anyhow::Result<FanOutBench> {
    let mut scenario = ctx.open("fan-out", ctx.settings.concurrency).await?;
    ctx.deploy(&scenario, "workflow").await?;
    ctx.deploy(&scenario, "noop").await?;
    let task = ctx.progress.task(format!("fan-out: {RUNS} × {CHILDREN} children"), Some(RUNS as u64));
    scenario.start();
    let mut runs = Vec::with_capacity(RUNS);
    for run in 1..=RUNS {
        runs.push(one(ctx, &scenario).await?);
        task.set(run as u64);
    }
    ctx.close(scenario, Duration::from_secs(5)).await;
    let summary = |pick: fn(&Run) -> f64| {
        let mut samples: Vec<f64> = runs.iter().map(pick).collect();
        Summary::of(&mut samples).context("no runs")
    };
    let to_all_settled_ms = summary(|r| r.all_settled)?;
    let shared =
        if ctx.settings.backend == spindle::store::Backend::Postgres { Some(shared(ctx).await?) } else { None };
    let bench = FanOutBench {
        shared,
        children: CHILDREN,
        runs: RUNS,
        to_all_running_ms: summary(|r| r.all_running)?,
        children_per_sec: CHILDREN as f64 / (to_all_settled_ms.p50 / 1_000.0).max(1e-9),
        to_all_settled_ms,
        last_child_to_parent_woken_ms: summary(|r| r.woken)?,
        last_child_to_parent_completed_ms: summary(|r| r.completed)?,
    };
    task.finish(&format!(
        "all running p50 {:.0} ms, parent woken p50 {:.1} ms",
        bench.to_all_running_ms.p50, bench.last_child_to_parent_woken_ms.p50
    ));
    Ok(bench)
}

/// The fan-outs again with [`HOSTS`] `spindle serve` processes on one fresh database
/// (as the runs had them): the harness's own host submits and reads, and its
/// loops never start; every process claims.
async fn shared(ctx: &Context) -> anyhow::Result<SharedFanOut> {
    let scenario = ctx.open("fan-out-shared", 1).await?;
    ctx.deploy(&scenario, "workflow").await?;
    ctx.deploy(&scenario, "noop").await?;
    let exe = std::env::current_exe().context("finding the spindle binary to start hosts with")?;
    let task = ctx.progress.task(format!("fan-out on {HOSTS} hosts: {RUNS} × {CHILDREN} children"), Some(RUNS as u64));
    let mut hosts = Vec::with_capacity(HOSTS);
    let runs = async {
        for n in 0..HOSTS {
            let dir = scenario.fresh.dir.join(format!("host-{n}"));
            hosts.push(super::scale_out::start_host(&exe, &dir, &scenario.fresh.url, ctx).await?);
        }
        warm(ctx, &scenario).await?;
        let mut runs = Vec::with_capacity(RUNS);
        for run in 1..=RUNS {
            runs.push(one(ctx, &scenario).await?);
            task.set(run as u64);
        }
        anyhow::Ok(runs)
    }
    .await;
    for host in &mut hosts {
        let _ = host.start_kill();
        let _ = host.wait().await;
    }
    let runs = runs?;
    ctx.close(scenario, Duration::ZERO).await;
    let summary = |pick: fn(&Run) -> f64| {
        let mut samples: Vec<f64> = runs.iter().map(pick).collect();
        Summary::of(&mut samples).context("no runs")
    };
    let shared = SharedFanOut {
        hosts: HOSTS,
        last_child_to_parent_woken_ms: summary(|r| r.woken)?,
        woken_to_parent_completed_ms: summary(|r| r.completed - r.woken)?,
    };
    task.finish(&format!(
        "parent woken → completed p50 {:.1} ms, p99 {:.1} ms",
        shared.woken_to_parent_completed_ms.p50, shared.woken_to_parent_completed_ms.p99
    ));
    Ok(shared)
}

/// Runs small fan-outs, several at once, until every host process has run a
/// `workflow` step (its first loads the component, which the measured runs would
/// otherwise time as a late wake).
async fn warm(ctx: &Context, scenario: &super::Scenario) -> anyhow::Result<()> {
    let engine = scenario.host.engine.clone();
    let input = serde_json::to_vec(&serde_json::json!({ "fan_out": 2, "child_kind": "noop" }))?;
    let mut parents = Vec::new();
    for _ in 0..HOSTS * 8 {
        let request = SubmitRequest { kind: "workflow".into(), input: input.clone(), ..Default::default() };
        parents.push(engine.submission().submit(&ctx.tenant, request).await?.record().job.id);
    }
    let started = Instant::now();
    for parent in parents {
        while !engine.operations().job(&ctx.tenant, parent).await?.job.state.is_final() {
            ensure!(started.elapsed() < Duration::from_secs(120), "the warm-up fan-outs did not finish");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// One fan-out of [`CHILDREN`], timed from the rows it left.
async fn one(ctx: &Context, scenario: &super::Scenario) -> anyhow::Result<Run> {
    let engine = scenario.host.engine.clone();
    let input = serde_json::json!({ "fan_out": CHILDREN, "child_kind": "noop" });
    let request = SubmitRequest { kind: "workflow".into(), input: serde_json::to_vec(&input)?, ..Default::default() };
    let parent = engine.submission().submit(&ctx.tenant, request).await?.record().job.id;
    let started = Instant::now();
    let mut changes = engine.subscribe();
    let record = loop {
        let record = engine.operations().job(&ctx.tenant, parent).await?;
        if record.job.state.is_final() {
            break record;
        }
        ensure!(started.elapsed() < Duration::from_secs(600), "the fan-out did not finish in 10 minutes");
        // Woken by the parent's own state changes (reading the parent at each child's
        // would load the host it measures); the timeout only bounds a missed one.
        let _ = tokio::time::timeout(Duration::from_millis(200), async {
            while let Ok(change) = changes.recv().await {
                if change.job == parent {
                    break;
                }
            }
        })
        .await;
    };
    ensure!(record.job.state == JobState::Succeeded, "the parent ended {}: {:?}", record.job.state, record.job.failure);
    let history =
        engine.operations().history(&ctx.tenant, parent).await?.context("the parent kind keeps a full record")?;
    let at = |wanted: fn(&HistoryEvent) -> bool| history.iter().find(|e| wanted(&e.event)).map(|e| e.at);
    let outcome_at =
        at(|e| matches!(e, HistoryEvent::AwaitingChildren { .. })).context("the parent's fan-out in its history")?;
    let woken_at = at(|e| matches!(e, HistoryEvent::WaitOver { .. })).context("the parent's wake in its history")?;

    let completed_at = record.job.settled_at.context("the parent's settlement")?;
    let (children, last_started, last_settled) = children_times(scenario, parent).await?;
    ensure!(children == CHILDREN, "{children} of {CHILDREN} children succeeded");
    let ms = |from: Timestamp, to: Timestamp| (to.as_micros() - from.as_micros()) as f64 / 1_000.0;
    Ok(Run {
        all_running: ms(outcome_at, last_started),
        all_settled: ms(outcome_at, last_settled),
        woken: ms(last_settled, woken_at),
        completed: ms(last_settled, completed_at),
    })
}

/// How many of `parent`'s children succeeded, when the last one's first step started
/// (jobs keep `started_at` in the machine, in no column) and when the last one settled.
async fn children_times(scenario: &super::Scenario, parent: JobId) -> anyhow::Result<(usize, Timestamp, Timestamp)> {
    let rows = scenario
        .host
        .store
        .db()
        .fetch(
            "SELECT machine, settled_at FROM jobs WHERE parent_id = $1 AND state = 'succeeded'",
            vec![Value::from(parent.to_string())],
            &[Ty::Text, Ty::OptInt],
        )
        .await?;
    let (mut started, mut settled) = (0i64, 0i64);
    for row in &rows {
        let machine: serde_json::Value = serde_json::from_str(&row.text(0, "bench row")?)?;
        started = started.max(machine["started_at"].as_i64().context("a child's start")?);
        settled = settled.max(row.opt_int(1, "bench row")?.context("a child's settlement")?);
    }
    Ok((rows.len(), Timestamp::from_micros(started), Timestamp::from_micros(settled)))
}

/// The section's rows, each beside its target.
pub fn rows(f: &FanOutBench) -> Vec<(String, String)> {
    let both = |s: &Summary| format!("p50 {:.1} ms, p99 {:.1} ms", s.p50, s.p99);
    let against = |s: &Summary, target: f64| {
        let verdict = if s.p99 <= target { "met" } else { "missed" };
        format!("{} (target {target:.0} ms: {verdict})", both(s))
    };
    let mut rows = vec![
        ("parent's outcome → every child running".into(), against(&f.to_all_running_ms, TARGET_ALL_RUNNING_MS)),
        ("parent's outcome → every child final".into(), both(&f.to_all_settled_ms)),
        ("last child final → parent woken".into(), against(&f.last_child_to_parent_woken_ms, TARGET_PARENT_WOKEN_MS)),
        ("last child final → parent completed".into(), both(&f.last_child_to_parent_completed_ms)),
        ("children per second (median run)".into(), format!("{:.0}", f.children_per_sec)),
    ];
    if let Some(shared) = &f.shared {
        rows.push((
            format!("{} hosts: last child final → parent woken", shared.hosts),
            both(&shared.last_child_to_parent_woken_ms),
        ));
        rows.push((
            format!("{} hosts: parent woken → parent completed", shared.hosts),
            against(&shared.woken_to_parent_completed_ms, TARGET_THREE_HOSTS_WAKE_MS),
        ));
    }
    rows
}
