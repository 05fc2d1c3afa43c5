//! A core module made into a component of the `job-kind` world: the world's type is
//! embedded (unless the module carries it already, as a C module linked with the
//! bindings' object file does), and the module's `wasi_snapshot_preview1` imports are
//! served by the preview-1 adapter of the wasmtime this host runs.

use std::path::Path;

use anyhow::Context;

/// How a module's WASI preview-1 imports become preview-2 imports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adapter {
    /// The reactor adapter: a library module (no `_start`), as a job kind is.
    Reactor,
    /// No adapter: the module imports no preview-1 functions.
    None,
}

/// The component made of `module` (a core module), its world taken from `wit` (the
/// compiled-in contract when `None`). With `realloc_via_memory_grow`, the adapter gets
/// its memory by growing the module's rather than through the module's `cabi_realloc`:
/// only for a module that exports no usable `cabi_realloc`. Never for Go: its allocator
/// believes it owns all memory past its break, and later hands the adapter's pages out
/// again as heap (traps in `runtime.sigpanic`, corrupt adapter state).
pub fn componentize(
    module: &[u8],
    wit: Option<&Path>,
    adapter: Adapter,
    realloc_via_memory_grow: bool,
) -> anyhow::Result<Vec<u8>> {
    let mut module = module.to_vec();
    if !carries_world(&module) {
        let (resolve, world) = crate::wit::resolve(wit)?;
        wit_component::embed_component_metadata(&mut module, &resolve, world, wit_component::StringEncoding::UTF8)
            .context("embedding the world's type")?;
    }
    let mut encoder = wit_component::ComponentEncoder::default()
        .validate(true)
        .realloc_via_memory_grow(realloc_via_memory_grow)
        .module(&module)
        .context("reading the module")?;
    if adapter == Adapter::Reactor {
        encoder = encoder
            .adapter(
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
            .context("adding the preview-1 adapter")?;
    }
    encoder.encode().context("making the component")
}

/// Whether `module` already carries a component type: a `component-type` custom section,
/// as a C module linked with wit-bindgen's object file does. A Go module does not (the Go
/// linker keeps no custom sections of its inputs), nor does one built from hand-written
/// glue.
fn carries_world(module: &[u8]) -> bool {
    wasmparser::Parser::new(0).parse_all(module).any(|payload| {
        matches!(payload, Ok(wasmparser::Payload::CustomSection(section)) if section.name().starts_with("component-type"))
    })
}
