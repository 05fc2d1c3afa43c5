//! Runs a kind's jobs natively, without a host, for the kind's own unit tests.
//!
//! [`run_job`] drives the steps the way the host's contract describes: declared order,
//! `more` calls again with the cursor, `retryable` retries up to the kind's
//! `max-attempts`, `refused` fails the job, and the hooks run when the spec asks for
//! them. It does not wait: backoff and snoozes are skipped, leases and cancellation do
//! not exist, and heartbeats always proceed. It checks the kind's logic, not the host.
//!
//! Workflows run at once too. An `await-children` step is called again straight away
//! with its children settled by the [`set_child_handler`] handler (without one, each
//! succeeds with its input as its output), as far as the join needs: join `all` settles
//! every child, `any` the first, `count(n)` the first `n`, and the rest are reported
//! open (no state). An `await-signal` step is called again with the first signal of that
//! name queued by [`send_signal`], which it consumes, or else with a timeout. [`JobRun`]
//! records the fan-outs and the waits.
//!
//! What a step reaches through the host is set per test thread (each test runs on its
//! own): deployment settings with [`set_config`], tenant secrets with [`set_secret`],
//! the upstream of outbound requests with [`set_http_handler`], child jobs with
//! [`set_child_handler`], signals with [`send_signal`]. Nothing is set at first.
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

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::spindle::job::types as wit;
use crate::{Awaited, ChildResult, ChildState, Failure, JobSummary, Kind, Step};

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

/// Settles the child jobs [`run_job`] is asked for on this thread: `handler` gets each
/// child's kind and input and says how it ended. Without one, every child succeeds with
/// its own input as its output (an echo), so a test can tell the children apart.
///
/// A child is settled once: a later child with the same idempotency key in the same run
/// is that job again, as the host would have it.
///
/// ```
/// use spindle_guest::testing::{self, ChildOutcome};
///
/// testing::set_child_handler(|kind, input| match kind {
///     "thumbnail" if input == b"{}" => ChildOutcome::failed("bad-image", "no image"),
///     "thumbnail" => ChildOutcome::succeeded(&serde_json::json!({"bytes": 12})),
///     _ => ChildOutcome::Cancelled,
/// });
/// ```
pub fn set_child_handler(handler: impl Fn(&str, &[u8]) -> ChildOutcome + 'static) {
    WORKFLOW.with_borrow_mut(|workflow| workflow.child_handler = Some(Rc::new(handler)));
}

/// Queues the signal `name` with `body` for the next [`run_job`] on this thread. Waits
/// for a name take that name's signals in the order they were sent, each once; a run
/// drops the signals it did not consume (see [`JobRun::signals_left`]).
pub fn send_signal(name: impl Into<String>, body: impl Into<Vec<u8>>) {
    let signal = Signal { name: name.into(), body: body.into() };
    WORKFLOW.with_borrow_mut(|workflow| workflow.signals.push_back(signal));
}

/// Forgets this thread's settings, secrets, HTTP handler, child handler and queued
/// signals.
#[cfg(not(target_arch = "wasm32"))]
pub fn reset() {
    crate::local_host::reset();
    WORKFLOW.set(LocalWorkflow::default());
}

/// What settles a child job in [`run_job`].
type ChildHandler = Rc<dyn Fn(&str, &[u8]) -> ChildOutcome>;

/// The workflow side of the stand-in host: children and signals, per test thread.
#[derive(Default)]
struct LocalWorkflow {
    child_handler: Option<ChildHandler>,
    signals: VecDeque<Signal>,
}

thread_local! {
    static WORKFLOW: RefCell<LocalWorkflow> = RefCell::default();
}

/// How a child job ended, as a [`set_child_handler`] handler says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildOutcome {
    /// It succeeded; the payload is its last step's output, if that step completed.
    Succeeded(Option<Vec<u8>>),
    /// It failed.
    Failed(Failure),
    /// It was cancelled (its result carries no failure).
    Cancelled,
}

