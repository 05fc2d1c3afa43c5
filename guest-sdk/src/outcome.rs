//! What a step reports: [`Outcome`] for the ways it can go on, [`StepError`] for the ways
//! it can fail.

use std::fmt;

use serde::Serialize;

use crate::bindings::spindle::job::types as wit;
use crate::workflow::FanOut;

/// A step's report for one call, other than failure (see [`StepError`]).
///
/// ```
/// use spindle_guest::{Child, FanOut, Outcome};
///
/// let done = Outcome::complete(&serde_json::json!({"rows": 3}));
/// let more = Outcome::more("300", 300, 1_000);
/// let later = Outcome::snooze(30);
/// let skipped = Outcome::skip("no receipt requested");
/// let children = Outcome::await_children(FanOut::all().child(Child::new("thumbnail", &serde_json::json!({}))));
/// let shipped = Outcome::await_signal("shipped", 3 * 24 * 3600).with_cursor("waiting");
/// # let _ = (done, more, later, skipped, children, shipped);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "an outcome only takes effect when `run_step` returns it"]
pub struct Outcome(wit::StepOutcome);

impl Outcome {
    /// The step finished with `output`, serialised as JSON and handed to later steps.
    ///
    /// A value serde cannot write as JSON (a map with non-string keys, a failing custom
    /// `Serialize`) is a bug in the kind, so it becomes a refusal with code
    /// `invalid-output` rather than a panic that would trap the whole call.
    pub fn complete<T: Serialize + ?Sized>(output: &T) -> Self {
        match serde_json::to_vec(output) {
            Ok(bytes) => Self(wit::StepOutcome::Complete(bytes)),
            Err(e) => StepError::refused("invalid-output", "the step's output is not serialisable as JSON")
                .with_detail(e.to_string())
                .into(),
        }
    }

    /// The step finished with raw `output` bytes (not necessarily JSON).
    pub fn complete_bytes(output: impl Into<Vec<u8>>) -> Self {
        Self(wit::StepOutcome::Complete(output.into()))
    }

    /// The step does not apply to this job. The reason is shown to operators.
    pub fn skip(reason: impl Into<String>) -> Self {
        Self(wit::StepOutcome::Skip(reason.into()))
    }

    /// Progress saved: the host calls the step again (same attempt) with `cursor`.
    /// `done` and `total` are units of work, for progress; `total` may be `None`.
    pub fn more(cursor: impl Into<String>, done: u64, total: impl Into<Option<u64>>) -> Self {
        Self(wit::StepOutcome::More(wit::Checkpoint { cursor: cursor.into(), done, total: total.into() }))
    }

    /// Like [`Outcome::more`] with a cursor serialised as JSON; read it back with
    /// [`Step::cursor_json`](crate::Step::cursor_json).
    pub fn more_json<T: Serialize + ?Sized>(cursor: &T, done: u64, total: impl Into<Option<u64>>) -> Self {
        match serde_json::to_string(cursor) {
            Ok(cursor) => Self::more(cursor, done, total),
            Err(e) => StepError::refused("invalid-cursor", "the step's cursor is not serialisable as JSON")
                .with_detail(e.to_string())
                .into(),
        }
    }

    /// Call again after `seconds`; no attempt is consumed.
    pub fn snooze(seconds: u32) -> Self {
        Self(wit::StepOutcome::Snooze(seconds))
    }

    /// Creates the fan-out's children and calls the step again (same attempt, with the
    /// fan-out's cursor) once its join is met; [`Step::children`](crate::Step::children)
    /// then has their results.
    pub fn await_children(fan_out: FanOut) -> Self {
        match fan_out.into_wit() {
            Ok(fan_out) => Self(wit::StepOutcome::AwaitChildren(fan_out)),
            Err(error) => error.into(),
        }
    }

    /// Parks the step until the signal `name` is sent to the job, or `timeout_secs` pass;
    /// then calls it again (same attempt) with the signal's body
    /// ([`Step::signal`](crate::Step::signal)) or [`Awaited::SignalTimeout`](crate::Awaited::SignalTimeout).
    pub fn await_signal(name: impl Into<String>, timeout_secs: u32) -> Self {
        Self(wit::StepOutcome::AwaitSignal(wit::SignalWait { name: name.into(), timeout_secs, cursor: None }))
    }

