//! Upload validation: what a component must be before the host will run it.
//!
//! In order, cheapest first: within the size cap; a WebAssembly *component* (not a core
//! module, not something else); compiles within the time cap; imports nothing but
//! `spindle:job/host` and WASI; exports `spindle:job/kind`; links; and describes itself
//! validly. Each failure is its own typed error.

use std::time::Duration;

use thiserror::Error;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::kind::SpecError;
use crate::outcome::SandboxFault;

/// Why a component cannot be loaded.
#[derive(Debug, Error)]
pub enum LoadError {
    /// Over the upload cap.
    #[error("the component is {bytes} bytes, over the {cap}-byte limit")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The cap.
        cap: usize,
    },
    /// Not WebAssembly at all (or cut before its header).
    #[error("not a WebAssembly binary")]
    NotWasm,
    /// A core module: job kinds must be components.
    #[error(
        "a core WebAssembly module, not a component: build for wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule,
    /// The binary does not parse or compile (truncated, corrupt, unsupported).
    #[error("the component is malformed: {0}")]
    Malformed(String),
    /// Compiling took longer than allowed.
    #[error("compiling the component took longer than {0:?}")]
    CompileTimeout(Duration),
    /// The component does not target the `job-kind` world.
    #[error("the component does not target the spindle:job/job-kind world: {0}")]
    WrongWorld(String),
    /// The component imports something the host does not offer.
    #[error("the component imports `{0}`, which a job kind may not")]
    ForbiddenImport(String),
    /// `describe` failed.
    #[error("the component's describe failed: {0}")]
    Describe(SandboxFault),
    /// `describe` answered an invalid description.
    #[error("the component describes itself invalidly: {0}")]
    InvalidSpec(#[from] SpecError),
    /// Too many compiles are under way or waiting: try again shortly.
    #[error("the host is compiling as many components as it may; try again shortly")]
    Busy,
    /// The host failed (cache I/O, a worker that died): not the component's fault.
    #[error("internal error while loading: {0}")]
    Internal(String),
}

impl LoadError {
    /// A stable code for API errors.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "component.too-large",
            Self::NotWasm => "component.not-wasm",
            Self::CoreModule => "component.core-module",
            Self::Malformed(_) => "component.malformed",
            Self::CompileTimeout(_) => "component.compile-timeout",
            Self::WrongWorld(_) => "component.wrong-world",
            Self::ForbiddenImport(_) => "component.forbidden-import",
            Self::Describe(_) => "component.describe-failed",
            Self::InvalidSpec(_) => "component.invalid-spec",
            Self::Busy => "component.busy",
            Self::Internal(_) => "internal",
        }
    }
}

const MAGIC: [u8; 4] = *b"\0asm";
const CORE_VERSION: [u8; 4] = [1, 0, 0, 0];
const COMPONENT_LAYER: [u8; 2] = [1, 0];

/// Checks the size cap and the binary's header.
pub(crate) fn check_header(bytes: &[u8], cap: usize) -> Result<(), LoadError> {
    if bytes.len() > cap {
        return Err(LoadError::TooLarge { bytes: bytes.len(), cap });
    }
    if bytes.len() < 8 || bytes[..4] != MAGIC {
        return Err(LoadError::NotWasm);
    }
    if bytes[4..8] == CORE_VERSION {
        return Err(LoadError::CoreModule);
    }
    if bytes[6..8] != COMPONENT_LAYER {
        return Err(LoadError::NotWasm);
    }
    Ok(())
}

/// Interfaces a job kind may import: the host's own and WASI (linked with no authority).
const ALLOWED_IMPORTS: &[&str] = &[
    "spindle:job/host@0.1.",
    "spindle:job/types@0.1.",
    "spindle:job/host@0.2.",
    "spindle:job/types@0.2.",
    "spindle:job/config@0.2.",
    "wasi:http/outgoing-handler@0.2.",
    "wasi:http/types@0.2.",
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:random/",
    "wasi:sockets/",
];

/// The interface a job kind must export.
/// The exports of the contracts this host runs.
const KIND_EXPORTS: &[&str] = &["spindle:job/kind@0.1.", "spindle:job/kind@0.2."];

/// Checks the compiled component's imports and exports against the `job-kind` world.
pub(crate) fn check_world(engine: &Engine, component: &Component) -> Result<(), LoadError> {
    let ty = component.component_type();
    for (name, _) in ty.imports(engine) {
        if !ALLOWED_IMPORTS.iter().any(|allowed| name.starts_with(allowed)) {
            return Err(LoadError::ForbiddenImport(name.to_owned()));
        }
    }
    if !ty.exports(engine).any(|(name, _)| KIND_EXPORTS.iter().any(|kind| name.starts_with(kind))) {
        let exports: Vec<String> = ty.exports(engine).map(|(name, _)| name.to_owned()).collect();
        return Err(LoadError::WrongWorld(format!("it exports {exports:?}, not spindle:job/kind@0.2 (or 0.1)")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_told_apart() {
        assert!(matches!(check_header(b"\0asm\x01\0\0\0", 100), Err(LoadError::CoreModule)));
        assert!(matches!(check_header(b"\0asm\x0d\0\x01\0", 100), Ok(())));
        assert!(matches!(check_header(b"\0as", 100), Err(LoadError::NotWasm)));
        assert!(matches!(check_header(b"PK\x03\x04zzzz", 100), Err(LoadError::NotWasm)));
        assert!(matches!(check_header(&[0; 200], 100), Err(LoadError::TooLarge { bytes: 200, cap: 100 })));
    }
}
