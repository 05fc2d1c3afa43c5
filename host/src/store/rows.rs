//! Rows in and out: how jobs, steps and history are encoded as rows, decoded from them,
//! and sent in multi-row statements on either backend.

use std::collections::HashMap;

use spindle_core::policy::priority::Priority;
use spindle_core::step::Step;
use spindle_core::{HistoryEvent, Job, JobId, Timestamp};

use super::StoreError;
use super::jobs::JobRecord;
use super::sql::{Backend, Column, Row, Tx, Ty, Value, unnest, values_list};
use super::tenants::TenantId;

/// Most bind parameters per statement (both backends allow more).
pub(super) const MAX_PARAMS: usize = 4_000;

/// The columns a [`JobRecord`] is read from, in [`job_from_row`]'s order.
pub(super) const JOB_COLS: &str =
    "seq, id, tenant_id, kind, kind_version, priority, payload, idempotency_key, lease_keys, version, machine";
pub(super) const JOB_TYS: &[Ty] =
    &[Ty::Int, Ty::Text, Ty::Text, Ty::Text, Ty::Int, Ty::Int, Ty::Blob, Ty::OptText, Ty::Text, Ty::Int, Ty::Text];

pub(super) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

pub(super) fn ts(row: &Row, i: usize) -> Timestamp {
    Timestamp::from_micros(row.int(i))
}

pub(super) fn parse_id(text: &str, what: &str) -> Result<JobId, StoreError> {
    text.parse().map_err(|e| corrupt(format!("{what}: {e}")))
}

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

/// Rows from which a PostgreSQL batch goes as arrays (`UNNEST`) rather than a `VALUES`
/// list. Arrays give one statement text whatever the batch size, prepared once per
/// connection, and a dozen parameters instead of a dozen per row: one-step jobs/s rose
/// ~12% under load. For a few rows a `VALUES` list is quicker (a lone settlement took
/// ~120 µs longer as arrays), and a few sizes of it stay prepared anyway.
const UNNEST_FROM_ROWS: usize = 16;

/// Runs `statement(source)` over `rows` of `cols` values each, where `source` presents
/// them as a table `v(column1, column2, …)`: arrays through `UNNEST` on PostgreSQL from
/// [`UNNEST_FROM_ROWS`] rows, otherwise `VALUES` lists in chunks that fit the parameter
/// limit. Answers the rows the statement returns.
pub(super) async fn over_rows(
    tx: &mut Tx,
    rows: Vec<Vec<Value>>,
    cols: usize,
    statement: impl Fn(&str) -> String,
    tys: &[Ty],
) -> Result<Vec<Row>, StoreError> {
    if tx.backend() == Backend::Postgres && rows.len() >= UNNEST_FROM_ROWS {
        let columns = Column::transpose(rows);
        return Ok(tx.fetch_columns(&statement(&unnest(&columns, "v")), columns, tys).await?);
    }
    let mut out = Vec::new();
    let per_chunk = (MAX_PARAMS / cols).max(1);
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<Vec<Value>> = rows.by_ref().take(per_chunk).collect();
        let source = format!("(VALUES {}) AS v", values_list(chunk.len(), cols, 1));
        out.extend(tx.fetch(&statement(&source), chunk.into_iter().flatten().collect(), tys).await?);
    }
    Ok(out)
}

/// Inserts `rows` with `prefix` (`INSERT INTO t (…)`) and `suffix` (an upsert's
/// `ON CONFLICT …`, or nothing). `WHERE true` is how SQLite tells an upsert's `ON` from
/// a join's.
pub(super) async fn insert_rows(
    tx: &mut Tx,
    prefix: &str,
    suffix: &str,
    cols: usize,
    rows: Vec<Vec<Value>>,
) -> Result<(), StoreError> {
    over_rows(tx, rows, cols, |source| format!("{prefix} SELECT * FROM {source} WHERE true {suffix}"), &[]).await?;
    Ok(())
}

