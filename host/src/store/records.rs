//! The records the store reads and writes, below every module that stores them: the
//! tenant a record belongs to, jobs as stored and as submitted, the writes the engine
//! derives from the core and how each ended, the after-commit effects queued with them,
//! and the [`Deriver`] a transaction asks about jobs it did not come with. Plain data.

use serde::{Deserialize, Serialize};
use spindle_core::policy::priority::Priority;
use spindle_core::step::Step;
use spindle_core::{HistoryEvent, Job, JobId, JobState, QueueState, Timestamp};

use super::error::StoreError;
use super::sql::{Row, Ty, Value};

/// A job as stored: the machine plus what the store keeps beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    /// The job machine's state, with the current pass's steps.
    pub job: Job,
    /// The row version this record was read at.
    pub version: i64,
    /// Submission sequence number (dispatch order within a priority layer).
    pub seq: i64,
    /// The owning tenant.
    pub tenant: TenantId,
    /// The kind's name.
    pub kind: String,
    /// The kind version the job is pinned to.
    pub kind_version: i64,
    /// Its priority layer.
    pub priority: Priority,
    /// Its input.
    pub payload: Vec<u8>,
    /// The submission's idempotency key.
    pub idempotency_key: Option<String>,
    /// Exclusive lease keys its claims take.
    pub lease_keys: Vec<String>,
}

impl JobRecord {
    /// The retry job of this one: `job` (built by `Job::successor_of`) with this job's
    /// tenant, kind version, priority, input and lease keys, and no idempotency key.
    pub fn retry_job(&self, job: Job, history: Vec<HistoryEvent>) -> NewJob {
        NewJob {
            job,
            tenant: self.tenant.clone(),
            kind: self.kind.clone(),
            kind_version: self.kind_version,
            priority: self.priority,
            payload: self.payload.clone(),
            idempotency_key: None,
            lease_keys: self.lease_keys.clone(),
            history,
        }
    }
}

/// A job to insert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewJob {
    /// The submitted machine.
    pub job: Job,
    /// Its tenant.
    pub tenant: TenantId,
    /// Its kind.
    pub kind: String,
    /// The pinned kind version.
    pub kind_version: i64,
    /// Its priority layer.
    pub priority: Priority,
    /// Its input.
    pub payload: Vec<u8>,
    /// Optional idempotency key.
    pub idempotency_key: Option<String>,
    /// Exclusive lease keys.
    pub lease_keys: Vec<String>,
    /// History of its creation.
    pub history: Vec<HistoryEvent>,
}

impl NewJob {
    /// The job as its insert stored it, at sequence `seq` (version 1; its history is
    /// stored beside it, not in the record).
    pub(super) fn into_record(self, seq: i64) -> JobRecord {
        JobRecord {
            job: self.job,
            version: 1,
            seq,
            tenant: self.tenant,
            kind: self.kind,
            kind_version: self.kind_version,
            priority: self.priority,
            payload: self.payload,
            idempotency_key: self.idempotency_key,
            lease_keys: self.lease_keys,
        }
    }
}

/// What a submission produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// A new job.
    Created(JobRecord),
    /// A job with the same idempotency key already existed: it is returned instead.
    Existing(JobRecord),
}

impl Inserted {
    /// The job, new or existing.
    pub fn record(&self) -> &JobRecord {
        match self {
            Self::Created(r) | Self::Existing(r) => r,
        }
    }
}

/// Filters for listing jobs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this state.
    pub state: Option<JobState>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only children of this job.
    pub parent: Option<JobId>,
    /// Only failed jobs that have not been retried (the dead-letter view).
    pub dead_letters: bool,
    /// Only jobs older than this sequence number (the cursor of the previous page).
    pub before_seq: Option<i64>,
    /// Only jobs of this priority class.
    pub priority: Option<spindle_core::policy::priority::Priority>,
    /// Only jobs submitted at or after this time.
    pub created_after: Option<Timestamp>,
    /// Only jobs submitted before this time.
    pub created_before: Option<Timestamp>,
    /// Only the job with this id, or the jobs whose idempotency key starts with this.
    pub text: Option<String>,
    /// Page size.
    pub limit: u32,
}

