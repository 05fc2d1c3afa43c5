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
    strict_json(&bytes, "body")
}

/// `bytes` as JSON of type `T`, refusing any field `T` does not know, at any depth (a
/// misspelled `filtr` or `max_runing` dropped in silence would change what the request
/// does: a bulk action on every job, a limit never set). `what` names the JSON in errors.
pub(super) fn strict_json<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, ApiError> {
    let mut unknown = None;
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let read: Result<T, _> = serde_ignored::deserialize(&mut json, |path| {
        unknown.get_or_insert_with(|| path.to_string());
    })
    .and_then(|value| json.end().map(|()| value));
    // An unknown field is named even when the body failed for what followed from it (a
    // misspelled required field is also a missing one).
    match (unknown, read) {
        (Some(field), _) => Err(ApiError::invalid(format!("unknown field `{field}` in the {what}"))),
        (None, Err(e)) => Err(ApiError::invalid(format!("malformed JSON {what}: {e}"))),
        (None, Ok(value)) => Ok(value),
    }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Outer {
        #[serde(default)]
        filter: Inner,
        #[serde(default)]
        input: serde_json::Value,
    }

    #[derive(Debug, Default, serde::Deserialize)]
    struct Inner {
        #[serde(default)]
        kind: Option<String>,
    }

    #[test]
    fn a_field_the_body_does_not_know_is_refused_by_name_at_any_depth() {
        let refusal = |json: &str| format!("{:?}", strict_json::<Outer>(json.as_bytes(), "body").unwrap_err());
        assert!(refusal(r#"{"filtr": {"kind": "x"}}"#).contains("unknown field `filtr`"));
        assert!(refusal(r#"{"filter": {"kid": "x"}}"#).contains("unknown field `filter.kid`"));
        assert!(refusal(r#"{} {}"#).contains("malformed JSON body"));
        // A misspelled required field is named, not only found missing.
        let refused = strict_json::<spindle_views::TenantOutbound>(br#"{"alow": []}"#, "body").unwrap_err();
        assert!(format!("{refused:?}").contains("unknown field `alow`"), "{refused:?}");
        // What the body holds as free JSON (an input) is the kind's to judge.
        let read = strict_json::<Outer>(br#"{"filter": {"kind": "x"}, "input": {"anything": [1]}}"#, "body").unwrap();
        assert_eq!((read.filter.kind.as_deref(), &read.input["anything"][0]), (Some("x"), &serde_json::json!(1)));
    }
}
