//! PostgreSQL: submitting from an application's own transaction (`spindle.submit`).
//!
//! Latency: one `noop` job submitted every `1/rate` seconds, each in a transaction of
//! its own by a database role mapped to the tenant (open loop), a warm-up not counted;
//! from the commit (the bench's clock, after `COMMIT` answered) to the job's
//! `created_at` (the host admitted it: claimable from then) and to its `started_at`.
//! Throughput: `bulk` submissions in one transaction, commit → every one admitted,
//! beside as many `POST /v1/jobs`-path submissions by 64 concurrent callers, each with
//! no step running (the dispatcher stopped).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use serde::Serialize;
use spindle::admission::Admission;
use spindle::engine::{SqlVerdict, SubmitRequest};
use spindle::sqlx::{self, PgPool, postgres::PgConnectOptions};
use tokio::time::MissedTickBehavior;

use super::stats::Summary;
use super::{Context, Scenario, wait_settled};
use spindle::store::Backend;

/// Callers of the `POST /v1/jobs` path at once, as `concurrent-submit` has them.
const CALLERS: usize = 64;

/// The section's figures.
#[derive(Clone, Debug, Serialize)]
pub struct SqlSubmit {
    /// Submissions per second offered.
    pub rate: u32,
    /// Seconds measured.
    pub secs: u64,
    /// Commit → admitted (the job claimable), ms.
    pub admitted_ms: Summary,
    /// Commit → its step started, ms.
    pub started_ms: Summary,
    /// Submissions in the bulk transaction.
    pub bulk: usize,
    /// Bulk: jobs admitted per second, commit to the last one admitted.
    pub sql_jobs_per_sec: f64,
    /// The same number through the `POST /v1/jobs` path, [`CALLERS`] at once: jobs/s.
    pub api_jobs_per_sec: f64,
}

