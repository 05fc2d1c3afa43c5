//! Tenants' capacity: the operator sets a tenant's limits and reads them with its usage;
//! a tenant reads its own usage.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};

use super::body::json_body;
use super::views;
use super::views::{BreakerStateView, CapacityView, ErrorBody, LimitsView};
use super::{ApiError, ApiState, ErrorCode, OperatorAuth, TenantAuth};
use crate::engine::{TenantId, TenantLimits};

/// Set a tenant's limits
///
/// Operator token only. Replaces every limit: a field left out is no limit (for the
/// sandbox ceilings, the host's own, which a tenant's may only tighten). Limits hold on
/// every host sharing the database.
#[utoipa::path(
    put,
    path = "/v1/tenants/{name}/limits",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant")),
    request_body = LimitsView,
    responses(
        (status = 200, description = "The tenant's limits and usage as they now are", body = CapacityView),
        (status = 400, description = "`invalid-request`: a malformed body, a weight out of range, a zero limit, a ceiling over the host's", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 404, description = "`not-found`: no such tenant", body = ErrorBody),
        (status = 413, description = "`payload-too-large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn set_limits(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path(name): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<CapacityView>, ApiError> {
    let request: LimitsView = json_body(bytes)?;
    let capacity =
        state.host.engine.capacity().set_tenant_limits(&TenantId(name.clone()), TenantLimits::from(&request)).await?;
    Ok(Json(views::capacity_view(&name, &capacity)))
}

/// A tenant's limits and usage
///
/// Operator token only: the tenant's limits, each kind's running limit, usage so far
/// (steps, faults, sandbox and wall time, outbound requests) and what is queued and
/// running now.
#[utoipa::path(
    get,
    path = "/v1/tenants/{name}/limits",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant")),
    responses(
        (status = 200, description = "The tenant's limits and usage", body = CapacityView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 404, description = "`not-found`: no such tenant", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn get_limits(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path(name): Path<String>,
) -> Result<Json<CapacityView>, ApiError> {
    let tenant = TenantId(name.clone());
    if let Err(crate::engine::EngineError::NotFound) = state.host.engine.tenancy().tenant(&tenant).await {
        return Err(ApiError::new(ErrorCode::NotFound, "no such tenant"));
    }
    let capacity = state.host.engine.capacity().of(&tenant).await?;
    Ok(Json(views::capacity_view(&name, &capacity)))
}

/// This tenant's usage
///
/// The caller's own tenant: its limits, each kind's running limit, usage so far and what
/// is queued and running now.
#[utoipa::path(
    get,
    path = "/v1/usage",
    tag = "tenants",
    responses(
        (status = 200, description = "The tenant's limits and usage", body = CapacityView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn usage(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
) -> Result<Json<CapacityView>, ApiError> {
    let capacity = state.host.engine.capacity().of(&tenant).await?;
    Ok(Json(views::capacity_view(&tenant.0, &capacity)))
}

/// Reset a kind's fault breakers
///
/// Operator token only. Closes the breakers this host keeps for every version of the
/// tenant's kind and lets the jobs they held run.
#[utoipa::path(
    post,
    path = "/v1/tenants/{name}/kinds/{kind}/breaker/reset",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant"), ("kind" = String, Path, description = "The kind")),
    responses(
        (status = 200, description = "The kind's breakers on this host, as they now are", body = Vec<BreakerStateView>),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn reset_breaker(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path((name, kind)): Path<(String, String)>,
) -> Result<Json<Vec<BreakerStateView>>, ApiError> {
    let tenant = TenantId(name);
    let engine = &state.host.engine;
    engine.capacity().reset_breakers(&tenant, &kind).await;
    let views = engine.capacity().breakers().of_tenant(&tenant, engine.now());
    Ok(Json(
        views
            .iter()
            .filter(|b| b.kind == kind)
            .map(|b| BreakerStateView {
                version: b.version,
                state: b.state.as_str().to_owned(),
                recent_faults: b.recent_faults as u64,
            })
            .collect(),
    ))
}
