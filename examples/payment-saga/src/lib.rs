//! Kind `payment-saga`: authorise a card payment with a payment service, capture it,
//! issue a receipt; if the job fails once authorised, void the authorisation.
//!
//! Input: `{"account": "acct-1", "amount_cents": 1200, "card": "4242424242424242"}`,
//! declared as a schema: a host refuses a submission without an account, with an
//! amount below 1 or a card that is not 12 to 19 digits (`422 invalid-input`, nothing
//! queued). The steps check again (the schema is the host's gate, not the kind's
//! guarantee): malformed input is refused `invalid-input`, a zero amount
//! `invalid-amount`, a bad card `invalid-card`, all before any request. The
//! `fail_capture_times` field of earlier versions is accepted and ignored: the service
//! now decides when a capture fails.
//!
//! The service's base URL is the deployment setting `payments_url` (`spindle deploy
//! payment-saga FILE --set payments_url=https://payments.example.com`; the outbound
//! policy must allow it); a step that needs it refuses `payments-url-missing` without
//! it. Each request is a `POST` of JSON and carries `authorization: Bearer <secret>`
//! when the tenant set the secret `payments-key` (declared with `--secret payments-key@RULE`;
//! the host puts the value in, the guest never sees it), no such header otherwise, and
//! the `Idempotency-Key` the host adds (`<job id>/<step>:1`), the same on every attempt.
//!
//! - `authorise` sends `{"account", "amount_cents", "card"}` to `{payments_url}/authorisations`.
//!   A 2xx `{"id": "auth_…"}` completes with `{"authorisation", "last4",
//!   "amount_cents"}` (the full card number never reaches an output); 402 is refused
//!   `card-declined`, its message the service's `{"error": "…"}` if any (card number
//!   masked); any other 4xx (or 1xx, 3xx) is refused `payment-rejected-<status>`; 429,
//!   5xx, a timeout or a connection failure is retryable `processor-unavailable`.
//! - `capture` sends `{"authorisation"}` to `{payments_url}/captures`. A 2xx `{"id":
//!   "cap_…"}` completes with `{"capture", "authorisation", "amount_cents"}`; other
//!   statuses as for `authorise`, 402 included (`payment-rejected-402`).
//! - `receipt` sends nothing: it completes with `{"receipt", "account",
//!   "amount_cents"}`, the receipt number derived from its idempotency key, so a
//!   repeated attempt issues the same number.
//!
//! Any step: a destination the policy does not allow is refused `http-request-denied`,
//! a malformed `payments_url` `http-request-invalid`, a 2xx whose body is not `{"id"}`
//! `invalid-response`.
//!
//! The failure effect, if `authorise` completed, sends `{"authorisation"}` to
//! `{payments_url}/voids`: a 2xx, or 404 (nothing left to void), ends it; anything else
//! fails it, and the host runs it again later. With no authorisation there is nothing
//! to void and no request. The success notification logs. Not cancellable: a
//! half-captured payment is settled by the saga, not abandoned. 4 attempts, 10 ms
//! backoff doubling to 200 ms.

use serde::{Deserialize, Serialize};
use spindle_guest::config;
use spindle_guest::http::{self, HttpError, Response};
use spindle_guest::prelude::*;

struct PaymentSaga;

/// The deployment setting holding the payment service's base URL.
const PAYMENTS_URL_SETTING: &str = "payments_url";
/// The tenant secret sent as the service's bearer token, when set.
const PAYMENTS_KEY_SECRET: &str = "payments-key";
/// Characters of the service's own decline message a failure carries: failures are
/// kept in the job's record and shown to the tenant, so a chatty upstream is cut short.
const MAX_SERVICE_MESSAGE_CHARS: usize = 200;

/// A card payment to take: the job's input. Its schema (derived, declared in
/// `describe`) lets the host refuse a malformed one at submission, before a job exists.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(example = serde_json::json!({"account": "acct-1", "amount_cents": 1200, "card": "4242424242424242"}))]
struct Payment {
    /// The customer's account.
    #[schemars(length(min = 1))]
    account: String,
    /// The amount to take, in cents (at least 1).
    #[schemars(range(min = 1))]
    amount_cents: u64,
    /// The card number: 12 to 19 digits.
    #[schemars(regex(pattern = r"^[0-9]{12,19}$"))]
    card: String,
    // `fail_capture_times` (the simulated outage of earlier versions) is an unknown
    // field now, which serde skips and the schema allows: old inputs keep being accepted.
}

