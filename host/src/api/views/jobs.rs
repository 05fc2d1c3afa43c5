//! Jobs as the API shows them (whole, in lists, with steps, attempts and history) and the
//! bodies that submit and cancel them.

use serde_json::{Map, Value};
use spindle_core::step::{AttemptEnd, Step};
use spindle_core::{HistoryEvent, SafeFailure};
use spindle_views::{
    AttemptView, CancelRequestView, FailureView, HistoryEntryView, JobSummaryView, JobView, LogLineView, SHOWN_BYTES,
    StepView, Withheld,
};

use crate::api::time::rfc3339;
use crate::engine::{HistoryEntry, JobRecord};

/// Bytes shown as JSON when they are JSON; otherwise nothing is shown and a [`Withheld`]
/// says why, in a field of its own beside the data, so that no value a tenant wrote can pass
/// for the host's notice (an input `{"truncated_bytes": 123456789}` is shown as itself).
/// Over [`SHOWN_BYTES`] nothing is shown either way: a job's input and each output may be
/// megabytes, which a job's page need not carry.
fn shown(bytes: &[u8]) -> (Value, Option<Withheld>) {
    if bytes.len() > SHOWN_BYTES {
        return (Value::Null, Some(Withheld { reason: "too-large".into(), bytes: bytes.len() as u64 }));
    }
    match serde_json::from_slice(bytes) {
        Ok(value) => (value, None),
        Err(_) => (Value::Null, Some(Withheld { reason: "not-json".into(), bytes: bytes.len() as u64 })),
    }
}

/// How a failure shows.
pub fn failure_view(f: &SafeFailure) -> FailureView {
    FailureView {
        code: f.code.clone(),
        message: f.message.clone(),
        correlation: f.correlation.clone(),
        guest_stderr: f.guest_stderr.clone(),
    }
}

/// How a step shows.
pub fn step_view(s: &Step) -> StepView {
    let (output, output_withheld) = match s.output.as_deref().map(shown) {
        Some((value, withheld)) => (withheld.is_none().then_some(value), withheld),
        None => (None, None),
    };
    StepView {
        key: s.key.clone(),
        weight: s.weight,
        state: s.state.as_str().to_owned(),
        carried: s.carried,
        attempts: s
            .attempts
            .iter()
            .map(|a| {
                let (outcome, failure) = match &a.end {
                    None => ("running", None),
                    Some(AttemptEnd::Completed) => ("completed", None),
                    Some(AttemptEnd::Skipped) => ("skipped", None),
                    Some(AttemptEnd::Retryable { failure }) => ("retryable", Some(failure_view(failure))),
                    Some(AttemptEnd::Failed { failure }) => ("failed", Some(failure_view(failure))),
                };
                AttemptView {
                    number: a.number,
                    started_at: rfc3339(a.started_at),
                    ended_at: a.ended_at.map(rfc3339),
                    outcome: outcome.to_owned(),
                    failure,
                    fence: a.fence.0,
                    duration_ms: a
                        .ended_at
                        .map(|end| u64::try_from(end.since(a.started_at).as_millis()).unwrap_or(u64::MAX)),
                }
            })
            .collect(),
        output,
        output_withheld,
        skip_reason: s.skip_reason.clone(),
        failure: s.failure.as_ref().map(failure_view),
        done: s.partial.map(|p| p.done),
        total: s.partial.and_then(|p| p.total),
    }
}

impl From<&HistoryEntry> for HistoryEntryView {
    fn from(entry: &HistoryEntry) -> Self {
        let mut fields = match serde_json::to_value(&entry.event) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        let event = match fields.remove("event") {
            Some(Value::String(name)) => name,
            _ => String::new(),
        };
        if let HistoryEvent::StepRetrying { retry_at, .. } = &entry.event {
            fields.insert("retry_at".into(), Value::String(rfc3339(*retry_at)));
        }
        if let HistoryEvent::Snoozed { until, .. } = &entry.event {
            fields.insert("until".into(), Value::String(rfc3339(*until)));
        }
        Self { id: entry.id, at: rfc3339(entry.at), event, fields }
    }
}

