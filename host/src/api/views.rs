//! What the API shows: JSON views of jobs, steps, kinds and history. Everything here
//! is operator-safe (failure accounts carry codes, safe messages and correlation
//! references, never transient detail).

use serde::Serialize;
use serde_json::Value;
use spindle_core::step::{AttemptEnd, Step};
use spindle_core::{HistoryEvent, SafeFailure};

use super::time::rfc3339;
use crate::store::{HistoryEntry, JobRecord, KindEntry, KindVersion};

/// Bytes shown as JSON when they are JSON, else as a note of their size.
fn json_or_size(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| serde_json::json!({ "non_json_bytes": bytes.len() }))
}

/// A failure as shown.
#[derive(Debug, Serialize)]
pub struct FailureView {
    code: String,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation: Option<String>,
}

impl From<&SafeFailure> for FailureView {
    fn from(f: &SafeFailure) -> Self {
        Self { code: f.code.clone(), message: f.message.clone(), correlation: f.correlation.clone() }
    }
}

/// One attempt.
#[derive(Debug, Serialize)]
pub struct AttemptView {
    number: u32,
    started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<FailureView>,
}

/// One step.
#[derive(Debug, Serialize)]
pub struct StepView {
    key: String,
    weight: u32,
    state: &'static str,
    carried: bool,
    attempts: Vec<AttemptView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skip_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<FailureView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    done: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
}

impl From<&Step> for StepView {
    fn from(s: &Step) -> Self {
        Self {
            key: s.key.clone(),
            weight: s.weight,
            state: s.state.as_str(),
            carried: s.carried,
            attempts: s
                .attempts
                .iter()
                .map(|a| {
                    let (outcome, failure) = match &a.end {
                        None => ("running", None),
                        Some(AttemptEnd::Completed) => ("completed", None),
                        Some(AttemptEnd::Skipped) => ("skipped", None),
                        Some(AttemptEnd::Retryable { failure }) => ("retryable", Some(failure.into())),
                        Some(AttemptEnd::Failed { failure }) => ("failed", Some(failure.into())),
                    };
                    AttemptView {
                        number: a.number,
                        started_at: rfc3339(a.started_at),
                        ended_at: a.ended_at.map(rfc3339),
                        outcome,
                        failure,
                    }
                })
                .collect(),
            output: s.output.as_deref().map(json_or_size),
            skip_reason: s.skip_reason.clone(),
            failure: s.failure.as_ref().map(Into::into),
            done: s.partial.map(|p| p.done),
            total: s.partial.and_then(|p| p.total),
        }
    }
}

/// A job, whole.
#[derive(Debug, Serialize)]
pub struct JobView {
    id: String,
    kind: String,
    kind_version: i64,
    state: &'static str,
    progress: u8,
    priority: &'static str,
    pass: u32,
    created_at: String,
    run_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    settled_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<FailureView>,
    claimed: bool,
    pause_requested: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancel_requested: Option<Value>,
    restart_requested: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    predecessor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    successor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    idempotency_key: Option<String>,
    lease_keys: Vec<String>,
    input: Value,
    steps: Vec<StepView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    history: Option<Vec<Value>>,
}

impl JobView {
    /// A view of `record`, with its history when given.
    pub fn new(record: &JobRecord, history: Option<&[HistoryEntry]>) -> Self {
        let job = &record.job;
        Self {
            id: job.id.to_string(),
            kind: record.kind.clone(),
            kind_version: record.kind_version,
            state: job.state.as_str(),
            progress: job.progress,
            priority: record.priority.as_str(),
            pass: job.pass,
            created_at: rfc3339(job.created_at),
            run_at: rfc3339(job.run_at),
            started_at: job.started_at.map(rfc3339),
            settled_at: job.settled_at.map(rfc3339),
            failure: job.failure.as_ref().map(Into::into),
            claimed: job.claim.is_some(),
            pause_requested: job.requests.pause.is_some(),
            cancel_requested: job
                .requests
                .cancel
                .as_ref()
                .map(|c| serde_json::json!({ "actor": c.actor.0, "reason": c.reason, "at": rfc3339(c.at) })),
            restart_requested: job.requests.restart.is_some(),
            predecessor: job.predecessor.map(|p| p.to_string()),
            successor: job.successor.map(|s| s.to_string()),
            idempotency_key: record.idempotency_key.clone(),
            lease_keys: record
                .lease_keys
                .iter()
                .map(|k| crate::engine::untenant_key(&record.tenant, k).to_owned())
                .collect(),
            input: json_or_size(&record.payload),
            steps: job.steps.iter().map(Into::into).collect(),
            history: history.map(|entries| entries.iter().map(history_view).collect()),
        }
    }
}

/// One history entry: its time and the event's own fields.
fn history_view(entry: &HistoryEntry) -> Value {
    let mut value = serde_json::to_value(&entry.event).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("at".into(), Value::String(rfc3339(entry.at)));
        if let HistoryEvent::StepRetrying { retry_at, .. } = &entry.event {
            map.insert("retry_at".into(), Value::String(rfc3339(*retry_at)));
        }
        if let HistoryEvent::Snoozed { until, .. } = &entry.event {
            map.insert("until".into(), Value::String(rfc3339(*until)));
        }
    }
    value
}

/// A job in a list.
#[derive(Debug, Serialize)]
pub struct JobSummaryView {
    id: String,
    kind: String,
    kind_version: i64,
    state: &'static str,
    progress: u8,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    settled_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_code: Option<String>,
}

impl From<&JobRecord> for JobSummaryView {
    fn from(r: &JobRecord) -> Self {
        Self {
            id: r.job.id.to_string(),
            kind: r.kind.clone(),
            kind_version: r.kind_version,
            state: r.job.state.as_str(),
            progress: r.job.progress,
            created_at: rfc3339(r.job.created_at),
            settled_at: r.job.settled_at.map(rfc3339),
            failure_code: r.job.failure.as_ref().map(|f| f.code.clone()),
        }
    }
}

/// A deployed version.
#[derive(Debug, Serialize)]
pub struct VersionView {
    version: i64,
    digest: String,
    created_at: String,
    spec: Value,
}

impl From<&KindVersion> for VersionView {
    fn from(v: &KindVersion) -> Self {
        Self {
            version: v.version,
            digest: v.digest.clone(),
            created_at: rfc3339(v.created_at),
            spec: serde_json::from_str(&v.spec).unwrap_or(Value::Null),
        }
    }
}

/// A kind.
#[derive(Debug, Serialize)]
pub struct KindView {
    kind: String,
    current_version: i64,
    latest_version: i64,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    versions: Option<Vec<VersionView>>,
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
        }
    }
}
