//! New jobs' rows: a submission's, a retry's and a fan-out's children's jobs, their
//! steps and history, inserted in one statement (PostgreSQL) or one batch (SQLite),
//! pinned to the kind versions they were submitted against.

use std::collections::HashMap;

use spindle_core::Timestamp;

use super::error::StoreError;
use super::job_rows::{history_rows, machine_json, step_row};
use super::records::{IndexedColumns, NewJob, TenantId};
use super::rows::{Batch, corrupt};
use super::sql::{Backend, Column, Tx, Ty, Value, unnest_from};

/// Columns of one row of the batched job INSERT: identity and submission, the indexed
/// columns, the machine, the workflow parent, the fair tag.
pub(super) const INSERT_COLS: usize = 23;

/// `INSERT INTO jobs (…)` with the columns [`job_insert_row`] fills, in its order, and
/// `version` (1 for every new job).
pub(super) fn insert_into_jobs() -> String {
    format!(
        "INSERT INTO jobs (id, tenant_id, kind, kind_version, priority, created_at, payload, idempotency_key, \
         lease_keys, {}, machine, parent_id, parent_slot, parent_index, fair_tag, version)",
        IndexedColumns::COLUMNS
    )
}

/// The types of [`job_insert_row`]'s values, in its order.
pub(super) fn insert_types() -> Vec<Ty> {
    let head = [Ty::Text, Ty::Text, Ty::Text, Ty::Int, Ty::Int, Ty::Int, Ty::Blob, Ty::OptText, Ty::Text];
    let tail = [Ty::Text, Ty::OptText, Ty::OptText, Ty::OptInt, Ty::Int];
    let types = [&head[..], &IndexedColumns::TYPES, &tail].concat();
    debug_assert_eq!(types.len(), INSERT_COLS);
    types
}

/// The types of a step row's values ([`step_row`]) and a history row's ([`history_rows`]).
pub(super) const STEP_TYS: [Ty; 7] = [Ty::Text, Ty::Int, Ty::Int, Ty::Text, Ty::Text, Ty::Text, Ty::OptBlob];

pub(super) const HISTORY_TYS: [Ty; 4] = [Ty::Text, Ty::Int, Ty::Text, Ty::Text];

/// A job's idempotency key taken: the job is not inserted, and nothing else of it is.
pub(super) const UNLESS_KEY_TAKEN: &str =
    "ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING";

/// One new job's row for [`insert_into_jobs`].
pub(super) fn job_insert_row(new: &NewJob, tag: i64) -> Result<Vec<Value>, StoreError> {
    let job = &new.job;
    let mut row = Vec::with_capacity(INSERT_COLS);
    row.extend([
        Value::from(job.id.to_string()),
        Value::from(new.tenant.0.as_str()),
        Value::from(new.kind.as_str()),
        Value::from(new.kind_version),
        Value::from(i64::from(new.priority.rank())),
        Value::from(job.created_at.as_micros()),
        Value::from(new.payload.clone()),
        Value::from(new.idempotency_key.clone()),
        Value::from(serde_json::to_string(&new.lease_keys).map_err(corrupt)?),
    ]);
    row.extend(IndexedColumns::of(job).values());
    row.push(Value::from(machine_json(job)?));
    let parent = job.parent.as_ref();
    row.push(Value::from(parent.map(|p| p.job.to_string())));
    row.push(Value::from(parent.map(|p| p.slot.clone())));
    row.push(Value::from(parent.map(|p| i64::from(p.index))));
    row.push(Value::from(tag));
    Ok(row)
}

/// Inserts jobs with their steps and history; answers each one's sequence number,
/// `None` where its idempotency key was taken. Each job gets its fair tag (all 0 unless
/// `fair`); `admitted`, when the caller admitted the jobs, holds what admission read
/// for the tags. With `notify`, other hosts are told that work is ready. With `pinned`, each
/// job's kind version must be its kind's current one, or nothing is written
/// ([`StoreError::VersionMoved`]).
///
/// On PostgreSQL all of it is one statement (see [`insert_in_one_statement`]), on SQLite
/// one batch of statements (see [`insert_in_one_batch`]).
pub(super) async fn insert_new_jobs(
    tx: &mut Tx,
    jobs: &[&NewJob],
    now: Timestamp,
    fair: bool,
    admitted: Option<&super::capacity::Admitted>,
    notify: bool,
    pinned: bool,
) -> Result<Vec<Option<i64>>, StoreError> {
    let pins = if pinned { pins_of(jobs) } else { Pins::new() };
    let fair_tags = super::capacity::fair_tags(tx, jobs, fair, admitted).await?;
    let rows =
        jobs.iter().zip(&fair_tags.tags).map(|(new, tag)| job_insert_row(new, *tag)).collect::<Result<_, _>>()?;
    let seqs = match tx.backend() {
        Backend::Postgres => insert_in_one_statement(tx, jobs, rows, &fair_tags, now, notify, &pins).await?,
        Backend::Sqlite => insert_in_one_batch(tx, jobs, rows, &fair_tags, now, &pins).await?,
    };
    Ok(jobs.iter().map(|new| seqs.get(&new.job.id.to_string()).copied()).collect())
}

