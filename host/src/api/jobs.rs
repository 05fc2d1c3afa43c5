//! Jobs: submitting, reading, waiting for and listing them. Tenant token; another tenant's job
//! is not found.

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use spindle_core::policy::priority::Priority;
use spindle_core::{JobId, JobState};
use utoipa::IntoParams;

use super::body::{ApiQuery, job_id, json_body};
use super::time;
use super::views::{ErrorBody, JobPage, JobSummaryView, JobView, Submit};
use super::{ApiError, ApiState, TenantAuth};
use crate::engine::SubmitRequest;
use crate::store::{Inserted, JobFilter, TenantId};

/// Submit a job
///
/// The job is pinned to the kind's current version. A submission with the idempotency key of
/// an earlier one answers that job (200) instead of making another.
/// Longest a submission may be delayed by `delay_secs`: ten years.
const MAX_DELAY: Duration = Duration::from_secs(10 * 365 * 86_400);

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
        (status = 429, description = "`quota-exceeded`: the tenant's jobs queued or submission rate is at its limit (`reason` says which); nothing was queued; try again after `Retry-After` seconds", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn submit(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let request: Submit = json_body(bytes)?;
    let priority = match request.priority.as_deref() {
        None => Priority::Normal,
        Some(p) => Priority::parse(p)
            .ok_or_else(|| ApiError::invalid("priority is one of forced, critical, scheduled, normal, background"))?,
    };
    let now = state.host.engine.now();
    let run_at = match (&request.run_at, request.delay_secs) {
        (Some(_), Some(_)) => return Err(ApiError::invalid("give run_at or delay_secs, not both")),
        (Some(text), None) => Some(time::parse_rfc3339(text).ok_or_else(|| {
            ApiError::invalid("run_at: an RFC 3339 date-time such as 2026-11-30T12:00:00Z, years 0 to 9999")
        })?),
        (None, Some(secs)) => Some(now.plus(seconds("delay_secs", secs, MAX_DELAY)?)),
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
    Ok((status, Json(JobView::new(inserted.record(), None))))
}

/// A job with its steps, attempts, progress and history
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id (a UUID)")),
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
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let id = job_id(&id)?;
    let record = state.host.engine.job(&tenant, id).await?;
    let history = state.host.engine.history(&tenant, id).await?;
    let calls = state.host.engine.store().calls(id).await?;
    let mut view = JobView::new(&record, Some(&history));
    view.outbound = Some(calls.iter().map(Into::into).collect());
    Ok(Json(view))
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
    params(("id" = String, Path, description = "The job's id (a UUID)"), WaitQuery),
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
    let id = job_id(&id)?;
    // A longer wait is cut to the longest; a wait that is not a duration is refused.
    let timeout = seconds("timeout", query.timeout.unwrap_or(30.0), Duration::MAX)?.min(MAX_WAIT);
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
    /// Page size: 1 to 500, default 50.
    limit: Option<u32>,
    /// The `next_cursor` of the previous page.
    cursor: Option<i64>,
}

async fn list(state: &ApiState, tenant: &TenantId, query: ListQuery, dead: bool) -> Result<Json<JobPage>, ApiError> {
    let job_state = match query.state.as_deref() {
        None => None,
        Some(s) => Some(JobState::parse(s).ok_or_else(|| ApiError::invalid(format!("unknown state {s:?}")))?),
    };
    let parent = match query.parent.as_deref() {
        None => None,
        Some(id) => Some(id.parse::<JobId>().map_err(|_| ApiError::invalid(format!("parent {id:?} is not a job id")))?),
    };
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let filter =
        JobFilter { state: job_state, kind: query.kind, parent, dead_letters: dead, before_seq: query.cursor, limit };
    let records = state.host.engine.list_jobs(tenant, &filter).await?;
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
    TenantAuth(tenant): TenantAuth,
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
