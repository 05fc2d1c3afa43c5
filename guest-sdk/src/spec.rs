//! The builder behind [`Kind::describe`](crate::Kind::describe).

use crate::bindings::spindle::job::types as wit;

/// What a kind declares about itself: its name, ordered steps and policies.
///
/// The host reads it once per deployed version, so it must not depend on any input.
///
/// ```
/// use spindle_guest::KindSpec;
///
/// let spec = KindSpec::new("payment-saga")
///     .step("authorise", 1)
///     .step("capture", 3)
///     .retry(4, 10, 200)
///     .failure_effect();
/// assert_eq!(spec.step_keys().collect::<Vec<_>>(), ["authorise", "capture"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a KindSpec only takes effect when `describe` returns it"]
pub struct KindSpec {
    name: String,
    steps: Vec<(String, u32)>,
    cancellable: bool,
    retry: RetryPolicy,
    failure_effect: bool,
    notify_on_success: bool,
    input_schema: Option<String>,
}

/// How the host retries a step that ends `retryable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Delay before the second attempt; it doubles per attempt.
    pub initial_backoff_ms: u32,
    /// Ceiling on the delay between attempts.
    pub max_backoff_ms: u32,
}

impl Default for RetryPolicy {
    /// Three attempts, 1 s then 2 s apart: enough to ride out a blip without hiding a
    /// persistent fault for long. Kinds with side effects should choose deliberately.
    fn default() -> Self {
        Self { max_attempts: 3, initial_backoff_ms: 1_000, max_backoff_ms: 60_000 }
    }
}

impl KindSpec {
    /// A kind with no steps yet, not cancellable, no hooks, the default retry policy.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            steps: Vec::new(),
            cancellable: false,
            retry: RetryPolicy::default(),
            failure_effect: false,
            notify_on_success: false,
            input_schema: None,
        }
    }

    /// Appends a step. Steps run in the order they are declared; `weight` is the step's
    /// share of the job's progress relative to the other steps (0 counts as 1).
    pub fn step(mut self, key: impl Into<String>, weight: u32) -> Self {
        self.steps.push((key.into(), weight));
        self
    }

    /// Lets callers cancel jobs of this kind; long steps should then heartbeat and stop
    /// when told to.
    pub fn cancellable(mut self) -> Self {
        self.cancellable = true;
        self
    }

    /// Sets the retry policy: `max_attempts` in all (the first included, 1 to 100),
    /// backoff starting at `initial_backoff_ms` (at most one hour) and doubling up to
    /// `max_backoff_ms` (at most one day). A host refuses to deploy a kind outside these
    /// bounds (`component.invalid-spec`).
    pub fn retry(mut self, max_attempts: u32, initial_backoff_ms: u32, max_backoff_ms: u32) -> Self {
        self.retry = RetryPolicy { max_attempts, initial_backoff_ms, max_backoff_ms };
        self
    }

    /// Asks the host to call [`Kind::on_failure`](crate::Kind::on_failure) when a job
    /// fails: the place to compensate (void, refund, release).
    pub fn failure_effect(mut self) -> Self {
        self.failure_effect = true;
        self
    }

    /// Asks the host to call [`Kind::on_success`](crate::Kind::on_success) after a job
    /// succeeds.
    pub fn notify_on_success(mut self) -> Self {
        self.notify_on_success = true;
        self
    }

    /// Declares the JSON Schema (draft 2020-12, as text) a job's input must follow. The
    /// host refuses a submission that does not before anything is queued, and refuses to
    /// deploy a kind whose schema is not a JSON object of at most 64 KiB
    /// (`component.invalid-spec`). Without one, any input is accepted.
    pub fn input_schema(mut self, schema: impl Into<String>) -> Self {
        self.input_schema = Some(schema.into());
        self
    }

    /// The kind's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared step keys, in order.
    pub fn step_keys(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().map(|(key, _)| key.as_str())
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// The WIT record handed to the host.
    pub fn into_wit(self) -> wit::KindSpec {
        wit::KindSpec {
            name: self.name,
            steps: self
                .steps
                .into_iter()
                .map(|(key, weight)| wit::StepSpec { key, weight, output_schema: None })
                .collect(),
            cancellable: self.cancellable,
            retry: wit::RetryPolicy {
                max_attempts: self.retry.max_attempts,
                initial_backoff_ms: self.retry.initial_backoff_ms,
                max_backoff_ms: self.retry.max_backoff_ms,
            },
            has_failure_effect: self.failure_effect,
            notifies_on_success: self.notify_on_success,
            input_schema: self.input_schema,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_fills_every_field_of_the_wit_record() {
        let wit = KindSpec::new("scripted")
            .step("first", 1)
            .step("second", 2)
            .cancellable()
            .retry(3, 10, 50)
            .failure_effect()
            .notify_on_success()
            .input_schema(r#"{"type": "object"}"#)
            .into_wit();
        assert_eq!(wit.name, "scripted");
        assert_eq!(wit.steps.len(), 2);
        assert_eq!(wit.steps[1].key, "second");
        assert_eq!(wit.steps[1].weight, 2);
        assert!(wit.cancellable && wit.has_failure_effect && wit.notifies_on_success);
        assert_eq!(wit.retry.max_attempts, 3);
        assert_eq!(wit.retry.initial_backoff_ms, 10);
        assert_eq!(wit.retry.max_backoff_ms, 50);
        assert_eq!(wit.input_schema.as_deref(), Some(r#"{"type": "object"}"#));
        assert!(wit.steps.iter().all(|step| step.output_schema.is_none()));
    }

    #[test]
    fn defaults_are_conservative() {
        let wit = KindSpec::new("noop").step("run", 1).into_wit();
        assert!(!wit.cancellable && !wit.has_failure_effect && !wit.notifies_on_success);
        assert_eq!(wit.retry.max_attempts, 3);
        assert_eq!(wit.input_schema, None);
    }
}
