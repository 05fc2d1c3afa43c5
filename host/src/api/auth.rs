//! Bearer tokens: a handler that takes [`TenantAuth`] runs only for a tenant token, one that
//! takes [`OperatorAuth`] only for an operator token, one that takes [`CallerAuth`] for
//! either (and decides by its scope). The engine knows which token is which, and which no
//! longer works (revoked or expired: `unauthorised`, like a token never issued).

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::{ApiError, ApiState};
use crate::engine::TokenScope;
use crate::engine::{MintedBy, Role, TenantId};

/// A request authenticated with a tenant token.
#[derive(Debug)]
pub struct TenantAuth(pub TenantId);

/// A request authenticated with the operator token.
#[derive(Debug)]
pub struct OperatorAuth;

/// A request authenticated with any token: the scope it acts in, a tenant or the operator.
#[derive(Debug)]
pub struct CallerAuth(pub TokenScope);

/// The tenant and role of the request's bearer token, or `unauthorised`. A use of a
/// tenant token the operator made is written to that tenant's audit trail first.
async fn authenticate(parts: &Parts, state: &ApiState) -> Result<(Option<TenantId>, Role), ApiError> {
    let header = parts.headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    let token = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
    let Some(token) = token else { return Err(ApiError::unauthorised()) };
    let Some(presented) = state.host.engine.tenancy().authenticate(token).await? else {
        return Err(ApiError::unauthorised());
    };
    if let (Some(tenant), Role::Tenant, MintedBy::Operator) = (&presented.tenant, presented.role, presented.minted_by) {
        state.host.engine.tenancy().operator_token_used(tenant, &presented.id, &request_line(parts)).await?;
    }
    Ok((presented.tenant, presented.role))
}

/// A request's method, path and query, as an audit entry names what was asked.
fn request_line(parts: &Parts) -> String {
    let target = parts.uri.path_and_query().map_or_else(|| parts.uri.path(), |p| p.as_str());
    format!("{} {target}", parts.method)
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

/// The header in which an operator names the tenant whose jobs it reads.
pub const READ_TENANT_HEADER: &str = "spindle-tenant";

/// A read of a tenant's jobs, logs or kinds: by that tenant's token, or by the operator
/// token naming the tenant in [`READ_TENANT_HEADER`] where the host allows operators to
/// read tenants' jobs — each such read written to the tenant's audit trail before it is
/// served. Actions never take this: they stay the tenant's.
#[derive(Debug)]
pub struct ReaderAuth {
    /// Whose jobs.
    pub tenant: TenantId,
    /// Whether the operator reads them (the answer then offers no actions).
    pub operator: bool,
}

impl FromRequestParts<ApiState> for ReaderAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        match authenticate(parts, state).await? {
            (Some(tenant), Role::Tenant) => Ok(Self { tenant, operator: false }),
            (_, Role::Operator) => {
                let named = parts.headers.get(READ_TENANT_HEADER).and_then(|v| v.to_str().ok()).map(str::trim);
                let Some(name) = named.filter(|n| !n.is_empty()) else {
                    return Err(ApiError::forbidden(
                        "this needs a tenant token; the operator reads a tenant's jobs by naming it in the \
                         Spindle-Tenant header, where the host allows it (operator_reads_tenants)",
                    ));
                };
                let tenant = TenantId(name.to_owned());
                // With its query: what the operator searched for is part of what it read.
                let what = request_line(parts);
                state.host.engine.tenancy().operator_reads(&tenant, &what, "operator").await?;
                Ok(Self { tenant, operator: true })
            }
            _ => Err(ApiError::forbidden("this needs a tenant token")),
        }
    }
}
