//! Run control: cancel, pause, resume, restart and retry a job. Each is an event the job's
//! machine may refuse: the answer is then `illegal-transition` with the refusal's own code as
//! `reason` and the job's state.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use serde::Deserialize;
use utoipa::IntoParams;

use super::body::{ApiQuery, json_body};
use super::jobs::resolve_job;
use super::views;
use super::views::{CancelBody, ErrorBody, JobView};
use super::{ApiError, ApiState, TenantAuth};
use crate::engine::Command;
use crate::engine::TenantId;

/// The acting token's name in history.
fn actor(tenant: &TenantId) -> String {
    format!("api:{tenant}")
}

async fn command(state: &ApiState, tenant: &TenantId, id: &str, command: Command) -> Result<Json<JobView>, ApiError> {
    let (id, _) = resolve_job(state, tenant, id).await?;
    let record = state.host.engine.operations().command(tenant, id, command, &actor(tenant)).await?;
    Ok(Json(views::job_view(&record, None)))
}

/// Cancel a job
///
/// Only kinds that allow it; the reason must be nonblank. A step in flight finishes first
/// (`cancel_requested` shows the request until then).
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/cancel",
    tag = "control",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it")),
    request_body = CancelBody,
    responses(
        (status = 200, description = "The job after the request", body = JobView),
        (status = 400, description = "`invalid-request`: a malformed body", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (
            status = 409,
            description = "`illegal-transition`: `reason` is the refusal (`finished`, `not-cancellable`, \
                `blank-reason`, …), `state` the job's state",
            body = ErrorBody
        ),
        (status = 413, description = "`payload-too-large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn cancel(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Json<JobView>, ApiError> {
    let request: CancelBody = json_body(bytes)?;
    command(&state, &tenant, &id, Command::Cancel { reason: request.reason }).await
}

/// Pause a job at its next step boundary
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/pause",
    tag = "control",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it")),
    responses(
        (status = 200, description = "The job after the request", body = JobView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (
            status = 409,
            description = "`illegal-transition`: `reason` is the refusal (`finished`, `already-paused`, …), \
                `state` the job's state",
            body = ErrorBody
        ),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn pause(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    command(&state, &tenant, &id, Command::Pause).await
}

/// Resume a paused job
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/resume",
    tag = "control",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it")),
    responses(
        (status = 200, description = "The job after the request", body = JobView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (
            status = 409,
            description = "`illegal-transition`: `reason` is the refusal (`not-paused`, `finished`, …), \
                `state` the job's state",
            body = ErrorBody
        ),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn resume(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    command(&state, &tenant, &id, Command::Resume).await
}

/// Start a fresh pass of a job
///
/// Waits for any pause or cancel, and for the step in flight (`restart_requested` shows it).
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/restart",
    tag = "control",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it")),
    responses(
        (status = 200, description = "The job after the request", body = JobView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (
            status = 409,
            description = "`illegal-transition`: `reason` is the refusal (`not-started`, `finished`, …), \
                `state` the job's state",
            body = ErrorBody
        ),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn restart(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    command(&state, &tenant, &id, Command::Restart).await
}

/// Which version a retry runs on.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RetryQuery {
    /// `true`: run the retry on the kind's current version (a fix deployed since the job
    /// ran), with that version's steps and rules and the input checked against its schema;
    /// completed steps of the same key are carried. Default: the version the job ran on.
    on_current: Option<bool>,
}

/// Retry a failed or cancelled job
///
/// The retry is a new job linked to this one (its `predecessor`); completed steps are carried
/// and not run again. It runs on the version the job ran on, or with `on_current=true` on the
/// kind's current version.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/retry",
    tag = "control",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it"), RetryQuery),
    responses(
        (status = 201, description = "The retry job", body = JobView),
        (status = 400, description = "`invalid-request`: a malformed query", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (
            status = 409,
            description = "`illegal-transition`: `reason` is the refusal (`not-retryable`, `already-retried`), \
                `state` the job's state",
            body = ErrorBody
        ),
        (
            status = 422,
            description = "`invalid-input`: with `on_current`, the job's input breaks the current version's schema",
            body = ErrorBody
        ),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn retry(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<RetryQuery>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let (id, _) = resolve_job(&state, &tenant, &id).await?;
    let command = if query.on_current.unwrap_or(false) { Command::RetryOnCurrent } else { Command::Retry };
    let failed = state.host.engine.operations().command(&tenant, id, command, &actor(&tenant)).await?;
    let successor = failed.job.successor.ok_or_else(|| ApiError::internal("retry recorded no successor"))?;
    let retry = state.host.engine.operations().job(&tenant, successor).await?;
    Ok((StatusCode::CREATED, Json(views::job_view(&retry, None))))
}
