//! Kind `hog`: one step that makes the host allocate on its behalf as its input says —
//! `wasi:random` draws (`draw` bytes, `times` over), a log line of `log` bytes, an output
//! of `output` bytes, a line `print`ed to stdout — then completes with what got through. For the host's tests of
//! what a guest may make it hold: each such host call is capped, and a draw over the cap
//! ends the step as a fault instead of growing the host.

use std::hint::black_box;

use serde::Deserialize;
use serde_json::json;
use spindle_guest::prelude::*;

struct Hog;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Plan {
    /// Bytes per `wasi:random` draw (0: none).
    draw: u64,
    /// Draws of `draw` bytes.
    times: u32,
    /// Insecure draws instead of secure ones.
    insecure: bool,
    /// Bytes of one log line (0: none).
    log: usize,
    /// Bytes of the output (0: `{}` and the counts).
    output: usize,
    /// A line to print to stdout.
    print: Option<String>,
}

impl Kind for Hog {
    fn describe() -> KindSpec {
        KindSpec::new("hog").step("hog", 1).retry(1, 0, 0)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        let plan: Plan = step.input()?;
        let mut drawn = 0_u64;
        for _ in 0..plan.times {
            let bytes = if plan.insecure {
                wasip2::random::insecure::get_insecure_random_bytes(plan.draw)
            } else {
                wasip2::random::random::get_random_bytes(plan.draw)
            };
            drawn += black_box(bytes).len() as u64;
        }
        if let Some(line) = &plan.print {
            println!("{line}");
        }
        if plan.log > 0 {
            log::info("l".repeat(plan.log));
        }
        if plan.output > 0 {
            let mut output = vec![b'o'; plan.output.max(2)];
            output[0] = b'"';
            if let Some(last) = output.last_mut() {
                *last = b'"';
            }
            return Ok(Outcome::complete_bytes(output));
        }
        Ok(Outcome::complete(&json!({ "drawn": drawn })))
    }
}

spindle_guest::export_kind!(Hog);
