//! The SQL store: the connection pools, the fairness setting and the queue of
//! concurrent submissions, which every store trait is implemented on.

use super::error::StoreError;
use super::sql::{self, ConnectOptions};
use super::{schema, submissions};

/// The SQL store.
#[derive(Clone, Debug)]
pub struct SqlStore {
    pub(super) db: sql::Db,
    /// Whether submissions get fair tags (claims share a layer between tenants by
    /// weight) or all tag 0 (submission order, as before fairness).
    pub(super) fair: bool,
    /// Concurrent submissions waiting to be inserted together.
    pub(super) submissions: std::sync::Arc<submissions::SubmissionQueue>,
}

impl SqlStore {
    /// The same store with fair claiming on or off (on by default).
    pub fn with_fairness(self, fair: bool) -> Self {
        Self { fair, ..self }
    }

    /// Connects and runs the schema's expand steps (on SQLite, every step): what a host
    /// does when it starts, beside hosts of the previous build.
    pub async fn connect(options: &ConnectOptions) -> Result<Self, StoreError> {
        let db = sql::Db::connect(options).await?;
        schema::migrate_phases(&db, &[schema::Phase::Expand]).await?;
        Ok(Self::on(db))
    }

    /// Runs the schema's steps of `phases` not yet applied (`spindle migrate`); answers
    /// how many ran.
    pub async fn migrate(&self, phases: &[schema::Phase]) -> Result<usize, StoreError> {
        schema::migrate_phases(&self.db, phases).await
    }

    /// The contract steps not yet applied, by version.
    pub async fn pending_contract(&self) -> Result<Vec<i64>, StoreError> {
        schema::pending_contract(&self.db).await
    }

    /// The store over `db`, whose schema is up to date, with fair claiming on.
    pub(super) fn on(db: sql::Db) -> Self {
        Self { db, fair: true, submissions: std::sync::Arc::default() }
    }

    /// The connection pools (closed at shutdown; read directly by tests and tools).
    pub fn db(&self) -> &sql::Db {
        &self.db
    }
}