    /// Sets the cursor the step is called again with, on an await outcome or a
    /// [`more`](Outcome::more) (whose cursor it replaces). The other outcomes carry no
    /// cursor and are returned unchanged.
    pub fn with_cursor(mut self, cursor: impl Into<String>) -> Self {
        match &mut self.0 {
            wit::StepOutcome::AwaitChildren(fan_out) => fan_out.cursor = Some(cursor.into()),
            wit::StepOutcome::AwaitSignal(wait) => wait.cursor = Some(cursor.into()),
            wit::StepOutcome::More(checkpoint) => checkpoint.cursor = cursor.into(),
            wit::StepOutcome::Complete(_)
            | wit::StepOutcome::Skip(_)
            | wit::StepOutcome::Retryable(_)
            | wit::StepOutcome::Refused(_)
            | wit::StepOutcome::Snooze(_) => {}
        }
        self
    }

    /// Like [`Outcome::with_cursor`] with a cursor serialised as JSON; read it back with
    /// [`Step::cursor_json`](crate::Step::cursor_json). A cursor serde cannot write makes
    /// the outcome a refusal with code `invalid-cursor`.
    pub fn with_cursor_json<T: Serialize + ?Sized>(self, cursor: &T) -> Self {
        match serde_json::to_string(cursor) {
            Ok(cursor) => self.with_cursor(cursor),
            Err(e) => StepError::refused("invalid-cursor", "the step's cursor is not serialisable as JSON")
                .with_detail(e.to_string())
                .into(),
        }
    }

    /// The WIT outcome, for inspection in tests.
    pub fn as_wit(&self) -> &wit::StepOutcome {
        &self.0
    }

    /// The WIT outcome handed to the host.
    pub fn into_wit(self) -> wit::StepOutcome {
        self.0
    }
}

impl From<StepError> for Outcome {
    fn from(error: StepError) -> Self {
        let failure = wit::Failure { code: error.code, message: error.message };
        Self(if error.retryable { wit::StepOutcome::Retryable(failure) } else { wit::StepOutcome::Refused(failure) })
    }
}

/// A failed step: retryable (transient, the host retries with backoff) or refused
/// (permanent, the job fails).
///
/// `code` and `message` are shown to tenants and operators, so they must stay free of
/// secrets and transient detail. Such detail goes in [`StepError::with_detail`], which the
/// SDK writes to the host log instead.
///
/// ```
/// use spindle_guest::{StepError, StepResultExt};
///
/// fn parse_amount(text: &str) -> Result<u64, StepError> {
///     // The parse error goes to the log; the failure says only `bad-amount`.
///     let cents = text.parse::<u64>().refused("bad-amount")?;
///     if cents == 0 {
///         return Err(StepError::refused("zero-amount", "the amount must be positive"));
///     }
///     Ok(cents)
/// }
/// assert_eq!(parse_amount("x").unwrap_err().code(), "bad-amount");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a StepError only takes effect when `run_step` returns it"]
pub struct StepError {
    retryable: bool,
    code: String,
    message: String,
    detail: Option<String>,
}

impl StepError {
    /// A transient failure: the host retries while the kind's budget lasts.
    pub fn retryable(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { retryable: true, code: code.into(), message: message.into(), detail: None }
    }

    /// A permanent failure: the step and the job fail without retry.
    pub fn refused(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { retryable: false, code: code.into(), message: message.into(), detail: None }
    }

    /// The refusal for a step key the kind does not know (the host only sends declared
    /// keys, so this means `describe` and `run_step` disagree).
    pub fn unknown_step(key: &str) -> Self {
        Self::refused("unknown-step", "the kind does not implement this step").with_detail(format!("step key {key:?}"))
    }

    /// Attaches detail for the host log (an upstream error, an id, a value); it never
    /// reaches the job's record.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Whether the host may retry.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The stable, machine-readable reason.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The operator-safe explanation.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The log-only detail, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Writes the detail (or, lacking one, the message) to the host log.
    pub(crate) fn log(&self, context: &str) {
        let disposition = if self.retryable { "retryable" } else { "refused" };
        let detail = self.detail.as_deref().unwrap_or(&self.message);
        crate::log::warn(format!("{context} {disposition} {}: {detail}", self.code));
    }

    /// The WIT failure, dropping the detail.
    pub fn into_failure(self) -> wit::Failure {
        wit::Failure { code: self.code, message: self.message }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let disposition = if self.retryable { "retryable" } else { "refused" };
        write!(f, "{disposition} {}: {}", self.code, self.message)
    }
}

impl std::error::Error for StepError {}

/// A payload, prior output or cursor that does not deserialise is permanent: retrying
/// the same bytes cannot help. The message names the place, not the value, because
/// serde's text may quote the input (a card number, say); the full text goes to the log.
impl From<serde_json::Error> for StepError {
    fn from(error: serde_json::Error) -> Self {
        json_error("invalid-input", "the job's input", &error)
    }
}

