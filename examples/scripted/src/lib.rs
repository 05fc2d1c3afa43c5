//! Kind `scripted`: steps `first`, `second` and `third` behave as the job's input says,
//! per step and per attempt, so the host's tests and demos can drive every outcome.
//!
//! Input: `{"first": ["retryable", "complete"], "second": "skip", "third": "complete"}`.
//! An entry is one action or a list indexed by attempt - 1 whose last entry repeats; a
//! missing entry means `complete`. Actions:
//!
//! | action | what the step does |
//! |---|---|
//! | `complete` | completes with `{"step": key, "attempt": n}` |
//! | `skip` | skips |
//! | `retryable` | fails retryable, code `scripted-retryable` |
//! | `refused` | fails refused, code `scripted-refused` |
//! | `more:N` | does one of N slices per call (`more` with the slice count as cursor, logging `slice K of N` at debug), completes on the Nth |
//! | `snooze:S` | snoozes about S seconds once, then completes (see below) |
//! | `wait-for-stop` | heartbeats every 5 ms until told to stop, then fails retryable `stopped`; after ~20 s, retryable `not-stopped` |
//! | `heartbeat-then-complete` | heartbeats once with progress, then completes whatever the reply |
//!
//! A snooze carries no cursor, so a step called again after one sees exactly the input
//! it saw before. `snooze:S` therefore first saves a deadline (`more` with cursor
//! `{"snooze_until_ms": …}`), then snoozes until the guest's wall clock passes it.
//!
//! Cancellable; `on_failure` logs `failure effect ran` at warn; `on_success` logs;
//! 3 attempts, 10 ms backoff doubling to 50 ms.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use spindle_guest::prelude::*;

struct Scripted;

/// One step's script: an action, or one per attempt with the last repeating.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum Script {
    Always(String),
    PerAttempt(Vec<String>),
}

