//! Workflows: signals sent to jobs, and cron schedules.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::body::{body, json_body};
use super::jobs::resolve_job;
use super::views;
use super::views::{ErrorBody, JobView};
use super::{ApiError, ApiState, TenantAuth};
use crate::api::time::rfc3339;
use crate::engine::ScheduleRequest;
use crate::engine::ScheduleRow;

/// Send a signal to a job
///
/// The body (JSON by convention, at most the input limit) is kept with the job and
/// delivered, oldest first and each once, to a step that awaits a signal of this name —
/// now if one waits, otherwise when one does. Storing it and telling the job are one
/// transaction. With an `Idempotency-Key` header, a signal already sent to the job under
/// that key is not sent again: the answer is the same `202`, with the job as it now is
/// and the header `Idempotent-Replayed: true`, so a client that got no answer can send
/// again safely. A finished job refuses a new signal.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/signals/{name}",
    tag = "jobs",
    params(
        ("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it"),
        ("name" = String, Path, description = "The signal's name: 1-128 letters, digits, '-', '_', '.', ':'"),
        ("Idempotency-Key" = Option<String>, Header, description = "1-255 printable ASCII characters: one delivery per key and job")
    ),
    request_body(content = String, description = "The signal's body", content_type = "application/json"),
    responses(
        (status = 202, description = "Kept (or kept already under this key: `Idempotent-Replayed: true`); the job as it now is", body = JobView),
        (status = 400, description = "`invalid-request`: a malformed name or key", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (
            status = 409,
            description = "`illegal-transition` with reason `finished`: the job is final",
            body = ErrorBody
        ),
        (status = 413, description = "`payload-too-large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn send_signal(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path((id, name)): Path<(String, String)>,
    headers: HeaderMap,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, [(&'static str, &'static str); 1], Json<JobView>), ApiError> {
    let (id, _) = resolve_job(&state, &tenant, &id).await?;
    let body = body(bytes)?;
    let key = match headers.get("idempotency-key").map(|v| v.to_str()) {
        None => None,
        Some(Ok(key)) => Some(key),
        Some(Err(_)) => {
            return Err(crate::engine::EngineError::Invalid("idempotency key: printable ASCII only".into()).into());
        }
    };
    let sent = state.host.engine.workflows().signal(&tenant, id, &name, body.to_vec(), key).await?;
    let replayed = if sent.repeated { "true" } else { "false" };
    Ok((StatusCode::ACCEPTED, [("idempotent-replayed", replayed)], Json(views::job_view(&sent.record, None))))
}

/// A cron schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScheduleView {
    /// Its name.
    pub name: String,
    /// The kind each firing submits.
    pub kind: String,
    /// The cron expression.
    pub cron: String,
    /// The time zone it is read in.
    pub timezone: String,
    /// Each firing's input.
    pub input: serde_json::Value,
    /// `none`, `one` or `all`.
    pub catch_up: String,
    /// `skip` or `allow`.
    pub overlap: String,
    /// Whether it is paused.
    pub paused: bool,
    /// When it fires next.
    pub next_fire_at: String,
    /// Its next times, from `next_fire_at` (at most five; none while it is paused:
    /// resumed, it fires from its first time after then).
    #[serde(default)]
    pub upcoming: Vec<String>,
    /// When it last fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fired_at: Option<String>,
    /// The job its last firing submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_job: Option<String>,
    /// Firings so far.
    pub fired: i64,
}

/// How many of a schedule's next times its view lists.
const UPCOMING: usize = 5;

impl From<&ScheduleRow> for ScheduleView {
    fn from(s: &ScheduleRow) -> Self {
        let active = s.machine.state == spindle_core::schedule::ScheduleState::Active;
        let upcoming = match spindle_core::schedule::CronPlan::parse(&s.cron, &s.timezone) {
            Ok(plan) if active => std::iter::successors(Some(s.machine.next_fire_at), |t| plan.next_after(*t))
                .take(UPCOMING)
                .map(rfc3339)
                .collect(),
            _ => Vec::new(),
        };
        Self {
            upcoming,
            name: s.name.clone(),
            kind: s.kind.clone(),
            cron: s.cron.clone(),
            timezone: s.timezone.clone(),
            input: serde_json::from_slice(&s.input).unwrap_or_default(),
            catch_up: s.machine.catch_up.as_str().to_owned(),
            overlap: s.machine.overlap.as_str().to_owned(),
            paused: s.machine.state == spindle_core::schedule::ScheduleState::Paused,
            next_fire_at: rfc3339(s.machine.next_fire_at),
            last_fired_at: s.machine.last_fired_at.map(rfc3339),
            last_job: s.machine.last_job.map(|id| id.to_string()),
            fired: i64::try_from(s.machine.fired).unwrap_or(i64::MAX),
        }
    }
}

/// A new schedule.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    /// Its name: 1-64 letters, digits, '-', '_' or '.', unique in the tenant.
    pub name: String,
    /// The kind each firing submits.
    pub kind: String,
    /// Five fields (minute hour day month weekday), or six with seconds first.
    pub cron: String,
    /// An IANA time zone (default `UTC`).
    pub timezone: Option<String>,
    /// Each firing's input (JSON; default null).
    pub input: Option<serde_json::Value>,
    /// Times missed by over a minute: `none` (default: skipped), `one` (the latest
    /// fires), `all` (every one fires). On-time times always fire.
    pub catch_up: Option<String>,
    /// `skip` (default: nothing fires while the last firing's job is open) or `allow`.
    pub overlap: Option<String>,
}

