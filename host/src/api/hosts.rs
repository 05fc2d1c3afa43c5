//! Hosts and the storage format gate, for the operator: who runs which build, and the
//! move of the gate once every live host reads the newer format.

use axum::Json;
use axum::extract::State;

use super::views;
use super::views::{ErrorBody, Finalized, GateView, HostList};
use super::{ApiError, ApiState, ErrorCode, OperatorAuth};

/// Hosts on this database
///
/// Every host recorded on the database, live or expired, with the storage formats each reads
/// and writes, and the gate (the format every host writes).
#[utoipa::path(
    get,
    path = "/v1/hosts",
    tag = "meta",
    responses(
        (status = 200, description = "The hosts and the gate", body = HostList),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an operator token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn list_hosts(State(state): State<ApiState>, _: OperatorAuth) -> Result<Json<HostList>, ApiError> {
    let engine = &state.host.engine;
    let (hosts, gate) = engine.operations().hosts().await?;
    let now = engine.now();
    Ok(Json(HostList {
        gate: gate.as_ref().map(GateView::from),
        hosts: hosts.iter().map(|h| views::host_view(h, now)).collect(),
    }))
}

/// Move the storage format gate
///
/// Moves the gate to the newest storage format every live host reads and writes, after which
/// every host writes it (and a host of an older build meeting it refuses to claim or write).
/// Refused with `illegal-transition` while a live host cannot read a newer format: the
/// message names those hosts. Rolling back to the previous build is safe until this call.
#[utoipa::path(
    post,
    path = "/v1/upgrade/finalize",
    tag = "meta",
    responses(
        (status = 200, description = "The gate moved", body = Finalized),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an operator token", body = ErrorBody),
        (status = 409, description = "`illegal-transition`: a live host holds the gate back", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn finalize(State(state): State<ApiState>, _: OperatorAuth) -> Result<Json<Finalized>, ApiError> {
    let engine = &state.host.engine;
    let by = format!("operator, through {}", engine.config().host_id);
    match engine.operations().finalize_format(&by).await? {
        Ok((from, to)) => Ok(Json(Finalized { from, to })),
        Err(refusal) => Err(ApiError::new(ErrorCode::IllegalTransition, refusal)),
    }
}