fn unix_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A role of the application's, mapped to the bench's tenant; a pool logged in as it.
async fn application(ctx: &Context, scenario: &Scenario) -> anyhow::Result<PgPool> {
    let url = scenario.url();
    let admin = PgPool::connect(url).await.context("connecting as the bench's user")?;
    let role = format!("spindle_bench_{}", std::process::id());
    let password = uuid::Uuid::new_v4().simple().to_string();
    let create = format!(
        "DO $$ BEGIN CREATE ROLE {role} LOGIN PASSWORD '{password}'; \
         EXCEPTION WHEN duplicate_object THEN ALTER ROLE {role} LOGIN PASSWORD '{password}'; END $$"
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(&admin).await.context("creating the application's role")?;
    admin.close().await;
    scenario.host.engine.tenancy().grant_sql(&ctx.tenant, &role).await.context("mapping the role")?;
    let options: PgConnectOptions = url.parse().context("the database URL")?;
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .connect_with(options.username(&role).password(&password))
        .await
        .context("logging in as the application's role")
}

/// One submission in a transaction of its own; answers its id and when it committed.
async fn submit_one(app: &PgPool) -> anyhow::Result<(String, i64)> {
    let mut tx = app.begin().await?;
    let id: String = sqlx::query_scalar("SELECT spindle.submit('noop', '{}', '{}')::text").fetch_one(&mut *tx).await?;
    tx.commit().await?;
    Ok((id, unix_micros()))
}

/// Measures the section on a fresh PostgreSQL database; `None` on SQLite.
pub async fn measure(ctx: &Context) -> anyhow::Result<Option<SqlSubmit>> {
    if ctx.settings.backend != Backend::Postgres {
        return Ok(None);
    }
    let s = &ctx.settings;
    let rate = s.latency_rate.max(1);
    let (warmup, measured) = (s.warmup_secs * u64::from(rate), s.latency_secs * u64::from(rate));
    let mut scenario = ctx.open("sql-submit", s.concurrency).await?;
    ctx.deploy(&scenario, "noop").await?;
    let app = application(ctx, &scenario).await?;
    scenario.start();
    let engine = scenario.host.engine.clone();
    let admission = Admission::start(engine.clone()).context("PostgreSQL has the SQL door")?;
    let task = ctx.progress.task(format!("sql-submit: {rate}/s, {}+{} s", s.warmup_secs, s.latency_secs), None);
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    interval.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut submissions = Vec::new();
    for i in 0..warmup + measured {
        interval.tick().await;
        let app = app.clone();
        submissions.push((i >= warmup, tokio::spawn(async move { submit_one(&app).await })));
    }
    let mut committed = Vec::new();
    for (counted, submission) in submissions {
        let (id, at) = submission.await.context("a submission task")?.context("spindle.submit")?;
        if counted {
            committed.push((id, at));
        }
    }
    wait_settled(&engine, warmup + measured, Duration::from_secs(60), &task).await?;
    let (mut admitted, mut started) = (Vec::new(), Vec::new());
    for (id, at) in committed {
        let submission = engine.submission().sql_submission(&ctx.tenant, &id).await?;
        let SqlVerdict::Admitted(job) = submission.verdict else {
            anyhow::bail!("submission {id}: {:?}", submission.verdict)
        };
        let job = engine.operations().job(&ctx.tenant, job).await?.job;
        let ms = |t: spindle_core::Timestamp| (t.as_micros() - at) as f64 / 1000.0;
        admitted.push(ms(job.created_at));
        started.push(ms(job.started_at.context("a settled job without started_at")?));
    }
    let admitted_ms = Summary::of(&mut admitted).context("no submission measured")?;
    let started_ms = Summary::of(&mut started).context("no submission measured")?;
    admission.stop().await;
    ctx.close(scenario, Duration::from_secs(5)).await;

    let bulk = (s.jobs / 4).max(CALLERS);
    let (sql_jobs_per_sec, api_jobs_per_sec) = throughput(ctx, bulk).await?;
    task.finish(&format!(
        "commit→admitted p50 {:.2} ms, p99 {:.2} ms; bulk {sql_jobs_per_sec:.0} jobs/s (POST path {api_jobs_per_sec:.0})",
        admitted_ms.p50, admitted_ms.p99
    ));
    Ok(Some(SqlSubmit {
        rate,
        secs: s.latency_secs,
        admitted_ms,
        started_ms,
        bulk,
        sql_jobs_per_sec,
        api_jobs_per_sec,
    }))
}

/// `bulk` submissions in one transaction, commit → all admitted; then as many through the
/// `POST /v1/jobs` path. Jobs per second of each, no step running.
async fn throughput(ctx: &Context, bulk: usize) -> anyhow::Result<(f64, f64)> {
    let scenario = ctx.open("sql-submit-bulk", ctx.settings.concurrency).await?;
    ctx.deploy(&scenario, "noop").await?;
    let app = application(ctx, &scenario).await?;
    let engine = scenario.host.engine.clone();
    let admission = Admission::start(engine.clone()).context("PostgreSQL has the SQL door")?;
    let mut tx = app.begin().await?;
    sqlx::query("SELECT count(spindle.submit('noop', '{}', '{}')) FROM generate_series(1, $1)")
        .bind(i64::try_from(bulk)?)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    let started = Instant::now();
    let admin = PgPool::connect(scenario.url()).await?;
    loop {
        let queued: i64 =
            sqlx::query_scalar("SELECT count(*) FROM sql_submissions WHERE state = 'queued'").fetch_one(&admin).await?;
        if queued == 0 {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(120), "{queued} submissions still queued");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let sql = bulk as f64 / started.elapsed().as_secs_f64();
    admin.close().await;
    admission.stop().await;

    let tenant = Arc::new(ctx.tenant.clone());
    let started = Instant::now();
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..CALLERS {
        let (engine, tenant) = (engine.clone(), tenant.clone());
        callers.spawn(async move {
            for _ in 0..bulk / CALLERS {
                let request = SubmitRequest { kind: "noop".into(), input: b"{}".to_vec(), ..Default::default() };
                engine.submission().submit(&tenant, request).await?;
            }
            Ok::<_, spindle::engine::EngineError>(())
        });
    }
    while let Some(done) = callers.join_next().await {
        done.context("a caller")?.context("submitting")?;
    }
    let api = (bulk / CALLERS * CALLERS) as f64 / started.elapsed().as_secs_f64();
    ctx.close(scenario, Duration::ZERO).await;
    Ok((sql, api))
}
