//! What steps may reach outward and what they did: each tenant's outbound rules, its
//! secrets (sealed by the host before they get here: the store never sees plaintext),
//! and the record of every outbound request a step attempt made.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use spindle_core::reports::OutboundCall;
use spindle_core::{JobId, Timestamp};

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::TenantId;
use super::rows::{Columns, corrupt};
use super::sql::{Ty, Value};

/// A secret's name and when it was last set: all that is ever shown of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretInfo {
    /// Its name.
    pub name: String,
    /// When it was last set.
    pub updated_at: Timestamp,
}

/// One recorded outbound request, with the step attempt that made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// The step's key.
    pub step: String,
    /// The attempt that made it.
    pub attempt: u32,
    /// When the call that made it ended.
    pub at: Timestamp,
    /// The request.
    #[serde(flatten)]
    pub call: OutboundCall,
}

/// Most recorded requests one job view lists (the newest).
pub const MAX_LISTED_CALLS: u32 = 500;

/// Outbound rules, secrets and request records.
#[async_trait]
pub trait OutboundStore: Send + Sync {
    /// Sets (or with `None` clears) what `tenant`'s steps may reach.
    async fn set_tenant_outbound(&self, tenant: &TenantId, rules: Option<&str>) -> Result<(), StoreError>;
    /// What `tenant`'s steps may reach (empty: nothing).
    async fn tenant_outbound(&self, tenant: &TenantId) -> Result<Option<String>, StoreError>;
    /// Stores `tenant`'s secret `name`, sealed.
    async fn put_secret(&self, tenant: &TenantId, name: &str, sealed: &str, now: Timestamp) -> Result<(), StoreError>;
    /// Removes a secret; answers whether it existed.
    async fn delete_secret(&self, tenant: &TenantId, name: &str) -> Result<bool, StoreError>;
    /// `tenant`'s secrets' names.
    async fn secrets(&self, tenant: &TenantId) -> Result<Vec<SecretInfo>, StoreError>;
    /// The sealed values of those of `names` that `tenant` has set.
    async fn sealed_secrets(&self, tenant: &TenantId, names: &[String]) -> Result<Vec<(String, String)>, StoreError>;
    /// Records the requests one step call made.
    async fn record_calls(
        &self,
        job: JobId,
        step: &str,
        attempt: u32,
        calls: &[OutboundCall],
        at: Timestamp,
    ) -> Result<(), StoreError>;
    /// The newest requests `job`'s steps made (at most [`MAX_LISTED_CALLS`]), oldest first.
    async fn calls(&self, job: JobId) -> Result<Vec<RecordedCall>, StoreError>;
}

#[async_trait]
impl OutboundStore for SqlStore {
    async fn set_tenant_outbound(&self, tenant: &TenantId, rules: Option<&str>) -> Result<(), StoreError> {
        let changed = self
            .db
            .execute(
                "UPDATE tenants SET outbound = $1 WHERE id = $2",
                vec![Value::from(rules.map(str::to_owned)), Value::from(tenant.0.as_str())],
            )
            .await?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("tenant {tenant}")));
        }
        Ok(())
    }

    async fn tenant_outbound(&self, tenant: &TenantId) -> Result<Option<String>, StoreError> {
        let rows = self
            .db
            .fetch("SELECT outbound FROM tenants WHERE id = $1", vec![Value::from(tenant.0.as_str())], &[Ty::OptText])
            .await?;
        Ok(rows.first().map(|r| r.opt_text(0, "tenants.outbound")).transpose()?.flatten())
    }

    async fn put_secret(&self, tenant: &TenantId, name: &str, sealed: &str, now: Timestamp) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO secrets (tenant_id, name, sealed, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (tenant_id, name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                vec![Value::from(tenant.0.as_str()), Value::from(name), Value::from(sealed), Value::from(now.as_micros())],
            )
            .await?;
        Ok(())
    }

    async fn delete_secret(&self, tenant: &TenantId, name: &str) -> Result<bool, StoreError> {
        let deleted = self
            .db
            .execute(
                "DELETE FROM secrets WHERE tenant_id = $1 AND name = $2",
                vec![Value::from(tenant.0.as_str()), Value::from(name)],
            )
            .await?;
        Ok(deleted > 0)
    }

    async fn secrets(&self, tenant: &TenantId) -> Result<Vec<SecretInfo>, StoreError> {
        static SECRET: Columns =
            Columns { table: "secrets", names: &["name", "updated_at"], tys: &[Ty::Text, Ty::Int] };
        let rows = self
            .db
            .fetch(
                &format!("SELECT {} FROM secrets WHERE tenant_id = $1 ORDER BY name", SECRET.list()),
                vec![Value::from(tenant.0.as_str())],
                SECRET.tys,
            )
            .await
            .map_err(|e| SECRET.in_table(e))?;
        rows.into_iter()
            .map(|mut row| {
                let r = SECRET.read(&mut row);
                Ok(SecretInfo { name: r.text("name")?, updated_at: r.ts("updated_at")? })
            })
            .collect()
    }

    async fn sealed_secrets(&self, tenant: &TenantId, names: &[String]) -> Result<Vec<(String, String)>, StoreError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let list = super::rows::placeholders(2, names.len());
        let mut args = vec![Value::from(tenant.0.as_str())];
        args.extend(names.iter().map(|n| Value::from(n.as_str())));
        let sql = format!("SELECT name, sealed FROM secrets WHERE tenant_id = $1 AND name IN ({list})");
        let rows = self.db.fetch(&sql, args, &[Ty::Text, Ty::Text]).await?;
        rows.iter().map(|r| Ok((r.text(0, "secrets.name")?, r.text(1, "secrets.sealed")?))).collect()
    }

    async fn record_calls(
        &self,
        job: JobId,
        step: &str,
        attempt: u32,
        calls: &[OutboundCall],
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        for call in calls {
            let body = serde_json::to_string(call).map_err(corrupt)?;
            tx.execute(
                "INSERT INTO outbound_calls (job_id, step, attempt, seq, at, body) VALUES ($1, $2, $3, $4, $5, $6)",
                vec![
                    Value::from(job.to_string()),
                    Value::from(step),
                    Value::from(i64::from(attempt)),
                    Value::from(i64::from(call.seq)),
                    Value::from(at.as_micros()),
                    Value::from(body),
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn calls(&self, job: JobId) -> Result<Vec<RecordedCall>, StoreError> {
        static CALL: Columns = Columns {
            table: "outbound_calls",
            names: &["step", "attempt", "at", "body"],
            tys: &[Ty::Text, Ty::Int, Ty::Int, Ty::Text],
        };
        let rows = self
            .db
            .fetch(
                &format!(
                    "SELECT {} FROM outbound_calls WHERE job_id = $1 ORDER BY at DESC, seq DESC LIMIT $2",
                    CALL.list()
                ),
                vec![Value::from(job.to_string()), Value::from(i64::from(MAX_LISTED_CALLS))],
                CALL.tys,
            )
            .await
            .map_err(|e| CALL.in_table(e))?;
        let mut calls = rows
            .into_iter()
            .map(|mut row| {
                let r = CALL.read(&mut row);
                Ok(RecordedCall {
                    step: r.text("step")?,
                    attempt: r.num("attempt")?,
                    at: r.ts("at")?,
                    call: r.json("body")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        calls.reverse();
        Ok(calls)
    }
}
