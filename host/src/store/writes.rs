//! The version-checked write of jobs: one [`JobWrite`] per core transition, committed
//! with its steps, history, lease-key operations, after-commit effects and spawned job.
//!
//! The job row's indexed columns are a projection of the machine it stores
//! ([`IndexedColumns::of`]), written together with it, so no index can disagree with the
//! machine. Releasing lease keys wakes the jobs blocked on them, each through the core
//! (the [`Deriver`]'s `key_released`), in the same transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use spindle_core::{QueueState, Timestamp};

use super::capacity::{kind_gate, tenant_gate};
use super::error::StoreError;
use super::inserts::insert_new_jobs;
use super::job_rows::{JOB_COLS, fetch_jobs, history_rows, machine_json, step_row};
use super::lease_keys as leases;
use super::records::{Deriver, IndexedColumns, JobWrite, LeaseOp, NewJob, OutboxEffect, WriteOutcome, queue_code};
use super::rows::{MAX_PARAMS, insert_rows, over_rows, placeholders};
use super::sql::{Backend, Tx, Ty, Value, connection_lost};

/// Runs of one transaction when it fails for a passing reason.
pub(super) const TRANSACTION_ATTEMPTS: u32 = 3;

/// Whether a transaction that failed with `e` may simply be run again: PostgreSQL
/// chose it as a deadlock's or a serialization conflict's victim, or its connection
/// was lost (a terminated backend, a restarted server). Anything else is an answer.
pub(super) fn retryable(e: &StoreError) -> bool {
    let StoreError::Database(e) = e else { return false };
    match e {
        // 40001 serialization failure, 40P01 deadlock.
        sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("40001" | "40P01")) => true,
        sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => true,
        e => connection_lost(e),
    }
}

/// What [`apply_writes`] leaves for its caller to finish the transaction with.
#[derive(Debug, Default)]
pub(super) struct Applied {
    /// Each write's outcome, in order.
    pub outcomes: Vec<WriteOutcome>,
    /// Lease keys released by the writes that landed.
    pub released: BTreeSet<String>,
    /// Whether a landed write made a job ready (or created one).
    pub ready: bool,
    /// Running-limit gates the landed writes freed a slot under, and how many.
    pub freed: BTreeMap<String, u32>,
    /// Parents of the children the landed writes settled.
    pub parents: BTreeSet<spindle_core::JobId>,
}

/// Commits `writes` inside `tx` (each checked against its own version), then wakes the
/// jobs blocked on the keys they released and, on PostgreSQL, tells other hosts that
/// work is ready. Answers each write's outcome.
///
/// A transaction that fails for a passing reason (a deadlock, a serialization failure,
/// a dropped connection) is run again whole by its caller, up to
/// [`TRANSACTION_ATTEMPTS`] times: see [`retryable`].
pub(super) async fn commit_writes(
    tx: &mut Tx,
    writes: &[&JobWrite],
    now: Timestamp,
    deriver: &dyn Deriver,
) -> Result<Vec<WriteOutcome>, StoreError> {
    let applied = apply_writes(tx, writes, now).await?;
    finish(tx, &applied, now, deriver).await?;
    Ok(applied.outcomes)
}

/// The rest of a transaction that applied writes: blocked jobs woken, ready signalled.
pub(super) async fn finish(
    tx: &mut Tx,
    applied: &Applied,
    now: Timestamp,
    deriver: &dyn Deriver,
) -> Result<(), StoreError> {
    let woke = wake_blocked(tx, &applied.released, now, deriver).await?;
    let woke_gated = wake_gated(tx, &applied.freed, now, deriver).await?;
    let woke_parents = wake_parents(tx, &applied.parents, now, deriver).await?;
    if applied.ready || woke || woke_gated || woke_parents {
        notify_ready(tx).await?;
    }
    if woke || woke_gated || woke_parents {
        // This host's dispatcher too: it knows of its own writes' ready jobs, not of
        // jobs these writes woke.
        tx.wake_this_host();
    }
    Ok(())
}

