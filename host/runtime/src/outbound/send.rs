//! Sending one allowed request: take a connection slot (process and tenant), resolve
//! the host, keep only addresses the operator allows, connect to one of those (never
//! resolving again: no DNS-rebinding window), TLS for `https`, HTTP/1.1, and a response
//! body bounded in size, in idle time and in total time.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::net::TcpStream;
use tokio::time::Sleep;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

use super::decode::{Decoded, Encoding};
use super::redact::{Redacted, Redactions};
use super::{Entry, Shared, Target, revealed_body};

/// One request's context.
pub(super) struct Job {
    pub(super) shared: Arc<Shared>,
    pub(super) tenant: String,
    pub(super) target: Target,
    pub(super) options: Option<RequestOptions>,
    pub(super) deadline: Instant,
    pub(super) entry: Arc<Entry>,
    pub(super) body_secrets: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    /// The forms of the secrets in place, replaced in what comes back.
    pub(super) redactions: Option<Arc<Redactions>>,
}

type Sent = (http::Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>);

/// Sends `request`, recording how it ended.
pub(super) async fn send(request: http::Request<WasiBody>, job: Job) -> Result<Sent, Error> {
    let entry = job.entry.clone();
    let result = send_checked(request, job).await;
    match &result {
        Ok((response, _)) => entry.finish(Ok(response.status().as_u16())),
        Err(e) => entry.finish(Err(e)),
    }
    result
}

/// The smaller of the guest's wish and the host's limit.
fn bounded(asked: Option<Duration>, limit: Duration) -> Duration {
    asked.map_or(limit, |asked| asked.min(limit))
}

async fn send_checked(mut request: http::Request<WasiBody>, job: Job) -> Result<Sent, Error> {
    let limits = &job.shared.config.limits;
    // A body the host puts secrets into is read whole first, before any slot or
    // connection is taken, and within the whole-request limit: a guest that never
    // finishes it held the destination's connections and its tenant's slots for as long
    // as it liked.
    if let Some(secrets) = &job.body_secrets {
        // The length changes with the values put in place; hyper sets it from the body.
        request.headers_mut().remove(http::header::CONTENT_LENGTH);
        let body =
            std::mem::replace(request.body_mut(), http_body_util::Empty::new().map_err(|n| match n {}).boxed_unsync());
        let within = limits.response_timeout.min(job.deadline.saturating_duration_since(Instant::now()));
        *request.body_mut() = tokio::time::timeout(within, revealed_body(body, secrets, limits.max_request_body_bytes))
            .await
            .map_err(|_| Error::HttpResponseTimeout)??;
    }
    // The wait for a slot has its own limit (and the step's deadline), and counts toward
    // none of the request's own.
    let slots_by = tokio::time::Instant::now()
        + limits.slot_wait_timeout.min(job.deadline.saturating_duration_since(Instant::now()));
    let process_slot = tokio::time::timeout_at(slots_by, job.shared.connections.clone().acquire_owned())
        .await
        .map_err(|_| Error::ConnectionLimitReached)?
        .map_err(|_| Error::ConnectionLimitReached)?;
    let tenant_slot = tokio::time::timeout_at(slots_by, job.shared.tenant_connections(&job.tenant).acquire_owned())
        .await
        .map_err(|_| Error::ConnectionLimitReached)?
        .map_err(|_| Error::ConnectionLimitReached)?;

    // Nothing outlives the step, nor the whole-request limit, counted from here.
    let until_deadline = job.deadline.saturating_duration_since(Instant::now());
    let total = limits.response_timeout.min(until_deadline);
    let ends_at = tokio::time::Instant::now() + total;
    let connect_timeout = bounded(job.options.and_then(|o| o.connect_timeout), limits.connect_timeout).min(total);
    let first_byte = bounded(job.options.and_then(|o| o.first_byte_timeout), limits.first_byte_timeout);
    let between_bytes = bounded(job.options.and_then(|o| o.between_bytes_timeout), limits.between_bytes_timeout);

    let target = &job.target;
    let addresses = resolve(target, connect_timeout).await?;
    let operator = &job.shared.config.operator;
    let allowed: Vec<SocketAddr> = addresses.iter().copied().filter(|a| operator.address_allowed(a.ip())).collect();
    if allowed.is_empty() {
        job.entry.deny(super::Denial::Address.as_str());
        return Err(Error::HttpRequestDenied);
    }
    let tcp = tokio::time::timeout_at(tokio::time::Instant::now() + connect_timeout, connect(&allowed))
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
    let stream: Box<dyn Stream> = if target.scheme == "https" {
        let tls = tokio::time::timeout(connect_timeout, tls(tcp, &target.host))
            .await
            .map_err(|_| Error::ConnectionTimeout)??;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (mut sender, connection) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;
    // The connection's I/O runs beside the request; it ends with the response body, or
    // when wasmtime-wasi-http drops the worker future below.
    let driver = tokio::spawn(connection);
    let stop_driver = AbortOnDrop(driver.abort_handle());

    // Origin form on the wire: the scheme and authority went into the connection, and the
    // path is the normalised one the rules matched, not the one the guest wrote.
    let path = job.target.path_and_query();
    *request.uri_mut() = http::Uri::builder().path_and_query(path).build().map_err(|_| Error::HttpRequestUriInvalid)?;

    let head_by = (tokio::time::Instant::now() + first_byte).min(ends_at);
    let response = match tokio::time::timeout_at(head_by, sender.send_request(request)).await {
        Err(_) if head_by == ends_at => return Err(Error::HttpResponseTimeout),
        Err(_) => return Err(Error::ConnectionReadTimeout),
        Ok(result) => result?,
    };
    let cap = limits.max_response_bytes;
    if response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .is_some_and(|n| n > cap)
    {
        return Err(Error::HttpResponseBodySize(Some(cap)));
    }
    let entry = job.entry.clone();
    let mut response = response;
    // A step with secrets reads a body the host decoded (and scrubbed); one in an
    // encoding the host cannot decode is refused, since no scrub could read it.
    let mut encoding = Encoding::Identity;
    if let Some(redactions) = &job.redactions {
        encoding =
            Encoding::of(response.headers().get(http::header::CONTENT_ENCODING)).ok_or(Error::HttpProtocolError)?;
        if encoding != Encoding::Identity {
            response.headers_mut().remove(http::header::CONTENT_ENCODING);
        }
        redactions.headers(response.headers_mut());
    }
    let redactions = job.redactions.clone();
    // The slots and the connection end with the body, or at the whole-request limit
    // whether or not the guest reads it: a response the guest never read kept both.
    let (body_done, body_dropped) = tokio::sync::oneshot::channel::<()>();
    let connection = driver.abort_handle();
    tokio::spawn(async move {
        let _slots = (process_slot, tenant_slot);
        tokio::select! {
            () = tokio::time::sleep_until(ends_at) => connection.abort(),
            _ = body_dropped => {}
        }
    });
    let response = response.map(move |incoming| {
        let guarded = Guarded {
            incoming,
            between_bytes,
            idle: Box::pin(tokio::time::sleep(between_bytes)),
            ends: Box::pin(tokio::time::sleep_until(ends_at)),
            cap,
            seen: 0,
            entry,
            _slots: body_done,
        };
        let body = match encoding {
            Encoding::Identity => guarded.boxed_unsync(),
            encoding => Decoded::new(guarded.boxed_unsync(), encoding, cap).boxed_unsync(),
        };
        match redactions {
            Some(redactions) => Redacted::new(body, redactions).boxed_unsync(),
            None => body,
        }
    });
    let worker = async move {
        let _stop = stop_driver;
        match driver.await {
            Ok(Ok(())) | Err(_) => Ok(()),
            Ok(Err(e)) => Err(Error::from(e)),
        }
    };
    Ok((response, Box::new(worker)))
}

/// The addresses `target`'s host stands for: itself if it is an IP literal, else what
/// the resolver answers within `timeout`.
async fn resolve(target: &Target, timeout: Duration) -> Result<Vec<SocketAddr>, Error> {
    let host = target.host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, target.port)]);
    }
    match tokio::time::timeout(timeout, tokio::net::lookup_host((host, target.port))).await {
        Err(_) => Err(Error::DnsTimeout),
        Ok(Err(_)) => Err(Error::DnsError { rcode: Some("name unresolved".into()), info_code: None }),
        Ok(Ok(addresses)) => Ok(addresses.collect()),
    }
}

