//! Outbound HTTP from a step: a small blocking client over `wasi:http/outgoing-handler`.
//!
//! The host's policy denies every request unless the operator, the tenant and the kind's
//! deployment all allow its destination; a denied request fails with
//! [`HttpError::Denied`] before anything leaves the host. The host also bounds each
//! phase (connect, first byte, between bytes, the whole exchange), the response body's
//! size and the requests one step call may make, so [`Request::timeouts`] is only for a
//! step that wants to give up sooner.
//!
//! Credentials go in headers as the placeholders [`config::secret`](crate::config::secret)
//! returns: the host puts the values in place once the policy allowed the request, so the
//! guest never holds them. Steps run at least once, so unless a request has an
//! `Idempotency-Key` header the host adds one, made of the step's idempotency key and the
//! request's place in the call: a retry's requests carry the same keys as the first try's.
//!
//! ```
//! use serde::Deserialize;
//! use spindle_guest::{StepError, StepResultExt, config, http};
//!
//! #[derive(Deserialize)]
//! struct Rate {
//!     eur: f64,
//! }
//!
//! fn fetch_rate() -> Result<Rate, StepError> {
//!     let token = config::secret("rates-token").refused_with("missing-secret", "rates-token is not set")?;
//!     // Denied, unreachable or 5xx: `?` turns each into the right refusal or retry.
//!     let response = http::Request::get("https://rates.example.com/v1/usd")
//!         .header("authorization", format!("Bearer {token}"))
//!         .send()?
//!         .error_for_status()?;
//!     response.json()
//! }
//! # let _ = fetch_rate;
//! ```
//!
//! Off wasm (a kind's unit tests), [`Request::send`] asks the handler the test set with
//! [`testing::set_http_handler`](crate::testing::set_http_handler), and fails with
//! [`HttpError::Other`] if there is none.

mod error;
#[cfg(not(target_arch = "wasm32"))]
mod local;
mod url;
#[cfg(target_arch = "wasm32")]
mod wasi;

#[cfg(not(target_arch = "wasm32"))]
use local::send as transmit;
#[cfg(target_arch = "wasm32")]
use wasi::send as transmit;

use std::borrow::Cow;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use error::HttpError;
/// The request method, as `wasi:http` spells it (`Method::Other` for any other token).
pub use wasip2::http::types::Method;

use crate::StepError;
use crate::outcome::json_error;

/// One header: its name and its value's bytes. Names compare ASCII case-insensitively.
pub type Header = (String, Vec<u8>);

/// An outbound request, built then [`send`](Request::send)-ed.
///
/// ```
/// use std::time::Duration;
/// use spindle_guest::http::Request;
///
/// let request = Request::post("https://hooks.example.com/orders")
///     .header("x-source", "spindle")
///     .json(&serde_json::json!({"order": 42}))
///     .timeouts(Duration::from_secs(2), Duration::from_secs(5), None);
/// assert_eq!(request.body_bytes(), br#"{"order":42}"#);
/// ```
#[derive(Debug, Clone)]
#[must_use = "a request is only made by `send`"]
pub struct Request {
    method: Method,
    url: String,
    headers: Vec<Header>,
    body: Vec<u8>,
    timeouts: Timeouts,
    /// Why an earlier builder call failed (a body that did not serialise); `send`
    /// reports it instead of sending.
    invalid: Option<String>,
}

/// The timeouts a request asks for, each bounded further by the host's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Timeouts {
    /// To open the connection (DNS, TCP, TLS).
    connect: Option<Duration>,
    /// From sending the request to the response's head.
    first_byte: Option<Duration>,
    /// Between two chunks of the response body.
    between_bytes: Option<Duration>,
}