/// PostgreSQL: the jobs, the steps and history of those inserted (a job whose key was
/// taken brings none), the tenants' last fair tags and the ready signal in one
/// statement of data-modifying `WITH` queries, every table's rows bound as arrays: one
/// round trip, and one statement text (prepared once per connection) whatever the
/// number of jobs. A single submission made eleven round trips before, five of them
/// these writes. Pinned versions no longer current (`g`) write nothing (no job, no fair
/// tag, no ready signal: the statement may run outside a transaction, with no rollback
/// to undo it), and come back as rows of their own. A deploy committing after the statement's snapshot orders
/// after the submission, as one committing just after a version was read always did.
pub(super) async fn insert_in_one_statement(
    tx: &mut Tx,
    jobs: &[&NewJob],
    rows: Vec<Vec<Value>>,
    fair_tags: &super::capacity::FairTags,
    now: Timestamp,
    notify: bool,
    pins: &Pins<'_>,
) -> Result<HashMap<String, i64>, StoreError> {
    let (steps, history) = steps_and_history(jobs.iter().copied(), now)?;
    let mut columns = Vec::new();
    let mut source = |rows: Vec<Vec<Value>>, types: &[Ty], alias: &str, ordinality: bool| {
        let table = Column::of_rows(rows, types);
        let sql = unnest_from(&table, alias, columns.len() + 1, ordinality);
        columns.extend(table);
        sql
    };
    let jobs_source = source(rows, &insert_types(), "v", false);
    let steps_source = source(steps, &STEP_TYS, "s", false);
    let history_source = source(history, &HISTORY_TYS, "h", true);
    let tags_source = source(fair_tags.last_rows(), &[Ty::Text, Ty::Int, Ty::Int], "t", false);
    let pins_source = source(pin_rows(pins), &[Ty::Text, Ty::Text, Ty::Int], "p", false);
    let job_cols = (1..=INSERT_COLS).map(|i| format!("column{i}")).collect::<Vec<_>>().join(", ");
    // History rows go in the order they were given (their ids are the job's history
    // order), whatever order the join would produce them in.
    let sql = format!(
        "WITH g AS MATERIALIZED ({not_current}), \
         j AS ({insert_into_jobs} SELECT {job_cols}, 1 FROM {jobs_source} WHERE NOT EXISTS (SELECT 1 FROM g) \
               {UNLESS_KEY_TAKEN} RETURNING seq, id), \
         s AS (INSERT INTO steps (job_id, pass, position, key, state, body, output) \
               SELECT s.column1, s.column2, s.column3, s.column4, s.column5, s.column6, s.column7 \
               FROM {steps_source} JOIN j ON j.id = s.column1), \
         h AS (INSERT INTO history (job_id, at, event, body) \
               SELECT h.column1, h.column2, h.column3, h.column4 \
               FROM {history_source} JOIN j ON j.id = h.column1 ORDER BY h.ordinality), \
         t AS (INSERT INTO fair_tags (tenant_id, priority, last_tag) SELECT * FROM {tags_source} \
               WHERE NOT EXISTS (SELECT 1 FROM g) \
               ON CONFLICT (tenant_id, priority) DO UPDATE SET last_tag = GREATEST(fair_tags.last_tag, excluded.last_tag)), \
         n AS MATERIALIZED (SELECT {notify_ready} WHERE NOT EXISTS (SELECT 1 FROM g)) \
         SELECT j.seq, j.id, 0::int8 FROM j LEFT JOIN n ON true UNION ALL SELECT g.pinned, g.kind, 1::int8 FROM g",
        not_current = not_current(&pins_source, "p"),
        insert_into_jobs = insert_into_jobs(),
        notify_ready = if notify { "pg_notify('spindle_ready', '')::text" } else { "NULL::text" },
    );
    seqs_unless_moved(&tx.fetch_columns(&sql, columns, &INSERTED_TYS).await?)
}