impl ChildOutcome {
    /// Succeeded with `output` serialised as JSON; a value serde cannot write fails the
    /// child with code `invalid-output` instead.
    pub fn succeeded<T: Serialize + ?Sized>(output: &T) -> Self {
        match serde_json::to_vec(output) {
            Ok(bytes) => Self::Succeeded(Some(bytes)),
            Err(_) => Self::failed("invalid-output", "the child's output is not serialisable as JSON"),
        }
    }

    /// Failed with `code` and `message`.
    pub fn failed(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Failed(Failure { code: code.into(), message: message.into() })
    }

    /// How a job run by [`run_job`] ended, for a handler that runs the child's kind:
    /// failed with its failure, or succeeded with its last step's output.
    pub fn from_run(run: &JobRun) -> Self {
        match &run.failure {
            Some(failure) => Self::Failed(failure.clone()),
            None => Self::Succeeded(run.calls.last().and_then(|call| match &call.outcome {
                wit::StepOutcome::Complete(output) => Some(output.clone()),
                _ => None,
            })),
        }
    }

    fn into_result(self, job_id: String, kind: String) -> wit::ChildResult {
        let (state, output, failure) = match self {
            Self::Succeeded(output) => (ChildState::Succeeded, output, None),
            Self::Failed(failure) => (ChildState::Failed, None, Some(failure)),
            Self::Cancelled => (ChildState::Cancelled, None, None),
        };
        wit::ChildResult { job_id, kind, state: Some(state), output, failure }
    }
}

/// A signal sent to a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// Its name.
    pub name: String,
    /// Its body.
    pub body: Vec<u8>,
}

/// The job id [`run_job`] hands to every step.
pub const LOCAL_JOB_ID: &str = "00000000-0000-7000-8000-000000000000";

/// The id [`run_job`] gives the `n`th child job it creates in a run, from 1.
pub fn local_child_id(n: u64) -> String {
    format!("00000000-0000-7000-8001-{n:012x}")
}

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
    /// What the step waited for, when this call follows one of its await outcomes.
    pub awaited: Option<Awaited>,
    /// What it reported.
    pub outcome: wit::StepOutcome,
}

/// One `await-children` outcome and how its children were settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanOutRun {
    /// The step that reported it.
    pub step: String,
    /// The attempt of that step.
    pub attempt: u32,
    /// When the step asked to be called again.
    pub join: wit::Join,
    /// What it asked for the children still open then.
    pub leftover: wit::Leftover,
    /// The cursor it asked to be called again with.
    pub cursor: Option<String>,
    /// Its children, in the order it asked for them.
    pub children: Vec<ChildRun>,
}

/// One child of a fan-out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRun {
    /// What the step asked for.
    pub spec: wit::ChildSpec,
    /// What the step was told: open children have no state.
    pub result: ChildResult,
}

/// One `await-signal` outcome and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalWaitRun {
    /// The step that reported it.
    pub step: String,
    /// The attempt of that step.
    pub attempt: u32,
    /// The signal it waited for.
    pub name: String,
    /// Its timeout.
    pub timeout_secs: u32,
    /// The body of the signal it consumed; `None` if it timed out.
    pub body: Option<Vec<u8>>,
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
    /// Every `await-children` outcome, in order.
    pub fan_outs: Vec<FanOutRun>,
    /// Every `await-signal` outcome, in order.
    pub signal_waits: Vec<SignalWaitRun>,
    /// Signals sent with [`send_signal`] that no wait consumed.
    pub signals_left: Vec<Signal>,
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

    /// The children one step fanned out, over all its fan-outs, in order.
    pub fn children_of<'a>(&'a self, step: &'a str) -> impl Iterator<Item = &'a ChildRun> + 'a {
        self.fan_outs.iter().filter(move |fan_out| fan_out.step == step).flat_map(|fan_out| &fan_out.children)
    }

    /// The signals the job consumed, in order: name and body.
    pub fn signals_consumed(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.signal_waits.iter().filter_map(|wait| Some((wait.name.as_str(), wait.body.as_deref()?)))
    }
}

/// The child jobs of one [`run_job`]: their ids, and what those with an idempotency key
/// ended as, so that a key names one job however often it is asked for.
struct ChildJobs {
    handler: Option<ChildHandler>,
    created: u64,
    by_key: BTreeMap<String, (String, Option<ChildOutcome>)>,
}

