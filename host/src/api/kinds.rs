//! Kinds: deploying components as versions, reading them, choosing the current one. Tenant
//! token; every call goes through the registry.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use serde::Deserialize;
use utoipa::IntoParams;

use super::body::{ApiQuery, body, json_body};
use super::views;
use super::views::{
    DeployView, Deployed, DeploymentView, ErrorBody, KindList, KindView, Rollback, RolledBack, VersionView,
};
use super::{ApiError, ApiState, ErrorCode, ReaderAuth, TenantAuth};
use crate::capabilities::Deployment;

/// What a deployment allows, declares and sets, beside the component.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DeployQuery {
    /// A `DeploymentView` as JSON: `{"allow": ["POST https://api.example.com/v1/*"],
    /// "secrets": ["stripe@POST https://api.example.com/v1/*"], "settings": {"region": "eu"},
    /// "secrets_in_body": false,
    /// "record": "lean"}`.
    deployment: Option<String>,
    /// Seconds to wait for the compile before answering `202` (default 2, at most 120;
    /// 0 answers at once).
    wait: Option<u64>,
}

/// Refuses a lean record while the storage format gate is below 3: a host of an older
/// build may still run, and it would refuse the deployment (it knows no `record`) and
/// misread a lean job. Once the gate moved, no such host can run.
fn may_keep(state: &ApiState, record: spindle_core::Record) -> Result<(), ApiError> {
    if record == spindle_core::Record::Full {
        return Ok(());
    }
    let format = state.host.engine.gate().check().map_err(|why| ApiError::new(ErrorCode::StorageFormat, why))?;
    if spindle_core::upgrade::writes_lean(format) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::IllegalTransition,
        format!(
            "a lean record needs storage format 3, and the gate is at {format}: once every host runs this build, \
             run `spindle upgrade finalize`, then deploy again"
        ),
    ))
}

/// How long a deploy waits for its compile by default: a small component has compiled
/// by then and is answered as deployed; a 20 MB one (Python, JavaScript) is answered
/// `202` and compiles on.
const DEPLOY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// The longest a caller may ask a deploy to wait.
const MAX_DEPLOY_WAIT_SECS: u64 = 120;

