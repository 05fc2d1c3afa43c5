//! What the failure and success hooks receive.

use serde::de::DeserializeOwned;

use crate::bindings::spindle::job::types as wit;
use crate::outcome::{StepError, json_error};

pub use wit::Failure;

/// A settled job as handed to [`Kind::on_failure`](crate::Kind::on_failure) and
/// [`Kind::on_success`](crate::Kind::on_success).
#[derive(Debug)]
pub struct JobSummary(wit::JobSummary);

impl JobSummary {
    /// Wraps the host's summary; public so hooks can be unit-tested natively.
    pub fn from_wit(summary: wit::JobSummary) -> Self {
        Self(summary)
    }

    /// The job's id; stable, so hooks can use it to be idempotent.
    pub fn job_id(&self) -> &str {
        &self.0.job_id
    }

    /// The job's input as submitted, raw.
    pub fn payload(&self) -> &[u8] {
        &self.0.payload
    }

    /// The job's input deserialised from JSON (refused `invalid-input` if it does not).
    pub fn input<T: DeserializeOwned>(&self) -> Result<T, StepError> {
        serde_json::from_slice(&self.0.payload).map_err(|e| json_error("invalid-input", "the job's input", &e))
    }

    /// The raw output of a step that completed, if it did.
    pub fn output_bytes(&self, step: &str) -> Option<&[u8]> {
        self.0.outputs.iter().find(|output| output.step == step).map(|output| output.output.as_slice())
    }

    /// The JSON output of a step that completed, or `None` if it did not complete.
    pub fn output<T: DeserializeOwned>(&self, step: &str) -> Result<Option<T>, StepError> {
        self.output_bytes(step)
            .map(|bytes| {
                serde_json::from_slice(bytes)
                    .map_err(|e| json_error("invalid-prior", &format!("the output of step `{step}`"), &e))
            })
            .transpose()
    }

    /// Why the job failed; `None` in `on_success`.
    pub fn failure(&self) -> Option<&Failure> {
        self.0.failure.as_ref()
    }
}
