//! A typed, async client of Spindle's HTTP API.
//!
//! Answers decode into the API's own types ([`views`], the host's `spindle-views`), so
//! nothing walks JSON by hand and a field the host renames fails to compile here. A
//! refusal is an [`Error::Refused`] carrying the API's code, reason, job state and schema
//! violations; an answer of 429 or 503 (which the API promises wrote nothing) is tried
//! again after the host's `Retry-After`, or with backoff, as [`Retry`] says.
//!
//! ```no_run
//! # async fn example() -> Result<(), spindle_client::Error> {
//! use spindle_client::{Client, Submission};
//! let client = Client::new("http://127.0.0.1:8080", "spt_…")?;
//! let job = client.submit(&Submission::new("greet", serde_json::json!({"name": "Ada"})).idempotency_key("order-42")).await?;
//! let done = client.wait(&job.job.id, std::time::Duration::from_secs(60)).await?;
//! println!("{} {}", done.id, done.state);
//! # Ok(()) }
//! ```

mod error;
mod retry;
mod sse;
mod submission;

use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use error::{Error, Refused};
pub use retry::Retry;
pub use spindle_views as views;
pub use submission::{JobFilter, Submission, Submitted};
use views::{CancelBody, HistoryEntryView, JobLive, JobPage, JobView, LogLineView, LogPage, SubmissionView};

/// Longest a host holds one `wait` request; [`Client::wait`] asks again until its own
/// deadline.
const LONGEST_HELD_WAIT: Duration = Duration::from_secs(300);

/// A client of one host, presenting one token. Cheap to clone (the connection pool is
/// shared).
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    retry: Retry,
}

/// How a [`Client`] is made.
#[derive(Debug)]
pub struct Builder {
    base: String,
    token: Option<String>,
    retry: Retry,
    timeout: Duration,
    roots: Vec<Vec<u8>>,
}

impl Builder {
    /// The bearer token (a tenant's, for everything but operator calls).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// How 429 and 503 answers are tried again (default: [`Retry::default`]).
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// Longest one request may take, whole (default 330 s: longer than the longest wait
    /// a host holds).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Also trusts the certificates in `pem` (a host behind a private CA) beside the
    /// public roots, for an `https://` address.
    pub fn root_certificates_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.roots.push(pem.into());
        self
    }

    /// The client.
    pub fn build(self) -> Result<Client, Error> {
        let http = reqwest::Client::builder()
            .timeout(self.timeout)
            .tls_backend_preconfigured(tls_config(&self.roots)?)
            .build()
            .map_err(|e| Error::Invalid(format!("cannot make an HTTP client: {e}")))?;
        Ok(Client { http, base: self.base.trim_end_matches('/').to_owned(), token: self.token, retry: self.retry })
    }
}

