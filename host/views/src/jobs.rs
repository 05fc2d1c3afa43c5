//! Jobs as the API shows them (whole, in lists, with steps, attempts and history) and the
//! bodies that submit and cancel them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use spindle_core::policy::priority::Priority;
use utoipa::ToSchema;
use utoipa::openapi::Object;

use crate::{job_state_schema, one_of};

/// A value the view does not carry, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Withheld {
    /// `too-large` (over the 64 KiB a view shows) or `not-json` (bytes that are not JSON).
    #[schema(schema_with = withheld_reason_schema)]
    pub reason: String,
    /// The value's size in bytes.
    pub bytes: u64,
}

fn withheld_reason_schema() -> Object {
    one_of("Why a value is not shown.", ["too-large", "not-json"])
}

/// Largest input or output a job's view shows.
pub const SHOWN_BYTES: usize = 64 << 10;

fn priority_schema() -> Object {
    one_of("A priority class, most urgent first.", Priority::ALL.iter().map(|priority| priority.as_str()))
}

/// A submission.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Submit {
    /// The kind to run; the job is pinned to its current version.
    pub kind: String,
    /// The job's input: any JSON, at most the host's input cap once encoded.
    #[serde(default)]
    pub input: Value,
    /// The priority class (default `normal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = priority_schema)]
    pub priority: Option<String>,
    /// Run no earlier than this (RFC 3339, UTC); not with `delay_secs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    /// Run no earlier than this many seconds from now; not with `run_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_secs: Option<f64>,
    /// A second submission with the same key answers the first job (200) instead of a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Exclusive lease keys (e.g. `account:42`): jobs sharing one never run at once.
    #[serde(default)]
    pub lease_keys: Vec<String>,
}

/// A cancellation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    /// Why (nonblank); kept in the job's history.
    pub reason: String,
}

/// A failure as shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FailureView {
    /// Stable, machine-readable reason, e.g. `card-declined` or `sandbox.deadline`.
    pub code: String,
    /// Operator-safe explanation (empty for transient failures, whose detail is logged).
    pub message: String,
    /// Reference to the host log lines that hold the detail, when there is any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation: Option<String>,
    /// The last lines the step's guest wrote to stderr in the attempt that failed (a
    /// traceback, a panic message), capped: the tenant's own code's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_stderr: Option<String>,
}

/// One attempt of a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AttemptView {
    /// 1 for the first attempt.
    pub number: u32,
    /// When it began.
    pub started_at: String,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// `running`, `completed`, `skipped`, `retryable` or `failed`.
    pub outcome: String,
    /// Why it did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureView>,
    /// The fencing token of the claim it ran under.
    pub fence: u64,
    /// How long it ran, once it ended, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// One step of a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StepView {
    /// The step's key.
    pub key: String,
    /// Its share of the job's progress.
    pub weight: u32,
    /// The step's state.
    pub state: String,
    /// Completed by the predecessor this job retries, and not run again.
    pub carried: bool,
    /// Its attempts, oldest first.
    pub attempts: Vec<AttemptView>,
    /// Its output, when it is JSON of at most 64 KiB (see `output_withheld`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Set when the step has an output this view does not show: its size and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_withheld: Option<Withheld>,
    /// Why it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// Why it failed for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureView>,
    /// Units done, as the step last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<u64>,
    /// Units in all, when the step knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
}

/// A recorded cancellation, waiting for the step in flight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CancelRequestView {
    /// Who asked (`api:TENANT` for the API).
    pub actor: String,
    /// Why.
    pub reason: String,
    /// When.
    pub at: String,
}

/// One history entry: when, what, and the event's own fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HistoryEntryView {
    /// Its order within the store (a follower of the job's events resumes after it).
    pub id: i64,
    /// When it happened.
    pub at: String,
    /// What happened (`submitted`, `step_started`, `step_retrying`, …).
    pub event: String,
    /// The event's own fields (times as RFC 3339 text).
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

fn full() -> String {
    "full".to_owned()
}

