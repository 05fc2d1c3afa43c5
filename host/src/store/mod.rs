//! Durable state: one storage trait ([`Storage`]), two sqlx backends (SQLite, the
//! embedded default, and PostgreSQL for many hosts), one conformance suite.
//!
//! The store never decides anything: the engine derives every change with the pure core
//! and hands the store a [`JobWrite`] (the job as it must be, the history, the lease
//! operations), which the store commits in one transaction guarded by the row version
//! the change was derived from.

mod schema;
pub mod sql;
mod sql_store;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use spindle_core::policy::priority::Priority;
use spindle_core::step::Step;
use spindle_core::{HistoryEvent, Job, JobId, JobState, Timestamp};
use thiserror::Error;

pub use sql::{Backend, ConnectOptions};
pub use sql_store::SqlStore;
#[doc(hidden)]
pub use sql_store::steps_of;

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

/// A tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    /// Its id.
    pub id: TenantId,
    /// Its unique name.
    pub name: String,
    /// When it was created.
    pub created_at: Timestamp,
}

/// What an API token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything within its tenant.
    Tenant,
    /// Manage tenants (and nothing inside them).
    Operator,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Operator => "operator",
        }
    }
}

/// A version of a kind deployed by a tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindVersion {
    /// The tenant.
    pub tenant: TenantId,
    /// The kind's name as deployed.
    pub kind: String,
    /// 1, 2, … per kind.
    pub version: i64,
    /// The component's content address.
    pub digest: String,
    /// What the component says about itself, as JSON.
    pub spec: String,
    /// When it was deployed.
    pub created_at: Timestamp,
}

/// A kind with its versions' summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindEntry {
    /// The kind's name.
    pub kind: String,
    /// The version new submissions use.
    pub current_version: i64,
    /// The newest version deployed.
    pub latest_version: i64,
    /// When the current version last changed.
    pub updated_at: Timestamp,
}

/// A job as stored: the machine plus what the store indexes and keeps beside it.
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
    /// Whether the row is in the dispatch queue (ready, delayed or blocked) as read.
    /// An open, unclaimed, unpaused job outside it has lost its dispatch.
    pub queued: bool,
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

/// Lease operations that go with a write.
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
    /// still held: a claim that lost a key commits nothing).
    Release {
        /// The claim's fence.
        fence: i64,
        /// Whether to check the keys are still held before committing.
        verify: bool,
    },
}

/// An effect to run after the write commits, durably queued with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxEffect {
    /// The kind's success notification.
    NotifySuccess,
    /// The kind's failure effect, after a corrected settlement.
    FailureEffect,
}

impl OutboxEffect {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotifySuccess => "notify_success",
            Self::FailureEffect => "failure_effect",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "notify_success" => Some(Self::NotifySuccess),
            "failure_effect" => Some(Self::FailureEffect),
            _ => None,
        }
    }
}

/// A queued after-commit effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxItem {
    /// Its row id.
    pub id: i64,
    /// The job.
    pub job_id: JobId,
    /// What to run.
    pub effect: OutboxEffect,
    /// Attempts so far.
    pub attempts: i64,
}

/// A version-checked change to one job, derived by the engine from a core transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobWrite {
    /// The record as read (its version guards the write) and as it must become.
    pub record: JobRecord,
    /// The version the change was derived from.
    pub expected_version: i64,
    /// Indexes of `record.job.steps` to write.
    pub steps_changed: Vec<usize>,
    /// A previous pass's steps to write (after a restart): pass number and steps.
    pub previous_pass: Option<(u32, Vec<Step>)>,
    /// History to append.
    pub history: Vec<HistoryEvent>,
    /// Lease keys to take, renew or release.
    pub leases: LeaseOp,
    /// Effects to queue.
    pub outbox: Vec<OutboxEffect>,
    /// A retry job to create with it.
    pub spawn: Option<NewJob>,
    /// Leave the row's dispatch-queue membership as it is (a reconciliation probe that
    /// observes a job must not repair what it is observing).
    pub preserve_queue: bool,
    /// When the change happened (its history's time), which a group commit may write
    /// a little later.
    pub at: Timestamp,
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
    },
    /// The claim lost one of its lease keys: it may not commit.
    LeaseLost,
}

