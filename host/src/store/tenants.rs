//! Tenants and their API tokens. A token is stored as its SHA-256 hash, never in the clear,
//! and named by a short public id; it may expire, and a revoked token stays as a row (with
//! when it was revoked) so that listings show what was retired.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use spindle_core::Timestamp;

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::TenantId;
use super::rows::{Columns, corrupt};
use super::sql::{Row, Ty, Value};

/// Hex characters of a token's hash that make its public id (migration 0004 on SQLite and
/// 0006 on PostgreSQL backfilled stored tokens the same way).
pub const TOKEN_ID_CHARS: usize = 16;

/// A token's public id, from its hash: what listings show and revocations name. It is no
/// help in guessing a token: 64 bits of a SHA-256.
pub fn token_id(hash: &str) -> String {
    hash.chars().take(TOKEN_ID_CHARS).collect()
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
    /// How long its finished jobs are kept, when not the host's default.
    pub retention: Option<std::time::Duration>,
}

/// What an API token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything within its tenant.
    Tenant,
    /// Manage tenants and tokens (and nothing inside a tenant).
    Operator,
}

impl Role {
    /// The role as stored and as the API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Operator => "operator",
        }
    }

    /// A stored role; anything else is corrupt data.
    fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "operator" => Ok(Self::Operator),
            "tenant" => Ok(Self::Tenant),
            other => Err(corrupt(format!("token role {other:?}"))),
        }
    }
}

/// Who made a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MintedBy {
    /// The tenant itself (with a token of its own), or no one knows (a token stored before
    /// minters were kept).
    Tenant,
    /// The operator, for a tenant that already had tokens: its every use goes into that
    /// tenant's audit trail.
    Operator,
    /// The tenant's creation: its first token, which the operator hands over.
    Creation,
}

impl MintedBy {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Operator => "operator",
            Self::Creation => "creation",
        }
    }

    fn parse(text: Option<&str>) -> Result<Self, StoreError> {
        match text {
            None | Some("tenant") => Ok(Self::Tenant),
            Some("operator") => Ok(Self::Operator),
            Some("creation") => Ok(Self::Creation),
            Some(other) => Err(corrupt(format!("token minter {other:?}"))),
        }
    }
}

/// A token as it authenticates a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Presented {
    /// Its public id.
    pub id: String,
    /// The tenant it works for; `None` for an operator token.
    pub tenant: Option<TenantId>,
    /// What it may do.
    pub role: Role,
    /// Who made it.
    pub minted_by: MintedBy,
}

/// A stored token, without its hash: what a listing shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// Its public id ([`token_id`] of its hash).
    pub id: String,
    /// The tenant it works for; `None` for an operator token.
    pub tenant: Option<TenantId>,
    /// What it may do.
    pub role: Role,
    /// What it was made for (`initial`, `issued`, a name its creator gave).
    pub name: String,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it stops working, if ever.
    pub expires_at: Option<Timestamp>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<Timestamp>,
    /// Who made it.
    pub minted_by: MintedBy,
}

impl TokenInfo {
    /// Whether it authenticates at `now`: not revoked, and not yet at its expiry.
    pub fn is_active(&self, now: Timestamp) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| now < at)
    }
}

/// The columns a [`TokenInfo`] is read from.
static TOKEN: Columns = Columns {
    table: "api_tokens",
    names: &["id", "tenant_id", "role", "name", "created_at", "expires_at", "revoked_at", "minted_by"],
    tys: &[Ty::Text, Ty::OptText, Ty::Text, Ty::Text, Ty::Int, Ty::OptInt, Ty::OptInt, Ty::OptText],
};

