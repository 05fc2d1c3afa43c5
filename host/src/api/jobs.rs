//! Jobs: submitting, reading, waiting for and listing them. Tenant token; another tenant's job
//! is not found.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use spindle_core::JobId;
use tracing::Instrument as _;
use utoipa::IntoParams;

use super::body::{ApiQuery, job_id, json_body};
use super::views;
use super::views::{Action, Actions, ErrorBody, JobPage, JobSelectionBody, JobSummaryView, JobView, Submit};
use super::{ApiError, ApiState, ReaderAuth, TenantAuth};
use crate::engine::Asked;
use crate::engine::{Inserted, JobFilter, TenantId};

/// Submit a job
///
/// The job is pinned to the kind's current version. A submission with the idempotency key of
/// an earlier one answers that job (200) instead of making another.
/// Longest `wait` holds a request.
const MAX_WAIT: Duration = Duration::from_secs(300);

/// `value` seconds of the request field `field`: a finite number from 0 to `max` (a
/// NaN, an infinity or a value past what a duration holds panicked the request task).
fn seconds(field: &str, value: f64, max: Duration) -> Result<Duration, ApiError> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|duration| *duration <= max)
        .ok_or_else(|| ApiError::invalid(format!("{field}: a number of seconds from 0 to {}", max.as_secs())))
}

#[utoipa::path(
    post,
    path = "/v1/jobs",
    tag = "jobs",
    request_body = Submit,
    responses(
        (status = 201, description = "The new job", body = JobView),
        (status = 200, description = "The job already submitted with this idempotency key", body = JobView),
        (status = 400, description = "`invalid-request`: a malformed body, time or lease key", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`unknown-kind`", body = ErrorBody),
        (status = 413, description = "`payload-too-large`: the body or the input is over its cap", body = ErrorBody),
        (status = 422, description = "`invalid-input`: the input does not follow the kind's input schema (`GET /v1/kinds/{kind}` shows it); `violations` lists each offending value's JSON pointer and message; nothing was queued", body = ErrorBody),
        (status = 429, description = "`quota-exceeded`: the tenant's jobs queued or submission rate is at its limit (`reason` says which); nothing was queued; try again after `Retry-After` seconds", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn submit(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    headers: axum::http::HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let request: Submit = json_body(bytes)?;
    let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let input = serde_json::to_vec(&request.input).map_err(ApiError::internal)?;
    let asked = Asked {
        priority: request.priority,
        run_at: request.run_at,
        delay_secs: request.delay_secs,
        idempotency_key: request.idempotency_key,
        lease_keys: request.lease_keys,
        traceparent: traceparent.clone(),
    };
    let submit = asked.request(request.kind, input, state.host.engine.now())?;
    let span = submit_span(&tenant, &submit.kind, traceparent.as_deref());
    let inserted = state.host.engine.submission().submit(&tenant, submit).instrument(span.clone()).await?;
    span.record("job", inserted.record().job.id.to_string());
    let status = if matches!(inserted, Inserted::Created(_)) { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(views::job_view(inserted.record(), None))))
}

/// The span of a submission, under the caller's `traceparent` when it sent one; none
/// unless the host exports spans.
fn submit_span(tenant: &TenantId, kind: &str, traceparent: Option<&str>) -> tracing::Span {
    if !crate::telemetry::enabled() {
        return tracing::Span::none();
    }
    let span =
        tracing::info_span!(target: "spindle::trace", "submit", tenant = %tenant, kind, job = tracing::field::Empty);
    if let Some(parent) = traceparent.filter(|p| crate::telemetry::is_traceparent(p)) {
        crate::telemetry::set_parent(&span, parent);
    }
    span
}

/// A job with its steps, attempts, progress and history
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it")),
    responses(
        (status = 200, description = "The job, with its history", body = JobView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn get_job(
    State(state): State<ApiState>,
    ReaderAuth { tenant, operator }: ReaderAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let (id, record) = resolve_job(&state, &tenant, &id).await?;
    let history = state.host.engine.operations().history(&tenant, id).await?;
    let calls = state.host.engine.operations().job_calls(&tenant, id).await?;
    let logs = state.host.engine.operations().job_logs(&tenant, id, None, i64::MAX, 1).await?;
    let mut view = views::job_view(&record, history.as_deref());
    view.outbound = Some(calls.iter().map(Into::into).collect());
    view.actions = Some(if operator { read_only() } else { actions(&state.host.engine.operations().actions(&record)) });
    view.logs_capped = Some(logs.dropped > 0);
    Ok(Json(view))
}

/// The job a path's id names, with its record: a job's own id, or an id `spindle.submit`
/// answered (the job it made, or why there is none), so every job route (read, wait,
/// events, logs, signal, run control) takes either.
pub(super) async fn resolve_job(
    state: &ApiState,
    tenant: &TenantId,
    text: &str,
) -> Result<(JobId, crate::store::JobRecord), ApiError> {
    let id = job_id(text)?;
    match state.host.engine.operations().job(tenant, id).await {
        Err(crate::engine::EngineError::NotFound) => {
            let job = submitted_job(state, tenant, text).await?;
            Ok((job, state.host.engine.operations().job(tenant, job).await?))
        }
        other => Ok((id, other?)),
    }
}

/// The job a SQL submission made, or the answer `POST /v1/jobs` would have given it
/// (its refusal), or `not-found` (no such submission, or not admitted yet).
async fn submitted_job(state: &ApiState, tenant: &TenantId, id: &str) -> Result<JobId, ApiError> {
    use super::ErrorCode;
    use crate::engine::{EngineError, SqlVerdict};
    let submission = state.host.engine.submission().sql_submission(tenant, id).await?;
    match submission.verdict {
        SqlVerdict::Admitted(job) => Ok(job),
        SqlVerdict::Queued => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("submission {id} is committed but not admitted yet (GET /v1/submissions/{id})"),
        )),
        SqlVerdict::Waiting { reason, .. } => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("submission {id} is committed and waits for its tenant's quota ({reason}); it will be admitted"),
        )),
        SqlVerdict::Refused { code, message, violations } => {
            let violations = violations.as_deref().and_then(|v| serde_json::from_str(v).ok());
            Err(match (code.as_str(), violations) {
                ("invalid-input", Some(violations)) => {
                    EngineError::InvalidInput { kind: submission.kind, index: None, violations }.into()
                }
                _ => ApiError::new(
                    ErrorCode::ALL.into_iter().find(|c| c.as_str() == code).unwrap_or(ErrorCode::InvalidRequest),
                    format!("submission {id} was refused: {message}"),
                ),
            })
        }
    }
}

