//! The tenant's queues at a glance — open jobs by kind, priority class and where each
//! waits, steps running over the last hour — and bulk work on its dead letters: a retry
//! of every one a filter matches, run in the background and kept as an audit trail.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use serde::Deserialize;
use utoipa::IntoParams;

use super::body::{ApiQuery, json_body};
use super::time::{parse_rfc3339, rfc3339};
use super::views::{
    DeadLetterCount, DeadLetterRetry, ErrorBody, OperationList, OperationStarted, OperationView, QueueDepthView,
    Queues, RunningSample,
};
use super::{ApiError, ApiState, ErrorCode, TenantAuth};
use crate::engine::DeadLetterFilter;

/// The tenant's queues
///
/// Its open jobs by kind and priority class, by where each waits (`ready`, `delayed`: for a
/// time, a backoff or a snooze; `blocked`: on a lease key, a running limit or a breaker;
/// `waiting`: for children or a signal; `running`; `paused`), and the steps it had running over
/// the last hour, counted every 10 s by the host answering (on every host sharing the
/// database).
#[utoipa::path(
    get,
    path = "/v1/queues",
    tag = "jobs",
    responses(
        (status = 200, description = "Depth and running steps", body = Queues),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn queues(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
) -> Result<Json<Queues>, ApiError> {
    let depth = state.host.engine.capacity().queue_depth(&tenant).await?;
    let running = state.host.engine.capacity().running_over_time(&tenant);
    Ok(Json(Queues {
        depth: depth.iter().map(QueueDepthView::from).collect(),
        running_over_time: running
            .iter()
            .map(|(at, running)| RunningSample { at: rfc3339(*at), running: *running })
            .collect(),
    }))
}

/// Retry the dead letters a filter matches
///
/// Every failed job of the tenant not yet retried that the filter matches (all of them
/// without one) is retried as a new, linked job, in the background; the answer is the
/// operation, whose progress `GET /v1/operations/{id}` follows. Jobs retried meanwhile by
/// other means are counted as skipped.
#[utoipa::path(
    post,
    path = "/v1/dead-letters/retry",
    tag = "jobs",
    request_body = DeadLetterRetry,
    responses(
        (status = 202, description = "The operation, started", body = OperationStarted),
        (status = 400, description = "`invalid-request`: a malformed body or time", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn retry_dead_letters(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<OperationStarted>), ApiError> {
    let request: DeadLetterRetry = json_body(bytes)?;
    let filter = dead_letter_filter(request)?;
    let operation =
        state.host.engine.operations().retry_dead_letters(&tenant, filter, &format!("api:{tenant}")).await?;
    Ok((StatusCode::ACCEPTED, Json(OperationStarted { operation: OperationView::from(&operation) })))
}

/// The filter a request names: blank fields match everything.
fn dead_letter_filter(request: DeadLetterRetry) -> Result<DeadLetterFilter, ApiError> {
    let failed_before =
        match request.failed_before.as_deref().filter(|t| !t.is_empty()) {
            None => None,
            Some(text) => Some(parse_rfc3339(text).ok_or_else(|| {
                ApiError::invalid("failed_before: an RFC 3339 date-time such as 2026-11-30T12:00:00Z")
            })?),
        };
    Ok(DeadLetterFilter {
        kind: request.kind.filter(|k| !k.is_empty()),
        failure_code: request.failure_code.filter(|c| !c.is_empty()),
        failed_before,
    })
}

/// Count the dead letters a retry would take
///
/// How many of the tenant's dead letters the same filter as `POST /v1/dead-letters/retry`
/// matches now, counted up to 10,000 (`capped` says the count stopped there): what a bulk
/// retry asks its user to confirm.
#[utoipa::path(
    get,
    path = "/v1/dead-letters/count",
    tag = "jobs",
    params(DeadLetterCountQuery),
    responses(
        (status = 200, description = "How many match", body = DeadLetterCount),
        (status = 400, description = "`invalid-request`: a malformed query or time", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn count_dead_letters(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    ApiQuery(query): ApiQuery<DeadLetterCountQuery>,
) -> Result<Json<DeadLetterCount>, ApiError> {
    let request =
        DeadLetterRetry { kind: query.kind, failure_code: query.failure_code, failed_before: query.failed_before };
    let filter = dead_letter_filter(request)?;
    let count = state.host.engine.operations().count_dead_letters(&tenant, &filter).await?;
    Ok(Json(DeadLetterCount { matching: count.matching, capped: count.capped }))
}

/// Which dead letters to count: the fields of a retry's filter.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DeadLetterCountQuery {
    /// Only this kind's.
    kind: Option<String>,
    /// Only those that failed with this code.
    failure_code: Option<String>,
    /// Only those that failed before this time (RFC 3339).
    failed_before: Option<String>,
}

/// The tenant's audit trail, newest first
///
/// What was done in bulk, with what filter, by whom and how it went; the operator's reads
/// of the tenant's jobs (with their queries); tokens the operator minted or revoked for the
/// tenant, and every use of one it minted. A page at a time (`limit`, default 100, at most
/// 1,000), the next one from `next_cursor`; filtered by `actor`, `action` and time
/// (`since`, `until`, RFC 3339), so no flood of entries hides an earlier one.
#[utoipa::path(
    get,
    path = "/v1/operations",
    tag = "jobs",
    params(OperationsQuery),
    responses(
        (status = 200, description = "A page of the trail", body = OperationList),
        (status = 400, description = "`invalid-request`: a malformed time, cursor or limit", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn list_operations(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    ApiQuery(query): ApiQuery<OperationsQuery>,
) -> Result<Json<OperationList>, ApiError> {
    let time = |field: &str, text: Option<&str>| {
        text.map(|t| parse_rfc3339(t).ok_or_else(|| ApiError::invalid(format!("{field}: an RFC 3339 date-time"))))
            .transpose()
    };
    let after = match query.cursor.as_deref() {
        None => None,
        Some(cursor) => Some(
            cursor
                .split_once(':')
                .and_then(|(at, id)| Some((spindle_core::Timestamp::from_micros(at.parse().ok()?), id.to_owned())))
                .ok_or_else(|| ApiError::invalid("cursor: as a page's next_cursor gave it"))?,
        ),
    };
    let limit = query.limit.unwrap_or(100);
    if !(1..=1_000).contains(&limit) {
        return Err(ApiError::invalid("limit: 1 to 1000"));
    }
    let blank = |text: Option<String>| text.filter(|t| !t.trim().is_empty());
    let filter = crate::engine::OperationQuery {
        actor: blank(query.actor),
        action: blank(query.action),
        since: time("since", query.since.as_deref())?,
        until: time("until", query.until.as_deref())?,
        after,
        limit: limit + 1,
    };
    let mut operations = state.host.engine.operations().list_operations(&tenant, &filter).await?;
    let more = operations.len() > limit as usize;
    operations.truncate(limit as usize);
    let next_cursor =
        more.then(|| operations.last().map(|o| format!("{}:{}", o.created_at.as_micros(), o.id))).flatten();
    Ok(Json(OperationList { operations: operations.iter().map(OperationView::from).collect(), next_cursor }))
}

/// Which entries of the audit trail.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct OperationsQuery {
    /// Entries at most (default 100, at most 1,000).
    limit: Option<u32>,
    /// The page after the one that answered this `next_cursor`.
    cursor: Option<String>,
    /// Only this actor's: `operator`, `api:<tenant>`, `operator-token:<token id>`, ….
    actor: Option<String>,
    /// Only this kind of entry: `cancel-jobs`, `retry-jobs`, `retry-dead-letters`,
    /// `operator-read`, `token-minted`, `token-revoked`, `operator-token-use`.
    action: Option<String>,
    /// Only entries made at or after this time (RFC 3339).
    since: Option<String>,
    /// Only entries made before this time (RFC 3339).
    until: Option<String>,
}

/// A bulk operation
#[utoipa::path(
    get,
    path = "/v1/operations/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "The operation's id")),
    responses(
        (status = 200, description = "The operation", body = OperationView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's)", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn get_operation(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<OperationView>, ApiError> {
    let operation = state.host.engine.operations().operation(&tenant, &id).await.map_err(|e| match e {
        crate::engine::EngineError::NotFound => ApiError::new(ErrorCode::NotFound, "no such operation"),
        other => other.into(),
    })?;
    Ok(Json(OperationView::from(&operation)))
}
