//! The version-checked write of jobs: one [`JobWrite`] per core transition, committed
//! with its steps, history, lease-key operations, after-commit effects and spawned job.
//!
//! The job row's indexed columns are a projection of the machine it stores
//! ([`IndexedColumns::of`]), written together with it, so no index can disagree with the
//! machine. Releasing lease keys wakes the jobs blocked on them, each through the core
//! (the [`Deriver`]'s `key_released`), in the same transaction.

use std::collections::{BTreeSet, HashMap, HashSet};

use spindle_core::step::Step;
use spindle_core::{HistoryEvent, Job, QueueState, Timestamp};

use super::StoreError;
use super::jobs::{JobRecord, NewJob, insert_new_jobs};
use super::leases;
use super::outbox::OutboxEffect;
use super::queue::{Deriver, notify_ready, wake_blocked};
use super::rows::{history_rows, insert_rows, machine_json, over_rows, step_row};
use super::sql::{Tx, Ty, Value};

/// A version-checked change to one job, derived by the engine from a core transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobWrite {
    /// The record as it must become (the job as the core answered it).
    pub record: JobRecord,
    /// The version the change was derived from: the write lands only on that version.
    pub expected_version: i64,
    /// Indexes of `record.job.steps` to write.
    pub steps_changed: Vec<usize>,
    /// A previous pass's steps to write (after a restart): pass number and steps.
    pub previous_pass: Option<(u32, Vec<Step>)>,
    /// History to append.
    pub history: Vec<HistoryEvent>,
    /// Lease keys to take, renew or release, as the core's effects said.
    pub leases: LeaseOp,
    /// Effects to queue.
    pub outbox: Vec<OutboxEffect>,
    /// A retry job to create with it.
    pub spawn: Option<NewJob>,
    /// When the change happened (its history's time), which a group commit may write
    /// a little later.
    pub at: Timestamp,
}

/// The lease-key operation that goes with a write (from the core's lease effects).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseOp {
    /// None.
    None,
    /// A claim: take the job's exclusive keys under `fence` until `expires_at`.
    Acquire {
        /// The claim's fence.
        fence: i64,
        /// The claiming host.
        owner: String,
        /// Until when.
        expires_at: Timestamp,
    },
    /// A heartbeat: extend the keys held under `fence` (after checking they are still
    /// held: a holder that lost one is told to stop).
    Renew {
        /// The claim's fence.
        fence: i64,
        /// Until when.
        expires_at: Timestamp,
    },
    /// The claim ended: release the keys held under `fence` (after checking they were
    /// still held when `verify`: a claim that lost a key commits nothing).
    Release {
        /// The claim's fence.
        fence: i64,
        /// Whether to check the keys are still held before committing.
        verify: bool,
    },
}

/// How one write of a batch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Committed; the record's new version.
    Written {
        /// The new row version.
        version: i64,
    },
    /// The row changed since it was read: reread and derive again.
    Conflict,
    /// A lease key the claim needs is held by another job.
    LeaseBusy {
        /// The key.
        key: String,
        /// When its holder's lease lapses unless renewed.
        held_until: Timestamp,
    },
    /// The claim lost one of its lease keys: it may not commit.
    LeaseLost,
}

/// A job row's indexed columns: what discovery, listing, rescue and reconciliation
/// search by. Each is a projection of the stored machine, written with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedColumns {
    /// The job's state.
    pub state: String,
    /// Its queue state as stored: 0 idle, 1 ready, 2 delayed, 3 blocked.
    pub queue: i64,
    /// When it may next be dispatched (µs).
    pub run_at: i64,
    /// The lease key a blocked job waits for.
    pub blocked_on: Option<String>,
    /// When the claim in flight lapses (µs).
    pub claim_expires_at: Option<i64>,
    /// When anything last happened to it (µs).
    pub last_activity_at: i64,
    /// When it reached a final state (µs).
    pub settled_at: Option<i64>,
    /// Progress in percent.
    pub progress: i64,
    /// The job that retries it.
    pub successor: Option<String>,
}

impl IndexedColumns {
    /// The columns that say what `job` is: the projection of the machine.
    pub fn of(job: &Job) -> Self {
        Self {
            state: job.state.as_str().to_owned(),
            queue: queue_code(job.queue),
            run_at: job.run_at.as_micros(),
            blocked_on: job.blocked_on.clone(),
            claim_expires_at: job.claim.as_ref().map(|c| c.expires_at.as_micros()),
            last_activity_at: job.last_activity_at.as_micros(),
            settled_at: job.settled_at.map(Timestamp::as_micros),
            progress: i64::from(job.progress),
            successor: job.successor.map(|s| s.to_string()),
        }
    }

    /// The same columns, in [`IndexedColumns`]' field order, for a `SELECT`.
    pub const COLUMNS: &'static str =
        "state, queue, run_at, blocked_on, claim_expires_at, last_activity_at, settled_at, progress, successor";

