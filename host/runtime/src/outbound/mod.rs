//! Outbound HTTP from steps: `wasi:http/outgoing-handler` behind a deny-by-default
//! policy, with secrets the guest never sees, limits, and a record of every request.
//!
//! wasmtime-wasi-http implements the interface; Spindle's [`Outbound`] is its send hook.
//! Per request, before anything leaves the host: count it against the call's budget,
//! check the three policy layers ([`policy`]), put secrets in place of their
//! placeholders, add an `Idempotency-Key`. Then [`send`] resolves the host, refuses
//! blocked addresses, connects to an address it checked and bounds every phase.

mod decode;
pub mod policy;
pub(crate) mod redact;
mod send;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

pub use policy::{Denial, OperatorPolicy, Policy, Rule, RuleError, Rules, Target};

/// A secret's value. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// What one step may reach beyond the operator's policy, set by the engine per step from
/// the tenant and the kind's deployment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The tenant's name: its connection cap and its metrics.
    pub tenant: String,
    /// The tenant's layer of the policy.
    pub tenant_rules: Rules,
    /// The kind deployment's layer of the policy.
    pub kind_rules: Rules,
    /// The deployment's settings (`config.get`).
    pub settings: BTreeMap<String, String>,
    /// The secrets the deployment declared that the tenant has set, by name.
    pub secrets: BTreeMap<String, Secret>,
    /// Where each secret may be sent: its value goes only into requests one of its rules
    /// allows, and every other destination gets its placeholder as the guest wrote it
    /// (so no other destination can echo it back). A secret with no entry (a deployment
    /// from before bindings) may go wherever the deployment's own rules allow.
    pub bindings: BTreeMap<String, Rules>,
    /// Whether secrets are put in place in request bodies too (else headers only).
    pub secrets_in_body: bool,
}

impl Capabilities {
    /// Whether secret `name` may be put into a request to `target` (which the policy
    /// allowed).
    pub fn bound_to(&self, name: &str, target: &Target) -> bool {
        self.bindings.get(name).is_none_or(|rules| rules.allow(target))
    }
}

/// Bounds on outbound requests. Each phase is also inside the step's own deadline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutboundLimits {
    /// Longest a request may wait for a connection slot (this process's, its tenant's);
    /// past it the request ends with `connection-limit-reached`. The wait counts toward
    /// no other limit.
    #[serde(with = "secs")]
    pub slot_wait_timeout: Duration,
    /// Longest a connection (DNS, TCP, TLS) may take.
    #[serde(with = "secs")]
    pub connect_timeout: Duration,
    /// Longest from sending the request to the response's head.
    #[serde(with = "secs")]
    pub first_byte_timeout: Duration,
    /// Longest between two chunks of the response body.
    #[serde(with = "secs")]
    pub between_bytes_timeout: Duration,
    /// Longest a whole request may take, response body included.
    #[serde(with = "secs")]
    pub response_timeout: Duration,
    /// Largest response body a step may receive.
    pub max_response_bytes: u64,
    /// Largest request body the host buffers to put secrets in place.
    pub max_request_body_bytes: u64,
    /// Requests one step call may make.
    pub max_requests_per_call: u32,
    /// Outbound connections open at once in this process.
    pub max_connections: usize,
    /// Outbound connections open at once for one tenant.
    pub max_connections_per_tenant: usize,
}

impl Default for OutboundLimits {
    fn default() -> Self {
        Self {
            slot_wait_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(10),
            between_bytes_timeout: Duration::from_secs(10),
            response_timeout: Duration::from_secs(25),
            max_response_bytes: 16 * 1024 * 1024,
            max_request_body_bytes: 4 * 1024 * 1024,
            max_requests_per_call: 64,
            max_connections: 512,
            max_connections_per_tenant: 64,
        }
    }
}

/// Durations as whole seconds in configuration files.
mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

/// The operator's outbound configuration (`[outbound]` in the config file: `allow`,
/// `block_private`, `allow_cidrs`, and `[outbound.limits]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "OutboundFile", into = "OutboundFile")]
pub struct OutboundConfig {
    /// The operator's policy layer.
    pub operator: OperatorPolicy,
    /// The limits.
    pub limits: OutboundLimits,
}

/// [`OutboundConfig`] as a file writes it: one table, every key known.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct OutboundFile {
    allow: Rules,
    block_private: bool,
    allow_cidrs: Vec<ipnet::IpNet>,
    limits: OutboundLimits,
}