/// Deploy a component as the next version of a kind
///
/// The component is checked at once — size, header, and its imports and exports against the
/// contract, without compiling — and refused with the offending import named. It then compiles
/// in the background: the answer is `201` with the new version if that is done within `wait`
/// seconds, or `202` with the deploy's state (and `Location`) to follow at
/// `GET /v1/kinds/{kind}/deploys/{id}`. Nothing is stored as a version until the component has
/// compiled and described itself, as the kind it is deployed as; then the new version is current
/// at once on every host. Running jobs stay on the version they started with. The deployment's
/// outbound rules, declared secrets and settings belong to this version.
#[utoipa::path(
    put,
    path = "/v1/kinds/{kind}",
    tag = "kinds",
    params(("kind" = String, Path, description = "The kind's name: 1-64 characters of a-z, 0-9, '-', '_' or '.'"), DeployQuery),
    request_body(
        description = "The component: a wasm32-wasip2 component of the spindle:job/job-kind world",
        content(("application/wasm"))
    ),
    responses(
        (status = 201, description = "The new version, compiled and current", body = Deployed),
        (status = 202, description = "Checked and compiling: the deploy's state", body = DeployView),
        (status = 400, description = "`invalid-request`: an invalid kind name", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 409, description = "`illegal-transition`: a lean record before the storage format gate reached 3", body = ErrorBody),
        (status = 413, description = "`payload-too-large`: over the host's component cap", body = ErrorBody),
        (status = 422, description = "`invalid-component`: `reason` is its `component.*` code", body = ErrorBody),
        (status = 429, description = "`quota-exceeded`: the tenant's deployed bytes would pass its limit", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`busy`: the tenant has a deploy compiling", body = ErrorBody)
    )
)]
pub(super) async fn deploy(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(kind): Path<String>,
    ApiQuery(query): ApiQuery<DeployQuery>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let deployment = match query.deployment.as_deref() {
        None => Deployment::default(),
        Some(text) => {
            let view: DeploymentView = super::body::strict_json(text.as_bytes(), "deployment")?;
            let settings: Vec<String> = view.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut deployment = Deployment::parse(&view.allow, &view.secrets, &settings, view.secrets_in_body)
                .map_err(|e| ApiError::invalid(e.to_string()))?;
            if view.max_running == Some(0) {
                return Err(ApiError::invalid("max_running must be at least 1 (leave it out for no limit)"));
            }
            deployment.max_running = view.max_running;
            if let Some(record) = &view.record {
                deployment.record = record.parse().map_err(ApiError::invalid)?;
            }
            deployment
        }
    };
    may_keep(&state, deployment.record)?;
    let wait = query.wait.map_or(DEPLOY_WAIT, |secs| std::time::Duration::from_secs(secs.min(MAX_DEPLOY_WAIT_SECS)));
    let bytes = body(bytes)?;
    let (registry, engine) = (state.host.registry.clone(), state.host.engine.clone());
    let accepted = registry.accept(&tenant, &kind, bytes.to_vec(), deployment, engine.now()).await?;
    let record = accepted.record.clone();
    // The compile goes on when this request is answered (or its client goes away).
    let (done, finished) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (record, result) = registry.complete(accepted, engine.now()).await;
        match &result {
            Ok((version, _)) => {
                tracing::info!(tenant = %record.tenant, kind = record.kind, version = version.version, digest = %version.digest, "deployed");
                engine.capacity().kind_redeployed(&record.tenant, &record.kind).await;
            }
            Err(e) => {
                tracing::info!(tenant = %record.tenant, kind = record.kind, code = e.code(), "a deploy failed: {e}")
            }
        }
        let _ = done.send((record, result));
    });
    let stale_after = state.host.registry.stale_after();
    match tokio::time::timeout(wait, finished).await {
        Ok(Ok((record, Ok((version, spec))))) => {
            let deploy = views::deploy_view(&record, state.host.engine.now(), stale_after);
            let deployed = Deployed {
                kind,
                version: version.version,
                digest: version.digest,
                spec: views::spec_view(&spec),
                deploy,
            };
            Ok((StatusCode::CREATED, Json(deployed)).into_response())
        }
        Ok(Ok((_, Err(e)))) => Err(e.into()),
        Ok(Err(_)) => Err(ApiError::internal("the deploy's compile task ended without an answer")),
        Err(_) => {
            let view = views::deploy_view(&record, state.host.engine.now(), stale_after);
            let location = format!("/v1/kinds/{kind}/deploys/{}", record.id);
            Ok((StatusCode::ACCEPTED, [(axum::http::header::LOCATION, location)], Json(view)).into_response())
        }
    }
}

/// How long a look at a deploy may wait for it to stop compiling.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DeployWaitQuery {
    /// Seconds to wait while it is `compiling` (default 0, at most 120).
    wait: Option<u64>,
}