/// SQLite: the check of the pinned versions, the jobs, the steps and history of those
/// inserted and the tenants' last fair tags, as one batch of statements: one hand-off to
/// the connection's worker thread, where sending them one by one made five (each tens of
/// microseconds on a busy machine, and a chance to wait for a core). A statement cannot
/// read what the one before it answered, so a step or history row goes in only beside
/// its job's row (a job whose key was taken has none). A moved version comes back as a
/// row; the error drops the transaction, and with it everything the batch wrote.
pub(super) async fn insert_in_one_batch(
    tx: &mut Tx,
    jobs: &[&NewJob],
    rows: Vec<Vec<Value>>,
    fair_tags: &super::capacity::FairTags,
    now: Timestamp,
    pins: &Pins<'_>,
) -> Result<HashMap<String, i64>, StoreError> {
    let mut batch = Batch::default();
    batch.over_rows(pin_rows(pins), 3, |source| format!("SELECT pinned, kind, 1 FROM ({})", not_current(source, "v")));
    let job_cols = (1..=INSERT_COLS).map(|i| format!("column{i}")).collect::<Vec<_>>().join(", ");
    let insert_into_jobs = insert_into_jobs();
    batch.over_rows(rows, INSERT_COLS, |source| {
        format!(
            "{insert_into_jobs} SELECT {job_cols}, 1 FROM {source} WHERE true {UNLESS_KEY_TAKEN} RETURNING seq, id, 0"
        )
    });
    // Without idempotency keys every job goes in, and its rows need no look-up.
    let beside_its_job = if jobs.iter().any(|new| new.idempotency_key.is_some()) {
        " WHERE EXISTS (SELECT 1 FROM jobs WHERE jobs.id = v.column1)"
    } else {
        ""
    };
    let (steps, history) = steps_and_history(jobs.iter().copied(), now)?;
    batch.over_rows(steps, STEP_TYS.len(), |source| {
        format!("INSERT INTO steps (job_id, pass, position, key, state, body, output) SELECT * FROM {source}{beside_its_job}")
    });
    batch.over_rows(history, HISTORY_TYS.len(), |source| {
        format!("INSERT INTO history (job_id, at, event, body) SELECT * FROM {source}{beside_its_job}")
    });
    batch.over_rows(fair_tags.last_rows(), 3, |source| {
        format!(
            "INSERT INTO fair_tags (tenant_id, priority, last_tag) SELECT * FROM {source} WHERE true \
             ON CONFLICT (tenant_id, priority) DO UPDATE SET last_tag = max(fair_tags.last_tag, excluded.last_tag)"
        )
    });
    seqs_unless_moved(&batch.run(tx, &INSERTED_TYS).await?)
}

/// What an insert answers: `(seq, id, 0)` for each job written, `(pinned, kind, 1)` for
/// each pinned version no longer current ([`not_current`]).
pub(super) const INSERTED_TYS: [Ty; 3] = [Ty::Int, Ty::Text, Ty::Int];

/// The sequence numbers of the jobs written, by id, unless a version had moved.
pub(super) fn seqs_unless_moved(answered: &[super::sql::Row]) -> Result<HashMap<String, i64>, StoreError> {
    let mut seqs = HashMap::with_capacity(answered.len());
    for row in answered {
        let (number, text) = (row.int(0, "jobs.seq (inserted)")?, row.text(1, "jobs.id (inserted)")?);
        if row.int(2, "jobs.moved (inserted)")? == 1 {
            return Err(StoreError::VersionMoved { kind: text, pinned: number });
        }
        seqs.insert(text, number);
    }
    Ok(seqs)
}

/// Rows of statement values.
pub(super) type Rows = Vec<Vec<Value>>;

/// The step rows and history rows of `jobs`, in order (a lean job has neither).
pub(super) fn steps_and_history<'a>(
    jobs: impl Iterator<Item = &'a NewJob>,
    now: Timestamp,
) -> Result<(Rows, Rows), StoreError> {
    let mut steps = Vec::new();
    let mut history = Vec::new();
    for new in jobs.filter(|new| !new.job.rules.lean) {
        let job = &new.job;
        let id = job.id.to_string();
        for (i, step) in job.steps.iter().enumerate() {
            steps.push(step_row(&id, job.pass, i, step)?);
        }
        history.extend(history_rows(&id, now, &new.history)?);
    }
    Ok((steps, history))
}

/// Each job's tenant, kind and version, once: what a pinned submission checks.
pub(super) type Pins<'a> = std::collections::BTreeSet<(&'a TenantId, &'a str, i64)>;

pub(super) fn pins_of<'a>(jobs: &[&'a NewJob]) -> Pins<'a> {
    jobs.iter().map(|new| (&new.tenant, new.kind.as_str(), new.kind_version)).collect()
}

/// The pins as (tenant, kind, version) rows, for [`not_current`]'s source.
pub(super) fn pin_rows(pins: &Pins<'_>) -> Rows {
    pins.iter().map(|(t, k, v)| vec![Value::from(t.0.as_str()), Value::from(*k), Value::from(*v)]).collect()
}

/// `(pinned, kind)` of each (tenant, kind, version) row of `source` (aliased `alias`)
/// whose version is not its kind's current one: the check a pinned insert makes.
pub(super) fn not_current(source: &str, alias: &str) -> String {
    format!(
        "SELECT {alias}.column3 AS pinned, {alias}.column2 AS kind FROM {source} LEFT JOIN kinds k \
         ON k.tenant_id = {alias}.column1 AND k.name = {alias}.column2 AND k.current_version = {alias}.column3 \
         WHERE k.name IS NULL"
    )
}