impl Default for OutboundFile {
    fn default() -> Self {
        OutboundConfig::default().into()
    }
}

impl From<OutboundFile> for OutboundConfig {
    fn from(f: OutboundFile) -> Self {
        let operator = OperatorPolicy { allow: f.allow, block_private: f.block_private, allow_cidrs: f.allow_cidrs };
        Self { operator, limits: f.limits }
    }
}

impl From<OutboundConfig> for OutboundFile {
    fn from(c: OutboundConfig) -> Self {
        let OperatorPolicy { allow, block_private, allow_cidrs } = c.operator;
        Self { allow, block_private, allow_cidrs, limits: c.limits }
    }
}

pub use spindle_core::reports::OutboundCall;

/// A request's record while it is under way (its body still read after the head).
#[derive(Debug)]
pub(crate) struct Entry {
    call: Mutex<OutboundCall>,
    started: Instant,
}

impl Entry {
    fn update(&self, f: impl FnOnce(&mut OutboundCall)) {
        let mut call = match self.call.lock() {
            Ok(call) => call,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut call);
    }

    fn finish(&self, result: Result<u16, &Error>) {
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.update(|call| {
            call.duration_ms = elapsed;
            match result {
                Ok(status) => call.status = Some(status),
                Err(e) => call.error = Some(error_name(e)),
            }
        });
    }

    fn deny(&self, why: &str) {
        self.update(|call| {
            call.denied = Some(why.to_owned());
            call.error = Some("HTTP-request-denied".to_owned());
        });
    }

    /// The response body failed after its head came.
    fn failed(&self, e: &Error) {
        self.update(|call| call.error = Some(error_name(e)));
    }

    fn received(&self, bytes: usize) {
        self.update(|call| call.bytes = call.bytes.saturating_add(bytes as u64));
    }

    fn snapshot(&self) -> OutboundCall {
        match self.call.lock() {
            Ok(call) => call.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// A `wasi:http` error as the guest sees its name.
fn error_name(e: &Error) -> String {
    let name = match e {
        Error::HttpRequestDenied => "HTTP-request-denied",
        Error::ConnectionLimitReached => "connection-limit-reached",
        Error::ConnectionTimeout => "connection-timeout",
        Error::ConnectionReadTimeout => "connection-read-timeout",
        Error::ConnectionRefused | Error::Connect(_) => "connection-refused",
        Error::ConnectionTerminated => "connection-terminated",
        Error::HttpResponseTimeout => "HTTP-response-timeout",
        Error::HttpResponseBodySize(_) => "HTTP-response-body-size",
        Error::HttpRequestBodySize(_) => "HTTP-request-body-size",
        Error::HttpRequestUriInvalid => "HTTP-request-URI-invalid",
        Error::DnsTimeout => "DNS-timeout",
        Error::DnsError { .. } | Error::InvalidDnsNameError(_) => "DNS-error",
        Error::Tls(_) | Error::TlsProtocolError | Error::TlsCertificateError => "TLS-protocol-error",
        Error::Hyper(_) | Error::HttpProtocolError => "HTTP-protocol-error",
        _ => "internal-error",
    };
    name.to_owned()
}

/// Process-wide outbound state: the configuration, connection caps, metrics.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: OutboundConfig,
    connections: Arc<Semaphore>,
    tenants: Mutex<HashMap<String, Arc<Semaphore>>>,
    metrics: Mutex<BTreeMap<MetricKey, u64>>,
}

/// What the outbound metrics count by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetricKey {
    /// The tenant.
    pub tenant: String,
    /// The kind.
    pub kind: String,
    /// The destination host.
    pub host: String,
    /// [`OutboundCall::outcome`].
    pub outcome: &'static str,
}

/// Most distinct metric series kept; later destinations count under `(other)`.
const MAX_SERIES: usize = 10_000;

impl Shared {
    pub(crate) fn new(config: OutboundConfig) -> Self {
        let connections = Arc::new(Semaphore::new(config.limits.max_connections.max(1)));
        Self { config, connections, tenants: Mutex::default(), metrics: Mutex::default() }
    }

