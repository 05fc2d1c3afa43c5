//! Kind `outbound`: one cancellable step, `call`, that sends the requests its input
//! lists and reports what came back, for the host's outbound HTTP tests (policy, limits,
//! secrets, settings).
//!
//! Input:
//!
//! ```json
//! {
//!   "requests": [{
//!     "method": "GET", "url": "http://127.0.0.1:1234/x",
//!     "headers": [["name", "value"]], "body": "text or null",
//!     "secret_header": {"secret": "NAME", "header": "authorization", "format": "Bearer {}"}
//!   }],
//!   "hmac": {"secret": "NAME", "message": "text"},
//!   "settings": ["name"],
//!   "fail_on_error": false
//! }
//! ```
//!
//! All but `requests` may be left out. `secret_header` adds a header whose value is
//! `format` with `{}` replaced by the secret's placeholder (left out if the secret is not
//! available). Output:
//!
//! ```json
//! {
//!   "responses": [{"status": 200, "body": "first 4096 bytes", "bytes": 12, "error": null, "denied": false}],
//!   "hmac": "hex or null", "settings": {"name": "value or null"}, "placeholder_seen": true
//! }
//! ```
//!
//! With `fail_on_error`, a request that failed other than by denial makes the step
//! retryable (`upstream-unavailable`) instead. The guest never sees a secret's value, and
//! reports no placeholder either.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use spindle_guest::config;
use spindle_guest::http::{self, HttpError, Method};
use spindle_guest::prelude::*;

struct Outbound;

/// Bytes of each response body the output carries, so it stays small.
const BODY_EXCERPT: usize = 4096;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    requests: Vec<RequestSpec>,
    #[serde(default)]
    hmac: Option<HmacSpec>,
    #[serde(default)]
    settings: Vec<String>,
    #[serde(default)]
    fail_on_error: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestSpec {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    secret_header: Option<SecretHeader>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretHeader {
    secret: String,
    header: String,
    format: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HmacSpec {
    secret: String,
    message: String,
}

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct Output {
    responses: Vec<Exchange>,
    hmac: Option<String>,
    settings: BTreeMap<String, Option<String>>,
    placeholder_seen: bool,
}

/// What became of one request.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct Exchange {
    status: Option<u16>,
    body: Option<String>,
    bytes: usize,
    error: Option<String>,
    denied: bool,
}

impl Kind for Outbound {
    fn describe() -> KindSpec {
        KindSpec::new("outbound").step("call", 1).cancellable().retry(3, 100, 1_000)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        match step.key() {
            "call" => call(step),
            other => Err(StepError::unknown_step(other)),
        }
    }
}

fn call(step: &mut Step) -> Result<Outcome, StepError> {
    let input: Input = step.input()?;
    let mut output = Output::default();
    let mut failed = None;
    let total = input.requests.len() as u64;
    for (done, spec) in (1..).zip(&input.requests) {
        let (request, placeholder_seen) = build(spec);
        output.placeholder_seen |= placeholder_seen;
        let exchange = match request.send() {
            Ok(response) => Exchange {
                status: Some(response.status()),
                body: Some(excerpt(response.body())),
                bytes: response.body().len(),
                ..Exchange::default()
            },
            Err(error) => {
                log::info(format!("{} {}: {error}", spec.method, spec.url));
                let denied = error == HttpError::Denied;
                let exchange = Exchange { error: Some(error.to_string()), denied, ..Exchange::default() };
                if !denied {
                    failed.get_or_insert(error);
                }
                exchange
            }
        };
        output.responses.push(exchange);
        if step.heartbeat(Some(Checkpoint::new(done.to_string(), done, total))).should_stop() {
            return Err(StepError::retryable("stopped", "stopped when the host said so"));
        }
    }
    if input.fail_on_error
        && let Some(error) = failed
    {
        return Err(
            StepError::retryable("upstream-unavailable", "an outbound request failed").with_detail(error.to_string())
        );
    }
    output.hmac = input.hmac.and_then(|spec| config::hmac_sha256(&spec.secret, spec.message)).map(|mac| hex(&mac));
    output.settings = input
        .settings
        .into_iter()
        .map(|name| {
            let value = config::get(&name);
            (name, value)
        })
        .collect();
    Ok(Outcome::complete(&output))
}

/// The request `spec` describes, and whether its secret header got a placeholder.
fn build(spec: &RequestSpec) -> (http::Request, bool) {
    let mut request = http::Request::new(method(&spec.method), &spec.url);
    for (name, value) in &spec.headers {
        request = request.header(name, value);
    }
    if let Some(body) = &spec.body {
        request = request.body(body.as_bytes());
    }
    let placeholder = spec.secret_header.as_ref().and_then(|secret| {
        let placeholder = config::secret(&secret.secret)?;
        Some((secret, placeholder))
    });
    let seen = placeholder.is_some();
    if let Some((secret, placeholder)) = placeholder {
        request = request.header(&secret.header, secret.format.replace("{}", &placeholder));
    }
    (request, seen)
}

fn method(name: &str) -> Method {
    match name {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        other => Method::Other(other.to_owned()),
    }
}

fn excerpt(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(BODY_EXCERPT)]).into_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

