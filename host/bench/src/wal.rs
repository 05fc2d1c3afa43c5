//! What each one-step job writes to PostgreSQL's WAL, by record type (`pg_walinspect`).
//!
//! Bytes and records per job do not depend on how fast or how loaded the machine is, so
//! they are the figures a change to the write path is judged by when the timings are
//! noisy. Two phases on a fresh database, `noop` jobs: the bulk submission with the host
//! stopped, then the run (claims, step outcomes, settlements) once the host starts. The
//! WAL is the server's, so the section wants a server nothing else writes to; a
//! checkpoint before each phase makes the full-page images (reported apart) comparable
//! from run to run. PostgreSQL only: SQLite's log is rewritten in place by checkpoints.
//!
//! The same again for a lean kind's jobs (the job row alone), and, where the server has
//! `pg_stat_statements` loaded, the statements' execution time per job in each phase.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use serde::Serialize;
use spindle_core::{JobState, Record};

use super::{Context, count_in_state, submit_bulk, wait_settled};
use spindle::store::Backend;
use spindle::store::sql::{Db, Ty, Value};

/// Record types listed per phase, the largest first.
const TOP_RECORDS: usize = 8;

/// The section's figures.
#[derive(Clone, Debug, Serialize)]
pub struct WalBench {
    /// Jobs per phase.
    pub jobs: usize,
    /// Submitting them, host stopped.
    pub submit: WalPhase,
    /// Running them to the end, host started.
    pub run: WalPhase,
    /// The same two phases for a lean kind's jobs.
    pub lean_submit: WalPhase,
    /// The lean kind's run.
    pub lean_run: WalPhase,
}

/// One phase's WAL, per job.
#[derive(Clone, Debug, Serialize)]
pub struct WalPhase {
    /// All WAL bytes (the LSN's advance) per job.
    pub bytes_per_job: f64,
    /// Of which full-page images.
    pub fpi_bytes_per_job: f64,
    /// B-tree insertions (`Btree/INSERT_*`) per job: one per index entry written.
    pub btree_inserts_per_job: f64,
    /// Heap tuples inserted (`Heap/INSERT*`, one per `Heap2/MULTI_INSERT*` record) per job.
    pub heap_inserts_per_job: f64,
    /// Updates that had to write every index again (`Heap/UPDATE*`) per job.
    pub updates_per_job: f64,
    /// Updates that wrote no index entry (`Heap/HOT_UPDATE*`) per job.
    pub hot_updates_per_job: f64,
    /// Row locks (`Heap/LOCK`) per job.
    pub locks_per_job: f64,
    /// Commits per job.
    pub commits_per_job: f64,
    /// Statement execution time per job, µs (`pg_stat_statements`; `None` where the
    /// server does not load it).
    pub statement_us_per_job: Option<f64>,
    /// The largest record types: name, records per job, bytes per job (with images).
    pub top: Vec<(String, f64, f64)>,
    /// Records per job by the table or index they touch (first block) and type, the
    /// most frequent first: where each B-tree insert, update and lock comes from.
    pub by_relation: Vec<(String, String, f64)>,
}

/// Measures both phases, for a full kind and a lean one; `None` on SQLite.
pub async fn measure(ctx: &Context) -> anyhow::Result<Option<WalBench>> {
    if ctx.databases.backend() != Backend::Postgres {
        return Ok(None);
    }
    let (submit, run) = phases(ctx, Record::Full).await?;
    let (lean_submit, lean_run) = phases(ctx, Record::Lean).await?;
    Ok(Some(WalBench { jobs: ctx.settings.jobs, submit, run, lean_submit, lean_run }))
}

