//! API tokens: created, listed and revoked by a tenant token for its own tenant, and by the
//! operator token for any tenant (and for operator tokens). Another tenant's token is never
//! shown to a tenant, nor revocable by it: it is "not found".

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;

use super::body::{ApiQuery, json_body};
use super::views;
use super::views::{CreatedToken, ErrorBody, NewToken, TokenList};
use super::{ApiError, ApiState, CallerAuth, ErrorCode};
use crate::engine::TenantId;
use crate::engine::TokenScope;

/// What a tenant token is told when it reaches past its own tenant.
const ONLY_YOUR_OWN: &str = "a tenant token manages only its own tenant's tokens";

/// The scope `request` asks a token for, on behalf of `caller` (whether the caller may ask
/// for it is checked after).
fn requested_scope(caller: &TokenScope, request: &NewToken) -> Result<TokenScope, ApiError> {
    match (&request.tenant, request.operator) {
        (Some(_), true) => Err(ApiError::invalid("give tenant or operator, not both")),
        (None, true) => Ok(TokenScope::Operator),
        (Some(tenant), false) => Ok(TokenScope::Tenant(TenantId(tenant.clone()))),
        (None, false) => match caller {
            TokenScope::Tenant(own) => Ok(TokenScope::Tenant(own.clone())),
            TokenScope::Operator => Err(ApiError::invalid("name the tenant the token is for, or set operator")),
        },
    }
}

/// Create a token
///
/// A tenant token creates tokens of its own tenant; the operator token creates any tenant's,
/// and operator tokens. The token is shown this once: only its hash is kept.
#[utoipa::path(
    post,
    path = "/v1/tokens",
    tag = "tokens",
    request_body = NewToken,
    responses(
        (status = 201, description = "The token and its id", body = CreatedToken),
        (status = 400, description = "`invalid-request`: a malformed body, a bad name or expiry", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: a tenant asking for another's or for an operator's",
            body = ErrorBody),
        (status = 404, description = "`not-found`: no such tenant", body = ErrorBody),
        (status = 413, description = "`payload-too-large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn issue_token(
    State(state): State<ApiState>,
    CallerAuth(caller): CallerAuth,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<CreatedToken>), ApiError> {
    let request: NewToken = json_body(bytes)?;
    let scope = requested_scope(&caller, &request)?;
    if !caller.may_manage(&scope) {
        return Err(ApiError::forbidden(ONLY_YOUR_OWN));
    }
    let expires_in = request.expires_in_secs.map(Duration::from_secs);
    let (info, token) =
        state.host.engine.tenancy().create_token(&scope, request.name.as_deref(), expires_in, &caller).await?;
    Ok((StatusCode::CREATED, Json(views::created_token(&info, token))))
}

/// Whose tokens to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct TokenQuery {
    /// Only this tenant's tokens. A tenant token lists its own (the default for it); the
    /// operator token lists every token without it.
    tenant: Option<String>,
}

/// List tokens
///
/// Revoked and expired tokens too (with `state`), oldest first; never the tokens themselves.
#[utoipa::path(
    get,
    path = "/v1/tokens",
    tag = "tokens",
    params(TokenQuery),
    responses(
        (status = 200, description = "The tokens", body = TokenList),
        (status = 400, description = "`invalid-request`: a malformed query", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: a tenant token asking for another tenant's", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn list_tokens(
    State(state): State<ApiState>,
    CallerAuth(caller): CallerAuth,
    ApiQuery(query): ApiQuery<TokenQuery>,
) -> Result<Json<TokenList>, ApiError> {
    let within = match query.tenant {
        Some(tenant) => Some(TenantId(tenant)),
        None => caller.tenant().cloned(),
    };
    if let Some(tenant) = &within
        && !caller.may_manage(&TokenScope::Tenant(tenant.clone()))
    {
        return Err(ApiError::forbidden(ONLY_YOUR_OWN));
    }
    let now = state.host.engine.now();
    let tokens = state.host.engine.tenancy().tokens(within.as_ref()).await?;
    Ok(Json(TokenList { tokens: tokens.iter().map(|info| views::token_view(info, now)).collect() }))
}

/// Revoke a token
///
/// From now on it authenticates nothing, on every host. A tenant token revokes its own
/// tenant's tokens only; the operator token any. Revoking a revoked token changes nothing.
#[utoipa::path(
    delete,
    path = "/v1/tokens/{id}",
    tag = "tokens",
    params(("id" = String, Path, description = "The token's id, as created or listed")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 404, description = "`not-found`: no such token (also another tenant's)", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn revoke_token(
    State(state): State<ApiState>,
    CallerAuth(caller): CallerAuth,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if state.host.engine.tenancy().revoke_token(&id, caller.tenant()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(ErrorCode::NotFound, "no such token"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asking(tenant: Option<&str>, operator: bool) -> NewToken {
        NewToken { tenant: tenant.map(str::to_owned), operator, ..NewToken::default() }
    }

    #[test]
    fn a_creation_asks_for_the_callers_tenant_unless_it_names_a_scope() {
        let acme = TokenScope::Tenant(TenantId("acme".into()));
        assert_eq!(requested_scope(&acme, &asking(None, false)).ok(), Some(acme.clone()));
        assert_eq!(requested_scope(&acme, &asking(None, true)).ok(), Some(TokenScope::Operator));
        let globex = requested_scope(&acme, &asking(Some("globex"), false)).ok();
        assert_eq!(globex, Some(TokenScope::Tenant(TenantId("globex".into()))));
        let operator = &TokenScope::Operator;
        assert_eq!(
            requested_scope(operator, &asking(None, false)).map_err(|e| e.code()).err(),
            Some(ErrorCode::InvalidRequest)
        );
        assert!(requested_scope(operator, &asking(Some("acme"), true)).is_err(), "not both");
    }
}