    fn tenant_connections(&self, tenant: &str) -> Arc<Semaphore> {
        let mut tenants = match self.tenants.lock() {
            Ok(t) => t,
            Err(poisoned) => poisoned.into_inner(),
        };
        tenants
            .entry(tenant.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.limits.max_connections_per_tenant.max(1))))
            .clone()
    }

    pub(crate) fn count(&self, tenant: &str, kind: &str, calls: &[OutboundCall]) {
        let mut metrics = match self.metrics.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        for call in calls {
            let mut key = MetricKey {
                tenant: tenant.to_owned(),
                kind: kind.to_owned(),
                host: call.host.clone(),
                outcome: call.outcome(),
            };
            if !metrics.contains_key(&key) && metrics.len() >= MAX_SERIES {
                key.host = "(other)".into();
            }
            *metrics.entry(key).or_default() += 1;
        }
    }

    pub(crate) fn metrics(&self) -> Vec<(MetricKey, u64)> {
        match self.metrics.lock() {
            Ok(m) => m.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            Err(poisoned) => poisoned.into_inner().iter().map(|(k, v)| (k.clone(), *v)).collect(),
        }
    }
}

/// The outbound side of one store: the send hook wasmtime-wasi-http calls.
pub(crate) struct Outbound {
    shared: Arc<Shared>,
    caps: Arc<Capabilities>,
    /// Stands for a secret in what the guest builds; random per store, made when first
    /// needed (most steps never ask).
    placeholder_tag: std::sync::OnceLock<String>,
    /// The step's idempotency key and cursor, which the `Idempotency-Key`s derive from.
    key_parts: (String, Option<String>),
    /// Prefix of the `Idempotency-Key`s the host adds, made when first needed.
    idempotency_base: std::sync::OnceLock<String>,
    /// Every form of each secret value, with its placeholder: what the host replaces in
    /// responses and in all it keeps of the guest's (made when first needed).
    scrub: std::sync::OnceLock<Option<Arc<redact::Redactions>>>,
    /// The step's deadline: no request outlives it.
    deadline: Instant,
    entries: Vec<Arc<Entry>>,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound").field("requests", &self.entries.len()).finish_non_exhaustive()
    }
}

impl Outbound {
    /// The hook for one call. `idempotency_key` and `cursor` are the step's: a call
    /// that resumes from a cursor numbers its requests apart from the first call.
    pub(crate) fn new(
        shared: Arc<Shared>,
        caps: Arc<Capabilities>,
        idempotency_key: String,
        cursor: Option<String>,
        deadline: Instant,
    ) -> Self {
        Self {
            shared,
            caps,
            placeholder_tag: std::sync::OnceLock::new(),
            key_parts: (idempotency_key, cursor),
            idempotency_base: std::sync::OnceLock::new(),
            scrub: std::sync::OnceLock::new(),
            deadline,
            entries: Vec::new(),
        }
    }

    fn idempotency_base(&self) -> &str {
        self.idempotency_base.get_or_init(|| match &self.key_parts {
            (key, None) => key.clone(),
            (key, Some(cursor)) => format!("{key}@{}", &hex::encode(Sha256::digest(cursor.as_bytes()))[..12]),
        })
    }

    /// The capabilities in force.
    pub(crate) fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    /// The forms of the secret values the step could send, each with its placeholder;
    /// `None` when the step has no secret.
    pub(crate) fn redactions(&self) -> Option<Arc<redact::Redactions>> {
        self.scrub
            .get_or_init(|| {
                redact::Redactions::new(
                    self.caps.secrets.iter().filter_map(|(name, s)| Some((s.0.as_str(), self.placeholder(name)?))),
                )
            })
            .clone()
    }

    /// `text` with every form of a secret value replaced by its placeholder: applied to
    /// all the host keeps of the guest's (outputs, cursors, messages, log lines, stdio).
    pub(crate) fn scrub(&self, text: &str) -> Option<String> {
        let replaced = self.redactions()?.apply(text.as_bytes())?;
        Some(String::from_utf8_lossy(&replaced).into_owned())
    }

    /// The placeholder the guest gets for secret `name`, if it may use it.
    pub(crate) fn placeholder(&self, name: &str) -> Option<String> {
        let tag = self.placeholder_tag.get_or_init(|| hex::encode(rand::random::<[u8; 8]>()));
        self.caps.secrets.contains_key(name).then(|| format!("{{{{spindle-secret:{name}:{tag}}}}}"))
    }

    /// The records of the requests made so far.
    pub(crate) fn calls(&self) -> Vec<OutboundCall> {
        let mut calls: Vec<OutboundCall> = self.entries.iter().map(|e| e.snapshot()).collect();
        // A record keeps what the guest wrote, scrubbed like all else the host keeps of it.
        if let Some(redactions) = self.redactions() {
            for call in &mut calls {
                for text in [&mut call.host, &mut call.path, &mut call.method] {
                    crate::scrub::text(&redactions, text);
                }
                if let Some(error) = &mut call.error {
                    crate::scrub::text(&redactions, error);
                }
            }
        }
        calls
    }

