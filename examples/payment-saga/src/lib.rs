//! Kind `payment-saga`: authorise a card payment, capture it, issue a receipt; if the
//! job fails, void the authorisation.
//!
//! Input: `{"account": "acct-1", "amount_cents": 1200, "card": "4242424242424242",
//! "fail_capture_times": 0}`. The processor is simulated:
//!
//! - `authorise` refuses `card-declined` for card `4000000000000002` and
//!   `insufficient-funds` above 1 000 000 cents.
//! - `capture` fails retryable `processor-unavailable` while its attempt is at most
//!   `fail_capture_times` (a transient outage), then completes.
//! - `receipt` completes with a receipt number derived from its idempotency key, so a
//!   repeated attempt issues the same number.
//!
//! The failure effect voids the authorisation, the success notification logs. Not
//! cancellable: a half-captured payment is settled by the saga, not abandoned.
//! 4 attempts, 10 ms backoff doubling to 200 ms.

use serde::{Deserialize, Serialize};
use spindle_guest::prelude::*;

struct PaymentSaga;

/// The simulated processor declines this test card.
const DECLINED_CARD: &str = "4000000000000002";
/// The simulated account cannot cover more than this.
const FUNDS_LIMIT_CENTS: u64 = 1_000_000;

#[derive(Debug, Deserialize)]
struct Payment {
    account: String,
    amount_cents: u64,
    card: String,
    #[serde(default)]
    fail_capture_times: u32,
}

/// `authorise`'s output. Carries the card's last four digits only: outputs are kept
/// in the job's record.
#[derive(Debug, Serialize, Deserialize)]
struct Authorisation {
    authorisation: String,
    amount_cents: u64,
    card_last4: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Capture {
    capture: String,
    authorisation: String,
    amount_cents: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Receipt {
    receipt: String,
    account: String,
    amount_cents: u64,
}

impl Kind for PaymentSaga {
    fn describe() -> KindSpec {
        KindSpec::new("payment-saga")
            .step("authorise", 1)
            .step("capture", 1)
            .step("receipt", 1)
            .retry(4, 10, 200)
            .failure_effect()
            .notify_on_success()
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        let payment: Payment = step.input()?;
        match step.key() {
            "authorise" => authorise(step, &payment),
            "capture" => capture(step, &payment),
            "receipt" => receipt(step, &payment),
            other => Err(StepError::unknown_step(other)),
        }
    }

    fn on_failure(job: &JobSummary) -> Result<(), StepError> {
        let reason = job.failure().map_or("unknown", |failure| failure.code.as_str());
        match job.output::<Authorisation>("authorise")? {
            // Voiding is keyed by the authorisation id, so a repeated call voids once.
            Some(auth) => log::info(format!(
                "voided authorisation {} of {} cents (job failed: {reason})",
                auth.authorisation, auth.amount_cents
            )),
            None => log::info(format!("nothing to void: no authorisation (job failed: {reason})")),
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

fn authorise(step: &Step, payment: &Payment) -> Result<Outcome, StepError> {
    if payment.amount_cents == 0 {
        return Err(StepError::refused("invalid-amount", "the amount must be positive"));
    }
    if payment.card == DECLINED_CARD {
        return Err(StepError::refused("card-declined", "the card issuer declined the payment"));
    }
    if payment.amount_cents > FUNDS_LIMIT_CENTS {
        return Err(StepError::refused("insufficient-funds", "the account cannot cover the amount"));
    }
    let card_last4 = payment.card.get(payment.card.len().saturating_sub(4)..).unwrap_or_default().to_owned();
    Ok(Outcome::complete(&Authorisation {
        authorisation: reference("auth", step.idempotency_key()),
        amount_cents: payment.amount_cents,
        card_last4,
    }))
}

fn capture(step: &Step, payment: &Payment) -> Result<Outcome, StepError> {
    if step.attempt() <= payment.fail_capture_times {
        return Err(StepError::retryable("processor-unavailable", "the payment processor did not answer")
            .with_detail(format!("simulated outage, attempt {}", step.attempt())));
    }
    let auth: Authorisation = step.prior("authorise")?;
    Ok(Outcome::complete(&Capture {
        // The processor deduplicates captures by this reference across attempts.
        capture: reference("cap", step.idempotency_key()),
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

/// A reference stable for a given idempotency key: the same step of the same job gets
/// the same number on every attempt. FNV-1a, 64 bits: short, and collisions only
/// matter within one simulated processor.
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
}

#[cfg(test)]
mod job_tests {
    use spindle_guest::testing::run_job;

    use super::*;

    fn payment(card: &str, amount_cents: u64, fail_capture_times: u32) -> Vec<u8> {
        serde_json::json!({
            "account": "acct-1",
            "amount_cents": amount_cents,
            "card": card,
            "fail_capture_times": fail_capture_times,
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_transient_outage_is_retried_and_the_receipt_is_stable() {
        let run = run_job::<PaymentSaga>(&payment("4242424242424242", 1_200, 2));
        assert!(run.succeeded(), "{:?}", run.failure);
        assert_eq!(run.calls_of("capture").count(), 3);
        let receipt: Receipt = run.output("receipt").expect("receipt issued");
        let again: Receipt =
            run_job::<PaymentSaga>(&payment("4242424242424242", 1_200, 0)).output("receipt").expect("receipt issued");
        assert_eq!(receipt.receipt, again.receipt);
        assert_eq!(run.hook, Some(Ok(())));
    }

    #[test]
    fn an_outage_longer_than_the_budget_fails_and_voids() {
        let run = run_job::<PaymentSaga>(&payment("4242424242424242", 1_200, 4));
        assert_eq!(run.failure.as_ref().map(|f| f.code.as_str()), Some("processor-unavailable"));
        assert_eq!(run.calls_of("capture").count(), 4);
        assert!(run.output::<Authorisation>("authorise").is_some());
        assert_eq!(run.hook, Some(Ok(())));
    }

    #[test]
    fn declines_and_large_amounts_are_refused_without_echoing_the_card() {
        let declined = run_job::<PaymentSaga>(&payment(DECLINED_CARD, 1_200, 0));
        let failure = declined.failure.expect("declined");
        assert_eq!(failure.code, "card-declined");
        assert!(!failure.message.contains(DECLINED_CARD));
        let large = run_job::<PaymentSaga>(&payment("4242424242424242", 1_000_001, 0));
        assert_eq!(large.failure.map(|f| f.code), Some("insufficient-funds".to_owned()));
    }
}
