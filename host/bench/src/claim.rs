//! Discovery at depth: how long claiming the next job takes with few and with many
//! queued jobs (by default 1,000 and 1,000,000), on a fresh database for each depth.
//!
//! Seeding: one real `noop` job is submitted through the engine; the rest are copies of
//! its `jobs` and `steps` rows made in bulk SQL (`INSERT … SELECT` over a generated
//! series, 50,000 rows per transaction), each with its own id and sequence number. That
//! is the same rows `insert_jobs` writes (without their creation history, which claiming
//! never reads), at a fraction of the time. The time it takes is reported. On
//! PostgreSQL the tables are then analysed, as autovacuum would do shortly after such a
//! load; SQLite is left as Spindle leaves it (no `ANALYZE`).
//!
//! Then, with no dispatcher running, [`Execution::claim`](spindle::engine::Execution::claim) is
//! called directly: 20 warm-up claims of one job, 200 measured claims of one job, and
//! 20 measured claims of a batch of 32 (the dispatcher's batch size). Each claimed job
//! leaves the queue, so the depth changes by under 0.1% at 1,000,000.
//!
//! Before the claims, the same database answers the dashboard's job list (what
//! `GET /v1/jobs` asks the store for): 50 measured reads each of the first page of 50,
//! of the first page of the tenant's pending jobs, of a page from the middle of the
//! list (`before_seq`), and of a search by job id.

use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde::Serialize;

use super::stats::Summary;
use super::{Context, requests};
use spindle::store::Backend;
use spindle::store::sql::{Db, Ty, Value};

/// Rows copied per seeding transaction.
const SEED_CHUNK: u64 = 50_000;
/// Claims of one job measured.
const SINGLE_CLAIMS: usize = 200;
/// Claims of a batch measured.
const BATCH_CLAIMS: usize = 20;
/// The batch size (the dispatcher's default `claim_batch`).
const BATCH: u32 = 32;

/// One depth's figures.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimLatency {
    /// Jobs queued when measuring.
    pub queued: u64,
    /// Seconds seeding took.
    pub seed_secs: f64,
    /// Claiming one job, milliseconds.
    pub one_ms: Summary,
    /// Claiming a batch of 32, milliseconds per batch.
    pub batch_ms: Summary,
    /// Listing: the first page of 50 jobs, milliseconds.
    #[serde(default)]
    pub list_first_ms: Option<Summary>,
    /// Listing: the first page of 50 pending jobs, milliseconds.
    #[serde(default)]
    pub list_state_ms: Option<Summary>,
    /// Listing: a page of 50 from the middle of the list, milliseconds.
    #[serde(default)]
    pub list_deep_ms: Option<Summary>,
    /// Listing: a search by job id, milliseconds.
    #[serde(default)]
    pub list_id_ms: Option<Summary>,
    /// The counts per state and kind beside the list's filters (`GET /v1/jobs/counts`),
    /// milliseconds.
    #[serde(default)]
    pub counts_ms: Option<Summary>,
}

/// Reads of each listing measured.
const LIST_READS: usize = 50;

/// The listing figures at one depth: first page, by state, deep page, by id.
async fn listing(
    engine: &std::sync::Arc<spindle::engine::Engine>,
    tenant: &spindle::store::TenantId,
    queued: u64,
    template: &str,
) -> anyhow::Result<[Summary; 4]> {
    use spindle::store::JobFilter;
    let page = |filter: JobFilter| JobFilter { limit: 50, ..filter };
    let first = engine.operations().list_jobs(tenant, &page(JobFilter::default())).await?;
    ensure!(first.len() == 50.min(queued as usize), "the first page held {} jobs", first.len());
    let top = first.first().map_or(0, |r| r.seq);
    let filters = [
        page(JobFilter::default()),
        page(JobFilter { state: Some(spindle_core::JobState::Pending), ..JobFilter::default() }),
        page(JobFilter { before_seq: Some(top / 2 + 1), ..JobFilter::default() }),
        page(JobFilter { text: Some(template.to_owned()), ..JobFilter::default() }),
    ];
    let mut out = Vec::with_capacity(filters.len());
    for filter in &filters {
        let mut samples = Vec::with_capacity(LIST_READS);
        for _ in 0..LIST_READS {
            let t = Instant::now();
            let listed = engine.operations().list_jobs(tenant, filter).await?;
            samples.push(t.elapsed().as_secs_f64() * 1000.0);
            ensure!(!listed.is_empty(), "a listing found nothing");
        }
        out.push(Summary::of(&mut samples).context("no samples")?);
    }
    out.try_into().map_err(|_| anyhow::anyhow!("four listings"))
}

