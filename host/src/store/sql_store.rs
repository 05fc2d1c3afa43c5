//! [`Storage`] over sqlx, for SQLite and PostgreSQL alike.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use spindle_core::policy::priority::Priority;
use spindle_core::step::Step;
use spindle_core::{HistoryEvent, Job, JobId, JobState, Timestamp};

use super::sql::{Backend, Column, ConnectOptions, Db, Row, Tx, Ty, Value, unnest, values_list};
use super::{
    ClaimFilter, Depth, Derive, HistoryEntry, Inserted, JobFilter, JobRecord, JobWrite, KindEntry, KindVersion,
    LeaseOp, NewJob, OutboxEffect, OutboxItem, Role, Storage, StoreError, Tenant, TenantId, Updated, WriteOutcome,
};

/// The SQL store.
#[derive(Clone, Debug)]
pub struct SqlStore {
    db: Db,
}

/// Where a job stands in the dispatch queue (the `queue` column).
mod queue {
    /// Claimed, paused or final: not dispatchable.
    pub const IDLE: i64 = 0;
    /// Dispatchable now.
    pub const READY: i64 = 1;
    /// Dispatchable from `run_at`.
    pub const DELAYED: i64 = 2;
    /// Waiting for an exclusive lease key (`blocked_on`), or `run_at` at the latest.
    pub const BLOCKED: i64 = 3;
}

/// Most bind parameters per statement (both backends allow more).
const MAX_PARAMS: usize = 4_000;

const JOB_COLS: &str =
    "seq, id, tenant_id, kind, kind_version, priority, payload, idempotency_key, lease_keys, version, machine, queue";
const JOB_TYS: &[Ty] = &[
    Ty::Int,
    Ty::Text,
    Ty::Text,
    Ty::Text,
    Ty::Int,
    Ty::Int,
    Ty::Blob,
    Ty::Text,
    Ty::Text,
    Ty::Int,
    Ty::Text,
    Ty::Int,
];

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

fn ts(row: &Row, i: usize) -> Timestamp {
    Timestamp::from_micros(row.int(i))
}

impl SqlStore {
    /// Connects and brings the schema up to date.
    pub async fn connect(options: &ConnectOptions) -> Result<Self, StoreError> {
        let db = Db::connect(options).await?;
        super::schema::migrate(&db).await?;
        Ok(Self { db })
    }

    /// The underlying pool (for LISTEN on PostgreSQL).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The claim writes for up to `limit` ready jobs: filter (ready, so due and
    /// dispatchable; kind; tenant) → order by the cheap score the index holds (priority,
    /// sequence) → a finalist set of `limit` → the exact check (`derive`, the core's
    /// claim). Candidates the exact check refuses leave the ready queue until their time.
    async fn claim_writes(
        &self,
        tx: &mut Tx,
        limit: u32,
        now: Timestamp,
        filter: &ClaimFilter,
        derive: Derive<'_>,
    ) -> Result<(Vec<JobWrite>, Vec<JobRecord>), StoreError> {
        if limit == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let mut args = vec![Value::from(i64::from(limit))];
        let mut extra = String::new();
        for (column, values) in
            [("kind", filter.kinds.clone()), ("tenant_id", filter.tenants.iter().map(|t| t.0.clone()).collect())]
        {
            if values.is_empty() {
                continue;
            }
            let first = args.len() + 1;
            let placeholders = (first..first + values.len()).map(|n| format!("${n}")).collect::<Vec<_>>().join(",");
            extra.push_str(&format!(" AND {column} IN ({placeholders})"));
            args.extend(values.into_iter().map(Value::from));
        }
        let sql = format!(
            "SELECT {JOB_COLS} FROM jobs WHERE queue = {}{extra} ORDER BY priority, seq LIMIT $1{}",
            queue::READY,
            self.skip_locked()
        );
        let rows = tx.fetch(&sql, args, JOB_TYS).await?;
        let mut candidates = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
        attach_steps(tx, &mut candidates).await?;
        let mut writes = Vec::with_capacity(candidates.len());
        for candidate in &candidates {
            match derive(candidate) {
                Some(write) => writes.push(write),
                None => {
                    tx.execute(
                        "UPDATE jobs SET queue = $1 WHERE id = $2 AND version = $3",
                        vec![
                            Value::from(queue_of(&candidate.job, now).min(queue::DELAYED)),
                            Value::from(candidate.job.id.to_string()),
                            Value::from(candidate.version),
                        ],
                    )
                    .await?;
                }
            }
        }
        let records = writes.iter().map(|w| w.record.clone()).collect();
        Ok((writes, records))
    }

    fn skip_locked(&self) -> &'static str {
        match self.db.backend() {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }
}

/// Which queue a job belongs in after a write at `now`.
fn queue_of(job: &Job, now: Timestamp) -> i64 {
    if job.state.is_final() || job.state == JobState::Paused || job.claim.is_some() {
        queue::IDLE
    } else if job.run_at <= now {
        queue::READY
    } else {
        queue::DELAYED
    }
}

fn job_from_row(mut row: Row) -> Result<JobRecord, StoreError> {
    let machine = row.text(10);
    let mut job: Job = serde_json::from_str(&machine).map_err(|e| corrupt(format!("job machine: {e}")))?;
    let id: JobId = row.text(1).parse().map_err(|e| corrupt(format!("job id: {e}")))?;
    job.id = id;
    let lease_keys: Vec<String> =
        serde_json::from_str(&row.text(8)).map_err(|e| corrupt(format!("lease keys: {e}")))?;
    Ok(JobRecord {
        job,
        version: row.int(9),
        seq: row.int(0),
        tenant: TenantId(row.text(2)),
        kind: row.text(3),
        kind_version: row.int(4),
        priority: i16::try_from(row.int(5)).ok().and_then(Priority::from_rank).unwrap_or_default(),
        payload: row.take_blob(6).unwrap_or_default(),
        idempotency_key: row.opt_text(7),
        lease_keys,
        queued: row.int(11) != queue::IDLE,
    })
}

