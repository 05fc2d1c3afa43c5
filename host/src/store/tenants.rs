//! Tenants and their API tokens (stored as SHA-256 hashes, never in the clear).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use spindle_core::Timestamp;

use super::rows::ts;
use super::sql::{Ty, Value};
use super::{SqlStore, StoreError};

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

/// Tenants and tokens.
#[async_trait]
pub trait TenantStore: Send + Sync {
    /// Tenants that keep their finished jobs for a time of their own.
    async fn retention_overrides(&self) -> Result<Vec<(TenantId, std::time::Duration)>, StoreError>;
    /// Sets (or, with `None`, clears) how long a tenant's finished jobs are kept.
    async fn set_retention(&self, tenant: &TenantId, keep: Option<std::time::Duration>) -> Result<(), StoreError>;
    /// Creates a tenant (its id is its name).
    async fn create_tenant(&self, name: &str, now: Timestamp) -> Result<Tenant, StoreError>;
    /// A tenant by id.
    async fn tenant(&self, id: &TenantId) -> Result<Option<Tenant>, StoreError>;
    /// Every tenant.
    async fn tenants(&self) -> Result<Vec<Tenant>, StoreError>;
    /// Stores a token's hash; a hash already stored stays as it is (hosts starting
    /// together register one operator token).
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
}

#[async_trait]
impl TenantStore for SqlStore {
    async fn retention_overrides(&self) -> Result<Vec<(TenantId, std::time::Duration)>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id, retention_secs FROM tenants WHERE retention_secs IS NOT NULL ORDER BY id",
                vec![],
                &[Ty::Text, Ty::Int],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| (TenantId(r.text(0)), std::time::Duration::from_secs(u64::try_from(r.int(1)).unwrap_or(0))))
            .collect())
    }

    async fn set_retention(&self, tenant: &TenantId, keep: Option<std::time::Duration>) -> Result<(), StoreError> {
        let secs = keep.map(|k| i64::try_from(k.as_secs()).unwrap_or(i64::MAX));
        let changed = self
            .db
            .execute(
                "UPDATE tenants SET retention_secs = $1 WHERE id = $2",
                vec![Value::from(secs), Value::from(tenant.0.as_str())],
            )
            .await?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("tenant {tenant}")));
        }
        Ok(())
    }

    async fn create_tenant(&self, name: &str, now: Timestamp) -> Result<Tenant, StoreError> {
        let inserted = self
            .db
            .execute(
                "INSERT INTO tenants (id, name, created_at) VALUES ($1, $1, $2) ON CONFLICT DO NOTHING",
                vec![Value::from(name), Value::from(now.as_micros())],
            )
            .await?;
        if inserted == 0 {
            return Err(StoreError::Duplicate(format!("tenant {name}")));
        }
        Ok(Tenant { id: TenantId(name.to_owned()), name: name.to_owned(), created_at: now })
    }

    async fn tenant(&self, id: &TenantId) -> Result<Option<Tenant>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id, name, created_at FROM tenants WHERE id = $1",
                vec![Value::from(id.0.as_str())],
                &[Ty::Text, Ty::Text, Ty::Int],
            )
            .await?;
        Ok(rows.first().map(|r| Tenant { id: TenantId(r.text(0)), name: r.text(1), created_at: ts(r, 2) }))
    }

    async fn tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        let rows = self
            .db
            .fetch("SELECT id, name, created_at FROM tenants ORDER BY name", vec![], &[Ty::Text, Ty::Text, Ty::Int])
            .await?;
        Ok(rows.iter().map(|r| Tenant { id: TenantId(r.text(0)), name: r.text(1), created_at: ts(r, 2) }).collect())
    }

    async fn add_token(
        &self,
        hash: &str,
        tenant: Option<&TenantId>,
        role: Role,
        name: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO api_tokens (token_hash, tenant_id, role, name, created_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (token_hash) DO NOTHING",
                vec![
                    Value::from(hash),
                    Value::from(tenant.map(|t| t.0.clone())),
                    Value::from(role.as_str()),
                    Value::from(name),
                    Value::from(now.as_micros()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn token(&self, hash: &str) -> Result<Option<(Option<TenantId>, Role)>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT tenant_id, role FROM api_tokens WHERE token_hash = $1",
                vec![Value::from(hash)],
                &[Ty::OptText, Ty::Text],
            )
            .await?;
        rows.first()
            .map(|r| {
                let role = match r.text(1).as_str() {
                    "operator" => Role::Operator,
                    "tenant" => Role::Tenant,
                    other => return Err(super::rows::corrupt(format!("token role {other:?}"))),
                };
                Ok((r.opt_text(0).map(TenantId), role))
            })
            .transpose()
    }
}
