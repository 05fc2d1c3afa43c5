//! Runs a kind's jobs natively, without a host, for the kind's own unit tests.
//!
//! [`run_job`] drives the steps the way the host's contract describes: declared order,
//! `more` calls again with the cursor, `retryable` retries up to the kind's
//! `max-attempts`, `refused` fails the job, and the hooks run when the spec asks for
//! them. It does not wait: backoff and snoozes are skipped, leases and cancellation do
//! not exist, and heartbeats always proceed. It checks the kind's logic, not the host.
//!
//! What a step reaches through the host is set per test thread (each test runs on its
//! own): deployment settings with [`set_config`], tenant secrets with [`set_secret`],
//! the upstream of outbound requests with [`set_http_handler`]. Nothing is set at first.
//!
//! ```
//! use spindle_guest::prelude::*;
//! use spindle_guest::testing::run_job;
//!
//! struct Flaky;
//!
//! impl Kind for Flaky {
//!     fn describe() -> KindSpec {
//!         KindSpec::new("flaky").step("call", 1).retry(3, 10, 10)
//!     }
//!
//!     fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
//!         if step.attempt() < 3 {
//!             return Err(StepError::retryable("upstream-unavailable", "try again"));
//!         }
//!         Ok(Outcome::complete(&step.attempt()))
//!     }
//! }
//!
//! let run = run_job::<Flaky>(b"{}");
//! assert!(run.succeeded());
//! assert_eq!(run.output::<u32>("call"), Some(3));
//! assert_eq!(run.calls.len(), 3);
//! ```

use serde::de::DeserializeOwned;

use crate::bindings::spindle::job::types as wit;
use crate::{Failure, JobSummary, Kind, Step};

/// Sets the deployment setting `name` that [`config::get`](crate::config::get) returns
/// on this thread.
#[cfg(not(target_arch = "wasm32"))]
pub fn set_config(name: impl Into<String>, value: impl Into<String>) {
    crate::local_host::set_setting(name.into(), value.into());
}

/// Sets the tenant's secret `name` on this thread: [`config::secret`](crate::config::secret)
/// then returns a placeholder for it, [`config::hmac_sha256`](crate::config::hmac_sha256)
/// signs with it, and the HTTP handler sees it in place of its placeholder in request
/// headers, as an upstream would.
#[cfg(not(target_arch = "wasm32"))]
pub fn set_secret(name: impl Into<String>, value: impl Into<String>) {
    crate::local_host::set_secret(name.into(), value.into());
}

/// Answers this thread's outbound requests ([`http::Request::send`](crate::http::Request::send))
/// with `handler`, which stands in for every upstream. Without one, a send fails with
/// [`HttpError::Other`](crate::http::HttpError::Other).
///
/// ```
/// use spindle_guest::http::{HttpError, Request, Response};
/// use spindle_guest::testing;
///
/// testing::set_secret("token", "s3cr3t");
/// testing::set_http_handler(|request| match request.url() {
///     "https://api.example.com/ping" => Ok(Response::new(200, "pong")),
///     _ => Err(HttpError::Denied),
/// });
/// let token = spindle_guest::config::secret("token").expect("set");
/// let response = Request::get("https://api.example.com/ping").header("authorization", token).send();
/// assert_eq!(response.map(|r| r.into_body()), Ok(b"pong".to_vec()));
/// assert_eq!(Request::get("https://elsewhere.example.com/").send(), Err(HttpError::Denied));
/// ```
#[cfg(not(target_arch = "wasm32"))]
pub fn set_http_handler(
    handler: impl Fn(&crate::http::Request) -> Result<crate::http::Response, crate::http::HttpError> + 'static,
) {
    crate::local_host::set_http_handler(std::rc::Rc::new(handler));
}

/// Forgets this thread's settings, secrets and HTTP handler.
#[cfg(not(target_arch = "wasm32"))]
pub fn reset() {
    crate::local_host::reset();
}

/// The job id [`run_job`] hands to every step.
pub const LOCAL_JOB_ID: &str = "00000000-0000-7000-8000-000000000000";

/// Calls of one step (including `more` continuations and snoozes) before [`run_job`]
/// gives up on it, so a kind that never settles fails its test instead of hanging it.
pub const MAX_CALLS_PER_STEP: usize = 100_000;

/// One call of `run_step` and what it reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The step's key.
    pub step: String,
    /// The attempt, from 1.
    pub attempt: u32,
    /// The cursor the call received.
    pub cursor: Option<String>,
    /// What it reported.
    pub outcome: wit::StepOutcome,
}