/// Loads the current pass's steps of `records` (one query) into their jobs.
async fn attach_steps(tx: &mut Tx, records: &mut [JobRecord]) -> Result<(), StoreError> {
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
        let rows = tx.fetch(&sql, args, &[Ty::Text, Ty::Int, Ty::Int, Ty::Text, Ty::Blob]).await?;
        for mut row in rows {
            let Some(&i) = by_id.get(&row.text(0)) else { continue };
            if row.int(1) != i64::from(records[i].job.pass) {
                continue;
            }
            let mut step: Step = serde_json::from_str(&row.text(3)).map_err(|e| corrupt(format!("step: {e}")))?;
            step.output = row.take_blob(4);
            records[i].job.steps.push(step);
        }
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
#[doc(hidden)] // public for the test that reads its plan on an unanalysed table
pub fn steps_of(backend: Backend, jobs: &[(String, i64)]) -> (String, Vec<Value>) {
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

fn step_row(job_id: &str, pass: u32, position: usize, step: &Step) -> Result<Vec<Value>, StoreError> {
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

/// Rows from which a PostgreSQL batch goes as arrays (`UNNEST`) rather than a `VALUES`
/// list. Arrays give one statement text whatever the batch size, prepared once per
/// connection, and a dozen parameters instead of a dozen per row: one-step jobs/s rose
/// ~12% under load. For a few rows a `VALUES` list is quicker (a lone settlement took
/// ~120 µs longer as arrays), and a few sizes of it stay prepared anyway.
const UNNEST_FROM_ROWS: usize = 16;

/// Whether `rows` rows go as arrays on `backend`.
fn as_arrays(backend: Backend, rows: usize) -> bool {
    backend == Backend::Postgres && rows >= UNNEST_FROM_ROWS
}

/// Runs `statement(source)` over `rows` of `cols` values each, where `source` presents
/// them as a table `v(column1, column2, …)`: arrays through `UNNEST` when
/// [`as_arrays`], otherwise `VALUES` lists in chunks that fit the parameter limit.
/// Answers the rows the statement returns.
async fn over_rows(
    tx: &mut Tx,
    rows: Vec<Vec<Value>>,
    cols: usize,
    statement: impl Fn(&str) -> String,
    tys: &[Ty],
) -> Result<Vec<Row>, StoreError> {
    if as_arrays(tx.backend(), rows.len()) {
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
async fn insert_rows(
    tx: &mut Tx,
    prefix: &str,
    suffix: &str,
    cols: usize,
    rows: Vec<Vec<Value>>,
) -> Result<(), StoreError> {
    over_rows(tx, rows, cols, |source| format!("{prefix} SELECT * FROM {source} WHERE true {suffix}"), &[]).await?;
    Ok(())
}

fn history_rows(job_id: &str, now: Timestamp, history: &[HistoryEvent]) -> Result<Vec<Vec<Value>>, StoreError> {
    history
        .iter()
        .map(|event| {
            let body = serde_json::to_string(event).map_err(|e| corrupt(format!("encode history: {e}")))?;
            Ok(vec![Value::from(job_id), Value::from(now.as_micros()), Value::from(event.name()), Value::from(body)])
        })
        .collect()
}

fn machine_json(job: &Job) -> Result<String, StoreError> {
    serde_json::to_string(job).map_err(|e| corrupt(format!("encode job: {e}")))
}

/// Columns of one row of the batched job INSERT.
const INSERT_COLS: usize = 15;

/// Inserts one job; `None` when its idempotency key is taken.
async fn insert_job(tx: &mut Tx, new: &NewJob, now: Timestamp) -> Result<Option<i64>, StoreError> {
    Ok(insert_new_jobs(tx, &[new], now).await?.pop().flatten())
}

/// Inserts jobs with multi-row statements (jobs, then their steps and history); answers
/// each one's sequence number, `None` where its idempotency key was taken.
async fn insert_new_jobs(tx: &mut Tx, jobs: &[&NewJob], now: Timestamp) -> Result<Vec<Option<i64>>, StoreError> {
    let mut seqs: HashMap<String, i64> = HashMap::with_capacity(jobs.len());
    for chunk in jobs.chunks(MAX_PARAMS / INSERT_COLS) {
        let mut args = Vec::with_capacity(chunk.len() * INSERT_COLS);
        for new in chunk {
            let job = &new.job;
            args.extend([
                Value::from(job.id.to_string()),
                Value::from(new.tenant.0.as_str()),
                Value::from(new.kind.as_str()),
                Value::from(new.kind_version),
                Value::from(job.state.as_str()),
                Value::from(queue_of(job, now)),
                Value::from(i64::from(new.priority.rank())),
                Value::from(job.run_at.as_micros()),
                Value::from(job.last_activity_at.as_micros()),
                Value::from(job.created_at.as_micros()),
                Value::from(i64::from(job.progress)),
                Value::from(new.payload.clone()),
                Value::from(new.idempotency_key.clone()),
                Value::from(serde_json::to_string(&new.lease_keys).map_err(corrupt)?),
                Value::from(machine_json(job)?),
            ]);
        }
        let sql = format!(
            "INSERT INTO jobs (id, tenant_id, kind, kind_version, state, queue, priority, run_at, last_activity_at, \
             created_at, progress, payload, idempotency_key, lease_keys, machine, version) \
             SELECT column1, column2, column3, column4, column5, column6, column7, column8, column9, column10, \
             column11, column12, column13, column14, column15, 1 FROM (VALUES {}) AS v WHERE true \
             ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING RETURNING seq, id",
            values_list(chunk.len(), INSERT_COLS, 1)
        );
        for row in tx.fetch(&sql, args, &[Ty::Int, Ty::Text]).await? {
            seqs.insert(row.text(1), row.int(0));
        }
    }
    let mut steps = Vec::new();
    let mut history = Vec::new();
    let mut out = Vec::with_capacity(jobs.len());
    for new in jobs {
        let job = &new.job;
        let id = job.id.to_string();
        let seq = seqs.get(&id).copied();
        if seq.is_some() {
            for (i, step) in job.steps.iter().enumerate() {
                steps.push(step_row(&id, job.pass, i, step)?);
            }
            history.extend(history_rows(&id, now, &new.history)?);
        }
        out.push(seq);
    }
    insert_rows(tx, "INSERT INTO steps (job_id, pass, position, key, state, body, output)", "", 7, steps).await?;
    insert_rows(tx, "INSERT INTO history (job_id, at, event, body)", "", 4, history).await?;
    Ok(out)
}

async fn job_by_key(tx: &mut Tx, tenant: &TenantId, key: &str) -> Result<Option<JobRecord>, StoreError> {
    let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE tenant_id = $1 AND idempotency_key = $2");
    let rows = tx.fetch(&sql, vec![Value::from(tenant.0.as_str()), Value::from(key)], JOB_TYS).await?;
    let mut records = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
    attach_steps(tx, &mut records).await?;
    Ok(records.pop())
}

/// Takes a job's exclusive keys for a claim; answers the first busy key, if any (and
/// then holds none of them).
async fn acquire_keys(
    tx: &mut Tx,
    record: &JobRecord,
    fence: i64,
    owner: &str,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<Option<String>, StoreError> {
    let id = record.job.id.to_string();
    for key in distinct_keys(&record.lease_keys) {
        let taken = tx
            .execute(
                "INSERT INTO leases (key, job_id, holder_fence, token, owner, expires_at) VALUES ($1, $2, $3, 1, $4, $5) \
                 ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, holder_fence = excluded.holder_fence, \
                 token = leases.token + 1, owner = excluded.owner, expires_at = excluded.expires_at \
                 WHERE leases.expires_at <= $6 OR leases.job_id = excluded.job_id",
                vec![
                    Value::from(key.as_str()),
                    Value::from(id.as_str()),
                    Value::from(fence),
                    Value::from(owner),
                    Value::from(expires_at.as_micros()),
                    Value::from(now.as_micros()),
                ],
            )
            .await?;
        if taken == 0 {
            free_keys(tx, &id, fence, FenceMatch::Exactly).await?;
            return Ok(Some(key.clone()));
        }
    }
    Ok(None)
}

/// A job's lease keys without repeats, in one order for every job: a claim takes each
/// key once, and claims that share keys take them in the same order (so that two
/// PostgreSQL transactions cannot each hold a key the other waits for).
fn distinct_keys(keys: &[String]) -> BTreeSet<&String> {
    keys.iter().collect()
}

/// Which of a job's key rows [`free_keys`] lets go.
#[derive(Clone, Copy)]
enum FenceMatch {
    /// Those taken under the fence.
    Exactly,
    /// Those taken under the fence or an earlier one.
    AtMost,
}

/// Lets go of the keys job `id` holds under `fence`. The rows stay, marked free (no
/// job, expired), so that a key's token keeps growing across holders: a token that
/// started again at 1 after a release would repeat one an earlier holder was given.
async fn free_keys(tx: &mut Tx, id: &str, fence: i64, which: FenceMatch) -> Result<(), StoreError> {
    let op = match which {
        FenceMatch::Exactly => "=",
        FenceMatch::AtMost => "<=",
    };
    let sql = format!(
        "UPDATE leases SET job_id = '', holder_fence = 0, owner = '', expires_at = 0 \
         WHERE job_id = $1 AND holder_fence {op} $2"
    );
    tx.execute(&sql, vec![Value::from(id), Value::from(fence)]).await?;
    Ok(())
}

/// Applies version-checked writes inside `tx`: lease checks per write, then one
/// batched UPDATE for all job rows (each row still checked against its own version),
/// then the steps, history, outbox rows and spawned jobs of the writes that landed, in
/// a few multi-row statements.
async fn apply_writes(tx: &mut Tx, writes: Vec<JobWrite>, now: Timestamp) -> Result<Vec<WriteOutcome>, StoreError> {
    let mut outcomes: Vec<Option<WriteOutcome>> = vec![None; writes.len()];
    // 1. Lease checks and acquisitions, which only writes with exclusive keys need.
    for (i, w) in writes.iter().enumerate() {
        let keys = &w.record.lease_keys;
        if keys.is_empty() {
            continue;
        }
        let id = w.record.job.id.to_string();
        // A holder's report or heartbeat must still hold every key: one taken over
        // after it lapsed means another job may be using the resource.
        let holder_fence = match w.leases {
            LeaseOp::Release { fence, verify: true } | LeaseOp::Renew { fence, .. } => Some(fence),
            _ => None,
        };
        if let Some(fence) = holder_fence {
            let held = tx
                .fetch(
                    "SELECT COUNT(*) FROM leases WHERE job_id = $1 AND holder_fence = $2",
                    vec![Value::from(id.as_str()), Value::from(fence)],
                    &[Ty::Int],
                )
                .await?;
            let needed = distinct_keys(keys).len();
            if held.first().map_or(0, |r| r.int(0)) < i64::try_from(needed).unwrap_or(i64::MAX) {
                outcomes[i] = Some(WriteOutcome::LeaseLost);
            }
        }
        if let LeaseOp::Acquire { fence, ref owner, expires_at } = w.leases
            && let Some(key) = acquire_keys(tx, &w.record, fence, owner, expires_at, now).await?
        {
            outcomes[i] = Some(WriteOutcome::LeaseBusy { key });
        }
    }
    // 2. The job rows, version-checked, in batched UPDATEs.
    let pending: Vec<usize> = (0..writes.len()).filter(|i| outcomes[*i].is_none()).collect();
    let landed = update_jobs(tx, &writes, &pending, now).await?;
    // 3. What goes with each write that landed; undo the leases of those that did not.
    let mut steps = Vec::new();
    let mut history = Vec::new();
    let mut outbox = Vec::new();
    let mut spawns = Vec::new();
    for (i, w) in writes.into_iter().enumerate() {
        if outcomes[i].is_some() {
            continue;
        }
        let job = &w.record.job;
        let id = job.id.to_string();
        let keys = &w.record.lease_keys;
        if !landed.contains(&i) {
            if let LeaseOp::Acquire { fence, .. } = w.leases
                && !keys.is_empty()
            {
                free_keys(tx, &id, fence, FenceMatch::Exactly).await?;
            }
            outcomes[i] = Some(WriteOutcome::Conflict);
            continue;
        }
        match w.leases {
            LeaseOp::Renew { fence, expires_at } if !keys.is_empty() => {
                tx.execute(
                    "UPDATE leases SET expires_at = $1 WHERE job_id = $2 AND holder_fence = $3",
                    vec![Value::from(expires_at.as_micros()), Value::from(id.as_str()), Value::from(fence)],
                )
                .await?;
            }
            LeaseOp::Release { fence, .. } if !keys.is_empty() => {
                free_keys(tx, &id, fence, FenceMatch::AtMost).await?;
                wake_blocked(tx, keys).await?;
            }
            _ => {}
        }
        for &s in &w.steps_changed {
            if let Some(step) = job.steps.get(s) {
                steps.push(step_row(&id, job.pass, s, step)?);
            }
        }
        if let Some((pass, old)) = &w.previous_pass {
            for (s, step) in old.iter().enumerate() {
                steps.push(step_row(&id, *pass, s, step)?);
            }
        }
        history.extend(history_rows(&id, w.at, &w.history)?);
        for effect in &w.outbox {
            outbox.push(vec![
                Value::from(id.as_str()),
                Value::from(effect.as_str()),
                Value::from(now.as_micros()),
                Value::from(0i64),
                Value::from(now.as_micros()),
            ]);
        }
        if let Some(spawn) = w.spawn {
            spawns.push(spawn);
        }
        outcomes[i] = Some(WriteOutcome::Written { version: w.expected_version + 1 });
    }
    insert_rows(
        tx,
        "INSERT INTO steps (job_id, pass, position, key, state, body, output)",
        "ON CONFLICT (job_id, pass, position) DO UPDATE SET state = excluded.state, body = excluded.body, \
         output = excluded.output",
        7,
        steps,
    )
    .await?;
    insert_rows(tx, "INSERT INTO history (job_id, at, event, body)", "", 4, history).await?;
    insert_rows(tx, "INSERT INTO outbox (job_id, effect, run_at, attempts, created_at)", "", 5, outbox).await?;
    for spawn in &spawns {
        insert_job(tx, spawn, now).await?;
    }
    Ok(outcomes.into_iter().map(|o| o.unwrap_or(WriteOutcome::Conflict)).collect())
}

/// Columns of one row of the batched job UPDATE.
const UPDATE_COLS: usize = 12;

/// Writes the job rows of `writes[pending]` with one UPDATE per chunk, each row guarded by
/// its expected version; answers the indexes whose row was written.
async fn update_jobs(
    tx: &mut Tx,
    writes: &[JobWrite],
    pending: &[usize],
    now: Timestamp,
) -> Result<std::collections::HashSet<usize>, StoreError> {
    let mut landed = std::collections::HashSet::with_capacity(pending.len());
    // A job written twice in one batch would make the returned ids ambiguous: such
    // repeats go one by one after the first.
    let mut seen = std::collections::HashSet::new();
    let (unique, repeats): (Vec<usize>, Vec<usize>) =
        pending.iter().partition(|i| seen.insert(writes[**i].record.job.id));
    for group in std::iter::once(unique.as_slice()).chain(repeats.chunks(1)) {
        if group.is_empty() {
            continue;
        }
        let mut rows = Vec::with_capacity(group.len());
        let mut by_id = HashMap::with_capacity(group.len());
        for &i in group {
            let w = &writes[i];
            let job = &w.record.job;
            let id = job.id.to_string();
            by_id.insert(id.clone(), i);
            rows.push(vec![
                Value::from(id),
                Value::from(w.expected_version),
                Value::from(job.state.as_str()),
                Value::from(queue_of(job, now)),
                Value::from(w.preserve_queue),
                Value::from(job.run_at.as_micros()),
                Value::from(job.claim.as_ref().map(|c| c.expires_at.as_micros())),
                Value::from(job.last_activity_at.as_micros()),
                Value::from(job.settled_at.map(Timestamp::as_micros)),
                Value::from(i64::from(job.progress)),
                Value::from(job.successor.map(|s| s.to_string())),
                Value::from(machine_json(job)?),
            ]);
        }
        let update = |source: &str| {
            format!(
                "UPDATE jobs SET state = v.column3, \
                 queue = CASE WHEN v.column5 = 1 THEN jobs.queue ELSE v.column4 END, \
                 run_at = v.column6, claim_expires_at = CAST(v.column7 AS BIGINT), blocked_on = NULL, \
                 last_activity_at = v.column8, settled_at = CAST(v.column9 AS BIGINT), progress = v.column10, \
                 successor = CAST(v.column11 AS TEXT), version = jobs.version + 1, machine = v.column12 \
                 FROM {source} WHERE jobs.id = v.column1 AND jobs.version = v.column2 RETURNING jobs.id"
            )
        };
        for row in over_rows(tx, rows, UPDATE_COLS, update, &[Ty::Text]).await? {
            if let Some(&i) = by_id.get(&row.text(0)) {
                landed.insert(i);
            }
        }
    }
    Ok(landed)
}

/// What the claim writes came to: the claimed records (at their new version); a job
/// whose lease key is held by another waits on it (blocked), retried at the holder's
/// expiry or within a second at the latest.
async fn settle_claims(
    tx: &mut Tx,
    records: Vec<JobRecord>,
    outcomes: Vec<WriteOutcome>,
    now: Timestamp,
) -> Result<Vec<JobRecord>, StoreError> {
    let mut claimed = Vec::with_capacity(records.len());
    for (mut record, outcome) in records.into_iter().zip(outcomes) {
        match outcome {
            WriteOutcome::Written { version } => {
                record.version = version;
                claimed.push(record);
            }
            WriteOutcome::LeaseBusy { key } => {
                let holder_expiry = tx
                    .fetch("SELECT expires_at FROM leases WHERE key = $1", vec![Value::from(key.as_str())], &[Ty::Int])
                    .await?;
                let retry_at =
                    holder_expiry.first().map_or(now, |r| ts(r, 0)).min(now.plus(std::time::Duration::from_secs(1)));
                tx.execute(
                    "UPDATE jobs SET queue = $1, blocked_on = $2, run_at = $3 WHERE id = $4",
                    vec![
                        Value::from(queue::BLOCKED),
                        Value::from(key),
                        Value::from(retry_at.as_micros()),
                        Value::from(record.job.id.to_string()),
                    ],
                )
                .await?;
            }
            WriteOutcome::Conflict | WriteOutcome::LeaseLost => {}
        }
    }
    Ok(claimed)
}

/// Makes jobs blocked on any of `keys` ready again.
async fn wake_blocked(tx: &mut Tx, keys: &[String]) -> Result<(), StoreError> {
    let placeholders = (1..=keys.len()).map(|n| format!("${n}")).collect::<Vec<_>>().join(",");
    let sql = format!(
        "UPDATE jobs SET queue = {}, blocked_on = NULL WHERE queue = {} AND blocked_on IN ({placeholders})",
        queue::READY,
        queue::BLOCKED
    );
    tx.execute(&sql, keys.iter().map(|k| Value::from(k.as_str())).collect()).await?;
    Ok(())
}

/// Tells other hosts (LISTEN spindle_ready) that work is ready.
async fn notify_ready(tx: &mut Tx) -> Result<(), StoreError> {
    if tx.backend() == Backend::Postgres {
        tx.fetch("SELECT pg_notify('spindle_ready', '')::text", vec![], &[Ty::Text]).await?;
    }
    Ok(())
}

fn kind_version_from_row(row: &Row) -> KindVersion {
    KindVersion {
        tenant: TenantId(row.text(0)),
        kind: row.text(1),
        version: row.int(2),
        digest: row.text(3),
        spec: row.text(4),
        created_at: ts(row, 5),
    }
}

const KIND_VERSION_COLS: &str = "tenant_id, kind, version, digest, spec, created_at";
const KIND_VERSION_TYS: &[Ty] = &[Ty::Text, Ty::Text, Ty::Int, Ty::Text, Ty::Text, Ty::Int];

#[async_trait]
impl Storage for SqlStore {
    fn backend(&self) -> Backend {
        self.db.backend()
    }

    async fn create_tenant(&self, name: &str, now: Timestamp) -> Result<Tenant, StoreError> {
        let inserted = self
            .db
            .execute(
                "INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT DO NOTHING",
                vec![Value::from(name), Value::from(now.as_micros())],
            )
            .await?;
        if inserted == 0 {
            return Err(StoreError::Duplicate(format!("tenant {name}")));
        }
        Ok(Tenant { id: TenantId(name.to_owned()), name: name.to_owned(), created_at: now })
    }

    async fn tenant(&self, id: &TenantId) -> Result<Option<Tenant>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id, name, created_at FROM tenants WHERE id = $1",
                vec![Value::from(id.0.as_str())],
                &[Ty::Text, Ty::Text, Ty::Int],
            )
            .await?;
        Ok(rows.first().map(|r| Tenant { id: TenantId(r.text(0)), name: r.text(1), created_at: ts(r, 2) }))
    }

    async fn tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        let rows = self
            .db
            .fetch("SELECT id, name, created_at FROM tenants ORDER BY name", vec![], &[Ty::Text, Ty::Text, Ty::Int])
            .await?;
        Ok(rows.iter().map(|r| Tenant { id: TenantId(r.text(0)), name: r.text(1), created_at: ts(r, 2) }).collect())
    }

    async fn add_token(
        &self,
        hash: &str,
        tenant: Option<&TenantId>,
        role: Role,
        name: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO api_tokens (token_hash, tenant_id, role, name, created_at) VALUES ($1, $2, $3, $4, $5)",
                vec![
                    Value::from(hash),
                    Value::from(tenant.map(|t| t.0.clone())),
                    Value::from(role.as_str()),
                    Value::from(name),
                    Value::from(now.as_micros()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<(Option<TenantId>, Role)>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT tenant_id, role FROM api_tokens WHERE token_hash = $1",
                vec![Value::from(hash)],
                &[Ty::Text, Ty::Text],
            )
            .await?;
        Ok(rows.first().map(|r| {
            let role = if r.text(1) == "operator" { Role::Operator } else { Role::Tenant };
            (r.opt_text(0).map(TenantId), role)
        }))
    }

    async fn put_component(&self, digest: &str, bytes: &[u8], now: Timestamp) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO components (digest, bytes, size, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                vec![
                    Value::from(digest),
                    Value::from(bytes.to_vec()),
                    Value::from(i64::try_from(bytes.len()).unwrap_or(i64::MAX)),
                    Value::from(now.as_micros()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn component(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut rows = self
            .db
            .fetch("SELECT bytes FROM components WHERE digest = $1", vec![Value::from(digest)], &[Ty::Blob])
            .await?;
        Ok(rows.pop().and_then(|mut r| r.take_blob(0)))
    }

    async fn add_kind_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        digest: &str,
        spec: &str,
        now: Timestamp,
    ) -> Result<KindVersion, StoreError> {
        let mut tx = self.db.begin().await?;
        let rows = tx
            .fetch(
                "INSERT INTO kinds (tenant_id, name, current_version, latest_version, updated_at) VALUES ($1, $2, 1, 1, $3) \
                 ON CONFLICT (tenant_id, name) DO UPDATE SET current_version = kinds.latest_version + 1, \
                 latest_version = kinds.latest_version + 1, updated_at = excluded.updated_at RETURNING latest_version",
                vec![Value::from(tenant.0.as_str()), Value::from(kind), Value::from(now.as_micros())],
                &[Ty::Int],
            )
            .await?;
        let version = rows.first().map(|r| r.int(0)).ok_or_else(|| corrupt("kind upsert returned nothing"))?;
        tx.execute(
            "INSERT INTO kind_versions (tenant_id, kind, version, digest, spec, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            vec![
                Value::from(tenant.0.as_str()),
                Value::from(kind),
                Value::from(version),
                Value::from(digest),
                Value::from(spec),
                Value::from(now.as_micros()),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(KindVersion {
            tenant: tenant.clone(),
            kind: kind.to_owned(),
            version,
            digest: digest.to_owned(),
            spec: spec.to_owned(),
            created_at: now,
        })
    }

    async fn current_kind(&self, tenant: &TenantId, kind: &str) -> Result<Option<KindVersion>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT v.tenant_id, v.kind, v.version, v.digest, v.spec, v.created_at FROM kinds k \
                 JOIN kind_versions v ON v.tenant_id = k.tenant_id AND v.kind = k.name AND v.version = k.current_version \
                 WHERE k.tenant_id = $1 AND k.name = $2",
                vec![Value::from(tenant.0.as_str()), Value::from(kind)],
                KIND_VERSION_TYS,
            )
            .await?;
        Ok(rows.first().map(kind_version_from_row))
    }

    async fn kind_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
    ) -> Result<Option<KindVersion>, StoreError> {
        let sql = format!(
            "SELECT {KIND_VERSION_COLS} FROM kind_versions WHERE tenant_id = $1 AND kind = $2 AND version = $3"
        );
        let rows = self
            .db
            .fetch(
                &sql,
                vec![Value::from(tenant.0.as_str()), Value::from(kind), Value::from(version)],
                KIND_VERSION_TYS,
            )
            .await?;
        Ok(rows.first().map(kind_version_from_row))
    }

    async fn kinds(&self, tenant: &TenantId) -> Result<Vec<KindEntry>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT name, current_version, latest_version, updated_at FROM kinds WHERE tenant_id = $1 ORDER BY name",
                vec![Value::from(tenant.0.as_str())],
                &[Ty::Text, Ty::Int, Ty::Int, Ty::Int],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| KindEntry {
                kind: r.text(0),
                current_version: r.int(1),
                latest_version: r.int(2),
                updated_at: ts(r, 3),
            })
            .collect())
    }

    async fn kind_versions(&self, tenant: &TenantId, kind: &str) -> Result<Vec<KindVersion>, StoreError> {
        let sql = format!(
            "SELECT {KIND_VERSION_COLS} FROM kind_versions WHERE tenant_id = $1 AND kind = $2 ORDER BY version"
        );
        let rows =
            self.db.fetch(&sql, vec![Value::from(tenant.0.as_str()), Value::from(kind)], KIND_VERSION_TYS).await?;
        Ok(rows.iter().map(kind_version_from_row).collect())
    }

    async fn set_current_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let changed = self
            .db
            .execute(
                "UPDATE kinds SET current_version = $1, updated_at = $2 WHERE tenant_id = $3 AND name = $4 \
                 AND EXISTS (SELECT 1 FROM kind_versions v WHERE v.tenant_id = $3 AND v.kind = $4 AND v.version = $1)",
                vec![
                    Value::from(version),
                    Value::from(now.as_micros()),
                    Value::from(tenant.0.as_str()),
                    Value::from(kind),
                ],
            )
            .await?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("version {version} of kind {kind}")));
        }
        Ok(())
    }

    async fn insert_jobs(&self, jobs: Vec<NewJob>, now: Timestamp) -> Result<Vec<Inserted>, StoreError> {
        let mut tx = self.db.begin().await?;
        // Jobs whose idempotency key already names a job answer that job.
        let mut existing: Vec<Option<JobRecord>> = Vec::with_capacity(jobs.len());
        for new in &jobs {
            existing.push(match &new.idempotency_key {
                Some(key) => job_by_key(&mut tx, &new.tenant, key).await?,
                None => None,
            });
        }
        let fresh: Vec<&NewJob> = jobs.iter().zip(&existing).filter(|(_, e)| e.is_none()).map(|(j, _)| j).collect();
        let any_ready = fresh.iter().any(|j| queue_of(&j.job, now) == queue::READY);
        let mut seqs = insert_new_jobs(&mut tx, &fresh, now).await?.into_iter();
        let mut out = Vec::with_capacity(jobs.len());
        for (new, found) in jobs.into_iter().zip(existing) {
            if let Some(found) = found {
                out.push(Inserted::Existing(found));
                continue;
            }
            match seqs.next().flatten() {
                Some(seq) => {
                    let queued = queue_of(&new.job, now) != queue::IDLE;
                    out.push(Inserted::Created(JobRecord {
                        job: new.job,
                        version: 1,
                        seq,
                        tenant: new.tenant,
                        kind: new.kind,
                        kind_version: new.kind_version,
                        priority: new.priority,
                        payload: new.payload,
                        idempotency_key: new.idempotency_key,
                        lease_keys: new.lease_keys,
                        queued,
                    }));
                }
                None => {
                    // Another submission (concurrent, or earlier in this batch) took the key.
                    let key = new.idempotency_key.as_deref().unwrap_or_default();
                    let found = job_by_key(&mut tx, &new.tenant, key)
                        .await?
                        .ok_or_else(|| corrupt("idempotency conflict without a job"))?;
                    out.push(Inserted::Existing(found));
                }
            }
        }
        if any_ready {
            notify_ready(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE id = $1");
        let rows = self.db.fetch(&sql, vec![Value::from(id.to_string())], JOB_TYS).await?;
        let mut records = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
        if records.is_empty() {
            return Ok(None);
        }
        let steps = self
            .db
            .fetch(
                "SELECT position, body, output FROM steps WHERE job_id = $1 AND pass = $2 ORDER BY position",
                vec![Value::from(id.to_string()), Value::from(i64::from(records[0].job.pass))],
                &[Ty::Int, Ty::Text, Ty::Blob],
            )
            .await?;
        let mut record = records.remove(0);
        for mut row in steps {
            let mut step: Step = serde_json::from_str(&row.text(1)).map_err(|e| corrupt(format!("step: {e}")))?;
            step.output = row.take_blob(2);
            record.job.steps.push(step);
        }
        Ok(Some(record))
    }

    async fn update_job(&self, id: JobId, now: Timestamp, derive: Derive<'_>) -> Result<Updated, StoreError> {
        let mut tx = self.db.begin().await?;
        let lock = match self.db.backend() {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR UPDATE",
        };
        let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE id = $1{lock}");
        let rows = tx.fetch(&sql, vec![Value::from(id.to_string())], JOB_TYS).await?;
        let mut records = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
        attach_steps(&mut tx, &mut records).await?;
        // Nothing to write: end the transaction now. A dropped one rolls back only when
        // its pooled connection is next used, and until then PostgreSQL keeps the row
        // locked (claims would skip it, other updates would wait for it).
        let Some(record) = records.pop() else {
            tx.commit().await?;
            return Ok(Updated::Missing);
        };
        let Some(write) = derive(&record) else {
            tx.commit().await?;
            return Ok(Updated::Skipped(record));
        };
        let ready = queue_of(&write.record.job, now) == queue::READY || write.spawn.is_some();
        let mut new_record = write.record.clone();
        let outcome = apply_writes(&mut tx, vec![write], now).await?.pop().unwrap_or(WriteOutcome::Conflict);
        if let WriteOutcome::Written { version } = outcome {
            new_record.version = version;
            if ready {
                notify_ready(&mut tx).await?;
            }
        }
        tx.commit().await?;
        Ok(Updated::Wrote(new_record, outcome))
    }

    async fn write(&self, writes: Vec<JobWrite>, now: Timestamp) -> Result<Vec<WriteOutcome>, StoreError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let ready = writes.iter().any(|w| queue_of(&w.record.job, now) == queue::READY || w.spawn.is_some());
        let mut tx = self.db.begin().await?;
        let outcomes = apply_writes(&mut tx, writes, now).await?;
        if ready {
            notify_ready(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(outcomes)
    }

    async fn claim_filtered(
        &self,
        limit: u32,
        now: Timestamp,
        filter: &ClaimFilter,
        derive: Derive<'_>,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut tx = self.db.begin().await?;
        let (writes, records) = self.claim_writes(&mut tx, limit, now, filter, derive).await?;
        if writes.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let outcomes = apply_writes(&mut tx, writes, now).await?;
        let claimed = settle_claims(&mut tx, records, outcomes, now).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    async fn write_and_claim(
        &self,
        writes: Vec<JobWrite>,
        now: Timestamp,
        claim_limit: u32,
        filter: &ClaimFilter,
        derive: Derive<'_>,
    ) -> Result<(Vec<WriteOutcome>, Vec<JobRecord>), StoreError> {
        let ready = writes.iter().any(|w| queue_of(&w.record.job, now) == queue::READY || w.spawn.is_some());
        let mut tx = self.db.begin().await?;
        // The candidates are read before the outcomes are written: a job settled here is
        // still claimed as read, so it is never its own successor's candidate.
        let (claims, records) = self.claim_writes(&mut tx, claim_limit, now, filter, derive).await?;
        let settled = writes.len();
        let mut all = writes;
        all.extend(claims);
        let mut outcomes = apply_writes(&mut tx, all, now).await?;
        let claim_outcomes = outcomes.split_off(settled);
        let claimed = settle_claims(&mut tx, records, claim_outcomes, now).await?;
        if ready {
            notify_ready(&mut tx).await?;
        }
        tx.commit().await?;
        Ok((outcomes, claimed))
    }

    async fn promote_due(&self, now: Timestamp) -> Result<u64, StoreError> {
        let mut tx = self.db.begin().await?;
        let n = tx
            .execute(
                "UPDATE jobs SET queue = $1, blocked_on = NULL WHERE queue >= $2 AND run_at <= $3",
                vec![Value::from(queue::READY), Value::from(queue::DELAYED), Value::from(now.as_micros())],
            )
            .await?;
        if n > 0 {
            notify_ready(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(n)
    }

    async fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        let rows = self.db.fetch("SELECT MIN(run_at) FROM jobs WHERE queue >= 2", vec![], &[Ty::Int]).await?;
        Ok(rows.first().and_then(|r| r.opt_int(0)).map(Timestamp::from_micros))
    }

    async fn lapsed_claims(&self, now: Timestamp, limit: u32) -> Result<Vec<JobId>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id FROM jobs WHERE claim_expires_at IS NOT NULL AND claim_expires_at <= $1 \
                 ORDER BY claim_expires_at LIMIT $2",
                vec![Value::from(now.as_micros()), Value::from(i64::from(limit))],
                &[Ty::Text],
            )
            .await?;
        rows.iter().map(|r| r.text(0).parse().map_err(|e| corrupt(format!("job id: {e}")))).collect()
    }

    async fn silent_jobs(&self, before: Timestamp, limit: u32) -> Result<Vec<JobId>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id FROM jobs WHERE state IN ('pending', 'running') AND last_activity_at <= $1 \
                 ORDER BY last_activity_at LIMIT $2",
                vec![Value::from(before.as_micros()), Value::from(i64::from(limit))],
                &[Ty::Text],
            )
            .await?;
        rows.iter().map(|r| r.text(0).parse().map_err(|e| corrupt(format!("job id: {e}")))).collect()
    }

    async fn history(&self, id: JobId) -> Result<Vec<HistoryEntry>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id, at, body FROM history WHERE job_id = $1 ORDER BY id",
                vec![Value::from(id.to_string())],
                &[Ty::Int, Ty::Int, Ty::Text],
            )
            .await?;
        rows.iter()
            .map(|r| {
                let event = serde_json::from_str(&r.text(2)).map_err(|e| corrupt(format!("history: {e}")))?;
                Ok(HistoryEntry { id: r.int(0), at: ts(r, 1), event })
            })
            .collect()
    }

    async fn append_history(&self, id: JobId, events: &[HistoryEvent], now: Timestamp) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        insert_rows(
            &mut tx,
            "INSERT INTO history (job_id, at, event, body)",
            "",
            4,
            history_rows(&id.to_string(), now, events)?,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_jobs(&self, tenant: &TenantId, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError> {
        let mut sql = format!("SELECT {JOB_COLS} FROM jobs WHERE tenant_id = $1");
        let mut args = vec![Value::from(tenant.0.as_str())];
        if filter.dead_letters {
            sql.push_str(" AND state = 'failed' AND successor IS NULL");
        } else if let Some(state) = filter.state {
            args.push(Value::from(state.as_str()));
            sql.push_str(&format!(" AND state = ${}", args.len()));
        }
        if let Some(kind) = &filter.kind {
            args.push(Value::from(kind.as_str()));
            sql.push_str(&format!(" AND kind = ${}", args.len()));
        }
        if let Some(before) = filter.before_seq {
            args.push(Value::from(before));
            sql.push_str(&format!(" AND seq < ${}", args.len()));
        }
        args.push(Value::from(i64::from(filter.limit.clamp(1, 1000))));
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ${}", args.len()));
        let rows = self.db.fetch(&sql, args, JOB_TYS).await?;
        let mut records = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
        let mut tx = self.db.begin().await?;
        attach_steps(&mut tx, &mut records).await?;
        tx.commit().await?;
        Ok(records)
    }

    async fn pass_steps(&self, id: JobId, pass: u32) -> Result<Vec<Step>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT body, output FROM steps WHERE job_id = $1 AND pass = $2 ORDER BY position",
                vec![Value::from(id.to_string()), Value::from(i64::from(pass))],
                &[Ty::Text, Ty::Blob],
            )
            .await?;
        rows.into_iter()
            .map(|mut r| {
                let mut step: Step = serde_json::from_str(&r.text(0)).map_err(|e| corrupt(format!("step: {e}")))?;
                step.output = r.take_blob(1);
                Ok(step)
            })
            .collect()
    }

    async fn depths(&self) -> Result<Vec<Depth>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT tenant_id, kind, state, COUNT(*) FROM jobs WHERE state IN ('pending', 'running', 'paused') \
                 GROUP BY tenant_id, kind, state",
                vec![],
                &[Ty::Text, Ty::Text, Ty::Text, Ty::Int],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Depth { tenant: TenantId(r.text(0)), kind: r.text(1), state: r.text(2), count: r.int(3) })
            .collect())
    }

    async fn outbox_claim(&self, now: Timestamp, lease_micros: i64, limit: u32) -> Result<Vec<OutboxItem>, StoreError> {
        let mut tx = self.db.begin().await?;
        let sql = format!(
            "SELECT id, job_id, effect, attempts FROM outbox WHERE run_at <= $1 ORDER BY run_at LIMIT $2{}",
            self.skip_locked()
        );
        let rows = tx
            .fetch(
                &sql,
                vec![Value::from(now.as_micros()), Value::from(i64::from(limit))],
                &[Ty::Int, Ty::Text, Ty::Text, Ty::Int],
            )
            .await?;
        let mut items = Vec::with_capacity(rows.len());
        for r in &rows {
            tx.execute(
                "UPDATE outbox SET run_at = $1 WHERE id = $2",
                vec![Value::from(now.as_micros().saturating_add(lease_micros)), Value::from(r.int(0))],
            )
            .await?;
            items.push(OutboxItem {
                id: r.int(0),
                job_id: r.text(1).parse().map_err(|e| corrupt(format!("outbox job id: {e}")))?,
                effect: OutboxEffect::parse(&r.text(2)).ok_or_else(|| corrupt("outbox effect"))?,
                attempts: r.int(3),
            });
        }
        tx.commit().await?;
        Ok(items)
    }

    async fn outbox_done(&self, id: i64) -> Result<(), StoreError> {
        self.db.execute("DELETE FROM outbox WHERE id = $1", vec![Value::from(id)]).await?;
        Ok(())
    }

    async fn outbox_retry(&self, id: i64, at: Timestamp) -> Result<(), StoreError> {
        self.db
            .execute(
                "UPDATE outbox SET attempts = attempts + 1, run_at = $1 WHERE id = $2",
                vec![Value::from(at.as_micros()), Value::from(id)],
            )
            .await?;
        Ok(())
    }

    async fn singleton(
        &self,
        name: &str,
        owner: &str,
        ttl_micros: i64,
        now: Timestamp,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self.db.begin().await?;
        let rows = tx
            .fetch(
                "INSERT INTO singletons (name, owner, fence, expires_at) VALUES ($1, $2, 1, $3) \
                 ON CONFLICT (name) DO UPDATE SET \
                 fence = CASE WHEN singletons.owner = excluded.owner THEN singletons.fence ELSE singletons.fence + 1 END, \
                 owner = excluded.owner, expires_at = excluded.expires_at \
                 WHERE singletons.owner = excluded.owner OR singletons.expires_at <= $4 RETURNING fence",
                vec![
                    Value::from(name),
                    Value::from(owner),
                    Value::from(now.as_micros().saturating_add(ttl_micros)),
                    Value::from(now.as_micros()),
                ],
                &[Ty::Int],
            )
            .await?;
        tx.commit().await?;
        Ok(rows.first().map(|r| r.int(0)))
    }

    async fn release_singleton(&self, name: &str, owner: &str) -> Result<(), StoreError> {
        self.db
            .execute(
                "UPDATE singletons SET expires_at = 0 WHERE name = $1 AND owner = $2",
                vec![Value::from(name), Value::from(owner)],
            )
            .await?;
        Ok(())
    }

    async fn invalidate_lease(&self, key: &str) -> Result<Option<JobId>, StoreError> {
        let mut tx = self.db.begin().await?;
        let lock = match self.db.backend() {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR UPDATE",
        };
        let sql = format!("SELECT job_id FROM leases WHERE key = $1 AND job_id <> ''{lock}");
        let holder = tx.fetch(&sql, vec![Value::from(key)], &[Ty::Text]).await?.first().map(|r| r.text(0));
        if holder.is_some() {
            tx.execute(
                "UPDATE leases SET job_id = '', holder_fence = 0, owner = '', expires_at = 0 WHERE key = $1",
                vec![Value::from(key)],
            )
            .await?;
            wake_blocked(&mut tx, &[key.to_owned()]).await?;
            notify_ready(&mut tx).await?;
        }
        tx.commit().await?;
        holder.map(|h| h.parse().map_err(|e| corrupt(format!("lease job id: {e}")))).transpose()
    }

    async fn lease_holder(&self, key: &str) -> Result<Option<(JobId, i64)>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT job_id, token FROM leases WHERE key = $1 AND job_id <> ''",
                vec![Value::from(key)],
                &[Ty::Text, Ty::Int],
            )
            .await?;
        rows.first()
            .map(|r| Ok((r.text(0).parse().map_err(|e| corrupt(format!("lease job id: {e}")))?, r.int(1))))
            .transpose()
    }

    async fn bump_counter(&self, name: &str, by: i64) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO counters (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
                vec![Value::from(name), Value::from(by)],
            )
            .await?;
        Ok(())
    }

    async fn counters(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows =
            self.db.fetch("SELECT name, value FROM counters ORDER BY name", vec![], &[Ty::Text, Ty::Int]).await?;
        Ok(rows.iter().map(|r| (r.text(0), r.int(1))).collect())
    }
}
