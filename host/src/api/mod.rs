//! The HTTP API: JSON, versioned under `/v1`, described by the OpenAPI document it serves at
//! `/v1/openapi.json`, which is generated from the same `routes!` calls that build the router.
//!
//! Every request but health and the document carries `Authorization: Bearer TOKEN`. A tenant
//! token scopes everything to its tenant: another tenant's job is "not found", never its data.
//! The operator token manages tenants and reads metrics, and nothing inside a tenant. Tokens
//! are created, listed and revoked by the operator (any) or a tenant (its own). Bodies
//! are size-capped; errors are typed JSON (`{"error": {"code", "message", "reason"?,
//! "state"?}}`) with stable codes. Handlers reach the engine and the registry, never the store.

mod alerts;
mod auth;
mod body;
mod bulk;
mod capacity;
mod control;
mod dashboard;
mod error;
mod health;
mod hosts;
mod jobs;
mod kinds;
mod leases;
mod live;
mod metrics;
mod openapi;
mod outbound;
mod queues;
pub mod server;
mod submissions;
mod tenants;
pub mod time;
mod tokens;
pub mod views;
mod workflows;

pub use workflows::{NewSchedule, ScheduleList, ScheduleView};

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

pub use auth::{CallerAuth, OperatorAuth, ReaderAuth, TenantAuth};
pub use error::{API_CODES, ApiError, ErrorCode};
pub use openapi::{Document, openapi_document};

use crate::host::Host;

/// What every handler can reach.
#[derive(Clone, Debug)]
pub struct ApiState {
    /// The host: handlers use its engine and its registry.
    pub host: Arc<Host>,
    /// The OpenAPI document, generated once with the router.
    pub document: Document,
}

/// Bytes a JSON body may have beyond the job input it carries.
const JSON_OVERHEAD: usize = 64 << 10;

/// The API over `host`, serving the document generated from its own routes.
pub fn router(host: Arc<Host>) -> Router {
    // A JSON body carries at most one job input, which JSON escaping may double.
    let json_limit = host.engine.config().max_payload_bytes * 2 + JSON_OVERHEAD;
    let component_limit = host.config().sandbox.max_component_bytes;
    let (served, document) = routes(component_limit).split_for_parts();
    let state = ApiState { host, document: Document::new(openapi::finish(document)) };
    // The dashboard's files are not part of the API's document.
    let dashboard = Router::new()
        .route("/", axum::routing::get(dashboard::index))
        .route("/ui/{name}", axum::routing::get(dashboard::asset));
    served
        .merge(dashboard)
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(axum::middleware::from_fn_with_state(state.clone(), refuse_data_while_refusing))
        .layer(DefaultBodyLimit::max(json_limit))
        .layer(CatchPanicLayer::custom(panicked))
        // No browser guesses a type for tenant data, and no cache keeps an answer (the
        // dashboard's files say `no-cache` themselves: revalidated, never stale).
        .layer(SetResponseHeaderLayer::overriding(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .layer(SetResponseHeaderLayer::if_not_present(header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .with_state(state)
}

/// A handler that panicked answers 500 `internal` (the detail goes to the log), never a
/// dropped connection.
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    ApiError::internal(format!("a request handler panicked: {detail}")).into_response()
}

/// Every route with its OpenAPI operation. Handlers that share a path share a `routes!` call,
/// except the deploy, whose body is a component under its own, larger cap.
fn routes(component_limit: usize) -> OpenApiRouter<ApiState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(health::health))
        .routes(routes!(openapi::serve))
        .routes(routes!(metrics::render))
        .routes(routes!(tenants::create_tenant, tenants::list_tenants))
        .routes(routes!(tenants::create_token))
        .routes(routes!(tenants::set_retention))
        .routes(routes!(capacity::set_limits, capacity::get_limits))
        .routes(routes!(capacity::usage))
        .routes(routes!(capacity::reset_breaker))
        .routes(routes!(outbound::set_tenant_outbound, outbound::get_tenant_outbound))
        .routes(routes!(outbound::list_secrets))
        .routes(routes!(outbound::set_secret, outbound::delete_secret))
        .routes(routes!(tokens::issue_token, tokens::list_tokens))
        .routes(routes!(tokens::revoke_token))
        .routes(routes!(kinds::list_kinds))
        // The sandbox's cap plus one byte: a component just over it reaches the registry, which
        // names its size and the cap.
        .routes(routes!(kinds::deploy).layer(DefaultBodyLimit::max(component_limit + 1)))
        .routes(routes!(kinds::get_kind))
        .routes(routes!(kinds::get_deploy))
        .routes(routes!(kinds::rollback))
        .routes(routes!(jobs::submit, jobs::list_jobs))
        .routes(routes!(bulk::counts))
        .routes(routes!(bulk::count))
        .routes(routes!(bulk::bulk))
        .routes(routes!(jobs::get_job))
        .routes(routes!(jobs::wait_job))
        .routes(routes!(live::logs))
        .routes(routes!(live::events))
        .routes(routes!(jobs::dead_letters))
        .routes(routes!(queues::retry_dead_letters))
        .routes(routes!(queues::count_dead_letters))
        .routes(routes!(queues::queues))
        .routes(routes!(queues::list_operations))
        .routes(routes!(queues::get_operation))
        .routes(routes!(alerts::alerts))
        .routes(routes!(hosts::list_hosts))
        .routes(routes!(hosts::finalize))
        .routes(routes!(submissions::get_submission))
        .routes(routes!(submissions::grant_sql_role, submissions::revoke_sql_role))
        .routes(routes!(control::cancel))
        .routes(routes!(control::pause))
        .routes(routes!(control::resume))
        .routes(routes!(control::restart))
        .routes(routes!(control::retry))
        .routes(routes!(workflows::send_signal))
        .routes(routes!(workflows::create_schedule, workflows::list_schedules))
        .routes(routes!(workflows::get_schedule, workflows::delete_schedule))
        .routes(routes!(workflows::pause_schedule))
        .routes(routes!(workflows::trigger_schedule))
        .routes(routes!(workflows::resume_schedule))
        .routes(routes!(leases::invalidate_lease))
}

/// Any path no route serves.
async fn no_route() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}

/// A route asked with a method it does not take: the typed error, not an empty body.
async fn no_method(method: axum::http::Method) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("this route does not take {method}"))
}

/// What a host answers while the storage format gate refuses it: its liveness (itself
/// `503`), the hosts and the gate, the document and metrics. Every other route reads or
/// writes data this build may misread (a lean job read by a build before format 3 is a
/// job without steps): those answer `503 storage-format`, reads too.
const WHILE_REFUSING: &[&str] = &["/v1/health", "/v1/hosts", "/v1/upgrade/finalize", "/v1/openapi.json", "/metrics"];

async fn refuse_data_while_refusing(
    axum::extract::State(state): axum::extract::State<ApiState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = request.uri().path();
    if path.starts_with("/v1/")
        && !WHILE_REFUSING.contains(&path)
        && let Some(refusal) = state.host.engine.gate().status().refusal
    {
        return ApiError::new(ErrorCode::StorageFormat, refusal).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    /// Whatever a handler does, the caller gets an answer.
    #[tokio::test]
    async fn a_handler_that_panics_answers_internal() {
        async fn boom() -> &'static str {
            panic!("boom")
        }
        let app: Router = Router::new().route("/boom", get(boom)).layer(CatchPanicLayer::custom(panicked));
        let response =
            app.oneshot(Request::get("/boom").body(Body::empty()).expect("a request")).await.expect("served");
        assert_eq!(response.status(), axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.expect("a body");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(body["error"]["code"], "internal");
    }
}
