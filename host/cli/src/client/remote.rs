//! The host's API over HTTP: requests carry the token, answers decode into the API's own
//! views, refusals into [`HostRefused`].

use std::fmt;
use std::time::Duration;

use anyhow::Context;
// The `bytes` crate's buffer, which reqwest answers bodies in (one version in the build).
use axum::body::Bytes;
use reqwest::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;

use spindle::api::views::ErrorBody;

/// An error the host answered.
#[derive(Debug)]
pub struct HostRefused {
    /// The stable code (`illegal-transition`, `not-found`, …).
    pub code: String,
    /// With `illegal-transition`: the job machine's own refusal code.
    pub reason: Option<String>,
    /// The message, with the job's state when the host gave it.
    pub message: String,
}

impl HostRefused {
    /// The refusal in `body`, or one made from the status when the body is not an error body.
    fn from_answer(status: StatusCode, body: &[u8]) -> Self {
        match serde_json::from_slice::<ErrorBody>(body) {
            Ok(ErrorBody { error }) => {
                let mut message = error.message;
                if let Some(state) = error.state {
                    message.push_str(&format!(" [job is {state}]"));
                }
                if message.is_empty() {
                    message = status.to_string();
                }
                // One line per violation: where in the input, and what is wrong there.
                for violation in error.violations.iter().flatten() {
                    let at = if violation.pointer.is_empty() { "(the input)" } else { &violation.pointer };
                    message.push_str(&format!("\n  {at}: {}", violation.message));
                }
                Self { code: error.code, reason: error.reason, message }
            }
            Err(_) => Self { code: "error".to_owned(), reason: None, message: status.to_string() },
        }
    }
}

impl HostRefused {
    /// A deploy that failed after its upload was answered, as the sync answer would
    /// have refused it: a component's own `component.*` code is `invalid-component`'s
    /// reason.
    pub(super) fn deploy_failed(error: spindle::api::views::ErrorDetail) -> Self {
        if error.code.starts_with("component.") {
            Self { code: "invalid-component".into(), reason: Some(error.code), message: error.message }
        } else {
            Self { code: error.code, reason: error.reason, message: error.message }
        }
    }
}

/// `code (reason): message`.
impl fmt::Display for HostRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Some(reason) => write!(f, "{} ({reason}): {}", self.code, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

impl std::error::Error for HostRefused {}

/// A client of one host.
#[derive(Debug)]
pub(super) struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    /// The typed client, for what it does whole (following a job's logs and events).
    typed: spindle_client::Client,
}

impl Client {
    /// A client of the host at `server`, presenting `token`.
    pub(super) fn new(server: &str, token: Option<String>) -> anyhow::Result<Self> {
        // Longer than the longest `wait` the host holds a request (300 s).
        let http = reqwest::Client::builder().timeout(Duration::from_secs(330)).build()?;
        let mut typed = spindle_client::Client::builder(server).retry(spindle_client::Retry::NEVER);
        if let Some(token) = &token {
            typed = typed.token(token);
        }
        // The commands answer a refusal at once: the user decides whether to try again.
        let typed = typed.build()?;
        Ok(Self { http, base: server.trim_end_matches('/').to_owned(), token, typed })
    }

    /// The typed client of the same host, presenting the same token.
    pub(super) fn typed(&self) -> &spindle_client::Client {
        &self.typed
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends `request`; answers a success's status and body, anything else as [`HostRefused`].
    async fn answer(&self, request: reqwest::RequestBuilder) -> anyhow::Result<(StatusCode, Bytes)> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().await.with_context(|| format!("cannot reach the host at {}", self.base))?;
        let status = response.status();
        let body = response.bytes().await.with_context(|| format!("reading the host's answer ({status})"))?;
        if !status.is_success() {
            return Err(HostRefused::from_answer(status, &body).into());
        }
        Ok((status, body))
    }

    /// Sends `request`; decodes a success as `T`, anything else as [`HostRefused`].
    async fn send<T: DeserializeOwned>(&self, request: reqwest::RequestBuilder) -> anyhow::Result<T> {
        let (status, body) = self.answer(request).await?;
        serde_json::from_slice(&body)
            .with_context(|| format!("the host's answer ({status}) is not what this client expects"))
    }

    /// `GET path`.
    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.send(self.http.get(self.url(path))).await
    }

    /// `POST path` with a JSON body.
    pub(super) async fn post<T: DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> anyhow::Result<T> {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    /// `POST path` with a JSON body and an `Idempotency-Key` header.
    pub(super) async fn post_keyed<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
        key: &str,
    ) -> anyhow::Result<T> {
        self.send(self.http.post(self.url(path)).header("Idempotency-Key", key).json(body)).await
    }

    /// `PUT path` with a JSON body.
    pub(super) async fn put<T: DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> anyhow::Result<T> {
        self.send(self.http.put(self.url(path)).json(body)).await
    }

    /// `DELETE path`, whose success carries no body.
    pub(super) async fn delete(&self, path: &str) -> anyhow::Result<()> {
        self.answer(self.http.delete(self.url(path))).await.map(|_| ())
    }

    /// `PUT path` with a WebAssembly component.
    pub(super) async fn put_bytes<T: DeserializeOwned>(&self, path: &str, bytes: Vec<u8>) -> anyhow::Result<T> {
        self.send(self.http.put(self.url(path)).header("content-type", "text/plain").body(bytes)).await
    }

    /// `PUT path` with a WebAssembly component: the success's status and JSON body.
    pub(super) async fn put_component(
        &self,
        path: &str,
        bytes: Vec<u8>,
    ) -> anyhow::Result<(StatusCode, serde_json::Value)> {
        let request = self.http.put(self.url(path)).header("content-type", "application/wasm").body(bytes);
        let (status, body) = self.answer(request).await?;
        let value = serde_json::from_slice(&body)
            .with_context(|| format!("the host's answer ({status}) is not what this client expects"))?;
        Ok((status, value))
    }
}
