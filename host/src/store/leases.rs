//! Exclusive lease keys (`account:42`: no two jobs holding one run a step at once) and
//! process-wide singleton leases (one reconciler across hosts).
//!
//! A key row stays when it is released, marked free, so that its token keeps growing
//! across holders: a token that started again at 1 would repeat one an earlier holder
//! was given.

use std::collections::BTreeSet;

use async_trait::async_trait;
use spindle_core::{JobId, Timestamp};

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::Deriver;
use super::rows::parse_id;
use super::sql::{Ty, Value};
use super::writes::{Applied, finish};

/// Lease keys and singleton leases.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Invalidates a lease key (its target was deleted, or an operator revoked it): the
    /// key is free at once for waiting jobs (woken through `deriver`), and its holder can
    /// no longer heartbeat or commit under it. Answers the job that held it.
    async fn invalidate_lease(
        &self,
        key: &str,
        now: Timestamp,
        deriver: &dyn Deriver,
    ) -> Result<Option<JobId>, StoreError>;
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
}

#[async_trait]
impl LeaseStore for SqlStore {
    async fn invalidate_lease(
        &self,
        key: &str,
        now: Timestamp,
        deriver: &dyn Deriver,
    ) -> Result<Option<JobId>, StoreError> {
        let mut tx = self.db.begin().await?;
        let lock = self.db.backend().for_update();
        let sql = format!("SELECT job_id FROM leases WHERE key = $1 AND job_id <> ''{lock}");
        let holder = tx
            .fetch(&sql, vec![Value::from(key)], &[Ty::Text])
            .await?
            .first()
            .map(|r| r.text(0, "leases.job_id"))
            .transpose()?;
        if holder.is_some() {
            tx.execute(
                "UPDATE leases SET job_id = '', holder_fence = 0, owner = '', expires_at = 0 WHERE key = $1",
                vec![Value::from(key)],
            )
            .await?;
            let released = Applied { released: BTreeSet::from([key.to_owned()]), ..Applied::default() };
            finish(&mut tx, &released, now, deriver).await?;
        }
        tx.commit().await?;
        holder.map(|h| parse_id(&h, "lease job id")).transpose()
    }

    async fn singleton(
        &self,
        name: &str,
        owner: &str,
        ttl_micros: i64,
        now: Timestamp,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self.db.begin().await?;
        let rows = tx
            .fetch(
                "INSERT INTO singletons (name, owner, fence, expires_at) VALUES ($1, $2, 1, $3) \
                 ON CONFLICT (name) DO UPDATE SET \
                 fence = CASE WHEN singletons.owner = excluded.owner THEN singletons.fence ELSE singletons.fence + 1 END, \
                 owner = excluded.owner, expires_at = excluded.expires_at \
                 WHERE singletons.owner = excluded.owner OR singletons.expires_at <= $4 RETURNING fence",
                vec![
                    Value::from(name),
                    Value::from(owner),
                    Value::from(now.as_micros().saturating_add(ttl_micros)),
                    Value::from(now.as_micros()),
                ],
                &[Ty::Int],
            )
            .await?;
        tx.commit().await?;
        rows.first().map(|r| r.int(0, "leases.holder_fence")).transpose()
    }

    async fn release_singleton(&self, name: &str, owner: &str) -> Result<(), StoreError> {
        self.db
            .execute(
                "UPDATE singletons SET expires_at = 0 WHERE name = $1 AND owner = $2",
                vec![Value::from(name), Value::from(owner)],
            )
            .await?;
        Ok(())
    }
}