/// How often a waiting look reads the deploy again (the compile may run on another host).
const DEPLOY_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// A deploy's state
///
/// Whether a component uploaded with `PUT /v1/kinds/{kind}` is still compiling, became a
/// version, or failed (and why). With `wait`, answers when it stops compiling or the wait is up.
#[utoipa::path(
    get,
    path = "/v1/kinds/{kind}/deploys/{id}",
    tag = "kinds",
    params(
        ("kind" = String, Path, description = "The kind's name"),
        ("id" = String, Path, description = "The deploy's id"),
        DeployWaitQuery
    ),
    responses(
        (status = 200, description = "The deploy", body = DeployView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found`: no such deploy of this tenant's kind", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn get_deploy(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path((kind, id)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<DeployWaitQuery>,
) -> Result<Json<DeployView>, ApiError> {
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_secs(query.wait.unwrap_or(0).min(MAX_DEPLOY_WAIT_SECS));
    loop {
        let record = state
            .host
            .registry
            .deploy_record(&tenant, &id)
            .await?
            .filter(|r| r.kind == kind)
            .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no such deploy"))?;
        let view = views::deploy_view(&record, state.host.engine.now(), state.host.registry.stale_after());
        if view.state != "compiling" || tokio::time::Instant::now() >= deadline {
            return Ok(Json(view));
        }
        tokio::time::sleep(DEPLOY_POLL).await;
    }
}

/// List the tenant's kinds
#[utoipa::path(
    get,
    path = "/v1/kinds",
    tag = "kinds",
    responses(
        (status = 200, description = "The tenant's kinds, without their versions", body = KindList),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn list_kinds(
    State(state): State<ApiState>,
    ReaderAuth { tenant, .. }: ReaderAuth,
) -> Result<Json<KindList>, ApiError> {
    let kinds = state.host.registry.kinds(&tenant).await?;
    let now = state.host.engine.now();
    let breakers = state.host.engine.capacity().breakers().of_tenant(&tenant, now);
    let stale_after = state.host.registry.stale_after();
    let compiling = state.host.registry.compiling(&tenant).await?;
    Ok(Json(KindList {
        kinds: kinds.iter().map(|k| views::with_breakers(views::kind_view(k, None), &breakers)).collect(),
        compiling: compiling
            .iter()
            .map(|r| views::deploy_view(r, now, stale_after))
            .filter(|d| d.state == "compiling")
            .collect(),
    }))
}

/// A kind and its versions
#[utoipa::path(
    get,
    path = "/v1/kinds/{kind}",
    tag = "kinds",
    params(("kind" = String, Path, description = "The kind's name")),
    responses(
        (status = 200, description = "The kind with every version", body = KindView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`unknown-kind`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn get_kind(
    State(state): State<ApiState>,
    ReaderAuth { tenant, .. }: ReaderAuth,
    Path(kind): Path<String>,
) -> Result<Json<KindView>, ApiError> {
    let kinds = state.host.registry.kinds(&tenant).await?;
    let entry = kinds
        .iter()
        .find(|k| k.kind == kind)
        .ok_or_else(|| ApiError::new(ErrorCode::UnknownKind, format!("unknown kind {kind:?}")))?;
    let versions = state.host.registry.versions(&tenant, &kind).await?;
    let now = state.host.engine.now();
    let breakers = state.host.engine.capacity().breakers().of_tenant(&tenant, now);
    let stale_after = state.host.registry.stale_after();
    let deploys = state.host.registry.deploy_records(&tenant, &kind).await?;
    let mut view = views::with_breakers(views::kind_view(entry, Some(&versions)), &breakers);
    view.deploys = deploys.iter().map(|r| views::deploy_view(r, now, stale_after)).collect();
    Ok(Json(view))
}

/// Make an earlier (or later) version current
///
/// New submissions use it at once; running jobs stay on theirs.
#[utoipa::path(
    post,
    path = "/v1/kinds/{kind}/rollback",
    tag = "kinds",
    params(("kind" = String, Path, description = "The kind's name")),
    request_body = Rollback,
    responses(
        (status = 200, description = "The version now current", body = RolledBack),
        (status = 400, description = "`invalid-request`: a malformed body", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`unknown-version` (also for an unknown kind)", body = ErrorBody),
        (status = 413, description = "`payload-too-large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn rollback(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(kind): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<RolledBack>, ApiError> {
    let request: Rollback = json_body(bytes)?;
    let now = state.host.engine.now();
    state.host.registry.set_current(&tenant, &kind, request.version, now).await?;
    let version = state.host.registry.version(&tenant, &kind, request.version).await?.version;
    Ok(Json(RolledBack { kind, current_version: request.version, version: VersionView::from(&version) }))
}