/// TLS for `https://` hosts: rustls on ring, the Mozilla roots and the `extra` PEM
/// certificates.
fn tls_config(extra: &[Vec<u8>]) -> Result<rustls::ClientConfig, Error> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    for pem in extra {
        let mut found = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| Error::Invalid(format!("a root certificate's PEM: {e}")))?;
            roots.add(cert).map_err(|e| Error::Invalid(format!("a root certificate: {e}")))?;
            found += 1;
        }
        if found == 0 {
            return Err(Error::Invalid("a root certificate's PEM holds no certificate".into()));
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Invalid(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A job's live events ([`Client::events`]).
#[derive(Clone, Debug, PartialEq)]
pub enum JobEvent {
    /// One history entry, in order, from the first.
    History(HistoryEntryView),
    /// The job's state or progress changed.
    Job(JobLive),
}

/// A followed stream of a job's events; ends once the job is final and every entry was sent.
#[derive(Debug)]
pub struct EventStream(sse::Events);

impl EventStream {
    /// The next event; `None` once the job is final and all was sent.
    pub async fn next(&mut self) -> Result<Option<JobEvent>, Error> {
        while let Some(event) = self.0.next().await? {
            match event.name.as_str() {
                "history" => return decode_event(&event.data).map(|entry| Some(JobEvent::History(entry))),
                "job" => return decode_event(&event.data).map(|live| Some(JobEvent::Job(live))),
                "end" => return Ok(None),
                // An event a newer host sends that this client does not know.
                _ => {}
            }
        }
        Ok(None)
    }
}

/// A followed stream of a job's log lines; ends once the job is final and every line was sent.
#[derive(Debug)]
pub struct LogStream(sse::Events);

impl LogStream {
    /// The next line; `None` once the job is final and all lines were sent.
    pub async fn next(&mut self) -> Result<Option<LogLineView>, Error> {
        while let Some(event) = self.0.next().await? {
            match event.name.as_str() {
                "line" => return decode_event(&event.data).map(Some),
                "end" => return Ok(None),
                _ => {}
            }
        }
        Ok(None)
    }
}

fn decode_event<T: DeserializeOwned>(data: &str) -> Result<T, Error> {
    serde_json::from_str(data).map_err(|e| Error::Unexpected { status: 200, detail: format!("an event: {e}") })
}

impl Client {
    /// A client of the host at `base` (e.g. `http://127.0.0.1:8080`) presenting `token`.
    pub fn new(base: impl Into<String>, token: impl Into<String>) -> Result<Self, Error> {
        Self::builder(base).token(token).build()
    }

    /// A client to configure.
    pub fn builder(base: impl Into<String>) -> Builder {
        Builder {
            base: base.into(),
            token: None,
            retry: Retry::default(),
            timeout: Duration::from_secs(330),
            roots: Vec::new(),
        }
    }

    /// The host's address.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Submits a job: [`Submitted::created`] is false when the idempotency key named a job
    /// submitted before (through this API or `spindle.submit`), which is answered instead.
    pub async fn submit(&self, submission: &Submission) -> Result<Submitted, Error> {
        let (status, body) = self
            .send(|| {
                let request = self.request(Method::POST, "/v1/jobs").json(submission.body());
                match submission.trace_parent() {
                    Some(parent) => request.header("traceparent", parent),
                    None => request,
                }
            })
            .await?;
        let job = decode(status, &body)?;
        Ok(Submitted { job, created: status == StatusCode::CREATED })
    }

    /// The job, with its steps and history.
    pub async fn job(&self, id: &str) -> Result<JobView, Error> {
        self.get(&format!("/v1/jobs/{}", segment(id))).await
    }

    /// A submission an application made with `spindle.submit` in its own transaction:
    /// `queued`, `waiting` (over a quota), `admitted` with its job, or `refused` with the
    /// code `submit` would have met. Every job call also takes its id in place of the job's.
    pub async fn submission(&self, id: &str) -> Result<SubmissionView, Error> {
        self.get(&format!("/v1/submissions/{}", segment(id))).await
    }

    /// The job once it is final, or as it is when `timeout` has passed (check
    /// [`JobView::is_final`]).
    pub async fn wait(&self, id: &str, timeout: Duration) -> Result<JobView, Error> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now()).min(LONGEST_HELD_WAIT);
            let path = format!("/v1/jobs/{}/wait?timeout={}", segment(id), left.as_secs_f64());
            let job: JobView = self.get(&path).await?;
            if job.is_final() || tokio::time::Instant::now() >= deadline {
                return Ok(job);
            }
        }
    }

    /// Sends the signal `name` with a JSON body to the job; with `idempotency_key`, a
    /// signal already sent under that key is not sent again.
    pub async fn signal(
        &self,
        id: &str,
        name: &str,
        body: &impl Serialize,
        idempotency_key: Option<&str>,
    ) -> Result<JobView, Error> {
        let path = format!("/v1/jobs/{}/signals/{}", segment(id), segment(name));
        let (status, answer) = self
            .send(|| {
                let request = self.request(Method::POST, &path).json(body);
                match idempotency_key {
                    Some(key) => request.header("idempotency-key", key),
                    None => request,
                }
            })
            .await?;
        decode(status, &answer)
    }

    /// Cancels the job, saying why (kept in its history). A running step is asked to stop
    /// and the job is cancelled when it does.
    pub async fn cancel(&self, id: &str, reason: &str) -> Result<JobView, Error> {
        let body = CancelBody { reason: reason.to_owned() };
        let path = format!("/v1/jobs/{}/cancel", segment(id));
        let (status, answer) = self.send(|| self.request(Method::POST, &path).json(&body)).await?;
        decode(status, &answer)
    }

    /// A page of the tenant's jobs, newest first; pass [`JobPage::next_cursor`] on as
    /// [`JobFilter::cursor`] for the next.
    pub async fn list(&self, filter: &JobFilter) -> Result<JobPage, Error> {
        let (status, answer) = self.send(|| self.request(Method::GET, "/v1/jobs").query(filter)).await?;
        decode(status, &answer)
    }

    /// The job's log lines so far (only `step`'s, when given).
    pub async fn logs(&self, id: &str, step: Option<&str>) -> Result<LogPage, Error> {
        self.get(&format!("/v1/jobs/{}/logs?follow=false{}", segment(id), step_query(step))).await
    }

    /// The job's log lines (only `step`'s, when given) as they are written, from the
    /// first, until it is final.
    pub async fn follow_logs(&self, id: &str, step: Option<&str>) -> Result<LogStream, Error> {
        self.stream(&format!("/v1/jobs/{}/logs?follow=true{}", segment(id), step_query(step))).await.map(LogStream)
    }

    /// The job's events as they happen, from its first history entry, until it is final.
    pub async fn events(&self, id: &str) -> Result<EventStream, Error> {
        self.stream(&format!("/v1/jobs/{}/events", segment(id))).await.map(EventStream)
    }

    /// Any other call of the API (`path` from `/v1/…`), with a JSON body when given,
    /// decoded as `T`: for what has no method of its own.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + Sync)>,
    ) -> Result<T, Error> {
        let (status, answer) = self
            .send(|| {
                let request = self.request(method.clone(), path);
                match body {
                    Some(body) => request.json(body),
                    None => request,
                }
            })
            .await?;
        decode(status, &answer)
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, Error> {
        let (status, answer) = self.send(|| self.request(Method::GET, path)).await?;
        decode(status, &answer)
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends the request `make` builds, again while the host answers 429 or 503 and
    /// [`Retry`] allows; answers a success's status and body, a refusal as [`Error`].
    async fn send(&self, make: impl Fn() -> RequestBuilder) -> Result<(StatusCode, Vec<u8>), Error> {
        let mut attempt = 1;
        loop {
            let response = make().send().await.map_err(|source| self.transport(source))?;
            let status = response.status();
            let retry_after = retry_after(&response);
            let body = response.bytes().await.map_err(|source| self.transport(source))?.to_vec();
            if status.is_success() {
                return Ok((status, body));
            }
            let failure = refusal(status, &body, retry_after);
            match self.retry.delay(attempt, status.as_u16(), retry_after) {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return Err(failure),
            }
            attempt += 1;
        }
    }

    /// Opens a stream of server-sent events, again while the host answers 429 or 503.
    async fn stream(&self, path: &str) -> Result<sse::Events, Error> {
        let mut attempt = 1;
        loop {
            let request = self.request(Method::GET, path).header("accept", "text/event-stream");
            let response = request.send().await.map_err(|source| self.transport(source))?;
            let status = response.status();
            if status.is_success() {
                return Ok(sse::Events::new(response, self.base.clone()));
            }
            let retry_after = retry_after(&response);
            let body = response.bytes().await.map_err(|source| self.transport(source))?;
            let failure = refusal(status, &body, retry_after);
            match self.retry.delay(attempt, status.as_u16(), retry_after) {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return Err(failure),
            }
            attempt += 1;
        }
    }

    fn transport(&self, source: reqwest::Error) -> Error {
        Error::Transport { base: self.base.clone(), source }
    }
}

/// A path segment with what would end or split it escaped (ids and names the API takes
/// are plain, but a caller's typo must not reach another route).
fn segment(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~' | b':') {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

fn step_query(step: Option<&str>) -> String {
    step.map(|step| format!("&step={}", segment(step))).unwrap_or_default()
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get("retry-after")?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// The refusal an error answer carries; an answer that is not the API's error body (a
/// proxy's, say) is [`Error::Unexpected`].
fn refusal(status: StatusCode, body: &[u8], retry_after: Option<Duration>) -> Error {
    match Refused::from_answer(status.as_u16(), body, retry_after) {
        Some(refused) => refused.into(),
        None => Error::Unexpected {
            status: status.as_u16(),
            detail: String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
        },
    }
}

fn decode<T: DeserializeOwned>(status: StatusCode, body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::Unexpected { status: status.as_u16(), detail: e.to_string() })
}
