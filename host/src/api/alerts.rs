//! Operational alerts, for the operator: late successes after a failure, sandbox faults.

use axum::Json;
use axum::extract::State;

use super::views::{AlertList, AlertView, ErrorBody};
use super::{ApiError, ApiState, OperatorAuth};

/// The latest operational alerts
///
/// Late successes (a step that succeeded after its job had failed) and sandbox faults, newest
/// first; one tenant's alerts of one kind and code within a minute are one, counted.
#[utoipa::path(
    get,
    path = "/v1/alerts",
    tag = "tenants",
    responses(
        (status = 200, description = "The latest 200", body = AlertList),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn alerts(State(state): State<ApiState>, _: OperatorAuth) -> Result<Json<AlertList>, ApiError> {
    let alerts = state.host.engine.operations().alerts(200).await?;
    Ok(Json(AlertList { alerts: alerts.iter().map(AlertView::from).collect() }))
}
