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
    steps: Vec<StepDecl>,
    cancellable: bool,
    retry: RetryPolicy,
    failure_effect: bool,
    notify_on_success: bool,
    input_schema: Option<String>,
}

/// One declared step: its key, weight and the schema its output follows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StepDecl {
    key: String,
    weight: u32,
    output_schema: Option<String>,
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
        self.steps.push(StepDecl { key: key.into(), weight, output_schema: None });
        self
    }

    /// Declares that the step declared last completes with a `T` (as JSON): its JSON
    /// Schema, derived by `schemars`, is shown with the kind (`spindle kinds KIND`).
    ///
    /// ```
    /// # use spindle_guest::KindSpec;
    /// #[derive(schemars::JsonSchema)]
    /// struct Receipt { charge_id: String }
    ///
    /// let spec = KindSpec::new("payment-saga").step("capture", 1).output::<Receipt>();
    /// # let wit = spec.into_wit();
    /// # assert!(wit.steps[0].output_schema.as_deref().unwrap().contains("charge_id"));
    /// ```
    ///
    /// # Panics
    ///
    /// If no step is declared yet: an output belongs to a step.
    pub fn output<T: schemars::JsonSchema>(mut self) -> Self {
        let step = self.steps.last_mut().expect("`output` follows the `step` whose output it describes");
        step.output_schema = Some(schema_text::<T>());
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

    /// Declares that a job's input is a `T` (as JSON): its JSON Schema, derived by
    /// `schemars` from the type (and its `serde` attributes), is what the host checks
    /// submissions against. Doc comments become descriptions; `#[schemars(example =
    /// ...)]` gives the example `spindle kinds` prints.
    ///
    /// ```
    /// # use spindle_guest::KindSpec;
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Input {
    ///     /// Who to greet.
    ///     name: String,
    ///     #[serde(default)]
    ///     shout: bool,
    /// }
    ///
    /// let spec = KindSpec::new("greeting").input::<Input>().step("greet", 1);
    /// # let wit = spec.into_wit();
    /// # let schema: serde_json::Value = serde_json::from_str(wit.input_schema.as_deref().unwrap()).unwrap();
    /// # assert_eq!(schema["required"], serde_json::json!(["name"]));
    /// ```
    pub fn input<T: schemars::JsonSchema>(self) -> Self {
        self.input_schema(schema_text::<T>())
    }

    /// The kind's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared step keys, in order.
    pub fn step_keys(&self) -> impl Iterator<Item = &str> {
        self.steps.iter().map(|step| step.key.as_str())
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
                .map(|StepDecl { key, weight, output_schema }| wit::StepSpec { key, weight, output_schema })
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

/// `T`'s JSON Schema (draft 2020-12) as compact text.
fn schema_text<T: schemars::JsonSchema>() -> String {
    serde_json::to_string(&schemars::schema_for!(T)).unwrap_or_else(|_| "{}".into())
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

    /// The derived schema is what a host's validator reads: required fields, types,
    /// serde's renames and defaults.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn input_and_output_schemas_are_derived_from_types() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Order {
            #[serde(rename = "order_id")]
            id: String,
            amount_cents: u32,
            #[serde(default)]
            gift: bool,
        }
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Shipped {
            tracking: String,
        }
        let wit =
            KindSpec::new("orders").input::<Order>().step("ship", 1).output::<Shipped>().step("notify", 1).into_wit();
        let input: serde_json::Value = serde_json::from_str(wit.input_schema.as_deref().unwrap()).unwrap();
        assert_eq!(input["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert_eq!(input["required"], serde_json::json!(["order_id", "amount_cents"]));
        assert_eq!(input["properties"]["amount_cents"]["type"], "integer");
        let output: serde_json::Value = serde_json::from_str(wit.steps[0].output_schema.as_deref().unwrap()).unwrap();
        assert_eq!(output["required"], serde_json::json!(["tracking"]));
        assert_eq!(wit.steps[1].output_schema, None);
    }

    #[test]
    fn defaults_are_conservative() {
        let wit = KindSpec::new("noop").step("run", 1).into_wit();
        assert!(!wit.cancellable && !wit.has_failure_effect && !wit.notifies_on_success);
        assert_eq!(wit.retry.max_attempts, 3);
        assert_eq!(wit.input_schema, None);
    }
}
