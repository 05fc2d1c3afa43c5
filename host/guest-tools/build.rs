//! Compiles in what `spindle guest` and `spindle new` write out:
//!
//! - the Go package the Go bindings import (`go.bytecodealliance.org/pkg`: the canonical
//!   ABI's runtime and types), which wit-bindgen-go ships in its crate but does not
//!   expose; a Go kind's build cannot fetch it from the Go proxy everywhere, so
//!   `spindle guest bindgen go` writes it beside the bindings;
//! - each language's SDK (`guest-sdk/`), its `greet` example (`examples/greet-*`: the
//!   kind a new project starts from, the one the test suite runs on a host) and the
//!   project files of `templates/`, for `spindle new`.

use std::path::{Path, PathBuf};

/// The crate that ships the package, as this crate's manifest pins it.
const CRATE: &str = "wit-bindgen-go-0.60.0";

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let pkg = find_pkg().unwrap_or_else(|| {
        panic!("the sources of {CRATE} (src/pkg) are not in cargo's registry or a vendor directory")
    });
    println!("cargo:rerun-if-changed={}", pkg.display());
    let mut files = Vec::new();
    collect(&pkg, &pkg, &mut files);
    files.sort();
    let mut code = String::from("/// The files of `go.bytecodealliance.org/pkg`, by path within the module.\n");
    code.push_str("pub(crate) const GO_PKG: &[(&str, &[u8])] = &[\n");
    for (relative, absolute) in &files {
        code.push_str(&format!("    ({relative:?}, include_bytes!({:?})),\n", absolute.display().to_string()));
    }
    code.push_str("];\n");
    std::fs::write(out.join("go_pkg.rs"), code).expect("writing go_pkg.rs");
    scaffolding(&out);
}

/// What each language's new project is made of, by set (`sdk/python`, `example/python`,
/// `template/python`, …): the files under each set's directory, as `(set, path, bytes)`.
fn scaffolding(out: &Path) {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let repo = manifest.join("..").join("..");
    let sets: [(&str, PathBuf); 17] = [
        ("sdk/rust", repo.join("guest-sdk").join("src")),
        ("sdk/python", repo.join("guest-sdk").join("python").join("spindle_guest")),
        ("sdk/js", repo.join("guest-sdk").join("js")),
        ("sdk/c", repo.join("guest-sdk").join("c")),
        ("sdk/go", repo.join("guest-sdk").join("go")),
        ("example/rust", repo.join("examples").join("greet-rust").join("src")),
        ("example/python", repo.join("examples").join("greet-python")),
        ("example/js", repo.join("examples").join("greet-js")),
        ("example/ts", repo.join("examples").join("greet-ts")),
        ("example/c", repo.join("examples").join("greet-c")),
        ("example/go", repo.join("examples").join("greet-go")),
        ("template/rust", manifest.join("templates").join("rust")),
        ("template/python", manifest.join("templates").join("python")),
        ("template/js", manifest.join("templates").join("js")),
        ("template/ts", manifest.join("templates").join("ts")),
        ("template/c", manifest.join("templates").join("c")),
        ("template/go", manifest.join("templates").join("go")),
    ];
    let mut code = String::from("/// Scaffolding files: (set, path within the set, contents).\n");
    code.push_str("pub(crate) const SCAFFOLDING: &[(&str, &str, &[u8])] = &[\n");
    for (set, dir) in &sets {
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files = Vec::new();
        collect_project(dir, dir, &mut files);
        files.sort();
        for (relative, absolute) in files {
            code.push_str(&format!(
                "    ({set:?}, {relative:?}, include_bytes!({:?})),\n",
                absolute.display().to_string()
            ));
        }
    }
    code.push_str("];\n");
    std::fs::write(out.join("scaffolding.rs"), code).expect("writing scaffolding.rs");
}

/// A project's files: not what builds, installs and the SDKs' own tests leave or need.
fn collect_project(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let skipped_dir =
            matches!(name.as_str(), "node_modules" | "__pycache__" | "target" | "gen" | "build" | ".venv");
        if path.is_dir() {
            // The SDKs' own unit tests stay in the repository.
            let sdk_tests = dir == root
                && root.parent().is_some_and(|p| p.ends_with("guest-sdk"))
                && matches!(name.as_str(), "test" | "tests" | "memprobe");
            if !skipped_dir && !sdk_tests {
                collect_project(root, &path, files);
            }
        } else if !name.ends_with(".wasm") && !name.ends_with(".pyc") && !name.ends_with(".o") {
            let relative = path.strip_prefix(root).expect("under the root").to_string_lossy().replace('\\', "/");
            files.push((relative, path));
        }
    }
}

/// `src/pkg` of the crate: in cargo's registry sources, or a vendored copy.
fn find_pkg() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let registries = std::fs::read_dir(home.join("registry").join("src")).ok()?;
    let mut candidates: Vec<PathBuf> = registries.filter_map(Result::ok).map(|e| e.path().join(CRATE)).collect();
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").ok()?);
    candidates.extend(manifest.ancestors().map(|a| a.join("vendor").join("wit-bindgen-go")));
    candidates.into_iter().map(|c| c.join("src").join("pkg")).find(|p| p.join("go.mod").is_file())
}

/// The module's Go sources, assembly stubs, `go.mod` and licence (not its docs site).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "docs" && !name.starts_with('.') {
                collect(root, &path, files);
            }
        } else if name.ends_with(".go") || name.ends_with(".s") || name == "go.mod" || name == "LICENSE" {
            let relative = path.strip_prefix(root).expect("under the root").to_string_lossy().replace('\\', "/");
            files.push((relative, path));
        }
    }
}
