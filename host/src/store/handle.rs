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

    /// Connects and brings the schema up to date.
    pub async fn connect(options: &ConnectOptions) -> Result<Self, StoreError> {
        let db = sql::Db::connect(options).await?;
        schema::migrate(&db).await?;
        Ok(Self::on(db))
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