/// Applies version-checked writes inside `tx`: the lease-key operations of the batch,
/// then one batched UPDATE for all job rows (each row still checked against its own
/// version), then the steps, history, outbox rows and spawned jobs of the writes that
/// landed, in a few multi-row statements.
///
/// Locks are taken in one global order, so that transactions on many hosts never wait
/// for each other in a cycle: job rows by id, then lease rows by key across the whole
/// batch. A batch without lease-key operations locks only its job rows, by the UPDATE,
/// in id order; one with them locks its job rows first, reads their versions, and only
/// then takes, renews or releases keys for the writes that will land.
pub(super) async fn apply_writes(tx: &mut Tx, writes: &[&JobWrite], now: Timestamp) -> Result<Applied, StoreError> {
    let mut outcomes: Vec<Option<WriteOutcome>> = vec![None; writes.len()];
    let mut released = BTreeSet::new();
    let keyed = writes.iter().any(|w| !w.record.lease_keys.is_empty() && w.leases != LeaseOp::None);
    if keyed {
        lock_and_check_versions(tx, writes, &mut outcomes).await?;
        lease_phase(tx, writes, &mut outcomes, &mut released, now).await?;
    }
    // The job rows, version-checked, in batched UPDATEs.
    let pending: Vec<usize> = (0..writes.len()).filter(|i| outcomes[*i].is_none()).collect();
    let landed = update_jobs(tx, writes, &pending).await?;
    // What goes with each write that landed.
    let mut rows = WithWrites::default();
    for (i, w) in writes.iter().enumerate() {
        if outcomes[i].is_some() {
            continue;
        }
        if !landed.contains(&i) {
            // Only an unkeyed write gets here (a keyed batch checked its versions under
            // lock): it took no key, so there is nothing to undo.
            outcomes[i] = Some(WriteOutcome::Conflict);
            continue;
        }
        rows.add(w, now)?;
        outcomes[i] = Some(WriteOutcome::Written { version: w.expected_version + 1 });
    }
    let (ready, freed, parents) = rows.insert(tx, now).await?;
    let outcomes = outcomes.into_iter().map(|o| o.unwrap_or(WriteOutcome::Conflict)).collect();
    Ok(Applied { outcomes, released, ready, freed, parents })
}

/// The rows that go with the writes that landed: steps, history, queued effects, new
/// jobs, signals stored and consumed; and what they free and wake.
#[derive(Default)]
struct WithWrites<'w> {
    steps: Vec<Vec<Value>>,
    history: Vec<Vec<Value>>,
    outbox: Vec<Vec<Value>>,
    spawns: Vec<&'w NewJob>,
    children: Vec<&'w NewJob>,
    signals: Vec<Vec<Value>>,
    consumed: Vec<(String, String)>,
    ready: bool,
    freed: BTreeMap<String, u32>,
    parents: BTreeSet<spindle_core::JobId>,
}

impl<'w> WithWrites<'w> {
    /// Adds what `w` writes beside its job row.
    fn add(&mut self, w: &'w JobWrite, now: Timestamp) -> Result<(), StoreError> {
        let job = &w.record.job;
        let id = job.id.to_string();
        self.ready |= job.queue == QueueState::Ready;
        if w.frees_slot {
            *self.freed.entry(tenant_gate(&w.record.tenant)).or_default() += 1;
            *self.freed.entry(kind_gate(&w.record.tenant, &w.record.kind)).or_default() += 1;
        }
        if job.rules.lean {
            // Its steps ride in its row; it keeps no history.
            return self.add_effects(w, id, now);
        }
        for &s in &w.steps_changed {
            if let Some(step) = job.steps.get(s) {
                self.steps.push(step_row(&id, job.pass, s, step)?);
            }
        }
        if let Some((pass, old)) = &w.previous_pass {
            for (s, step) in old.iter().enumerate() {
                self.steps.push(step_row(&id, *pass, s, step)?);
            }
        }
        self.history.extend(history_rows(&id, w.at, &w.history)?);
        self.add_effects(w, id, now)
    }

