//! A job as it runs: its logs (what its steps' guests logged and printed, per attempt)
//! and its events (history entries and state changes), each read whole or followed live
//! as server-sent events. Tenant token; another tenant's job is not found.
//!
//! Following reads the store again whenever this host changes the job and at least every
//! [`POLL`] (another host may be running it), so it holds on PostgreSQL with many hosts;
//! it ends once the job is final and everything it wrote has been sent.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use spindle_core::JobId;
use utoipa::IntoParams;

use super::body::ApiQuery;
use super::jobs::resolve_job;
use super::views::{ErrorBody, HistoryEntryView, JobLive, LogLineView, LogPage};
use super::{ApiError, ApiState, ReaderAuth};
use crate::engine::TenantId;

/// Longest a follower waits between two reads of the store.
const POLL: Duration = Duration::from_millis(250);
/// Lines one read answers.
const PAGE: u32 = 1_000;

/// Which of a job's log lines.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct LogQuery {
    /// Only this step's lines.
    step: Option<String>,
    /// Stream the lines as server-sent events (`line`, then `end` once the job is final)
    /// instead of answering those written so far.
    follow: Option<bool>,
    /// Only lines after this `seq` (what the last line seen carried).
    after: Option<i64>,
}

/// A job's logs
///
/// What its steps' guests logged (`log`) and printed (stdout, stderr), per step attempt, in
/// order; `capped` says the job reached its log cap (5,000 lines or 1 MiB by default), past
/// which lines are counted (`dropped`), not kept. Kept as long as the job is. With
/// `follow=true`, server-sent events: `line` (one line's JSON) as each is written, `end` once
/// the job is final and every line was sent.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/logs",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it"), LogQuery),
    responses(
        (status = 200, description = "The lines (or, with `follow`, `text/event-stream`)", body = LogPage),
        (status = 400, description = "`invalid-request`: a malformed query", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn logs(
    State(state): State<ApiState>,
    ReaderAuth { tenant, .. }: ReaderAuth,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<LogQuery>,
) -> Result<Response, ApiError> {
    let (id, _) = resolve_job(&state, &tenant, &id).await?;
    let after = query.after.unwrap_or(0);
    if query.follow.unwrap_or(false) {
        let stream = follow_logs(state, tenant, id, query.step, after);
        return Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response());
    }
    let mut page = LogPage { lines: Vec::new(), capped: false, dropped: 0 };
    let mut after = after;
    loop {
        let logs = state.host.engine.operations().job_logs(&tenant, id, query.step.as_deref(), after, PAGE).await?;
        page.dropped = logs.dropped;
        page.capped = logs.dropped > 0;
        let full = logs.lines.len() == PAGE as usize;
        after = logs.lines.last().map_or(after, |l| l.seq);
        page.lines.extend(logs.lines.iter().map(LogLineView::from));
        if !full {
            return Ok(Json(page).into_response());
        }
    }
}

/// The lines of `id` after `after` as they are written, then `end`.
fn follow_logs(
    state: ApiState,
    tenant: TenantId,
    id: JobId,
    step: Option<String>,
    after: i64,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let changes = state.host.engine.subscribe();
    let start = Follow { state, tenant, id, changes, after, first: true, pending: Vec::new(), done: false };
    stream::unfold(start, move |mut f| {
        let step = step.clone();
        async move {
            loop {
                if let Some(event) = f.pending.pop() {
                    return Some((Ok(event), f));
                }
                if f.done {
                    return None;
                }
                if !f.first {
                    f.wait().await;
                }
                f.first = false;
                // Final before the read: every line it wrote is then in this read.
                let final_now = match f.state.host.engine.operations().job(&f.tenant, f.id).await {
                    Ok(record) => record.job.state.is_final(),
                    Err(_) => true,
                };
                match f.state.host.engine.operations().job_logs(&f.tenant, f.id, step.as_deref(), f.after, PAGE).await {
                    Ok(logs) => {
                        let full = logs.lines.len() == PAGE as usize;
                        f.after = logs.lines.last().map_or(f.after, |l| l.seq);
                        let mut events: Vec<Event> =
                            logs.lines.iter().map(|l| json_event("line", &LogLineView::from(l))).collect();
                        if final_now && !full {
                            events.push(Event::default().event("end").data("{}"));
                            f.done = true;
                        }
                        events.reverse();
                        f.pending = events;
                        f.first = full;
                    }
                    Err(e) => {
                        tracing::warn!(job = %f.id, error = %e, "following a job's logs failed");
                        return None;
                    }
                }
            }
        }
    })
}

/// A follower's place.
struct Follow {
    state: ApiState,
    tenant: TenantId,
    id: JobId,
    changes: tokio::sync::broadcast::Receiver<crate::engine::StateChange>,
    /// The last line (or history entry) sent.
    after: i64,
    /// Read again at once, without waiting (the first read, a full page).
    first: bool,
    /// Events to send, last first.
    pending: Vec<Event>,
    done: bool,
}

impl Follow {
    /// Until this host changes the job, or [`POLL`] passes.
    async fn wait(&mut self) {
        let id = self.id;
        let changes = &mut self.changes;
        let woken = async {
            loop {
                match changes.recv().await {
                    Ok(change) if change.job == id => return,
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let _ = tokio::time::timeout(POLL, woken).await;
    }
}

fn json_event(name: &str, value: &impl serde::Serialize) -> Event {
    Event::default().event(name).data(serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned()))
}

/// A job's events, live
///
/// Server-sent events: `history` (one history entry, as `GET /v1/jobs/{id}` lists them) for
/// every entry written, from the first; `job` (`{state, progress}`) whenever either changes;
/// `end` once the job is final and every entry was sent. A lean kind's job (`record: lean`)
/// keeps no history: its stream is `job` events and `end`.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}/events",
    tag = "jobs",
    params(("id" = String, Path, description = "The job's id (a UUID), or the id `spindle.submit` answered for it")),
    responses(
        (status = 200, description = "`text/event-stream`", body = JobLive),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 404, description = "`not-found` (also another tenant's job)", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn events(
    State(state): State<ApiState>,
    ReaderAuth { tenant, .. }: ReaderAuth,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let (id, _) = resolve_job(&state, &tenant, &id).await?;
    let changes = state.host.engine.subscribe();
    let start = (Follow { state, tenant, id, changes, after: 0, first: true, pending: Vec::new(), done: false }, None);
    let stream = stream::unfold(start, |(mut f, mut last): (Follow, Option<JobLive>)| async move {
        loop {
            if let Some(event) = f.pending.pop() {
                return Some((Ok(event), (f, last)));
            }
            if f.done {
                return None;
            }
            if !f.first {
                f.wait().await;
            }
            f.first = false;
            let record = match f.state.host.engine.operations().job(&f.tenant, f.id).await {
                Ok(record) => record,
                Err(_) => return None,
            };
            // A lean job has no history: its stream is its state changes.
            let history = match f.state.host.engine.operations().history(&f.tenant, f.id).await {
                Ok(history) => history.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(job = %f.id, error = %e, "following a job's events failed");
                    return None;
                }
            };
            let mut events: Vec<Event> = history
                .iter()
                .filter(|entry| entry.id > f.after)
                .map(|entry| json_event("history", &HistoryEntryView::from(entry)))
                .collect();
            f.after = history.last().map_or(f.after, |entry| entry.id);
            let now = JobLive { state: record.job.state.as_str().to_owned(), progress: record.job.progress };
            if last.as_ref() != Some(&now) {
                events.push(json_event("job", &now));
                last = Some(now);
            }
            if record.job.state.is_final() {
                events.push(Event::default().event("end").data("{}"));
                f.done = true;
            }
            events.reverse();
            f.pending = events;
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