fn token_from_row(mut row: Row) -> Result<TokenInfo, StoreError> {
    let r = TOKEN.read(&mut row);
    Ok(TokenInfo {
        id: r.text("id")?,
        tenant: r.opt_text("tenant_id")?.map(TenantId),
        role: r.parse("role", |role| Role::parse(role).ok())?,
        name: r.text("name")?,
        created_at: r.ts("created_at")?,
        expires_at: r.opt_ts("expires_at")?,
        revoked_at: r.opt_ts("revoked_at")?,
        minted_by: MintedBy::parse(r.opt_text("minted_by")?.as_deref())?,
    })
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
    /// Stores a token's hash (and its [`token_id`]), working until `expires_at` if given;
    /// answers whether it was stored. A hash already stored stays as it is, revoked or not
    /// (hosts starting together register one operator token).
    #[allow(clippy::too_many_arguments)]
    async fn add_token(
        &self,
        hash: &str,
        tenant: Option<&TenantId>,
        role: Role,
        name: &str,
        expires_at: Option<Timestamp>,
        minted_by: MintedBy,
        now: Timestamp,
    ) -> Result<bool, StoreError>;
    /// The token a hash stands for, if that token works at `now`: neither revoked nor
    /// expired.
    async fn token(&self, hash: &str, now: Timestamp) -> Result<Option<Presented>, StoreError>;
    /// A token hash's row whatever its state (revoked and expired ones too).
    async fn token_info(&self, hash: &str) -> Result<Option<TokenInfo>, StoreError>;
    /// A token by its public id, whatever its state.
    async fn token_with_id(&self, id: &str) -> Result<Option<TokenInfo>, StoreError>;
    /// `tenant`'s tokens (never an operator token), or every token for `None`, revoked and
    /// expired ones included, oldest first.
    async fn tokens(&self, tenant: Option<&TenantId>) -> Result<Vec<TokenInfo>, StoreError>;
    /// Revokes the token `id` at `now` — only if it is `tenant`'s, when a tenant is given;
    /// answers whether there is such a token (it stays revoked as it was if it already was).
    async fn revoke_token(&self, id: &str, tenant: Option<&TenantId>, now: Timestamp) -> Result<bool, StoreError>;
    /// Revokes at `now` every operator token named `name` still working, but the one whose
    /// hash is `keep` (the configured operator token replacing the ones before it); answers
    /// how many.
    async fn revoke_operator_tokens_named(&self, name: &str, keep: &str, now: Timestamp) -> Result<u64, StoreError>;
}

/// A tenant from `id, name, created_at, retention_secs`.
/// The columns a [`Tenant`] is read from.
static TENANT: Columns = Columns {
    table: "tenants",
    names: &["id", "name", "created_at", "retention_secs"],
    tys: &[Ty::Text, Ty::Text, Ty::Int, Ty::OptInt],
};