    /// Adds what `w` writes beside its job row other than steps and history: effects,
    /// relays, new jobs, signals.
    fn add_effects(&mut self, w: &'w JobWrite, id: String, now: Timestamp) -> Result<(), StoreError> {
        let queued = |job: String, effect: OutboxEffect, detail: Option<String>| {
            let at = Value::from(now.as_micros());
            vec![Value::from(job), Value::from(effect.as_str()), at.clone(), Value::from(0i64), at, Value::from(detail)]
        };
        for effect in &w.outbox {
            self.outbox.push(queued(id.clone(), *effect, None));
        }
        for relay in &w.relay {
            if relay.effect == OutboxEffect::ChildSettled {
                self.parents.insert(relay.job);
            }
            self.outbox.push(queued(relay.job.to_string(), relay.effect, relay.detail.clone()));
        }
        if let Some(spawn) = &w.spawn {
            self.ready |= spawn.job.queue == QueueState::Ready;
            self.spawns.push(spawn);
        }
        if !w.children.is_empty() {
            self.ready = true;
            self.children.extend(w.children.iter());
        }
        if let Some(signal) = &w.store_signal {
            self.signals.push(vec![
                Value::from(id.as_str()),
                Value::from(signal.name.as_str()),
                Value::from(signal.body.clone()),
                Value::from(w.at.as_micros()),
                Value::from(signal.key.clone()),
            ]);
        }
        if let Some(name) = &w.consume_signal {
            self.consumed.push((id, name.clone()));
        }
        Ok(())
    }

    /// Inserts the rows in a few multi-row statements; answers whether work became
    /// ready, the running slots freed, and the parents of children settled.
    #[allow(clippy::type_complexity)]
    async fn insert(
        self,
        tx: &mut Tx,
        now: Timestamp,
    ) -> Result<(bool, BTreeMap<String, u32>, BTreeSet<spindle_core::JobId>), StoreError> {
        write_steps(tx, self.steps).await?;
        insert_rows(tx, "INSERT INTO history (job_id, at, event, body)", "", 4, self.history).await?;
        let outbox = "INSERT INTO outbox (job_id, effect, run_at, attempts, created_at, detail)";
        insert_rows(tx, outbox, "", 6, self.outbox).await?;
        if !self.spawns.is_empty() {
            insert_new_jobs(tx, &self.spawns, now, true, None, false, false).await?;
        }
        if !self.children.is_empty() {
            // Every child is created, or none: a taken idempotency key fails the write.
            let seqs = insert_new_jobs(tx, &self.children, now, true, None, false, false).await?;
            if let Some(i) = seqs.iter().position(Option::is_none) {
                let key = self.children[i].idempotency_key.clone().unwrap_or_default();
                return Err(StoreError::Duplicate(format!("a child's idempotency key {key:?} is taken")));
            }
        }
        // Before the consumptions: a signal sent and consumed in one batch (a chain) is
        // stored first.
        let signals = "INSERT INTO signals (job_id, name, body, created_at, idempotency_key)";
        insert_rows(tx, signals, "", 5, self.signals).await?;
        for (job, name) in self.consumed {
            tx.execute(
                "UPDATE signals SET consumed_at = $1 WHERE id = (SELECT id FROM signals WHERE job_id = $2 \
                 AND name = $3 AND consumed_at IS NULL ORDER BY id LIMIT 1)",
                vec![Value::from(now.as_micros()), Value::from(job), Value::from(name)],
            )
            .await?;
        }
        Ok((self.ready, self.freed, self.parents))
    }
}

