//! API tokens as the API shows them: a created token carries the bearer token this once; a
//! listed one never does (only its hash is kept).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa::openapi::Object;

use crate::one_of;

fn role_schema() -> Object {
    one_of("What the token may do: a tenant's work, or managing tenants and tokens.", ["tenant", "operator"])
}

fn token_state_schema() -> Object {
    one_of(
        "Whether the token works: `active`, or `expired` or `revoked` (either authenticates nothing).",
        [TokenState::Active.as_str(), TokenState::Expired.as_str(), TokenState::Revoked.as_str()],
    )
}

/// Whether a listed token works now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenState {
    /// It authenticates.
    Active,
    /// Past its expiry.
    Expired,
    /// Revoked.
    Revoked,
}

impl TokenState {
    /// The state as a listed token carries it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
        }
    }
}

/// A token to create.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// The tenant it works for. A tenant token may name only its own tenant (its default);
    /// the operator token names one, or asks for an operator token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// An operator token instead of a tenant's (the operator token only).
    #[serde(default)]
    pub operator: bool,
    /// What it is for, shown in listings (default `issued`): 1-64 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Seconds until it stops working: 1 to ten years' worth. Without, it works until revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_secs: Option<u64>,
}

/// A new token. The bearer token is shown this once: only its hash is kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    /// Its public id, to list and revoke it by.
    pub id: String,
    /// The bearer token.
    pub token: String,
    /// The tenant it works for; absent for an operator token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// `tenant` or `operator`.
    #[schema(schema_with = role_schema)]
    pub role: String,
    /// What it is for.
    pub name: String,
    /// When it stops working (RFC 3339, UTC); absent: when it is revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// A token as listed: never the token itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    /// Its public id.
    pub id: String,
    /// The tenant it works for; absent for an operator token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// `tenant` or `operator`.
    #[schema(schema_with = role_schema)]
    pub role: String,
    /// What it is for (`initial` for a tenant's first token, `configured operator token` for
    /// the one a host is configured with).
    pub name: String,
    /// Whether it works now.
    #[schema(schema_with = token_state_schema)]
    pub state: String,
    /// When it was made.
    pub created_at: String,
    /// When it stops (or stopped) working, if it expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// When it was revoked, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
    /// Who made it: `tenant` (the tenant itself), `operator` (every use of such a tenant
    /// token is in the tenant's audit trail), or `creation` (the tenant's first token).
    #[serde(default = "tenant_minted")]
    pub minted_by: String,
}

fn tenant_minted() -> String {
    "tenant".into()
}

/// Tokens, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    /// The tokens.
    pub tokens: Vec<TokenView>,
}
