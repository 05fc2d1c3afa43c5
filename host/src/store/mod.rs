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
//! - [`capacity`]: tenants' limits and the facts of fair tags, quotas and running limits.
//! - [`logs`]: each job's guest lines, capped; [`audit`]: bulk operations and alerts.
//! - [`hosts`]: live hosts and the storage format gate (hosts of two builds on one database).
//! - [`sql_submissions`]: jobs applications submit in their own PostgreSQL transactions.
//!
//! The files are layers, each importing only those before it ([`LAYERS`], checked by a
//! test): `turns` and `error`; `values` (what crosses to the database) and [`sql`] (the
//! connection pools, the backends' dialect);
//! `rows` (statements over many rows), `collation` (0015 online) and `schema` (migrations,
//! expand and contract); `records` (the plain
//! records everything above stores); `submissions` (concurrent submissions merged) and
//! `handle` ([`SqlStore`]); `job_rows` (a job's rows); the domains that stand alone
//! (tenants, audit, logs, outbound, outbox, registry, traces, hosts, sql_submissions,
//! capacity); `lease_keys`
//! and `inserts` (a write's lease keys and new jobs); `writes` (the version-checked
//! write path and what it wakes); and on top the stores built on it: queue, leases,
//! workflows, jobs. The store names nothing of the sandbox: what a step reports is
//! `spindle_core::reports`, and outbound rules are kept as the document they are.

pub mod audit;
pub mod capacity;
mod collation;
mod door_tags;
mod error;
mod handle;
pub mod hosts;
mod inserts;
mod job_rows;
pub mod jobs;
mod lease_keys;
pub mod leases;
pub mod logs;
pub mod outbound;
pub mod outbox;
pub mod queue;
mod records;
pub mod registry;
mod rows;
pub mod schema;
pub mod sql;
pub mod sql_submissions;
mod submissions;
pub mod tenants;
#[cfg(test)]
mod test_db;
mod traces;
mod turns;
mod values;
pub mod workflows;
mod writes;

pub use audit::{Alert, AuditStore, Operation, OperationQuery};
pub use capacity::{CapacityStore, LiveCount, QuotaRefusal, TenantLimits, Usage};
pub use error::StoreError;
pub use handle::SqlStore;
pub use hosts::{GateRow, Gated, HostRow, HostStore};
pub use job_rows::read_as;
pub use jobs::JobStore;
pub use leases::LeaseStore;
pub use logs::{JobLogs, LogCaps, LogLine, LogStore};
pub use outbound::{OutboundStore, RecordedCall, SecretInfo};
pub use outbox::{OutboxItem, OutboxStore};
pub use queue::{QueueStore, ReadySignals};
pub use records::{
    ClaimFilter, Depth, Derive, Deriver, HistoryEntry, IndexedColumns, Inserted, JobFilter, JobRecord, JobWrite,
    LeaseOp, NewJob, NewSignal, OutboxEffect, PruneScope, QueueDepth, Relay, TenantId, Updated, WriteOutcome,
};
pub use registry::{DeployRecord, DeployState, KindEntry, KindVersion, RegistryStore};
pub use sql::{Backend, ConnectOptions, SqliteSync};
pub use sql_submissions::{SqlSubmission, SqlSubmissionStore, SqlTake, SqlText, SqlVerdict, TakenSql};
pub use tenants::{MintedBy, Presented, Role, TOKEN_ID_CHARS, Tenant, TenantStore, TokenInfo, token_id};
pub use traces::TraceStore;
pub use workflows::{ScheduleRow, WorkflowStore};

/// The storage traits, to call a concrete store's methods (`use spindle::store::prelude::*`).
pub mod prelude {
    pub use super::{
        AuditStore, CapacityStore, HostStore, JobStore, LeaseStore, LogStore, OutboundStore, OutboxStore, QueueStore,
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
    + HostStore
    + SqlSubmissionStore
    + std::fmt::Debug
{
    /// Which backend.
    fn backend(&self) -> Backend;
}

impl Storage for SqlStore {
    fn backend(&self) -> Backend {
        self.db.backend()
    }
}

/// The store's files from the bottom up: each may import only files before it.
pub const LAYERS: &[&str] = &[
    "turns",
    "error",
    "values",
    "sql",
    "rows",
    "collation",
    "door_tags",
    "schema",
    "test_db",
    "records",
    "submissions",
    "handle",
    "job_rows",
    "tenants",
    "audit",
    "logs",
    "outbound",
    "outbox",
    "registry",
    "traces",
    "hosts",
    "sql_submissions",
    "capacity",
    "lease_keys",
    "inserts",
    "writes",
    "queue",
    "leases",
    "workflows",
    "jobs",
];

#[cfg(test)]
mod layers {
    use super::LAYERS;

    /// The store modules `source` (outside its tests) imports.
    fn imports(source: &str) -> Vec<String> {
        let code = source.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let mut found = Vec::new();
        for (i, _) in code.match_indices("super::") {
            let rest = &code[i + "super::".len()..];
            let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                group
                    .split('}')
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap_or_default())
                    .collect()
            } else {
                vec![rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or_default()]
            };
            found.extend(names.into_iter().filter(|n| LAYERS.contains(n)).map(str::to_owned));
        }
        found
    }

    /// No store file imports a file above it (so none imports another in a circle), and
    /// every file is in the list.
    #[test]
    fn every_store_file_imports_only_the_layers_below_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
        let mut upward = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("src/store") {
            let path = entry.expect("an entry").path();
            let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            if name == "mod" {
                continue;
            }
            let at = LAYERS.iter().position(|l| *l == name).unwrap_or_else(|| panic!("{name}.rs is in no layer"));
            let source = std::fs::read_to_string(&path).expect("readable");
            for import in imports(&source) {
                let theirs = LAYERS.iter().position(|l| *l == import).unwrap_or(usize::MAX);
                if theirs >= at && import != name {
                    upward.push(format!("{name} imports {import}"));
                }
            }
        }
        assert!(upward.is_empty(), "imports upward: {upward:?}");
    }
}
