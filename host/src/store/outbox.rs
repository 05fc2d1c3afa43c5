//! After-commit effects (success notifications, failure effects of corrected
//! settlements), durably queued with the write that decided them, and shared
//! operational counters.

use async_trait::async_trait;
use spindle_core::{JobId, Timestamp};

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::OutboxEffect;
use super::rows::Columns;
use super::sql::{Ty, Value};

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
    /// What it is about beyond its job, if anything.
    pub detail: Option<String>,
}

/// The outbox and the shared counters.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Takes due after-commit effects, hiding them from other hosts until `now + lease`.
    async fn outbox_claim(
        &self,
        effects: &[OutboxEffect],
        now: Timestamp,
        lease_micros: i64,
        limit: u32,
    ) -> Result<Vec<OutboxItem>, StoreError>;
    /// Marks an effect done.
    async fn outbox_done(&self, ids: &[i64]) -> Result<(), StoreError>;
    /// Reschedules effects that failed, or were put off, to `at`.
    async fn outbox_retry(&self, ids: &[i64], at: Timestamp) -> Result<(), StoreError>;
    /// Adds to a shared counter.
    async fn bump_counter(&self, name: &str, by: i64) -> Result<(), StoreError>;
    /// Every shared counter.
    async fn counters(&self) -> Result<Vec<(String, i64)>, StoreError>;
}

#[async_trait]
impl OutboxStore for SqlStore {
    async fn outbox_claim(
        &self,
        effects: &[OutboxEffect],
        now: Timestamp,
        lease_micros: i64,
        limit: u32,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let mut tx = self.db.begin().await?;
        static ITEM: Columns = Columns {
            table: "outbox",
            names: &["id", "job_id", "effect", "attempts", "detail"],
            tys: &[Ty::Int, Ty::Text, Ty::Text, Ty::Int, Ty::OptText],
        };
        let names = effects.iter().map(|e| format!("'{}'", e.as_str())).collect::<Vec<_>>().join(", ");
        let sql = format!(
            "SELECT {} FROM outbox WHERE run_at <= $1 AND effect IN ({names}) ORDER BY run_at LIMIT $2{}",
            ITEM.list(),
            self.db.backend().skip_locked()
        );
        let rows = tx
            .fetch(&sql, vec![Value::from(now.as_micros()), Value::from(i64::from(limit))], ITEM.tys)
            .await
            .map_err(|e| ITEM.in_table(e))?;
        let mut items = Vec::with_capacity(rows.len());
        for mut row in rows {
            let r = ITEM.read(&mut row);
            items.push(OutboxItem {
                id: r.int("id")?,
                job_id: r.id("job_id")?,
                effect: r.parse("effect", OutboxEffect::parse)?,
                attempts: r.int("attempts")?,
                detail: r.opt_text("detail")?,
            });
        }
        // Hidden from other hosts until the lease ends, in one statement per chunk.
        for chunk in items.chunks(super::rows::MAX_PARAMS - 1) {
            let mut args = vec![Value::from(now.as_micros().saturating_add(lease_micros))];
            args.extend(chunk.iter().map(|item| Value::from(item.id)));
            let sql =
                format!("UPDATE outbox SET run_at = $1 WHERE id IN ({})", super::rows::placeholders(2, chunk.len()));
            tx.execute(&sql, args).await?;
        }
        tx.commit().await?;
        Ok(items)
    }

    async fn outbox_done(&self, ids: &[i64]) -> Result<(), StoreError> {
        // One statement per chunk: a relay pass marks a thousand children's rows at once.
        for chunk in ids.chunks(super::rows::MAX_PARAMS) {
            let sql = format!("DELETE FROM outbox WHERE id IN ({})", super::rows::placeholders(1, chunk.len()));
            self.db.execute(&sql, chunk.iter().map(|id| Value::from(*id)).collect()).await?;
        }
        Ok(())
    }

    async fn outbox_retry(&self, ids: &[i64], at: Timestamp) -> Result<(), StoreError> {
        for chunk in ids.chunks(super::rows::MAX_PARAMS - 1) {
            let sql = format!(
                "UPDATE outbox SET attempts = attempts + 1, run_at = $1 WHERE id IN ({})",
                super::rows::placeholders(2, chunk.len())
            );
            let mut args = vec![Value::from(at.as_micros())];
            args.extend(chunk.iter().map(|id| Value::from(*id)));
            self.db.execute(&sql, args).await?;
        }
        Ok(())
    }

    async fn bump_counter(&self, name: &str, by: i64) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO counters (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
                vec![Value::from(name), Value::from(by)],
            )
            .await?;
        Ok(())
    }

    async fn counters(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows =
            self.db.fetch("SELECT name, value FROM counters ORDER BY name", vec![], &[Ty::Text, Ty::Int]).await?;
        rows.iter().map(|r| Ok((r.text(0, "counters.name")?, r.int(1, "counters.value")?))).collect()
    }
}
