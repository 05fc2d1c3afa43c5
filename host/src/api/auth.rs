//! Bearer tokens: a handler that takes [`TenantAuth`] runs only for a tenant token, one that
//! takes [`OperatorAuth`] only for the operator token. The engine knows which token is which.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::{ApiError, ApiState};
use crate::store::{Role, TenantId};

/// A request authenticated with a tenant token.
#[derive(Debug)]
pub struct TenantAuth(pub TenantId);

/// A request authenticated with the operator token.
#[derive(Debug)]
pub struct OperatorAuth;

/// The tenant and role of the request's bearer token, or `unauthorised`.
async fn authenticate(parts: &Parts, state: &ApiState) -> Result<(Option<TenantId>, Role), ApiError> {
    let header = parts.headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    let token = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
    let Some(token) = token else { return Err(ApiError::unauthorised()) };
    match state.host.engine.authenticate(token).await? {
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
