//! Jobs in number: the tenant's jobs counted per state and kind (beside the dashboard's
//! filters, bounded however many jobs are kept), and a cancel or retry of every job a
//! listing's filter matches — counted first, so its user confirms a number, then carried
//! out in the background as an audited operation like the dead-letter retry.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::Deserialize;
use spindle_core::policy::priority::Priority;
use spindle_core::table::DiagramState;
use spindle_core::{JobId, JobState};
use utoipa::IntoParams;

use super::body::{ApiQuery, json_body};
use super::time::parse_rfc3339;
use super::views::{
    ErrorBody, JobBulk, JobCount, JobCounts, JobSelectionBody, KindCounts, OperationStarted, OperationView, StateCount,
};
use super::{ApiError, ApiState, ReaderAuth, TenantAuth};
use crate::engine::{BulkAction, JobSelection, STATE_COUNT_CAP};

/// The listing filters a request names, parsed; blank fields match everything.
pub(super) fn selection(body: JobSelectionBody) -> Result<JobSelection, ApiError> {
    let blank = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let time = |field: &str, text: Option<String>| match blank(text) {
        None => Ok(None),
        Some(text) => parse_rfc3339(&text)
            .map(Some)
            .ok_or_else(|| ApiError::invalid(format!("{field}: an RFC 3339 date-time such as 2026-11-30T12:00:00Z"))),
    };
    let state = match blank(body.state) {
        None => None,
        Some(s) => Some(JobState::parse(&s).ok_or_else(|| ApiError::invalid(format!("unknown state {s:?}")))?),
    };
    let parent = match blank(body.parent) {
        None => None,
        Some(id) => Some(id.parse::<JobId>().map_err(|_| ApiError::invalid(format!("parent {id:?} is not a job id")))?),
    };
    let priority = match blank(body.priority) {
        None => None,
        Some(p) => Some(Priority::parse(&p).ok_or_else(|| ApiError::invalid(format!("unknown priority {p:?}")))?),
    };
    Ok(JobSelection {
        state,
        kind: blank(body.kind),
        parent,
        priority,
        created_after: time("created_after", body.created_after)?,
        created_before: time("created_before", body.created_before)?,
        text: blank(body.q),
        through: None,
    })
}

/// Which jobs: the job listing's filters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct SelectionQuery {
    /// Only jobs in this state.
    state: Option<String>,
    /// Only jobs of this kind.
    kind: Option<String>,
    /// Only children of this job.
    parent: Option<String>,
    /// Only jobs of this priority class.
    priority: Option<String>,
    /// Only jobs submitted at or after this time (RFC 3339).
    created_after: Option<String>,
    /// Only jobs submitted before this time (RFC 3339).
    created_before: Option<String>,
    /// The job with this id, or the jobs whose idempotency key starts with this.
    q: Option<String>,
    /// The count only: the action to be confirmed (`cancel`, the default, or `retry`),
    /// whose skips the count says (`skipping`).
    action: Option<String>,
}

impl From<SelectionQuery> for JobSelectionBody {
    fn from(q: SelectionQuery) -> Self {
        Self {
            state: q.state,
            kind: q.kind,
            parent: q.parent,
            priority: q.priority,
            created_after: q.created_after,
            created_before: q.created_before,
            q: q.q,
        }
    }
}

/// Whose jobs to count.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct CountsQuery {
    /// Only this kind's jobs, counted from its newest 100,000: exact below that, `capped`
    /// (at least) once it has that many.
    kind: Option<String>,
}

