//! Durable state: storage traits by domain, one sqlx implementation over two backends
//! (SQLite, the embedded default, and PostgreSQL for many hosts), one conformance suite.
//!
//! The store never decides anything: the engine derives every change with the pure core
//! and hands the store a [`JobWrite`] (the job as it must be, the history, the lease-key
//! operations), which the store commits in one transaction guarded by the row version
//! the change was derived from. Where a transaction needs a decision about a job it did
//! not come with — a claim, a due job, a busy or released lease key — it asks the
//! [`Deriver`] it was given.
//!
//! - [`tenants`]: tenants and API tokens.
//! - [`registry`]: deployed components and kind versions.
//! - [`jobs`]: submission, reads, writes, history, listings.
//! - [`queue`]: work discovery and the dispatch queue.
//! - [`leases`]: exclusive lease keys and singleton leases.
//! - [`outbox`]: after-commit effects and shared counters.
//! - [`outbound`]: tenants' outbound rules and sealed secrets, the record of requests.
//! - [`workflows`]: a parent's children, signals, cron schedules.
//! - [`capacity`]: tenants' limits and fair tags, submission quotas, running limits, usage.
//! - [`logs`]: each job's guest lines, capped; [`audit`]: bulk operations and alerts.
//! - `writes`: the version-checked write path; `rows`: row encoding; [`sql`]: the
//!   connection pools; `turns`: who goes next at SQLite's one writer; `schema`:
//!   migrations.

pub mod audit;
pub mod capacity;
pub mod jobs;
pub mod leases;
pub mod logs;
pub mod outbound;
pub mod outbox;
pub mod queue;
pub mod registry;
mod rows;
mod schema;
pub mod sql;
mod submissions;
pub mod tenants;
#[cfg(test)]
mod test_db;
mod traces;
mod turns;
pub mod workflows;
mod writes;

use thiserror::Error;

pub use audit::{Alert, AuditStore, Operation};
pub use capacity::{CapacityStore, LiveCount, QuotaRefusal, TenantLimits, Usage};
pub use jobs::{
    Depth, Derive, HistoryEntry, Inserted, JobFilter, JobRecord, JobStore, NewJob, PruneScope, QueueDepth, Updated,
};
pub use leases::LeaseStore;
pub use logs::{JobLogs, LogCaps, LogLine, LogStore};
pub use outbound::{OutboundStore, RecordedCall, SecretInfo};
pub use outbox::{OutboxEffect, OutboxItem, OutboxStore};
pub use queue::{ClaimFilter, Deriver, QueueStore, ReadySignals};
pub use registry::{DeployRecord, DeployState, KindEntry, KindVersion, RegistryStore};
pub use sql::{Backend, ConnectOptions, SqliteSync};
pub use tenants::{Role, TOKEN_ID_CHARS, Tenant, TenantId, TenantStore, TokenInfo, token_id};
pub use traces::TraceStore;
pub use workflows::{ScheduleRow, WorkflowStore};
pub use writes::{IndexedColumns, JobWrite, LeaseOp, NewSignal, Relay, WriteOutcome};

/// The storage traits, to call a concrete store's methods (`use spindle::store::prelude::*`).
pub mod prelude {
    pub use super::{
        AuditStore, CapacityStore, JobStore, LeaseStore, LogStore, OutboundStore, OutboxStore, QueueStore,
        RegistryStore, Storage, TenantStore, TraceStore, WorkflowStore,
    };
}

/// Everything a host needs of its store. Implemented by [`SqlStore`] over both
/// backends; wrappers (a fault injector in tests) can stand in.
pub trait Storage:
    TenantStore
    + RegistryStore
    + JobStore
    + QueueStore
    + LeaseStore
    + OutboxStore
    + OutboundStore
    + WorkflowStore
    + CapacityStore
    + LogStore
    + AuditStore
    + TraceStore
    + std::fmt::Debug
{
    /// Which backend.
    fn backend(&self) -> Backend;
}

/// Storage failures. A conflict is not one: it is a [`WriteOutcome`].
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database failed.
    #[error("database: {0}")]
    Database(sqlx::Error),
    /// A stored value did not decode.
    #[error("corrupt stored data: {0}")]
    Corrupt(String),
    /// A unique name is taken.
    #[error("already exists: {0}")]
    Duplicate(String),
    /// The referenced row does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The transaction carrying the write was abandoned before it answered.
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// A submission over one of its tenant's quotas: nothing was written.
    #[error("quota exceeded ({}): {}", .0.quota, .0.message)]
    QuotaExceeded(QuotaRefusal),
    /// A submission pinned its jobs to a version of the kind that is no longer current
    /// (another deploy or rollback came first): nothing was written.
    #[error("kind {kind:?} is no longer at version {pinned}")]
    VersionMoved {
        /// The kind.
        kind: String,
        /// The version the submission pinned.
        pinned: i64,
    },
}

impl From<sqlx::Error> for StoreError {
    /// A column that does not decode as its type (a NULL, a value of another type) is
    /// corrupt data; anything else is the database failing.
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => Self::Corrupt(e.to_string()),
            other => Self::Database(other),
        }
    }
}

/// The SQL store.
#[derive(Clone, Debug)]
pub struct SqlStore {
    db: sql::Db,
    /// Whether submissions get fair tags (claims share a layer between tenants by
    /// weight) or all tag 0 (submission order, as before fairness).
    fair: bool,
    /// Concurrent submissions waiting to be inserted together.
    submissions: std::sync::Arc<submissions::SubmissionQueue>,
}

impl SqlStore {
    /// The same store with fair claiming on or off (on by default).
    pub fn with_fairness(self, fair: bool) -> Self {
        Self { fair, ..self }
    }

    /// Connects and brings the schema up to date.
    pub async fn connect(options: &ConnectOptions) -> Result<Self, StoreError> {
        let db = sql::Db::connect(options).await?;
        schema::migrate(&db).await?;
        Ok(Self::on(db))
    }

    /// The store over `db`, whose schema is up to date, with fair claiming on.
    fn on(db: sql::Db) -> Self {
        Self { db, fair: true, submissions: std::sync::Arc::default() }
    }

    /// The connection pools (closed at shutdown; read directly by tests and tools).
    pub fn db(&self) -> &sql::Db {
        &self.db
    }
}

impl Storage for SqlStore {
    fn backend(&self) -> Backend {
        self.db.backend()
    }
}
