//! One call of a step: its input, its helpers, its line to the host.

use serde::de::DeserializeOwned;

use crate::bindings::spindle::job::types as wit;
use crate::outcome::{StepError, json_error};
use crate::workflow::{Awaited, ChildResult};

pub use wit::Checkpoint;

impl Checkpoint {
    /// Progress for a heartbeat: where to resume, units done, units in all if known.
    pub fn new(cursor: impl Into<String>, done: u64, total: impl Into<Option<u64>>) -> Self {
        Self { cursor: cursor.into(), done, total: total.into() }
    }
}

/// The host's answer to [`Step::heartbeat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// Keep working.
    Proceed,
    /// The job is being cancelled: stop soon; whatever the step returns, the job settles
    /// cancelled.
    StopCancelled,
    /// This host lost the job's lease: stop; whatever the step returns is refused.
    StopLeaseLost,
}

impl Heartbeat {
    /// Whether the step should stop working and return.
    pub fn should_stop(self) -> bool {
        !matches!(self, Self::Proceed)
    }
}

impl From<wit::HeartbeatReply> for Heartbeat {
    fn from(reply: wit::HeartbeatReply) -> Self {
        match reply {
            wit::HeartbeatReply::Proceed => Self::Proceed,
            wit::HeartbeatReply::StopCancelled => Self::StopCancelled,
            wit::HeartbeatReply::StopLeaseLost => Self::StopLeaseLost,
        }
    }
}

/// One call of one step of one job, as handed to [`Kind::run_step`](crate::Kind::run_step).
#[derive(Debug)]
pub struct Step {
    /// The host's input, less `awaited` (moved into the field below).
    input: wit::StepInput,
    awaited: Option<Awaited>,
    stop: Option<Heartbeat>,
}

impl Step {
    /// Wraps the host's input. Public so that a kind's logic can be unit-tested natively
    /// with a hand-built [`StepInput`](crate::bindings::spindle::job::types::StepInput).
    pub fn from_input(mut input: wit::StepInput) -> Self {
        let awaited = input.awaited.take().map(Awaited::from_wit);
        Self { input, awaited, stop: None }
    }

    /// The key of the step to run, one of those the kind declared.
    pub fn key(&self) -> &str {
        &self.input.step
    }

    /// The job's id (a UUID in text form).
    pub fn job_id(&self) -> &str {
        &self.input.job_id
    }

    /// 1 for the first attempt of this step, 2 for the first retry, ...
    pub fn attempt(&self) -> u32 {
        self.input.attempt
    }

    /// Stable across this step's attempts: use it to make side effects idempotent.
    pub fn idempotency_key(&self) -> &str {
        &self.input.idempotency_key
    }

    /// The job's input as submitted, raw.
    pub fn payload(&self) -> &[u8] {
        &self.input.payload
    }

    /// The job's input deserialised from JSON; malformed input is refused with code
    /// `invalid-input`.
    pub fn input<T: DeserializeOwned>(&self) -> Result<T, StepError> {
        serde_json::from_slice(&self.input.payload).map_err(|e| json_error("invalid-input", "the job's input", &e))
    }

    /// The raw output of an earlier step of this job, if it came with this call's input.
    /// The host may leave large outputs out of the input: [`Step::prior_output`] also
    /// asks the host for those.
    pub fn prior_bytes(&self, step: &str) -> Option<&[u8]> {
        self.input.prior.iter().find(|prior| prior.step == step).map(|prior| prior.output.as_slice())
    }

    /// The raw output of an earlier step of this job, if it completed: from the input,
    /// or else asked of the host (`host.prior-output`), which has every output even when
    /// the input was capped.
    pub fn prior_output(&self, step: &str) -> Option<Vec<u8>> {
        match self.prior_bytes(step) {
            Some(bytes) => Some(bytes.to_vec()),
            None => host_prior_output(step),
        }
    }

    /// The JSON output of an earlier step, or `None` if it has not completed (it was
    /// skipped, or is declared later); refused with `invalid-prior` when the output is
    /// not the expected JSON. For steps that may be skipped; see [`Step::prior`].
    pub fn prior_output_as<T: DeserializeOwned>(&self, step: &str) -> Result<Option<T>, StepError> {
        let parse = |bytes: &[u8]| {
            serde_json::from_slice(bytes)
                .map_err(|e| json_error("invalid-prior", &format!("the output of step `{step}`"), &e))
        };
        match self.prior_bytes(step) {
            Some(bytes) => parse(bytes).map(Some),
            None => host_prior_output(step).map(|bytes| parse(&bytes)).transpose(),
        }
    }

