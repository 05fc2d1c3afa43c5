//! `cargo xtask guests`: builds every guest crate into a component under
//! `<target>/guests/<kind>.wasm`.
//!
//! A Rust guest is any workspace package under `examples/` or `tests/guests/` with a
//! `cdylib` target; guests in other languages (`examples/<name>-<language>/build.sh`)
//! are built by [`crate::polyglot`] when asked for. Its file is named after the package minus the `spindle-example-`
//! or `spindle-test-guest-` prefix. A package may ask to be built more than once with
//! different features:
//!
//! ```toml
//! [package.metadata.spindle]
//! variants = { v1 = [], v2 = ["v2"] }   # versioned-v1.wasm, versioned-v2.wasm
//! ```

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail, ensure};
use serde_json::Value;

/// The guests' target triple: WASI preview 2, whose `cdylib`s link into components.
pub const GUEST_TARGET: &str = "wasm32-wasip2";
/// The cargo profile for guests (root `Cargo.toml`): small and optimised.
pub const GUEST_PROFILE: &str = "guest";
/// Component-model binary preamble: magic, then version 0x0d and layer 1. A core
/// module has layer 0 and would be refused by the host.
pub const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

const GUEST_DIRS: [&str; 2] = ["examples", "tests/guests"];
const NAME_PREFIXES: [&str; 2] = ["spindle-example-", "spindle-test-guest-"];

/// One component file to produce.
#[derive(Debug)]
struct Build {
    package: String,
    package_id: String,
    file: String,
    features: Vec<String>,
}

/// Which guests to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Languages {
    /// The Rust guests only (the demo's).
    Rust,
    /// Every language's: their toolchains are installed when missing.
    All,
}

/// Builds every guest and returns the directory holding the components.
pub fn build_guests(root: &Path, languages: Languages) -> anyhow::Result<PathBuf> {
    ensure_target_installed()?;
    let metadata = cargo_metadata(root)?;
    let target_dir =
        metadata["target_directory"].as_str().map(PathBuf::from).context("cargo metadata has no target_directory")?;
    let builds = discover(&metadata, root)?;
    ensure!(!builds.is_empty(), "no guest crates under {GUEST_DIRS:?}");

    let out_dir = target_dir.join("guests");
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;

    // Featureless builds share one cargo invocation; each featured variant needs its
    // own, since features unify across the packages of one invocation.
    let (plain, featured): (Vec<&Build>, Vec<&Build>) = builds.iter().partition(|b| b.features.is_empty());
    let mut written = Vec::new();
    if !plain.is_empty() {
        written.extend(build_and_copy(root, &plain, &[], &out_dir)?);
    }
    for build in featured {
        let features: Vec<String> = build.features.iter().map(|f| format!("{}/{f}", build.package)).collect();
        written.extend(build_and_copy(root, &[build], &features, &out_dir)?);
    }
    if languages == Languages::All {
        let spindle = target_dir.join("debug").join("spindle");
        written.extend(crate::polyglot::build_all(root, &target_dir, &out_dir, &spindle)?);
    }

    written.sort();
    println!("guest components in {}:", display_path(root, &out_dir));
    for path in &written {
        let size = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len();
        println!("  {:<34} {:>9} bytes", display_path(root, path), size);
    }
    Ok(out_dir)
}

/// Runs one `cargo build` for `builds` and copies each component to `out_dir`.
fn build_and_copy(root: &Path, builds: &[&Build], features: &[String], out_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut command = Command::new(cargo());
    command
        .current_dir(root)
        .args(["build", "--target", GUEST_TARGET, "--profile", GUEST_PROFILE])
        .arg("--message-format=json-render-diagnostics");
    for build in builds {
        command.args(["-p", &build.package]);
    }
    if !features.is_empty() {
        command.args(["--features", &features.join(",")]);
    }
    let artifacts = run_build(command)?;

    let mut written = Vec::new();
    for build in builds {
        let source = artifacts
            .get(&build.package_id)
            .with_context(|| format!("cargo reported no .wasm for {}", build.package))?;
        check_component(source)?;
        let dest = out_dir.join(format!("{}.wasm", build.file));
        std::fs::copy(source, &dest).with_context(|| format!("copying {} to {}", source.display(), dest.display()))?;
        written.push(dest);
    }
    Ok(written)
}

