//! Kind `greet-rust`: compose a greeting, then deliver it once per job. The same kind is
//! written in every guest language Spindle has an SDK for (`examples/greet-*`), so that
//! the test suite can hold them all to one behaviour on one host:
//!
//! - `compose` refuses an input without a non-empty `name` (`invalid-input`); asked to
//!   `explode`, it fails the language's natural way — here a panic, which the sandbox
//!   reports as the fault `sandbox.panic` with the panic message on stderr.
//! - `deliver` heartbeats, fails its first attempt when the input is `flaky`
//!   (`upstream-unavailable`, retried), and completes with what it delivered.

use serde::{Deserialize, Serialize};
use spindle_guest::prelude::*;

struct Greet;

/// The job's input.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Input {
    /// Who to greet: a host refuses an empty name at submission, and so does `compose`.
    #[schemars(length(min = 1))]
    name: String,
    #[serde(default)]
    flaky: bool,
    #[serde(default)]
    explode: bool,
}

/// `compose`'s output, read back by `deliver`.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Composed {
    text: String,
}

impl Kind for Greet {
    fn describe() -> KindSpec {
        KindSpec::new("greet-rust")
            .input::<Input>()
            .step("compose", 1)
            .output::<Composed>()
            .step("deliver", 1)
            .retry(3, 100, 1_000)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        match step.key() {
            "compose" => {
                let input: Input = step.input()?;
                if input.name.is_empty() {
                    return Err(StepError::refused("invalid-input", "`name` must be a non-empty string"));
                }
                if input.explode {
                    // On purpose: the natural uncaught failure of Rust, a panic.
                    let nicknames: Vec<&str> = Vec::new();
                    log::info(format!("nickname {}", nicknames[0]));
                }
                log::info(format!("composing a greeting for {}", input.name));
                Ok(Outcome::complete(&Composed { text: format!("Hello, {}!", input.name) }))
            }
            "deliver" => {
                let composed: Composed = step.prior("compose")?;
                let input: Input = step.input()?;
                if step.heartbeat(None).should_stop() {
                    return Err(StepError::retryable("stopped", "the host asked the step to stop"));
                }
                if input.flaky && step.attempt() == 1 {
                    return Err(StepError::retryable("upstream-unavailable", "the first attempt fails on purpose"));
                }
                // Steps run at least once: a real mailer would drop duplicates by this key.
                log::info(format!("delivered {} (key {})", composed.text, step.idempotency_key()));
                Ok(Outcome::complete(&serde_json::json!({ "delivered": composed.text, "attempt": step.attempt() })))
            }
            other => Err(StepError::unknown_step(other)),
        }
    }
}

spindle_guest::export_kind!(Greet);

#[cfg(test)]
mod tests {
    use spindle_guest::testing::run_job;

    use super::*;

    #[test]
    fn greets_once_per_job() {
        let run = run_job::<Greet>(br#"{"name": "Ada"}"#);
        assert!(run.succeeded());
        assert_eq!(
            run.output::<serde_json::Value>("deliver"),
            Some(serde_json::json!({ "delivered": "Hello, Ada!", "attempt": 1 }))
        );
    }

    #[test]
    fn refuses_an_input_without_a_name() {
        for input in [&b"{}"[..], br#"{"name": ""}"#, b"not json"] {
            let run = run_job::<Greet>(input);
            assert!(!run.succeeded());
            assert_eq!(run.failure.as_ref().map(|f| f.code.as_str()), Some("invalid-input"));
        }
    }

    #[test]
    fn a_flaky_delivery_succeeds_on_its_second_attempt() {
        let run = run_job::<Greet>(br#"{"name": "Ada", "flaky": true}"#);
        assert!(run.succeeded());
        assert_eq!(
            run.output::<serde_json::Value>("deliver").map(|o| o["attempt"].clone()),
            Some(serde_json::json!(2))
        );
    }
}