impl Payment {
    /// Refusals that need nothing but the input.
    fn validate(&self) -> Result<(), StepError> {
        if self.amount_cents == 0 {
            return Err(StepError::refused("invalid-amount", "the amount must be positive"));
        }
        if !(12..=19).contains(&self.card.len()) || !self.card.bytes().all(|b| b.is_ascii_digit()) {
            return Err(StepError::refused("invalid-card", "the card number must be 12 to 19 digits"));
        }
        Ok(())
    }

    /// The card's last four digits (the card is all ASCII digits once validated).
    fn last4(&self) -> String {
        self.card.get(self.card.len().saturating_sub(4)..).unwrap_or_default().to_owned()
    }
}

/// `POST /authorisations`.
#[derive(Debug, Serialize)]
struct AuthorisationRequest<'a> {
    account: &'a str,
    amount_cents: u64,
    card: &'a str,
}

/// `POST /captures` and `POST /voids`.
#[derive(Debug, Serialize)]
struct AuthorisationRef<'a> {
    authorisation: &'a str,
}

/// What the service answers a successful authorisation or capture.
#[derive(Debug, Deserialize)]
struct Created {
    id: String,
}

/// What the service answers an error, when it says more than the status.
#[derive(Debug, Deserialize)]
struct ServiceError {
    error: String,
}

