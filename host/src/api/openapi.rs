//! The OpenAPI 3.1 document the host serves at `/v1/openapi.json`. A test checks that
//! every route the router serves is described here.

use axum::Json;
use serde_json::{Value, json};

/// Every `(method, path)` the router serves under `/v1` or at `/metrics`.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/v1/health"),
    ("get", "/v1/openapi.json"),
    ("get", "/metrics"),
    ("post", "/v1/tenants"),
    ("get", "/v1/tenants"),
    ("post", "/v1/tenants/{name}/tokens"),
    ("get", "/v1/kinds"),
    ("put", "/v1/kinds/{kind}"),
    ("get", "/v1/kinds/{kind}"),
    ("post", "/v1/kinds/{kind}/rollback"),
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs"),
    ("get", "/v1/jobs/{id}"),
    ("get", "/v1/jobs/{id}/wait"),
    ("post", "/v1/jobs/{id}/cancel"),
    ("post", "/v1/jobs/{id}/pause"),
    ("post", "/v1/jobs/{id}/resume"),
    ("post", "/v1/jobs/{id}/restart"),
    ("post", "/v1/jobs/{id}/retry"),
    ("get", "/v1/dead-letters"),
    ("delete", "/v1/leases/{key}"),
];

fn error_responses(codes: &[(&str, &str)]) -> Value {
    let mut out = serde_json::Map::new();
    for (status, description) in codes {
        out.insert(
            (*status).to_owned(),
            json!({ "description": description, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }),
        );
    }
    Value::Object(out)
}

fn ok(status: &str, description: &str, schema: &str) -> Value {
    json!({ status: { "description": description, "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } } })
}

fn merge(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Object(mut a), Value::Object(b)) => {
            a.extend(b);
            Value::Object(a)
        }
        (a, _) => a,
    }
}

fn id_param() -> Value {
    json!([{ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } }])
}

fn control(summary: &str, body: Option<Value>) -> Value {
    let mut op = json!({
        "summary": summary,
        "parameters": id_param(),
        "responses": merge(ok("200", "the job after the change", "Job"), error_responses(&[
            ("401", "unauthorised"), ("404", "not-found (also another tenant's job)"),
            ("409", "illegal-transition, with the job's current state"),
        ])),
    });
    if let (Some(body), Value::Object(map)) = (body, &mut op) {
        map.insert(
            "requestBody".into(),
            json!({ "required": true, "content": { "application/json": { "schema": body } } }),
        );
    }
    op
}

