//! Kind `describe-trap`: its `describe` writes a line to stderr and panics, as a kind
//! whose start-up fails does (a missing setting, a bad table). The host's deploy must
//! answer the trap's message and that stderr line, not only "describe failed".

use spindle_guest::prelude::*;

struct DescribeTrap;

impl Kind for DescribeTrap {
    fn describe() -> KindSpec {
        eprintln!("describe-trap: the step table is empty");
        panic!("describe-trap panics on purpose");
    }

    fn run_step(_step: &mut Step) -> Result<Outcome, StepError> {
        Ok(Outcome::complete_bytes(*b"{}"))
    }
}

spindle_guest::export_kind!(DescribeTrap);