    /// `text` with the placeholder of every secret bound to `target` replaced by its
    /// value (others stay as written).
    fn reveal(&self, text: &[u8], target: &Target) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        for (name, secret) in self.caps.secrets.iter().filter(|(name, _)| self.caps.bound_to(name, target)) {
            if let Some(placeholder) = self.placeholder(name) {
                let current = out.as_deref().unwrap_or(text);
                if let Some(replaced) = replace(current, placeholder.as_bytes(), secret.0.as_bytes()) {
                    out = Some(replaced);
                }
            }
        }
        out
    }

    fn policy(&self) -> Policy {
        Policy {
            operator: self.shared.config.operator.clone(),
            tenant: self.caps.tenant_rules.clone(),
            kind: self.caps.kind_rules.clone(),
        }
    }
}

/// `haystack` with every `needle` replaced by `with`, or `None` if it has none.
fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    let mut out = Vec::with_capacity(haystack.len());
    let (mut i, mut found) = (0, false);
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
            found = true;
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    found.then_some(out)
}

type SendFuture = Box<
    dyn Future<Output = Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>), Error>>
        + Send,
>;

impl WasiHttpHooks for Outbound {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        let seq = u32::try_from(self.entries.len() + 1).unwrap_or(u32::MAX);
        let uri = request.uri();
        let target = Target::new(
            request.method().as_str(),
            uri.scheme_str().unwrap_or(""),
            uri.authority().map_or("", |a| a.as_str()),
            uri.path_and_query().map_or("/", |p| p.as_str()),
        );
        let call = match &target {
            Some(t) => OutboundCall {
                seq,
                method: t.method.clone(),
                scheme: t.scheme.clone(),
                host: t.host.clone(),
                port: t.port,
                path: t.path.clone(),
                ..OutboundCall::default()
            },
            // Malformed: kept as the guest wrote it (capped), port 0 saying there was none.
            None => {
                let written = |text: &str| text.chars().take(256).collect::<String>();
                OutboundCall {
                    seq,
                    method: written(request.method().as_str()),
                    scheme: written(uri.scheme_str().unwrap_or("")),
                    host: written(uri.authority().map_or("", |a| a.as_str())),
                    path: written(uri.path()),
                    ..OutboundCall::default()
                }
            }
        };
        let entry = Arc::new(Entry { call: Mutex::new(call), started: Instant::now() });
        self.entries.push(entry.clone());
        let cap = self.shared.config.limits.max_request_body_bytes;
        let deny = |entry: &Entry, why: &str, body: WasiBody| -> SendFuture {
            entry.deny(why);
            entry.finish(Err(&Error::HttpRequestDenied));
            // The denial is answered at once; the body the guest may still be writing is
            // taken and dropped beside it, so that its writes succeed and the guest meets
            // the denial as the response's error (a JavaScript runtime whose body stream
            // closed under it failed the whole step instead).
            tokio::spawn(drain(body, cap));
            Box::new(std::future::ready(Err(Error::HttpRequestDenied)))
        };
        let Some(target) = target else {
            return deny(&entry, Denial::Malformed.as_str(), request.into_body());
        };
        if seq > self.shared.config.limits.max_requests_per_call {
            return deny(&entry, "request-limit", request.into_body());
        }
        if let Err(denial) = self.policy().check(&target) {
            return deny(&entry, denial.as_str(), request.into_body());
        }
        // Allowed: secrets bound to this destination go in place, in headers only unless
        // the kind opted in.
        for value in request.headers_mut().values_mut() {
            if let Some(revealed) = self.reveal(value.as_bytes(), &target)
                && let Ok(revealed) = HeaderValue::from_bytes(&revealed)
            {
                let mut revealed = revealed;
                revealed.set_sensitive(true);
                *value = revealed;
            }
        }
        if !request.headers().contains_key("idempotency-key")
            && let Ok(key) = HeaderValue::from_str(&format!("{}:{seq}", self.idempotency_base()))
        {
            request.headers_mut().insert("idempotency-key", key);
        }
        let body_secrets: Option<Vec<(Vec<u8>, Vec<u8>)>> = self.caps.secrets_in_body.then(|| {
            self.caps
                .secrets
                .iter()
                .filter(|(name, _)| self.caps.bound_to(name, &target))
                .filter_map(|(name, s)| Some((self.placeholder(name)?.into_bytes(), s.0.as_bytes().to_vec())))
                .collect()
        });
        // What a destination echoes back reaches the guest as the placeholders it holds,
        // decoded first: only encodings the host decodes are asked for.
        let redactions = self.redactions();
        if redactions.is_some() {
            request.headers_mut().insert(http::header::ACCEPT_ENCODING, HeaderValue::from_static(decode::ACCEPTED));
        }
        let job = send::Job {
            shared: self.shared.clone(),
            tenant: self.caps.tenant.clone(),
            target,
            options,
            deadline: self.deadline,
            entry,
            body_secrets,
            redactions,
        };
        Box::new(send::send(request, job))
    }
}

