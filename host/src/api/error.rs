//! Typed errors with stable codes, and the one place where the engine's, the registry's and
//! the store's errors become them. A code fixes its HTTP status; a refused command keeps the
//! job machine's own refusal code as `reason` under the `illegal-transition` family.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use spindle_core::{JobState, Refusal};
use spindle_runtime::LoadError;

pub use spindle_views::{API_CODES, ErrorCode};

use super::views::{ErrorBody, ErrorDetail, ViolationView};
use crate::engine::EngineError;
use crate::engine::StoreError;
use crate::registry::RegistryError;

/// An API error: a stable code, an operator-safe message and, for a refused command, the
/// refusal's code and the job's state.
#[derive(Debug)]
pub struct ApiError {
    code: ErrorCode,
    message: String,
    reason: Option<&'static str>,
    state: Option<JobState>,
    retry_after: Option<u64>,
    /// With `invalid-input`: which submission of a bulk request, and what is wrong.
    input: Option<(Option<usize>, Vec<spindle_runtime::Violation>)>,
}

impl ApiError {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), reason: None, state: None, retry_after: None, input: None }
    }

    /// `invalid-request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// `unauthorised`.
    pub fn unauthorised() -> Self {
        Self::new(ErrorCode::Unauthorised, "a valid bearer token is required")
    }

    /// `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// `not-found` for a job: another tenant's job is not found either.
    pub fn not_found() -> Self {
        Self::new(ErrorCode::NotFound, "no such job")
    }

    /// `internal`: the detail goes to the log, never to the caller.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        let reference = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        tracing::error!(reference, "internal error: {detail}");
        Self::new(ErrorCode::Internal, format!("internal error (reference {reference})"))
    }

    /// `illegal-transition`, keeping the refusal's own code and the job's state.
    fn refused(refusal: &Refusal, state: JobState) -> Self {
        Self {
            code: ErrorCode::IllegalTransition,
            message: refusal.to_string(),
            reason: Some(refusal.code()),
            state: Some(state),
            retry_after: None,
            input: None,
        }
    }

    /// `quota-exceeded`: which quota as `reason`, and when to try again (whole seconds,
    /// at least one).
    pub fn quota(quota: &'static str, message: impl Into<String>, retry_after: Option<std::time::Duration>) -> Self {
        Self {
            code: ErrorCode::QuotaExceeded,
            message: message.into(),
            reason: Some(quota),
            state: None,
            retry_after: retry_after.map(|d| d.as_micros().div_ceil(1_000_000).max(1) as u64),
            input: None,
        }
    }

    /// Its code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The body it answers with.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code.as_str().to_owned(),
                message: self.message.clone(),
                reason: self.reason.map(str::to_owned),
                state: self.state.map(|state| state.as_str().to_owned()),
                index: self.input.as_ref().and_then(|(index, _)| *index),
                violations: self.input.as_ref().map(|(_, violations)| {
                    violations
                        .iter()
                        .map(|v| ViolationView { pointer: v.pointer.clone(), message: v.message.clone() })
                        .collect()
                }),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(self.body())).into_response();
        let retry_after = match self.code {
            ErrorCode::Busy => Some(1),
            _ => self.retry_after,
        };
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(seconds));
        }
        response
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::UnknownKind(kind) => Self::new(ErrorCode::UnknownKind, format!("unknown kind {kind:?}")),
            EngineError::NotFound => Self::not_found(),
            EngineError::PayloadTooLarge { .. } => Self::new(ErrorCode::PayloadTooLarge, e.to_string()),
            EngineError::Invalid(message) => Self::invalid(message),
            EngineError::Forbidden(message) => Self::forbidden(message),
            EngineError::InvalidInput { ref kind, index, ref violations } => {
                let at = index.map(|i| format!(" (submission {i})")).unwrap_or_default();
                let message = format!(
                    "the input{at} does not follow {kind:?}'s input schema ({} violation{}); nothing was queued",
                    violations.len(),
                    if violations.len() == 1 { "" } else { "s" }
                );
                let mut error = Self::new(ErrorCode::InvalidInput, message);
                error.input = Some((index, violations.clone()));
                error
            }
            EngineError::Refused { refusal, state } => Self::refused(&refusal, state),
            EngineError::Contention => Self::new(ErrorCode::Contention, e.to_string()),
            EngineError::StorageFormat(_) => Self::new(ErrorCode::StorageFormat, e.to_string()),
            EngineError::Registry(e) => e.into(),
            EngineError::Store(e) => e.into(),
            EngineError::StoreShared(e) => Self::internal(e),
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::InvalidName(_) => Self::invalid(e.to_string()),
            RegistryError::Invalid(LoadError::Internal(_)) => Self::internal(e),
            RegistryError::Invalid(LoadError::Busy) | RegistryError::Busy => Self::new(ErrorCode::Busy, e.to_string()),
            RegistryError::Invalid(load) => {
                let code = match load {
                    LoadError::TooLarge { .. } => ErrorCode::PayloadTooLarge,
                    _ => ErrorCode::InvalidComponent,
                };
                Self { reason: Some(load.code()), ..Self::new(code, format!("{load} ({})", load.code())) }
            }
            RegistryError::UnknownKind(kind) => Self::new(ErrorCode::UnknownKind, format!("unknown kind {kind:?}")),
            RegistryError::UnknownVersion { kind, version } => {
                Self::new(ErrorCode::UnknownVersion, format!("kind {kind:?} has no version {version}"))
            }
            RegistryError::Store(StoreError::QuotaExceeded(refusal)) => {
                Self::quota(refusal.quota.as_str(), refusal.message, None)
            }
            RegistryError::Store(e) => Self::internal(e),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Duplicate(what) => Self::new(ErrorCode::AlreadyExists, format!("{what} already exists")),
            StoreError::NotFound(what) => Self::new(ErrorCode::NotFound, format!("no such {what}")),
            StoreError::Unsupported(what) => Self::new(ErrorCode::InvalidRequest, what),
            StoreError::QuotaExceeded(refusal) => {
                Self::quota(refusal.quota.as_str(), refusal.message, Some(refusal.retry_after))
            }
            // Deploys kept replacing the version as the submission went again: nothing
            // was written, and the next try will most likely pass.
            moved @ StoreError::VersionMoved { .. } => {
                Self::new(ErrorCode::Busy, format!("{moved} (deployed again while submitting); try again"))
            }
            other => Self::internal(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::Duration;

    use spindle_core::step::{StepRefusal, StepState};
    use spindle_core::table::NotInTable;
    use spindle_core::{Fence, JobId, QueueState, Timestamp};

    use super::*;

    /// One refusal of every kind the core has.
    fn every_refusal() -> Vec<Refusal> {
        let examples = vec![
            Refusal::Finished { state: JobState::Succeeded },
            Refusal::LateSuccessAfterFailure,
            Refusal::StaleFence { presented: Fence(1), current: Fence(2) },
            Refusal::ConflictingReport { fence: Fence(1) },
            Refusal::Claimed { fence: Fence(1) },
            Refusal::NotClaimed,
            Refusal::ClaimLive { expires_at: Timestamp::EPOCH },
            Refusal::NotDue { run_at: Timestamp::EPOCH },
            Refusal::Paused,
            Refusal::AlreadyPausing,
            Refusal::AlreadyPaused,
            Refusal::NotPaused,
            Refusal::Cancelling,
            Refusal::AlreadyCancelling,
            Refusal::NotCancellable,
            Refusal::BlankReason,
            Refusal::NotStarted,
            Refusal::NothingToRun,
            Refusal::NotSilent { silent_for: Duration::ZERO },
            Refusal::NotRetryable { state: JobState::Running },
            Refusal::AlreadyRetried { successor: JobId(uuid::Uuid::from_u128(9)) },
            Refusal::NotWaiting { queue: QueueState::Idle },
            Refusal::Waiting,
            Refusal::Step(StepRefusal::Invalid { step: "a".into(), from: StepState::Queued, event: "skip" }),
            Refusal::Step(StepRefusal::DifferentFinal { step: "a".into(), state: StepState::Completed }),
            Refusal::NotInTable(NotInTable { machine: "job", from: "succeeded", to: "running" }),
        ];
        // Exhaustive: a refusal added to the core fails to compile here until it has an example.
        for refusal in &examples {
            match refusal {
                Refusal::Finished { .. }
                | Refusal::LateSuccessAfterFailure
                | Refusal::StaleFence { .. }
                | Refusal::ConflictingReport { .. }
                | Refusal::Claimed { .. }
                | Refusal::NotClaimed
                | Refusal::ClaimLive { .. }
                | Refusal::NotDue { .. }
                | Refusal::Paused
                | Refusal::AlreadyPausing
                | Refusal::AlreadyPaused
                | Refusal::NotPaused
                | Refusal::Cancelling
                | Refusal::AlreadyCancelling
                | Refusal::NotCancellable
                | Refusal::BlankReason
                | Refusal::NotStarted
                | Refusal::NothingToRun
                | Refusal::NotSilent { .. }
                | Refusal::NotRetryable { .. }
                | Refusal::AlreadyRetried { .. }
                | Refusal::NotWaiting { .. }
                | Refusal::Waiting
                | Refusal::Step(_)
                | Refusal::NotInTable(_) => {}
            }
        }
        examples
    }

    /// What `error` answers on the wire: its status and its body, read back as a client would.
    async fn answer(error: ApiError) -> (StatusCode, serde_json::Value) {
        let response = error.into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("a readable body");
        (status, serde_json::from_slice(&bytes).expect("a JSON body"))
    }

    #[tokio::test]
    async fn every_refusal_answers_409_illegal_transition_with_its_own_code_as_reason() {
        let refusals = every_refusal();
        let codes: HashSet<&str> = refusals.iter().map(Refusal::code).collect();
        let listed: HashSet<&str> = Refusal::CODES.iter().copied().collect();
        assert_eq!(codes, listed, "the examples cover every listed refusal code");
        for refusal in refusals {
            let code = refusal.code();
            let error = ApiError::from(EngineError::Refused { refusal, state: JobState::Paused });
            let (status, body) = answer(error).await;
            assert_eq!(status, StatusCode::CONFLICT, "{code}");
            assert_eq!(body["error"]["code"], "illegal-transition", "{code}");
            assert_eq!(body["error"]["reason"], code);
            assert_eq!(body["error"]["state"], "paused", "{code}");
            let typed: ErrorBody = serde_json::from_value(body).expect("the client's type decodes it");
            assert_eq!(typed.error.reason.as_deref(), Some(code));
        }
    }

    #[tokio::test]
    async fn other_errors_carry_neither_reason_nor_state() {
        let (status, body) = answer(ApiError::from(EngineError::NotFound)).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body, serde_json::json!({ "error": { "code": "not-found", "message": "no such job" } }));
    }

    #[test]
    fn store_and_registry_errors_keep_their_codes_through_the_engine() {
        let cases = [
            (EngineError::Store(StoreError::Duplicate("tenant acme".into())), ErrorCode::AlreadyExists),
            (EngineError::Store(StoreError::NotFound("tenant acme".into())), ErrorCode::NotFound),
            (EngineError::Store(StoreError::Corrupt("x".into())), ErrorCode::Internal),
            (EngineError::Registry(RegistryError::UnknownKind("k".into())), ErrorCode::UnknownKind),
            (
                EngineError::Registry(RegistryError::UnknownVersion { kind: "k".into(), version: 7 }),
                ErrorCode::UnknownVersion,
            ),
            (EngineError::Registry(RegistryError::InvalidName("K".into())), ErrorCode::InvalidRequest),
            (EngineError::Registry(RegistryError::Invalid(LoadError::NotWasm)), ErrorCode::InvalidComponent),
            (
                EngineError::Registry(RegistryError::Invalid(LoadError::TooLarge { bytes: 2, cap: 1 })),
                ErrorCode::PayloadTooLarge,
            ),
            (EngineError::Registry(RegistryError::Invalid(LoadError::Internal("x".into()))), ErrorCode::Internal),
            (EngineError::PayloadTooLarge { bytes: 2, cap: 1 }, ErrorCode::PayloadTooLarge),
            (EngineError::Invalid("x".into()), ErrorCode::InvalidRequest),
            (EngineError::Contention, ErrorCode::Contention),
            (EngineError::Registry(RegistryError::Busy), ErrorCode::Busy),
            (EngineError::Registry(RegistryError::Invalid(LoadError::Busy)), ErrorCode::Busy),
        ];
        for (error, code) in cases {
            let shown = error.to_string();
            assert_eq!(error.api_code(), code, "the engine's judgement: {shown}");
            assert_eq!(ApiError::from(error).code(), code, "{shown}");
        }
    }

    #[test]
    fn api_codes_are_the_codes_each_with_one_status() {
        let listed: Vec<&str> = ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
        assert_eq!(API_CODES, listed.as_slice());
        assert_eq!(API_CODES.iter().collect::<HashSet<_>>().len(), API_CODES.len(), "no code is listed twice");
        for code in ErrorCode::ALL {
            assert!((400..600).contains(&code.status()), "{code:?}");
        }
    }

    #[test]
    fn the_document_lists_every_api_code_and_every_refusal_code() {
        let document = serde_json::to_value(crate::api::openapi_document()).expect("the document serialises");
        let detail = &document["components"]["schemas"]["ErrorDetail"]["properties"];
        let listed = |field: &str| -> Vec<String> {
            detail[field]["enum"]
                .as_array()
                .map(|values| values.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                .unwrap_or_default()
        };
        let codes = listed("code");
        for code in API_CODES {
            assert!(codes.iter().any(|c| c == code), "{code} is not in the document's error codes");
        }
        let reasons = listed("reason");
        for reason in Refusal::CODES {
            assert!(reasons.iter().any(|r| r == reason), "{reason} is not in the document's refusal codes");
        }
    }
}