/// One entry of a job's history as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryEntry {
    /// Its order.
    pub id: i64,
    /// When.
    pub at: Timestamp,
    /// What.
    pub event: HistoryEvent,
}

/// A tenant's open jobs of one kind and priority class, by where each waits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueDepth {
    /// The kind.
    pub kind: String,
    /// The priority class.
    pub priority: spindle_core::policy::priority::Priority,
    /// Ready to be claimed.
    pub ready: u64,
    /// Waiting for their time (a delay, a retry's backoff, a snooze).
    pub delayed: u64,
    /// Waiting for a lease key, a running limit or a breaker.
    pub blocked: u64,
    /// Waiting for children or a signal.
    pub waiting: u64,
    /// With a step running.
    pub running: u64,
    /// Paused.
    pub paused: u64,
}

/// A queue's depth per kind and state, for metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Depth {
    /// The tenant.
    pub tenant: TenantId,
    /// The kind.
    pub kind: String,
    /// The state.
    pub state: String,
    /// How many jobs.
    pub count: i64,
}

/// A locked read-modify-write's derivation: the write for the job as read, or `None`.
pub type Derive<'a> = &'a (dyn Fn(&JobRecord) -> Option<JobWrite> + Send + Sync);

/// How a locked read-modify-write ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Updated {
    /// No such job.
    Missing,
    /// The derivation wrote nothing; the job as read.
    Skipped(JobRecord),
    /// The derivation's write and how it ended.
    Wrote(JobRecord, WriteOutcome),
    /// A signal with the key given was stored already: nothing derived, the job as read.
    Repeated(JobRecord),
}

/// Whose finished jobs a pruning pass deletes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PruneScope {
    /// This tenant's.
    Tenant(TenantId),
    /// Every tenant's but these (which keep their jobs for times of their own).
    AllBut(Vec<TenantId>),
}

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
    /// Children of a fan-out to create with it.
    pub children: Vec<NewJob>,
    /// A signal sent to the job, to store (pending) with it.
    pub store_signal: Option<NewSignal>,
    /// A delivered signal of this name to mark consumed with it.
    pub consume_signal: Option<String>,
    /// Workflow effects to queue for the relay (a parent to count again, children to
    /// cancel).
    pub relay: Vec<Relay>,
    /// Whether the write ends a claim a running limit counted (its step's outcome, a
    /// rescue, a cancel): the limits have a slot free when it lands.
    pub frees_slot: bool,
    /// When the change happened (its history's time), which a group commit may write
    /// a little later.
    pub at: Timestamp,
}

/// A signal to store with its job's write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSignal {
    /// Its name.
    pub name: String,
    /// Its body.
    pub body: Vec<u8>,
    /// The sender's idempotency key: one signal per key and job.
    pub key: Option<String>,
}

/// A workflow effect queued with a write, for the relay to carry out after it commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relay {
    /// The job it is about (for a settled child: its parent).
    pub job: spindle_core::JobId,
    /// What to do.
    pub effect: OutboxEffect,
    /// The detail (children to cancel: fan-out and reason, JSON).
    pub detail: Option<String>,
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

    /// The types of [`COLUMNS`](Self::COLUMNS), in order.
    pub const TYPES: [Ty; 9] =
        [Ty::Text, Ty::Int, Ty::Int, Ty::OptText, Ty::OptInt, Ty::Int, Ty::OptInt, Ty::Int, Ty::OptText];

    /// The columns as read back from `row`, where [`COLUMNS`](Self::COLUMNS) begin at
    /// index `first`.
    pub fn from_row(row: &Row, first: usize) -> Result<Self, StoreError> {
        Ok(Self {
            state: row.text(first, "jobs.state")?,
            queue: row.int(first + 1, "jobs.queue")?,
            run_at: row.int(first + 2, "jobs.run_at")?,
            blocked_on: row.opt_text(first + 3, "jobs.blocked_on")?,
            claim_expires_at: row.opt_int(first + 4, "jobs.claim_expires_at")?,
            last_activity_at: row.int(first + 5, "jobs.last_activity_at")?,
            settled_at: row.opt_int(first + 6, "jobs.settled_at")?,
            progress: row.int(first + 7, "jobs.progress")?,
            successor: row.opt_text(first + 8, "jobs.successor")?,
        })
    }

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