impl ChildJobs {
    fn new(handler: Option<ChildHandler>) -> Self {
        Self { handler, created: 0, by_key: BTreeMap::new() }
    }

    /// Creates (or finds) the fan-out's children and settles as many as its join needs.
    fn fan_out(&mut self, fan_out: &wit::FanOut) -> Vec<ChildRun> {
        let settled = match fan_out.join {
            wit::Join::All => fan_out.children.len(),
            wit::Join::Any => 1,
            wit::Join::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
        };
        fan_out
            .children
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                let (job_id, known) = match spec.idempotency_key.as_ref().and_then(|key| self.by_key.get(key)) {
                    Some((job_id, known)) => (job_id.clone(), known.clone()),
                    None => {
                        self.created += 1;
                        (local_child_id(self.created), None)
                    }
                };
                let outcome = match known {
                    Some(outcome) => Some(outcome),
                    None if index < settled => Some(self.settle(spec)),
                    None => None,
                };
                // What the job is once the join is met: open ones run on, or are cancelled.
                let after_join = match (&outcome, fan_out.leftover) {
                    (None, wit::Leftover::Cancel) => Some(ChildOutcome::Cancelled),
                    _ => outcome.clone(),
                };
                if let Some(key) = &spec.idempotency_key {
                    self.by_key.insert(key.clone(), (job_id.clone(), after_join));
                }
                let result = match outcome {
                    Some(outcome) => outcome.into_result(job_id, spec.kind.clone()),
                    None => {
                        wit::ChildResult { job_id, kind: spec.kind.clone(), state: None, output: None, failure: None }
                    }
                };
                ChildRun { spec: spec.clone(), result: ChildResult::from_wit(result) }
            })
            .collect()
    }

    fn settle(&self, spec: &wit::ChildSpec) -> ChildOutcome {
        match &self.handler {
            Some(handler) => handler(&spec.kind, &spec.input),
            None => ChildOutcome::Succeeded(Some(spec.input.clone())),
        }
    }
}

