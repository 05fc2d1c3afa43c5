//! The body of every error answer.

use serde::{Deserialize, Serialize};
use spindle_core::Refusal;
use utoipa::ToSchema;
use utoipa::openapi::Object;

use super::{job_state_schema, one_of};
use crate::api::API_CODES;

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
