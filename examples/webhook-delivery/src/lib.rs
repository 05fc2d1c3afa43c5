//! Kind `webhook-delivery`: delivers one event to a subscriber's URL, signed, retrying
//! while the subscriber is down.
//!
//! Input: `{"url": "https://hooks.example.com/x", "event": "order.paid", "payload": {...}}`.
//! `payload` is any JSON (`null` if left out); `event` must not be empty (else refused
//! `invalid-input`).
//!
//! One step, `deliver`, POSTs the JSON body `{"event", "payload", "job_id"}` to `url`
//! with the headers
//!
//! - `content-type: application/json`;
//! - `webhook-id`: the step's idempotency key (`<job id>/deliver`), the same on every
//!   attempt, so the subscriber can drop a delivery it already processed;
//! - `webhook-timestamp`: when this attempt signed the delivery, in Unix seconds (the
//!   wall clock), so the subscriber can refuse old replays;
//! - `webhook-signature`: `v1=` then the lowercase hex HMAC-SHA256 of
//!   `<webhook-id>.<webhook-timestamp>.<body>` (the body's exact bytes) under the
//!   tenant's secret named by the deployment setting `signing_secret`, `webhook-signing`
//!   if unset. The host signs (`config.hmac-sha256`): the guest never holds the key.
//!   Each attempt signs afresh, with its own timestamp.
//!
//! The host adds an `Idempotency-Key` as for any request. A 2xx completes with
//! `{"status", "attempt"}`; 429 and 5xx are retryable `upstream-<status>`, a timeout or
//! a connection failure retryable `upstream-unavailable`; any other status is refused
//! `rejected-<status>` (redirects are not followed: a subscriber that moved must be
//! given its new URL). A destination the outbound policy does not allow is refused
//! `http-request-denied`, a malformed URL `http-request-invalid`, and a signing secret
//! the deployment did not declare (`--secret`) or the tenant did not set
//! `signing-secret-missing`, before anything is sent.
//!
//! Cancellable (a cancelled job sends nothing more); 6 attempts, 200 ms backoff doubling
//! to 5 s, so a subscriber has about 6 s in all to come back.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use spindle_guest::prelude::*;
use spindle_guest::{config, http};

struct WebhookDelivery;

/// The tenant secret deliveries are signed with unless the setting `signing_secret`
/// names another.
const DEFAULT_SIGNING_SECRET: &str = "webhook-signing";
/// The deployment setting naming the signing secret.
const SIGNING_SECRET_SETTING: &str = "signing_secret";
/// How long to wait for a connection to the subscriber. Shorter than the host's bound:
/// a subscriber that cannot be reached fast is better retried than waited on.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait for the subscriber's answer (its head, then each body chunk). A
/// receiver is expected to acknowledge and process later; one that holds the
/// connection this long is treated as down and retried.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// The job's input: where to deliver which event.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Input {
    url: String,
    event: String,
    #[serde(default)]
    payload: serde_json::Value,
}

/// The body the subscriber receives; the signature covers its exact bytes.
#[derive(Debug, Serialize)]
struct Delivery<'a> {
    event: &'a str,
    payload: &'a serde_json::Value,
    job_id: &'a str,
}

/// `deliver`'s output.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Delivered {
    status: u16,
    attempt: u32,
}

impl Kind for WebhookDelivery {
    fn describe() -> KindSpec {
        KindSpec::new("webhook-delivery").input::<Input>().step("deliver", 1).cancellable().retry(6, 200, 5_000)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        match step.key() {
            "deliver" => deliver(step),
            other => Err(StepError::unknown_step(other)),
        }
    }
}

