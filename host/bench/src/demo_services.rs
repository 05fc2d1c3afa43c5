//! The services the demo's kinds call, on 127.0.0.1 inside the demo's process: a payment
//! processor (`payment-saga`) and a webhook receiver (`webhook-delivery`). Real HTTP over
//! real sockets, so the demo shows outbound calls end to end: the policy, the secrets the
//! host puts in place, the idempotency keys, a retried 503 and a refusal on 402.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};
use sha2::Sha256;

/// The card the processor declines.
pub const DECLINED_CARD: &str = "4000000000000002";

/// What the services saw, for the demo's summary.
#[derive(Debug, Default)]
pub struct Seen {
    /// Requests by `METHOD path`.
    pub requests: Vec<String>,
    /// Webhooks whose signature verified.
    pub verified: usize,
    /// Requests that carried the expected API key.
    pub authorised: usize,
    /// Captures answered 503, by authorisation.
    flaky: HashMap<String, u32>,
    /// Deliveries answered 503, by webhook id.
    failed_once: HashMap<String, u32>,
    authorisations: u32,
}

/// The running services.
#[derive(Debug, Clone)]
pub struct Services {
    /// Where they listen.
    pub addr: SocketAddr,
    /// What they saw.
    pub seen: Arc<Mutex<Seen>>,
    api_key: Arc<str>,
    signing_key: Arc<str>,
}

impl Services {
    /// Starts them; `api_key` is what the processor expects as a Bearer token and
    /// `signing_key` what the receiver checks signatures with.
    pub async fn start(api_key: &str, signing_key: &str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let services = Self {
            addr: listener.local_addr()?,
            seen: Arc::default(),
            api_key: Arc::from(api_key),
            signing_key: Arc::from(signing_key),
        };
        let served = services.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let services = served.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let services = services.clone();
                        async move { Ok::<_, std::convert::Infallible>(services.answer(request).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        Ok(services)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let path = parts.uri.path().to_owned();
        self.lock().requests.push(format!("{} {path}", parts.method));
        let input: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if let Some(hook) = path.strip_prefix("/hooks/") {
            return self.webhook(
                hook,
                &header("webhook-id"),
                &header("webhook-timestamp"),
                &header("webhook-signature"),
                &body,
            );
        }
        if header("authorization") == format!("Bearer {}", self.api_key) {
            self.lock().authorised += 1;
        } else {
            return reply(401, json!({ "error": "a valid API key is required" }));
        }
        match path.as_str() {
            "/authorisations" => {
                if input["card"] == DECLINED_CARD {
                    return reply(402, json!({ "error": "the card was declined" }));
                }
                let n = {
                    let mut seen = self.lock();
                    seen.authorisations += 1;
                    seen.authorisations
                };
                // `flaky-N` accounts: the first N captures of their payments answer 503.
                let id = format!("auth_{n}_{}", input["account"].as_str().unwrap_or("acct"));
                reply(201, json!({ "id": id }))
            }
            "/captures" => {
                let authorisation = input["authorisation"].as_str().unwrap_or_default().to_owned();
                let outages = authorisation.rsplit_once("flaky-").and_then(|(_, n)| n.parse::<u32>().ok()).unwrap_or(0);
                let mut seen = self.lock();
                let failed = seen.flaky.entry(authorisation.clone()).or_default();
                if *failed < outages {
                    *failed += 1;
                    return reply(503, json!({ "error": "the processor is briefly unavailable" }));
                }
                reply(200, json!({ "id": format!("cap_{authorisation}") }))
            }
            "/voids" => reply(200, json!({ "voided": input["authorisation"] })),
            _ => reply(404, json!({ "error": "no such endpoint" })),
        }
    }

    /// The receiver: checks the signature, then answers as the hook's path says (`ok`,
    /// `flaky`: 503 once per delivery, `gone`: 410).
    fn webhook(&self, hook: &str, id: &str, timestamp: &str, signature: &str, body: &[u8]) -> Response<Full<Bytes>> {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.signing_key.as_bytes()) else {
            return reply(500, json!({ "error": "no key" }));
        };
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        let expected = format!("v1={}", hex::encode(mac.finalize().into_bytes()));
        if signature != expected {
            return reply(401, json!({ "error": "bad signature" }));
        }
        let mut seen = self.lock();
        seen.verified += 1;
        match hook {
            "flaky" => {
                let tries = seen.failed_once.entry(id.to_owned()).or_default();
                *tries += 1;
                if *tries == 1 {
                    reply(503, json!({ "error": "try again" }))
                } else {
                    reply(200, json!({ "ok": true }))
                }
            }
            "gone" => reply(410, json!({ "error": "this endpoint is gone" })),
            _ => reply(200, json!({ "ok": true })),
        }
    }
}

fn reply(status: u16, body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}