    /// The JSON output of an earlier step, from the input or the host. Refused with
    /// `missing-prior` when that step has not completed (it was skipped, or is declared
    /// later), `invalid-prior` when its output is not the expected JSON.
    pub fn prior<T: DeserializeOwned>(&self, step: &str) -> Result<T, StepError> {
        self.prior_output_as(step)?
            .ok_or_else(|| StepError::refused("missing-prior", format!("step `{step}` has no output in this job")))
    }

    /// The cursor of this attempt's last [`Outcome::more`](crate::Outcome::more),
    /// [`await_children`](crate::Outcome::await_children) or
    /// [`await_signal`](crate::Outcome::await_signal), if any.
    pub fn cursor(&self) -> Option<&str> {
        self.input.cursor.as_deref()
    }

    /// The cursor deserialised from JSON (see [`Outcome::more_json`](crate::Outcome::more_json));
    /// refused with `invalid-cursor` if it does not parse.
    pub fn cursor_json<T: DeserializeOwned>(&self) -> Result<Option<T>, StepError> {
        self.cursor()
            .map(|cursor| {
                serde_json::from_str(cursor).map_err(|e| json_error("invalid-cursor", "the step's cursor", &e))
            })
            .transpose()
    }

    /// What the step waited for, when this call follows one of its await outcomes;
    /// `None` on any other call.
    pub fn awaited(&self) -> Option<&Awaited> {
        self.awaited.as_ref()
    }

    /// The results of the children the step fanned out, when this call follows its
    /// [`await_children`](crate::Outcome::await_children), in the order it asked for them.
    pub fn children(&self) -> Option<&[ChildResult]> {
        match &self.awaited {
            Some(Awaited::Children(children)) => Some(children),
            _ => None,
        }
    }

    /// The raw body of the signal the step waited for, when this call follows its
    /// [`await_signal`](crate::Outcome::await_signal) and the signal arrived.
    pub fn signal_bytes(&self) -> Option<&[u8]> {
        match &self.awaited {
            Some(Awaited::Signal(body)) => Some(body),
            _ => None,
        }
    }

    /// The body of the signal the step waited for, deserialised from JSON; `None` if this
    /// call follows no signal (a timeout, see [`Step::signal_timed_out`], or no wait).
    /// Refused with `invalid-signal` if the body is not the expected JSON.
    pub fn signal<T: DeserializeOwned>(&self) -> Result<Option<T>, StepError> {
        self.awaited.as_ref().map_or(Ok(None), Awaited::signal_as)
    }

    /// Whether this call follows an [`await_signal`](crate::Outcome::await_signal) whose
    /// timeout passed before the signal came.
    pub fn signal_timed_out(&self) -> bool {
        matches!(self.awaited, Some(Awaited::SignalTimeout))
    }

    /// Tells the host the step is alive (renewing its lease), optionally with progress,
    /// and returns its answer. Long steps call it regularly and return when
    /// [`Heartbeat::should_stop`] says so.
    pub fn heartbeat(&mut self, progress: Option<Checkpoint>) -> Heartbeat {
        let reply = host_heartbeat(progress.as_ref());
        if reply.should_stop() {
            self.stop = Some(reply);
        }
        reply
    }

    /// The stop answer, if any heartbeat of this call got one: for loops that check
    /// between heartbeats.
    pub fn stop_requested(&self) -> Option<Heartbeat> {
        self.stop
    }
}

#[cfg(target_arch = "wasm32")]
fn host_prior_output(step: &str) -> Option<Vec<u8>> {
    crate::bindings::spindle::job::host::prior_output(step)
}

/// Off wasm the input is all there is: [`testing::run_job`](crate::testing::run_job)
/// hands every step every prior output.
#[cfg(not(target_arch = "wasm32"))]
fn host_prior_output(_step: &str) -> Option<Vec<u8>> {
    None
}

#[cfg(target_arch = "wasm32")]
fn host_heartbeat(progress: Option<&Checkpoint>) -> Heartbeat {
    crate::bindings::spindle::job::host::heartbeat(progress).into()
}

