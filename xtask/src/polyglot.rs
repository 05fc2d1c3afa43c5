//! Guests written in other languages: every `examples/<name>-<language>/` with a
//! `build.sh` is built by that script into `<target>/guests/<name>-<language>.wasm`,
//! with the language's toolchain installed first (`toolchains`).
//!
//! A build is cached under the hash of everything it is made from — the example, the
//! language's SDK, the contract, the toolchains' versions and, for C and Go, the
//! `spindle guest` tools — so that a rerun with nothing changed compiles nothing (a
//! Python or JavaScript component takes 10–50 s to build). The toolchains are installed
//! either way, once: the tests build projects of `spindle new` with them, and find them
//! through `target/toolchains/env` (`NAME=path` lines).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail, ensure};
use sha2::{Digest, Sha256};

use crate::toolchains;

/// A guest language besides Rust.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// componentize-py.
    Python,
    /// componentize-js.
    Js,
    /// TypeScript: `tsc`, then componentize-js (the JavaScript SDK).
    Ts,
    /// clang-19 + wasi-libc + `spindle guest`.
    C,
    /// Go's wasip1 + `spindle guest`.
    Go,
}

impl Language {
    /// The language a directory named `<name>-<language>` is written in.
    pub fn of(dir: &str) -> Option<Self> {
        match dir.rsplit_once('-')?.1 {
            "python" => Some(Self::Python),
            "js" => Some(Self::Js),
            "ts" => Some(Self::Ts),
            "c" => Some(Self::C),
            "go" => Some(Self::Go),
            _ => None,
        }
    }

    /// The SDK's directory under `guest-sdk/`.
    pub fn sdk(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Js | Self::Ts => "js",
            Self::C => "c",
            Self::Go => "go",
        }
    }

    /// Whether its build runs `spindle guest` (bindings, componentize).
    pub fn uses_spindle(self) -> bool {
        matches!(self, Self::C | Self::Go)
    }
}

/// One guest to build.
#[derive(Debug)]
struct Guest {
    name: String,
    dir: PathBuf,
    language: Language,
}

/// Builds every guest under `examples/` written in another language into `out_dir`;
/// answers the files written. `spindle` is the binary whose `guest` commands C and Go
/// builds use.
pub fn build_all(root: &Path, target: &Path, out_dir: &Path, spindle: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let guests = discover(root)?;
    let cache = target.join("guests-cache");
    std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let mut written = Vec::new();
    let mut tools: BTreeMap<&'static str, PathBuf> = BTreeMap::new();
    for guest in &guests {
        toolchain_env(guest.language, target, spindle, &mut tools)?;
    }
    let listed: String = tools.iter().map(|(name, path)| format!("{name}={}\n", path.display())).collect();
    let env_file = target.join("toolchains").join("env");
    std::fs::write(&env_file, listed).with_context(|| format!("writing {}", env_file.display()))?;
    for guest in guests {
        let hash = source_hash(root, &guest)?;
        let cached = cache.join(format!("{}-{}.wasm", guest.name, &hash[..16]));
        let dest = out_dir.join(format!("{}.wasm", guest.name));
        if !cached.is_file() {
            eprintln!("==> building {} ({:?})", guest.name, guest.language);
            let scratch = cache.join(format!("{}.partial.wasm", guest.name));
            let mut build = Command::new("bash");
            build
                .arg(guest.dir.join("build.sh"))
                .arg(&scratch)
                .current_dir(&guest.dir)
                .envs(&tools)
                .env("SPINDLE_WIT", root.join("wit"))
                .env("SPINDLE_SDK", root.join("guest-sdk").join(guest.language.sdk()));
            let status = build.status().with_context(|| format!("running {}/build.sh", guest.dir.display()))?;
            ensure!(status.success(), "building {} failed ({status})", guest.name);
            crate::guests::check_component(&scratch)?;
            std::fs::rename(&scratch, &cached).with_context(|| format!("caching {}", cached.display()))?;
        }
        std::fs::copy(&cached, &dest).with_context(|| format!("copying {} to {}", cached.display(), dest.display()))?;
        written.push(dest);
    }
    Ok(written)
}

/// The other languages' guests: `examples/<name>-<language>/build.sh`.
fn discover(root: &Path) -> anyhow::Result<Vec<Guest>> {
    let examples = root.join("examples");
    let mut guests = Vec::new();
    for entry in std::fs::read_dir(&examples).with_context(|| format!("reading {}", examples.display()))? {
        let dir = entry?.path();
        let Some(name) = dir.file_name().and_then(|n| n.to_str()).map(str::to_owned) else { continue };
        if !dir.join("build.sh").is_file() || dir.join("Cargo.toml").is_file() {
            continue;
        }
        let Some(language) = Language::of(&name) else {
            bail!("{}: a guest with a build.sh must be named <name>-<python|js|ts|c|go>", dir.display());
        };
        guests.push(Guest { name, dir, language });
    }
    guests.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(guests)
}

/// The environment a language's build script finds its tools through, installing them
/// the first time one is needed.
fn toolchain_env(
    language: Language,
    target: &Path,
    spindle: &Path,
    env: &mut BTreeMap<&'static str, PathBuf>,
) -> anyhow::Result<()> {
    if language.uses_spindle() {
        ensure!(spindle.is_file(), "{} is missing: build it first (cargo build -p spindle-cli)", spindle.display());
        env.insert("SPINDLE", spindle.to_path_buf());
    }
    match language {
        Language::Python if !env.contains_key("COMPONENTIZE_PY") => {
            env.insert("COMPONENTIZE_PY", toolchains::python(target)?);
        }
        Language::Js | Language::Ts if !env.contains_key("SPINDLE_JS_TOOLCHAIN") => {
            env.insert("SPINDLE_JS_TOOLCHAIN", toolchains::js(target)?);
        }
        Language::C if !env.contains_key("CLANG") => {
            env.insert("CLANG", toolchains::clang()?);
            // cJSON is fetched (Debian's source package) and cached there.
            env.insert("SPINDLE_C_TOOLCHAIN", target.join("toolchains").join("c"));
        }
        Language::Go if !env.contains_key("GO") => {
            env.insert("GO", toolchains::go(target)?);
        }
        _ => {}
    }
    Ok(())
}

/// What a guest's build is made from, hashed.
fn source_hash(root: &Path, guest: &Guest) -> anyhow::Result<String> {
    let mut hasher = Sha256::new();
    hasher.update(toolchains::versions());
    let mut dirs = vec![guest.dir.clone(), root.join("guest-sdk").join(guest.language.sdk()), root.join("wit")];
    if guest.language.uses_spindle() {
        dirs.push(root.join("host").join("guest-tools"));
    }
    for dir in dirs {
        let mut files = Vec::new();
        collect(&dir, &mut files)?;
        files.sort();
        for file in files {
            hasher.update(file.strip_prefix(root).unwrap_or(&file).to_string_lossy().as_bytes());
            hasher.update(std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?);
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The files under `dir` a build reads: not what builds and tests leave there.
fn collect(dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || matches!(name, "node_modules" | "__pycache__" | "target" | "build" | "gen") {
            continue;
        }
        if path.is_dir() {
            collect(&path, files)?;
        } else if !name.ends_with(".wasm") && !name.ends_with(".pyc") && !name.ends_with(".o") {
            files.push(path);
        }
    }
    Ok(())
}
