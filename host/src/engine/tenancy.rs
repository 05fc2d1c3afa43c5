//! Tenants, their tokens, and the reads the API serves: the API reaches the store only
//! through the engine.
//!
//! A token may expire, and may be revoked; either way it authenticates nothing from then
//! on, on every host at once (each request reads the store). Who may create, list and
//! revoke which tokens is [`TokenScope::may_manage`]'s to say: a tenant token its own
//! tenant's, the operator any. The configured operator token (`SPINDLE_OPERATOR_TOKEN` or
//! the data directory's `operator-token`) is registered at start under
//! [`CONFIGURED_OPERATOR_TOKEN`], retiring the one configured before it: changing it and
//! restarting rotates it.

use std::time::Duration;

use spindle_core::Timestamp;

use super::{Engine, EngineError};
use crate::store::{
    Depth, JobFilter, JobRecord, MintedBy, Operation, Presented, Role, StoreError, Tenant, TenantId, TokenInfo,
    token_id,
};
use crate::tokens;

/// The name the configured operator token is stored under. Registering a configured token
/// revokes every other working operator token of this name, and no created token may take
/// it: rotation never retires a token an operator made with `token create`.
pub const CONFIGURED_OPERATOR_TOKEN: &str = "configured operator token";

/// The name of a token made without one.
const ISSUED: &str = "issued";

/// Longest name a created token may have, in characters: it is stored and listed, so a
/// caller cannot make listings carry megabytes.
pub const MAX_TOKEN_NAME_CHARS: usize = 64;

/// Longest a created token may work before it expires: ten years. A longer one is a token
/// that does not expire (which a creation asks for by giving no expiry), and its expiry
/// would soon be past what RFC 3339 can print.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(10 * 365 * 86_400);

/// What a token is for, and so what a caller holding one may manage.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenScope {
    /// One tenant's kinds and jobs (and its own tokens).
    Tenant(TenantId),
    /// Tenants and every token, nothing inside a tenant.
    Operator,
}

impl TokenScope {
    /// The scope of an authenticated token, from its tenant and role (`None` for a tenant
    /// role without a tenant, which no write makes).
    pub fn of(tenant: Option<TenantId>, role: Role) -> Option<Self> {
        match (tenant, role) {
            (_, Role::Operator) => Some(Self::Operator),
            (Some(tenant), Role::Tenant) => Some(Self::Tenant(tenant)),
            (None, Role::Tenant) => None,
        }
    }

    /// Whether a caller of this scope may create, list and revoke tokens of `other`: the
    /// operator any; a tenant its own tenant's, never another's nor an operator token (a
    /// tenant token minting an operator token would own every tenant).
    pub fn may_manage(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Operator, _) => true,
            (Self::Tenant(own), Self::Tenant(tenant)) => own == tenant,
            (Self::Tenant(_), Self::Operator) => false,
        }
    }

    /// The tenant a token of this scope works for.
    pub fn tenant(&self) -> Option<&TenantId> {
        match self {
            Self::Tenant(tenant) => Some(tenant),
            Self::Operator => None,
        }
    }

    /// The role a token of this scope is stored with.
    pub fn role(&self) -> Role {
        match self {
            Self::Tenant(_) => Role::Tenant,
            Self::Operator => Role::Operator,
        }
    }
}

/// A created token's name, or why it cannot be one.
fn check_token_name(name: &str) -> Result<(), EngineError> {
    if name.trim().is_empty() || name.chars().count() > MAX_TOKEN_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(EngineError::Invalid(format!(
            "a token's name is 1-{MAX_TOKEN_NAME_CHARS} characters, not blank, without control characters"
        )));
    }
    if name == CONFIGURED_OPERATOR_TOKEN {
        return Err(EngineError::Invalid(format!(
            "{CONFIGURED_OPERATOR_TOKEN:?} is reserved for the token a host is configured with"
        )));
    }
    Ok(())
}