/// Writes step rows (from [`step_row`]): an update of the ones stored, an insert of the
/// rest. Every step is stored with its job, so a settlement's steps are all updates; a
/// new pass's (a restart) are inserts.
///
/// On PostgreSQL an `INSERT … ON CONFLICT DO UPDATE` locks each row it finds before it
/// rewrites it, a `Heap/LOCK` WAL record per step written; a plain `UPDATE` of rows
/// whose job row this transaction already holds locked needs none. What it did not
/// find goes through the upsert still, so the result is the upsert's whatever was
/// stored. SQLite's upsert has no such cost (its writer holds the database).
async fn write_steps(tx: &mut Tx, steps: Vec<Vec<Value>>) -> Result<(), StoreError> {
    const INSERT: &str = "INSERT INTO steps (job_id, pass, position, key, state, body, output)";
    const UPSERT: &str = "ON CONFLICT (job_id, pass, position) DO UPDATE SET state = excluded.state, \
                          body = excluded.body, output = excluded.output";
    if steps.is_empty() {
        return Ok(());
    }
    let key = |row: &[Value]| match (&row[0], &row[1], &row[2]) {
        (Value::Text(Some(job)), Value::Int(Some(pass)), Value::Int(Some(position))) => {
            Some((job.clone(), *pass, *position))
        }
        _ => None,
    };
    // A job written twice in one batch (a chain) may write a step twice: the later
    // write, derived from the earlier, is the one that stays. One statement may not
    // touch a row twice (PostgreSQL's upsert refuses to, its UPDATE would pick either).
    let mut seen = HashSet::with_capacity(steps.len());
    let mut steps: Vec<Vec<Value>> =
        steps.into_iter().rev().filter(|row| key(row).is_none_or(|k| seen.insert(k))).collect();
    steps.reverse();
    if tx.backend() == Backend::Sqlite {
        return insert_rows(tx, INSERT, UPSERT, 7, steps).await;
    }
    let updated = over_rows(
        tx,
        steps.clone(),
        7,
        |source| {
            format!(
                "UPDATE steps SET state = v.column5, body = v.column6, output = v.column7 FROM {source} \
                 WHERE steps.job_id = v.column1 AND steps.pass = v.column2 AND steps.position = v.column3 \
                 RETURNING steps.job_id, steps.pass, steps.position"
            )
        },
        &[Ty::Text, Ty::Int, Ty::Int],
    )
    .await?;
    let found: HashSet<(String, i64, i64)> = updated
        .iter()
        .map(|r| Ok((r.text(0, "steps.job_id")?, r.int(1, "steps.pass")?, r.int(2, "steps.position")?)))
        .collect::<Result<_, StoreError>>()?;
    let rest: Vec<Vec<Value>> = steps.into_iter().filter(|row| key(row).is_none_or(|k| !found.contains(&k))).collect();
    if rest.is_empty() {
        return Ok(());
    }
    insert_rows(tx, INSERT, UPSERT, 7, rest).await
}

/// Locks the job rows of `writes` in id order (PostgreSQL; SQLite's writer holds the
/// whole database) and marks the writes whose version does not match as conflicts. A
/// job written twice in one batch lands only as a chain (each write derived from the
/// version the one before it makes).
async fn lock_and_check_versions(
    tx: &mut Tx,
    writes: &[&JobWrite],
    outcomes: &mut [Option<WriteOutcome>],
) -> Result<(), StoreError> {
    let ids: BTreeSet<String> = writes.iter().map(|w| w.record.job.id.to_string()).collect();
    let lock = tx.backend().for_update();
    let mut current: HashMap<String, i64> = HashMap::with_capacity(ids.len());
    let ids: Vec<String> = ids.into_iter().collect();
    for chunk in ids.chunks(MAX_PARAMS) {
        let sql =
            format!("SELECT id, version FROM jobs WHERE id IN ({}) ORDER BY id{lock}", placeholders(1, chunk.len()));
        let args = chunk.iter().map(|id| Value::from(id.as_str())).collect();
        for row in tx.fetch(&sql, args, &[Ty::Text, Ty::Int]).await? {
            current.insert(row.text(0, "jobs.id")?, row.int(1, "jobs.version")?);
        }
    }
    for (i, w) in writes.iter().enumerate() {
        match current.get_mut(&w.record.job.id.to_string()) {
            Some(version) if *version == w.expected_version => *version += 1,
            _ => outcomes[i] = Some(WriteOutcome::Conflict),
        }
    }
    Ok(())
}

