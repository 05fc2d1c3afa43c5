//! Storage failures: one error type for every store operation.

use spindle_core::capacity::QuotaRefusal;
use thiserror::Error;

/// Storage failures. A conflict is not one: it is a [`WriteOutcome`](super::WriteOutcome).
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
    /// The request cannot be served by this store (a PostgreSQL-only feature on SQLite,
    /// a malformed name): nothing was written.
    #[error("{0}")]
    Unsupported(String),
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