/// The shortest retention a tenant may set: a job's result stays readable for a minute.
pub const MIN_RETENTION: std::time::Duration = std::time::Duration::from_secs(60);
/// The longest: ten years.
pub const MAX_RETENTION: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 86_400);

impl Engine {
    /// Stores a new random token of `scope`; answers its listing and the token.
    async fn add_token(
        &self,
        scope: &TokenScope,
        name: &str,
        expires_at: Option<Timestamp>,
        minted_by: MintedBy,
        now: Timestamp,
    ) -> Result<(TokenInfo, String), EngineError> {
        let token = tokens::generate();
        let hash = tokens::hash(&token);
        // A tenant token the operator makes is in the tenant's trail before it exists: a
        // crash between the two leaves an entry for a token never made, never the reverse.
        if let (TokenScope::Tenant(tenant), MintedBy::Operator | MintedBy::Creation) = (scope, minted_by) {
            let what = serde_json::json!({ "token": token_id(&hash), "name": name, "minted_by": minted_by.as_str() });
            self.store.save_operation(&audit_entry(tenant, "token-minted", what, "operator", now)).await?;
        }
        if !self.store.add_token(&hash, scope.tenant(), scope.role(), name, expires_at, minted_by, now).await? {
            // 32 random bytes: only a broken random source repeats a hash, or 64 bits of one.
            return Err(EngineError::Store(StoreError::Duplicate(format!("token {}", token_id(&hash)))));
        }
        let info = TokenInfo {
            id: token_id(&hash),
            tenant: scope.tenant().cloned(),
            role: scope.role(),
            name: name.to_owned(),
            created_at: now,
            expires_at,
            revoked_at: None,
            minted_by,
        };
        Ok((info, token))
    }
}

/// One entry of `tenant`'s audit trail, done as it is written.
pub(super) fn audit_entry(
    tenant: &TenantId,
    action: &str,
    what: serde_json::Value,
    actor: &str,
    now: Timestamp,
) -> Operation {
    Operation {
        id: uuid::Uuid::now_v7().to_string(),
        tenant: tenant.clone(),
        action: action.to_owned(),
        filter: what.to_string(),
        state: "done".into(),
        matched: 1,
        done: 1,
        failed: 0,
        actor: actor.to_owned(),
        created_at: now,
        finished_at: Some(now),
    }
}

impl super::CapacityRoom<'_> {
    /// Open jobs by tenant, kind and state.
    pub async fn depths(&self) -> Result<Vec<Depth>, EngineError> {
        Ok(self.store.depths().await?)
    }

    /// The counters every host shares (alerts, sandbox faults).
    pub async fn shared_counters(&self) -> Result<Vec<(String, i64)>, EngineError> {
        Ok(self.store.counters().await?)
    }
}

