//! What a job kind in any language needs from Spindle to become a component, so that a
//! team writing one needs `spindle` and its language's compiler, and nothing else:
//!
//! - [`wit`]: the contract (`spindle:job@0.2.0` and the WASI interfaces it uses), as
//!   the host that built this binary speaks it, written out for a language's tools.
//! - [`bindings`]: C and Go bindings of the `job-kind` world (wit-bindgen's own
//!   generators, the ones `wit-bindgen c` and `wit-bindgen go` run).
//! - [`componentize`]: a core WebAssembly module (what clang or Go build for
//!   `wasm32-wasi`/`wasip1`) made into a component of the world, with the preview-1
//!   adapter of the wasmtime the host runs — what `wasm-tools component embed` and
//!   `component new --adapt` do.
//! - [`new`]: a ready project for a kind in Rust, Python, JavaScript, C or Go.

pub mod bindings;
pub mod componentize;
pub mod new;
pub mod wit;

pub use bindings::{Language, generate_bindings};
pub use componentize::{Adapter, componentize};
pub use new::{ProjectLanguage, is_project_name, write_project};
pub use wit::{CONTRACT_VERSION, WORLD, write_wit};
