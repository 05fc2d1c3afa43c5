//! The HTTP API: JSON, versioned under `/v1`, described by `/v1/openapi.json`.
//!
//! Every request but health and the OpenAPI document carries `Authorization: Bearer
//! TOKEN`. A tenant token scopes everything to its tenant: another tenant's job is "not
//! found", never its data. The operator token manages tenants and reads metrics, and
//! nothing inside a tenant. Bodies are size-capped; errors are typed JSON
//! (`{"error": {"code", "message", "state"?}}`) with stable codes.

mod error;
mod metrics;
pub mod openapi;
pub mod time;
mod views;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use spindle_core::policy::priority::Priority;
use spindle_core::{JobId, JobState};

pub use error::ApiError;
use views::{JobSummaryView, JobView, KindView, VersionView};

use crate::engine::{Command, SubmitRequest};
use crate::host::Host;
use crate::store::{Inserted, JobFilter, Role, TenantId};

/// What every handler can reach.
#[derive(Clone, Debug)]
pub struct ApiState {
    /// The host.
    pub host: Arc<Host>,
}

/// Bytes a JSON body may have beyond the job input it carries.
const JSON_OVERHEAD: usize = 64 << 10;

/// The API's routes.
pub fn router(state: ApiState) -> Router {
    let engine = state.host.engine.config();
    let json_limit = engine.max_payload_bytes * 2 + JSON_OVERHEAD;
    let component_limit = state.host.config().sandbox.max_component_bytes;
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/openapi.json", get(openapi::document))
        .route("/metrics", get(metrics::render))
        .route("/v1/tenants", post(create_tenant).get(list_tenants))
        .route("/v1/tenants/{name}/tokens", post(create_token))
        .route("/v1/kinds", get(list_kinds))
        .route("/v1/kinds/{kind}", put(deploy).layer(DefaultBodyLimit::max(component_limit + 1)).get(get_kind))
        .route("/v1/kinds/{kind}/rollback", post(rollback))
        .route("/v1/jobs", post(submit).get(list_jobs))
        .route("/v1/jobs/{id}", get(get_job))
        .route("/v1/jobs/{id}/wait", get(wait_job))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/jobs/{id}/pause", post(pause))
        .route("/v1/jobs/{id}/resume", post(resume))
        .route("/v1/jobs/{id}/restart", post(restart))
        .route("/v1/jobs/{id}/retry", post(retry))
        .route("/v1/dead-letters", get(dead_letters))
        .route("/v1/leases/{key}", axum::routing::delete(invalidate_lease))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not-found", "no such route") })
        .layer(DefaultBodyLimit::max(json_limit))
        .with_state(state)
}

// --- authentication -----------------------------------------------------------------

/// A request authenticated with a tenant token.
#[derive(Debug)]
pub struct TenantAuth(pub TenantId);

/// A request authenticated with the operator token.
#[derive(Debug)]
pub struct OperatorAuth;

async fn authenticate(parts: &Parts, state: &ApiState) -> Result<(Option<TenantId>, Role), ApiError> {
    let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let token = header.and_then(|h| h.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
    let Some(token) = token else { return Err(ApiError::unauthorised()) };
    match state.host.engine.authenticate(token).await? {
        Some(found) => Ok(found),
        None => Err(ApiError::unauthorised()),
    }
}

impl FromRequestParts<ApiState> for TenantAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        match authenticate(parts, state).await? {
            (Some(tenant), Role::Tenant) => Ok(Self(tenant)),
            _ => Err(ApiError::forbidden("this needs a tenant token; the operator token only manages tenants")),
        }
    }
}

impl FromRequestParts<ApiState> for OperatorAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, ApiError> {
        match authenticate(parts, state).await? {
            (_, Role::Operator) => Ok(Self),
            _ => Err(ApiError::forbidden("this needs the operator token")),
        }
    }
}

// --- bodies -------------------------------------------------------------------------

/// A body, or the typed error for one over its cap.
fn body(bytes: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    bytes.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", "the request body is over its size limit")
        } else {
            ApiError::invalid(format!("unreadable body: {rejection}"))
        }
    })
}

/// A JSON body of type `T`, or a typed `invalid-request`.
fn json_body<T: serde::de::DeserializeOwned>(bytes: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body(bytes)?;
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) { Bytes::from_static(b"{}") } else { bytes };
    serde_json::from_slice(&bytes).map_err(|e| ApiError::invalid(format!("malformed JSON body: {e}")))
}

fn job_id(text: &str) -> Result<JobId, ApiError> {
    text.parse().map_err(|_| ApiError::not_found())
}