/// Runs cargo with JSON messages and maps each package id to the `.wasm` it produced.
fn run_build(mut command: Command) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut child = command.stdout(Stdio::piped()).spawn().with_context(|| format!("running {command:?}"))?;
    let stdout = child.stdout.take().context("cargo's stdout was not captured")?;
    let mut artifacts = BTreeMap::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading cargo's output")?;
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" {
            continue;
        }
        let wasm = message["filenames"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|name| name.ends_with(".wasm"));
        if let (Some(id), Some(wasm)) = (message["package_id"].as_str(), wasm) {
            artifacts.insert(id.to_owned(), PathBuf::from(wasm));
        }
    }
    let status = child.wait().context("waiting for cargo")?;
    ensure!(status.success(), "cargo build for {GUEST_TARGET} failed ({status})");
    Ok(artifacts)
}

/// Finds the guest packages and the component files each should produce.
fn discover(metadata: &Value, root: &Path) -> anyhow::Result<Vec<Build>> {
    let guest_dirs: Vec<PathBuf> = GUEST_DIRS.iter().map(|dir| root.join(dir)).collect();
    let mut builds = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let manifest = Path::new(package["manifest_path"].as_str().unwrap_or_default());
        let is_cdylib = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|target| target["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|k| k == "cdylib")));
        if !is_cdylib || !guest_dirs.iter().any(|dir| manifest.starts_with(dir)) {
            continue;
        }
        let (Some(name), Some(id)) = (package["name"].as_str(), package["id"].as_str()) else {
            bail!("cargo metadata lists a package without name or id: {}", manifest.display());
        };
        let file = NAME_PREFIXES.iter().find_map(|prefix| name.strip_prefix(prefix)).unwrap_or(name);
        let build = |file: String, features: Vec<String>| Build {
            package: name.to_owned(),
            package_id: id.to_owned(),
            file,
            features,
        };
        match package["metadata"]["spindle"]["variants"].as_object() {
            None => builds.push(build(file.to_owned(), Vec::new())),
            Some(variants) => {
                for (variant, features) in variants {
                    let features = features
                        .as_array()
                        .with_context(|| format!("{name}: variant `{variant}` must list features"))?
                        .iter()
                        .map(|f| f.as_str().map(str::to_owned).context("features are strings"))
                        .collect::<anyhow::Result<Vec<_>>>()?;
                    builds.push(build(format!("{file}-{variant}"), features));
                }
            }
        }
    }
    Ok(builds)
}

fn cargo_metadata(root: &Path) -> anyhow::Result<Value> {
    let output = Command::new(cargo())
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo metadata")?;
    ensure!(output.status.success(), "cargo metadata failed ({})", output.status);
    serde_json::from_slice(&output.stdout).context("parsing cargo metadata")
}

/// Installs the guest target when rustup manages the toolchain and lacks it; a fresh
/// machine does not have it. Without rustup, the build itself reports a missing target.
fn ensure_target_installed() -> anyhow::Result<()> {
    let Ok(output) = Command::new("rustup").args(["target", "list", "--installed"]).output() else {
        eprintln!("note: rustup not found; assuming {GUEST_TARGET} is installed");
        return Ok(());
    };
    ensure!(output.status.success(), "rustup target list failed ({})", output.status);
    if String::from_utf8_lossy(&output.stdout).lines().any(|line| line.trim() == GUEST_TARGET) {
        return Ok(());
    }
    eprintln!("installing the {GUEST_TARGET} target with rustup");
    let status =
        Command::new("rustup").args(["target", "add", GUEST_TARGET]).status().context("running rustup target add")?;
    ensure!(status.success(), "rustup target add {GUEST_TARGET} failed ({status})");
    Ok(())
}

/// Refuses a file that is not a component (a core module, a truncated write).
pub fn check_component(path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    ensure!(
        bytes.starts_with(&COMPONENT_HEADER),
        "{} is not a WebAssembly component (header {:02x?})",
        path.display(),
        &bytes[..bytes.len().min(8)]
    );
    Ok(())
}

/// The cargo that runs xtask, so the same toolchain builds the guests.
fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn display_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}