/// Reads a denied request's body to its end, or to `cap` bytes, and drops it.
async fn drain(body: WasiBody, cap: u64) {
    use http_body_util::BodyExt;
    let _ = http_body_util::Limited::new(body, usize::try_from(cap).unwrap_or(usize::MAX)).collect().await;
}

/// The body of a request with the secrets put in place (bounded in size).
async fn revealed_body(body: WasiBody, secrets: &[(Vec<u8>, Vec<u8>)], cap: u64) -> Result<WasiBody, Error> {
    use http_body_util::BodyExt;
    let limited = http_body_util::Limited::new(body, usize::try_from(cap).unwrap_or(usize::MAX));
    let bytes = match limited.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Err(match e.downcast::<Error>() {
                Ok(inner) => *inner,
                Err(_) => Error::HttpRequestBodySize(Some(cap)),
            });
        }
    };
    let mut bytes = bytes.to_vec();
    for (placeholder, value) in secrets {
        if let Some(replaced) = replace(&bytes, placeholder, value) {
            bytes = replaced;
        }
    }
    Ok(http_body_util::Full::new(Bytes::from(bytes)).map_err(|never| match never {}).boxed_unsync())
}

/// A body of the given chunks, in order: what the decoding and scrubbing tests feed
/// through their body wrappers.
#[cfg(test)]
struct Chunks(std::collections::VecDeque<bytes::Bytes>);

#[cfg(test)]
impl http_body::Body for Chunks {
    type Data = bytes::Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|chunk| Ok(http_body::Frame::data(chunk))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_replaced_everywhere_they_occur() {
        assert_eq!(replace(b"a{x}b{x}", b"{x}", b"SECRET").as_deref(), Some(&b"aSECRETbSECRET"[..]));
        assert_eq!(replace(b"nothing", b"{x}", b"S"), None);
    }

    #[test]
    fn the_guest_gets_placeholders_only_for_declared_secrets() {
        let mut caps = Capabilities::default();
        caps.secrets.insert("token".into(), Secret("s3cr3t".into()));
        let hook = Outbound::new(
            Arc::new(Shared::new(OutboundConfig::default())),
            Arc::new(caps),
            "job/step".into(),
            None,
            Instant::now(),
        );
        let placeholder = hook.placeholder("token").expect("declared");
        assert!(!placeholder.contains("s3cr3t"));
        assert_eq!(hook.placeholder("other"), None);
        let header = format!("Bearer {placeholder}");
        let target = Target::new("GET", "https", "api.example.com", "/").expect("a target");
        assert_eq!(hook.reveal(header.as_bytes(), &target).as_deref(), Some(&b"Bearer s3cr3t"[..]));
        assert_eq!(format!("{:?}", Secret("s3cr3t".into())), "Secret(…)");
    }

    /// A body the test writes chunk by chunk, as a guest writes after `handle`.
    struct Chunks(tokio::sync::mpsc::Receiver<Bytes>);