/// The submit and run phases of `noop` jobs, the kind keeping `record`.
async fn phases(ctx: &Context, record: Record) -> anyhow::Result<(WalPhase, WalPhase)> {
    let jobs = ctx.settings.jobs;
    let mut scenario = ctx.open(&format!("wal-{}", record.as_str()), ctx.settings.concurrency).await?;
    let db = scenario.host.store.db().clone();
    db.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect", vec![])
        .await
        .context("pg_walinspect (in PostgreSQL's contrib; creating it needs a superuser)")?;
    // Statement times where the server loads the module (`shared_preload_libraries`).
    let timed = db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", vec![]).await.is_ok()
        && statement_ms(&db).await.is_some();
    ctx.deploy_keeping(&scenario, "noop", record).await?;
    let engine = scenario.host.engine.clone();
    let task = ctx
        .progress
        .task(format!("WAL of {jobs} noop jobs ({} record): submit, then run", record.as_str()), Some(jobs as u64));

    let start = checkpoint(&db).await?;
    let ms = if timed { statement_ms(&db).await } else { None };
    submit_bulk(ctx, &engine, "noop", b"{}", jobs, &task, || 0).await?;
    let submitted = lsn(&db).await?;
    let mut submit = phase(&db, &start, &submitted, jobs).await?;
    submit.statement_us_per_job = per_job_us(ms, if timed { statement_ms(&db).await } else { None }, jobs);

    let start = checkpoint(&db).await?;
    let ms = if timed { statement_ms(&db).await } else { None };
    scenario.start();
    wait_settled(&engine, jobs as u64, Duration::from_secs(60 + jobs as u64 / 100), &task).await?;
    let succeeded = count_in_state(&scenario.host, JobState::Succeeded).await?;
    ensure!(succeeded == jobs as i64, "{succeeded} of {jobs} noop jobs succeeded");
    let ran = lsn(&db).await?;
    let after = if timed { statement_ms(&db).await } else { None };
    let mut run = phase(&db, &start, &ran, jobs).await?;
    run.statement_us_per_job = per_job_us(ms, after, jobs);
    task.finish(&format!(
        "{:.0} + {:.0} B of WAL, {:.1} + {:.1} B-tree inserts per job",
        submit.bytes_per_job, run.bytes_per_job, submit.btree_inserts_per_job, run.btree_inserts_per_job
    ));
    ctx.close(scenario, Duration::from_secs(5)).await;
    Ok((submit, run))
}

/// The server's statements' total execution time so far, ms (every database's: the
/// scenario's is the only one at work).
async fn statement_ms(db: &Db) -> Option<f64> {
    let sql = "SELECT COALESCE(sum(total_exec_time), 0)::float8::text FROM pg_stat_statements";
    let rows = db.fetch(sql, vec![], &[Ty::Text]).await.ok()?;
    rows.first()?.text(0, "bench row").ok()?.parse().ok()
}

/// The time between two readings of [`statement_ms`], µs per job.
fn per_job_us(before: Option<f64>, after: Option<f64>, jobs: usize) -> Option<f64> {
    Some((after? - before?) * 1000.0 / jobs.max(1) as f64)
}

/// A checkpoint, then the WAL position after it.
async fn checkpoint(db: &Db) -> anyhow::Result<String> {
    db.execute("CHECKPOINT", vec![]).await.context("CHECKPOINT")?;
    lsn(db).await
}

async fn lsn(db: &Db) -> anyhow::Result<String> {
    let rows = db.fetch("SELECT pg_current_wal_lsn()::text", vec![], &[Ty::Text]).await?;
    Ok(rows.first().map(|r| r.text(0, "bench row").expect("a decodable row")).unwrap_or_default())
}

