//! Typed JSON errors with stable codes.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use spindle_core::JobState;

use crate::engine::EngineError;
use crate::registry::RegistryError;
use crate::store::StoreError;

/// An API error: an HTTP status, a stable code and an operator-safe message.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: String,
    message: String,
    state: Option<JobState>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a str>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self { status, code: code.into(), message: message.into(), state: None }
    }

    /// 400 `invalid-request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid-request", message)
    }

    /// 401 `unauthorised`.
    pub fn unauthorised() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorised", "a valid bearer token is required")
    }

    /// 403 `forbidden`.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404 `not-found`.
    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", "no such job")
    }

    /// 500 `internal`: the detail goes to the log, never to the caller.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        let reference = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        tracing::error!(reference, "internal error: {detail}");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("internal error (reference {reference})"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body =
            Body { error: Inner { code: &self.code, message: &self.message, state: self.state.map(JobState::as_str) } };
        (self.status, Json(body)).into_response()
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::UnknownKind(kind) => {
                Self::new(StatusCode::NOT_FOUND, "unknown-kind", format!("unknown kind {kind:?}"))
            }
            EngineError::NotFound => Self::not_found(),
            EngineError::PayloadTooLarge { .. } => {
                Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", e.to_string())
            }
            EngineError::Invalid(message) => Self::invalid(message),
            EngineError::Refused { refusal, state } => {
                let (status, code) = match refusal {
                    spindle_core::Refusal::StaleFence { .. } => (StatusCode::CONFLICT, "stale-lease"),
                    _ => (StatusCode::CONFLICT, "illegal-transition"),
                };
                Self {
                    status,
                    code: code.into(),
                    message: format!("{refusal} ({})", refusal.code()),
                    state: Some(state),
                }
            }
            EngineError::Contention => Self::new(StatusCode::SERVICE_UNAVAILABLE, "contention", e.to_string()),
            EngineError::Registry(e) => e.into(),
            EngineError::Store(e) => Self::internal(e),
            EngineError::StoreShared(e) => Self::internal(e),
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::InvalidName(_) => Self::invalid(e.to_string()),
            RegistryError::Invalid(load) => {
                let status = match load {
                    spindle_runtime::LoadError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                    spindle_runtime::LoadError::Internal(_) => return Self::internal(load),
                    _ => StatusCode::UNPROCESSABLE_ENTITY,
                };
                let code =
                    if status == StatusCode::PAYLOAD_TOO_LARGE { "payload-too-large" } else { "invalid-component" };
                Self::new(status, code, format!("{load} ({})", load.code()))
            }
            RegistryError::UnknownKind(kind) => {
                Self::new(StatusCode::NOT_FOUND, "unknown-kind", format!("unknown kind {kind:?}"))
            }
            RegistryError::UnknownVersion { kind, version } => {
                Self::new(StatusCode::NOT_FOUND, "unknown-version", format!("kind {kind:?} has no version {version}"))
            }
            RegistryError::Store(e) => Self::internal(e),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Duplicate(what) => {
                Self::new(StatusCode::CONFLICT, "already-exists", format!("{what} already exists"))
            }
            StoreError::NotFound(_) => Self::not_found(),
            other => Self::internal(other),
        }
    }
}
