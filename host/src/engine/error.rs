//! Why the engine refused or failed a request: typed, each with a stable code.

use std::sync::Arc;

use spindle_core::{JobState, Refusal};
use thiserror::Error;

use crate::registry::RegistryError;
use crate::store::StoreError;

/// Why the engine refused or failed a request. The API gives each its stable code, in
/// one place (`api::error`).
#[derive(Debug, Error)]
pub enum EngineError {
    /// The tenant has no such kind.
    #[error("unknown kind {0:?}")]
    UnknownKind(String),
    /// No such job (for this tenant).
    #[error("job not found")]
    NotFound,
    /// The input is over the cap.
    #[error("the input is {bytes} bytes, over the {cap}-byte limit")]
    PayloadTooLarge {
        /// Its size.
        bytes: usize,
        /// The cap.
        cap: usize,
    },
    /// The input does not follow the kind's declared schema; nothing was written.
    #[error("the input does not follow {kind:?}'s schema: {}", .violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    InvalidInput {
        /// The kind.
        kind: String,
        /// Which submission of a bulk request (0-based); none for a single one.
        index: Option<usize>,
        /// What is wrong, each at its JSON pointer.
        violations: Vec<spindle_runtime::Violation>,
    },
    /// The request is malformed (a lease key, a priority).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The caller may not do this (an operator reading tenants' jobs where the host does
    /// not allow it).
    #[error("{0}")]
    Forbidden(String),
    /// The event does not apply to the job in its current state.
    #[error("{refusal} (the job is {state})")]
    Refused {
        /// Why, as the core said it.
        refusal: Refusal,
        /// The job's state.
        state: JobState,
    },
    /// Too many concurrent writers kept changing the job; the request did nothing.
    #[error("the job kept changing under concurrent writers; try again")]
    Contention,
    /// The registry failed (unknown version, a component that does not load).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// This host may not write: the database's storage format is one its build cannot
    /// read or write, or it could not renew its announcement (`upgrade`).
    #[error("{0}")]
    StorageFormat(String),
    /// The store failed a group commit this write was part of.
    #[error(transparent)]
    StoreShared(Arc<StoreError>),
}

impl EngineError {
    /// The code the API answers this error with: the one judgement both doors give a
    /// refusal (`spindle.submit`'s verdicts carry it too). `api::error` builds its answers
    /// on it; a test there checks they agree.
    pub fn api_code(&self) -> spindle_views::ErrorCode {
        use spindle_runtime::LoadError;
        use spindle_views::ErrorCode;
        match self {
            Self::UnknownKind(_) => ErrorCode::UnknownKind,
            Self::NotFound => ErrorCode::NotFound,
            Self::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
            Self::InvalidInput { .. } => ErrorCode::InvalidInput,
            Self::Invalid(_) => ErrorCode::InvalidRequest,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::Refused { .. } => ErrorCode::IllegalTransition,
            Self::Contention => ErrorCode::Contention,
            Self::StorageFormat(_) => ErrorCode::StorageFormat,
            Self::StoreShared(_) => ErrorCode::Internal,
            Self::Store(e) => store_code(e),
            Self::Registry(e) => match e {
                RegistryError::InvalidName(_) => ErrorCode::InvalidRequest,
                RegistryError::Invalid(LoadError::Internal(_)) => ErrorCode::Internal,
                RegistryError::Invalid(LoadError::Busy) | RegistryError::Busy => ErrorCode::Busy,
                RegistryError::Invalid(LoadError::TooLarge { .. }) => ErrorCode::PayloadTooLarge,
                RegistryError::Invalid(_) => ErrorCode::InvalidComponent,
                RegistryError::UnknownKind(_) => ErrorCode::UnknownKind,
                RegistryError::UnknownVersion { .. } => ErrorCode::UnknownVersion,
                RegistryError::Store(StoreError::QuotaExceeded(_)) => ErrorCode::QuotaExceeded,
                RegistryError::Store(_) => ErrorCode::Internal,
            },
        }
    }
}

/// The code the API answers a store error with.
fn store_code(e: &StoreError) -> spindle_views::ErrorCode {
    use spindle_views::ErrorCode;
    match e {
        StoreError::Duplicate(_) => ErrorCode::AlreadyExists,
        StoreError::NotFound(_) => ErrorCode::NotFound,
        StoreError::Unsupported(_) => ErrorCode::InvalidRequest,
        StoreError::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
        StoreError::VersionMoved { .. } => ErrorCode::Busy,
        _ => ErrorCode::Internal,
    }
}