/// A tenant's schedules.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ScheduleList {
    /// By name.
    pub schedules: Vec<ScheduleView>,
}

/// Create a schedule
///
/// Each firing submits a job of `kind` at priority `scheduled` with the idempotency key
/// `schedule:NAME:MICROS` (its cron time, a whole second), so no time fires twice,
/// whichever host fires it. Times follow the expression in its zone, daylight saving
/// included, as `docs/state-machines.md` describes.
#[utoipa::path(
    post,
    path = "/v1/schedules",
    tag = "schedules",
    request_body = NewSchedule,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 400, description = "`invalid-request`: a bad expression, zone or name", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`unknown-kind`", body = ErrorBody),
        (status = 409, description = "`already-exists`", body = ErrorBody),
        (status = 422, description = "`invalid-input`: the input does not follow the kind's input schema; `violations` says where", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn create_schedule(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<ScheduleView>), ApiError> {
    let new: NewSchedule = json_body(bytes)?;
    let request = ScheduleRequest {
        name: new.name,
        kind: new.kind,
        cron: new.cron,
        timezone: new.timezone.unwrap_or_else(|| "UTC".into()),
        input: new.input.unwrap_or_default(),
        catch_up: new.catch_up.unwrap_or_else(|| "none".into()),
        overlap: new.overlap.unwrap_or_else(|| "skip".into()),
    };
    let row = state.host.engine.workflows().create_schedule(&tenant, request).await?;
    Ok((StatusCode::CREATED, Json(ScheduleView::from(&row))))
}

/// List schedules
#[utoipa::path(
    get,
    path = "/v1/schedules",
    tag = "schedules",
    responses(
        (status = 200, description = "The tenant's schedules", body = ScheduleList),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn list_schedules(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
) -> Result<Json<ScheduleList>, ApiError> {
    let rows = state.host.engine.workflows().schedules(&tenant).await?;
    Ok(Json(ScheduleList { schedules: rows.iter().map(ScheduleView::from).collect() }))
}

/// A schedule
#[utoipa::path(
    get,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 200, description = "The schedule", body = ScheduleView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn get_schedule(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    let row = state.host.engine.workflows().schedule(&tenant, &name).await?;
    Ok(Json(ScheduleView::from(&row)))
}

/// Delete a schedule
#[utoipa::path(
    delete,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 204, description = "Deleted; jobs it fired are untouched"),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn delete_schedule(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.host.engine.workflows().delete_schedule(&tenant, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pause a schedule
#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/pause",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 200, description = "The schedule, paused", body = ScheduleView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn pause_schedule(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    let row = state.host.engine.workflows().pause_schedule(&tenant, &name).await?;
    Ok(Json(ScheduleView::from(&row)))
}

/// Fire a schedule now
///
/// Submits the job a firing at this second submits — the schedule's kind and input, at
/// priority `scheduled`, with the firing's idempotency key `schedule:NAME:MICROS` — and
/// records it as the schedule's last firing, active or paused, whatever its overlap rule.
/// Its next cron time does not move.
#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/trigger",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 201, description = "The job it submitted", body = JobView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 404, description = "`not-found`, or `unknown-kind`: its kind is gone", body = ErrorBody),
        (status = 422, description = "`invalid-input`: its input no longer follows the kind's schema", body = ErrorBody),
        (status = 429, description = "`quota-exceeded`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn trigger_schedule(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<JobView>), ApiError> {
    let (job, _) = state.host.engine.workflows().trigger_schedule(&tenant, &name).await?;
    Ok((StatusCode::CREATED, Json(views::job_view(&job, None))))
}

/// Resume a schedule
///
/// It fires next at its next time after now; times passed while it was paused are skipped.
#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/resume",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 200, description = "The schedule, running", body = ScheduleView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 404, description = "`not-found`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn resume_schedule(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView>, ApiError> {
    let row = state.host.engine.workflows().resume_schedule(&tenant, &name).await?;
    Ok(Json(ScheduleView::from(&row)))
}
