//! Spindle's sandbox: runs job-kind components in wasmtime, one fresh, limited store per
//! call, with no ambient authority.
//!
//! - [`Runtime`]: one engine per process (component model, async, pooling allocator,
//!   epoch ticker, optional fuel), a linker that offers both contracts' `spindle:job`
//!   interfaces ([`Contract`]), WASI with no directories, sockets, environment or
//!   arguments, `wasi:http` through the [`outbound`] policy, and an on-disk cache of
//!   compiled components (mapped from their files) with a cache of compiled functions
//!   beside it (`functions`), so a next version of the same code compiles in a fraction.
//! - [`Runtime::load`]: upload validation ([`LoadError`]) → a [`LoadedKind`] whose
//!   `InstancePre` is reused for every call.
//! - [`Runtime::run_step`] / [`Runtime::run_hook`]: a guest's outcome, or a typed
//!   [`SandboxFault`]; nothing a guest does crashes or wedges the host.
//!
//! Limits and their reasons are in [`SandboxConfig`].

mod bindings;
mod cache;
mod compile;
mod config;
mod contract;
mod control;
mod functions;
mod kind;
mod lines;
mod load;
pub mod outbound;
mod outcome;
mod output;
mod random;
mod sandbox;
mod schema;
mod scrub;
mod state;

pub use compile::{COMPILE_CONFIG_ENV, compile_in_this_process};

/// Makes ring this process's TLS provider, if none is yet. Every HTTPS client in
/// Spindle's processes is rustls on ring; an HTTP client that does not name its provider
/// (the OTLP exporter's, the CLI's, a test's) takes the process's, and without one
/// reqwest refuses to build. Call it before the first such client; calling it again is
/// harmless.
pub fn use_ring_for_tls() {
    // An error means a provider is installed already, which is all this asks.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
pub use config::SandboxConfig;
pub use contract::Contract;
pub use control::{HeartbeatReply, Partial, Recording, StepControl, Unsupervised};
pub use kind::{KindSpec, RetrySpec, SpecError, StepSpec, is_valid_name};
pub use lines::{GuestLine, Level, Stream};
pub use load::LoadError;
pub use outcome::{
    Awaited, Ceilings, ChildResult, ChildSpec, ChildState, GuestOutcome, HookRun, JobSummary, SandboxFault, StepCall,
    StepInput, StepRun,
};
pub use random::MAX_DRAW as MAX_RANDOM_DRAW;
pub use sandbox::{Hook, LoadedKind, Runtime, STDERR_TAIL_BYTES, STDERR_TAIL_LINES, SetupError, content_digest};
pub use schema::{InputSchema, MAX_VIOLATIONS, Violation, example as schema_example};
