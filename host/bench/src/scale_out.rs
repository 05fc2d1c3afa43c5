//! Scale-out: one, two and three hosts on one PostgreSQL database, each a `spindle
//! serve` process of its own (its own runtime, pool, dispatcher, reconciler, sandbox).
//!
//! For each count, on a fresh database: deploy `noop`, start the hosts and wait until
//! each is listening, then submit `jobs` in bulk from the harness (as a client would, the
//! hosts already working) and wait until all have succeeded. The run's time is read
//! from the database, from the clock just before the first submission to the last
//! `settled_at`, so how often the harness polls does not enter the figure. Every host
//! runs the settings' concurrency, as a user adding hosts would. On a machine with
//! fewer cores than hosts they share the CPU: the claim is that aggregate throughput
//! does not collapse as hosts are added, not that it scales.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use super::{Context, submit_bulk};
use spindle::store::Backend;
use spindle::store::sql::{Db, Ty, Value};

/// Host counts measured, in order.
const HOST_COUNTS: [usize; 3] = [1, 2, 3];

/// The section's figures.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleOut {
    /// Jobs per run.
    pub jobs: usize,
    /// Each host's dispatcher concurrency.
    pub concurrency_per_host: usize,
    /// One run per host count.
    pub runs: Vec<HostsRun>,
}

/// One host count's run.
#[derive(Clone, Debug, Serialize)]
pub struct HostsRun {
    /// Hosts running.
    pub hosts: usize,
    /// Seconds from the first submission to the last settlement.
    pub secs: f64,
    /// Aggregate jobs per second.
    pub jobs_per_sec: f64,
    /// This run's jobs/s over the one-host run's.
    pub vs_one_host: f64,
}

/// Measures every host count; `None` on SQLite (one file has one writer: a second host
/// on it is not a deployment Spindle offers).
pub async fn measure(ctx: &Context) -> anyhow::Result<Option<ScaleOut>> {
    if ctx.databases.backend() != Backend::Postgres {
        return Ok(None);
    }
    let exe = std::env::current_exe().context("finding the spindle binary to start hosts with")?;
    let mut runs: Vec<HostsRun> = Vec::new();
    for hosts in HOST_COUNTS {
        let (secs, jobs) = run(ctx, &exe, hosts).await?;
        let jobs_per_sec = jobs as f64 / secs.max(1e-9);
        let one = runs.first().map_or(jobs_per_sec, |r| r.jobs_per_sec);
        runs.push(HostsRun { hosts, secs, jobs_per_sec, vs_one_host: jobs_per_sec / one.max(1e-9) });
    }
    Ok(Some(ScaleOut { jobs: ctx.settings.jobs, concurrency_per_host: ctx.settings.concurrency, runs }))
}

/// One run with `hosts` host processes: its seconds and jobs.
async fn run(ctx: &Context, exe: &Path, hosts: usize) -> anyhow::Result<(f64, usize)> {
    let jobs = ctx.settings.jobs;
    // The harness's own host submits and reads; its loops never start.
    let scenario = ctx.open(&format!("scale-out-{hosts}"), 1).await?;
    ctx.deploy(&scenario, "noop").await?;
    let url = scenario.fresh.url.clone();
    let task = ctx.progress.task(format!("noop × {jobs}, {hosts} host(s)"), Some(jobs as u64));
    let mut children = Vec::with_capacity(hosts);
    let result = async {
        for i in 0..hosts {
            children.push(start_host(exe, &scenario.fresh.dir.join(format!("host-{i}")), &url, ctx).await?);
        }
        let db = scenario.host.store.db().clone();
        let engine = scenario.host.engine.clone();
        let started_at = engine.now().as_micros();
        submit_bulk(ctx, &engine, "noop", b"{}", jobs, &task, || 0).await?;
        let deadline = Instant::now() + Duration::from_secs(60 + jobs as u64 / 100);
        loop {
            let (succeeded, other_settled) = settled(&db).await?;
            task.set(succeeded as u64);
            ensure!(other_settled == 0, "{other_settled} noop jobs settled other than succeeded");
            if succeeded >= jobs as i64 {
                break;
            }
            if Instant::now() > deadline {
                bail!("only {succeeded} of {jobs} jobs succeeded on {hosts} host(s) in time");
            }
            for child in &mut children {
                if let Some(status) = child.try_wait()? {
                    bail!("a host exited during the run ({status}); its log is in {}", scenario.fresh.dir.display());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let rows =
            db.fetch("SELECT MAX(settled_at) FROM jobs WHERE kind = $1", vec![Value::from("noop")], &[Ty::Int]).await?;
        let last = rows.first().map_or(started_at, |r| r.int(0, "bench row").expect("a decodable row"));
        anyhow::Ok((last - started_at) as f64 / 1e6)
    }
    .await;
    for child in &mut children {
        // The work is done and durable; how a host dies no longer matters (the kill -9
        // tests show it is safe at any moment).
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    let secs = result?;
    task.finish(&format!("{:.0} jobs/s", jobs as f64 / secs.max(1e-9)));
    ctx.close(scenario, Duration::ZERO).await;
    Ok((secs, jobs))
}

/// Starts `spindle serve` on `url` with `dir` as its data directory and waits until it
/// listens; its log goes to `dir/host.log`.
pub(crate) async fn start_host(exe: &Path, dir: &Path, url: &str, ctx: &Context) -> anyhow::Result<Child> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let log = std::fs::File::create(dir.join("host.log")).context("creating a host's log")?;
    let mut child = Command::new(exe)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .arg("--database-url")
        .arg(url)
        .args(["--listen", "127.0.0.1:0"])
        .arg("--concurrency")
        .arg(ctx.settings.concurrency.to_string())
        // One operator token for all: each host registers the token it is given.
        .env("SPINDLE_OPERATOR_TOKEN", "bench-scale-out-operator-token")
        .env_remove("SPINDLE_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {} serve", exe.display()))?;
    let stdout = child.stdout.take().context("a host's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            if line.starts_with("spindle listening on") {
                return anyhow::Ok(true);
            }
        }
        anyhow::Ok(false)
    })
    .await;
    match ready {
        Ok(Ok(true)) => {}
        _ => bail!("a host did not start; its log is {}", dir.join("host.log").display()),
    }
    // Keep reading, so that a full pipe never stalls the host.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(child)
}

/// Jobs succeeded, and jobs settled in any other state.
async fn settled(db: &Db) -> anyhow::Result<(i64, i64)> {
    let rows = db
        .fetch(
            "SELECT COALESCE(SUM(CASE WHEN state = 'succeeded' THEN 1 ELSE 0 END), 0)::bigint, \
             COALESCE(SUM(CASE WHEN state IN ('failed', 'cancelled') THEN 1 ELSE 0 END), 0)::bigint \
             FROM jobs",
            vec![],
            &[Ty::Int, Ty::Int],
        )
        .await?;
    Ok(rows.first().map_or((0, 0), |r| {
        (r.int(0, "bench row").expect("a decodable row"), r.int(1, "bench row").expect("a decodable row"))
    }))
}
