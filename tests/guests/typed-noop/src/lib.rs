//! Kind `typed-noop`: `noop` (one step that completes at once with `{}`) with an input
//! schema shaped like `payment-saga`'s: three required fields, a length, a range and a
//! pattern. Beside `noop`, which declares none, it measures what checking an input
//! against a schema costs a bulk submission (`spindle bench --only validation`).

use serde::Deserialize;
use spindle_guest::prelude::*;

/// The input the host checks; the step never reads it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(example = serde_json::json!({"account": "acct-1", "amount_cents": 1200, "card": "4242424242424242"}))]
#[allow(dead_code)]
struct Payment {
    #[schemars(length(min = 1))]
    account: String,
    #[schemars(range(min = 1))]
    amount_cents: u64,
    #[schemars(regex(pattern = r"^[0-9]{12,19}$"))]
    card: String,
}

struct TypedNoop;

impl Kind for TypedNoop {
    fn describe() -> KindSpec {
        KindSpec::new("typed-noop").input::<Payment>().step("run", 1)
    }

    fn run_step(_step: &mut Step) -> Result<Outcome, StepError> {
        Ok(Outcome::complete_bytes(*b"{}"))
    }
}

spindle_guest::export_kind!(TypedNoop);