// --- handlers -----------------------------------------------------------------------

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTenant {
    name: String,
}

async fn create_tenant(
    State(state): State<ApiState>,
    _: OperatorAuth,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: NewTenant = json_body(bytes)?;
    if !spindle_runtime::is_valid_name(&request.name) {
        return Err(ApiError::invalid("a tenant name is 1-64 characters of a-z, 0-9, '-', '_' or '.'"));
    }
    let (tenant, token) = state.host.engine.create_tenant(&request.name).await?;
    let body = serde_json::json!({ "tenant": tenant.name, "token": token });
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

async fn list_tenants(State(state): State<ApiState>, _: OperatorAuth) -> Result<Json<serde_json::Value>, ApiError> {
    let tenants = state.host.engine.tenants().await?;
    let names: Vec<serde_json::Value> = tenants
        .iter()
        .map(|t| serde_json::json!({ "name": t.name, "created_at": time::rfc3339(t.created_at) }))
        .collect();
    Ok(Json(serde_json::json!({ "tenants": names })))
}

async fn create_token(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let tenant = TenantId(name);
    let token = match state.host.engine.issue_token(&tenant).await {
        Err(crate::engine::EngineError::Store(crate::store::StoreError::NotFound(_))) => {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "not-found", "no such tenant"));
        }
        other => other?,
    };
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "tenant": tenant.0, "token": token }))).into_response())
}

async fn deploy(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(kind): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body(bytes)?;
    let now = state.host.engine.now();
    let (version, spec) = state.host.registry.deploy(&tenant, &kind, &bytes, now).await?;
    tracing::info!(tenant = %tenant, kind, version = version.version, digest = %version.digest, "deployed");
    let body = serde_json::json!({
        "kind": kind,
        "version": version.version,
        "digest": version.digest,
        "spec": spec,
    });
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

async fn list_kinds(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
) -> Result<Json<serde_json::Value>, ApiError> {
    let kinds = state.host.registry.kinds(&tenant).await?;
    let views: Vec<KindView> = kinds.iter().map(|k| KindView::new(k, None)).collect();
    Ok(Json(serde_json::json!({ "kinds": views })))
}

async fn get_kind(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(kind): Path<String>,
) -> Result<Json<KindView>, ApiError> {
    let kinds = state.host.registry.kinds(&tenant).await?;
    let entry = kinds
        .iter()
        .find(|k| k.kind == kind)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "unknown-kind", format!("unknown kind {kind:?}")))?;
    let versions = state.host.registry.versions(&tenant, &kind).await?;
    Ok(Json(KindView::new(entry, Some(&versions))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rollback {
    version: i64,
}

async fn rollback(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(kind): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let request: Rollback = json_body(bytes)?;
    let now = state.host.engine.now();
    state.host.registry.set_current(&tenant, &kind, request.version, now).await?;
    let version = state.host.registry.version(&tenant, &kind, request.version).await?.version;
    Ok(Json(
        serde_json::json!({ "kind": kind, "current_version": request.version, "version": VersionView::from(&version) }),
    ))
}

/// A submission.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Submit {
    kind: String,
    #[serde(default)]
    input: serde_json::Value,
    #[serde(default)]
    priority: Option<String>,
    /// RFC 3339, UTC.
    #[serde(default)]
    run_at: Option<String>,
    #[serde(default)]
    delay_secs: Option<f64>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    lease_keys: Vec<String>,
}

async fn submit(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: Submit = json_body(bytes)?;
    let priority = match request.priority.as_deref() {
        None => Priority::Normal,
        Some(p) => Priority::parse(p)
            .ok_or_else(|| ApiError::invalid("priority is one of forced, critical, scheduled, normal, background"))?,
    };
    let now = state.host.engine.now();
    let run_at = match (&request.run_at, request.delay_secs) {
        (Some(_), Some(_)) => return Err(ApiError::invalid("give run_at or delay_secs, not both")),
        (Some(text), None) => {
            Some(time::parse_rfc3339(text).ok_or_else(|| ApiError::invalid("run_at: RFC 3339 in UTC"))?)
        }
        (None, Some(secs)) if secs.is_finite() && secs >= 0.0 => Some(now.plus(Duration::from_secs_f64(secs))),
        (None, Some(_)) => return Err(ApiError::invalid("delay_secs must be a non-negative number")),
        (None, None) => None,
    };
    let input = serde_json::to_vec(&request.input).map_err(ApiError::internal)?;
    let submit = SubmitRequest {
        kind: request.kind,
        input,
        priority,
        run_at,
        idempotency_key: request.idempotency_key,
        lease_keys: request.lease_keys,
    };
    let inserted = state.host.engine.submit(&tenant, submit).await?;
    let status = if matches!(inserted, Inserted::Created(_)) { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(JobView::new(inserted.record(), None))).into_response())
}