/// Filters for listing jobs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this state.
    pub state: Option<JobState>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only failed jobs that have not been retried (the dead-letter view).
    pub dead_letters: bool,
    /// Only jobs older than this sequence number (the cursor of the previous page).
    pub before_seq: Option<i64>,
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

/// Storage failures. A conflict is not one: it is a [`WriteOutcome`].
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored value did not decode.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// A unique name is taken.
    #[error("already exists: {0}")]
    Duplicate(String),
    /// The referenced row does not exist.
    #[error("not found: {0}")]
    NotFound(String),
}

/// Which ready jobs a host takes: empty lists admit everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimFilter {
    /// Only these kinds.
    pub kinds: Vec<String>,
    /// Only these tenants.
    pub tenants: Vec<TenantId>,
}

/// A claim request: how many ready jobs to take and how to derive each claim.
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
}

/// The store's operations. Implemented by [`SqlStore`] over both backends; wrappers (a
/// fault injector in tests) can stand in.
#[async_trait]
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Which backend.
    fn backend(&self) -> Backend;

    // --- tenants and tokens ---------------------------------------------------------

    /// Creates a tenant (its id is its name).
    async fn create_tenant(&self, name: &str, now: Timestamp) -> Result<Tenant, StoreError>;
    /// A tenant by id.
    async fn tenant(&self, id: &TenantId) -> Result<Option<Tenant>, StoreError>;
    /// Every tenant.
    async fn tenants(&self) -> Result<Vec<Tenant>, StoreError>;
    /// Stores a token's hash.
    async fn add_token(
        &self,
        hash: &str,
        tenant: Option<&TenantId>,
        role: Role,
        name: &str,
        now: Timestamp,
    ) -> Result<(), StoreError>;
    /// The tenant and role of a token hash.
    async fn token(&self, hash: &str) -> Result<Option<(Option<TenantId>, Role)>, StoreError>;

    // --- registry -------------------------------------------------------------------

    /// Stores component bytes under their digest (idempotent).
    async fn put_component(&self, digest: &str, bytes: &[u8], now: Timestamp) -> Result<(), StoreError>;
    /// Component bytes by digest.
    async fn component(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Adds the next version of a tenant's kind and makes it current.
    async fn add_kind_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        digest: &str,
        spec: &str,
        now: Timestamp,
    ) -> Result<KindVersion, StoreError>;
    /// The version new submissions of a kind use.
    async fn current_kind(&self, tenant: &TenantId, kind: &str) -> Result<Option<KindVersion>, StoreError>;
    /// A specific version of a kind.
    async fn kind_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
    ) -> Result<Option<KindVersion>, StoreError>;
    /// A tenant's kinds.
    async fn kinds(&self, tenant: &TenantId) -> Result<Vec<KindEntry>, StoreError>;
    /// Every version of a tenant's kind.
    async fn kind_versions(&self, tenant: &TenantId, kind: &str) -> Result<Vec<KindVersion>, StoreError>;
    /// Makes an existing version current (a rollback, or a roll forward).
    async fn set_current_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
        now: Timestamp,
    ) -> Result<(), StoreError>;

    // --- jobs -----------------------------------------------------------------------

    /// Inserts submitted jobs; a job whose idempotency key exists yields the existing one.
    async fn insert_jobs(&self, jobs: Vec<NewJob>, now: Timestamp) -> Result<Vec<Inserted>, StoreError>;
    /// A job by id.
    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, StoreError>;
    /// Reads a job with its row locked (PostgreSQL `FOR UPDATE`; SQLite's write lock),
    /// derives a write from it and commits it in the same transaction: no concurrent
    /// writer can slip in between, so a busy job never starves the caller.
    async fn update_job(&self, id: JobId, now: Timestamp, derive: Derive<'_>) -> Result<Updated, StoreError>;
    /// Commits writes in one transaction; each is checked against its version.
    async fn write(&self, writes: Vec<JobWrite>, now: Timestamp) -> Result<Vec<WriteOutcome>, StoreError>;
    /// Takes up to `limit` ready jobs, best first (priority, then sequence), deriving
    /// each claim with `derive` inside the transaction; answers the claimed records.
    async fn claim(&self, limit: u32, now: Timestamp, derive: Derive<'_>) -> Result<Vec<JobRecord>, StoreError> {
        self.claim_filtered(limit, now, &ClaimFilter::default(), derive).await
    }
    /// [`claim`](Self::claim) among the jobs `filter` admits (a host dedicated to some
    /// kinds or tenants).
    async fn claim_filtered(
        &self,
        limit: u32,
        now: Timestamp,
        filter: &ClaimFilter,
        derive: Derive<'_>,
    ) -> Result<Vec<JobRecord>, StoreError>;
    /// Commits `writes` and claims up to `claim_limit` ready jobs in one transaction (a
    /// step's outcome and its worker's next job share a commit); answers the writes'
    /// outcomes and the claimed records.
    async fn write_and_claim(
        &self,
        writes: Vec<JobWrite>,
        now: Timestamp,
        claim_limit: u32,
        filter: &ClaimFilter,
        derive: Derive<'_>,
    ) -> Result<(Vec<WriteOutcome>, Vec<JobRecord>), StoreError> {
        let outcomes = self.write(writes, now).await?;
        let claimed = self.claim_filtered(claim_limit, now, filter, derive).await?;
        Ok((outcomes, claimed))
    }
    /// Makes delayed jobs whose time has come ready; answers how many.
    async fn promote_due(&self, now: Timestamp) -> Result<u64, StoreError>;
    /// When the next delayed job becomes due.
    async fn next_due(&self) -> Result<Option<Timestamp>, StoreError>;
    /// Jobs whose claim has lapsed (expired at or before `now`, as the core decides).
    async fn lapsed_claims(&self, now: Timestamp, limit: u32) -> Result<Vec<JobId>, StoreError>;
    /// Open jobs whose last activity is at or before `before`, oldest first.
    async fn silent_jobs(&self, before: Timestamp, limit: u32) -> Result<Vec<JobId>, StoreError>;
    /// A job's history, oldest first.
    async fn history(&self, id: JobId) -> Result<Vec<HistoryEntry>, StoreError>;
    /// Appends history that no job change goes with (an after-commit effect ran).
    async fn append_history(&self, id: JobId, events: &[HistoryEvent], now: Timestamp) -> Result<(), StoreError>;
    /// A tenant's jobs, newest first.
    async fn list_jobs(&self, tenant: &TenantId, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError>;
    /// Steps of an earlier pass.
    async fn pass_steps(&self, id: JobId, pass: u32) -> Result<Vec<Step>, StoreError>;
    /// Jobs by tenant, kind and state, for metrics.
    async fn depths(&self) -> Result<Vec<Depth>, StoreError>;

    // --- outbox, leases, counters -----------------------------------------------------

    /// Takes due after-commit effects, hiding them from other hosts until `now + lease`.
    async fn outbox_claim(&self, now: Timestamp, lease_micros: i64, limit: u32) -> Result<Vec<OutboxItem>, StoreError>;
    /// Marks an effect done.
    async fn outbox_done(&self, id: i64) -> Result<(), StoreError>;
    /// Reschedules an effect that failed.
    async fn outbox_retry(&self, id: i64, at: Timestamp) -> Result<(), StoreError>;
    /// Takes or renews a process-wide lease; answers its fence when this owner holds it.
    async fn singleton(
        &self,
        name: &str,
        owner: &str,
        ttl_micros: i64,
        now: Timestamp,
    ) -> Result<Option<i64>, StoreError>;
    /// Gives up a process-wide lease.
    async fn release_singleton(&self, name: &str, owner: &str) -> Result<(), StoreError>;
    /// Who holds a lease key, and with which token.
    async fn lease_holder(&self, key: &str) -> Result<Option<(JobId, i64)>, StoreError>;
    /// Invalidates a lease key (its target was deleted, or an operator revoked it): the
    /// key is free at once for waiting jobs, and its holder can no longer heartbeat or
    /// commit under it. Answers the job that held it.
    async fn invalidate_lease(&self, key: &str) -> Result<Option<JobId>, StoreError>;
    /// Adds to a shared counter.
    async fn bump_counter(&self, name: &str, by: i64) -> Result<(), StoreError>;
    /// Every shared counter.
    async fn counters(&self) -> Result<Vec<(String, i64)>, StoreError>;
}