impl super::Tenancy<'_> {
    /// Creates a tenant and its first API token (answered once: only its hash is kept).
    pub async fn create_tenant(&self, name: &str) -> Result<(Tenant, String), EngineError> {
        let now = self.now();
        let tenant = self.store.create_tenant(name, now).await?;
        let scope = TokenScope::Tenant(tenant.id.clone());
        let (_, token) = self.add_token(&scope, "initial", None, MintedBy::Creation, now).await?;
        Ok((tenant, token))
    }

    /// Tenants that keep their finished jobs for a time of their own.
    pub async fn retention_overrides(&self) -> Result<Vec<(TenantId, std::time::Duration)>, EngineError> {
        Ok(self.store.retention_overrides().await?)
    }

    /// Sets how long a tenant's finished jobs are kept (`None`: the host's default), from
    /// a minute to ten years; answers the tenant as it now is.
    pub async fn set_retention(
        &self,
        tenant: &TenantId,
        keep: Option<std::time::Duration>,
    ) -> Result<Tenant, EngineError> {
        if let Some(keep) = keep
            && !(MIN_RETENTION..=MAX_RETENTION).contains(&keep)
        {
            return Err(EngineError::Invalid(format!(
                "a retention is from {} to {} seconds, not {}",
                MIN_RETENTION.as_secs(),
                MAX_RETENTION.as_secs(),
                keep.as_secs()
            )));
        }
        self.store.set_retention(tenant, keep).await?;
        self.store.tenant(tenant).await?.ok_or_else(|| StoreError::NotFound(format!("tenant {tenant}")).into())
    }

    /// Every tenant.
    pub async fn tenants(&self) -> Result<Vec<Tenant>, EngineError> {
        Ok(self.store.tenants().await?)
    }

    /// Issues another token for an existing tenant, without an expiry: the operator's
    /// (its minting and its every use are in the tenant's audit trail).
    pub async fn issue_token(&self, tenant: &TenantId) -> Result<String, EngineError> {
        let (_, token) =
            self.create_token(&TokenScope::Tenant(tenant.clone()), None, None, &TokenScope::Operator).await?;
        Ok(token)
    }

    /// Creates a token of `scope` named `name` (default `issued`), working until revoked or,
    /// with `expires_in`, until that long from now. Answers its listing and the token itself,
    /// shown this once: only its hash is kept. A tenant's scope names an existing tenant.
    /// Whether the caller may ask for `scope` is [`TokenScope::may_manage`]'s to say.
    ///
    /// `by` is the caller's scope: a tenant token the operator makes is written to the
    /// tenant's audit trail, and so is its every use.
    pub async fn create_token(
        &self,
        scope: &TokenScope,
        name: Option<&str>,
        expires_in: Option<Duration>,
        by: &TokenScope,
    ) -> Result<(TokenInfo, String), EngineError> {
        let name = name.unwrap_or(ISSUED);
        check_token_name(name)?;
        if expires_in.is_some_and(|d| d.is_zero() || d > MAX_TOKEN_LIFETIME) {
            return Err(EngineError::Invalid(format!(
                "a token expires from 1 second to {} days after it is made, or not at all",
                MAX_TOKEN_LIFETIME.as_secs() / 86_400
            )));
        }
        if let TokenScope::Tenant(tenant) = scope
            && self.store.tenant(tenant).await?.is_none()
        {
            return Err(EngineError::Store(StoreError::NotFound(format!("tenant {tenant}"))));
        }
        let now = self.now();
        let minted_by = match by {
            TokenScope::Operator => MintedBy::Operator,
            TokenScope::Tenant(_) => MintedBy::Tenant,
        };
        self.add_token(scope, name, expires_in.map(|d| now.plus(d)), minted_by, now).await
    }

    /// `tenant`'s tokens, or every token for `None`, revoked and expired ones included.
    pub async fn tokens(&self, tenant: Option<&TenantId>) -> Result<Vec<TokenInfo>, EngineError> {
        Ok(self.store.tokens(tenant).await?)
    }

    /// Revokes token `id` now (if it is `tenant`'s, when one is given): from now on it
    /// authenticates nothing. Answers whether there is such a token; revoking one twice
    /// keeps the first time.
    ///
    /// The operator revoking a tenant's token is written to that tenant's audit trail.
    pub async fn revoke_token(&self, id: &str, tenant: Option<&TenantId>) -> Result<bool, EngineError> {
        let now = self.now();
        if tenant.is_none()
            && let Some(owner) = self.store.token_with_id(id).await?.and_then(|t| t.tenant)
        {
            let what = serde_json::json!({ "token": id });
            self.store.save_operation(&audit_entry(&owner, "token-revoked", what, "operator", now)).await?;
        }
        Ok(self.store.revoke_token(id, tenant, now).await?)
    }

    /// Writes a use of tenant token `token`, which the operator made, to the tenant's
    /// audit trail before the request is served (`what`: its method, path and query; uses
    /// of one path within a minute are one entry, counted).
    pub async fn operator_token_used(&self, tenant: &TenantId, token: &str, what: &str) -> Result<(), EngineError> {
        let actor = format!("operator-token:{token}");
        let entry = self.read_audit.entry(tenant, "operator-token-use", what, &actor, self.now());
        Ok(self.store.save_operation(&entry).await?)
    }

    /// Makes `token` the configured operator token, and revokes the one configured before
    /// it (every other working token named [`CONFIGURED_OPERATOR_TOKEN`]): a host restarted
    /// with another `SPINDLE_OPERATOR_TOKEN` retires the old one on every host. Idempotent,
    /// and safe for hosts starting together with the same token. A token once retired (or
    /// revoked) stays so: a host configured with it refuses to start rather than bring it
    /// back, so a host left on the old configuration cannot undo a rotation.
    pub async fn register_operator_token(&self, token: &str) -> Result<(), EngineError> {
        let hash = tokens::hash(token);
        let now = self.now();
        self.store
            .add_token(&hash, None, Role::Operator, CONFIGURED_OPERATOR_TOKEN, None, MintedBy::Operator, now)
            .await?;
        let Some(stored) = self.store.token_info(&hash).await? else {
            // Its public id is another token's (64 bits of two hashes alike).
            return Err(EngineError::Invalid("the operator token cannot be stored: choose another".into()));
        };
        if stored.tenant.is_some() || stored.role != Role::Operator {
            return Err(EngineError::Invalid("that token is already a tenant's token".into()));
        }
        if !stored.is_active(now) {
            return Err(EngineError::Invalid(
                "the configured operator token was revoked or has expired (by a rotation, or `token revoke`): \
                 configure a new one"
                    .into(),
            ));
        }
        let retired = self.store.revoke_operator_tokens_named(CONFIGURED_OPERATOR_TOKEN, &hash, now).await?;
        if retired > 0 {
            tracing::info!(retired, "the operator token changed: the one configured before no longer works");
        }
        Ok(())
    }

    /// The tenant and role a presented token stands for, if it works now (neither revoked
    /// nor expired).
    pub async fn authenticate(&self, token: &str) -> Result<Option<Presented>, EngineError> {
        Ok(self.store.token(&tokens::hash(token), self.now()).await?)
    }
}

