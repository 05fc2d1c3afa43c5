//! A job's rows as stored: the job row's columns and its decoding, its steps' rows,
//! its history's rows, and the machine as JSON.

use std::collections::HashMap;

use spindle_core::policy::priority::Priority;
use spindle_core::step::Step;
use spindle_core::{HistoryEvent, Job, Timestamp};

use super::error::StoreError;
use super::records::{JobRecord, TenantId};
use super::rows::{MAX_PARAMS, corrupt, parse_id};
use super::sql::{Backend, Row, Tx, Ty, Value, values_list};

/// The columns a [`JobRecord`] is read from, in [`job_from_row`]'s order.
pub(super) const JOB_COLS: &str =
    "seq, id, tenant_id, kind, kind_version, priority, payload, idempotency_key, lease_keys, version, machine";

pub(super) const JOB_TYS: &[Ty] =
    &[Ty::Int, Ty::Text, Ty::Text, Ty::Text, Ty::Int, Ty::Int, Ty::Blob, Ty::OptText, Ty::Text, Ty::Int, Ty::Text];

/// A job row (without its steps: see [`attach_steps`]).
pub(super) fn job_from_row(mut row: Row) -> Result<JobRecord, StoreError> {
    let mut job: Job = serde_json::from_str(&row.text(10)).map_err(|e| corrupt(format!("job machine: {e}")))?;
    job.id = parse_id(&row.text(1), "job id")?;
    let lease_keys: Vec<String> =
        serde_json::from_str(&row.text(8)).map_err(|e| corrupt(format!("lease keys: {e}")))?;
    Ok(JobRecord {
        job,
        version: row.int(9),
        seq: row.int(0),
        tenant: TenantId(row.text(2)),
        kind: row.text(3),
        kind_version: row.int(4),
        priority: i16::try_from(row.int(5))
            .ok()
            .and_then(Priority::from_rank)
            .ok_or_else(|| corrupt(format!("priority rank {}", row.int(5))))?,
        payload: row.take_blob(6).unwrap_or_default(),
        idempotency_key: row.opt_text(7),
        lease_keys,
    })
}

/// Job rows selected by `sql` (which names [`JOB_COLS`]), with their current pass's steps.
pub(super) async fn fetch_jobs(tx: &mut Tx, sql: &str, args: Vec<Value>) -> Result<Vec<JobRecord>, StoreError> {
    let rows = tx.fetch(sql, args, JOB_TYS).await?;
    let mut records = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
    attach_steps(tx, &mut records).await?;
    Ok(records)
}

/// A step as stored: its body (JSON) and its output (a column of its own).
pub(super) fn step_from_row(row: &mut Row, body: usize, output: usize) -> Result<Step, StoreError> {
    let mut step: Step = serde_json::from_str(&row.text(body)).map_err(|e| corrupt(format!("step: {e}")))?;
    step.output = row.take_blob(output);
    Ok(step)
}

/// Loads the current pass's steps of `records` (one query) into their jobs, with the
/// attempt a held claim began restored on its step (the claim alone records it).
pub(super) async fn attach_steps(tx: &mut Tx, records: &mut [JobRecord]) -> Result<(), StoreError> {
    if records.is_empty() {
        return Ok(());
    }
    let mut by_id: HashMap<String, usize> = HashMap::with_capacity(records.len());
    for (i, r) in records.iter_mut().enumerate() {
        r.job.steps.clear();
        by_id.insert(r.job.id.to_string(), i);
    }
    let ids: Vec<(String, i64)> = records.iter().map(|r| (r.job.id.to_string(), i64::from(r.job.pass))).collect();
    for chunk in ids.chunks(MAX_PARAMS / 2) {
        let (sql, args) = steps_of(tx.backend(), chunk);
        let rows = tx.fetch(&sql, args, &[Ty::Text, Ty::Int, Ty::Int, Ty::Text, Ty::OptBlob]).await?;
        for mut row in rows {
            let Some(&i) = by_id.get(&row.text(0)) else { continue };
            if row.int(1) != i64::from(records[i].job.pass) {
                continue;
            }
            let step = step_from_row(&mut row, 3, 4)?;
            records[i].job.steps.push(step);
        }
    }
    for record in records.iter_mut() {
        record.job.restore_claimed_step();
    }
    Ok(())
}

