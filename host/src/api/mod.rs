//! The HTTP API, versioned under `/v1`.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use crate::host::Host;

/// What every handler can reach.
#[derive(Clone, Debug)]
pub struct ApiState {
    /// The host.
    pub host: Arc<Host>,
}

/// The API's routes.
pub fn router(state: ApiState) -> Router {
    Router::new().route("/v1/health", get(health)).with_state(state)
}

async fn health() -> &'static str {
    "ok"
}