impl super::Operations<'_> {
    /// A page of a tenant's jobs, newest first.
    pub async fn list_jobs(&self, tenant: &TenantId, filter: &JobFilter) -> Result<Vec<JobRecord>, EngineError> {
        Ok(self.store.list_jobs(tenant, filter).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_manages_only_its_own_tokens_and_the_operator_any() {
        let (acme, globex) =
            (TokenScope::Tenant(TenantId("acme".into())), TokenScope::Tenant(TenantId("globex".into())));
        assert!(acme.may_manage(&acme));
        assert!(!acme.may_manage(&globex), "another tenant's");
        assert!(!acme.may_manage(&TokenScope::Operator), "an operator token");
        for scope in [&acme, &globex, &TokenScope::Operator] {
            assert!(TokenScope::Operator.may_manage(scope), "{scope:?}");
        }
        assert_eq!(TokenScope::of(Some(TenantId("acme".into())), Role::Tenant), Some(acme));
        assert_eq!(TokenScope::of(None, Role::Operator), Some(TokenScope::Operator));
        assert_eq!(TokenScope::of(None, Role::Tenant), None);
    }

    #[test]
    fn token_names_are_short_printable_and_not_the_configured_ones() {
        assert!(check_token_name("ci deploys").is_ok());
        assert!(check_token_name(&"x".repeat(MAX_TOKEN_NAME_CHARS)).is_ok());
        for bad in ["", "  ", "a\nb", CONFIGURED_OPERATOR_TOKEN] {
            assert!(matches!(check_token_name(bad), Err(EngineError::Invalid(_))), "{bad:?}");
        }
        assert!(check_token_name(&"x".repeat(MAX_TOKEN_NAME_CHARS + 1)).is_err());
    }
}