/// What happened to a job run by [`run_job`].
#[derive(Debug, Clone)]
pub struct JobRun {
    /// Every call, in order.
    pub calls: Vec<Call>,
    /// Outputs of the steps that completed, in order.
    pub outputs: Vec<(String, Vec<u8>)>,
    /// Why the job failed, if it did.
    pub failure: Option<Failure>,
    /// What the failure or success hook returned, if the spec asked for it.
    pub hook: Option<Result<(), Failure>>,
}

impl JobRun {
    /// Whether every step completed or skipped.
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }

    /// A completed step's output deserialised from JSON; `None` if it did not
    /// complete or does not deserialise as `T`.
    pub fn output<T: DeserializeOwned>(&self, step: &str) -> Option<T> {
        let (_, bytes) = self.outputs.iter().find(|(key, _)| key == step)?;
        serde_json::from_slice(bytes).ok()
    }

    /// The calls of one step.
    pub fn calls_of<'a>(&'a self, step: &'a str) -> impl Iterator<Item = &'a Call> + 'a {
        self.calls.iter().filter(move |call| call.step == step)
    }
}

/// Runs one job of `K` with `payload` to its end.
pub fn run_job<K: Kind>(payload: &[u8]) -> JobRun {
    let spec = K::describe();
    let max_attempts = spec.retry_policy().max_attempts.max(1);
    let wit = spec.into_wit();
    let mut run = JobRun { calls: Vec::new(), outputs: Vec::new(), failure: None, hook: None };

    'steps: for step_spec in &wit.steps {
        let mut attempt = 1;
        let mut cursor = None;
        let mut calls = 0;
        loop {
            calls += 1;
            if calls > MAX_CALLS_PER_STEP {
                run.failure = Some(Failure {
                    code: "call-limit".into(),
                    message: format!("step `{}` did not settle in {MAX_CALLS_PER_STEP} calls", step_spec.key),
                });
                break 'steps;
            }
            let input = wit::StepInput {
                job_id: LOCAL_JOB_ID.into(),
                step: step_spec.key.clone(),
                attempt,
                idempotency_key: format!("{LOCAL_JOB_ID}/{}", step_spec.key),
                payload: payload.to_vec(),
                prior: run
                    .outputs
                    .iter()
                    .map(|(step, output)| wit::PriorOutput { step: step.clone(), output: output.clone() })
                    .collect(),
                cursor: cursor.clone(),
                awaited: None,
            };
            let mut step = Step::from_input(input);
            let outcome = match K::run_step(&mut step) {
                Ok(outcome) => outcome,
                Err(error) => error.into(),
            }
            .into_wit();
            run.calls.push(Call {
                step: step_spec.key.clone(),
                attempt,
                cursor: cursor.clone(),
                outcome: outcome.clone(),
            });
            match outcome {
                wit::StepOutcome::Complete(output) => {
                    run.outputs.push((step_spec.key.clone(), output));
                    continue 'steps;
                }
                wit::StepOutcome::Skip(_) => continue 'steps,
                wit::StepOutcome::More(checkpoint) => cursor = Some(checkpoint.cursor),
                wit::StepOutcome::Snooze(_) => {}
                wit::StepOutcome::Retryable(failure) if attempt >= max_attempts => {
                    run.failure = Some(failure);
                    break 'steps;
                }
                wit::StepOutcome::Retryable(_) => {
                    attempt += 1;
                    cursor = None;
                }
                wit::StepOutcome::Refused(failure) => {
                    run.failure = Some(failure);
                    break 'steps;
                }
                // The host refuses these for now; the SDK never reports them.
                wit::StepOutcome::AwaitChildren(_) | wit::StepOutcome::AwaitSignal(_) => {
                    run.failure = Some(Failure {
                        code: "unsupported-outcome".into(),
                        message: format!("step `{}` reported an await outcome", step_spec.key),
                    });
                    break 'steps;
                }
            }
        }
    }

    let summary = || {
        JobSummary::from_wit(wit::JobSummary {
            job_id: LOCAL_JOB_ID.into(),
            payload: payload.to_vec(),
            outputs: run
                .outputs
                .iter()
                .map(|(step, output)| wit::PriorOutput { step: step.clone(), output: output.clone() })
                .collect(),
            failure: run.failure.clone(),
        })
    };
    let hook = match &run.failure {
        Some(_) if wit.has_failure_effect => Some(K::on_failure(&summary())),
        None if wit.notifies_on_success => Some(K::on_success(&summary())),
        _ => None,
    };
    run.hook = hook.map(|result| result.map_err(crate::StepError::into_failure));
    run
}