fn tenant_of(mut row: Row) -> Result<Tenant, StoreError> {
    let r = TENANT.read(&mut row);
    Ok(Tenant {
        id: TenantId(r.text("id")?),
        name: r.text("name")?,
        created_at: r.ts("created_at")?,
        retention: r.opt_num::<u64>("retention_secs")?.map(std::time::Duration::from_secs),
    })
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
        rows.iter()
            .map(|r| {
                let secs = r.num::<u64>(1, "tenants.retention_secs")?;
                Ok((TenantId(r.text(0, "tenants.id")?), std::time::Duration::from_secs(secs)))
            })
            .collect()
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
        Ok(Tenant { id: TenantId(name.to_owned()), name: name.to_owned(), created_at: now, retention: None })
    }

    async fn tenant(&self, id: &TenantId) -> Result<Option<Tenant>, StoreError> {
        let rows = self
            .db
            .fetch(
                &format!("SELECT {} FROM tenants WHERE id = $1", TENANT.list()),
                vec![Value::from(id.0.as_str())],
                TENANT.tys,
            )
            .await
            .map_err(|e| TENANT.in_table(e))?;
        rows.into_iter().next().map(tenant_of).transpose()
    }

    async fn tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        let rows = self
            .db
            .fetch(&format!("SELECT {} FROM tenants ORDER BY name", TENANT.list()), vec![], TENANT.tys)
            .await
            .map_err(|e| TENANT.in_table(e))?;
        rows.into_iter().map(tenant_of).collect()
    }

    async fn add_token(
        &self,
        hash: &str,
        tenant: Option<&TenantId>,
        role: Role,
        name: &str,
        expires_at: Option<Timestamp>,
        minted_by: MintedBy,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        // No conflict target: a hash or an id already stored both leave the row as it is
        // (on PostgreSQL, a target would make a racing duplicate of the other key an error).
        let inserted = self
            .db
            .execute(
                "INSERT INTO api_tokens (token_hash, id, tenant_id, role, name, created_at, expires_at, minted_by) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
                vec![
                    Value::from(hash),
                    Value::from(token_id(hash)),
                    Value::from(tenant.map(|t| t.0.clone())),
                    Value::from(role.as_str()),
                    Value::from(name),
                    Value::from(now.as_micros()),
                    Value::from(expires_at.map(Timestamp::as_micros)),
                    Value::from(minted_by.as_str()),
                ],
            )
            .await?;
        Ok(inserted > 0)
    }

    async fn token(&self, hash: &str, now: Timestamp) -> Result<Option<Presented>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id, tenant_id, role, minted_by FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL \
                 AND (expires_at IS NULL OR expires_at > $2)",
                vec![Value::from(hash), Value::from(now.as_micros())],
                &[Ty::Text, Ty::OptText, Ty::Text, Ty::OptText],
            )
            .await?;
        rows.first()
            .map(|r| {
                Ok(Presented {
                    id: r.text(0, "api_tokens.id")?,
                    tenant: r.opt_text(1, "api_tokens.tenant_id")?.map(TenantId),
                    role: Role::parse(&r.text(2, "api_tokens.role")?)?,
                    minted_by: MintedBy::parse(r.opt_text(3, "api_tokens.minted_by")?.as_deref())?,
                })
            })
            .transpose()
    }

    async fn token_info(&self, hash: &str) -> Result<Option<TokenInfo>, StoreError> {
        let rows = self
            .db
            .fetch(
                &format!("SELECT {} FROM api_tokens WHERE token_hash = $1", TOKEN.list()),
                vec![Value::from(hash)],
                TOKEN.tys,
            )
            .await
            .map_err(|e| TOKEN.in_table(e))?;
        rows.into_iter().next().map(token_from_row).transpose()
    }

    async fn token_with_id(&self, id: &str) -> Result<Option<TokenInfo>, StoreError> {
        let rows = self
            .db
            .fetch(&format!("SELECT {} FROM api_tokens WHERE id = $1", TOKEN.list()), vec![Value::from(id)], TOKEN.tys)
            .await
            .map_err(|e| TOKEN.in_table(e))?;
        rows.into_iter().next().map(token_from_row).transpose()
    }

    async fn tokens(&self, tenant: Option<&TenantId>) -> Result<Vec<TokenInfo>, StoreError> {
        let rows = match tenant {
            Some(tenant) => self
                .db
                .fetch(
                    &format!("SELECT {} FROM api_tokens WHERE tenant_id = $1 ORDER BY created_at, id", TOKEN.list()),
                    vec![Value::from(tenant.0.as_str())],
                    TOKEN.tys,
                )
                .await
                .map_err(|e| TOKEN.in_table(e))?,
            None => self
                .db
                .fetch(&format!("SELECT {} FROM api_tokens ORDER BY created_at, id", TOKEN.list()), vec![], TOKEN.tys)
                .await
                .map_err(|e| TOKEN.in_table(e))?,
        };
        rows.into_iter().map(token_from_row).collect()
    }

    async fn revoke_token(&self, id: &str, tenant: Option<&TenantId>, now: Timestamp) -> Result<bool, StoreError> {
        // The tenant is part of the condition: another tenant's token (or an operator token)
        // is no token at all to a tenant, as if it did not exist.
        let revoked = match tenant {
            Some(tenant) => {
                self.db
                    .execute(
                        "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 AND tenant_id = $3",
                        vec![Value::from(id), Value::from(now.as_micros()), Value::from(tenant.0.as_str())],
                    )
                    .await?
            }
            None => {
                self.db
                    .execute(
                        "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1",
                        vec![Value::from(id), Value::from(now.as_micros())],
                    )
                    .await?
            }
        };
        Ok(revoked > 0)
    }

    async fn revoke_operator_tokens_named(&self, name: &str, keep: &str, now: Timestamp) -> Result<u64, StoreError> {
        Ok(self
            .db
            .execute(
                "UPDATE api_tokens SET revoked_at = $3 WHERE name = $1 AND token_hash <> $2 AND role = 'operator' \
                 AND tenant_id IS NULL AND revoked_at IS NULL",
                vec![Value::from(name), Value::from(keep), Value::from(now.as_micros())],
            )
            .await?)
    }
}
