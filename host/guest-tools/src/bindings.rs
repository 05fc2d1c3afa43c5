//! C and Go bindings of the `job-kind` world, from wit-bindgen's own generators: what a
//! kind written in those languages calls and implements.

use std::path::Path;

use anyhow::Context;

/// A language whose bindings this binary generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// C: `job_kind.h`, `job_kind.c` and `job_kind_component_type.o` (the world's type,
    /// linked into the module so that [`componentize`](crate::componentize) finds it).
    C,
    /// Go (`wasip1`, the Go toolchain's own): a `wit_component` module of `//go:wasmimport`
    /// and `//go:wasmexport` glue, one package per interface.
    Go,
}

/// Writes the bindings of the world in `wit` (the compiled-in contract when `None`) for
/// `language` into `out`; answers the files written, relative to `out`.
pub fn generate_bindings(language: Language, wit: Option<&Path>, out: &Path) -> anyhow::Result<Vec<String>> {
    let (mut resolve, world) = crate::wit::resolve(wit)?;
    let mut files = wit_bindgen_core::Files::default();
    let mut generator = match language {
        Language::C => wit_bindgen_c::Opts::default().build(),
        Language::Go => wit_bindgen_go::Opts { format: wit_bindgen_go::Format::False, ..Default::default() }.build(),
    };
    generator.generate(&mut resolve, world, &mut files).context("generating the bindings")?;
    let mut written = Vec::new();
    for (name, contents) in files.iter() {
        let path = out.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        written.push(name.to_owned());
    }
    if language == Language::Go {
        written.extend(write_go_pkg(out)?);
    }
    written.sort();
    Ok(written)
}

include!(concat!(env!("OUT_DIR"), "/go_pkg.rs"));

/// Where the Go bindings' runtime package goes, within the bindings' module.
const GO_PKG_DIR: &str = "go.bytecodealliance.org/pkg";

/// Writes the runtime package the Go bindings import beside them and points the
/// bindings' `go.mod` at it, so a Go kind builds without the Go module proxy.
fn write_go_pkg(out: &Path) -> anyhow::Result<Vec<String>> {
    let mut written = Vec::new();
    for (name, contents) in GO_PKG {
        let relative = format!("{GO_PKG_DIR}/{name}");
        let path = out.join(&relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        written.push(relative);
    }
    let go_mod = out.join("go.mod");
    let mut text = std::fs::read_to_string(&go_mod).with_context(|| format!("reading {}", go_mod.display()))?;
    text.push_str(&format!("\nreplace go.bytecodealliance.org/pkg => ./{GO_PKG_DIR}\n"));
    std::fs::write(&go_mod, text).with_context(|| format!("writing {}", go_mod.display()))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_bindings_declare_the_kind_interface() {
        let out = std::env::temp_dir().join(format!("spindle-bindings-c-{}", std::process::id()));
        let files = generate_bindings(Language::C, None, &out).expect("bindings");
        assert!(files.contains(&"job_kind.h".to_owned()), "{files:?}");
        let header = std::fs::read_to_string(out.join("job_kind.h")).expect("the header");
        assert!(header.contains("exports_spindle_job_kind_run_step"), "the export to implement is declared");
        let _ = std::fs::remove_dir_all(&out);
    }

    #[test]
    fn go_bindings_are_a_module() {
        let out = std::env::temp_dir().join(format!("spindle-bindings-go-{}", std::process::id()));
        let files = generate_bindings(Language::Go, None, &out).expect("bindings");
        assert!(files.contains(&"wit_exports.go".to_owned()), "{files:?}");
        assert!(files.contains(&"go.bytecodealliance.org/pkg/wit/runtime/runtime.go".to_owned()), "{files:?}");
        let go_mod = std::fs::read_to_string(out.join("go.mod")).expect("go.mod");
        assert!(go_mod.contains("replace go.bytecodealliance.org/pkg => ./go.bytecodealliance.org/pkg"), "{go_mod}");
        let _ = std::fs::remove_dir_all(&out);
    }
}
