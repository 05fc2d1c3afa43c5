//! Kind `noop`: one step, `run`, that completes at once with `{}`.
//!
//! The smallest possible kind, for measuring the host's per-step overhead.

use spindle_guest::prelude::*;

struct Noop;

impl Kind for Noop {
    fn describe() -> KindSpec {
        KindSpec::new("noop").step("run", 1)
    }

    fn run_step(_step: &mut Step) -> Result<Outcome, StepError> {
        Ok(Outcome::complete_bytes(*b"{}"))
    }
}

spindle_guest::export_kind!(Noop);
