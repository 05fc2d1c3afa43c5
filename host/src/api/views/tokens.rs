//! API tokens as the API shows them: a created token carries the bearer token this once; a
//! listed one never does (only its hash is kept).

use spindle_core::Timestamp;
use spindle_views::{CreatedToken, TokenState, TokenView};

use crate::api::time::rfc3339;
use crate::engine::TokenInfo;

fn token_state(info: &TokenInfo, now: Timestamp) -> TokenState {
    if info.revoked_at.is_some() {
        TokenState::Revoked
    } else if info.is_active(now) {
        TokenState::Active
    } else {
        TokenState::Expired
    }
}

/// The view of a token just made, and the token.
pub fn created_token(info: &TokenInfo, token: String) -> CreatedToken {
    CreatedToken {
        id: info.id.clone(),
        token,
        tenant: info.tenant.as_ref().map(|t| t.0.clone()),
        role: info.role.as_str().to_owned(),
        name: info.name.clone(),
        expires_at: info.expires_at.map(rfc3339),
    }
}

/// `info` as listed at `now`.
pub fn token_view(info: &TokenInfo, now: Timestamp) -> TokenView {
    TokenView {
        id: info.id.clone(),
        tenant: info.tenant.as_ref().map(|t| t.0.clone()),
        role: info.role.as_str().to_owned(),
        name: info.name.clone(),
        state: token_state(info, now).as_str().to_owned(),
        created_at: rfc3339(info.created_at),
        expires_at: info.expires_at.map(rfc3339),
        revoked_at: info.revoked_at.map(rfc3339),
        minted_by: info.minted_by.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Role, TenantId};

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
            minted_by: crate::engine::MintedBy::Operator,
        };
        assert_eq!(token_view(&info, Timestamp::from_micros(19)).minted_by, "operator");
        assert_eq!(token_view(&info, Timestamp::from_micros(19)).state, "active");
        assert_eq!(token_view(&info, Timestamp::from_micros(20)).state, "expired", "it expires at its expiry");
        let revoked = TokenInfo { revoked_at: Some(Timestamp::from_micros(15)), ..info };
        assert_eq!(token_view(&revoked, Timestamp::from_micros(16)).state, "revoked");
        assert_eq!(token_view(&revoked, Timestamp::from_micros(30)).state, "revoked", "revoked wins");
        let created = created_token(&revoked, "spt_x".into());
        assert_eq!((created.role.as_str(), created.tenant.as_deref()), ("tenant", Some("acme")));
    }
}
