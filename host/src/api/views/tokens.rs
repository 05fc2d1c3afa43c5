//! API tokens as the API shows them: a created token carries the bearer token this once; a
//! listed one never does (only its hash is kept).

use serde::{Deserialize, Serialize};
use spindle_core::Timestamp;
use utoipa::ToSchema;
use utoipa::openapi::Object;

use super::one_of;
use crate::api::time::rfc3339;
use crate::engine::{Role, TokenInfo};

fn role_schema() -> Object {
    one_of(
        "What the token may do: a tenant's work, or managing tenants and tokens.",
        [Role::Tenant.as_str(), Role::Operator.as_str()],
    )
}

fn token_state_schema() -> Object {
    one_of(
        "Whether the token works: `active`, or `expired` or `revoked` (either authenticates nothing).",
        [TokenState::Active.as_str(), TokenState::Expired.as_str(), TokenState::Revoked.as_str()],
    )
}

/// Whether a listed token works now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TokenState {
    Active,
    Expired,
    Revoked,
}

impl TokenState {
    fn of(info: &TokenInfo, now: Timestamp) -> Self {
        if info.revoked_at.is_some() {
            Self::Revoked
        } else if info.is_active(now) {
            Self::Active
        } else {
            Self::Expired
        }
    }

    fn as_str(self) -> &'static str {
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

impl CreatedToken {
    /// The view of a token just made, and the token.
    pub fn new(info: &TokenInfo, token: String) -> Self {
        Self {
            id: info.id.clone(),
            token,
            tenant: info.tenant.as_ref().map(|t| t.0.clone()),
            role: info.role.as_str().to_owned(),
            name: info.name.clone(),
            expires_at: info.expires_at.map(rfc3339),
        }
    }
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
}

impl TokenView {
    /// `info` as listed at `now`.
    pub fn new(info: &TokenInfo, now: Timestamp) -> Self {
        Self {
            id: info.id.clone(),
            tenant: info.tenant.as_ref().map(|t| t.0.clone()),
            role: info.role.as_str().to_owned(),
            name: info.name.clone(),
            state: TokenState::of(info, now).as_str().to_owned(),
            created_at: rfc3339(info.created_at),
            expires_at: info.expires_at.map(rfc3339),
            revoked_at: info.revoked_at.map(rfc3339),
        }
    }
}

/// Tokens, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenList {
    /// The tokens.
    pub tokens: Vec<TokenView>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TenantId;

    #[test]
    fn a_listed_token_says_whether_it_works() {
        let info = TokenInfo {
            id: "0123456789abcdef".into(),
            tenant: Some(TenantId("acme".into())),
            role: Role::Tenant,
            name: "ci".into(),
            created_at: Timestamp::from_micros(10),
            expires_at: Some(Timestamp::from_micros(20)),
            revoked_at: None,
        };
        assert_eq!(TokenView::new(&info, Timestamp::from_micros(19)).state, "active");
        assert_eq!(TokenView::new(&info, Timestamp::from_micros(20)).state, "expired", "it expires at its expiry");
        let revoked = TokenInfo { revoked_at: Some(Timestamp::from_micros(15)), ..info };
        assert_eq!(TokenView::new(&revoked, Timestamp::from_micros(16)).state, "revoked");
        assert_eq!(TokenView::new(&revoked, Timestamp::from_micros(30)).state, "revoked", "revoked wins");
        let created = CreatedToken::new(&revoked, "spt_x".into());
        assert_eq!((created.role.as_str(), created.tenant.as_deref()), ("tenant", Some("acme")));
    }
}