    /// As statement parameters, in [`COLUMNS`](Self::COLUMNS) order.
    pub(super) fn values(self) -> [Value; 9] {
        [
            Value::from(self.state),
            Value::from(self.queue),
            Value::from(self.run_at),
            Value::from(self.blocked_on),
            Value::from(self.claim_expires_at),
            Value::from(self.last_activity_at),
            Value::from(self.settled_at),
            Value::from(self.progress),
            Value::from(self.successor),
        ]
    }
}

/// The stored code of a queue state (the partial indexes select on it).
pub(super) fn queue_code(queue: QueueState) -> i64 {
    match queue {
        QueueState::Idle => 0,
        QueueState::Ready => 1,
        QueueState::Delayed => 2,
        QueueState::Blocked => 3,
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
}

/// Commits `writes` inside `tx` (each checked against its own version), then wakes the
/// jobs blocked on the keys they released and, on PostgreSQL, tells other hosts that
/// work is ready. Answers each write's outcome.
pub(super) async fn commit_writes(
    tx: &mut Tx,
    writes: Vec<JobWrite>,
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
    if applied.ready || woke {
        notify_ready(tx).await?;
    }
    Ok(())
}

/// Applies version-checked writes inside `tx`: lease checks per write, then one
/// batched UPDATE for all job rows (each row still checked against its own version),
/// then the steps, history, outbox rows and spawned jobs of the writes that landed, in
/// a few multi-row statements.
pub(super) async fn apply_writes(tx: &mut Tx, writes: Vec<JobWrite>, now: Timestamp) -> Result<Applied, StoreError> {
    let mut outcomes: Vec<Option<WriteOutcome>> = vec![None; writes.len()];
    // 1. Lease checks and acquisitions, which only writes with exclusive keys need.
    for (i, w) in writes.iter().enumerate() {
        if w.record.lease_keys.is_empty() {
            continue;
        }
        let id = w.record.job.id.to_string();
        // A holder's report or heartbeat must still hold every key: one taken over
        // after it lapsed means another job may be using the resource.
        if let LeaseOp::Release { fence, verify: true } | LeaseOp::Renew { fence, .. } = w.leases
            && !leases::holds_all(tx, &id, fence, &w.record.lease_keys).await?
        {
            outcomes[i] = Some(WriteOutcome::LeaseLost);
        }
        if let LeaseOp::Acquire { fence, ref owner, expires_at } = w.leases
            && let Some((key, held_until)) =
                leases::acquire(tx, &id, &w.record.lease_keys, fence, owner, expires_at, now).await?
        {
            outcomes[i] = Some(WriteOutcome::LeaseBusy { key, held_until });
        }
    }
    // 2. The job rows, version-checked, in batched UPDATEs.
    let pending: Vec<usize> = (0..writes.len()).filter(|i| outcomes[*i].is_none()).collect();
    let landed = update_jobs(tx, &writes, &pending).await?;
    // 3. What goes with each write that landed; undo the leases of those that did not.
    let mut steps = Vec::new();
    let mut history = Vec::new();
    let mut outbox = Vec::new();
    let mut spawns = Vec::new();
    let mut released = BTreeSet::new();
    let mut ready = false;
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
                leases::free(tx, &id, fence, leases::FenceMatch::Exactly).await?;
            }
            outcomes[i] = Some(WriteOutcome::Conflict);
            continue;
        }
        match w.leases {
            LeaseOp::Renew { fence, expires_at } if !keys.is_empty() => {
                leases::renew(tx, &id, fence, expires_at).await?;
            }
            LeaseOp::Release { fence, .. } if !keys.is_empty() => {
                leases::free(tx, &id, fence, leases::FenceMatch::AtMost).await?;
                released.extend(keys.iter().cloned());
            }
            _ => {}
        }
        ready |= job.queue == QueueState::Ready;
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
            ready |= spawn.job.queue == QueueState::Ready;
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
    if !spawns.is_empty() {
        let spawns: Vec<&NewJob> = spawns.iter().collect();
        insert_new_jobs(tx, &spawns, now).await?;
    }
    let outcomes = outcomes.into_iter().map(|o| o.unwrap_or(WriteOutcome::Conflict)).collect();
    Ok(Applied { outcomes, released, ready })
}

/// Columns of one row of the batched job UPDATE: id, expected version, the indexed
/// columns, the machine.
const UPDATE_COLS: usize = 12;

/// Writes the job rows of `writes[pending]` with one UPDATE per chunk, each row guarded by
/// its expected version; answers the indexes whose row was written.
async fn update_jobs(tx: &mut Tx, writes: &[JobWrite], pending: &[usize]) -> Result<HashSet<usize>, StoreError> {
    let mut landed = HashSet::with_capacity(pending.len());
    // A job written twice in one batch would make the returned ids ambiguous: such
    // repeats go one by one after the first.
    let mut seen = HashSet::new();
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
            if let Some(&i) = by_id.get(&row.text(0)) {
                landed.insert(i);
            }
        }
    }
    Ok(landed)
}
