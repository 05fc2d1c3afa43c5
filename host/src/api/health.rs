//! Liveness: answers while the host serves, with no token.

use axum::Json;

use super::views::Health;

/// Liveness
///
/// Answers while the host serves; needs no token.
#[utoipa::path(
    get,
    path = "/v1/health",
    tag = "meta",
    security(()),
    responses((status = 200, description = "The host is up", body = Health))
)]
pub(super) async fn health() -> Json<Health> {
    Json(Health { status: "ok".to_owned() })
}
