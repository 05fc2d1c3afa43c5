//! Kind `noop3`: three steps, `one`, `two` and `three`, that each complete at once.
//!
//! Measures the host's per-step overhead across step transitions of one job.

use spindle_guest::prelude::*;

struct Noop3;

impl Kind for Noop3 {
    fn describe() -> KindSpec {
        KindSpec::new("noop3").step("one", 1).step("two", 1).step("three", 1)
    }

    fn run_step(_step: &mut Step) -> Result<Outcome, StepError> {
        Ok(Outcome::complete_bytes(*b"{}"))
    }
}

spindle_guest::export_kind!(Noop3);
