//! The OpenAPI 3.1 document served at `/v1/openapi.json`. It is generated: `utoipa` reads each
//! handler's `#[utoipa::path]` and each view's `ToSchema`, and the handlers are registered
//! through the same `routes!` calls that build the router, so a served route cannot be missing
//! from it. This module adds only what no handler says: the title, the tags and the bearer
//! scheme.

use std::fmt;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use utoipa::Modify;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{Components, InfoBuilder, OpenApi, OpenApiBuilder, SecurityRequirement};

use super::ApiState;

/// The name of the bearer scheme every operation needs unless it says otherwise.
pub const BEARER: &str = "bearer";

const DESCRIPTION: &str = "Durable jobs whose steps run as sandboxed WebAssembly components. \
Every request but health and this document needs `Authorization: Bearer TOKEN`: a tenant token \
(scoped to its tenant; another tenant's job is not found) or an operator token (tenants, tokens \
and metrics only); a revoked or expired token is `unauthorised`. Errors are `{\"error\": {\"code\", \
\"message\", \"reason\"?, \"state\"?}}`: `code` is stable and fixes the status; a command the job's \
machine refuses answers 409 `illegal-transition` with the refusal's own code as `reason` and the job's \
state as `state`.";

/// Each tag and what its operations do.
const TAGS: &[(&str, &str)] = &[
    ("meta", "Liveness and this document; no token needed."),
    ("tenants", "Tenants, their tokens, retention and outbound rules (operator token)."),
    ("secrets", "A tenant's secrets: set and deleted by the tenant, sealed at rest, never shown."),
    ("tokens", "API tokens: created, listed and revoked by a tenant for itself, by the operator for any."),
    ("kinds", "Deployed components: the versions of a tenant's job kinds."),
    ("jobs", "Submitting, reading, waiting for and listing jobs."),
    ("control", "Run control: cancel, pause, resume, restart, retry."),
    ("schedules", "Cron schedules: each firing submits a job, never twice for one time."),
    ("leases", "Exclusive lease keys."),
    ("metrics", "Prometheus metrics (operator token)."),
];

/// The generated document, built once with the router and shared by every request.
#[derive(Clone)]
pub struct Document(Arc<OpenApi>);

impl Document {
    pub(super) fn new(document: OpenApi) -> Self {
        Self(Arc::new(document))
    }

    /// The document.
    pub fn get(&self) -> &OpenApi {
        &self.0
    }
}

impl fmt::Debug for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // utoipa's types implement Debug only under its `debug` feature.
        f.debug_struct("Document").field("paths", &self.0.paths.paths.len()).finish()
    }
}

/// What the routes are added to: the title, the version and the tags.
pub(super) fn base() -> OpenApi {
    let info =
        InfoBuilder::new().title("Spindle").version(env!("CARGO_PKG_VERSION")).description(Some(DESCRIPTION)).build();
    let tags =
        TAGS.iter().map(|(name, description)| TagBuilder::new().name(*name).description(Some(*description)).build());
    OpenApiBuilder::new().info(info).tags(Some(tags)).build()
}

/// Adds the bearer scheme and makes it the default requirement of every operation; health
/// and the document opt out with `security(())`.
#[derive(Debug)]
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut OpenApi) {
        openapi
            .components
            .get_or_insert_with(Components::new)
            .add_security_scheme(BEARER, SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
        openapi.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
    }
}

/// The document of `routes`, completed.
pub(super) fn finish(mut document: OpenApi) -> OpenApi {
    BearerAuth.modify(&mut document);
    document
}

/// The document this API serves, built without a host (for tests and tools).
pub fn openapi_document() -> OpenApi {
    finish(super::routes(0).into_openapi())
}

