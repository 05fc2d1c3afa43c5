//! The queues at a glance, and the bulk operations and alerts looked back on.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A tenant's open jobs of one kind and priority class, by where each waits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QueueDepthView {
    /// The kind.
    pub kind: String,
    /// The priority class.
    pub priority: String,
    /// Ready to be claimed.
    pub ready: u64,
    /// Waiting for their time: a delay, a retry's backoff, a snooze.
    pub delayed: u64,
    /// Waiting for a lease key, a running limit or a breaker.
    pub blocked: u64,
    /// Waiting for children or a signal.
    pub waiting: u64,
    /// With a step running.
    pub running: u64,
    /// Paused.
    pub paused: u64,
}

/// Steps running at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunningSample {
    /// When they were counted.
    pub at: String,
    /// How many.
    pub running: u64,
}

/// The tenant's queues.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Queues {
    /// Open jobs by kind and priority class.
    pub depth: Vec<QueueDepthView>,
    /// Steps running over the last hour, every 10 s, oldest first.
    pub running_over_time: Vec<RunningSample>,
}

/// Which dead letters to retry (all of the tenant's without a field).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterRetry {
    /// Only this kind's.
    #[serde(default)]
    pub kind: Option<String>,
    /// Only those that failed with this code.
    #[serde(default)]
    pub failure_code: Option<String>,
    /// Only those that failed before this time (RFC 3339).
    #[serde(default)]
    pub failed_before: Option<String>,
}

/// How many dead letters a filter matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterCount {
    /// How many, up to 10,000.
    pub matching: u64,
    /// Whether the count stopped at 10,000 (there may be more).
    pub capped: bool,
}

/// Which jobs a bulk cancel or retry takes: the job listing's filters (blank fields match
/// everything).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobSelectionBody {
    /// Only jobs in this state.
    #[serde(default)]
    pub state: Option<String>,
    /// Only jobs of this kind.
    #[serde(default)]
    pub kind: Option<String>,
    /// Only children of this job.
    #[serde(default)]
    pub parent: Option<String>,
    /// Only jobs of this priority class.
    #[serde(default)]
    pub priority: Option<String>,
    /// Only jobs submitted at or after this time (RFC 3339).
    #[serde(default)]
    pub created_after: Option<String>,
    /// Only jobs submitted before this time (RFC 3339).
    #[serde(default)]
    pub created_before: Option<String>,
    /// The job with this id, or the jobs whose idempotency key starts with this.
    #[serde(default)]
    pub q: Option<String>,
}

/// `POST /v1/jobs/bulk`: what to do to which jobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobBulk {
    /// `cancel` or `retry` (failed or cancelled jobs, each as a new linked job).
    pub action: String,
    /// Which jobs: at least one criterion, unless `all` says every job of the tenant.
    #[serde(default)]
    pub filter: JobSelectionBody,
    /// Every job of the tenant, with no filter: said outright, so that a filter that is
    /// empty by mistake never widens to everything.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// The `through` of the count that was confirmed (required): jobs submitted after it
    /// are left alone.
    #[serde(default)]
    pub through: Option<i64>,
}

/// How many jobs a filter matches, before a bulk action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobCount {
    /// How many, up to 10,000.
    pub matching: u64,
    /// Whether the count stopped at 10,000 (there may be more).
    pub capped: bool,
    /// The newest matching job's place in the order of submission: pass it to
    /// `POST /v1/jobs/bulk` so that the action takes the jobs counted, not later ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<i64>,
    /// Of those counted, how many the action (`?action=`) would skip now: a final job
    /// to cancel, a running one to retry, one retried already. Absent from older hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipping: Option<u64>,
}

/// Jobs of one state: how many.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StateCount {
    /// The state.
    pub state: String,
    /// How many, read up to `cap` (then at least this many).
    pub count: u64,
    /// Whether the count stopped at the cap.
    pub capped: bool,
}

/// One kind's jobs by state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KindCounts {
    /// The kind.
    pub kind: String,
    /// Its counts, for each state it has jobs in (from the rows each state's count read:
    /// a sample where that state's count is capped).
    pub states: Vec<StateCount>,
}

/// `GET /v1/jobs/counts`: the tenant's jobs per state and per kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobCounts {
    /// Per state, every state (0 included), of the kind asked for when one was.
    pub states: Vec<StateCount>,
    /// Per kind, every kind with jobs.
    pub kinds: Vec<KindCounts>,
    /// Most rows one state's count reads: past it the count says `capped` (at least).
    pub cap: u64,
}

/// A bulk operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OperationView {
    /// Its id.
    pub id: String,
    /// What it does: `retry-dead-letters`, `cancel-jobs`, `retry-jobs`; or what happened:
    /// `operator-read` (an operator read the tenant's jobs; `filter` says what, with its
    /// query), `token-minted` and `token-revoked` (by the operator, for this tenant),
    /// `operator-token-use` (a request made with a tenant token the operator minted).
    pub action: String,
    /// What it applies to.
    #[schema(value_type = Object)]
    pub filter: serde_json::Value,
    /// `running`, `done` or `failed`.
    pub state: String,
    /// Jobs it matched so far.
    pub matched: u64,
    /// Jobs it acted on (for a retry: new jobs made; for a cancel: jobs cancelled).
    #[serde(default)]
    pub done: u64,
    /// The same as `done` (its name from when retries were the only bulk action).
    pub retried: u64,
    /// Jobs it could not act on (retried meanwhile by other means, say).
    pub failed: u64,
    /// Who asked.
    pub actor: String,
    /// When.
    pub created_at: String,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// An operation, as it starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OperationStarted {
    /// It.
    pub operation: OperationView,
}

/// A tenant's operations, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OperationList {
    /// Them, newest first.
    pub operations: Vec<OperationView>,
    /// Where the next (older) page starts, when there is one: pass it as `cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// An operational alert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlertView {
    /// When it was raised last.
    pub at: String,
    /// When it was first raised (alerts of one tenant, kind and code within a minute are one).
    pub first_at: String,
    /// What: `late-success` (a step succeeded after its job had failed), or a sandbox
    /// fault's code (`sandbox.deadline`, `sandbox.panic`, …).
    pub code: String,
    /// The tenant.
    pub tenant: String,
    /// The kind.
    pub kind: String,
    /// The job that raised it last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// What it said.
    pub message: String,
    /// How many times it was raised.
    pub count: u64,
}

/// The latest alerts, newest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlertList {
    /// Them.
    pub alerts: Vec<AlertView>,
}
