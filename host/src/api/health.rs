//! Liveness: answers while the host serves, with no token, and says whether the storage
//! format gate lets it write.

use axum::Json;
use axum::extract::State;

use super::ApiState;
use super::views::{Health, StorageHealth};

/// Liveness
///
/// Answers while the host serves; needs no token. `status` is `refusing` while the storage
/// format gate refuses this host (it claims nothing, writes no job and answers every data
/// route `503 storage-format`; `storage.refusal` says why), and the answer is then `503`
/// itself, so a load balancer that reads only the status stops routing to it.
#[utoipa::path(
    get,
    path = "/v1/health",
    tag = "meta",
    security(()),
    responses(
        (status = 200, description = "The host is up and serves", body = Health),
        (status = 503, description = "The host is up and refuses the database's storage format", body = Health)
    )
)]
pub(super) async fn health(State(state): State<ApiState>) -> (axum::http::StatusCode, Json<Health>) {
    let engine = &state.host.engine;
    let gate = engine.gate().status();
    let status =
        if gate.refusal.is_some() { axum::http::StatusCode::SERVICE_UNAVAILABLE } else { axum::http::StatusCode::OK };
    let body = Health {
        status: if gate.refusal.is_some() { "refusing" } else { "ok" }.to_owned(),
        storage: Some(StorageHealth {
            reads: [*gate.formats.reads.start(), *gate.formats.reads.end()],
            writes: gate.formats.writes,
            writing: gate.writing,
            refusal: gate.refusal,
        }),
        draining: engine.config().draining,
    };
    (status, Json(body))
}
