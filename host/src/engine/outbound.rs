//! What a step may reach outward, assembled per step from its deployment, its tenant's
//! rules and its tenant's secrets; and the tenant-facing commands that set those rules
//! and secrets.

use std::sync::Arc;

use spindle_runtime::outbound::{Capabilities, Rules, Secret};

use super::{Engine, EngineError};
use crate::capabilities::{Deployment, MAX_SECRET_BYTES, MIN_SECRET_BYTES, SecretKey, is_valid_name};
use crate::store::{JobRecord, SecretInfo, TenantId};

impl Engine {
    fn key(&self) -> Result<&SecretKey, EngineError> {
        self.secret_key.get().ok_or_else(|| EngineError::Invalid("this host has no secret key".into()))
    }

    /// The capabilities of a step of `record` under `deployment`. A deployment that
    /// allows, declares and sets nothing costs no read.
    pub(super) async fn capabilities(
        &self,
        record: &JobRecord,
        deployment: &Deployment,
    ) -> Result<Arc<Capabilities>, EngineError> {
        let tenant = record.tenant.0.clone();
        if deployment.is_empty() {
            return Ok(Arc::new(Capabilities { tenant, ..Capabilities::default() }));
        }
        let tenant_rules = if deployment.allow.is_empty() {
            Rules::default()
        } else {
            self.tenancy().tenant_outbound(&record.tenant).await?
        };
        let mut secrets = std::collections::BTreeMap::new();
        if !deployment.secrets.is_empty() {
            let key = self.key()?;
            for (name, sealed) in self.store.sealed_secrets(&record.tenant, &deployment.secrets).await? {
                match key.open(&tenant, &name, &sealed).map(String::from_utf8) {
                    Ok(Ok(value)) => {
                        secrets.insert(name, Secret(value));
                    }
                    _ => tracing::error!(tenant, secret = name, "a secret does not open with this host's key"),
                }
            }
        }
        Ok(Arc::new(Capabilities {
            tenant,
            tenant_rules,
            kind_rules: Rules(deployment.allow.clone()),
            settings: deployment.settings.clone(),
            secrets,
            bindings: deployment.bindings.iter().map(|(name, rules)| (name.clone(), Rules(rules.clone()))).collect(),
            secrets_in_body: deployment.secrets_in_body,
        }))
    }
}

impl super::Tenancy<'_> {
    /// Uses `key` to seal and open secrets (once; later calls change nothing).
    pub fn use_secret_key(&self, key: SecretKey) {
        let _ = self.secret_key.set(key);
    }

    /// Sets `tenant`'s secret `name` to `value`, sealed; steps of kinds that declared it
    /// use the new value from their next call, with no redeploy.
    pub async fn set_secret(&self, tenant: &TenantId, name: &str, value: &[u8]) -> Result<SecretInfo, EngineError> {
        if !is_valid_name(name) {
            return Err(EngineError::Invalid(format!(
                "invalid secret name {name:?}: 1-64 characters of a-z, A-Z, 0-9, '-', '_' or '.'"
            )));
        }
        if value.len() < MIN_SECRET_BYTES || value.len() > MAX_SECRET_BYTES {
            return Err(EngineError::Invalid(format!(
                "a secret's value is {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes: a shorter one could be guessed \
                 through a destination that answers differently when it sees it"
            )));
        }
        if std::str::from_utf8(value).is_err() {
            return Err(EngineError::Invalid("a secret's value must be UTF-8 text".into()));
        }
        if value.iter().any(|b| matches!(b, b'\r' | b'\n' | b'\0')) {
            return Err(EngineError::Invalid(
                "a secret's value may not hold CR, LF or NUL: it could never be sent in a header".into(),
            ));
        }
        let sealed = self
            .key()?
            .seal(&tenant.0, name, value)
            .map_err(|e| EngineError::Invalid(format!("the value could not be sealed: {e}")))?;
        let now = self.now();
        self.store.put_secret(tenant, name, &sealed, now).await?;
        Ok(SecretInfo { name: name.to_owned(), updated_at: now })
    }

    /// Deletes `tenant`'s secret `name`.
    pub async fn delete_secret(&self, tenant: &TenantId, name: &str) -> Result<(), EngineError> {
        if self.store.delete_secret(tenant, name).await? { Ok(()) } else { Err(EngineError::NotFound) }
    }

    /// `tenant`'s secrets' names and times (never their values).
    pub async fn secrets(&self, tenant: &TenantId) -> Result<Vec<SecretInfo>, EngineError> {
        Ok(self.store.secrets(tenant).await?)
    }

    /// Sets what `tenant`'s steps may reach (within the operator's policy), or clears it.
    pub async fn set_tenant_outbound(&self, tenant: &TenantId, rules: Option<Rules>) -> Result<(), EngineError> {
        if rules.as_ref().is_some_and(|r| r.0.len() > crate::capabilities::MAX_DEPLOYMENT_ENTRIES) {
            return Err(EngineError::Invalid("a tenant has at most 64 outbound rules".into()));
        }
        // Kept as the rules' JSON document: the store holds it and decides nothing of it.
        let json = rules
            .map(|rules| serde_json::to_string(&rules))
            .transpose()
            .map_err(|e| EngineError::Invalid(format!("outbound rules: {e}")))?;
        match self.store.set_tenant_outbound(tenant, json.as_deref()).await {
            Err(crate::store::StoreError::NotFound(_)) => Err(EngineError::NotFound),
            other => Ok(other?),
        }
    }

    /// What `tenant`'s steps may reach.
    pub async fn tenant_outbound(&self, tenant: &TenantId) -> Result<Rules, EngineError> {
        match self.store.tenant_outbound(tenant).await? {
            None => Ok(Rules::default()),
            Some(json) => serde_json::from_str(&json)
                .map_err(|e| EngineError::Store(crate::store::StoreError::Corrupt(format!("tenants.outbound: {e}")))),
        }
    }
}