/// The document.
pub fn spec() -> Value {
    let list_params = json!([
        { "name": "state", "in": "query", "schema": { "type": "string", "enum": ["pending", "running", "paused", "succeeded", "failed", "cancelled"] } },
        { "name": "kind", "in": "query", "schema": { "type": "string" } },
        { "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 500, "default": 50 } },
        { "name": "cursor", "in": "query", "description": "next_cursor of the previous page", "schema": { "type": "integer" } }
    ]);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Spindle",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Durable jobs whose steps run as sandboxed WebAssembly components. Every request but health and this document needs `Authorization: Bearer TOKEN`: a tenant token (scoped to its tenant) or the operator token (tenants and metrics only). Errors are `{\"error\": {\"code\", \"message\", \"state\"?}}` with stable codes: unknown-kind, unknown-version, illegal-transition, stale-lease, payload-too-large, invalid-component, invalid-request, unauthorised, forbidden, not-found, already-exists, contention, internal."
        },
        "security": [{ "bearer": [] }],
        "paths": {
            "/v1/health": { "get": { "summary": "Liveness", "security": [], "responses": { "200": { "description": "ok" } } } },
            "/v1/openapi.json": { "get": { "summary": "This document", "security": [], "responses": { "200": { "description": "the OpenAPI document" } } } },
            "/metrics": { "get": { "summary": "Prometheus metrics (operator token)", "responses": merge(json!({ "200": { "description": "text exposition format", "content": { "text/plain": {} } } }), error_responses(&[("401", "unauthorised"), ("403", "forbidden")])) } },
            "/v1/tenants": {
                "post": {
                    "summary": "Create a tenant and its first token (operator token)",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["name"], "properties": { "name": { "type": "string" } } } } } },
                    "responses": merge(ok("201", "the tenant and its token, shown once", "TenantToken"), error_responses(&[("400", "invalid-request"), ("401", "unauthorised"), ("403", "forbidden"), ("409", "already-exists")]))
                },
                "get": { "summary": "List tenants (operator token)", "responses": merge(json!({ "200": { "description": "tenants" } }), error_responses(&[("401", "unauthorised"), ("403", "forbidden")])) }
            },
            "/v1/tenants/{name}/tokens": {
                "post": {
                    "summary": "Issue another token for a tenant (operator token)",
                    "parameters": [{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": merge(ok("201", "the token, shown once", "TenantToken"), error_responses(&[("401", "unauthorised"), ("403", "forbidden"), ("404", "not-found")]))
                }
            },
            "/v1/kinds": { "get": { "summary": "List the tenant's kinds", "responses": merge(json!({ "200": { "description": "kinds" } }), error_responses(&[("401", "unauthorised")])) } },
            "/v1/kinds/{kind}": {
                "put": {
                    "summary": "Deploy a component as the next version of a kind (validated, compiled, stored; current at once on every host)",
                    "parameters": [{ "name": "kind", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "requestBody": { "required": true, "content": { "application/wasm": { "schema": { "type": "string", "format": "binary" } } } },
                    "responses": merge(ok("201", "the new version", "Deployed"), error_responses(&[("400", "invalid-request"), ("401", "unauthorised"), ("413", "payload-too-large"), ("422", "invalid-component, with the component.* reason in the message")]))
                },
                "get": {
                    "summary": "A kind and its versions",
                    "parameters": [{ "name": "kind", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "responses": merge(ok("200", "the kind", "Kind"), error_responses(&[("401", "unauthorised"), ("404", "unknown-kind")]))
                }
            },
            "/v1/kinds/{kind}/rollback": {
                "post": {
                    "summary": "Make an earlier (or later) version current",
                    "parameters": [{ "name": "kind", "in": "path", "required": true, "schema": { "type": "string" } }],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["version"], "properties": { "version": { "type": "integer" } } } } } },
                    "responses": merge(json!({ "200": { "description": "the current version" } }), error_responses(&[("401", "unauthorised"), ("404", "unknown-version")]))
                }
            },
            "/v1/jobs": {
                "post": {
                    "summary": "Submit a job (pinned to the kind's current version)",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Submit" } } } },
                    "responses": merge(merge(ok("201", "the new job", "Job"), ok("200", "the existing job with the same idempotency key", "Job")), error_responses(&[("400", "invalid-request"), ("401", "unauthorised"), ("404", "unknown-kind"), ("413", "payload-too-large")]))
                },
                "get": { "summary": "List the tenant's jobs, newest first", "parameters": list_params, "responses": merge(ok("200", "a page of jobs", "JobPage"), error_responses(&[("400", "invalid-request"), ("401", "unauthorised")])) }
            },
            "/v1/jobs/{id}": { "get": { "summary": "A job with its steps, attempts, progress and history", "parameters": id_param(), "responses": merge(ok("200", "the job", "Job"), error_responses(&[("401", "unauthorised"), ("404", "not-found")])) } },
            "/v1/jobs/{id}/wait": {
                "get": {
                    "summary": "Wait until the job is final (or the timeout passes)",
                    "parameters": [id_param()[0].clone(), { "name": "timeout", "in": "query", "schema": { "type": "number", "default": 30, "maximum": 300 } }],
                    "responses": merge(ok("200", "the job", "Job"), error_responses(&[("401", "unauthorised"), ("404", "not-found")]))
                }
            },
            "/v1/jobs/{id}/cancel": { "post": control("Cancel (cancellable kinds; a nonblank reason)", Some(json!({ "type": "object", "required": ["reason"], "properties": { "reason": { "type": "string" } } }))) },
            "/v1/jobs/{id}/pause": { "post": control("Pause at the next step boundary", None) },
            "/v1/jobs/{id}/resume": { "post": control("Resume a paused job", None) },
            "/v1/jobs/{id}/restart": { "post": control("Start a fresh pass (waits for any pause or cancel)", None) },
            "/v1/jobs/{id}/retry": { "post": {
                "summary": "Retry a failed or cancelled job as a new, linked job whose completed steps are carried",
                "parameters": id_param(),
                "responses": merge(ok("201", "the retry job", "Job"), error_responses(&[("401", "unauthorised"), ("404", "not-found"), ("409", "illegal-transition")]))
            } },
            "/v1/leases/{key}": { "delete": {
                "summary": "Invalidate an exclusive lease key (its target was deleted, or it is revoked): waiting jobs may run; its holder can no longer commit under it",
                "parameters": [{ "name": "key", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": merge(json!({ "200": { "description": "the key and the job that held it, if any" } }), error_responses(&[("401", "unauthorised")]))
            } },
            "/v1/dead-letters": { "get": { "summary": "Failed jobs not yet retried", "parameters": list_params, "responses": merge(ok("200", "a page of jobs", "JobPage"), error_responses(&[("401", "unauthorised")])) } }
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "Error": { "type": "object", "required": ["error"], "properties": { "error": { "type": "object", "required": ["code", "message"], "properties": {
                    "code": { "type": "string" }, "message": { "type": "string" }, "state": { "type": "string" } } } } },
                "TenantToken": { "type": "object", "properties": { "tenant": { "type": "string" }, "token": { "type": "string" } } },
                "Deployed": { "type": "object", "properties": { "kind": { "type": "string" }, "version": { "type": "integer" }, "digest": { "type": "string" }, "spec": { "type": "object" } } },
                "Kind": { "type": "object", "properties": { "kind": { "type": "string" }, "current_version": { "type": "integer" }, "latest_version": { "type": "integer" }, "versions": { "type": "array", "items": { "type": "object" } } } },
                "Submit": { "type": "object", "required": ["kind"], "properties": {
                    "kind": { "type": "string" }, "input": {},
                    "priority": { "type": "string", "enum": ["forced", "critical", "scheduled", "normal", "background"], "default": "normal" },
                    "run_at": { "type": "string", "format": "date-time" }, "delay_secs": { "type": "number" },
                    "idempotency_key": { "type": "string" }, "lease_keys": { "type": "array", "items": { "type": "string" } } } },
                "Job": { "type": "object", "properties": {
                    "id": { "type": "string" }, "kind": { "type": "string" }, "kind_version": { "type": "integer" },
                    "state": { "type": "string" }, "progress": { "type": "integer" }, "priority": { "type": "string" },
                    "pass": { "type": "integer" }, "created_at": { "type": "string" }, "started_at": { "type": "string" },
                    "settled_at": { "type": "string" }, "run_at": { "type": "string" }, "failure": { "type": "object" },
                    "steps": { "type": "array", "items": { "type": "object" } }, "history": { "type": "array", "items": { "type": "object" } },
                    "predecessor": { "type": "string" }, "successor": { "type": "string" }, "input": {} } },
                "JobPage": { "type": "object", "properties": { "jobs": { "type": "array", "items": { "type": "object" } }, "next_cursor": { "type": ["integer", "null"] } } }
            }
        }
    })
}

/// `GET /v1/openapi.json`.
pub async fn document() -> Json<Value> {
    Json(spec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described() {
        let spec = spec();
        for (method, path) in ROUTES {
            assert!(spec["paths"][path][method].is_object(), "{method} {path} is not in the OpenAPI document");
        }
        let described: usize =
            spec["paths"].as_object().map_or(0, |p| p.values().map(|m| m.as_object().map_or(0, |m| m.len())).sum());
        assert_eq!(described, ROUTES.len(), "the document describes a route the router does not serve");
    }
}
