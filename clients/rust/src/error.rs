//! What a call can fail with: the host's refusal, carrying the API's code, or a failure to
//! reach the host or read its answer.

use std::time::Duration;

use spindle_views::{ErrorBody, ErrorCode, ViolationView};

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The host answered with an error body: branch on [`Refused::code`].
    #[error(transparent)]
    Refused(Box<Refused>),
    /// The host could not be reached, or the connection failed mid-answer.
    #[error("cannot reach the host at {base}: {source}")]
    Transport {
        /// The host's address.
        base: String,
        /// What failed.
        #[source]
        source: reqwest::Error,
    },
    /// The host answered something this client cannot decode (a success in an unexpected
    /// shape, or an error that is not the API's).
    #[error("the host's answer ({status}) is not what this client expects: {detail}")]
    Unexpected {
        /// The HTTP status.
        status: u16,
        /// What did not decode.
        detail: String,
    },
    /// The arguments cannot make a request (a URL that does not parse, a body that does
    /// not encode).
    #[error("invalid request: {0}")]
    Invalid(String),
}

impl Error {
    /// The API's code, when the host refused.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Refused(refused) => Some(&refused.code),
            _ => None,
        }
    }
}

impl From<Refused> for Error {
    fn from(refused: Refused) -> Self {
        Self::Refused(Box::new(refused))
    }
}

/// An error the host answered: `{"error": {code, message, reason?, state?, index?, violations?}}`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}{}: {message}", reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default())]
pub struct Refused {
    /// The HTTP status (the code fixes it).
    pub status: u16,
    /// The stable code callers branch on (`invalid-input`, `quota-exceeded`, …).
    pub code: String,
    /// An operator-safe explanation.
    pub message: String,
    /// With `illegal-transition`: the job machine's own refusal (`finished`, …); with
    /// `quota-exceeded`: which quota.
    pub reason: Option<String>,
    /// With `illegal-transition`: the job's state when it refused.
    pub state: Option<String>,
    /// With `invalid-input` from a bulk submission: which submission.
    pub index: Option<usize>,
    /// With `invalid-input`: each way the input breaks its kind's schema.
    pub violations: Vec<ViolationView>,
    /// How long the host asked to wait before trying again (`Retry-After`).
    pub retry_after: Option<Duration>,
}

impl Refused {
    /// The code as this client's enum, when it is one this client knows.
    pub fn known(&self) -> Option<ErrorCode> {
        ErrorCode::parse(&self.code)
    }

    /// The refusal in an error answer: `None` when the body is not the API's error body.
    pub(crate) fn from_answer(status: u16, body: &[u8], retry_after: Option<Duration>) -> Option<Self> {
        let ErrorBody { error } = serde_json::from_slice(body).ok()?;
        Some(Self {
            status,
            code: error.code,
            message: error.message,
            reason: error.reason,
            state: error.state,
            index: error.index,
            violations: error.violations.unwrap_or_default(),
            retry_after,
        })
    }
}