/// The checks as the API shows them.
/// What an operator reading a tenant's job may do to it: nothing.
fn read_only() -> Actions {
    let refused = || Action {
        allowed: false,
        reason: Some("the operator reads a tenant's jobs; actions are the tenant's".into()),
    };
    Actions { cancel: refused(), pause: refused(), resume: refused(), restart: refused(), retry: refused() }
}

fn actions(checks: &crate::engine::CommandChecks) -> Actions {
    let action = |check: &Result<(), String>| Action { allowed: check.is_ok(), reason: check.clone().err() };
    Actions {
        cancel: action(&checks.cancel),
        pause: action(&checks.pause),
        resume: action(&checks.resume),
        restart: action(&checks.restart),
        retry: action(&checks.retry),
    }
}

/// How long `wait` may hold the request.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct WaitQuery {
    /// Seconds to wait at most: default 30, at most 300.
    timeout: Option<f64>,
}

/// Wait until the job is final, or the timeout passes
///
/// Answers the job as it is then, final or not.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/wait",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it"), WaitQuery),
    responses(
        (status = 200, description = "The job (without its history)", body = JobView),
        (status = 400, description = "`invalid-request`: a malformed query", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn wait_job(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<WaitQuery>,
) -> Result<Json<JobView>, ApiError> {
    let (id, _) = resolve_job(&state, &tenant, &id).await?;
    // A longer wait is cut to the longest; a wait that is not a duration is refused.
    let timeout = seconds("timeout", query.timeout.unwrap_or(30.0), Duration::MAX)?.min(MAX_WAIT);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut changes = state.host.engine.subscribe();
    loop {
        let record = state.host.engine.operations().job(&tenant, id).await?;
        if record.job.state.is_final() || tokio::time::Instant::now() >= deadline {
            return Ok(Json(views::job_view(&record, None)));
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

/// Which page of which jobs.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Only jobs in this state: pending, running, waiting, paused, succeeded, failed or
    /// cancelled.
    state: Option<String>,
    /// Only jobs of this kind.
    kind: Option<String>,
    /// Only children of this job.
    parent: Option<String>,
    /// Only jobs of this priority class: critical, scheduled, normal or background.
    priority: Option<String>,
    /// Only jobs submitted at or after this time (RFC 3339).
    created_after: Option<String>,
    /// Only jobs submitted before this time (RFC 3339).
    created_before: Option<String>,
    /// The job with this id, or the jobs whose idempotency key starts with this.
    q: Option<String>,
    /// Page size: 1 to 500, default 50.
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    cursor: Option<i64>,
}

async fn list(state: &ApiState, tenant: &TenantId, query: ListQuery, dead: bool) -> Result<Json<JobPage>, ApiError> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let cursor = query.cursor;
    let selection = super::bulk::selection(JobSelectionBody {
        state: query.state,
        kind: query.kind,
        parent: query.parent,
        priority: query.priority,
        created_after: query.created_after,
        created_before: query.created_before,
        q: query.q,
    })?;
    let filter = JobFilter { dead_letters: dead, ..selection.filter(cursor, limit) };
    let records = state.host.engine.operations().list_jobs(tenant, &filter).await?;
    let next_cursor = if records.len() == usize::try_from(limit).unwrap_or(usize::MAX) {
        records.last().map(|r| r.seq)
    } else {
        None
    };
    Ok(Json(JobPage { jobs: records.iter().map(JobSummaryView::from).collect(), next_cursor }))
}

/// List the tenant's jobs, newest first
#[utoipa::path(
    get,
    path = "/v1/jobs",
    tag = "jobs",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of jobs", body = JobPage),
        (status = 400, description = "`invalid-request`: an unknown state or a malformed query", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn list_jobs(
    State(state): State<ApiState>,
    ReaderAuth { tenant, .. }: ReaderAuth,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<JobPage>, ApiError> {
    list(&state, &tenant, query, false).await
}

/// Failed jobs not yet retried, newest first
#[utoipa::path(
    get,
    path = "/v1/dead-letters",
    tag = "jobs",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of jobs", body = JobPage),
        (status = 400, description = "`invalid-request`: an unknown state or a malformed query", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn dead_letters(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<JobPage>, ApiError> {
    list(&state, &tenant, query, true).await
}