/// The query for the steps of `jobs` (id, pass), in position order per job.
///
/// PostgreSQL's planner knows nothing of a table it has not analysed yet (a fresh
/// database, a burst of new jobs) and then reads `job_id IN (…64 ids…)` as most of the
/// table: a sequential scan of every step on every claim. A lateral lookup per job is
/// one primary-key probe each, whatever the statistics say. SQLite's planner always
/// probes the key for `IN`.
fn steps_of(backend: Backend, jobs: &[(String, i64)]) -> (String, Vec<Value>) {
    let cols = "job_id, pass, position, body, output";
    match backend {
        Backend::Postgres => {
            let sql = format!(
                "SELECT s.{} FROM (VALUES {}) AS v(id, pass) CROSS JOIN LATERAL \
                 (SELECT {cols} FROM steps WHERE job_id = v.id AND pass = v.pass ORDER BY position) AS s",
                cols.replace(", ", ", s."),
                values_list(jobs.len(), 2, 1)
            );
            let args = jobs.iter().flat_map(|(id, pass)| [Value::from(id.as_str()), Value::from(*pass)]).collect();
            (sql, args)
        }
        Backend::Sqlite => {
            let placeholders = (1..=jobs.len()).map(|n| format!("${n}")).collect::<Vec<_>>().join(",");
            let sql = format!("SELECT {cols} FROM steps WHERE job_id IN ({placeholders}) ORDER BY job_id, position");
            (sql, jobs.iter().map(|(id, _)| Value::from(id.as_str())).collect())
        }
    }
}

pub(super) fn step_row(job_id: &str, pass: u32, position: usize, step: &Step) -> Result<Vec<Value>, StoreError> {
    let body = serde_json::to_string(step).map_err(|e| corrupt(format!("encode step: {e}")))?;
    Ok(vec![
        Value::from(job_id),
        Value::from(i64::from(pass)),
        Value::from(i64::try_from(position).unwrap_or(i64::MAX)),
        Value::from(step.key.as_str()),
        Value::from(step.state.as_str()),
        Value::from(body),
        Value::from(step.output.clone()),
    ])
}

pub(super) fn history_rows(
    job_id: &str,
    now: Timestamp,
    history: &[HistoryEvent],
) -> Result<Vec<Vec<Value>>, StoreError> {
    history
        .iter()
        .map(|event| {
            let body = serde_json::to_string(event).map_err(|e| corrupt(format!("encode history: {e}")))?;
            Ok(vec![Value::from(job_id), Value::from(now.as_micros()), Value::from(event.name()), Value::from(body)])
        })
        .collect()
}

pub(super) fn machine_json(job: &Job) -> Result<String, StoreError> {
    serde_json::to_string(job).map_err(|e| corrupt(format!("encode job: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::rows::insert_rows;

    /// A fresh table has no statistics until autovacuum gets to it; `job_id IN (…)` over
    /// 64 ids was then planned as a scan of every step, on every claim. The lookup must
    /// probe the primary key whatever the statistics say, and find each job's steps in
    /// order. Needs the suite's PostgreSQL (`cargo xtask test` sets
    /// `SPINDLE_TEST_DATABASE_URL`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_loads_steps_by_key_on_an_unanalysed_table() {
        let Some(test) = crate::store::test_db::fresh(Backend::Postgres).await else { return };
        let db = &test.db;
        crate::store::schema::migrate(db).await.expect("migrate");
        db.execute("ALTER TABLE steps SET (autovacuum_enabled = false)", vec![]).await.expect("alter");
        let mut tx = db.begin().await.expect("begin");
        let rows: Vec<Vec<Value>> = (0..6_000)
            .map(|i| {
                let step = Step::new(format!("s{}", i % 2), 1);
                step_row(&format!("job-{}", i / 2), 1, i % 2, &step).expect("row")
            })
            .collect();
        insert_rows(&mut tx, "INSERT INTO steps (job_id, pass, position, key, state, body, output)", "", 7, rows)
            .await
            .expect("insert steps");
        tx.commit().await.expect("commit");
        let wanted: Vec<(String, i64)> = (0..64).map(|i| (format!("job-{}", i * 7), 1)).collect();

        let (sql, args) = steps_of(Backend::Postgres, &wanted);
        let plan = crate::store::test_db::plan(db, &sql, args.clone()).await;
        assert!(!plan.contains("Seq Scan on steps"), "steps are scanned, not probed:\n{plan}");
        assert!(plan.contains("steps_pkey"), "the primary key is not used:\n{plan}");

        let rows = db.fetch(&sql, args, &[Ty::Text, Ty::Int, Ty::Int, Ty::Text, Ty::OptBlob]).await.expect("fetch");
        let mut found: Vec<(String, i64)> = rows.iter().map(|r| (r.text(0), r.int(2))).collect();
        for pair in found.windows(2) {
            if pair[0].0 == pair[1].0 {
                assert!(pair[0].1 < pair[1].1, "a job's steps come in position order: {found:?}");
            }
        }
        found.sort();
        let mut expected: Vec<(String, i64)> =
            wanted.iter().flat_map(|(id, _)| [(id.clone(), 0), (id.clone(), 1)]).collect();
        expected.sort();
        assert_eq!(found, expected, "both steps of every job asked for, and nothing else");
        test.drop().await;
    }
}
