//! Write Spindle job kinds in Rust.
//!
//! A job kind is a WebAssembly component targeting the `spindle:job` world (`wit/job.wit`).
//! With this crate a kind is one [`Kind`] implementation and one [`export_kind!`]: the
//! SDK turns JSON payloads into serde types, `?` on errors into `retryable`/`refused`
//! outcomes, and hides the generated bindings (still reachable in [`bindings`]).
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use spindle_guest::prelude::*;
//!
//! /// Sends a greeting: compose it, then deliver it once per job.
//! struct Greeting;
//!
//! #[derive(Deserialize)]
//! struct Input {
//!     name: String,
//! }
//!
//! #[derive(Serialize, Deserialize)]
//! struct Composed {
//!     text: String,
//! }
//!
//! impl Kind for Greeting {
//!     fn describe() -> KindSpec {
//!         KindSpec::new("greeting")
//!             .step("compose", 1)
//!             .step("deliver", 3)
//!             .retry(5, 100, 10_000)
//!             .notify_on_success()
//!     }
//!
//!     fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
//!         match step.key() {
//!             "compose" => {
//!                 // Malformed input is refused with code `invalid-input`.
//!                 let input: Input = step.input()?;
//!                 if input.name.is_empty() {
//!                     return Ok(Outcome::skip("nobody to greet"));
//!                 }
//!                 Ok(Outcome::complete(&Composed { text: format!("Hello, {}!", input.name) }))
//!             }
//!             "deliver" => {
//!                 let composed: Composed = step.prior("compose")?;
//!                 // Steps run at least once: the key lets a mailer drop duplicates.
//!                 log::info(format!("delivering {:?} as {}", composed.text, step.idempotency_key()));
//!                 Ok(Outcome::complete(&serde_json::json!({ "delivered": true })))
//!             }
//!             other => Err(StepError::unknown_step(other)),
//!         }
//!     }
//!
//!     fn on_success(job: &JobSummary) -> Result<(), StepError> {
//!         log::info(format!("job {} greeted", job.job_id()));
//!         Ok(())
//!     }
//! }
//!
//! spindle_guest::export_kind!(Greeting);
//! # fn main() {}
//! ```
//!
//! Build the crate as a `cdylib` for `wasm32-wasip2`; the result is a component the host
//! accepts (`cargo xtask guests` does this for the workspace's kinds).
//!
//! A step can also be a workflow's join point: [`Outcome::await_children`] fans out child
//! jobs (a [`FanOut`]) and [`Outcome::await_signal`] waits for a named signal; the host
//! calls the step again when they are done, and [`Step::awaited`] says with what.
//!
//! Beyond its input, a step reaches only what the host grants: [`log`], heartbeats,
//! [`config`] (deployment settings and secrets it never sees) and outbound [`http`],
//! which the host's policy denies unless the operator, the tenant and the deployment all
//! allow the destination.
//!
//! Off wasm, as in a kind's native unit tests, [`log`] writes to stderr,
//! [`Step::heartbeat`] always proceeds, and [`config`] and [`http`] answer from what the
//! test set in [`testing`], so a kind's logic runs natively: [`testing::run_job`] drives a
//! whole job through its steps the way the host would, children and signals included.

pub mod config;
pub mod http;
mod job;
#[cfg(not(target_arch = "wasm32"))]
mod local_host;
pub mod log;
mod outcome;
mod spec;
mod step;
pub mod testing;
mod workflow;

pub use job::{Failure, JobSummary};
pub use outcome::{Outcome, StepError, StepResultExt};
pub use spec::{KindSpec, RetryPolicy};
pub use step::{Checkpoint, Heartbeat, Step};
pub use workflow::{Awaited, Child, ChildResult, ChildState, FanOut, Priority};

/// Re-exported so kinds need no direct dependency for `json!` and the like.
pub use schemars;
pub use serde;
pub use serde_json;

/// Re-exported: the WASI bindings the world's `wasi:*` imports are mapped onto.
pub use wasip2;