/// The counts beside the list, at one depth: [`LIST_READS`] reads of what
/// `GET /v1/jobs/counts` asks the store for.
async fn counting(
    engine: &std::sync::Arc<spindle::engine::Engine>,
    tenant: &spindle::store::TenantId,
    queued: u64,
) -> anyhow::Result<Summary> {
    let mut samples = Vec::with_capacity(LIST_READS);
    for _ in 0..LIST_READS {
        let t = Instant::now();
        let counts = engine.operations().job_counts(tenant).await?;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
        let pending: u64 = counts.iter().filter(|(s, ..)| *s == spindle_core::JobState::Pending).map(|(.., n)| n).sum();
        ensure!(pending == queued.min(spindle::engine::STATE_COUNT_CAP), "counted {pending} pending of {queued}");
    }
    Summary::of(&mut samples).context("no samples")
}

/// Measures at each depth in the settings.
pub async fn measure(ctx: &Context) -> anyhow::Result<Vec<ClaimLatency>> {
    let mut out = Vec::new();
    for &queued in &ctx.settings.queued {
        out.push(at_depth(ctx, queued.max(1)).await?);
    }
    Ok(out)
}

async fn at_depth(ctx: &Context, queued: u64) -> anyhow::Result<ClaimLatency> {
    let scenario = ctx.open(&format!("claim-{queued}"), ctx.settings.concurrency).await?;
    ctx.deploy(&scenario, "noop").await?;
    let engine = scenario.host.engine.clone();
    let task = ctx.progress.task(format!("claim: seed {queued} queued jobs"), Some(queued));
    let started = Instant::now();
    let template = engine.submission().submit_many(&ctx.tenant, requests("noop", b"{}", 1)).await?;
    let template = template.first().context("no template job")?.record().job.id.to_string();
    let db = scenario.host.store.db().clone();
    let mut next = 1u64;
    while next < queued {
        let last = (next + SEED_CHUNK - 1).min(queued - 1);
        copy_rows(&db, &template, next, last).await?;
        next = last + 1;
        task.set(next);
    }
    if db.backend() == Backend::Postgres {
        db.execute("ANALYZE jobs", vec![]).await?;
        db.execute("ANALYZE steps", vec![]).await?;
    }
    let seed_secs = started.elapsed().as_secs_f64();
    let ready = db.fetch("SELECT COUNT(*) FROM jobs WHERE queue = 1", vec![], &[Ty::Int]).await?;
    let ready = ready.first().map_or(0, |r| r.int(0, "bench row").expect("a decodable row"));
    ensure!(ready == queued as i64, "seeded {ready} ready jobs, not {queued}");
    task.finish(&format!("{queued} jobs seeded in {seed_secs:.1} s"));

    let task = ctx.progress.task(format!("list: at {queued} jobs"), None);
    let [first, state, deep, by_id] = listing(&engine, &ctx.tenant, queued, &template).await?;
    let counts = counting(&engine, &ctx.tenant, queued).await?;
    task.finish(&format!(
        "first page p50 {:.2} ms, by state {:.2} ms, deep page {:.2} ms, by id {:.2} ms; counts {:.2} ms",
        first.p50, state.p50, deep.p50, by_id.p50, counts.p50
    ));

    let task = ctx.progress.task(format!("claim: at {queued} queued"), Some((SINGLE_CLAIMS + BATCH_CLAIMS) as u64));
    for _ in 0..20 {
        ensure!(engine.execution().claim(1).await?.len() == 1, "nothing to claim");
    }
    let mut one = Vec::with_capacity(SINGLE_CLAIMS);
    for i in 0..SINGLE_CLAIMS {
        let t = Instant::now();
        let claimed = engine.execution().claim(1).await?;
        one.push(t.elapsed().as_secs_f64() * 1000.0);
        ensure!(claimed.len() == 1, "nothing to claim");
        task.set(i as u64);
    }
    let mut batch = Vec::with_capacity(BATCH_CLAIMS);
    for i in 0..BATCH_CLAIMS {
        let t = Instant::now();
        let claimed = engine.execution().claim(BATCH).await?;
        batch.push(t.elapsed().as_secs_f64() * 1000.0);
        ensure!(!claimed.is_empty(), "nothing to claim");
        task.set((SINGLE_CLAIMS + i) as u64);
    }
    let one_ms = Summary::of(&mut one).context("no samples")?;
    let batch_ms = Summary::of(&mut batch).context("no samples")?;
    task.finish(&format!("claim one: p50 {:.2} ms; batch of {BATCH}: p50 {:.2} ms", one_ms.p50, batch_ms.p50));
    ctx.close(scenario, Duration::ZERO).await;
    Ok(ClaimLatency {
        queued,
        seed_secs,
        one_ms,
        batch_ms,
        list_first_ms: Some(first),
        list_state_ms: Some(state),
        list_deep_ms: Some(deep),
        list_id_ms: Some(by_id),
        counts_ms: Some(counts),
    })
}

