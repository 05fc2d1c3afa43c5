//! Exclusive lease keys: a tenant revokes one when what it guards is gone.

use axum::Json;
use axum::extract::{Path, State};

use super::views::{ErrorBody, LeaseInvalidated};
use super::{ApiError, ApiState, TenantAuth};

/// Invalidate an exclusive lease key
///
/// Its holder can no longer heartbeat or commit under it, and jobs waiting for it may run.
#[utoipa::path(
    delete,
    path = "/v1/leases/{key}",
    tag = "leases",
    params(("key" = String, Path, description = "The key, as jobs name it in `lease_keys`")),
    responses(
        (status = 200, description = "The key and the job that held it, if any", body = LeaseInvalidated),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn invalidate_lease(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(key): Path<String>,
) -> Result<Json<LeaseInvalidated>, ApiError> {
    let holder = state.host.engine.execution().invalidate_lease(&tenant, &key).await?;
    Ok(Json(LeaseInvalidated { key, held_by: holder.map(|h| h.to_string()) }))
}