/// A refusal for JSON that failed to deserialise, with a message that quotes no input.
pub(crate) fn json_error(code: &str, what: &str, error: &serde_json::Error) -> StepError {
    use serde_json::error::Category;
    let problem = match error.classify() {
        Category::Syntax => "is not valid JSON",
        Category::Eof => "ends early",
        Category::Data => "does not have the expected shape",
        Category::Io => "could not be read",
    };
    StepError::refused(code, format!("{what} {problem} (line {}, column {})", error.line(), error.column()))
        .with_detail(error.to_string())
}

/// `?`-friendly conversions from `Result` and `Option` into [`StepError`].
///
/// The one-argument forms keep the underlying error out of the failure record (it may
/// carry a URL, a path or a value) and send it to the host log; the `_with` forms take
/// an operator-safe message to show instead of the bare code.
pub trait StepResultExt<T> {
    /// A transient failure with `code`.
    fn retryable(self, code: &str) -> Result<T, StepError>;
    /// A permanent failure with `code`.
    fn refused(self, code: &str) -> Result<T, StepError>;
    /// A transient failure with `code` and an operator-safe `message`.
    fn retryable_with(self, code: &str, message: &str) -> Result<T, StepError>;
    /// A permanent failure with `code` and an operator-safe `message`.
    fn refused_with(self, code: &str, message: &str) -> Result<T, StepError>;
}

impl<T, E: fmt::Display> StepResultExt<T> for Result<T, E> {
    fn retryable(self, code: &str) -> Result<T, StepError> {
        self.retryable_with(code, code)
    }

    fn refused(self, code: &str) -> Result<T, StepError> {
        self.refused_with(code, code)
    }

    fn retryable_with(self, code: &str, message: &str) -> Result<T, StepError> {
        self.map_err(|e| StepError::retryable(code, message).with_detail(e.to_string()))
    }

    fn refused_with(self, code: &str, message: &str) -> Result<T, StepError> {
        self.map_err(|e| StepError::refused(code, message).with_detail(e.to_string()))
    }
}

impl<T> StepResultExt<T> for Option<T> {
    fn retryable(self, code: &str) -> Result<T, StepError> {
        self.retryable_with(code, code)
    }

    fn refused(self, code: &str) -> Result<T, StepError> {
        self.refused_with(code, code)
    }

    fn retryable_with(self, code: &str, message: &str) -> Result<T, StepError> {
        self.ok_or_else(|| StepError::retryable(code, message))
    }

    fn refused_with(self, code: &str, message: &str) -> Result<T, StepError> {
        self.ok_or_else(|| StepError::refused(code, message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_onto_the_matching_outcome() {
        let retry: Outcome = StepError::retryable("processor-unavailable", "try later").into();
        assert_eq!(
            retry.into_wit(),
            wit::StepOutcome::Retryable(wit::Failure {
                code: "processor-unavailable".into(),
                message: "try later".into(),
            })
        );
        let refused: Outcome = StepError::refused("card-declined", "declined").with_detail("secret").into();
        assert_eq!(
            refused.into_wit(),
            wit::StepOutcome::Refused(wit::Failure { code: "card-declined".into(), message: "declined".into() })
        );
    }

    #[test]
    fn json_errors_are_refused_and_do_not_quote_the_input() {
        #[derive(Debug, serde::Deserialize)]
        struct Card {
            #[allow(dead_code)] // only the failure matters
            number: u64,
        }
        let error =
            serde_json::from_str::<Card>(r#"{"number": "4000000000000002"}"#).expect_err("a string is not a u64");
        let error = StepError::from(error);
        assert!(!error.is_retryable());
        assert_eq!(error.code(), "invalid-input");
        assert!(!error.message().contains("4000"), "{}", error.message());
        assert!(error.detail().is_some_and(|d| d.contains("4000")));
    }

    #[test]
    fn extension_methods_keep_the_cause_in_the_detail() {
        let error = "x".parse::<u32>().refused("bad-amount").expect_err("not a number");
        assert_eq!((error.code(), error.message()), ("bad-amount", "bad-amount"));
        assert!(error.detail().is_some());
        let error = None::<u32>.retryable_with("no-slot", "no slot free").expect_err("none");
        assert!(error.is_retryable());
        assert_eq!(error.message(), "no slot free");
    }

    #[test]
    fn more_accepts_a_known_or_unknown_total() {
        let known = Outcome::more("10", 10, 100).into_wit();
        let unknown = Outcome::more("10", 10, None).into_wit();
        assert!(matches!(known, wit::StepOutcome::More(c) if c.total == Some(100)));
        assert!(matches!(unknown, wit::StepOutcome::More(c) if c.total.is_none()));
    }
}