async fn get_job(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let id = job_id(&id)?;
    let record = state.host.engine.job(&tenant, id).await?;
    let history = state.host.engine.history(&tenant, id).await?;
    Ok(Json(JobView::new(&record, Some(&history))))
}

#[derive(Deserialize)]
struct WaitQuery {
    /// Seconds to wait at most (default 30, at most 300).
    timeout: Option<f64>,
}

/// Answers when the job is final, or when `timeout` passes, whichever is first.
async fn wait_job(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
    Query(query): Query<WaitQuery>,
) -> Result<Json<JobView>, ApiError> {
    let id = job_id(&id)?;
    let timeout = Duration::from_secs_f64(query.timeout.unwrap_or(30.0).clamp(0.0, 300.0));
    let deadline = tokio::time::Instant::now() + timeout;
    let mut changes = state.host.engine.subscribe();
    loop {
        let record = state.host.engine.job(&tenant, id).await?;
        if record.job.state.is_final() || tokio::time::Instant::now() >= deadline {
            return Ok(Json(JobView::new(&record, None)));
        }
        // Woken by this host's changes; re-read now and then for other hosts' changes.
        let wake = async {
            loop {
                match changes.recv().await {
                    Ok(change) if change.job == id => return,
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let _ =
            tokio::time::timeout(Duration::from_millis(500).min(deadline - tokio::time::Instant::now()), wake).await;
    }
}

#[derive(Deserialize)]
struct ListQuery {
    state: Option<String>,
    kind: Option<String>,
    limit: Option<u32>,
    cursor: Option<i64>,
}

async fn list(
    state: &ApiState,
    tenant: &TenantId,
    query: ListQuery,
    dead: bool,
) -> Result<Json<serde_json::Value>, ApiError> {
    let job_state = match query.state.as_deref() {
        None => None,
        Some(s) => Some(JobState::parse(s).ok_or_else(|| ApiError::invalid(format!("unknown state {s:?}")))?),
    };
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let filter = JobFilter { state: job_state, kind: query.kind, dead_letters: dead, before_seq: query.cursor, limit };
    let records = state.host.engine.list_jobs(tenant, &filter).await?;
    let next = if records.len() == usize::try_from(limit).unwrap_or(usize::MAX) {
        records.last().map(|r| r.seq)
    } else {
        None
    };
    let jobs: Vec<JobSummaryView> = records.iter().map(Into::into).collect();
    Ok(Json(serde_json::json!({ "jobs": jobs, "next_cursor": next })))
}

async fn list_jobs(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Query(query): Query<ListQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    list(&state, &tenant, query, false).await
}

async fn dead_letters(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Query(query): Query<ListQuery>,
) -> Result<Json<serde_json::Value>, ApiError> {
    list(&state, &tenant, query, true).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    reason: String,
}

/// The acting token's name in history.
fn actor(tenant: &TenantId) -> String {
    format!("api:{tenant}")
}

async fn command(state: &ApiState, tenant: &TenantId, id: &str, command: Command) -> Result<Json<JobView>, ApiError> {
    let id = job_id(id)?;
    let record = state.host.engine.command(tenant, id, command, &actor(tenant)).await?;
    Ok(Json(JobView::new(&record, None)))
}

async fn cancel(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<JobView>, ApiError> {
    let request: CancelBody = json_body(bytes)?;
    command(&state, &tenant, &id, Command::Cancel { reason: request.reason }).await
}

async fn pause(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    command(&state, &tenant, &id, Command::Pause).await
}

async fn resume(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    command(&state, &tenant, &id, Command::Resume).await
}

async fn restart(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    command(&state, &tenant, &id, Command::Restart).await
}

/// Invalidates a lease key: its holder can no longer heartbeat or commit under it, and
/// jobs waiting for it may run.
async fn invalidate_lease(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(key): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let holder = state.host.engine.invalidate_lease(&tenant, &key).await?;
    Ok(Json(serde_json::json!({ "key": key, "held_by": holder.map(|h| h.to_string()) })))
}

async fn retry(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = job_id(&id)?;
    let failed = state.host.engine.command(&tenant, id, Command::Retry, &actor(&tenant)).await?;
    let successor = failed.job.successor.ok_or_else(|| ApiError::internal("retry recorded no successor"))?;
    let retry = state.host.engine.job(&tenant, successor).await?;
    Ok((StatusCode::CREATED, Json(JobView::new(&retry, None))).into_response())
}
