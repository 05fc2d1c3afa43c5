//! Tenants, their tokens, and the reads the API serves: the API reaches the store only
//! through the engine.

use spindle_core::Timestamp;

use super::{Engine, EngineError};
use crate::store::{Depth, JobFilter, JobRecord, Role, StoreError, Tenant, TenantId};
use crate::tokens;

impl Engine {
    /// Creates a tenant and its first API token (answered once: only its hash is kept).
    pub async fn create_tenant(&self, name: &str) -> Result<(Tenant, String), EngineError> {
        let now = self.now();
        let tenant = self.store.create_tenant(name, now).await?;
        let token = self.add_token(Some(&tenant.id), Role::Tenant, "initial", now).await?;
        Ok((tenant, token))
    }

    /// Tenants that keep their finished jobs for a time of their own.
    pub async fn retention_overrides(&self) -> Result<Vec<(TenantId, std::time::Duration)>, EngineError> {
        Ok(self.store.retention_overrides().await?)
    }

    /// Sets (or clears) how long a tenant's finished jobs are kept.
    pub async fn set_retention(&self, tenant: &TenantId, keep: Option<std::time::Duration>) -> Result<(), EngineError> {
        Ok(self.store.set_retention(tenant, keep).await?)
    }

    /// Every tenant.
    pub async fn tenants(&self) -> Result<Vec<Tenant>, EngineError> {
        Ok(self.store.tenants().await?)
    }

    /// Issues another token for an existing tenant.
    pub async fn issue_token(&self, tenant: &TenantId) -> Result<String, EngineError> {
        if self.store.tenant(tenant).await?.is_none() {
            return Err(EngineError::Store(StoreError::NotFound(format!("tenant {tenant}"))));
        }
        self.add_token(Some(tenant), Role::Tenant, "issued", self.now()).await
    }

    /// Makes `token` an operator token. Idempotent, and safe for hosts that start
    /// together with the same token.
    pub async fn register_operator_token(&self, token: &str) -> Result<(), EngineError> {
        let hash = tokens::hash(token);
        self.store.add_token(&hash, None, Role::Operator, "operator", self.now()).await?;
        match self.store.token(&hash).await? {
            Some((None, Role::Operator)) => Ok(()),
            _ => Err(EngineError::Invalid("that token is already a tenant's token".into())),
        }
    }

    /// The tenant and role a presented token stands for, if it is one.
    pub async fn authenticate(&self, token: &str) -> Result<Option<(Option<TenantId>, Role)>, EngineError> {
        Ok(self.store.token(&tokens::hash(token)).await?)
    }

    async fn add_token(
        &self,
        tenant: Option<&TenantId>,
        role: Role,
        name: &str,
        now: Timestamp,
    ) -> Result<String, EngineError> {
        let token = tokens::generate();
        self.store.add_token(&tokens::hash(&token), tenant, role, name, now).await?;
        Ok(token)
    }

    /// A page of a tenant's jobs, newest first.
    pub async fn list_jobs(&self, tenant: &TenantId, filter: &JobFilter) -> Result<Vec<JobRecord>, EngineError> {
        Ok(self.store.list_jobs(tenant, filter).await?)
    }

    /// Open jobs by tenant, kind and state.
    pub async fn depths(&self) -> Result<Vec<Depth>, EngineError> {
        Ok(self.store.depths().await?)
    }

    /// The counters every host shares (alerts, sandbox faults).
    pub async fn shared_counters(&self) -> Result<Vec<(String, i64)>, EngineError> {
        Ok(self.store.counters().await?)
    }
}
