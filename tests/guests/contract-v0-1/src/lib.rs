//! Kind `contract-v0-1`, built against the frozen `spindle:job@0.1.0` contract
//! (`wit/v0.1.0/`) with the bare bindings, as a kind compiled before 0.2.0 was: the
//! host must keep running it unchanged.
//!
//! Steps: `first` completes with `{"first": true, "payload": <the job's input>}`
//! (refused `invalid-input` if the input is not JSON); `second` logs a line, heartbeats
//! once and completes with `{"second": true, "prior": <number of prior outputs>}`, or
//! ends retryable `stopped` if the heartbeat says stop.

#[allow(unsafe_code, reason = "generated ABI glue")]
mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit/v0.1.0",
        world: "job-kind",
    });
}

use bindings::exports::spindle::job::kind::Guest;
use bindings::spindle::job::host;
use bindings::spindle::job::types::{
    Failure, HeartbeatReply, JobSummary, KindSpec, LogLevel, RetryPolicy, StepInput, StepOutcome, StepSpec,
};
use serde_json::{Value, json};

struct ContractV01;

impl Guest for ContractV01 {
    fn describe() -> KindSpec {
        KindSpec {
            name: "contract-v0-1".into(),
            steps: ["first", "second"].map(|key| StepSpec { key: key.into(), weight: 1 }).into(),
            cancellable: false,
            retry: RetryPolicy { max_attempts: 3, initial_backoff_ms: 10, max_backoff_ms: 50 },
            has_failure_effect: false,
            notifies_on_success: false,
        }
    }

    fn run_step(input: StepInput) -> StepOutcome {
        match input.step.as_str() {
            "first" => match serde_json::from_slice::<Value>(&input.payload) {
                Ok(payload) => complete(&json!({ "first": true, "payload": payload })),
                Err(_) => StepOutcome::Refused(failure("invalid-input", "the job's input is not JSON")),
            },
            "second" => {
                host::log(LogLevel::Info, &format!("contract-v0-1 second step of job {}", input.job_id));
                match host::heartbeat(None) {
                    HeartbeatReply::Proceed => complete(&json!({ "second": true, "prior": input.prior.len() })),
                    _ => StepOutcome::Retryable(failure("stopped", "stopped when the host said so")),
                }
            }
            _ => StepOutcome::Refused(failure("unknown-step", "the kind does not implement this step")),
        }
    }

    fn on_failure(_job: JobSummary) -> Result<(), Failure> {
        Ok(())
    }

    fn on_success(_job: JobSummary) -> Result<(), Failure> {
        Ok(())
    }
}

fn complete(output: &Value) -> StepOutcome {
    StepOutcome::Complete(output.to_string().into_bytes())
}

fn failure(code: &str, message: &str) -> Failure {
    Failure { code: code.into(), message: message.into() }
}

#[allow(unsafe_code, reason = "generated export glue")]
const _: () = {
    bindings::export!(ContractV01 with_types_in bindings);
};
