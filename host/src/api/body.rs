//! What a request carries, read into typed values or typed errors: axum's own rejections are
//! plain text, and every answer of this API is an `ErrorBody`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Query};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use spindle_core::JobId;

use super::{ApiError, ErrorCode};

/// A body, or the typed error for one over its cap.
pub(super) fn body(bytes: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    bytes.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(ErrorCode::PayloadTooLarge, "the request body is over its size limit")
        } else {
            ApiError::invalid(format!("unreadable body: {rejection}"))
        }
    })
}

/// A JSON body of type `T` (an empty body reads as `{}`), or a typed `invalid-request`.
pub(super) fn json_body<T: DeserializeOwned>(bytes: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body(bytes)?;
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) { Bytes::from_static(b"{}") } else { bytes };
    serde_json::from_slice(&bytes).map_err(|e| ApiError::invalid(format!("malformed JSON body: {e}")))
}

/// A job id from the path; one that does not parse names no job.
pub(super) fn job_id(text: &str) -> Result<JobId, ApiError> {
    text.parse().map_err(|_| ApiError::not_found())
}

/// A query string of type `T`, or a typed `invalid-request`.
#[derive(Debug)]
pub(super) struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match Query::<T>::try_from_uri(&parts.uri) {
            Ok(Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(ApiError::invalid(format!("malformed query: {}", rejection.body_text()))),
        }
    }
}
