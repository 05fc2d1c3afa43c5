//! Workflows: a step that fans out child jobs and waits for them, or waits for a signal.
//!
//! A step reports [`Outcome::await_children`](crate::Outcome::await_children) with a
//! [`FanOut`], or [`Outcome::await_signal`](crate::Outcome::await_signal); the host calls
//! it again (same attempt, with the outcome's cursor) once the join is met or the signal
//! arrives or times out, and [`Step::awaited`](crate::Step::awaited) says which.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Failure;
use crate::bindings::spindle::job::types as wit;
use crate::outcome::{StepError, json_error};

pub use wit::{ChildState, Priority};

impl ChildState {
    /// The state's name in the contract: `succeeded`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// A child job an [`await_children`](crate::Outcome::await_children) outcome asks for.
///
/// ```
/// use spindle_guest::{Child, Priority};
///
/// let child = Child::new("thumbnail", &serde_json::json!({"width": 640, "height": 480}))
///     .idempotency_key("order-17/thumbnail/0")
///     .priority(Priority::Background)
///     .lease_key("gpu");
/// assert_eq!(child.kind(), "thumbnail");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a Child only takes effect when added to a FanOut"]
pub struct Child {
    kind: String,
    /// The input, or why it could not be serialised (reported when the outcome is built).
    input: Result<Vec<u8>, String>,
    idempotency_key: Option<String>,
    priority: Option<Priority>,
    lease_keys: Vec<String>,
}

impl Child {
    /// A child of `kind` (deployed in the parent's tenant) with `input` serialised as JSON.
    ///
    /// An input serde cannot write as JSON is a bug in the kind: the fan-out then becomes
    /// a refusal with code `invalid-child-input`, as [`Outcome::complete`](crate::Outcome::complete) does for outputs.
    pub fn new<T: Serialize + ?Sized>(kind: impl Into<String>, input: &T) -> Self {
        let input = serde_json::to_vec(input).map_err(|e| e.to_string());
        Self { kind: kind.into(), input, idempotency_key: None, priority: None, lease_keys: Vec::new() }
    }

    /// A child with raw `input` bytes (not necessarily JSON).
    pub fn with_bytes(kind: impl Into<String>, input: impl Into<Vec<u8>>) -> Self {
        Self {
            kind: kind.into(),
            input: Ok(input.into()),
            idempotency_key: None,
            priority: None,
            lease_keys: Vec::new(),
        }
    }

    /// An idempotency key among the tenant's jobs: a child whose key is taken is the job
    /// that holds it, not a new one.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// The child's priority; `normal` if not set.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Adds a lease key the child must hold while a step of it runs.
    pub fn lease_key(mut self, key: impl Into<String>) -> Self {
        self.lease_keys.push(key.into());
        self
    }

    /// The child's kind.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    fn into_wit(self) -> Result<wit::ChildSpec, String> {
        Ok(wit::ChildSpec {
            kind: self.kind,
            input: self.input?,
            idempotency_key: self.idempotency_key,
            priority: self.priority,
            lease_keys: self.lease_keys,
        })
    }
}

/// Child jobs to create and when to call the step again: the payload of
/// [`Outcome::await_children`](crate::Outcome::await_children).
///
/// The join says when: [`FanOut::all`] once every child is final, [`FanOut::any`] once
/// the first is, [`FanOut::count`] once that many are. Children still open then are
/// cancelled unless [`FanOut::leftover_keep`] says they run on.
///
/// ```
/// use spindle_guest::{Child, FanOut, Outcome};
///
/// // Ask three mirrors; the first answer wins and the others are cancelled.
/// let fan_out = ["eu", "us", "ap"]
///     .into_iter()
///     .fold(FanOut::any(), |fan_out, region| fan_out.child(Child::new("probe", region)))
///     .cursor("probing");
/// assert_eq!(fan_out.len(), 3);
/// let outcome = Outcome::await_children(fan_out);
/// # let _ = outcome;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a FanOut only takes effect when `run_step` returns it as an outcome"]
pub struct FanOut {
    children: Vec<Child>,
    join: wit::Join,
    leftover: wit::Leftover,
    cursor: Option<String>,
}

