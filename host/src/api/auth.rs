//! Bearer tokens: a handler that takes [`TenantAuth`] runs only for a tenant token, one that
//! takes [`OperatorAuth`] only for an operator token, one that takes [`CallerAuth`] for
//! either (and decides by its scope). The engine knows which token is which, and which no
//! longer works (revoked or expired: `unauthorised`, like a token never issued).

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::{ApiError, ApiState};
use crate::engine::TokenScope;
use crate::engine::{Role, TenantId};

/// A request authenticated with a tenant token.
#[derive(Debug)]
pub struct TenantAuth(pub TenantId);

/// A request authenticated with the operator token.
#[derive(Debug)]
pub struct OperatorAuth;

/// A request authenticated with any token: the scope it acts in, a tenant or the operator.
#[derive(Debug)]
pub struct CallerAuth(pub TokenScope);

/// The tenant and role of the request's bearer token, or `unauthorised`.
async fn authenticate(parts: &Parts, state: &ApiState) -> Result<(Option<TenantId>, Role), ApiError> {
    let header = parts.headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    let token = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
    let Some(token) = token else { return Err(ApiError::unauthorised()) };
    match state.host.engine.tenancy().authenticate(token).await? {
        Some(found) => Ok(found),
        None => Err(ApiError::unauthorised()),
    }
}

impl FromRequestParts<ApiState> for TenantAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        match authenticate(parts, state).await? {
            (Some(tenant), Role::Tenant) => Ok(Self(tenant)),
            _ => Err(ApiError::forbidden("this needs a tenant token; the operator token only manages tenants")),
        }
    }
}

impl FromRequestParts<ApiState> for OperatorAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        match authenticate(parts, state).await? {
            (_, Role::Operator) => Ok(Self),
            _ => Err(ApiError::forbidden("this needs the operator token")),
        }
    }
}

impl FromRequestParts<ApiState> for CallerAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        let (tenant, role) = authenticate(parts, state).await?;
        TokenScope::of(tenant, role).map(Self).ok_or_else(|| ApiError::forbidden("this tenant token names no tenant"))
    }
}
