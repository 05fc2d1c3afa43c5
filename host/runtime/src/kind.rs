//! What a component says about itself (`describe`), validated.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::schema::InputSchema;

/// Longest kind name or step key.
pub const MAX_NAME_LEN: usize = 64;
/// Most steps a kind may declare.
pub const MAX_STEPS: usize = 64;
/// Most attempts a retry policy may ask for.
pub const MAX_ATTEMPTS: u32 = 100;
/// Longest first backoff a retry policy may ask for: one hour. A step waiting longer
/// between attempts is a schedule, which a snooze or a delayed submission says better.
pub const MAX_INITIAL_BACKOFF_MS: u32 = 3_600_000;
/// Longest backoff ceiling a retry policy may ask for: one day. With the attempt limit
/// it bounds how long a failing job keeps a step open (at most 100 days of retries).
pub const MAX_BACKOFF_MS: u32 = 86_400_000;

/// One declared step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepSpec {
    /// The step's key.
    pub key: String,
    /// Its progress weight.
    pub weight: u32,
    /// JSON Schema its output follows, if declared (contract 0.2.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<String>,
}

/// A kind's retry policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetrySpec {
    /// Attempts per step, the first included.
    pub max_attempts: u32,
    /// First backoff, in milliseconds.
    pub initial_backoff_ms: u32,
    /// Backoff ceiling, in milliseconds.
    pub max_backoff_ms: u32,
}

/// A kind's description, as `describe` answered it and validation accepted it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindSpec {
    /// The name the component gives itself.
    pub name: String,
    /// Ordered steps.
    pub steps: Vec<StepSpec>,
    /// Whether jobs may be cancelled.
    pub cancellable: bool,
    /// Retry policy.
    pub retry: RetrySpec,
    /// Whether `on-failure` must run when a job fails.
    pub has_failure_effect: bool,
    /// Whether `on-success` must run when a job succeeds.
    pub notifies_on_success: bool,
    /// JSON Schema a job's input must follow, if declared (contract 0.2.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<String>,
}

/// Longest schema a kind may declare, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// Why a description is unacceptable.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SpecError {
    /// The kind's name is empty, too long or has characters outside `[a-z0-9-_.]`.
    #[error("invalid kind name {0:?}: 1-64 characters of a-z, 0-9, '-', '_' or '.'")]
    BadName(String),
    /// The kind declares no step, or too many.
    #[error("a kind declares between 1 and {MAX_STEPS} steps, not {0}")]
    StepCount(usize),
    /// A step key is empty, too long or has odd characters.
    #[error("invalid step key {0:?}: 1-64 characters of a-z, 0-9, '-', '_' or '.'")]
    BadStepKey(String),
    /// Two steps share a key.
    #[error("step key {0:?} is declared twice")]
    DuplicateStep(String),
    /// The retry policy asks for no attempt, or too many.
    #[error("max-attempts must be between 1 and {MAX_ATTEMPTS}, not {0}")]
    Attempts(u32),
    /// The retry policy's first backoff is longer than allowed.
    #[error("initial-backoff-ms must be at most {MAX_INITIAL_BACKOFF_MS} (one hour), not {0}")]
    InitialBackoff(u32),
    /// The retry policy's backoff ceiling is longer than allowed.
    #[error("max-backoff-ms must be at most {MAX_BACKOFF_MS} (one day), not {0}")]
    MaxBackoff(u32),
    /// A declared schema is too large, or is not a JSON Schema the host can enforce.
    #[error("the {what} schema {reason}")]
    Schema {
        /// Which schema: `input`, or a step's output.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Whether `name` is a valid kind name or step key.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'))
}

impl KindSpec {
    /// Validates a description a guest returned.
    pub(crate) fn new(
        name: String,
        steps: Vec<StepSpec>,
        cancellable: bool,
        retry: RetrySpec,
        (has_failure_effect, notifies_on_success): (bool, bool),
        input_schema: Option<String>,
    ) -> Result<Self, SpecError> {
        let spec = Self {
            name,
            steps,
            cancellable,
            retry: RetrySpec { max_backoff_ms: retry.max_backoff_ms.max(retry.initial_backoff_ms), ..retry },
            has_failure_effect,
            notifies_on_success,
            input_schema,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the description's invariants.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !is_valid_name(&self.name) {
            return Err(SpecError::BadName(self.name.clone()));
        }
        if self.steps.is_empty() || self.steps.len() > MAX_STEPS {
            return Err(SpecError::StepCount(self.steps.len()));
        }
        let mut seen = std::collections::HashSet::new();
        for step in &self.steps {
            if !is_valid_name(&step.key) {
                return Err(SpecError::BadStepKey(step.key.clone()));
            }
            if !seen.insert(step.key.as_str()) {
                return Err(SpecError::DuplicateStep(step.key.clone()));
            }
        }
        let schemas = std::iter::once(("input".to_owned(), &self.input_schema))
            .chain(self.steps.iter().map(|s| (format!("`{}` output", s.key), &s.output_schema)));
        for (what, schema) in schemas {
            let Some(schema) = schema else { continue };
            if schema.len() > MAX_SCHEMA_BYTES {
                return Err(SpecError::Schema { what, reason: format!("is over {MAX_SCHEMA_BYTES} bytes") });
            }
            if let Err(reason) = InputSchema::compile(schema) {
                return Err(SpecError::Schema {
                    what,
                    reason: format!("is not a JSON Schema the host can enforce: {reason}"),
                });
            }
        }
        if self.retry.max_attempts == 0 || self.retry.max_attempts > MAX_ATTEMPTS {
            return Err(SpecError::Attempts(self.retry.max_attempts));
        }
        if self.retry.initial_backoff_ms > MAX_INITIAL_BACKOFF_MS {
            return Err(SpecError::InitialBackoff(self.retry.initial_backoff_ms));
        }
        if self.retry.max_backoff_ms > MAX_BACKOFF_MS {
            return Err(SpecError::MaxBackoff(self.retry.max_backoff_ms));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(retry: RetrySpec) -> KindSpec {
        KindSpec {
            name: "k".into(),
            steps: vec![StepSpec { key: "a".into(), weight: 1, output_schema: None }],
            cancellable: false,
            retry,
            has_failure_effect: false,
            notifies_on_success: false,
            input_schema: None,
        }
    }

    /// A retry policy of u32::MAX ms (about 50 days) between attempts was accepted.
    #[test]
    fn retry_backoffs_are_bounded_at_deploy() {
        let ok = RetrySpec { max_attempts: 5, initial_backoff_ms: 100, max_backoff_ms: 60_000 };
        assert_eq!(spec(ok).validate(), Ok(()));
        for retry in [
            RetrySpec { initial_backoff_ms: u32::MAX, max_backoff_ms: u32::MAX, ..ok },
            RetrySpec { max_backoff_ms: u32::MAX, ..ok },
        ] {
            assert!(spec(retry).validate().is_err(), "{retry:?} was accepted");
        }
    }
}