spindle_guest::export_kind!(Outbound);

#[cfg(test)]
mod tests {
    use serde_json::json;
    use spindle_guest::http::Response;
    use spindle_guest::testing::{self, run_job};

    use super::*;

    fn run(input: &serde_json::Value) -> spindle_guest::testing::JobRun {
        run_job::<Outbound>(input.to_string().as_bytes())
    }

    #[test]
    fn reports_each_exchange_with_secrets_in_place_upstream_only() {
        testing::set_secret("token", "s3cr3t");
        testing::set_secret("key", "Jefe");
        testing::set_config("region", "eu");
        testing::set_http_handler(|request| match request.url() {
            "http://upstream/echo" => {
                let auth = request.headers().iter().find(|(name, _)| name == "authorization").map(|(_, v)| v.clone());
                Ok(Response::new(200, auth.unwrap_or_default()))
            }
            "http://upstream/big" => Ok(Response::new(503, vec![b'x'; 5_000])),
            _ => Err(HttpError::Denied),
        });
        let run = run(&json!({
            "requests": [
                {"method": "GET", "url": "http://upstream/echo",
                 "secret_header": {"secret": "token", "header": "authorization", "format": "Bearer {}"}},
                {"method": "POST", "url": "http://upstream/big", "body": "hi", "headers": [["x-a", "1"]]},
                {"method": "GET", "url": "http://elsewhere/"},
            ],
            "hmac": {"secret": "key", "message": "what do ya want for nothing?"},
            "settings": ["region", "unset"],
        }));
        let output: Output = run.output("call").expect("call completed");
        assert!(output.placeholder_seen);
        assert_eq!(output.responses[0].body.as_deref(), Some("Bearer s3cr3t"));
        assert_eq!((output.responses[1].status, output.responses[1].bytes), (Some(503), 5_000));
        assert_eq!(output.responses[1].body.as_ref().map(String::len), Some(BODY_EXCERPT));
        assert!(output.responses[2].denied && output.responses[2].status.is_none());
        assert!(output.hmac.is_some_and(|mac| mac.starts_with("5bdcc146")));
        assert_eq!(output.settings, BTreeMap::from([("region".into(), Some("eu".into())), ("unset".into(), None)]));
    }

    #[test]
    fn fails_retryably_on_an_error_other_than_denial_when_asked() {
        testing::set_http_handler(|request| match request.url() {
            "http://denied/" => Err(HttpError::Denied),
            _ => Err(HttpError::Timeout),
        });
        let denied = json!({"requests": [{"method": "GET", "url": "http://denied/"}], "fail_on_error": true});
        assert!(run(&denied).succeeded());
        let run = run(&json!({"requests": [{"method": "GET", "url": "http://slow/"}], "fail_on_error": true}));
        assert_eq!(run.failure.map(|f| f.code), Some("upstream-unavailable".into()));
        assert_eq!(run.calls.len(), 3);
    }

    #[test]
    fn without_a_secret_no_header_and_no_placeholder() {
        testing::set_http_handler(|request| Ok(Response::new(200, format!("{}", request.headers().len()))));
        let run = run(&json!({"requests": [{"method": "GET", "url": "http://upstream/",
            "secret_header": {"secret": "missing", "header": "authorization", "format": "{}"}}]}));
        let output: Output = run.output("call").expect("call completed");
        assert!(!output.placeholder_seen);
        assert_eq!(output.responses[0].body.as_deref(), Some("0"));
    }
}