/// Takes, renews and releases the keys of the writes still standing. Every key row the
/// batch touches is locked first, all in key order (a row made for a key never used
/// before), so no lock is waited for after that; then each write's operation runs in
/// batch order, a claim taking all of its keys or none. A holder that no longer holds
/// all its keys may not commit (`LeaseLost`); a claim that finds a key held by another
/// job takes none (`LeaseBusy`).
async fn lease_phase(
    tx: &mut Tx,
    writes: &[&JobWrite],
    outcomes: &mut [Option<WriteOutcome>],
    released: &mut BTreeSet<String>,
    now: Timestamp,
) -> Result<(), StoreError> {
    let standing: Vec<usize> = (0..writes.len())
        .filter(|&i| {
            outcomes[i].is_none() && !writes[i].record.lease_keys.is_empty() && writes[i].leases != LeaseOp::None
        })
        .collect();
    let keys: BTreeSet<&str> =
        standing.iter().flat_map(|&i| writes[i].record.lease_keys.iter().map(String::as_str)).collect();
    leases::lock_in_order(tx, &keys).await?;
    for i in standing {
        let w = writes[i];
        let id = w.record.job.id.to_string();
        let job_keys: BTreeSet<&str> = w.record.lease_keys.iter().map(String::as_str).collect();
        // A holder's report or heartbeat must still hold every key: one taken over
        // after it lapsed means another job may be using the resource.
        if let LeaseOp::Release { fence, verify: true } | LeaseOp::Renew { fence, .. } = w.leases
            && !leases::holds_all(tx, &id, fence, &w.record.lease_keys).await?
        {
            outcomes[i] = Some(WriteOutcome::LeaseLost);
            continue;
        }
        match w.leases {
            LeaseOp::Acquire { fence, ref owner, expires_at } => {
                for key in job_keys {
                    if let Some(held_until) = leases::acquire_one(tx, &id, key, fence, owner, expires_at, now).await? {
                        // All or none: let go of the keys this claim took before this one.
                        leases::free(tx, &id, fence, leases::FenceMatch::Exactly).await?;
                        outcomes[i] = Some(WriteOutcome::LeaseBusy { key: key.to_owned(), held_until });
                        break;
                    }
                }
            }
            LeaseOp::Renew { fence, expires_at } => {
                for key in job_keys {
                    leases::renew_one(tx, &id, key, fence, expires_at).await?;
                }
            }
            LeaseOp::Release { fence, .. } => {
                for key in job_keys {
                    leases::release_one(tx, &id, key, fence).await?;
                    released.insert(key.to_owned());
                }
            }
            LeaseOp::None => {}
        }
    }
    Ok(())
}

/// Columns of one row of the batched job UPDATE: id, expected version, the indexed
/// columns, the machine.
const UPDATE_COLS: usize = 12;

/// Writes the job rows of `writes[pending]` with one UPDATE per chunk, each row guarded by
/// its expected version; answers the indexes whose row was written.
async fn update_jobs(tx: &mut Tx, writes: &[&JobWrite], pending: &[usize]) -> Result<HashSet<usize>, StoreError> {
    let mut landed = HashSet::with_capacity(pending.len());
    // A job written twice in one batch would make the returned ids ambiguous: such
    // repeats go one by one after the first.
    let mut seen = HashSet::new();
    let (unique, repeats): (Vec<usize>, Vec<usize>) =
        pending.iter().partition(|i| seen.insert(writes[**i].record.job.id));
    // Rows go in id order: the UPDATE locks them in the order they come.
    let mut unique = unique;
    unique.sort_by_key(|i| writes[*i].record.job.id);
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
            let mut row = Vec::with_capacity(UPDATE_COLS);
            row.push(Value::from(id));
            row.push(Value::from(w.expected_version));
            row.extend(IndexedColumns::of(job).values());
            row.push(Value::from(machine_json(job)?));
            rows.push(row);
        }
        let update = |source: &str| {
            format!(
                "UPDATE jobs SET state = v.column3, queue = v.column4, run_at = v.column5, \
                 blocked_on = CAST(v.column6 AS TEXT), claim_expires_at = CAST(v.column7 AS BIGINT), \
                 last_activity_at = v.column8, settled_at = CAST(v.column9 AS BIGINT), progress = v.column10, \
                 successor = CAST(v.column11 AS TEXT), version = jobs.version + 1, machine = v.column12 \
                 FROM {source} WHERE jobs.id = v.column1 AND jobs.version = v.column2 RETURNING jobs.id"
            )
        };
        for row in over_rows(tx, rows, UPDATE_COLS, update, &[Ty::Text]).await? {
            if let Some(&i) = by_id.get(&row.text(0, "jobs.id")?) {
                landed.insert(i);
            }
        }
    }
    Ok(landed)
}