/// A connection to the first of `addresses` that accepts.
async fn connect(addresses: &[SocketAddr]) -> Result<TcpStream, Error> {
    let mut last = Error::ConnectionRefused;
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = Error::Connect(e),
        }
    }
    Err(last)
}

/// A TLS session over `tcp`, verifying `host`'s certificate against the web PKI roots.
async fn tls(tcp: TcpStream, host: &str) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Error> {
    use rustls::pki_types::ServerName;
    // Built once per process: the root store and the provider are the same for every
    // request, and building them costs more than a handshake's own work.
    static CONFIG: std::sync::OnceLock<Option<Arc<rustls::ClientConfig>>> = std::sync::OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .ok()
            .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
    });
    let config = config.clone().ok_or(Error::TlsProtocolError)?;
    let name = match host.parse::<IpAddr>() {
        Ok(ip) => ServerName::from(ip),
        Err(_) => ServerName::try_from(host.to_owned()).map_err(Error::InvalidDnsNameError)?,
    };
    tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.map_err(Error::Tls)
}

/// What a connection runs over: TCP or TLS over TCP.
trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A response body bounded in bytes, in time between chunks and in total time; it
/// counts what the guest received and holds the connection's slots until it ends.
struct Guarded {
    incoming: hyper::body::Incoming,
    between_bytes: Duration,
    idle: Pin<Box<Sleep>>,
    ends: Pin<Box<Sleep>>,
    cap: u64,
    seen: u64,
    entry: Arc<Entry>,
    /// Dropped with the body: its connection's slots go back then (or at the limit).
    _slots: tokio::sync::oneshot::Sender<()>,
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let fail = |entry: &Entry, e: Error| {
            entry.failed(&e);
            Poll::Ready(Some(Err(e)))
        };
        if self.ends.as_mut().poll(cx).is_ready() {
            return fail(&self.entry, Error::HttpResponseTimeout);
        }
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => fail(&self.entry, Error::from(e)),
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    // A frame that would pass the cap is never handed over: the record
                    // counts only what the guest received.
                    let seen = self.seen.saturating_add(data.len() as u64);
                    if seen > self.cap {
                        let cap = self.cap;
                        return fail(&self.entry, Error::HttpResponseBodySize(Some(cap)));
                    }
                    self.seen = seen;
                    self.entry.received(data.len());
                }
                let next = tokio::time::Instant::now() + self.between_bytes;
                self.idle.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                if self.idle.as_mut().poll(cx).is_ready() {
                    return fail(&self.entry, Error::ConnectionReadTimeout);
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }
}
