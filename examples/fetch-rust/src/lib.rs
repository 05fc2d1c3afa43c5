//! The fetch kind: one outbound call with a secret the guest never holds, and one the host
//! denies. The same kind in every guest language (`examples/fetch-*`), for the suite's
//! check that each language's HTTP client goes through the host's outbound policy alike.
//!
//! Input `{"url", "denied_url", "message"}`: `call` POSTs `{"message"}` as JSON to `url`
//! with `authorization: Bearer <placeholder of the secret api-token>` (the host puts the
//! value in), then the same body to `denied_url`, which the deployment does not allow, and
//! matches the typed denial. Output `{"status", "body", "denied", "denied_error"}`.

use serde::Deserialize;
use spindle_guest::config;
use spindle_guest::http::{HttpError, Request};
use spindle_guest::prelude::*;

struct Fetch;

#[derive(Debug, Deserialize)]
struct Input {
    url: String,
    denied_url: String,
    message: String,
}

impl Kind for Fetch {
    fn describe() -> KindSpec {
        KindSpec::new("fetch-rust").step("call", 1).retry(3, 100, 1_000)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        if step.key() != "call" {
            return Err(StepError::unknown_step(step.key()));
        }
        let input: Input = step.input()?;
        let body = serde_json::json!({ "message": input.message });
        let mut request = Request::post(&input.url).header("content-type", "application/json").json(&body);
        if let Some(token) = config::secret("api-token") {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = request.send()?;
        if !response.is_success() {
            return Err(StepError::retryable(
                "upstream-status",
                format!("the upstream answered {}", response.status()),
            ));
        }
        let denied = Request::post(&input.denied_url).header("content-type", "application/json").json(&body).send();
        let (denied, denied_error) = match denied {
            Err(e @ HttpError::Denied) => (true, format!("HttpError::Denied: {e}")),
            Err(e) => return Err(e.into()),
            Ok(_) => (false, String::new()),
        };
        Ok(Outcome::complete(&serde_json::json!({
            "status": response.status(),
            "body": response.text(),
            "denied": denied,
            "denied_error": denied_error,
        })))
    }
}

spindle_guest::export_kind!(Fetch);