/// Tells other hosts (LISTEN spindle_ready) that work is ready.
pub(super) async fn notify_ready(tx: &mut Tx) -> Result<(), StoreError> {
    if tx.backend() == Backend::Postgres {
        tx.fetch("SELECT pg_notify('spindle_ready', '')::text", vec![], &[Ty::Text]).await?;
    }
    Ok(())
}

/// Wakes the jobs blocked on any of `keys` (just released), each through the core;
/// answers whether any became ready. On PostgreSQL a blocked job another transaction
/// holds is skipped: its recheck time wakes it instead.
pub(super) async fn wake_blocked(
    tx: &mut Tx,
    keys: &BTreeSet<String>,
    now: Timestamp,
    deriver: &dyn Deriver,
) -> Result<bool, StoreError> {
    if keys.is_empty() {
        return Ok(false);
    }
    let keys: Vec<&String> = keys.iter().collect();
    let sql = format!(
        "SELECT {JOB_COLS} FROM jobs WHERE queue = {} AND blocked_on IN ({}) ORDER BY priority, seq{}",
        queue_code(spindle_core::QueueState::Blocked),
        placeholders(1, keys.len()),
        tx.backend().skip_locked()
    );
    let blocked = fetch_jobs(tx, &sql, keys.iter().map(|k| Value::from(k.as_str())).collect()).await?;
    let writes: Vec<JobWrite> = blocked
        .iter()
        .filter_map(|r| deriver.key_released(r, r.job.blocked_on.as_deref().unwrap_or_default(), now))
        .collect();
    if writes.is_empty() {
        return Ok(false);
    }
    let writes: Vec<&JobWrite> = writes.iter().collect();
    let applied = apply_writes(tx, &writes, now).await?;
    Ok(applied.ready)
}

/// Wakes the parents in `parents` (of children the transaction settled) whose join their
/// final children now meet, each through the core, in the transaction that settled the
/// last of them: the parent's next step is dispatched with that commit, not after a
/// relay pass. Each parent's row is locked before its children are counted, so of two
/// transactions settling its last two children on two hosts, the second counts after
/// the first committed and sees both. A count that does not meet the join writes
/// nothing here (the relay records progress). Answers whether a parent became ready.
pub(super) async fn wake_parents(
    tx: &mut Tx,
    parents: &BTreeSet<spindle_core::JobId>,
    now: Timestamp,
    deriver: &dyn Deriver,
) -> Result<bool, StoreError> {
    if parents.is_empty() {
        return Ok(false);
    }
    let lock = tx.backend().for_update();
    let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE id IN ({}) ORDER BY id{lock}", placeholders(1, parents.len()));
    let waiting = fetch_jobs(tx, &sql, parents.iter().map(|p| Value::from(p.to_string())).collect()).await?;
    let mut writes = Vec::new();
    for record in &waiting {
        let Some(wait) = record.job.wait.as_ref() else { continue };
        let spindle_core::workflow::WaitFor::Children { slot, .. } = &wait.what else { continue };
        let rows = tx
            .fetch(
                "SELECT count(*) FROM jobs WHERE parent_id = $1 AND parent_slot = $2 AND settled_at IS NOT NULL",
                vec![Value::from(record.job.id.to_string()), Value::from(slot.as_str())],
                &[Ty::Int],
            )
            .await?;
        let settled = rows.first().map_or(Ok(0), |r| r.num::<u32>(0, "jobs.count (children settled)"))?;
        if spindle_core::workflow::join_met(wait, settled) {
            writes.extend(deriver.children_settled(record, slot, settled, now));
        }
    }
    if writes.is_empty() {
        return Ok(false);
    }
    let applied = apply_writes(tx, &writes.iter().collect::<Vec<_>>(), now).await?;
    Ok(applied.ready)
}