/// Copies the template job's rows as jobs `first..=last` (ids made from the number).
async fn copy_rows(db: &Db, template: &str, first: u64, last: u64) -> anyhow::Result<()> {
    let (series, id) = match db.backend() {
        Backend::Postgres => (
            "generate_series($1::bigint, $2::bigint) AS g(i)",
            "'00000000-0000-7000-8000-' || lpad(to_hex(g.i), 12, '0')",
        ),
        Backend::Sqlite => ("g", "printf('00000000-0000-7000-8000-%012x', g.i)"),
    };
    let with = match db.backend() {
        Backend::Postgres => "",
        Backend::Sqlite => "WITH RECURSIVE g(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM g WHERE i < $2) ",
    };
    let jobs = format!(
        "{with}INSERT INTO jobs (id, tenant_id, kind, kind_version, state, queue, priority, run_at, claim_expires_at, \
         blocked_on, last_activity_at, created_at, settled_at, progress, successor, payload, idempotency_key, \
         lease_keys, version, machine) \
         SELECT {id}, t.tenant_id, t.kind, t.kind_version, t.state, t.queue, t.priority, t.run_at, NULL, NULL, \
         t.last_activity_at, t.created_at, NULL, t.progress, NULL, t.payload, NULL, t.lease_keys, 1, t.machine \
         FROM jobs t, {series} WHERE t.id = $3 ORDER BY g.i"
    );
    let steps = format!(
        "{with}INSERT INTO steps (job_id, pass, position, key, state, body, output) \
         SELECT {id}, s.pass, s.position, s.key, s.state, s.body, s.output \
         FROM steps s, {series} WHERE s.job_id = $3"
    );
    let args = || {
        vec![
            Value::from(i64::try_from(first).unwrap_or(i64::MAX)),
            Value::from(i64::try_from(last).unwrap_or(i64::MAX)),
            Value::from(template),
        ]
    };
    let mut tx = db.begin().await?;
    tx.execute(&jobs, args()).await.context("copying job rows")?;
    tx.execute(&steps, args()).await.context("copying step rows")?;
    tx.commit().await?;
    Ok(())
}