impl Request {
    /// A request with `method` to `url` (`http://` or `https://`, host, optional port,
    /// path and query), no headers, no body.
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeouts: Timeouts::default(),
            invalid: None,
        }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new(Method::Get, url)
    }

    /// A `POST` request.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new(Method::Post, url)
    }

    /// A `PUT` request.
    pub fn put(url: impl Into<String>) -> Self {
        Self::new(Method::Put, url)
    }

    /// A `DELETE` request.
    pub fn delete(url: impl Into<String>) -> Self {
        Self::new(Method::Delete, url)
    }

    /// Adds a header; adding a name twice sends both values.
    pub fn header(mut self, name: impl Into<String>, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name.into(), value.as_ref().to_vec()));
        self
    }

    /// Sets the body, sent as it is.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` as JSON, and `content-type: application/json` unless a
    /// content type is set already. A value that does not serialise makes
    /// [`send`](Request::send) fail with [`HttpError::InvalidRequest`].
    pub fn json<T: Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => self.body = body,
            Err(e) => self.invalid = Some(format!("the JSON body does not serialise: {e}")),
        }
        if !self.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
            self = self.header("content-type", "application/json");
        }
        self
    }

    /// Asks for shorter timeouts than the host's: to connect, to the response's head,
    /// and between body chunks. `None` leaves a phase to the host's bound.
    pub fn timeouts(
        mut self,
        connect: impl Into<Option<Duration>>,
        first_byte: impl Into<Option<Duration>>,
        between_bytes: impl Into<Option<Duration>>,
    ) -> Self {
        self.timeouts =
            Timeouts { connect: connect.into(), first_byte: first_byte.into(), between_bytes: between_bytes.into() };
        self
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The headers, in the order they were added.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }

    /// The body.
    pub fn body_bytes(&self) -> &[u8] {
        &self.body
    }

    /// Sends the request and waits for the whole response, body included.
    ///
    /// Any response the upstream sends is `Ok`, whatever its status;
    /// [`Response::error_for_status`] turns error statuses into step failures.
    pub fn send(self) -> Result<Response, HttpError> {
        if let Some(why) = &self.invalid {
            return Err(HttpError::InvalidRequest(why.clone()));
        }
        let target = url::parse(&self.url)?;
        transmit(self, target)
    }
}

/// A response: status, headers and the whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    status: u16,
    headers: Vec<Header>,
    body: Vec<u8>,
}

impl Response {
    /// A response with `status` and `body` and no headers: what a test's HTTP handler
    /// (see [`testing::set_http_handler`](crate::testing::set_http_handler)) answers.
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self { status, headers: Vec::new(), body: body.into() }
    }

    /// Adds a header.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name.into(), value.as_ref().to_vec()));
        self
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The headers, in the order the upstream sent them.
    pub fn headers(&self) -> &[Header] {
        &self.headers
    }

    /// The first value of header `name` (ASCII case-insensitive), if it is UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| std::str::from_utf8(value).ok())
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body, owned.
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }

    /// The body as text, invalid UTF-8 replaced.
    pub fn text(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.body)
    }

    /// The body deserialised from JSON; refused with code `invalid-response` if it does
    /// not parse (call [`error_for_status`](Response::error_for_status) first, so an
    /// upstream's error page is not mistaken for a malformed answer).
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, StepError> {
        serde_json::from_slice(&self.body).map_err(|e| json_error("invalid-response", "the upstream's response", &e))
    }

    /// The response if its status is not an error; otherwise the step failure it means:
    /// 429 and 5xx are retryable (the upstream is busy or failing, and may recover), any
    /// other 4xx is refused (the same request would be rejected again). Either way the
    /// code is `upstream-<status>`; the body stays out of the failure and the log.
    pub fn error_for_status(self) -> Result<Self, StepError> {
        let status = self.status;
        let code = format!("upstream-{status}");
        match status {
            429 | 500..=599 => {
                Err(StepError::retryable(code, format!("the upstream service answered {status}; retrying later")))
            }
            400..=499 => Err(StepError::refused(code, format!("the upstream service rejected the request ({status})"))),
            _ => Ok(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_sets_the_body_and_a_content_type_once() {
        let request = Request::post("http://h/x").header("Content-Type", "application/vnd+json").json(&[1, 2]);
        assert_eq!(request.body_bytes(), b"[1,2]");
        assert_eq!(request.headers().len(), 1);
        let request = Request::post("http://h/x").json(&"a");
        assert_eq!(request.headers(), [("content-type".to_owned(), b"application/json".to_vec())]);
    }

    #[test]
    fn a_body_that_does_not_serialise_fails_the_send() {
        let map: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let error = Request::post("http://h/x").json(&map).send().expect_err("not JSON");
        assert!(matches!(error, HttpError::InvalidRequest(_)), "{error}");
    }

    #[test]
    fn error_statuses_become_the_matching_step_failures() {
        let ok = Response::new(204, "").error_for_status().expect("204 is fine");
        assert_eq!(ok.status(), 204);
        for (status, retryable) in [(429, true), (500, true), (503, true), (400, false), (404, false)] {
            let error = Response::new(status, "secret body").error_for_status().expect_err("an error status");
            assert_eq!((error.is_retryable(), error.code()), (retryable, format!("upstream-{status}").as_str()));
            assert!(!error.message().contains("secret") && error.detail().is_none());
        }
    }

    #[test]
    fn reads_headers_case_insensitively_and_json_bodies() {
        let response = Response::new(200, r#"{"eur": 0.9}"#).with_header("Content-Type", "application/json");
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.json::<serde_json::Value>(), Ok(serde_json::json!({"eur": 0.9})));
        let error = Response::new(200, "<html>").json::<serde_json::Value>().expect_err("not JSON");
        assert_eq!(error.code(), "invalid-response");
    }
}