/// `authorise`'s output. Carries the card's last four digits only: outputs are kept
/// in the job's record.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Authorisation {
    authorisation: String,
    last4: String,
    amount_cents: u64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Capture {
    capture: String,
    authorisation: String,
    amount_cents: u64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Receipt {
    receipt: String,
    account: String,
    amount_cents: u64,
}

impl Kind for PaymentSaga {
    fn describe() -> KindSpec {
        KindSpec::new("payment-saga")
            .input::<Payment>()
            .step("authorise", 1)
            .output::<Authorisation>()
            .step("capture", 1)
            .output::<Capture>()
            .step("receipt", 1)
            .output::<Receipt>()
            .retry(4, 10, 200)
            .failure_effect()
            .notify_on_success()
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        let payment: Payment = step.input()?;
        match step.key() {
            "authorise" => authorise(&payment),
            "capture" => capture(step),
            "receipt" => receipt(step, &payment),
            other => Err(StepError::unknown_step(other)),
        }
    }

    fn on_failure(job: &JobSummary) -> Result<(), StepError> {
        let reason = job.failure().map_or("unknown", |failure| failure.code.as_str());
        let Some(auth) = job.output::<Authorisation>("authorise")? else {
            log::info(format!("nothing to void: no authorisation (job failed: {reason})"));
            return Ok(());
        };
        let service = PaymentService::from_config().map_err(into_retryable)?;
        // The service drops a repeated void by the authorisation id (and the host's
        // Idempotency-Key), so running this again voids once.
        let response =
            service.post("/voids", &AuthorisationRef { authorisation: &auth.authorisation }).map_err(into_retryable)?;
        match response.status() {
            200..=299 => log::info(format!(
                "voided authorisation {} of {} cents (job failed: {reason})",
                auth.authorisation, auth.amount_cents
            )),
            404 => log::info(format!(
                "authorisation {} is already void or unknown to the service (job failed: {reason})",
                auth.authorisation
            )),
            _ => return Err(into_retryable(rejection(&response))),
        }
        Ok(())
    }

    fn on_success(job: &JobSummary) -> Result<(), StepError> {
        if let Some(receipt) = job.output::<Receipt>("receipt")? {
            log::info(format!(
                "payment of {} cents for {} complete, receipt {}",
                receipt.amount_cents, receipt.account, receipt.receipt
            ));
        }
        Ok(())
    }
}

fn authorise(payment: &Payment) -> Result<Outcome, StepError> {
    payment.validate()?;
    let service = PaymentService::from_config()?;
    let request =
        AuthorisationRequest { account: &payment.account, amount_cents: payment.amount_cents, card: &payment.card };
    let response = service.post("/authorisations", &request)?;
    if response.status() == 402 {
        let message = service_message(&response).map_or_else(
            || "the card issuer declined the payment".to_owned(),
            |message| mask(&message, &payment.card, MAX_SERVICE_MESSAGE_CHARS),
        );
        return Err(StepError::refused("card-declined", message));
    }
    let created: Created = success(response)?.json()?;
    log::info(format!("authorised {} cents on card …{}: {}", payment.amount_cents, payment.last4(), created.id));
    Ok(Outcome::complete(&Authorisation {
        authorisation: created.id,
        last4: payment.last4(),
        amount_cents: payment.amount_cents,
    }))
}

fn capture(step: &Step) -> Result<Outcome, StepError> {
    let auth: Authorisation = step.prior("authorise")?;
    let service = PaymentService::from_config()?;
    let response = service.post("/captures", &AuthorisationRef { authorisation: &auth.authorisation })?;
    let created: Created = success(response)?.json()?;
    log::info(format!("captured authorisation {} on attempt {}: {}", auth.authorisation, step.attempt(), created.id));
    Ok(Outcome::complete(&Capture {
        capture: created.id,
        authorisation: auth.authorisation,
        amount_cents: auth.amount_cents,
    }))
}

fn receipt(step: &Step, payment: &Payment) -> Result<Outcome, StepError> {
    let capture: Capture = step.prior("capture")?;
    Ok(Outcome::complete(&Receipt {
        receipt: reference("R", step.idempotency_key()),
        account: payment.account.clone(),
        amount_cents: capture.amount_cents,
    }))
}

/// The payment service: where it is and how to authenticate to it.
#[derive(Debug)]
struct PaymentService {
    /// `payments_url` without a trailing `/`.
    base: String,
    /// The placeholder for the secret `payments-key`, if the tenant set it.
    api_key: Option<String>,
}

impl PaymentService {
    fn from_config() -> Result<Self, StepError> {
        let base = config::get(PAYMENTS_URL_SETTING)
            .filter(|url| !url.trim().is_empty())
            .refused_with("payments-url-missing", "the deployment setting payments_url is not set")?;
        Ok(Self { base: base.trim().trim_end_matches('/').to_owned(), api_key: config::secret(PAYMENTS_KEY_SECRET) })
    }

    /// POSTs `body` as JSON to `path`: the response whatever its status, or the failure
    /// of a request that got none.
    fn post<T: Serialize>(&self, path: &str, body: &T) -> Result<Response, StepError> {
        let mut request = http::Request::post(format!("{}{path}", self.base)).json(body);
        if let Some(key) = &self.api_key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        request.send().map_err(|error| match error {
            // Policy and malformed requests fail the same way every time: the SDK's refusals.
            HttpError::Denied | HttpError::InvalidRequest(_) => StepError::from(error),
            other => StepError::retryable("processor-unavailable", "the payment service did not answer")
                .with_detail(other.to_string()),
        })
    }
}

/// The response if it is a 2xx, else the failure its status means.
fn success(response: Response) -> Result<Response, StepError> {
    if response.is_success() { Ok(response) } else { Err(rejection(&response)) }
}

/// The failure a non-2xx answer means: 429 and 5xx are retryable (the service is busy
/// or failing, and may recover), anything else refused (the same request would be
/// turned away again). The service's error text goes to the log only.
fn rejection(response: &Response) -> StepError {
    let status = response.status();
    let failure = match status {
        429 | 500..=599 => StepError::retryable(
            "processor-unavailable",
            format!("the payment service answered {status}; retrying later"),
        ),
        _ => StepError::refused(
            format!("payment-rejected-{status}"),
            format!("the payment service rejected the request ({status})"),
        ),
    };
    match service_message(response) {
        Some(message) => failure.with_detail(format!("{status}: {message}")),
        None => failure,
    }
}

/// A hook has no refusal: whatever fails, the host runs it again later.
fn into_retryable(error: StepError) -> StepError {
    if error.is_retryable() {
        return error;
    }
    let retryable = StepError::retryable(error.code(), error.message());
    match error.detail() {
        Some(detail) => retryable.with_detail(detail),
        None => retryable,
    }
}

/// The service's `{"error": "…"}`, if it sent one.
fn service_message(response: &Response) -> Option<String> {
    let error: ServiceError = serde_json::from_slice(response.body()).ok()?;
    let message = error.error.trim();
    (!message.is_empty()).then(|| message.to_owned())
}

/// `message` with every occurrence of `card` masked and no control characters, cut to
/// `max_chars`: fit for a failure shown to the tenant.
fn mask(message: &str, card: &str, max_chars: usize) -> String {
    let masked = if card.is_empty() { message.to_owned() } else { message.replace(card, "[card]") };
    masked.chars().map(|c| if c.is_control() { ' ' } else { c }).take(max_chars).collect()
}

/// A reference stable for a given idempotency key: the same step of the same job gets
/// the same number on every attempt. FNV-1a, 64 bits: short, and collisions only
/// matter within one tenant's receipts.
fn reference(prefix: &str, idempotency_key: &str) -> String {
    let hash = idempotency_key
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{prefix}-{hash:016x}")
}

spindle_guest::export_kind!(PaymentSaga);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_stable_per_key() {
        assert_eq!(reference("R", "job-1/receipt"), reference("R", "job-1/receipt"));
        assert_ne!(reference("R", "job-1/receipt"), reference("R", "job-2/receipt"));
    }

    #[test]
    fn statuses_map_onto_retryable_or_refused() {
        for (status, retryable, code) in [
            (429, true, "processor-unavailable"),
            (500, true, "processor-unavailable"),
            (503, true, "processor-unavailable"),
            (302, false, "payment-rejected-302"),
            (402, false, "payment-rejected-402"),
            (409, false, "payment-rejected-409"),
        ] {
            let error = rejection(&Response::new(status, r#"{"error": "detail for the log"}"#));
            assert_eq!((error.is_retryable(), error.code()), (retryable, code));
            assert!(!error.message().contains("detail") && error.detail().is_some_and(|d| d.contains("detail")));
        }
    }

    #[test]
    fn service_messages_are_masked_and_cut() {
        let card = "4000000000000002";
        assert_eq!(mask("card 4000000000000002 declined\n", card, 200), "card [card] declined ");
        assert_eq!(mask("insufficient funds", card, 5), "insuf");
        assert_eq!(service_message(&Response::new(402, r#"{"error": "  "}"#)), None);
        assert_eq!(service_message(&Response::new(402, "<html>")), None);
    }

    #[test]
    fn inputs_are_validated_before_any_request() {
        let payment = |amount_cents, card: &str| Payment { account: "a".into(), amount_cents, card: card.into() };
        assert!(payment(1, "4242424242424242").validate().is_ok());
        assert_eq!(
            payment(0, "4242424242424242").validate().map_err(|e| e.code().to_owned()),
            Err("invalid-amount".into())
        );
        for card in ["4242", "4242 4242 4242 4242", "42424242424242424242", "४२४२४२४२४२४२४२४२"]
        {
            assert_eq!(
                payment(1, card).validate().map_err(|e| e.code().to_owned()),
                Err("invalid-card".into()),
                "{card}"
            );
        }
        assert_eq!(payment(1, "4242424242424242").last4(), "4242");
    }
}

#[cfg(test)]
mod job_tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use serde_json::{Value, json};
    use spindle_guest::http::Request;
    use spindle_guest::testing::{self, JobRun, LOCAL_JOB_ID, run_job};

    use super::*;

    const BASE: &str = "http://127.0.0.1:9099";
    const GOOD_CARD: &str = "4242424242424242";
    const DECLINED_CARD: &str = "4000000000000002";

    /// A payment service as the demo runs it: card `4000000000000002` is declined, and
    /// the first `failing_captures` captures answer `capture_failure`. Keeps every request.
    #[derive(Debug, Clone)]
    struct Service {
        failing_captures: usize,
        capture_failure: u16,
        seen: Rc<RefCell<Vec<Request>>>,
    }

    impl Service {
        fn install(failing_captures: usize, capture_failure: u16) -> Self {
            testing::set_config(PAYMENTS_URL_SETTING, format!("{BASE}/"));
            let service = Self { failing_captures, capture_failure, seen: Rc::default() };
            let handler = service.clone();
            testing::set_http_handler(move |request| Ok(handler.answer(request)));
            service
        }

        fn answer(&self, request: &Request) -> Response {
            let mut seen = self.seen.borrow_mut();
            seen.push(request.clone());
            let body: Value = serde_json::from_slice(request.body_bytes()).unwrap_or_default();
            let path = request.url().strip_prefix(BASE).unwrap_or_default();
            match path {
                "/authorisations" if body["card"] == DECLINED_CARD => {
                    Response::new(402, r#"{"error": "insufficient funds on card 4000000000000002"}"#)
                }
                "/authorisations" => Response::new(201, r#"{"id": "auth_1"}"#),
                "/captures" => {
                    let captures = seen.iter().filter(|r| r.url().ends_with("/captures")).count();
                    if captures <= self.failing_captures {
                        Response::new(self.capture_failure, r#"{"error": "try later"}"#)
                    } else {
                        Response::new(200, r#"{"id": "cap_1"}"#)
                    }
                }
                "/voids" => Response::new(200, "{}"),
                _ => Response::new(404, ""),
            }
        }

        /// The paths requested, in order.
        fn paths(&self) -> Vec<String> {
            self.seen.borrow().iter().map(|r| r.url().trim_start_matches(BASE).to_owned()).collect()
        }

        fn body(&self, index: usize) -> Value {
            serde_json::from_slice(self.seen.borrow()[index].body_bytes()).expect("JSON body")
        }
    }

    fn payment(card: &str) -> Vec<u8> {
        json!({"account": "acct-1", "amount_cents": 1_200, "card": card}).to_string().into_bytes()
    }

    fn failure_code(run: &JobRun) -> Option<&str> {
        run.failure.as_ref().map(|failure| failure.code.as_str())
    }

    #[test]
    fn the_happy_path_authorises_captures_and_issues_a_receipt() {
        testing::set_secret(PAYMENTS_KEY_SECRET, "sk_test_123");
        let service = Service::install(0, 503);
        let run = run_job::<PaymentSaga>(&payment(GOOD_CARD));
        assert!(run.succeeded(), "{:?}", run.failure);
        assert_eq!(service.paths(), ["/authorisations", "/captures"], "receipt and on_success stay local");
        assert_eq!(service.body(0), json!({"account": "acct-1", "amount_cents": 1_200, "card": GOOD_CARD}));
        assert_eq!(service.body(1), json!({"authorisation": "auth_1"}));
        for request in service.seen.borrow().iter() {
            let auth = request.headers().iter().find(|(name, _)| name == "authorization").map(|(_, v)| v.as_slice());
            assert_eq!(auth, Some(&b"Bearer sk_test_123"[..]));
        }

        let auth: Value = run.output("authorise").expect("authorised");
        assert_eq!(auth, json!({"authorisation": "auth_1", "last4": "4242", "amount_cents": 1_200}));
        let capture: Value = run.output("capture").expect("captured");
        assert_eq!(capture, json!({"capture": "cap_1", "authorisation": "auth_1", "amount_cents": 1_200}));
        let receipt: Receipt = run.output("receipt").expect("receipt issued");
        assert_eq!(receipt.receipt, reference("R", &format!("{LOCAL_JOB_ID}/receipt")));
        assert!(run.outputs.iter().all(|(_, output)| !String::from_utf8_lossy(output).contains(GOOD_CARD)));
        assert_eq!(run.hook, Some(Ok(())));
    }

    #[test]
    fn without_the_secret_no_authorization_header() {
        let service = Service::install(0, 503);
        assert!(run_job::<PaymentSaga>(&payment(GOOD_CARD)).succeeded());
        assert!(service.seen.borrow().iter().all(|r| r.headers().iter().all(|(name, _)| name != "authorization")));
    }

    #[test]
    fn a_flaky_capture_succeeds_on_its_third_attempt() {
        let service = Service::install(2, 503);
        let run = run_job::<PaymentSaga>(&payment(GOOD_CARD));
        assert!(run.succeeded(), "{:?}", run.failure);
        let attempts: Vec<u32> = run.calls_of("capture").map(|call| call.attempt).collect();
        assert_eq!(attempts, [1, 2, 3]);
        assert_eq!(service.paths(), ["/authorisations", "/captures", "/captures", "/captures"]);
        assert!(run.output::<Capture>("capture").is_some());
    }

    #[test]
    fn a_decline_fails_the_job_with_nothing_to_void() {
        let service = Service::install(0, 503);
        let run = run_job::<PaymentSaga>(&payment(DECLINED_CARD));
        let failure = run.failure.as_ref().expect("declined");
        assert_eq!(failure.code, "card-declined");
        assert_eq!(failure.message, "insufficient funds on card [card]");
        assert_eq!(run.calls.len(), 1, "refused, not retried");
        assert_eq!(service.paths(), ["/authorisations"], "no authorisation, so no void");
        assert_eq!(run.hook, Some(Ok(())));
    }

    #[test]
    fn a_refused_capture_voids_the_authorisation() {
        let service = Service::install(1, 409);
        let run = run_job::<PaymentSaga>(&payment(GOOD_CARD));
        assert_eq!(failure_code(&run), Some("payment-rejected-409"));
        assert_eq!(service.paths(), ["/authorisations", "/captures", "/voids"]);
        assert_eq!(service.body(2), json!({"authorisation": "auth_1"}));
        assert_eq!(run.hook, Some(Ok(())));
    }

    #[test]
    fn an_outage_longer_than_the_budget_fails_and_voids() {
        let service = Service::install(usize::MAX, 503);
        let run = run_job::<PaymentSaga>(&payment(GOOD_CARD));
        assert_eq!(failure_code(&run), Some("processor-unavailable"));
        assert_eq!(run.calls_of("capture").count(), 4);
        assert_eq!(service.paths().last().map(String::as_str), Some("/voids"));
        assert_eq!(run.hook, Some(Ok(())));
    }

    #[test]
    fn a_void_that_fails_is_reported_for_the_host_to_retry() {
        testing::set_config(PAYMENTS_URL_SETTING, BASE);
        testing::set_http_handler(|request| {
            Ok(match request.url().trim_start_matches(BASE) {
                "/authorisations" => Response::new(201, r#"{"id": "auth_9"}"#),
                "/captures" => Response::new(400, ""),
                _ => Response::new(404, ""),
            })
        });
        let already_void = run_job::<PaymentSaga>(&payment(GOOD_CARD));
        assert_eq!(already_void.hook, Some(Ok(())), "404: nothing left to void");

        testing::set_http_handler(|request| match request.url().trim_start_matches(BASE) {
            "/authorisations" => Ok(Response::new(201, r#"{"id": "auth_9"}"#)),
            "/captures" => Ok(Response::new(400, "")),
            _ => Err(HttpError::Timeout),
        });
        let run = run_job::<PaymentSaga>(&payment(GOOD_CARD));
        let hook = run.hook.expect("the failure effect ran").expect_err("the void got no answer");
        assert_eq!(hook.code, "processor-unavailable");
    }

    #[test]
    fn without_payments_url_the_steps_refuse() {
        testing::set_http_handler(|_| Ok(Response::new(201, r#"{"id": "auth_1"}"#)));
        let run = run_job::<PaymentSaga>(&payment(GOOD_CARD));
        assert_eq!(failure_code(&run), Some("payments-url-missing"));
        assert_eq!(run.calls.len(), 1);
    }

    #[test]
    fn other_rejections_and_bad_answers_are_refused() {
        testing::set_config(PAYMENTS_URL_SETTING, BASE);
        testing::set_http_handler(|_| Ok(Response::new(422, r#"{"error": "unknown account"}"#)));
        assert_eq!(failure_code(&run_job::<PaymentSaga>(&payment(GOOD_CARD))), Some("payment-rejected-422"));
        testing::set_http_handler(|_| Ok(Response::new(200, "<html>")));
        assert_eq!(failure_code(&run_job::<PaymentSaga>(&payment(GOOD_CARD))), Some("invalid-response"));
        testing::set_http_handler(|_| Err(HttpError::Denied));
        assert_eq!(failure_code(&run_job::<PaymentSaga>(&payment(GOOD_CARD))), Some("http-request-denied"));
    }

    #[test]
    fn the_old_outage_field_is_accepted_and_ignored() {
        let service = Service::install(0, 503);
        let old = json!({"account": "acct-1", "amount_cents": 1_200, "card": GOOD_CARD, "fail_capture_times": 2});
        let run = run_job::<PaymentSaga>(old.to_string().as_bytes());
        assert!(run.succeeded(), "{:?}", run.failure);
        assert_eq!(run.calls_of("capture").count(), 1);
        assert_eq!(service.paths().len(), 2);
    }

    #[test]
    fn invalid_input_is_refused_before_any_request() {
        let service = Service::install(0, 503);
        let zero = json!({"account": "acct-1", "amount_cents": 0, "card": GOOD_CARD}).to_string();
        assert_eq!(failure_code(&run_job::<PaymentSaga>(zero.as_bytes())), Some("invalid-amount"));
        assert_eq!(failure_code(&run_job::<PaymentSaga>(br#"{"account": "a"}"#)), Some("invalid-input"));
        assert!(service.paths().is_empty());
    }
}
