//! Kinds as the API shows them: deployed versions and what each component says of itself.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One declared step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StepSpecView {
    /// The step's key.
    pub key: String,
    /// Its progress weight.
    pub weight: u32,
    /// The JSON Schema its output follows, if declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<serde_json::Value>,
}

/// A kind's retry policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RetryView {
    /// Attempts per step, the first included.
    pub max_attempts: u32,
    /// First backoff, in milliseconds.
    pub initial_backoff_ms: u32,
    /// Backoff ceiling, in milliseconds.
    pub max_backoff_ms: u32,
}

/// What a component says of itself (`describe`), as validation accepted it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SpecView {
    /// The name the component gives itself.
    pub name: String,
    /// Its steps, in order.
    pub steps: Vec<StepSpecView>,
    /// Whether its jobs may be cancelled.
    pub cancellable: bool,
    /// Its retry policy.
    pub retry: RetryView,
    /// Whether `on-failure` runs when a job fails.
    pub has_failure_effect: bool,
    /// Whether `on-success` runs when a job succeeds.
    pub notifies_on_success: bool,
    /// The JSON Schema a job's input must follow, if declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub input_schema: Option<serde_json::Value>,
    /// An input that follows `input_schema`: its first `examples` entry, or one built
    /// from its types and required properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub input_example: Option<serde_json::Value>,
}

/// A deployed version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct VersionView {
    /// Its number: 1 for the first deploy.
    pub version: i64,
    /// The component's SHA-256.
    pub digest: String,
    /// When it was deployed.
    pub created_at: String,
    /// The component's size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// What the component says of itself; `null` if the stored description no longer reads.
    pub spec: Option<SpecView>,
    /// What the deployment allows, declares and sets; `null` if it no longer reads.
    pub deployment: Option<DeploymentView>,
}

/// What a deployment allows its steps, declares and sets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct DeploymentView {
    /// Outbound rules (`METHOD scheme://host[:port]/path`): the kind's layer of the policy.
    pub allow: Vec<String>,
    /// The tenant secrets its steps may use, each bound to a destination it may be sent
    /// to: `NAME@RULE`, a name once per destination (a secret deployed before bindings
    /// shows as its name alone, and may go wherever `allow` reaches).
    pub secrets: Vec<String>,
    /// Its settings (`config.get`).
    pub settings: std::collections::BTreeMap<String, String>,
    /// Whether secrets are put in place in request bodies too.
    pub secrets_in_body: bool,
    /// Steps of the kind running at once, on every host together (the latest deployment's
    /// limit holds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_running: Option<u32>,
    /// What the kind keeps of its jobs: `full` (the default: the job row, a row per step,
    /// the history) or `lean` (the job row alone: no step or history rows, for
    /// high-volume kinds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

/// A kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KindView {
    /// Its name.
    pub kind: String,
    /// The version new submissions use.
    pub current_version: i64,
    /// The newest deployed version.
    pub latest_version: i64,
    /// When it last changed.
    pub updated_at: String,
    /// Every version, oldest first (only `GET /v1/kinds/{kind}` includes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<VersionView>>,
    /// The fault breakers this host keeps for the kind's versions (a version whose steps
    /// never faulted here has none: closed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breakers: Vec<BreakerStateView>,
    /// Its latest deploys, newest first (only `GET /v1/kinds/{kind}` includes them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deploys: Vec<DeployView>,
}

/// A kind version's fault breaker on the host that answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BreakerStateView {
    /// The version.
    pub version: i64,
    /// `closed` (claims flow), `open` (held for a cool-down) or `half_open` (one probe at
    /// a time).
    pub state: String,
    /// Faults counted in its window now.
    pub recent_faults: u64,
}

/// The tenant's kinds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KindList {
    /// Each kind, without its versions.
    pub kinds: Vec<KindView>,
    /// Deploys still compiling, of any kind (a kind's first version is listed here
    /// before the kind is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compiling: Vec<DeployView>,
}

/// A new version, deployed and current.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Deployed {
    /// The kind.
    pub kind: String,
    /// The new version's number.
    pub version: i64,
    /// The component's SHA-256.
    pub digest: String,
    /// What the component says of itself.
    pub spec: SpecView,
    /// The deploy that made it.
    pub deploy: DeployView,
}

/// A deploy: the component was checked when it was uploaded (size, header, imports and
/// exports) and compiles in the background; this says how far it got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeployView {
    /// Its id: `GET /v1/kinds/{kind}/deploys/{id}` answers its state.
    pub id: String,
    /// The kind it deploys.
    pub kind: String,
    /// `compiling`, `ready` (then `version` is the new current version) or `failed`
    /// (then `error` says why: a `component.*` code such as `component.compile-timeout`,
    /// `component.describe-failed` or `component.name-mismatch`, or `deploy.interrupted`
    /// when the host compiling it went away).
    pub state: String,
    /// The version it made, once ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The component's SHA-256.
    pub digest: String,
    /// Its size in bytes.
    pub size: i64,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<super::ErrorDetail>,
    /// When it was uploaded.
    pub created_at: String,
    /// When it became ready or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// A rollback (or roll-forward) to an existing version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// The version new submissions should use.
    pub version: i64,
}

/// The version a kind's new submissions now use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RolledBack {
    /// The kind.
    pub kind: String,
    /// The version now current.
    pub current_version: i64,
    /// That version.
    pub version: VersionView,
}

impl KindView {
    /// The current version's breaker state: `closed` unless one is listed for it.
    pub fn current_breaker(&self) -> &str {
        self.breakers.iter().find(|b| b.version == self.current_version).map_or("closed", |b| b.state.as_str())
    }
}