/// Off wasm (a kind's unit tests on the build machine) there is no host to ask, and
/// the bindings' import stubs panic: every heartbeat proceeds.
#[cfg(not(target_arch = "wasm32"))]
fn host_heartbeat(_progress: Option<&Checkpoint>) -> Heartbeat {
    Heartbeat::Proceed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(payload: &str, prior: &[(&str, &str)], cursor: Option<&str>) -> Step {
        Step::from_input(wit::StepInput {
            job_id: "0190-job".into(),
            step: "import".into(),
            attempt: 2,
            idempotency_key: "0190-job/import".into(),
            payload: payload.as_bytes().to_vec(),
            prior: prior
                .iter()
                .map(|(step, output)| wit::PriorOutput { step: (*step).into(), output: output.as_bytes().to_vec() })
                .collect(),
            cursor: cursor.map(Into::into),
            awaited: None,
        })
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Rows {
        rows: u64,
    }

    #[test]
    fn reads_input_prior_and_cursor_as_json() {
        let step = step(r#"{"rows": 3}"#, &[("validate", r#"{"rows": 5}"#)], Some(r#"{"rows": 7}"#));
        assert_eq!(step.input::<Rows>(), Ok(Rows { rows: 3 }));
        assert_eq!(step.prior::<Rows>("validate"), Ok(Rows { rows: 5 }));
        assert_eq!(step.cursor_json::<Rows>(), Ok(Some(Rows { rows: 7 })));
        assert_eq!((step.key(), step.attempt(), step.idempotency_key()), ("import", 2, "0190-job/import"));
    }

    #[test]
    fn bad_json_is_refused_with_a_code_per_source() {
        let step = step("{", &[("validate", "[]")], Some("x"));
        assert_eq!(step.input::<Rows>().map_err(|e| e.code().to_owned()), Err("invalid-input".into()));
        assert_eq!(step.prior::<Rows>("validate").map_err(|e| e.code().to_owned()), Err("invalid-prior".into()));
        assert_eq!(step.prior::<Rows>("summarise").map_err(|e| e.code().to_owned()), Err("missing-prior".into()));
        assert_eq!(step.cursor_json::<Rows>().map_err(|e| e.code().to_owned()), Err("invalid-cursor".into()));
    }

    #[test]
    fn a_prior_output_that_may_be_missing_is_an_option() {
        let step = step("{}", &[("validate", r#"{"rows": 5}"#)], None);
        assert_eq!(step.prior_output("validate").as_deref(), Some(&br#"{"rows": 5}"#[..]));
        assert_eq!(step.prior_output_as::<Rows>("validate"), Ok(Some(Rows { rows: 5 })));
        assert_eq!(step.prior_output("skipped"), None);
        assert_eq!(step.prior_output_as::<Rows>("skipped"), Ok(None));
    }

    #[test]
    fn no_cursor_on_a_first_call() {
        assert_eq!(step("{}", &[], None).cursor_json::<Rows>(), Ok(None));
    }

    fn awaiting(awaited: wit::Awaited) -> Step {
        let mut input = step("{}", &[], Some("1")).input;
        input.awaited = Some(awaited);
        Step::from_input(input)
    }

    #[test]
    fn a_first_call_awaited_nothing() {
        let step = step("{}", &[], None);
        assert_eq!(step.awaited(), None);
        assert_eq!(step.children(), None);
        assert_eq!(step.signal::<Rows>(), Ok(None));
        assert!(!step.signal_timed_out());
    }

    #[test]
    fn children_are_read_in_the_order_asked_for() {
        let result = |id: &str, state| wit::ChildResult {
            job_id: id.into(),
            kind: "thumbnail".into(),
            state,
            output: None,
            failure: None,
        };
        let step =
            awaiting(wit::Awaited::Children(vec![result("c1", Some(wit::ChildState::Succeeded)), result("c2", None)]));
        let children = step.children().expect("called back with children");
        assert_eq!(children.iter().map(ChildResult::job_id).collect::<Vec<_>>(), ["c1", "c2"]);
        assert_eq!(children[1].state(), None);
        assert_eq!((step.signal_bytes(), step.signal_timed_out()), (None, false));
    }

    #[test]
    fn a_signal_or_its_timeout() {
        let signalled = awaiting(wit::Awaited::Signal(br#"{"rows": 2}"#.to_vec()));
        assert_eq!(signalled.signal::<Rows>(), Ok(Some(Rows { rows: 2 })));
        assert_eq!(signalled.signal_bytes(), Some(&br#"{"rows": 2}"#[..]));
        assert_eq!(signalled.children(), None);
        assert_eq!(signalled.cursor(), Some("1"));
        let bad = awaiting(wit::Awaited::Signal(b"[]".to_vec()));
        assert_eq!(bad.signal::<Rows>().map_err(|e| e.code().to_owned()), Err("invalid-signal".into()));
        let timed_out = awaiting(wit::Awaited::SignalTimeout);
        assert!(timed_out.signal_timed_out());
        assert_eq!(timed_out.signal::<Rows>(), Ok(None));
        assert_eq!(timed_out.awaited(), Some(&Awaited::SignalTimeout));
    }
}
