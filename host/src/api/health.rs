//! Liveness: answers while the host serves, with no token, and says whether the storage
//! format gate lets it write.

use axum::Json;
use axum::extract::State;

use super::ApiState;
use super::views::{Health, StorageHealth};

/// Liveness
///
/// Answers while the host serves; needs no token. `status` is `refusing` while the storage
/// format gate refuses this host (it claims nothing and writes no job; `storage.refusal` says
/// why).
#[utoipa::path(
    get,
    path = "/v1/health",
    tag = "meta",
    security(()),
    responses((status = 200, description = "The host is up", body = Health))
)]
pub(super) async fn health(State(state): State<ApiState>) -> Json<Health> {
    let engine = &state.host.engine;
    let gate = engine.gate().status();
    Json(Health {
        status: if gate.refusal.is_some() { "refusing" } else { "ok" }.to_owned(),
        storage: Some(StorageHealth {
            reads: [*gate.formats.reads.start(), *gate.formats.reads.end()],
            writes: gate.formats.writes,
            writing: gate.writing,
            refusal: gate.refusal,
        }),
        draining: engine.config().draining,
    })
}
