//! Kinds as the API shows them: deployed versions and what each component says of itself.

use spindle_runtime::{KindSpec, RetrySpec, StepSpec};
use spindle_views::{
    BreakerStateView, DeployView, DeploymentView, KindView, RetryView, SpecView, StepSpecView, VersionView,
};

use crate::api::time::rfc3339;
use crate::capabilities::Deployment;
use crate::engine::{DeployRecord, DeployState, KindEntry, KindVersion};

/// What a component says of itself, as shown.
pub fn spec_view(spec: &KindSpec) -> SpecView {
    // Destructured: a field added to the spec does not compile here until it is shown.
    let KindSpec { name, steps, cancellable, retry, has_failure_effect, notifies_on_success, input_schema } = spec;
    let schema = |text: &Option<String>| text.as_deref().and_then(|t| serde_json::from_str(t).ok());
    let RetrySpec { max_attempts, initial_backoff_ms, max_backoff_ms } = *retry;
    let input_schema = schema(input_schema);
    SpecView {
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

impl From<&Deployment> for DeploymentView {
    fn from(d: &Deployment) -> Self {
        Self {
            allow: d.allow.iter().map(ToString::to_string).collect(),
            // As they are declared: each secret once per destination it is bound to (one
            // stored before bindings, by its name alone).
            secrets: d
                .secrets
                .iter()
                .flat_map(|name| match d.bindings.get(name) {
                    Some(rules) => rules.iter().map(|rule| format!("{name}@{rule}")).collect::<Vec<_>>(),
                    None => vec![name.clone()],
                })
                .collect(),
            settings: d.settings.clone(),
            secrets_in_body: d.secrets_in_body,
            max_running: d.max_running,
            record: (d.record != spindle_core::Record::Full).then(|| d.record.as_str().to_owned()),
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
            spec: spec.as_ref().map(spec_view),
            deployment: serde_json::from_str::<Deployment>(&v.deployment).ok().as_ref().map(DeploymentView::from),
        }
    }
}

/// A view of `entry`, with its versions when given.
pub fn kind_view(entry: &KindEntry, versions: Option<&[KindVersion]>) -> KindView {
    KindView {
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
pub fn with_breakers(mut view: KindView, breakers: &[crate::engine::BreakerView]) -> KindView {
    view.breakers = breakers
        .iter()
        .filter(|b| b.kind == view.kind)
        .map(|b| BreakerStateView {
            version: b.version,
            state: b.state.as_str().to_owned(),
            recent_faults: b.recent_faults as u64,
        })
        .collect();
    view
}

/// A view of `record`; a deploy still `compiling` once `stale_after` has passed since
/// its upload shows as failed `deploy.interrupted` (its host went away mid-compile:
/// no compile outlives its time limit).
pub fn deploy_view(
    record: &DeployRecord,
    now: spindle_core::Timestamp,
    stale_after: std::time::Duration,
) -> DeployView {
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
    DeployView {
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
        assert_eq!(serde_json::to_value(spec_view(&spec)).expect("serialises"), stored);
        let read: SpecView = serde_json::from_value(stored).expect("decodes");
        assert_eq!(read, spec_view(&spec));
    }
}