/// Waits until the server has flushed its WAL up to `to`: `pg_walinspect` reads only
/// flushed WAL (and a checkpoint, which would flush it, may remove the segments read).
async fn flushed(db: &Db, to: &str) -> anyhow::Result<()> {
    for _ in 0..1000 {
        let rows = db
            .fetch(
                "SELECT CASE WHEN pg_current_wal_flush_lsn() >= $1::text::pg_lsn THEN 1 ELSE 0 END::bigint",
                vec![Value::from(to)],
                &[Ty::Int],
            )
            .await?;
        if rows.first().is_some_and(|r| r.int(0, "bench row").expect("a decodable row") == 1) {
            return Ok(());
        }
        // The WAL writer flushes every `wal_writer_delay` (200 ms by default).
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the server did not flush its WAL up to {to} within 10 s")
}

/// The WAL between `from` and `to`, per job.
async fn phase(db: &Db, from: &str, to: &str, jobs: usize) -> anyhow::Result<WalPhase> {
    flushed(db, to).await?;
    let per_job = |n: i64| n as f64 / jobs.max(1) as f64;
    let span = db
        .fetch(
            "SELECT pg_wal_lsn_diff($2::text::pg_lsn, $1::text::pg_lsn)::bigint",
            vec![Value::from(from), Value::from(to)],
            &[Ty::Int],
        )
        .await?;
    let records = db
        .fetch(
            "SELECT \"resource_manager/record_type\", count, record_size, fpi_size \
             FROM pg_get_wal_stats($1::text::pg_lsn, $2::text::pg_lsn, true) WHERE count > 0",
            vec![Value::from(from), Value::from(to)],
            &[Ty::Text, Ty::Int, Ty::Int, Ty::Int],
        )
        .await
        .context("pg_get_wal_stats")?;
    let sum = |pick: &dyn Fn(&str) -> bool| {
        records
            .iter()
            .filter(|r| pick(&r.text(0, "bench row").expect("a decodable row")))
            .map(|r| r.int(1, "bench row").expect("a decodable row"))
            .sum::<i64>()
    };
    let mut top: Vec<(String, f64, f64)> = records
        .iter()
        .map(|r| {
            (
                r.text(0, "bench row").expect("a decodable row"),
                per_job(r.int(1, "bench row").expect("a decodable row")),
                per_job(
                    r.int(2, "bench row").expect("a decodable row") + r.int(3, "bench row").expect("a decodable row"),
                ),
            )
        })
        .collect();
    top.sort_by(|a, b| b.2.total_cmp(&a.2));
    top.truncate(TOP_RECORDS);
    Ok(WalPhase {
        bytes_per_job: per_job(span.first().map_or(0, |r| r.int(0, "bench row").expect("a decodable row"))),
        fpi_bytes_per_job: per_job(records.iter().map(|r| r.int(3, "bench row").expect("a decodable row")).sum()),
        btree_inserts_per_job: per_job(sum(&|t| t.starts_with("Btree/INSERT"))),
        heap_inserts_per_job: per_job(sum(&|t| t.starts_with("Heap/INSERT")))
            + multi_inserted(db, from, to, jobs).await?,
        updates_per_job: per_job(sum(&|t| t.starts_with("Heap/UPDATE"))),
        hot_updates_per_job: per_job(sum(&|t| t.starts_with("Heap/HOT_UPDATE"))),
        locks_per_job: per_job(sum(&|t| t == "Heap/LOCK")),
        commits_per_job: per_job(sum(&|t| t.starts_with("Transaction/COMMIT"))),
        statement_us_per_job: None,
        top,
        by_relation: by_relation(db, from, to, jobs).await?,
    })
}

/// Tuples written by `Heap2/MULTI_INSERT` records (a bulk `INSERT … SELECT` writes many
/// per record), per job: read from the records' descriptions (`ntuples: N`).
async fn multi_inserted(db: &Db, from: &str, to: &str, jobs: usize) -> anyhow::Result<f64> {
    let rows = db
        .fetch(
            "SELECT COALESCE(SUM(substring(description FROM 'ntuples: ([0-9]+)')::bigint), 0)::bigint \
             FROM pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn) \
             WHERE resource_manager = 'Heap2' AND record_type LIKE 'MULTI_INSERT%'",
            vec![Value::from(from), Value::from(to)],
            &[Ty::Int],
        )
        .await
        .context("pg_get_wal_records_info")?;
    Ok(rows.first().map_or(0, |r| r.int(0, "bench row").expect("a decodable row")) as f64 / jobs.max(1) as f64)
}

/// Records of the heap and B-tree kinds between `from` and `to` per job, by relation
/// (resolved in the scenario's database) and record type; those under 0.05 per job left out.
async fn by_relation(db: &Db, from: &str, to: &str, jobs: usize) -> anyhow::Result<Vec<(String, String, f64)>> {
    let rows = db
        .fetch(
            "SELECT COALESCE(pg_filenode_relation(0, node)::text, node::text), kind, COUNT(*)::bigint FROM ( \
               SELECT substring(block_ref FROM 'rel [0-9]+/[0-9]+/([0-9]+)')::oid AS node, \
                      resource_manager || '/' || record_type AS kind \
               FROM pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn) \
               WHERE resource_manager IN ('Heap', 'Heap2', 'Btree') AND block_ref IS NOT NULL) r \
             GROUP BY 1, 2 ORDER BY 3 DESC",
            vec![Value::from(from), Value::from(to)],
            &[Ty::Text, Ty::Text, Ty::Int],
        )
        .await
        .context("WAL records by relation")?;
    let per_job = |n: i64| n as f64 / jobs.max(1) as f64;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.text(0, "bench row").expect("a decodable row"),
                r.text(1, "bench row").expect("a decodable row"),
                per_job(r.int(2, "bench row").expect("a decodable row")),
            )
        })
        .filter(|(_, _, n)| *n >= 0.05)
        .collect())
}