/// The tenant's jobs per state and per kind
///
/// Each state's count reads at most `cap` jobs (100,000), so the answer costs the same at a
/// million jobs as at a thousand; a state with more says `capped` (at least this many).
/// The per-kind figures of a capped state come from the jobs it read, so each kind says
/// `capped` there (at least; a kind the read missed shows 0, capped): `?kind=` counts one
/// kind from its own jobs instead.
#[utoipa::path(
    get,
    path = "/v1/jobs/counts",
    tag = "jobs",
    params(CountsQuery),
    responses(
        (status = 200, description = "Counts per state and kind", body = JobCounts),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn counts(
    State(state): State<ApiState>,
    ReaderAuth { tenant, .. }: ReaderAuth,
    ApiQuery(query): ApiQuery<CountsQuery>,
) -> Result<Json<JobCounts>, ApiError> {
    if let Some(kind) = query.kind.filter(|k| !k.trim().is_empty()) {
        let rows = state.host.engine.operations().kind_job_counts(&tenant, &kind).await?;
        return Ok(Json(kind_counts(&kind, &rows, STATE_COUNT_CAP)));
    }
    let rows = state.host.engine.operations().job_counts(&tenant).await?;
    Ok(Json(job_counts(&rows, STATE_COUNT_CAP)))
}

/// One kind's counts from `(state, count)` rows of its newest `cap` jobs: every state
/// says `capped` once the kind's jobs read reached `cap`, since older ones went unread.
fn kind_counts(kind: &str, rows: &[(JobState, u64)], cap: u64) -> JobCounts {
    let capped = rows.iter().map(|(_, n)| n).sum::<u64>() >= cap;
    let states: Vec<StateCount> = <JobState as DiagramState>::all()
        .iter()
        .map(|&s| {
            let n = rows.iter().filter(|(state, _)| *state == s).map(|(_, n)| n).sum();
            StateCount { state: s.as_str().to_owned(), count: n, capped }
        })
        .collect();
    let mine = states.iter().filter(|c| c.count > 0 || capped).cloned().collect();
    JobCounts { states, kinds: vec![KindCounts { kind: kind.to_owned(), states: mine }], cap }
}

/// The counts' body from `(state, kind, count)` rows, each state read up to `cap`.
fn job_counts(rows: &[(JobState, String, u64)], cap: u64) -> JobCounts {
    let count =
        |state: JobState, n: u64, capped: bool| StateCount { state: state.as_str().to_owned(), count: n, capped };
    let states = <JobState as DiagramState>::all()
        .iter()
        .map(|&s| {
            let n: u64 = rows.iter().filter(|(state, ..)| *state == s).map(|(.., n)| n).sum();
            count(s, n, n >= cap)
        })
        .collect::<Vec<_>>();
    let mut kinds: Vec<KindCounts> = Vec::new();
    for (s, kind, n) in rows {
        let capped = states.iter().any(|c| c.state == s.as_str() && c.capped);
        match kinds.iter_mut().find(|k| &k.kind == kind) {
            Some(k) => k.states.push(count(*s, *n, capped)),
            None => kinds.push(KindCounts { kind: kind.clone(), states: vec![count(*s, *n, capped)] }),
        }
    }
    // A capped state's read may have missed a kind: it says `capped` (at least 0), not 0.
    for capped in states.iter().filter(|c| c.capped) {
        for k in &mut kinds {
            if !k.states.iter().any(|c| c.state == capped.state) {
                k.states.push(StateCount { state: capped.state.clone(), count: 0, capped: true });
            }
        }
    }
    kinds.sort_by(|a, b| a.kind.cmp(&b.kind));
    JobCounts { states, kinds, cap }
}

/// Count the jobs a bulk action would take
///
/// How many of the tenant's jobs the listing's filters match now, counted up to 10,000
/// (`capped` says the count stopped there), and `through`, which `POST /v1/jobs/bulk`
/// takes so that the action is done to the jobs counted and not to later ones.
#[utoipa::path(
    get,
    path = "/v1/jobs/count",
    tag = "jobs",
    params(SelectionQuery),
    responses(
        (status = 200, description = "How many match", body = JobCount),
        (status = 400, description = "`invalid-request`: an unknown state or a malformed query", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn count(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    ApiQuery(query): ApiQuery<SelectionQuery>,
) -> Result<Json<JobCount>, ApiError> {
    let action = bulk_action(query.action.as_deref().unwrap_or("cancel"))?;
    let selection = selection(query.into())?;
    let count = state.host.engine.operations().count_jobs(&tenant, &selection, action).await?;
    Ok(Json(JobCount {
        matching: count.matching,
        capped: count.capped,
        through: count.through,
        skipping: Some(count.skipping),
    }))
}

/// The bulk action `name` names.
fn bulk_action(name: &str) -> Result<BulkAction, ApiError> {
    match name {
        "cancel" => Ok(BulkAction::Cancel),
        "retry" => Ok(BulkAction::Retry),
        other => Err(ApiError::invalid(format!("action {other:?}: cancel or retry"))),
    }
}

/// Cancel or retry every job a filter matches
///
/// Every job of the tenant the listing's filters match (up to `through`, the newest one
/// the confirmed count saw) is cancelled, or retried as a new linked job, in the
/// background, each through its own command; the answer is the operation, whose progress
/// `GET /v1/operations/{id}` follows and which stays in the tenant's audit trail. A job the
/// action does not apply to (a final job to cancel, a running one to retry) is counted
/// as failed and left as it is.
#[utoipa::path(
    post,
    path = "/v1/jobs/bulk",
    tag = "jobs",
    request_body = JobBulk,
    responses(
        (status = 202, description = "The operation, started", body = OperationStarted),
        (status = 400, description = "`invalid-request`: an unknown action, state or field, an empty filter without `all`, or a malformed body", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not a tenant token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn bulk(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<OperationStarted>), ApiError> {
    let request: JobBulk = json_body(bytes)?;
    let action = bulk_action(&request.action)?;
    let filtered = selection(request.filter)?;
    match (filtered == JobSelection::default(), request.all) {
        (true, false) => {
            return Err(ApiError::invalid(
                "the filter is empty: give at least one criterion, or \"all\": true for every job of the tenant",
            ));
        }
        (false, true) => return Err(ApiError::invalid("give a filter or \"all\": true, not both")),
        _ => {}
    }
    // The jobs counted, no others: a bound is what the confirmed count answered.
    let Some(through) = request.through else {
        return Err(ApiError::invalid(
            "through is required: the `through` of GET /v1/jobs/count, so that the action takes the jobs counted",
        ));
    };
    let selection = JobSelection { through: Some(through), ..filtered };
    let operation =
        state.host.engine.operations().act_on_jobs(&tenant, action, selection, &format!("api:{tenant}")).await?;
    Ok((StatusCode::ACCEPTED, Json(OperationStarted { operation: OperationView::from(&operation) })))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_state_is_counted_and_a_state_at_the_cap_says_so_for_its_kinds_too() {
        let rows = vec![
            (JobState::Succeeded, "email".to_owned(), 7),
            (JobState::Succeeded, "thumb".to_owned(), 3),
            (JobState::Pending, "email".to_owned(), 2),
        ];
        let counts = job_counts(&rows, 10);
        assert_eq!(counts.states.len(), <JobState as DiagramState>::all().len(), "every state, 0 included");
        let of = |s: &str| counts.states.iter().find(|c| c.state == s).cloned().unwrap();
        assert_eq!((of("succeeded").count, of("succeeded").capped), (10, true));
        assert_eq!((of("pending").count, of("pending").capped), (2, false));
        assert_eq!((of("failed").count, of("failed").capped), (0, false));
        let email = counts.kinds.iter().find(|k| k.kind == "email").unwrap();
        assert!(email.states.iter().any(|c| c.state == "succeeded" && c.count == 7 && c.capped));
        assert!(email.states.iter().any(|c| c.state == "pending" && c.count == 2 && !c.capped));
        assert_eq!(counts.kinds.iter().map(|k| k.kind.as_str()).collect::<Vec<_>>(), ["email", "thumb"]);
        // thumb has pending jobs only the capped succeeded read could have missed: at least 0.
        let thumb = counts.kinds.iter().find(|k| k.kind == "thumb").unwrap();
        assert!(!thumb.states.iter().any(|c| c.state == "pending"), "pending was counted whole");
        assert!(thumb.states.iter().any(|c| c.state == "succeeded" && c.capped));
    }

    #[test]
    fn one_kinds_counts_are_exact_below_the_cap_and_at_least_at_it() {
        let exact = kind_counts("email", &[(JobState::Pending, 3), (JobState::Succeeded, 4)], 10);
        let of = |c: &JobCounts, s: &str| c.states.iter().find(|x| x.state == s).cloned().unwrap();
        assert_eq!((of(&exact, "pending").count, of(&exact, "pending").capped), (3, false));
        assert_eq!((of(&exact, "failed").count, of(&exact, "failed").capped), (0, false));
        assert_eq!(exact.kinds[0].states.len(), 2);
        let bounded = kind_counts("email", &[(JobState::Pending, 3), (JobState::Succeeded, 7)], 10);
        assert!(bounded.states.iter().all(|c| c.capped), "older jobs went unread: every state is at least");
    }

    #[test]
    fn blank_filters_match_everything_and_bad_ones_are_refused() {
        let all = selection(JobSelectionBody { state: Some(" ".into()), q: Some("".into()), ..Default::default() });
        assert_eq!(all.ok(), Some(JobSelection::default()));
        for bad in [
            JobSelectionBody { state: Some("done".into()), ..Default::default() },
            JobSelectionBody { priority: Some("urgent".into()), ..Default::default() },
            JobSelectionBody { parent: Some("x".into()), ..Default::default() },
            JobSelectionBody { created_after: Some("yesterday".into()), ..Default::default() },
        ] {
            assert!(selection(bad.clone()).is_err(), "{bad:?}");
        }
    }
}