fn deliver(step: &mut Step) -> Result<Outcome, StepError> {
    let input: Input = step.input()?;
    if input.event.trim().is_empty() {
        return Err(StepError::refused("invalid-input", "`event` must not be empty"));
    }
    let body = serde_json::to_vec(&Delivery { event: &input.event, payload: &input.payload, job_id: step.job_id() })?;
    let id = step.idempotency_key().to_owned();
    let timestamp = unix_seconds()?;
    let secret = config::get(SIGNING_SECRET_SETTING).unwrap_or_else(|| DEFAULT_SIGNING_SECRET.to_owned());
    let signature = config::hmac_sha256(&secret, signed_content(&id, timestamp, &body)).ok_or_else(|| {
        StepError::refused("signing-secret-missing", "the webhook signing secret is not available")
            .with_detail(format!("secret {secret:?} is not declared by the deployment or not set by the tenant"))
    })?;
    if step.heartbeat(None).should_stop() {
        return Err(StepError::retryable("stopped", "stopped when the host said so"));
    }

    let attempt = step.attempt();
    let result = http::Request::post(input.url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", format!("v1={}", hex(&signature)))
        .body(body)
        .timeouts(CONNECT_TIMEOUT, ANSWER_TIMEOUT, ANSWER_TIMEOUT)
        .send()
        .map_err(StepError::from)
        .and_then(|response| settle(response.status(), attempt));
    match &result {
        Ok(delivered) => log::info(format!(
            "webhook {id} ({}) delivered: the subscriber answered {} on attempt {attempt}",
            input.event, delivered.status
        )),
        Err(error) => log::info(format!("webhook {id} ({}) not delivered on attempt {attempt}: {error}", input.event)),
    }
    result.map(|delivered| Outcome::complete(&delivered))
}

/// What the subscriber's answer means for the delivery.
fn settle(status: u16, attempt: u32) -> Result<Delivered, StepError> {
    match status {
        200..=299 => Ok(Delivered { status, attempt }),
        // Busy or failing: it may recover before the budget runs out.
        429 | 500..=599 => Err(StepError::retryable(
            format!("upstream-{status}"),
            format!("the subscriber answered {status}; retrying later"),
        )),
        // The same delivery would be turned away again.
        _ => Err(StepError::refused(
            format!("rejected-{status}"),
            format!("the subscriber rejected the delivery ({status})"),
        )),
    }
}

/// What the signature covers: `<id>.<timestamp>.<body>`.
fn signed_content(id: &str, timestamp: u64, body: &[u8]) -> Vec<u8> {
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(body);
    content
}

/// The wall clock in Unix seconds.
fn unix_seconds() -> Result<u64, StepError> {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_secs())
        .retryable_with("clock-unavailable", "the wall clock reads before the Unix epoch")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

spindle_guest::export_kind!(WebhookDelivery);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_settle_as_the_contract_says() {
        assert_eq!(settle(204, 2), Ok(Delivered { status: 204, attempt: 2 }));
        for (status, retryable, code) in [
            (429, true, "upstream-429"),
            (500, true, "upstream-500"),
            (503, true, "upstream-503"),
            (301, false, "rejected-301"),
            (400, false, "rejected-400"),
            (410, false, "rejected-410"),
        ] {
            let error = settle(status, 1).expect_err("not a 2xx");
            assert_eq!((error.is_retryable(), error.code()), (retryable, code));
        }
    }

    #[test]
    fn the_signed_content_joins_id_timestamp_and_body() {
        assert_eq!(signed_content("job/deliver", 1_700_000_000, br#"{"a":1}"#), br#"job/deliver.1700000000.{"a":1}"#);
    }
}

#[cfg(test)]
mod job_tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use hmac::{Hmac, Mac};
    use serde_json::json;
    use sha2::Sha256;
    use spindle_guest::http::{HttpError, Request, Response};
    use spindle_guest::testing::{self, JobRun, LOCAL_JOB_ID, run_job};

    use super::*;

    const URL: &str = "https://hooks.example.com/x";
    const KEY: &str = "whsec-test-key";

    fn input() -> Vec<u8> {
        json!({"url": URL, "event": "order.paid", "payload": {"order": 42, "total_cents": 1200}})
            .to_string()
            .into_bytes()
    }

    /// Answers with `statuses` in turn (the last one repeats) and keeps every request.
    fn subscriber(statuses: &[u16]) -> Rc<RefCell<Vec<Request>>> {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let statuses = statuses.to_vec();
        let log = Rc::clone(&seen);
        testing::set_http_handler(move |request| {
            let mut log = log.borrow_mut();
            log.push(request.clone());
            let status = statuses.get(log.len() - 1).or(statuses.last()).copied().unwrap_or(200);
            Ok(Response::new(status, "ok"))
        });
        seen
    }

    fn header<'a>(request: &'a Request, name: &str) -> &'a str {
        let (_, value) =
            request.headers().iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).expect("header present");
        std::str::from_utf8(value).expect("UTF-8 header")
    }

    fn failure_code(run: &JobRun) -> Option<&str> {
        run.failure.as_ref().map(|failure| failure.code.as_str())
    }

    #[test]
    fn a_2xx_completes_with_the_status_and_attempt() {
        testing::set_secret(DEFAULT_SIGNING_SECRET, KEY);
        let seen = subscriber(&[200]);
        let run = run_job::<WebhookDelivery>(&input());
        assert!(run.succeeded(), "{:?}", run.failure);
        assert_eq!(run.output("deliver"), Some(Delivered { status: 200, attempt: 1 }));
        let seen = seen.borrow();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].url(), URL);
        assert_eq!(header(&seen[0], "content-type"), "application/json");
        let body: serde_json::Value = serde_json::from_slice(seen[0].body_bytes()).expect("JSON body");
        assert_eq!(
            body,
            json!({"event": "order.paid", "payload": {"order": 42, "total_cents": 1200}, "job_id": LOCAL_JOB_ID})
        );
    }

    #[test]
    fn the_signature_verifies_under_the_tenant_key() {
        testing::set_secret(DEFAULT_SIGNING_SECRET, KEY);
        let seen = subscriber(&[202]);
        assert!(run_job::<WebhookDelivery>(&input()).succeeded());
        let seen = seen.borrow();
        let request = &seen[0];
        let id = header(request, "webhook-id");
        assert_eq!(id, format!("{LOCAL_JOB_ID}/deliver"));
        let timestamp: u64 = header(request, "webhook-timestamp").parse().expect("Unix seconds");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after the epoch").as_secs();
        assert!(timestamp.abs_diff(now) <= 60, "timestamp {timestamp} is not now ({now})");

        // Verified the way a subscriber would, with an HMAC other than the SDK's.
        let mut mac = Hmac::<Sha256>::new_from_slice(KEY.as_bytes()).expect("HMAC takes any key length");
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(request.body_bytes());
        assert_eq!(header(request, "webhook-signature"), format!("v1={}", hex(&mac.finalize().into_bytes())));
    }

    #[test]
    fn the_setting_names_another_signing_secret() {
        testing::set_config(SIGNING_SECRET_SETTING, "hooks-tenant-7");
        testing::set_secret("hooks-tenant-7", "other-key");
        testing::set_secret(DEFAULT_SIGNING_SECRET, KEY);
        let seen = subscriber(&[200]);
        assert!(run_job::<WebhookDelivery>(&input()).succeeded());
        let seen = seen.borrow();
        let request = &seen[0];
        let signed = signed_content(
            header(request, "webhook-id"),
            header(request, "webhook-timestamp").parse().expect("Unix seconds"),
            request.body_bytes(),
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(b"other-key").expect("HMAC takes any key length");
        mac.update(&signed);
        assert_eq!(header(request, "webhook-signature"), format!("v1={}", hex(&mac.finalize().into_bytes())));
    }

    #[test]
    fn without_the_secret_nothing_is_sent() {
        let seen = subscriber(&[200]);
        let run = run_job::<WebhookDelivery>(&input());
        assert_eq!(failure_code(&run), Some("signing-secret-missing"));
        assert_eq!(run.calls.len(), 1, "refused, not retried");
        assert!(seen.borrow().is_empty());
    }

    #[test]
    fn a_503_is_retried_with_the_same_id_until_it_clears() {
        testing::set_secret(DEFAULT_SIGNING_SECRET, KEY);
        let seen = subscriber(&[503, 503, 200]);
        let run = run_job::<WebhookDelivery>(&input());
        assert!(run.succeeded(), "{:?}", run.failure);
        assert_eq!(run.output("deliver"), Some(Delivered { status: 200, attempt: 3 }));
        let seen = seen.borrow();
        assert_eq!(seen.len(), 3);
        assert!(seen.iter().all(|request| header(request, "webhook-id") == format!("{LOCAL_JOB_ID}/deliver")));
    }

    #[test]
    fn a_subscriber_down_for_good_exhausts_the_budget() {
        testing::set_secret(DEFAULT_SIGNING_SECRET, KEY);
        let seen = subscriber(&[503]);
        let run = run_job::<WebhookDelivery>(&input());
        assert_eq!(failure_code(&run), Some("upstream-503"));
        assert_eq!(run.calls.len(), 6);
        assert_eq!(seen.borrow().len(), 6);
    }

    #[test]
    fn a_410_is_refused_at_once() {
        testing::set_secret(DEFAULT_SIGNING_SECRET, KEY);
        let seen = subscriber(&[410]);
        let run = run_job::<WebhookDelivery>(&input());
        assert_eq!(failure_code(&run), Some("rejected-410"));
        assert_eq!(seen.borrow().len(), 1);
    }

    #[test]
    fn timeouts_are_retried_and_denials_refused() {
        testing::set_secret(DEFAULT_SIGNING_SECRET, KEY);
        testing::set_http_handler(|_| Err(HttpError::Timeout));
        let run = run_job::<WebhookDelivery>(&input());
        assert_eq!((failure_code(&run), run.calls.len()), (Some("upstream-unavailable"), 6));
        testing::set_http_handler(|_| Err(HttpError::Denied));
        let run = run_job::<WebhookDelivery>(&input());
        assert_eq!((failure_code(&run), run.calls.len()), (Some("http-request-denied"), 1));
    }

    #[test]
    fn an_empty_event_is_refused() {
        testing::set_secret(DEFAULT_SIGNING_SECRET, KEY);
        let seen = subscriber(&[200]);
        let run = run_job::<WebhookDelivery>(json!({"url": URL, "event": " "}).to_string().as_bytes());
        assert_eq!(failure_code(&run), Some("invalid-input"));
        assert!(seen.borrow().is_empty());
    }
}