    impl http_body::Body for Chunks {
        type Data = Bytes;
        type Error = Error;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Error>>> {
            self.0.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(http_body::Frame::data(b))))
        }
    }

    #[tokio::test]
    async fn a_denied_request_is_answered_at_once_and_the_body_written_after_is_still_taken() {
        use http_body_util::BodyExt;
        let mut hook = Outbound::new(
            Arc::new(Shared::new(OutboundConfig::default())),
            Arc::new(Capabilities::default()),
            "j/s".into(),
            None,
            Instant::now() + Duration::from_secs(30),
        );
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let request = http::Request::builder()
            .method("POST")
            .uri("http://198.51.100.7/hook")
            .body(Chunks(rx).boxed_unsync())
            .expect("a request");
        let answer = std::pin::Pin::from(hook.send_request(request, None, Box::new(async { Ok(()) }))).await;
        assert!(matches!(answer, Err(Error::HttpRequestDenied)), "denied");
        for _ in 0..8 {
            tx.send(Bytes::from_static(b"0123456789")).await.expect("the body is still taken");
        }
    }

    /// A hook whose every layer allows loopback, for tenant `t` with one connection slot,
    /// the whole-request limit `limit`, and secret `tok` put in bodies too.
    fn lab(limit: Duration) -> (Outbound, Arc<Shared>) {
        let rules = Rules::parse(&["* http://127.0.0.1:*"]).expect("rules");
        let config = OutboundConfig {
            operator: OperatorPolicy {
                allow: rules.clone(),
                block_private: true,
                allow_cidrs: vec!["127.0.0.0/8".parse().expect("cidr")],
            },
            limits: OutboundLimits {
                response_timeout: limit,
                max_connections_per_tenant: 1,
                ..OutboundLimits::default()
            },
        };
        let shared = Arc::new(Shared::new(config));
        let mut caps = Capabilities {
            tenant: "t".into(),
            tenant_rules: rules.clone(),
            kind_rules: rules,
            secrets_in_body: true,
            ..Capabilities::default()
        };
        caps.secrets.insert("tok".into(), Secret("value-1234567890".into()));
        let hook =
            Outbound::new(shared.clone(), Arc::new(caps), "j/s".into(), None, Instant::now() + Duration::from_secs(60));
        (hook, shared)
    }

    /// A body the host puts secrets into was read without a limit after the connection
    /// and its slots were taken: a guest that never finished it held both. It is read
    /// first now, within the whole-request limit, and nothing connects.
    #[tokio::test]
    async fn a_body_the_guest_never_finishes_holds_no_connection_and_ends_at_the_limit() {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counting = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::mem::forget(stream);
            }
        });
        let (mut hook, shared) = lab(Duration::from_millis(300));
        let (_tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let request = http::Request::builder()
            .method("POST")
            .uri(format!("http://{addr}/hook"))
            .body(Chunks(rx).boxed_unsync())
            .expect("a request");
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            std::pin::Pin::from(hook.send_request(request, None, Box::new(async { Ok(()) }))),
        )
        .await
        .expect("the request ends at its limit");
        assert!(matches!(answer, Err(Error::HttpResponseTimeout)), "{:?}", answer.err());
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing connected");
        assert_eq!(shared.tenant_connections("t").available_permits(), 1, "the tenant's slot is free");
    }

    /// A response the guest never reads kept its connection's slots until its step
    /// ended. They go back at the whole-request limit now, read or not.
    #[tokio::test]
    async fn a_response_the_guest_never_reads_gives_its_slot_back_at_the_limit() {
        use http_body_util::BodyExt;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = [0u8; 1024];
                    let _ = stream.read(&mut head).await;
                    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\nsome").await;
                    std::future::pending::<()>().await;
                });
            }
        });
        let (mut hook, shared) = lab(Duration::from_millis(300));
        let request = http::Request::builder()
            .method("GET")
            .uri(format!("http://{addr}/slow"))
            .body(http_body_util::Empty::new().map_err(|n| match n {}).boxed_unsync())
            .expect("a request");
        let (response, _worker) = std::pin::Pin::from(hook.send_request(request, None, Box::new(async { Ok(()) })))
            .await
            .expect("a response head");
        assert_eq!(shared.tenant_connections("t").available_permits(), 0, "the slot is held while it may be read");
        let slot = tokio::time::timeout(Duration::from_secs(10), shared.tenant_connections("t").acquire_owned())
            .await
            .expect("the slot goes back at the limit, the body unread");
        drop((slot, response));
    }

    #[test]
    fn a_resumed_call_numbers_its_requests_apart() {
        let shared = Arc::new(Shared::new(OutboundConfig::default()));
        let caps = Arc::new(Capabilities::default());
        let first = Outbound::new(shared.clone(), caps.clone(), "j/s".into(), None, Instant::now());
        let resumed = Outbound::new(shared.clone(), caps.clone(), "j/s".into(), Some("42".into()), Instant::now());
        let again = Outbound::new(shared, caps, "j/s".into(), Some("42".into()), Instant::now());
        assert_eq!(first.idempotency_base(), "j/s");
        assert_ne!(resumed.idempotency_base(), first.idempotency_base());
        assert_eq!(resumed.idempotency_base(), again.idempotency_base(), "a re-run sends the same keys");
    }
}