/// Wakes, for each running-limit gate in `freed`, as many of the jobs waiting on it as
/// slots were freed (best first), each through the core; answers whether any became
/// ready. Only claims a limit counted free slots, so commits of unlimited tenants' steps
/// never come here.
pub(super) async fn wake_gated(
    tx: &mut Tx,
    freed: &BTreeMap<String, u32>,
    now: Timestamp,
    deriver: &dyn Deriver,
) -> Result<bool, StoreError> {
    if freed.is_empty() {
        return Ok(false);
    }
    let sql = format!(
        "SELECT {JOB_COLS} FROM jobs WHERE queue = {} AND blocked_on = $1 ORDER BY priority, fair_tag, seq LIMIT $2{}",
        queue_code(spindle_core::QueueState::Blocked),
        tx.backend().skip_locked()
    );
    let mut writes = Vec::new();
    for (gate, slots) in freed {
        // One indexed read per gate (`jobs_blocked` holds the order): a gate with a
        // tenant's whole backlog behind it gives its best few without a sort.
        let waiting = fetch_jobs(tx, &sql, vec![Value::from(gate.as_str()), Value::from(i64::from(*slots))]).await?;
        writes.extend(waiting.iter().filter_map(|record| deriver.key_released(record, gate, now)));
    }
    if writes.is_empty() {
        return Ok(false);
    }
    let applied = apply_writes(tx, &writes.iter().collect::<Vec<_>>(), now).await?;
    Ok(applied.ready)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::test_db::fresh;

    /// A stored step as the test reads it back: pass, position, state, body, output.
    type Stored = (i64, i64, String, String, Option<Vec<u8>>);

    fn row(job: &str, pass: i64, position: i64, state: &str) -> Vec<Value> {
        vec![
            Value::from(job),
            Value::from(pass),
            Value::from(position),
            Value::from(format!("s{position}")),
            Value::from(state),
            Value::from(format!("{{\"state\":\"{state}\"}}")),
            Value::from(Some(state.as_bytes().to_vec())),
        ]
    }

    /// Step rows are updated where stored and inserted where not, the later of two
    /// writes of one step in a batch staying, with few rows (a `VALUES` list) and many
    /// (arrays on PostgreSQL), on both backends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn step_rows_are_updated_or_inserted_and_the_later_write_stays() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let Some(test) = fresh(backend).await else { continue };
            crate::store::schema::migrate(&test.db).await.unwrap();
            for jobs in [2usize, 20] {
                let ids: Vec<String> = (0..jobs).map(|j| format!("job-{jobs}-{j}")).collect();
                let mut tx = test.db.begin().await.unwrap();
                let stored = ids.iter().flat_map(|id| [row(id, 1, 0, "pending"), row(id, 1, 1, "pending")]).collect();
                insert_rows(
                    &mut tx,
                    "INSERT INTO steps (job_id, pass, position, key, state, body, output)",
                    "",
                    7,
                    stored,
                )
                .await
                .unwrap();
                tx.commit().await.unwrap();

                let mut tx = test.db.begin().await.unwrap();
                let writes = ids
                    .iter()
                    .flat_map(|id| [row(id, 1, 0, "running"), row(id, 2, 0, "pending"), row(id, 1, 0, "succeeded")])
                    .collect();
                write_steps(&mut tx, writes).await.unwrap();
                tx.commit().await.unwrap();

                for id in &ids {
                    let rows = test
                        .db
                        .fetch(
                            "SELECT pass, position, state, body, output FROM steps WHERE job_id = $1 ORDER BY pass, position",
                            vec![Value::from(id.as_str())],
                            &[Ty::Int, Ty::Int, Ty::Text, Ty::Text, Ty::OptBlob],
                        )
                        .await
                        .unwrap();
                    let got: Vec<Stored> = rows
                        .iter()
                        .map(|r| {
                            let cell = "steps";
                            (
                                r.int(0, cell).unwrap(),
                                r.int(1, cell).unwrap(),
                                r.text(2, cell).unwrap(),
                                r.text(3, cell).unwrap(),
                                r.opt_blob(4, cell).unwrap(),
                            )
                        })
                        .collect();
                    let want = |pass, position, state: &str| -> Stored {
                        (
                            pass,
                            position,
                            state.to_owned(),
                            format!("{{\"state\":\"{state}\"}}"),
                            Some(state.as_bytes().to_vec()),
                        )
                    };
                    assert_eq!(
                        got,
                        vec![want(1, 0, "succeeded"), want(1, 1, "pending"), want(2, 0, "pending")],
                        "{backend:?}, {jobs} jobs, {id}"
                    );
                }
            }
            test.drop().await;
        }
    }
}
