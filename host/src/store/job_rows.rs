//! A job's rows as stored: the job row's columns and its decoding, its steps' rows,
//! its history's rows, and the machine as JSON.

use std::collections::HashMap;

use spindle_core::policy::priority::Priority;
use spindle_core::step::Step;
use spindle_core::{HistoryEvent, Job, Timestamp};

use base64::Engine as _;

use super::error::StoreError;
use super::records::{JobRecord, TenantId};
use super::rows::{Columns, MAX_PARAMS, Reader, corrupt};
use super::sql::{Backend, Row, Tx, Ty, Value, values_list};

/// The columns a [`JobRecord`] is read from.
pub(super) static JOB: Columns = Columns {
    table: "jobs",
    names: &[
        "seq",
        "id",
        "tenant_id",
        "kind",
        "kind_version",
        "priority",
        "payload",
        "idempotency_key",
        "lease_keys",
        "version",
        "machine",
    ],
    tys: &[Ty::Int, Ty::Text, Ty::Text, Ty::Text, Ty::Int, Ty::Int, Ty::Blob, Ty::OptText, Ty::Text, Ty::Int, Ty::Text],
};

/// [`JOB`]'s columns as a `SELECT` names them (a literal, for `format!`).
pub(super) const JOB_COLS: &str =
    "seq, id, tenant_id, kind, kind_version, priority, payload, idempotency_key, lease_keys, version, machine";

/// [`JOB`]'s types.
pub(super) const JOB_TYS: &[Ty] = JOB.tys;

/// Whether this process reads claims as a format-2 build does, restoring a held claim's
/// attempt on its step. Process-wide because it stands for what the binary is: only a
/// host pinned to format 1 (`spindle serve --storage-format 1`, which rehearses the build
/// before format 2 beside a newer one) turns it off, before it reads anything.
static RESTORES_CLAIMS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Reads jobs as a build of `formats` does (see [`RESTORES_CLAIMS`]).
pub fn read_as(formats: &spindle_core::upgrade::Formats) {
    RESTORES_CLAIMS.store(spindle_core::upgrade::restores_claimed_step(formats), std::sync::atomic::Ordering::Relaxed);
}

/// Restores a held claim's attempt on its step, as this process's reader does.
pub(super) fn restore_claim(job: &mut Job) {
    if RESTORES_CLAIMS.load(std::sync::atomic::Ordering::Relaxed) {
        job.restore_claimed_step();
    }
}

/// A job row (without its steps, unless its record is lean: see [`attach_steps`]).
pub(super) fn job_from_row(mut row: Row) -> Result<JobRecord, StoreError> {
    let mut r = JOB.read(&mut row);
    let machine = r.text("machine")?;
    let mut job: Job = serde_json::from_str(&machine).map_err(|e| r.corrupt("machine", e.to_string()))?;
    if job.rules.lean {
        job.steps = lean_steps(&machine).map_err(|e| r.corrupt("machine", e))?;
    }
    job.id = r.id("id")?;
    let rank: i16 = r.num("priority")?;
    Ok(JobRecord {
        version: r.int("version")?,
        seq: r.int("seq")?,
        tenant: TenantId(r.text("tenant_id")?),
        kind: r.text("kind")?,
        kind_version: r.int("kind_version")?,
        priority: Priority::from_rank(rank).ok_or_else(|| r.corrupt("priority", format!("unknown rank {rank}")))?,
        payload: r.take_blob("payload")?,
        idempotency_key: r.opt_text("idempotency_key")?,
        lease_keys: r.json("lease_keys")?,
        job,
    })
}

/// Job rows selected by `sql` (which names [`JOB_COLS`]), with their current pass's steps.
pub(super) async fn fetch_jobs(tx: &mut Tx, sql: &str, args: Vec<Value>) -> Result<Vec<JobRecord>, StoreError> {
    let rows = tx.fetch(sql, args, JOB.tys).await.map_err(|e| JOB.in_table(e))?;
    let mut records = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
    attach_steps(tx, &mut records).await?;
    Ok(records)
}

/// The columns a step is read from, with the job and pass it belongs to.
pub(super) static STEP: Columns = Columns {
    table: "steps",
    names: &["job_id", "pass", "position", "body", "output"],
    tys: &[Ty::Text, Ty::Int, Ty::Int, Ty::Text, Ty::OptBlob],
};