impl FanOut {
    fn with_join(join: wit::Join) -> Self {
        Self { children: Vec::new(), join, leftover: wit::Leftover::Cancel, cursor: None }
    }

    /// Call the step again once every child is final.
    pub fn all() -> Self {
        Self::with_join(wit::Join::All)
    }

    /// Call the step again once the first child is final.
    pub fn any() -> Self {
        Self::with_join(wit::Join::Any)
    }

    /// Call the step again once `n` children are final.
    pub fn count(n: u32) -> Self {
        Self::with_join(wit::Join::Count(n))
    }

    /// Adds a child; the step gets the results in the order the children were added.
    pub fn child(mut self, child: Child) -> Self {
        self.children.push(child);
        self
    }

    /// Adds children, in order.
    pub fn children(mut self, children: impl IntoIterator<Item = Child>) -> Self {
        self.children.extend(children);
        self
    }

    /// Children still open when the join is met are cancelled (the default).
    pub fn leftover_cancel(mut self) -> Self {
        self.leftover = wit::Leftover::Cancel;
        self
    }

    /// Children still open when the join is met run on; the step does not see how they end.
    pub fn leftover_keep(mut self) -> Self {
        self.leftover = wit::Leftover::Keep;
        self
    }

    /// The cursor the step is called again with ([`Step::cursor`](crate::Step::cursor)).
    pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }

    /// How many children it asks for.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether it asks for no child.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// The WIT record, or a refusal `invalid-child-input` if a child's input could not be
    /// serialised.
    pub(crate) fn into_wit(self) -> Result<wit::FanOut, StepError> {
        let children = self
            .children
            .into_iter()
            .enumerate()
            .map(|(index, child)| {
                let kind = child.kind.clone();
                child.into_wit().map_err(|error| {
                    StepError::refused("invalid-child-input", "a child's input is not serialisable as JSON")
                        .with_detail(format!("child {index} of kind `{kind}`: {error}"))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(wit::FanOut { children, join: self.join, leftover: self.leftover, cursor: self.cursor })
    }
}

/// What a step that reported an await outcome is called again with
/// ([`Step::awaited`](crate::Step::awaited)).
///
/// ```
/// use spindle_guest::prelude::*;
///
/// fn resize_all(step: &Step) -> Result<Outcome, StepError> {
///     let Some(children) = step.children() else {
///         // First call: one child per image, all of them awaited.
///         let fan_out = ["a.png", "b.png"].iter().enumerate().fold(FanOut::all(), |fan_out, (index, image)| {
///             fan_out.child(
///                 Child::new("thumbnail", &serde_json::json!({ "image": image }))
///                     .idempotency_key(format!("{}/{index}", step.idempotency_key())),
///             )
///         });
///         return Ok(Outcome::await_children(fan_out));
///     };
///     // Called again: every child is final.
///     if let Some(failed) = children.iter().find(|child| !child.succeeded()) {
///         return Err(StepError::refused("thumbnail-failed", "a thumbnail job did not succeed")
///             .with_detail(format!("child {}", failed.job_id())));
///     }
///     let outputs = children
///         .iter()
///         .map(|child| child.output_as::<serde_json::Value>())
///         .collect::<Result<Vec<_>, _>>()?;
///     Ok(Outcome::complete(&outputs))
/// }
/// # let _ = resize_all;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Awaited {
    /// The children it asked for, in that order. Under join `any` or `count`, those
    /// still open when the join was met have no [`ChildResult::state`].
    Children(Vec<ChildResult>),
    /// The body of the signal it waited for.
    Signal(Vec<u8>),
    /// The signal's timeout passed first.
    SignalTimeout,
}

impl Awaited {
    /// Converts the host's variant.
    pub fn from_wit(awaited: wit::Awaited) -> Self {
        match awaited {
            wit::Awaited::Children(children) => Self::Children(children.into_iter().map(ChildResult).collect()),
            wit::Awaited::Signal(body) => Self::Signal(body),
            wit::Awaited::SignalTimeout => Self::SignalTimeout,
        }
    }

    /// The host's variant.
    pub fn into_wit(self) -> wit::Awaited {
        match self {
            Self::Children(children) => wit::Awaited::Children(children.into_iter().map(|child| child.0).collect()),
            Self::Signal(body) => wit::Awaited::Signal(body),
            Self::SignalTimeout => wit::Awaited::SignalTimeout,
        }
    }

    /// The signal's body deserialised from JSON: `None` on a timeout or for children;
    /// refused with `invalid-signal` if the body is not the expected JSON.
    pub fn signal_as<T: DeserializeOwned>(&self) -> Result<Option<T>, StepError> {
        match self {
            Self::Signal(body) => serde_json::from_slice(body)
                .map(Some)
                .map_err(|e| json_error("invalid-signal", "the signal's body", &e)),
            Self::Children(_) | Self::SignalTimeout => Ok(None),
        }
    }
}

/// One child's result, as its parent's step receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildResult(wit::ChildResult);

impl ChildResult {
    /// Wraps the host's record.
    pub fn from_wit(result: wit::ChildResult) -> Self {
        Self(result)
    }

    /// The host's record.
    pub fn into_wit(self) -> wit::ChildResult {
        self.0
    }

    /// The child's job id.
    pub fn job_id(&self) -> &str {
        &self.0.job_id
    }

    /// The child's kind.
    pub fn kind(&self) -> &str {
        &self.0.kind
    }

    /// Its final state, or `None` while it is still open (join `any` or `count`).
    pub fn state(&self) -> Option<ChildState> {
        self.0.state
    }

    /// Whether it succeeded.
    pub fn succeeded(&self) -> bool {
        self.0.state == Some(ChildState::Succeeded)
    }

    /// Whether it is final (succeeded, failed or cancelled).
    pub fn is_final(&self) -> bool {
        self.0.state.is_some()
    }

    /// Its last step's output, raw, when it succeeded.
    pub fn output(&self) -> Option<&[u8]> {
        self.0.output.as_deref()
    }

    /// Its last step's output deserialised from JSON, `None` if it has none; refused with
    /// `invalid-child-output` if the output is not the expected JSON.
    pub fn output_as<T: DeserializeOwned>(&self) -> Result<Option<T>, StepError> {
        self.output()
            .map(|bytes| {
                serde_json::from_slice(bytes).map_err(|e| {
                    json_error("invalid-child-output", &format!("the output of child {}", self.job_id()), &e)
                })
            })
            .transpose()
    }

    /// Why it failed or was cancelled.
    pub fn failure(&self) -> Option<&Failure> {
        self.0.failure.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::Outcome;

    fn fan_out_of(outcome: Outcome) -> wit::FanOut {
        match outcome.into_wit() {
            wit::StepOutcome::AwaitChildren(fan_out) => fan_out,
            other => panic!("not a fan-out: {other:?}"),
        }
    }

    #[test]
    fn a_fan_out_carries_every_child_option_in_order() {
        let fan_out = fan_out_of(Outcome::await_children(
            FanOut::count(2)
                .child(
                    Child::new("thumbnail", &serde_json::json!({"width": 4}))
                        .idempotency_key("k0")
                        .priority(Priority::Background)
                        .lease_key("gpu")
                        .lease_key("disk"),
                )
                .children([Child::with_bytes("raw", b"\x00\x01".to_vec())])
                .leftover_keep()
                .cursor("1"),
        ));
        assert_eq!(fan_out.join, wit::Join::Count(2));
        assert_eq!(fan_out.leftover, wit::Leftover::Keep);
        assert_eq!(fan_out.cursor.as_deref(), Some("1"));
        assert_eq!(
            fan_out.children,
            [
                wit::ChildSpec {
                    kind: "thumbnail".into(),
                    input: br#"{"width":4}"#.to_vec(),
                    idempotency_key: Some("k0".into()),
                    priority: Some(Priority::Background),
                    lease_keys: vec!["gpu".into(), "disk".into()],
                },
                wit::ChildSpec {
                    kind: "raw".into(),
                    input: vec![0, 1],
                    idempotency_key: None,
                    priority: None,
                    lease_keys: Vec::new(),
                },
            ]
        );
    }

    #[test]
    fn joins_default_to_cancelling_leftovers() {
        for (fan_out, join) in
            [(FanOut::all(), wit::Join::All), (FanOut::any(), wit::Join::Any), (FanOut::count(3), wit::Join::Count(3))]
        {
            let fan_out = fan_out_of(Outcome::await_children(fan_out));
            assert_eq!((fan_out.join, fan_out.leftover, fan_out.cursor), (join, wit::Leftover::Cancel, None));
        }
    }

    #[test]
    fn an_unserialisable_child_input_is_refused() {
        let input: BTreeMap<(u8, u8), u8> = BTreeMap::from([((1, 2), 3)]);
        let outcome =
            Outcome::await_children(FanOut::all().child(Child::new("ok", "x")).child(Child::new("bad", &input)));
        assert!(
            matches!(outcome.into_wit(), wit::StepOutcome::Refused(failure) if failure.code == "invalid-child-input")
        );
    }

    #[test]
    fn cursors_attach_to_the_outcomes_that_carry_one() {
        let wait = Outcome::await_signal("shipped", 60).with_cursor("2").into_wit();
        assert_eq!(
            wait,
            wit::StepOutcome::AwaitSignal(wit::SignalWait {
                name: "shipped".into(),
                timeout_secs: 60,
                cursor: Some("2".into())
            })
        );
        let fan_out = fan_out_of(Outcome::await_children(FanOut::all()).with_cursor_json(&[1, 2]));
        assert_eq!(fan_out.cursor.as_deref(), Some("[1,2]"));
        let more = Outcome::more("a", 1, 2).with_cursor("b").into_wit();
        assert!(matches!(more, wit::StepOutcome::More(checkpoint) if checkpoint.cursor == "b"));
        assert_eq!(Outcome::snooze(5).with_cursor("x"), Outcome::snooze(5));
    }

    #[test]
    fn child_results_read_state_output_and_failure() {
        let succeeded = ChildResult::from_wit(wit::ChildResult {
            job_id: "c1".into(),
            kind: "thumbnail".into(),
            state: Some(ChildState::Succeeded),
            output: Some(br#"{"bytes": 12}"#.to_vec()),
            failure: None,
        });
        assert!(succeeded.succeeded() && succeeded.is_final());
        assert_eq!((succeeded.job_id(), succeeded.kind()), ("c1", "thumbnail"));
        assert_eq!(succeeded.output_as::<serde_json::Value>(), Ok(Some(serde_json::json!({"bytes": 12}))));
        assert_eq!(succeeded.output_as::<u32>().map_err(|e| e.code().to_owned()), Err("invalid-child-output".into()));

        let open = ChildResult::from_wit(wit::ChildResult {
            job_id: "c2".into(),
            kind: "thumbnail".into(),
            state: None,
            output: None,
            failure: None,
        });
        assert!(!open.is_final() && !open.succeeded());
        assert_eq!(open.output_as::<serde_json::Value>(), Ok(None));

        let failed = ChildResult::from_wit(wit::ChildResult {
            job_id: "c3".into(),
            kind: "thumbnail".into(),
            state: Some(ChildState::Failed),
            output: None,
            failure: Some(Failure { code: "bad-image".into(), message: "no".into() }),
        });
        assert_eq!(failed.failure().map(|f| f.code.as_str()), Some("bad-image"));
    }

    #[test]
    fn a_signal_body_reads_as_json() {
        let signal = Awaited::Signal(br#"{"carrier": "dhl"}"#.to_vec());
        assert_eq!(signal.signal_as::<serde_json::Value>(), Ok(Some(serde_json::json!({"carrier": "dhl"}))));
        assert_eq!(
            Awaited::Signal(b"nope".to_vec()).signal_as::<serde_json::Value>().map_err(|e| e.code().to_owned()),
            Err("invalid-signal".into())
        );
        assert_eq!(Awaited::SignalTimeout.signal_as::<serde_json::Value>(), Ok(None));
        assert_eq!(Awaited::from_wit(Awaited::SignalTimeout.into_wit()), Awaited::SignalTimeout);
    }
}
