//! Tenants and their tokens: the operator token's side of the API.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::body::json_body;
use super::views::{ErrorBody, NewTenant, Retention, TenantList, TenantToken, TenantView};
use super::{ApiError, ApiState, OperatorAuth};
use crate::engine::TenantId;

/// Create a tenant and its first token
///
/// Operator token only. The token is shown this once: only its hash is kept.
#[utoipa::path(
    post,
    path = "/v1/tenants",
    tag = "tenants",
    request_body = NewTenant,
    responses(
        (status = 201, description = "The tenant and its first token", body = TenantToken),
        (status = 400, description = "`invalid-request`: a malformed body or an invalid name", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 409, description = "`already-exists`: the name is taken", body = ErrorBody),
        (status = 413, description = "`payload-too-large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn create_tenant(
    State(state): State<ApiState>,
    _: OperatorAuth,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<TenantToken>), ApiError> {
    let request: NewTenant = json_body(bytes)?;
    if !spindle_runtime::is_valid_name(&request.name) {
        return Err(ApiError::invalid("a tenant name is 1-64 characters of a-z, 0-9, '-', '_' or '.'"));
    }
    let (tenant, token) = state.host.engine.tenancy().create_tenant(&request.name).await?;
    Ok((StatusCode::CREATED, Json(TenantToken { tenant: tenant.name, token })))
}

/// List tenants
///
/// Operator token only.
#[utoipa::path(
    get,
    path = "/v1/tenants",
    tag = "tenants",
    responses(
        (status = 200, description = "Every tenant", body = TenantList),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn list_tenants(State(state): State<ApiState>, _: OperatorAuth) -> Result<Json<TenantList>, ApiError> {
    let tenants = state.host.engine.tenancy().tenants().await?;
    let operator_reads = state.host.engine.config().operator_reads_tenants;
    Ok(Json(TenantList { tenants: tenants.iter().map(TenantView::from).collect(), operator_reads }))
}

/// Issue another token for a tenant
///
/// Operator token only. The token is shown this once.
#[utoipa::path(
    post,
    path = "/v1/tenants/{name}/tokens",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant's name")),
    responses(
        (status = 201, description = "The tenant and its new token", body = TenantToken),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 404, description = "`not-found`: no such tenant", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn create_token(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<TenantToken>), ApiError> {
    let tenant = TenantId(name);
    let token = state.host.engine.tenancy().issue_token(&tenant).await?;
    Ok((StatusCode::CREATED, Json(TenantToken { tenant: tenant.0, token })))
}

/// Set how long a tenant's finished jobs are kept
///
/// Operator token only. Finished jobs (succeeded, failed, cancelled) older than this are
/// deleted with their steps and history; `null` returns the tenant to the host's default.
#[utoipa::path(
    put,
    path = "/v1/tenants/{name}/retention",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant's name")),
    request_body = Retention,
    responses(
        (status = 200, description = "The tenant as it now is", body = TenantView),
        (status = 400, description = "`invalid-request`: a malformed body or a retention out of range", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 404, description = "`not-found`: no such tenant", body = ErrorBody),
        (status = 413, description = "`payload-too-large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn set_retention(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path(name): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<TenantView>, ApiError> {
    let request: Retention = json_body(bytes)?;
    let keep = request.retention_secs.map(std::time::Duration::from_secs);
    let tenant = state.host.engine.tenancy().set_retention(&TenantId(name), keep).await?;
    Ok(Json(TenantView::from(&tenant)))
}
