//! Outbound requests: the rules each tenant's steps may use (operator token) and the
//! tenant's secrets (tenant token; values go in, never come out).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use spindle_runtime::outbound::Rules;

use super::body::{body, json_body};
use super::views::{ErrorBody, SecretList, SecretView, TenantOutbound};
use super::{ApiError, ApiState, OperatorAuth, TenantAuth};
use crate::engine::TenantId;

/// Set what a tenant's steps may reach
///
/// Operator token only. A request leaves a step only if the operator's policy, these rules
/// and the kind deployment's rules all allow it; `null` or an empty list allows nothing.
#[utoipa::path(
    put,
    path = "/v1/tenants/{name}/outbound",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant's name")),
    request_body = TenantOutbound,
    responses(
        (status = 200, description = "The tenant's rules as they now are", body = TenantOutbound),
        (status = 400, description = "`invalid-request`: a malformed body or rule", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 404, description = "`not-found`: no such tenant", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn set_tenant_outbound(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path(name): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<TenantOutbound>, ApiError> {
    let request: TenantOutbound = json_body(bytes)?;
    let rules = match request.allow {
        None => None,
        Some(texts) => Some(Rules::parse(&texts).map_err(|e| ApiError::invalid(e.to_string()))?),
    };
    let tenant = TenantId(name);
    state.host.engine.tenancy().set_tenant_outbound(&tenant, rules).await?;
    tenant_outbound(&state, tenant).await
}

/// What a tenant's steps may reach
#[utoipa::path(
    get,
    path = "/v1/tenants/{name}/outbound",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant's name")),
    responses(
        (status = 200, description = "The tenant's rules", body = TenantOutbound),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn get_tenant_outbound(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path(name): Path<String>,
) -> Result<Json<TenantOutbound>, ApiError> {
    tenant_outbound(&state, TenantId(name)).await
}

async fn tenant_outbound(state: &ApiState, tenant: TenantId) -> Result<Json<TenantOutbound>, ApiError> {
    let rules = state.host.engine.tenancy().tenant_outbound(&tenant).await?;
    let allow = rules.0.iter().map(ToString::to_string).collect();
    Ok(Json(TenantOutbound { tenant: tenant.0, allow: Some(allow) }))
}

/// Set a secret
///
/// The body is the value (UTF-8, at most 16 KiB). It is sealed with the host's key before
/// it is stored and never shown again; steps of kinds deployed with `--secret NAME@RULE` use it
/// from their next call, through placeholders the host replaces in allowed requests.
#[utoipa::path(
    put,
    path = "/v1/secrets/{name}",
    tag = "secrets",
    params(("name" = String, Path, description = "The secret's name: 1-64 characters of a-z, A-Z, 0-9, '-', '_' or '.'")),
    request_body(description = "The secret's value", content(("text/plain"))),
    responses(
        (status = 200, description = "The secret's name and time", body = SecretView),
        (status = 400, description = "`invalid-request`: a bad name, or a value empty, too long or not UTF-8", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn set_secret(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(name): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<SecretView>, ApiError> {
    let value = body(bytes)?;
    let info = state.host.engine.tenancy().set_secret(&tenant, &name, &value).await?;
    Ok(Json(SecretView::from(&info)))
}

/// Delete a secret
#[utoipa::path(
    delete,
    path = "/v1/secrets/{name}",
    tag = "secrets",
    params(("name" = String, Path, description = "The secret's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn delete_secret(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.host.engine.tenancy().delete_secret(&tenant, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List the tenant's secrets (names and times only)
#[utoipa::path(
    get,
    path = "/v1/secrets",
    tag = "secrets",
    responses(
        (status = 200, description = "The tenant's secrets", body = SecretList),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn list_secrets(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
) -> Result<Json<SecretList>, ApiError> {
    let secrets = state.host.engine.tenancy().secrets(&tenant).await?;
    Ok(Json(SecretList { secrets: secrets.iter().map(Into::into).collect() }))
}
