//! Kinds: deploying components as versions, reading them, choosing the current one. Tenant
//! token; every call goes through the registry.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use serde::Deserialize;
use utoipa::IntoParams;

use super::body::{ApiQuery, body, json_body};
use super::views::{
    Deployed, DeploymentView, ErrorBody, KindList, KindView, Rollback, RolledBack, SpecView, VersionView,
};
use super::{ApiError, ApiState, ErrorCode, TenantAuth};
use crate::capabilities::Deployment;

/// What a deployment allows, declares and sets, beside the component.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DeployQuery {
    /// A `DeploymentView` as JSON: `{"allow": ["POST https://api.example.com/v1/*"],
    /// "secrets": ["stripe"], "settings": {"region": "eu"}, "secrets_in_body": false}`.
    deployment: Option<String>,
}

/// Deploy a component as the next version of a kind
///
/// The component is validated and compiled in the sandbox before anything is stored; the new
/// version is current at once on every host. Running jobs stay on the version they started with.
/// The deployment's outbound rules, declared secrets and settings belong to this version.
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
        (status = 201, description = "The new version", body = Deployed),
        (status = 400, description = "`invalid-request`: an invalid kind name", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 413, description = "`payload-too-large`: over the host's component cap", body = ErrorBody),
        (status = 422, description = "`invalid-component`: the message names its `component.*` code", body = ErrorBody),
        (status = 429, description = "`quota-exceeded`: the tenant's deployed bytes would pass its limit", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn deploy(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(kind): Path<String>,
    ApiQuery(query): ApiQuery<DeployQuery>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Deployed>), ApiError> {
    let deployment = match query.deployment.as_deref() {
        None => Deployment::default(),
        Some(text) => {
            let view: DeploymentView = serde_json::from_str(text)
                .map_err(|e| ApiError::invalid(format!("the deployment is not the expected JSON: {e}")))?;
            let settings: Vec<String> = view.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut deployment = Deployment::parse(&view.allow, &view.secrets, &settings, view.secrets_in_body)
                .map_err(|e| ApiError::invalid(e.to_string()))?;
            if view.max_running == Some(0) {
                return Err(ApiError::invalid("max_running must be at least 1 (leave it out for no limit)"));
            }
            deployment.max_running = view.max_running;
            deployment
        }
    };
    let bytes = body(bytes)?;
    let now = state.host.engine.now();
    let (version, spec) = state.host.registry.deploy_with(&tenant, &kind, &bytes, &deployment, now).await?;
    tracing::info!(tenant = %tenant, kind, version = version.version, digest = %version.digest, "deployed");
    state.host.engine.kind_redeployed(&tenant, &kind).await;
    let deployed = Deployed { kind, version: version.version, digest: version.digest, spec: SpecView::from(&spec) };
    Ok((StatusCode::CREATED, Json(deployed)))
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
    TenantAuth(tenant): TenantAuth,
) -> Result<Json<KindList>, ApiError> {
    let kinds = state.host.registry.kinds(&tenant).await?;
    let breakers = state.host.engine.breakers().of_tenant(&tenant, state.host.engine.now());
    Ok(Json(KindList { kinds: kinds.iter().map(|k| KindView::new(k, None).with_breakers(&breakers)).collect() }))
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
    TenantAuth(tenant): TenantAuth,
    Path(kind): Path<String>,
) -> Result<Json<KindView>, ApiError> {
    let kinds = state.host.registry.kinds(&tenant).await?;
    let entry = kinds
        .iter()
        .find(|k| k.kind == kind)
        .ok_or_else(|| ApiError::new(ErrorCode::UnknownKind, format!("unknown kind {kind:?}")))?;
    let versions = state.host.registry.versions(&tenant, &kind).await?;
    let breakers = state.host.engine.breakers().of_tenant(&tenant, state.host.engine.now());
    Ok(Json(KindView::new(entry, Some(&versions)).with_breakers(&breakers)))
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
