//! Kind `versioned`: one step, `run`, that completes with `{"version": 1}`, or
//! `{"version": 2}` when built with the `v2` feature. The host's tests deploy both to
//! check that a job keeps the version it started on.
//!
//! Input `{"spins": N}` makes `run` heartbeat N times, 5 ms apart, before completing,
//! so a test can deploy the other version while a job is in flight. A heartbeat that
//! says stop ends the step with retryable `stopped`. Input `{"v1_panics": true}` makes
//! version 1 panic (a sandbox fault) and version 2 complete: a faulty kind and its fix.

use std::time::Duration;

use serde::Deserialize;
use spindle_guest::prelude::*;

struct Versioned;

const VERSION: u32 = if cfg!(feature = "v2") { 2 } else { 1 };

#[derive(Debug, Default, Deserialize)]
struct Input {
    #[serde(default)]
    spins: u32,
    #[serde(default)]
    v1_panics: bool,
}

impl Kind for Versioned {
    fn describe() -> KindSpec {
        KindSpec::new("versioned").step("run", 1).retry(3, 10, 50)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        // An empty payload counts as `{}`: the version is what the tests look at.
        let input: Input = if step.payload().is_empty() { Input::default() } else { step.input()? };
        if input.v1_panics && VERSION == 1 {
            panic!("version 1 panics on purpose");
        }
        if input.spins > 0 {
            log::info(format!("version {VERSION} heartbeats {} times", input.spins));
        }
        for spin in 0..input.spins {
            let progress = Checkpoint::new(spin.to_string(), u64::from(spin), u64::from(input.spins));
            if step.heartbeat(Some(progress)).should_stop() {
                return Err(StepError::retryable("stopped", "stopped when the host said so"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Outcome::complete(&serde_json::json!({ "version": VERSION })))
    }
}

spindle_guest::export_kind!(Versioned);

#[cfg(test)]
mod tests {
    use spindle_guest::testing::run_job;

    use super::*;

    #[test]
    fn reports_its_version_after_the_requested_heartbeats() {
        for payload in [&br#"{"spins": 3}"#[..], b""] {
            let run = run_job::<Versioned>(payload);
            let output: serde_json::Value = run.output("run").expect("run completed");
            assert_eq!(output, serde_json::json!({ "version": VERSION }));
        }
    }
}