/// A step as stored: its body (JSON) and its output (a column of its own).
pub(super) fn step_from(r: &mut Reader<'_>) -> Result<Step, StoreError> {
    let mut step: Step = r.json("body")?;
    step.output = r.take_opt_blob("output")?;
    Ok(step)
}

/// Loads the current pass's steps of `records` (one query) into their jobs, with the
/// attempt a held claim began restored on its step (the claim alone records it). A lean
/// job's steps came with its row.
pub(super) async fn attach_steps(tx: &mut Tx, records: &mut [JobRecord]) -> Result<(), StoreError> {
    let mut by_id: HashMap<String, usize> = HashMap::with_capacity(records.len());
    for (i, r) in records.iter_mut().enumerate() {
        if !r.job.rules.lean {
            r.job.steps.clear();
            by_id.insert(r.job.id.to_string(), i);
        }
    }
    let ids: Vec<(String, i64)> =
        records.iter().filter(|r| !r.job.rules.lean).map(|r| (r.job.id.to_string(), i64::from(r.job.pass))).collect();
    for chunk in ids.chunks(MAX_PARAMS / 2) {
        let (sql, args) = steps_of(tx.backend(), chunk);
        let rows = tx.fetch(&sql, args, STEP.tys).await.map_err(|e| STEP.in_table(e))?;
        for mut row in rows {
            let mut r = STEP.read(&mut row);
            let Some(&i) = by_id.get(&r.text("job_id")?) else { continue };
            if r.int("pass")? != i64::from(records[i].job.pass) {
                continue;
            }
            let step = step_from(&mut r)?;
            records[i].job.steps.push(step);
        }
    }
    for record in records.iter_mut() {
        restore_claim(&mut record.job);
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
    let cols = STEP.list();
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

/// The machine column: the job as JSON, and for a lean job its steps too (under
/// [`LEAN_STEPS`], each `[step, output]` with the output in base64), since it has no
/// step rows.
pub(super) fn machine_json(job: &Job) -> Result<String, StoreError> {
    let mut json = serde_json::to_string(job).map_err(|e| corrupt(format!("encode job: {e}")))?;
    if job.rules.lean {
        let steps: Vec<(&Step, Option<String>)> =
            job.steps.iter().map(|s| (s, s.output.as_deref().map(|o| BASE64.encode(o)))).collect();
        let steps = serde_json::to_string(&steps).map_err(|e| corrupt(format!("encode steps: {e}")))?;
        // The job is a JSON object with fields: its closing brace makes room for one more.
        debug_assert!(json.ends_with('}') && json.len() > 2);
        json.pop();
        json.push_str(&format!(",\"{LEAN_STEPS}\":{steps}}}"));
    }
    Ok(json)
}

/// The machine's field that holds a lean job's steps (`Job` skips `steps`, and a build
/// that knows nothing of lean records ignores it: the storage format gate keeps such a
/// build off a database with lean jobs).
const LEAN_STEPS: &str = "lean_steps";

/// Base64 with padding, for lean steps' outputs.
const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A lean job's steps, from its machine column ([`machine_json`]).
fn lean_steps(machine: &str) -> Result<Vec<Step>, String> {
    #[derive(serde::Deserialize)]
    struct Lean {
        // Required: a lean row without it is damaged, not a job without steps.
        lean_steps: Vec<(Step, Option<String>)>,
    }
    let lean: Lean = serde_json::from_str(machine).map_err(|e| format!("lean steps: {e}"))?;
    lean.lean_steps
        .into_iter()
        .map(|(mut step, output)| {
            step.output = output.map(|o| BASE64.decode(o)).transpose().map_err(|e| format!("lean output: {e}"))?;
            Ok(step)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_columns_literal_is_the_list() {
        assert_eq!(JOB_COLS, JOB.list());
        assert_eq!(JOB.names.len(), JOB.tys.len());
        assert_eq!(STEP.names.len(), STEP.tys.len());
    }
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
        let mut found: Vec<(String, i64)> = rows
            .iter()
            .map(|r| (r.text(0, "test row").expect("a decodable row"), r.int(2, "test row").expect("a decodable row")))
            .collect();
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