/// The core's answers the store asks for inside its transactions. The engine implements
/// it with the job machine; each answer is a version-checked write of the job as read,
/// or `None` when the core refuses the event (the job is left as it is).
pub trait Deriver: Send + Sync {
    /// The claim of a ready job.
    fn claim(&self, record: &JobRecord, now: Timestamp) -> Option<JobWrite>;
    /// A ready job whose claim found `key` held by another job until `held_until`.
    fn key_busy(&self, record: &JobRecord, key: &str, held_until: Timestamp, now: Timestamp) -> Option<JobWrite>;
    /// A job blocked on `key`, which was released.
    fn key_released(&self, record: &JobRecord, key: &str, now: Timestamp) -> Option<JobWrite>;
    /// A delayed or blocked job whose time has come.
    fn due(&self, record: &JobRecord, now: Timestamp) -> Option<JobWrite>;
    /// A parent waiting for fan-out `slot`, `settled` of whose children are now final.
    fn children_settled(&self, record: &JobRecord, slot: &str, settled: u32, now: Timestamp) -> Option<JobWrite>;
    /// A ready job whose claim found the running limit `gate` full: it waits for a slot
    /// until `recheck_at` at the latest.
    fn at_capacity(&self, record: &JobRecord, gate: &str, recheck_at: Timestamp, now: Timestamp) -> Option<JobWrite>;
    /// Whether the host holds a candidate back (its kind's breaker is open): the gate it
    /// waits on and when to try again, or `None` to claim it.
    fn hold(&self, _record: &JobRecord, _now: Timestamp) -> Option<(String, Timestamp)> {
        None
    }
}

/// Which ready jobs a host takes: empty lists admit everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimFilter {
    /// Only these kinds.
    pub kinds: Vec<String>,
    /// Only these tenants.
    pub tenants: Vec<TenantId>,
    /// Tenants holding their share of the host's slots (the core's `over_share`): among
    /// the head of the claim order (the claim's size and 16 more), the others' jobs are
    /// taken first and theirs after.
    pub pass_over: Vec<TenantId>,
    /// Never these tenants' jobs (a reserve slot's claim: not for a tenant at its share),
    /// looked for among the head of the claim order as `pass_over` is.
    pub except: Vec<TenantId>,
}

/// A tenant's identity.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TenantId(pub String);

impl TenantId {
    /// The tenant an embedded host runs everything under.
    pub fn default_tenant() -> Self {
        Self("default".to_owned())
    }
}

impl std::fmt::Display for TenantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An effect to run after the write commits, durably queued with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxEffect {
    /// The kind's success notification.
    NotifySuccess,
    /// The kind's failure effect, after a corrected settlement.
    FailureEffect,
    /// A child of the job settled: count its fan-out again (the job is the parent).
    ChildSettled,
    /// Cancel the job's open children (detail: the fan-out's slot or none, and why).
    CancelChildren,
}

impl OutboxEffect {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotifySuccess => "notify_success",
            Self::FailureEffect => "failure_effect",
            Self::ChildSettled => "child_settled",
            Self::CancelChildren => "cancel_children",
        }
    }

    /// The effects that run a kind's hook (the rest are the workflow relay's).
    pub const HOOKS: &'static [Self] = &[Self::NotifySuccess, Self::FailureEffect];
    /// The workflow relay's effects.
    pub const WORKFLOW: &'static [Self] = &[Self::ChildSettled, Self::CancelChildren];

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "notify_success" => Some(Self::NotifySuccess),
            "failure_effect" => Some(Self::FailureEffect),
            "child_settled" => Some(Self::ChildSettled),
            "cancel_children" => Some(Self::CancelChildren),
            _ => None,
        }
    }
}
