//! Upload validation: what a component must be before the host will run it.
//!
//! In order, cheapest first: within the size cap; a WebAssembly *component* (not a core
//! module, not something else); imports nothing but the contract's interfaces and WASI,
//! and exports `spindle:job/kind` — read from the binary's import and export sections
//! before anything is compiled, so a component of any size that reaches for something
//! else is refused in milliseconds, naming the import; compiles within the time cap;
//! links; and describes itself validly. Each failure is its own typed error.

use std::time::Duration;

use crate::kind::SpecError;
use crate::outcome::SandboxFault;
use thiserror::Error;

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
    /// Compiling needed more memory or CPU time than a compile may have: the component
    /// may be well formed, but it is too costly to compile here.
    #[error("compiling the component needed more than its {0}")]
    CompileOverLimit(String),
    /// The component does not target the `job-kind` world.
    #[error("the component does not target the spindle:job/job-kind world: {0}")]
    WrongWorld(String),
    /// The component imports something the host does not offer.
    #[error("the component imports `{0}`, which a job kind may not")]
    ForbiddenImport(String),
    /// `describe` failed: the fault, the trap's own words and the guest's last stderr
    /// lines, so that whoever deploys sees why.
    #[error("the component's describe failed: {fault}{}{}", detail_suffix(detail), stderr_suffix(stderr))]
    Describe {
        /// What stopped it.
        fault: SandboxFault,
        /// The trap's message (wasmtime's, with the guest's backtrace where it has one).
        detail: String,
        /// The guest's last stderr lines, if it printed any.
        stderr: Option<String>,
    },
    /// The component describes a kind of another name than the one it is deployed as.
    #[error(
        "the component describes the kind `{described}`, not `{deployed}`: deploy it as `{described}`, or change its name"
    )]
    NameMismatch {
        /// The name it was deployed under.
        deployed: String,
        /// The name its `describe` answered.
        described: String,
    },
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
            Self::CompileOverLimit(_) => "component.compile-over-limit",
            Self::WrongWorld(_) => "component.wrong-world",
            Self::ForbiddenImport(_) => "component.forbidden-import",
            Self::Describe { .. } => "component.describe-failed",
            Self::NameMismatch { .. } => "component.name-mismatch",
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

/// The exports of the contracts this host runs.
const KIND_EXPORTS: &[&str] = &["spindle:job/kind@0.1.", "spindle:job/kind@0.2."];

/// Checks a component's top-level imports and exports against the `job-kind` world,
/// from the binary alone: nested core modules and components are skipped, not read, so
/// this costs the same for a 100 KB component as for a 20 MB one.
pub(crate) fn check_contract(bytes: &[u8]) -> Result<(), LoadError> {
    let malformed = |e: wasmparser::BinaryReaderError| LoadError::Malformed(e.message().to_owned());
    let mut parser = wasmparser::Parser::new(0);
    let mut offset = 0;
    let mut exports = Vec::new();
    loop {
        let (payload, consumed) = match parser.parse(&bytes[offset..], true).map_err(malformed)? {
            wasmparser::Chunk::Parsed { payload, consumed } => (payload, consumed),
            wasmparser::Chunk::NeedMoreData(_) => {
                return Err(LoadError::Malformed("the component is cut short".into()));
            }
        };
        match payload {
            wasmparser::Payload::ComponentImportSection(imports) => {
                for import in imports {
                    let name = import.map_err(malformed)?.name.name;
                    if !ALLOWED_IMPORTS.iter().any(|allowed| name.starts_with(allowed)) {
                        return Err(LoadError::ForbiddenImport(name.to_owned()));
                    }
                }
            }
            wasmparser::Payload::ComponentExportSection(section) => {
                for export in section {
                    exports.push(export.map_err(malformed)?.name.name.to_owned());
                }
            }
            wasmparser::Payload::ModuleSection { unchecked_range, .. }
            | wasmparser::Payload::ComponentSection { unchecked_range, .. } => {
                // The parser expects the bytes after the nested one next.
                if unchecked_range.end > bytes.len() {
                    return Err(LoadError::Malformed("a nested module runs past the end".into()));
                }
                offset = unchecked_range.end;
                continue;
            }
            wasmparser::Payload::End(_) => break,
            _ => {}
        }
        offset += consumed;
    }
    if !exports.iter().any(|name| KIND_EXPORTS.iter().any(|kind| name.starts_with(kind))) {
        return Err(LoadError::WrongWorld(format!("it exports {exports:?}, not spindle:job/kind@0.2 (or 0.1)")));
    }
    Ok(())
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() { String::new() } else { format!(" ({detail})") }
}

fn stderr_suffix(stderr: &Option<String>) -> String {
    stderr.as_ref().map_or_else(String::new, |s| format!("; its stderr ended with:\n{s}"))
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