impl From<&crate::engine::LogLine> for LogLineView {
    fn from(l: &crate::engine::LogLine) -> Self {
        Self {
            seq: l.seq,
            at: rfc3339(l.at),
            step: l.step.clone(),
            attempt: l.attempt,
            level: l.level.as_str().to_owned(),
            stream: l.stream.as_str().to_owned(),
            message: l.message.clone(),
        }
    }
}

/// A view of `record`, with its history when given.
pub fn job_view(record: &JobRecord, history: Option<&[HistoryEntry]>) -> JobView {
    let job = &record.job;
    let (input, input_withheld) = shown(&record.payload);
    JobView {
        id: job.id.to_string(),
        kind: record.kind.clone(),
        kind_version: record.kind_version,
        state: job.state.as_str().to_owned(),
        progress: job.progress,
        priority: record.priority.as_str().to_owned(),
        pass: job.pass,
        created_at: rfc3339(job.created_at),
        run_at: rfc3339(job.run_at),
        started_at: job.started_at.map(rfc3339),
        settled_at: job.settled_at.map(rfc3339),
        failure: job.failure.as_ref().map(failure_view),
        claimed: job.claim.is_some(),
        pause_requested: job.requests.pause.is_some(),
        cancel_requested: job.requests.cancel.as_ref().map(|c| CancelRequestView {
            actor: c.actor.0.clone(),
            reason: c.reason.clone(),
            at: rfc3339(c.at),
        }),
        restart_requested: job.requests.restart.is_some(),
        predecessor: job.predecessor.map(|p| p.to_string()),
        successor: job.successor.map(|s| s.to_string()),
        idempotency_key: record.idempotency_key.clone(),
        parent: job.parent.as_ref().map(|p| p.job.to_string()),
        children: (job.fan_outs > 0).then(|| format!("/v1/jobs?parent={}", job.id)),
        waiting_for: job.wait.as_ref().and_then(|w| serde_json::to_value(w).ok()),
        pending_signals: job.signals.clone(),
        lease_keys: record
            .lease_keys
            .iter()
            .map(|k| crate::engine::untenant_key(&record.tenant, k).to_owned())
            .collect(),
        input,
        input_withheld,
        steps: job.steps.iter().map(step_view).collect(),
        record: spindle_core::Record::of(&job.rules).as_str().to_owned(),
        history: history.map(|entries| entries.iter().map(Into::into).collect()),
        outbound: None,
        actions: None,
        logs_capped: None,
    }
}

impl From<&JobRecord> for JobSummaryView {
    fn from(r: &JobRecord) -> Self {
        Self {
            id: r.job.id.to_string(),
            kind: r.kind.clone(),
            kind_version: r.kind_version,
            state: r.job.state.as_str().to_owned(),
            progress: r.job.progress,
            priority: r.priority.as_str().to_owned(),
            idempotency_key: r.idempotency_key.clone(),
            created_at: rfc3339(r.job.created_at),
            settled_at: r.job.settled_at.map(rfc3339),
            failure_code: r.job.failure.as_ref().map(|f| f.code.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use spindle_core::Timestamp;

    use super::*;

    #[test]
    fn a_history_entry_shows_its_time_its_event_and_the_event_fields() {
        let entry = HistoryEntry {
            id: 1,
            at: Timestamp::EPOCH,
            event: HistoryEvent::StepStarted { step: "a".into(), attempt: 2 },
        };
        let view = HistoryEntryView::from(&entry);
        let json = serde_json::to_value(&view).expect("serialises");
        assert_eq!(
            json,
            serde_json::json!({
                "id": 1,
                "at": "1970-01-01T00:00:00.000000Z",
                "event": "step_started",
                "step": "a",
                "attempt": 2,
            })
        );
        let back: HistoryEntryView = serde_json::from_value(json).expect("decodes");
        assert_eq!(back, view);
    }
}