/// Statements sent to SQLite as one text, their parameters numbered in one sequence:
/// sqlx runs them one after another on the connection's worker thread, for one hand-off
/// where each statement sent alone costs one.
///
/// sqlx calls this behaviour of its SQLite driver deprecated (sqlx issue 3108; it is
/// how its migrations run): should an upgrade drop it, the unit test below fails, and
/// the fallback is a statement per hand-off, as before.
#[derive(Debug, Default)]
pub(super) struct Batch {
    sql: String,
    args: Vec<Value>,
}

impl Batch {
    /// Adds `statement` (given its rows' source, `(VALUES …) AS v`) over `rows` of `cols`
    /// values, as statements of at most [`MAX_PARAMS`] parameters; none without rows.
    pub(super) fn over_rows(&mut self, rows: Vec<Vec<Value>>, cols: usize, statement: impl Fn(&str) -> String) {
        let per_chunk = (MAX_PARAMS / cols).max(1);
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            let chunk: Vec<Vec<Value>> = rows.by_ref().take(per_chunk).collect();
            let source = format!("(VALUES {}) AS v", values_list(chunk.len(), cols, self.args.len() + 1));
            self.sql.push_str(&statement(&source));
            self.sql.push_str(";\n");
            self.args.extend(chunk.into_iter().flatten());
        }
    }

    /// Runs the statements in `tx` (SQLite's: a PostgreSQL statement is one statement),
    /// answering the rows they return, in order, decoded as `tys`.
    pub(super) async fn run(self, tx: &mut Tx, tys: &[Ty]) -> Result<Vec<Row>, StoreError> {
        debug_assert_eq!(tx.backend(), Backend::Sqlite);
        if self.sql.is_empty() {
            return Ok(Vec::new());
        }
        Ok(tx.fetch(&self.sql, self.args, tys).await?)
    }
}

/// `$first, $first+1, …` for `n` parameters, comma-separated.
pub(super) fn placeholders(first: usize, n: usize) -> String {
    (first..first + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A batch's statements bind their parameters in one sequence and answer their rows
    /// in order: rows past one statement's parameter limit go in a second statement,
    /// each value reaching the row it was given for, and a later statement reads what an
    /// earlier one wrote.
    #[tokio::test]
    async fn a_batch_binds_every_statement_in_turn_and_answers_their_rows_in_order() {
        let test = crate::store::test_db::fresh(Backend::Sqlite).await.expect("sqlite");
        let db = &test.db;
        db.execute("CREATE TABLE pairs (n INTEGER NOT NULL, word TEXT NOT NULL)", vec![]).await.expect("table");
        let n = MAX_PARAMS / 2 + 3;
        let rows: Vec<Vec<Value>> = (0..n).map(|i| vec![Value::from(i as i64), Value::from(format!("w{i}"))]).collect();
        let mut batch = Batch::default();
        batch.over_rows(vec![vec![Value::from(-1i64), Value::from("first")]], 2, |source| {
            format!("SELECT v.column1, v.column2 FROM {source}")
        });
        batch.over_rows(rows, 2, |source| {
            format!("INSERT INTO pairs (n, word) SELECT * FROM {source} RETURNING n, word")
        });
        batch.over_rows(vec![vec![Value::from(n as i64 - 1)]], 1, |source| {
            format!("SELECT n, word FROM pairs WHERE n = (SELECT column1 FROM {source})")
        });
        assert_eq!(batch.sql.matches(';').count(), 4, "the inserts over the limit are two statements");
        let mut tx = db.begin().await.expect("begin");
        let answered = batch.run(&mut tx, &[Ty::Int, Ty::Text]).await.expect("batch");
        tx.commit().await.expect("commit");

        let answered: Vec<(i64, String)> = answered.iter().map(|r| (r.int(0), r.text(1))).collect();
        let mut expected = vec![(-1, "first".to_owned())];
        expected.extend((0..n).map(|i| (i as i64, format!("w{i}"))));
        expected.push((n as i64 - 1, format!("w{}", n - 1)));
        assert_eq!(answered, expected);
        test.drop().await;
    }
}