/// A job, whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    /// The job's id (a UUID).
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// The kind's version it is pinned to.
    pub kind_version: i64,
    /// Its state.
    #[schema(schema_with = job_state_schema)]
    pub state: String,
    /// Percent done, by step weight.
    pub progress: u8,
    /// Its priority class.
    #[schema(schema_with = priority_schema)]
    pub priority: String,
    /// Which pass (a restart starts another).
    pub pass: u32,
    /// When it was submitted.
    pub created_at: String,
    /// When it may run.
    pub run_at: String,
    /// When its first step began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it became final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureView>,
    /// Whether a host holds it now.
    pub claimed: bool,
    /// A pause waits for the step in flight.
    pub pause_requested: bool,
    /// A cancellation waits for the step in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_requested: Option<CancelRequestView>,
    /// A restart waits for the step boundary.
    pub restart_requested: bool,
    /// The failed or cancelled job this one retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predecessor: Option<String>,
    /// The job that retries this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<String>,
    /// Its idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The job whose fan-out created it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Where its children are listed (`/v1/jobs?parent=ID`), once it created some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<String>,
    /// What its parked step waits for (children of a fan-out, a signal), until a report
    /// of the woken step is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<Value>,
    /// Signals sent and not yet consumed, by name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub pending_signals: std::collections::BTreeMap<String, u32>,
    /// Its exclusive lease keys.
    pub lease_keys: Vec<String>,
    /// Its input, when it is JSON of at most 64 KiB; else `null` (see `input_withheld`).
    pub input: Value,
    /// Set when the input is not shown: its size and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_withheld: Option<Withheld>,
    /// Its steps, in order.
    pub steps: Vec<StepView>,
    /// What its kind keeps of it: `full`, or `lean` (its row alone: the lifecycle shows in
    /// its times, attempts and failure, and it has no history).
    #[serde(default = "full")]
    pub record: String,
    /// Its history, oldest first (only `GET /v1/jobs/{id}` includes it, and never for a
    /// `lean` job: its kind keeps none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<HistoryEntryView>>,
    /// The outbound requests its steps made, oldest first, the newest 500 (only
    /// `GET /v1/jobs/{id}` includes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbound: Option<Vec<super::CallView>>,
    /// The commands its machine would take now, and why not the others (only
    /// `GET /v1/jobs/{id}` includes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Actions>,
    /// Whether the job reached its log cap (lines past it are counted, not kept; only
    /// `GET /v1/jobs/{id}` says).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs_capped: Option<bool>,
}

/// Whether a command would be taken now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Action {
    /// It would.
    pub allowed: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The run-control commands, as the job's machine would answer them now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Actions {
    /// `POST /v1/jobs/{id}/cancel`.
    pub cancel: Action,
    /// `POST /v1/jobs/{id}/pause`.
    pub pause: Action,
    /// `POST /v1/jobs/{id}/resume`.
    pub resume: Action,
    /// `POST /v1/jobs/{id}/restart`.
    pub restart: Action,
    /// `POST /v1/jobs/{id}/retry`.
    pub retry: Action,
}

/// One line of a job's logs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LogLineView {
    /// Its order (follow from the last one seen with `after`).
    pub seq: i64,
    /// When it was written (a stdout or stderr line: when its call ended).
    pub at: String,
    /// The step.
    pub step: String,
    /// The attempt.
    pub attempt: u32,
    /// `trace`, `debug`, `info`, `warn` or `error` (stdout is `info`, stderr `warn`).
    pub level: String,
    /// `log` (the host's `log` function), `stdout`, `stderr`, or `spindle` (the host's
    /// note of what a cap dropped).
    pub stream: String,
    /// The text.
    pub message: String,
}

/// A job's logs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LogPage {
    /// The lines, in order.
    pub lines: Vec<LogLineView>,
    /// Whether the job reached its log cap.
    pub capped: bool,
    /// Lines its cap dropped.
    pub dropped: u64,
}

/// A job's state and progress, as its events stream them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobLive {
    /// Its state.
    pub state: String,
    /// Percent done.
    pub progress: u8,
}

/// A job in a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobSummaryView {
    /// The job's id.
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// The kind's version it is pinned to.
    pub kind_version: i64,
    /// Its state.
    #[schema(schema_with = job_state_schema)]
    pub state: String,
    /// Percent done.
    pub progress: u8,
    /// Its priority class.
    #[schema(schema_with = priority_schema)]
    pub priority: String,
    /// Its idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// When it was submitted.
    pub created_at: String,
    /// When it became final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<String>,
    /// Its failure's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<String>,
}

/// A page of jobs, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobPage {
    /// The jobs.
    pub jobs: Vec<JobSummaryView>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    pub next_cursor: Option<i64>,
}

/// An invalidated lease key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LeaseInvalidated {
    /// The key, as the tenant names it.
    pub key: String,
    /// The job that held it, if any: it can no longer heartbeat or commit under it.
    pub held_by: Option<String>,
}

/// Whether `state` (as a view carries it) is final: a final job never changes state. A
/// state this build does not know is not final.
pub fn is_final_state(state: &str) -> bool {
    spindle_core::JobState::parse(state).is_some_and(spindle_core::JobState::is_final)
}

impl JobView {
    /// Whether the job is final (`succeeded`, `failed` or `cancelled`).
    pub fn is_final(&self) -> bool {
        is_final_state(&self.state)
    }
}
