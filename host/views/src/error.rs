//! The body of every error answer.

use serde::{Deserialize, Serialize};
use spindle_core::Refusal;
use utoipa::ToSchema;
use utoipa::openapi::Object;

use crate::{job_state_schema, one_of};

/// `{"error": {...}}`: what every 4xx and 5xx answer carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// A stable code, an operator-safe message and, when the job's machine refused a command,
/// the refusal's own code and the job's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// The stable code callers branch on; it fixes the HTTP status.
    #[schema(schema_with = code_schema)]
    pub code: String,
    /// An operator-safe explanation.
    pub message: String,
    /// With `illegal-transition`: which refusal (`finished`, `not-cancellable`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = reason_schema)]
    pub reason: Option<String>,
    /// With `illegal-transition`: the job's state when it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = job_state_schema)]
    pub state: Option<String>,
    /// With `invalid-input` from a bulk submission: which submission (0-based) broke
    /// its kind's schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// With `invalid-input`: each way the input breaks its kind's schema (at most 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<ViolationView>>,
}

/// One way a job's input breaks its kind's schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ViolationView {
    /// JSON Pointer (RFC 6901) to the offending value; `""` is the whole input.
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

fn code_schema() -> Object {
    one_of("The stable code callers branch on; it fixes the HTTP status.", API_CODES.iter().copied())
}

fn reason_schema() -> Object {
    one_of(
        "With `illegal-transition`: the job machine's own refusal code (see `spindle_core::Refusal`).",
        Refusal::CODES.iter().copied(),
    )
}

/// A top-level error code: the family a caller branches on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The request is malformed: its body, its query or a field's value.
    InvalidRequest,
    /// No valid bearer token.
    Unauthorised,
    /// A valid token of the wrong role.
    Forbidden,
    /// No such route, job or tenant (another tenant's job included).
    NotFound,
    /// The route does not take this method.
    MethodNotAllowed,
    /// The tenant has no such kind.
    UnknownKind,
    /// The kind has no such version.
    UnknownVersion,
    /// A body, a job input or a component over its cap.
    PayloadTooLarge,
    /// The job's input does not follow its kind's schema: `violations` lists each
    /// offending value's JSON pointer and what is wrong there. Nothing was written.
    InvalidInput,
    /// The upload is not a valid job-kind component; the message names the `component.*` reason.
    InvalidComponent,
    /// The job's machine refused the command: `reason` says which refusal, `state` where the job was.
    IllegalTransition,
    /// A unique name is taken.
    AlreadyExists,
    /// Concurrent writers kept changing the job; nothing was done, try again.
    Contention,
    /// The host is doing as much of this as it may (compiling components, a tenant's
    /// deploy under way): nothing was done; try again after `Retry-After` seconds.
    Busy,
    /// A tenant's quota refused the request (jobs queued, submission rate, deployed
    /// bytes): nothing was written; try again after `Retry-After` seconds where it says.
    QuotaExceeded,
    /// This host may not write: the database's storage format is one its build cannot
    /// read or write (the message says which and what to run), or it lost touch with the
    /// database. Nothing was written; another host of the right build can do it.
    StorageFormat,
    /// The host failed; the detail is in its log under the reference in the message.
    Internal,
}

impl ErrorCode {
    /// Every code. A code added to the enum must be added here: [`API_CODES`] and the
    /// document's enum for `error.code` are read from this list.
    pub const ALL: [Self; 17] = [
        Self::InvalidRequest,
        Self::Unauthorised,
        Self::Forbidden,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::UnknownKind,
        Self::UnknownVersion,
        Self::PayloadTooLarge,
        Self::InvalidInput,
        Self::InvalidComponent,
        Self::IllegalTransition,
        Self::AlreadyExists,
        Self::Contention,
        Self::Busy,
        Self::QuotaExceeded,
        Self::StorageFormat,
        Self::Internal,
    ];

    /// The code a body carries, if it is one of these (a newer host may answer others).
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|known| known.as_str() == code)
    }

    /// The code as the body carries it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid-request",
            Self::Unauthorised => "unauthorised",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not-found",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::UnknownKind => "unknown-kind",
            Self::UnknownVersion => "unknown-version",
            Self::PayloadTooLarge => "payload-too-large",
            Self::InvalidInput => "invalid-input",
            Self::InvalidComponent => "invalid-component",
            Self::IllegalTransition => "illegal-transition",
            Self::AlreadyExists => "already-exists",
            Self::Contention => "contention",
            Self::Busy => "busy",
            Self::QuotaExceeded => "quota-exceeded",
            Self::StorageFormat => "storage-format",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status the code answers with.
    pub const fn status(self) -> u16 {
        match self {
            Self::InvalidRequest => 400,
            Self::Unauthorised => 401,
            Self::Forbidden => 403,
            Self::NotFound | Self::UnknownKind | Self::UnknownVersion => 404,
            Self::MethodNotAllowed => 405,
            Self::PayloadTooLarge => 413,
            Self::InvalidComponent | Self::InvalidInput => 422,
            Self::IllegalTransition | Self::AlreadyExists => 409,
            Self::Contention | Self::Busy | Self::StorageFormat => 503,
            Self::QuotaExceeded => 429,
            Self::Internal => 500,
        }
    }
}

/// Every top-level code the API answers, as the body carries it (the document's enum for
/// `error.code`).
pub const API_CODES: &[&str] = &{
    let mut codes = [""; ErrorCode::ALL.len()];
    let mut i = 0;
    while i < codes.len() {
        codes[i] = ErrorCode::ALL[i].as_str();
        i += 1;
    }
    codes
};