/// This document
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "openapi",
    tag = "meta",
    security(()),
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json"))
)]
pub(super) async fn serve(State(state): State<ApiState>) -> Response {
    Json(state.document.get()).into_response()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Every `(method, path)` the API serves; a route that leaves or moves fails here, and the
    /// document holds exactly what the router was built from (the same `routes!` calls).
    const ROUTES: &[(&str, &str)] = &[
        ("get", "/v1/health"),
        ("get", "/v1/openapi.json"),
        ("get", "/metrics"),
        ("post", "/v1/tenants"),
        ("get", "/v1/tenants"),
        ("post", "/v1/tenants/{name}/tokens"),
        ("put", "/v1/tenants/{name}/retention"),
        ("put", "/v1/tenants/{name}/limits"),
        ("get", "/v1/tenants/{name}/limits"),
        ("get", "/v1/usage"),
        ("post", "/v1/tenants/{name}/kinds/{kind}/breaker/reset"),
        ("put", "/v1/tenants/{name}/outbound"),
        ("get", "/v1/tenants/{name}/outbound"),
        ("get", "/v1/secrets"),
        ("put", "/v1/secrets/{name}"),
        ("delete", "/v1/secrets/{name}"),
        ("post", "/v1/tokens"),
        ("get", "/v1/tokens"),
        ("delete", "/v1/tokens/{id}"),
        ("get", "/v1/kinds"),
        ("put", "/v1/kinds/{kind}"),
        ("get", "/v1/kinds/{kind}"),
        ("get", "/v1/kinds/{kind}/deploys/{id}"),
        ("post", "/v1/kinds/{kind}/rollback"),
        ("post", "/v1/jobs"),
        ("get", "/v1/jobs"),
        ("get", "/v1/jobs/counts"),
        ("get", "/v1/jobs/count"),
        ("post", "/v1/jobs/bulk"),
        ("get", "/v1/jobs/{id}"),
        ("get", "/v1/jobs/{id}/wait"),
        ("get", "/v1/jobs/{id}/logs"),
        ("get", "/v1/jobs/{id}/events"),
        ("post", "/v1/jobs/{id}/cancel"),
        ("post", "/v1/jobs/{id}/pause"),
        ("post", "/v1/jobs/{id}/resume"),
        ("post", "/v1/jobs/{id}/restart"),
        ("post", "/v1/jobs/{id}/retry"),
        ("post", "/v1/jobs/{id}/signals/{name}"),
        ("post", "/v1/schedules"),
        ("get", "/v1/schedules"),
        ("get", "/v1/schedules/{name}"),
        ("delete", "/v1/schedules/{name}"),
        ("post", "/v1/schedules/{name}/pause"),
        ("post", "/v1/schedules/{name}/resume"),
        ("post", "/v1/schedules/{name}/trigger"),
        ("get", "/v1/dead-letters"),
        ("get", "/v1/dead-letters/count"),
        ("post", "/v1/dead-letters/retry"),
        ("get", "/v1/queues"),
        ("get", "/v1/operations"),
        ("get", "/v1/operations/{id}"),
        ("get", "/v1/alerts"),
        ("delete", "/v1/leases/{key}"),
        ("get", "/v1/hosts"),
        ("post", "/v1/upgrade/finalize"),
        ("get", "/v1/submissions/{id}"),
        ("put", "/v1/tenants/{name}/sql-roles/{role}"),
        ("delete", "/v1/tenants/{name}/sql-roles/{role}"),
    ];

    const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch", "trace"];

    fn document() -> Value {
        serde_json::to_value(openapi_document()).expect("the document serialises")
    }

    /// Every `(method, path)` the document describes.
    fn operations(document: &Value) -> Vec<(String, String)> {
        let mut found = Vec::new();
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for method in METHODS {
                if item[*method].is_object() {
                    found.push(((*method).to_owned(), path.clone()));
                }
            }
        }
        found.sort();
        found
    }

    #[test]
    fn the_document_describes_exactly_the_served_routes() {
        let mut expected: Vec<(String, String)> =
            ROUTES.iter().map(|(method, path)| ((*method).to_owned(), (*path).to_owned())).collect();
        expected.sort();
        assert_eq!(operations(&document()), expected);
    }

    #[test]
    fn the_document_names_spindle_and_its_bearer_scheme() {
        let document = document();
        assert_eq!(document["openapi"], "3.1.0");
        assert_eq!(document["info"]["title"], "Spindle");
        assert_eq!(document["info"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(document["components"]["securitySchemes"][BEARER]["scheme"], "bearer");
        assert_eq!(document["security"][0][BEARER], serde_json::json!([]));
        for path in ["/v1/health", "/v1/openapi.json"] {
            assert_eq!(document["paths"][path]["get"]["security"], serde_json::json!([{}]), "{path} needs no token");
        }
    }

    #[test]
    fn every_operation_is_tagged_and_documents_its_errors_as_error_bodies() {
        let document = document();
        let error_ref = "#/components/schemas/ErrorBody";
        for (method, path) in operations(&document) {
            let operation = &document["paths"][&path][&method];
            let tag = operation["tags"][0].as_str().unwrap_or_default();
            assert!(TAGS.iter().any(|(name, _)| *name == tag), "{method} {path} has no known tag");
            let responses = operation["responses"].as_object().expect("responses");
            assert!(responses.keys().any(|status| status.starts_with('2')), "{method} {path} has no success");
            let public = operation["security"] == serde_json::json!([{}]);
            if !public {
                assert_eq!(
                    operation["responses"]["401"]["content"]["application/json"]["schema"]["$ref"], error_ref,
                    "{method} {path} does not document 401 unauthorised"
                );
            }
            for (status, response) in responses {
                // A refusing host's health answers 503 with the health body itself: a load
                // balancer reads the status, an operator the body's `status` and reasons.
                let health = path == "/v1/health" && status == "503";
                if (status.starts_with('4') || status.starts_with('5')) && !health {
                    assert_eq!(
                        response["content"]["application/json"]["schema"]["$ref"], error_ref,
                        "{method} {path} {status} is not an ErrorBody"
                    );
                }
            }
        }
    }
}