impl Script {
    fn for_attempt(&self, attempt: u32) -> &str {
        match self {
            Self::Always(action) => action,
            Self::PerAttempt(actions) => {
                let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
                actions.get(index).or(actions.last()).map_or("complete", String::as_str)
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Complete,
    Skip,
    Retryable,
    Refused,
    More { slices: u64 },
    Snooze { seconds: u32 },
    WaitForStop,
    HeartbeatThenComplete,
}

impl FromStr for Action {
    type Err = StepError;

    fn from_str(text: &str) -> Result<Self, StepError> {
        let invalid = || {
            StepError::refused("invalid-input", "the script names an unknown action")
                .with_detail(format!("action {text:?}"))
        };
        Ok(match text {
            "complete" => Self::Complete,
            "skip" => Self::Skip,
            "retryable" => Self::Retryable,
            "refused" => Self::Refused,
            "wait-for-stop" => Self::WaitForStop,
            "heartbeat-then-complete" => Self::HeartbeatThenComplete,
            _ => match text.split_once(':') {
                Some(("more", n)) => Self::More { slices: n.parse().map_err(|_| invalid())? },
                Some(("snooze", s)) => Self::Snooze { seconds: s.parse().map_err(|_| invalid())? },
                _ => return Err(invalid()),
            },
        })
    }
}

/// What a completed step reports.
#[derive(Serialize)]
struct Completed<'a> {
    step: &'a str,
    attempt: u32,
}

/// The cursor `snooze:S` saves before it snoozes.
#[derive(Serialize, Deserialize)]
struct SnoozeCursor {
    snooze_until_ms: u64,
}

/// Heartbeats 5 ms apart before `wait-for-stop` gives up: about 20 s.
const WAIT_FOR_STOP_BEATS: u32 = 4_000;

impl Kind for Scripted {
    fn describe() -> KindSpec {
        KindSpec::new("scripted")
            // Step key → its script; none at all (`null`) is allowed.
            .input::<Option<BTreeMap<String, Script>>>()
            .step("first", 1)
            .step("second", 1)
            .step("third", 1)
            .cancellable()
            .retry(3, 10, 50)
            .failure_effect()
            .notify_on_success()
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        // No input (`null`): every step completes.
        let scripts: BTreeMap<String, Script> = step.input::<Option<_>>()?.unwrap_or_default();
        let action: Action =
            scripts.get(step.key()).map_or("complete", |script| script.for_attempt(step.attempt())).parse()?;
        let completed = |step: &Step| Outcome::complete(&Completed { step: step.key(), attempt: step.attempt() });
        match action {
            Action::Complete => Ok(completed(step)),
            Action::Skip => Ok(Outcome::skip("the script says skip")),
            Action::Retryable => Err(StepError::retryable("scripted-retryable", "the script says fail retryable")),
            Action::Refused => Err(StepError::refused("scripted-refused", "the script says refuse")),
            Action::More { slices } => {
                let done = step.cursor_json::<u64>()?.unwrap_or(0) + 1;
                // Which slice each call runs, so a test can see where a rescued step resumed.
                log::debug(format!("slice {done} of {slices}"));
                if done >= slices { Ok(completed(step)) } else { Ok(Outcome::more(done.to_string(), done, slices)) }
            }
            Action::Snooze { seconds } => {
                let now = unix_ms()?;
                match step.cursor_json::<SnoozeCursor>()? {
                    None => Ok(Outcome::more_json(
                        &SnoozeCursor { snooze_until_ms: now + u64::from(seconds) * 1_000 },
                        0,
                        1,
                    )),
                    Some(cursor) if now < cursor.snooze_until_ms => {
                        let left_ms = cursor.snooze_until_ms - now;
                        let left_s = u32::try_from(left_ms.div_ceil(1_000)).unwrap_or(u32::MAX);
                        Ok(Outcome::snooze(left_s))
                    }
                    Some(_) => Ok(completed(step)),
                }
            }
            Action::WaitForStop => {
                for _ in 0..WAIT_FOR_STOP_BEATS {
                    if step.heartbeat(None).should_stop() {
                        return Err(StepError::retryable("stopped", "stopped when the host said so"));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(StepError::retryable("not-stopped", "the host never said stop"))
            }
            Action::HeartbeatThenComplete => {
                let reply = step.heartbeat(Some(Checkpoint::new("half", 1, 2)));
                log::info(format!("heartbeat answered {reply:?}"));
                Ok(completed(step))
            }
        }
    }

    fn on_failure(job: &JobSummary) -> Result<(), StepError> {
        log::warn(format!("failure effect ran for job {}", job.job_id()));
        Ok(())
    }

    fn on_success(job: &JobSummary) -> Result<(), StepError> {
        log::info(format!("success notification ran for job {}", job.job_id()));
        Ok(())
    }
}

/// The guest's wall clock in milliseconds since the Unix epoch.
fn unix_ms() -> Result<u64, StepError> {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| StepError::retryable("clock-before-epoch", "the wall clock reads before 1970"))?;
    Ok(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
}

spindle_guest::export_kind!(Scripted);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_attempt_lists_repeat_their_last_entry() {
        let script = Script::PerAttempt(vec!["retryable".into(), "complete".into()]);
        assert_eq!(script.for_attempt(1), "retryable");
        assert_eq!(script.for_attempt(2), "complete");
        assert_eq!(script.for_attempt(9), "complete");
        assert_eq!(Script::PerAttempt(Vec::new()).for_attempt(1), "complete");
    }

    #[test]
    fn actions_parse_with_their_arguments() {
        assert_eq!("more:3".parse(), Ok(Action::More { slices: 3 }));
        assert_eq!("snooze:2".parse(), Ok(Action::Snooze { seconds: 2 }));
        assert!("more:x".parse::<Action>().is_err());
        assert!("explode".parse::<Action>().is_err());
    }
}

#[cfg(test)]
mod job_tests {
    use spindle_guest::testing::run_job;

    use super::*;

    #[test]
    fn follows_the_script_per_attempt() {
        let run = run_job::<Scripted>(br#"{"first": ["retryable", "complete"], "second": "skip", "third": "more:3"}"#);
        assert!(run.succeeded(), "{:?}", run.failure);
        assert_eq!(run.calls_of("first").count(), 2);
        assert_eq!(run.calls_of("third").count(), 3);
        let first: serde_json::Value = run.output("first").expect("first completed");
        assert_eq!(first, serde_json::json!({"step": "first", "attempt": 2}));
        assert!(run.output::<serde_json::Value>("second").is_none());
    }

    #[test]
    fn refusal_fails_the_job_and_runs_the_failure_effect() {
        let run = run_job::<Scripted>(br#"{"second": "refused"}"#);
        assert_eq!(run.failure.map(|f| f.code), Some("scripted-refused".to_owned()));
        assert_eq!(run.hook, Some(Ok(())));
        assert_eq!(run.calls.len(), 2);
    }

    #[test]
    fn retryable_exhausts_three_attempts() {
        let run = run_job::<Scripted>(br#"{"first": "retryable"}"#);
        assert_eq!(run.calls_of("first").count(), 3);
        assert!(!run.succeeded());
    }
}
