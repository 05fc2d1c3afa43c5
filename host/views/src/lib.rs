//! What Spindle's HTTP API sends and accepts: typed JSON bodies, served by the host and
//! decoded by its clients (the `spindle` command, `spindle-client`). Everything here is operator-safe (failure accounts carry codes,
//! safe messages and correlation references, never transient detail). Each type's `ToSchema`
//! is its entry in the OpenAPI document, so the document cannot drift from the bodies.

mod capacity;
mod error;
mod hosts;
mod jobs;
mod kinds;
mod outbound;
mod queues;
mod submissions;
mod tenants;
mod tokens;

use serde::{Deserialize, Serialize};
use spindle_core::JobState;
use spindle_core::table::DiagramState;
use utoipa::ToSchema;
use utoipa::openapi::{Object, ObjectBuilder, Type};

pub use capacity::{CapacityView, KindUsageView, LimitsView};
pub use error::{API_CODES, ErrorBody, ErrorCode, ErrorDetail, ViolationView};
pub use hosts::{Finalized, GateView, HostList, HostView, StorageHealth};
pub use jobs::{
    Action, Actions, AttemptView, CancelBody, CancelRequestView, FailureView, HistoryEntryView, JobLive, JobPage,
    JobSummaryView, JobView, LeaseInvalidated, LogLineView, LogPage, SHOWN_BYTES, StepView, Submit, Withheld,
    is_final_state,
};
pub use kinds::{
    BreakerStateView, DeployView, Deployed, DeploymentView, KindList, KindView, RetryView, Rollback, RolledBack,
    SpecView, StepSpecView, VersionView,
};
pub use outbound::{CallView, SecretList, SecretView, TenantOutbound};
pub use queues::{
    AlertList, AlertView, DeadLetterCount, DeadLetterRetry, JobBulk, JobCount, JobCounts, JobSelectionBody, KindCounts,
    OperationList, OperationStarted, OperationView, QueueDepthView, Queues, RunningSample, StateCount,
};
pub use submissions::{SqlRoleGranted, SubmissionView};

/// A field a request body must name, `null` included: where `null` means "the default"
/// or "nothing", a body that leaves the field out (or misspells it) is refused rather
/// than read as `null`, so `{}` never resets a setting.
pub(crate) fn named<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}
pub use tenants::{NewTenant, Retention, TenantList, TenantToken, TenantView};
pub use tokens::{CreatedToken, NewToken, TokenList, TokenState, TokenView};

/// `GET /v1/health`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` while the host answers and may write; `refusing` while the storage format
    /// gate refuses it (it answers, claims nothing and writes no job: `storage.refusal`
    /// says why).
    pub status: String,
    /// Its storage formats; absent from hosts older than the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageHealth>,
    /// Whether it finishes what it holds and claims nothing new (`--drain`).
    #[serde(default)]
    pub draining: bool,
}

/// A string schema that takes only `values`: the document lists a closed set where the type
/// on the wire is a plain string (so older clients still decode newer values).
pub(crate) fn one_of<'a>(description: &str, values: impl IntoIterator<Item = &'a str>) -> Object {
    ObjectBuilder::new().schema_type(Type::String).description(Some(description)).enum_values(Some(values)).build()
}

/// A job's state, as the document lists it.
pub(crate) fn job_state_schema() -> Object {
    one_of("The job's state.", <JobState as DiagramState>::all().iter().map(|state| state.as_str()))
}
