//! Kinds as the API shows them: deployed versions and what each component says of itself.

use serde::{Deserialize, Serialize};
use spindle_runtime::{KindSpec, RetrySpec, StepSpec};
use utoipa::ToSchema;

use crate::api::time::rfc3339;
use crate::capabilities::Deployment;
use crate::engine::{DeployRecord, DeployState, KindEntry, KindVersion};

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

impl From<&KindSpec> for SpecView {
    fn from(spec: &KindSpec) -> Self {
        // Destructured: a field added to the spec does not compile here until it is shown.
        let KindSpec { name, steps, cancellable, retry, has_failure_effect, notifies_on_success, input_schema } = spec;
        let schema = |text: &Option<String>| text.as_deref().and_then(|t| serde_json::from_str(t).ok());
        let RetrySpec { max_attempts, initial_backoff_ms, max_backoff_ms } = *retry;
        let input_schema = schema(input_schema);
        Self {
            name: name.clone(),
            steps: steps
                .iter()
                .map(|StepSpec { key, weight, output_schema }| StepSpecView {
                    key: key.clone(),
                    weight: *weight,
                    output_schema: schema(output_schema),
                })
                .collect(),
            cancellable: *cancellable,
            retry: RetryView { max_attempts, initial_backoff_ms, max_backoff_ms },
            has_failure_effect: *has_failure_effect,
            notifies_on_success: *notifies_on_success,
            input_example: input_schema.as_ref().map(spindle_runtime::schema_example),
            input_schema,
        }
    }
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
    /// The tenant secrets its steps may use (names only).
    pub secrets: Vec<String>,
    /// Its settings (`config.get`).
    pub settings: std::collections::BTreeMap<String, String>,
    /// Whether secrets are put in place in request bodies too.
    pub secrets_in_body: bool,
    /// Steps of the kind running at once, on every host together (the latest deployment's
    /// limit holds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_running: Option<u32>,
}

impl From<&Deployment> for DeploymentView {
    fn from(d: &Deployment) -> Self {
        Self {
            allow: d.allow.iter().map(ToString::to_string).collect(),
            secrets: d.secrets.clone(),
            settings: d.settings.clone(),
            secrets_in_body: d.secrets_in_body,
            max_running: d.max_running,
        }
    }
}

impl From<&KindVersion> for VersionView {
    fn from(v: &KindVersion) -> Self {
        let spec = serde_json::from_str::<KindSpec>(&v.spec).ok();
        Self {
            version: v.version,
            digest: v.digest.clone(),
            created_at: rfc3339(v.created_at),
            size: v.size,
            spec: spec.as_ref().map(SpecView::from),
            deployment: serde_json::from_str::<Deployment>(&v.deployment).ok().as_ref().map(DeploymentView::from),
        }
    }
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

impl KindView {
    /// A view of `entry`, with its versions when given.
    pub fn new(entry: &KindEntry, versions: Option<&[KindVersion]>) -> Self {
        Self {
            kind: entry.kind.clone(),
            current_version: entry.current_version,
            latest_version: entry.latest_version,
            updated_at: rfc3339(entry.updated_at),
            versions: versions.map(|vs| vs.iter().map(Into::into).collect()),
            breakers: Vec::new(),
            deploys: Vec::new(),
        }
    }

    /// The same view with this host's breakers of the kind.
    pub fn with_breakers(mut self, breakers: &[crate::engine::BreakerView]) -> Self {
        self.breakers = breakers
            .iter()
            .filter(|b| b.kind == self.kind)
            .map(|b| BreakerStateView {
                version: b.version,
                state: b.state.as_str().to_owned(),
                recent_faults: b.recent_faults as u64,
            })
            .collect();
        self
    }

    /// The state of the current version's breaker (`closed` when it has none).
    pub fn current_breaker(&self) -> &str {
        self.breakers.iter().find(|b| b.version == self.current_version).map_or("closed", |b| b.state.as_str())
    }
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

impl DeployView {
    /// A view of `record`; a deploy still `compiling` once `stale_after` has passed since
    /// its upload shows as failed `deploy.interrupted` (its host went away mid-compile:
    /// no compile outlives its time limit).
    pub fn new(record: &DeployRecord, now: spindle_core::Timestamp, stale_after: std::time::Duration) -> Self {
        let interrupted = record.state == DeployState::Compiling && now.since(record.created_at) > stale_after;
        let (state, error) = match (record.state, interrupted) {
            (DeployState::Compiling, true) => (
                "failed",
                Some(super::ErrorDetail {
                    code: "deploy.interrupted".into(),
                    message: "the host compiling the component stopped before it was done; deploy it again".into(),
                    ..Default::default()
                }),
            ),
            (DeployState::Compiling, false) => ("compiling", None),
            (DeployState::Ready, _) => ("ready", None),
            (DeployState::Failed, _) => (
                "failed",
                Some(super::ErrorDetail {
                    code: record.error_code.clone().unwrap_or_else(|| "internal".into()),
                    message: record.error_message.clone().unwrap_or_default(),
                    ..Default::default()
                }),
            ),
        };
        Self {
            id: record.id.clone(),
            kind: record.kind.clone(),
            state: state.to_owned(),
            version: record.version,
            digest: record.digest.clone(),
            size: record.size,
            error,
            created_at: rfc3339(record.created_at),
            finished_at: record.finished_at.map(rfc3339),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The view is the spec as the registry stores it, field for field.
    #[test]
    fn a_spec_shows_as_it_is_stored() {
        let spec = KindSpec {
            name: "thumbnail".into(),
            steps: vec![
                StepSpec { key: "fetch".into(), weight: 1, output_schema: None },
                StepSpec { key: "resize".into(), weight: 3, output_schema: None },
            ],
            cancellable: true,
            retry: RetrySpec { max_attempts: 3, initial_backoff_ms: 100, max_backoff_ms: 5_000 },
            has_failure_effect: false,
            notifies_on_success: true,
            input_schema: None,
        };
        let stored = serde_json::to_value(&spec).expect("serialises");
        assert_eq!(serde_json::to_value(SpecView::from(&spec)).expect("serialises"), stored);
        let read: SpecView = serde_json::from_value(stored).expect("decodes");
        assert_eq!(read, SpecView::from(&spec));
    }
}
