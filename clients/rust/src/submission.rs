//! What a submission and a listing say, built call by call.

use serde::Serialize;
use serde_json::Value;

use crate::views::{JobView, Submit};

/// A job to submit.
#[derive(Clone, Debug, PartialEq)]
pub struct Submission {
    body: Submit,
    traceparent: Option<String>,
}

impl Submission {
    /// A job of `kind` with `input` (any JSON; a kind with an input schema checks it).
    pub fn new(kind: impl Into<String>, input: Value) -> Self {
        let body = Submit {
            kind: kind.into(),
            input,
            priority: None,
            run_at: None,
            delay_secs: None,
            idempotency_key: None,
            lease_keys: Vec::new(),
        };
        Self { body, traceparent: None }
    }

    /// A job of `kind` whose input is `input` encoded as JSON (a kind's generated input
    /// type, say).
    pub fn of(kind: impl Into<String>, input: &impl Serialize) -> Result<Self, crate::Error> {
        let input = serde_json::to_value(input).map_err(|e| crate::Error::Invalid(format!("the input: {e}")))?;
        Ok(Self::new(kind, input))
    }

    /// One job per key: a second submission with the same key (through this API or
    /// PostgreSQL's `spindle.submit`) answers the first job.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.body.idempotency_key = Some(key.into());
        self
    }

    /// The W3C `traceparent` of the caller's span: the job's spans join its trace.
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// Its priority class (`forced`, `critical`, `scheduled`, `normal`, `background`; default
    /// `normal`).
    pub fn priority(mut self, priority: impl Into<String>) -> Self {
        self.body.priority = Some(priority.into());
        self
    }

    /// Run no earlier than this RFC 3339 time.
    pub fn run_at(mut self, at: impl Into<String>) -> Self {
        self.body.run_at = Some(at.into());
        self
    }

    /// Run no earlier than `delay` from now.
    pub fn delay(mut self, delay: std::time::Duration) -> Self {
        self.body.delay_secs = Some(delay.as_secs_f64());
        self
    }

    /// An exclusive lease key: jobs sharing one never run at once.
    pub fn lease_key(mut self, key: impl Into<String>) -> Self {
        self.body.lease_keys.push(key.into());
        self
    }

    pub(crate) fn body(&self) -> &Submit {
        &self.body
    }

    pub(crate) fn trace_parent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }
}

/// A submitted job.
#[derive(Clone, Debug, PartialEq)]
pub struct Submitted {
    /// The job.
    pub job: JobView,
    /// Whether this call made it (false: its idempotency key named a job made before).
    pub created: bool,
}

/// Which jobs [`crate::Client::list`] answers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobFilter {
    /// Only jobs in this state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Only jobs of this kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only this job's children.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Only jobs of this priority class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// The job with this id, or the jobs whose idempotency key starts with this.
    #[serde(rename = "q", skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// At most this many (1-500, default 50).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The page after this cursor ([`crate::views::JobPage::next_cursor`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<i64>,
}