/// Runs one job of `K` with `payload` to its end.
pub fn run_job<K: Kind>(payload: &[u8]) -> JobRun {
    let spec = K::describe();
    let max_attempts = spec.retry_policy().max_attempts.max(1);
    let wit = spec.into_wit();
    let mut run = JobRun {
        calls: Vec::new(),
        outputs: Vec::new(),
        failure: None,
        hook: None,
        fan_outs: Vec::new(),
        signal_waits: Vec::new(),
        signals_left: Vec::new(),
    };
    let (handler, mut signals) =
        WORKFLOW.with_borrow_mut(|workflow| (workflow.child_handler.clone(), std::mem::take(&mut workflow.signals)));
    let mut children = ChildJobs::new(handler);

    'steps: for step_spec in &wit.steps {
        let mut attempt = 1;
        let mut cursor = None;
        let mut awaited: Option<wit::Awaited> = None;
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
                awaited: awaited.take(),
            };
            let received = input.awaited.clone().map(Awaited::from_wit);
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
                awaited: received,
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
                wit::StepOutcome::AwaitChildren(fan_out) => {
                    let settled = children.fan_out(&fan_out);
                    awaited = Some(wit::Awaited::Children(
                        settled.iter().map(|child| child.result.clone().into_wit()).collect(),
                    ));
                    cursor = fan_out.cursor.clone();
                    run.fan_outs.push(FanOutRun {
                        step: step_spec.key.clone(),
                        attempt,
                        join: fan_out.join,
                        leftover: fan_out.leftover,
                        cursor: fan_out.cursor,
                        children: settled,
                    });
                }
                wit::StepOutcome::AwaitSignal(wait) => {
                    let body = signals
                        .iter()
                        .position(|signal| signal.name == wait.name)
                        .and_then(|at| signals.remove(at))
                        .map(|signal| signal.body);
                    awaited = Some(body.clone().map_or(wit::Awaited::SignalTimeout, wit::Awaited::Signal));
                    cursor = wait.cursor;
                    run.signal_waits.push(SignalWaitRun {
                        step: step_spec.key.clone(),
                        attempt,
                        name: wait.name,
                        timeout_secs: wait.timeout_secs,
                        body,
                    });
                }
            }
        }
    }
    run.signals_left = signals.into();

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

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::*;
    use crate::{Child, FanOut, KindSpec, Outcome, StepError};

    /// Fans out one child per entry of `kinds` (`passes` times), then completes with
    /// what it saw of the last pass; a second step shows the job goes on.
    struct Spread;

    #[derive(Deserialize)]
    struct Plan {
        kinds: Vec<String>,
        #[serde(default)]
        join: Option<String>,
        #[serde(default)]
        keep: bool,
        #[serde(default)]
        keyed: bool,
        #[serde(default = "one")]
        passes: u32,
        #[serde(default)]
        retry_after_first_pass: bool,
    }

    fn one() -> u32 {
        1
    }

    impl Kind for Spread {
        fn describe() -> KindSpec {
            KindSpec::new("spread").step("spread", 1).step("after", 1).retry(2, 1, 1)
        }

        fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
            if step.key() == "after" {
                return Ok(Outcome::complete("after"));
            }
            let plan: Plan = step.input()?;
            let pass = step.cursor_json::<u32>()?.unwrap_or(0);
            if let Some(children) = step.children() {
                if plan.retry_after_first_pass && step.attempt() == 1 {
                    return Err(StepError::retryable("flaky", "once"));
                }
                if pass >= plan.passes {
                    let seen: Vec<Value> = children
                        .iter()
                        .map(|child| {
                            json!({
                                "id": child.job_id(),
                                "kind": child.kind(),
                                "state": child.state().map(ChildState::as_str),
                                "output": child.output_as::<Value>().ok().flatten(),
                                "failure": child.failure().map(|failure| failure.code.clone()),
                            })
                        })
                        .collect();
                    return Ok(Outcome::complete(&seen));
                }
            }
            let fan_out = match plan.join.as_deref() {
                None | Some("all") => FanOut::all(),
                Some("any") => FanOut::any(),
                Some(count) => FanOut::count(count.parse().map_err(|_| StepError::refused("bad-join", "join"))?),
            };
            let fan_out = if plan.keep { fan_out.leftover_keep() } else { fan_out };
            let fan_out = plan.kinds.iter().enumerate().fold(fan_out, |fan_out, (index, kind)| {
                let child = Child::new(kind.as_str(), &json!({ "index": index }));
                fan_out.child(if plan.keyed { child.idempotency_key(format!("k{index}")) } else { child })
            });
            Ok(Outcome::await_children(fan_out).with_cursor_json(&(pass + 1)))
        }
    }

    /// Waits for each signal `names` lists in turn, then completes with the bodies
    /// (`null` for a timeout).
    struct Waiter;

    impl Kind for Waiter {
        fn describe() -> KindSpec {
            KindSpec::new("waiter").step("wait", 1)
        }

        fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
            let names: Vec<String> = step.input()?;
            let mut bodies: Vec<Value> = step.cursor_json()?.unwrap_or_default();
            if step.awaited().is_some() {
                bodies.push(if step.signal_timed_out() { Value::Null } else { step.signal::<Value>()?.into() });
            }
            match names.get(bodies.len()) {
                Some(name) => Ok(Outcome::await_signal(name.as_str(), 60).with_cursor_json(&bodies)),
                None => Ok(Outcome::complete(&bodies)),
            }
        }
    }

    fn spread(plan: Value) -> JobRun {
        run_job::<Spread>(plan.to_string().as_bytes())
    }

    #[test]
    fn children_echo_their_input_by_default() {
        let run = spread(json!({"kinds": ["a", "b"]}));
        assert!(run.succeeded(), "{:?}", run.failure);
        let seen: Value = run.output("spread").expect("spread completed");
        assert_eq!(
            seen,
            json!([
                {"id": local_child_id(1), "kind": "a", "state": "succeeded", "output": {"index": 0}, "failure": null},
                {"id": local_child_id(2), "kind": "b", "state": "succeeded", "output": {"index": 1}, "failure": null},
            ])
        );
        assert_eq!(run.output::<String>("after").as_deref(), Some("after"));
        assert_eq!(run.fan_outs.len(), 1);
        assert_eq!(run.fan_outs[0].cursor.as_deref(), Some("1"));
        let second_call = run.calls_of("spread").nth(1).expect("called again");
        assert_eq!(second_call.cursor.as_deref(), Some("1"));
        assert!(matches!(&second_call.awaited, Some(Awaited::Children(children)) if children.len() == 2));
    }

    #[test]
    fn the_handler_settles_children_and_joins_leave_the_rest_open() {
        set_child_handler(|kind, _input| match kind {
            "fails" => ChildOutcome::failed("bad-image", "no"),
            "cancelled" => ChildOutcome::Cancelled,
            _ => ChildOutcome::succeeded(&json!({"kind": kind})),
        });
        let states = |run: &JobRun| -> Vec<Value> {
            let seen: Value = run.output("spread").expect("spread completed");
            seen.as_array().expect("a list").iter().map(|child| child["state"].clone()).collect()
        };

        let all = spread(json!({"kinds": ["ok", "fails", "cancelled"]}));
        assert_eq!(states(&all), [json!("succeeded"), json!("failed"), json!("cancelled")]);
        let seen: Value = all.output("spread").expect("completed");
        assert_eq!(seen[0]["output"], json!({"kind": "ok"}));
        assert_eq!(seen[1]["failure"], json!("bad-image"));
        assert_eq!(seen[2]["failure"], Value::Null);

        let any = spread(json!({"kinds": ["fails", "ok", "ok"], "join": "any"}));
        assert_eq!(states(&any), [json!("failed"), Value::Null, Value::Null]);
        assert_eq!(any.fan_outs[0].join, wit::Join::Any);

        let count = spread(json!({"kinds": ["ok", "ok", "ok"], "join": "2", "keep": true}));
        assert_eq!(states(&count), [json!("succeeded"), json!("succeeded"), Value::Null]);
        assert_eq!(count.fan_outs[0].leftover, wit::Leftover::Keep);
        assert!(!count.fan_outs[0].children[2].result.is_final());

        let more_than_there_are = spread(json!({"kinds": ["ok"], "join": "5"}));
        assert_eq!(states(&more_than_there_are), [json!("succeeded")]);
    }

    #[test]
    fn each_pass_creates_new_children_unless_keyed() {
        let unkeyed = spread(json!({"kinds": ["a", "b"], "passes": 2}));
        assert_eq!(unkeyed.fan_outs.len(), 2);
        let ids: Vec<&str> = unkeyed.children_of("spread").map(|child| child.result.job_id()).collect();
        assert_eq!(ids, [local_child_id(1), local_child_id(2), local_child_id(3), local_child_id(4)]);
        assert_eq!(unkeyed.fan_outs[1].cursor.as_deref(), Some("2"));

        let settled = Rc::new(RefCell::new(0));
        let counter = Rc::clone(&settled);
        set_child_handler(move |_, input| {
            *counter.borrow_mut() += 1;
            ChildOutcome::Succeeded(Some(input.to_vec()))
        });
        let keyed = spread(json!({"kinds": ["a", "b"], "passes": 3, "keyed": true}));
        let ids: Vec<&str> = keyed.children_of("spread").map(|child| child.result.job_id()).collect();
        assert_eq!(ids.len(), 6);
        assert_eq!(&ids[..2], &ids[2..4]);
        assert_eq!(&ids[..2], &ids[4..]);
        assert_eq!(*settled.borrow(), 2, "a keyed child is settled once");
    }

    #[test]
    fn a_keyed_leftover_stays_cancelled_or_runs_on() {
        let cancelled = spread(json!({"kinds": ["a", "b"], "join": "any", "keyed": true, "passes": 2}));
        let states: Vec<Option<ChildState>> =
            cancelled.children_of("spread").map(|child| child.result.state()).collect();
        assert_eq!(
            states,
            [Some(ChildState::Succeeded), None, Some(ChildState::Succeeded), Some(ChildState::Cancelled)]
        );

        let kept = spread(json!({"kinds": ["a", "b"], "join": "any", "keyed": true, "keep": true, "passes": 2}));
        let states: Vec<Option<ChildState>> = kept.children_of("spread").map(|child| child.result.state()).collect();
        assert_eq!(states, [Some(ChildState::Succeeded), None, Some(ChildState::Succeeded), None]);
    }

    #[test]
    fn a_retry_after_an_await_starts_over_without_cursor_or_results() {
        let run = spread(json!({"kinds": ["a"], "retry_after_first_pass": true}));
        assert!(run.succeeded(), "{:?}", run.failure);
        let calls: Vec<(u32, Option<&str>, bool)> =
            run.calls_of("spread").map(|call| (call.attempt, call.cursor.as_deref(), call.awaited.is_some())).collect();
        assert_eq!(calls, [(1, None, false), (1, Some("1"), true), (2, None, false), (2, Some("1"), true)]);
        assert_eq!(run.fan_outs.iter().map(|fan_out| fan_out.attempt).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn signals_are_consumed_in_order_by_name_and_each_once() {
        send_signal("shipped", r#"{"n": 1}"#);
        send_signal("other", "ignored");
        send_signal("shipped", r#"{"n": 2}"#);
        let run = run_job::<Waiter>(br#"["shipped", "shipped", "shipped"]"#);
        assert!(run.succeeded(), "{:?}", run.failure);
        assert_eq!(run.output::<Value>("wait"), Some(json!([{"n": 1}, {"n": 2}, null])));
        let consumed: Vec<(&str, &[u8])> = run.signals_consumed().collect();
        assert_eq!(consumed, [("shipped", &br#"{"n": 1}"#[..]), ("shipped", &br#"{"n": 2}"#[..])]);
        assert_eq!(run.signal_waits.len(), 3);
        assert_eq!(run.signal_waits[2].body, None);
        assert_eq!(run.signal_waits[0].timeout_secs, 60);
        assert_eq!(run.signals_left, [Signal { name: "other".into(), body: b"ignored".to_vec() }]);

        // The queue went with the run.
        let again = run_job::<Waiter>(br#"["other"]"#);
        assert_eq!(again.output::<Value>("wait"), Some(json!([null])));
    }

    #[test]
    fn a_signal_body_that_is_not_json_is_refused() {
        send_signal("shipped", "not json");
        let run = run_job::<Waiter>(br#"["shipped"]"#);
        assert_eq!(run.failure.map(|failure| failure.code), Some("invalid-signal".into()));
    }

    #[test]
    fn a_child_can_be_a_local_run_of_another_kind() {
        send_signal("go", "{}");
        let waited = run_job::<Waiter>(br#"["go"]"#);
        assert_eq!(ChildOutcome::from_run(&waited), ChildOutcome::Succeeded(Some(b"[{}]".to_vec())));
        let failed = run_job::<Waiter>(b"not json");
        assert!(
            matches!(ChildOutcome::from_run(&failed), ChildOutcome::Failed(failure) if failure.code == "invalid-input")
        );

        set_child_handler(|kind, input| match kind {
            "waiter" => ChildOutcome::from_run(&run_job::<Waiter>(input)),
            _ => ChildOutcome::Cancelled,
        });
        let run = spread(json!({"kinds": ["waiter", "other"]}));
        let seen: Value = run.output("spread").expect("completed");
        assert_eq!((seen[0]["state"].clone(), seen[1]["state"].clone()), (json!("failed"), json!("cancelled")));
    }

    #[test]
    fn reset_forgets_the_handler_and_the_queue() {
        set_child_handler(|_, _| ChildOutcome::Cancelled);
        send_signal("shipped", "{}");
        reset();
        let run = spread(json!({"kinds": ["a"]}));
        let seen: Value = run.output("spread").expect("completed");
        assert_eq!(seen[0]["state"], json!("succeeded"));
        assert_eq!(run_job::<Waiter>(br#"["shipped"]"#).output::<Value>("wait"), Some(json!([null])));
    }
}