/// The bindings wit-bindgen generates for the `job-kind` world.
///
/// Wrapped in a module because wit-bindgen 0.63's public export macro clashes with
/// items at the crate root; most kinds never need anything in here.
///
/// The world's WASI imports (`wasi:http` and what it uses of `wasi:io` and
/// `wasi:clocks`) are not generated here but mapped onto the [`wasip2`] crate's
/// bindings of the same 0.2.12 interfaces, so a kind can hand [`http`]'s streams and
/// types to other code written against `wasip2`.
#[allow(unsafe_code, reason = "generated ABI glue: the only unsafe code in the SDK")]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "job-kind",
        pub_export_macro: true,
        default_bindings_module: "spindle_guest::bindings",
        additional_derives: [PartialEq, Eq],
        with: {
            "wasi:http/types@0.2.12": wasip2::http::types,
            "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
            "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
        },
    });
}

/// What a kind author writes: a description and the logic of each step.
///
/// Every function is associated (no `self`): the host instantiates the component
/// afresh for each call, so a kind has no state to keep between calls. What must
/// survive goes in a step's output or cursor.
pub trait Kind {
    /// The kind's name, steps and policies. Must not depend on input.
    fn describe() -> KindSpec;

    /// Runs one call of the step named by [`Step::key`].
    ///
    /// `Ok` carries how the step goes on; `Err` reports a failure, retryable or refused.
    /// A panic traps the whole call and reaches the host with no code or message, so
    /// return errors instead.
    fn run_step(step: &mut Step) -> Result<Outcome, StepError>;

    /// The business failure effect (compensate, refund, release a hold), called when a
    /// job fails if the spec sets [`KindSpec::failure_effect`]. Runs at least once, so
    /// it must be idempotent; the job id is stable.
    fn on_failure(job: &JobSummary) -> Result<(), StepError> {
        let _ = job;
        Ok(())
    }

    /// The success notification, called after a job succeeds if the spec sets
    /// [`KindSpec::notify_on_success`]. Runs at least once.
    fn on_success(job: &JobSummary) -> Result<(), StepError> {
        let _ = job;
        Ok(())
    }
}

/// Exports a [`Kind`] as the component's `kind` interface.
///
/// Use it once per crate, at the top level: `spindle_guest::export_kind!(MyKind);`.
#[macro_export]
macro_rules! export_kind {
    ($kind:ty) => {
        const _: () = {
            // wit-bindgen's export macro takes an identifier, not a path or generic type.
            type SpindleKindExport = $crate::__private::Export<$kind>;
            $crate::bindings::export! { SpindleKindExport with_types_in $crate::bindings }
        };
    };
}

/// Support for [`export_kind!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    use core::marker::PhantomData;

    use crate::bindings::exports::spindle::job::kind::Guest;
    use crate::bindings::spindle::job::types as wit;
    use crate::{JobSummary, Kind, Outcome, Step};

    /// Adapts a [`Kind`] to the generated `Guest` trait.
    #[derive(Debug)]
    pub struct Export<K>(PhantomData<K>);

    impl<K: Kind> Guest for Export<K> {
        fn describe() -> wit::KindSpec {
            K::describe().into_wit()
        }

        fn run_step(input: wit::StepInput) -> wit::StepOutcome {
            let mut step = Step::from_input(input);
            match K::run_step(&mut step) {
                Ok(outcome) => outcome.into_wit(),
                Err(error) => {
                    error.log(&format!("step `{}`", step.key()));
                    Outcome::from(error).into_wit()
                }
            }
        }

        fn on_failure(job: wit::JobSummary) -> Result<(), wit::Failure> {
            K::on_failure(&JobSummary::from_wit(job)).map_err(|error| {
                error.log("on-failure");
                error.into_failure()
            })
        }

        fn on_success(job: wit::JobSummary) -> Result<(), wit::Failure> {
            K::on_success(&JobSummary::from_wit(job)).map_err(|error| {
                error.log("on-success");
                error.into_failure()
            })
        }
    }
}

/// The names a kind usually needs: `use spindle_guest::prelude::*;`.
pub mod prelude {
    pub use crate::log;
    pub use crate::{
        Awaited, Checkpoint, Child, ChildResult, ChildState, FanOut, Heartbeat, JobSummary, Kind, KindSpec, Outcome,
        Priority, Step, StepError, StepResultExt,
    };
}
