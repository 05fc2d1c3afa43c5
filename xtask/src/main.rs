//! `cargo xtask <command>`: the project's commands, in Rust so they run wherever cargo
//! does. The README's two commands are `cargo xtask demo` and `cargo xtask test`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, ensure};

mod guests;
mod polyglot;
mod postgres;
mod toolchains;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  demo      build the example kinds, start a host on a SQLite file, deploy them, run a
            batch of jobs through every outcome and show the results
  test      the whole test suite: guests, PostgreSQL (installed when missing), fmt,
            clippy, and every test on SQLite and PostgreSQL
  guests    build every guest into target/guests/<kind>.wasm: the Rust crates for
            wasm32-wasip2, and the Python, JavaScript, C and Go examples (installing
            their toolchains when missing; `--rust` for the Rust ones only)
  help      show this message";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.first().map(String::as_str) {
        Some("guests") => guests(&root, &args[1..]),
        Some("test") => test(&root, &args[1..]),
        Some("demo") => demo(&root, &args[1..]),
        Some("help" | "-h" | "--help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => {
            eprintln!("unknown command `{other}`\n\n{USAGE}");
            return ExitCode::from(2);
        }
        None => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: xtask lives one level below it.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    if std::env::var_os("CI").is_some() {
        // A CI build is never rebuilt: incremental state would only cost disk (~3 GB).
        command.env("CARGO_INCREMENTAL", "0");
    }
    command
}

fn run(mut command: Command, what: &str) -> anyhow::Result<()> {
    eprintln!("==> {what}");
    let status = command.status().with_context(|| format!("running {what}"))?;
    ensure!(status.success(), "{what} failed ({status})");
    Ok(())
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// Builds the guests: every language's, or the Rust ones with `--rust`.
fn guests(root: &Path, args: &[String]) -> anyhow::Result<()> {
    if args.iter().any(|a| a == "--rust") {
        return guests::build_guests(root, guests::Languages::Rust).map(drop);
    }
    build_spindle(root)?;
    guests::build_guests(root, guests::Languages::All).map(drop)
}

/// The `spindle` binary: the tests start `spindle serve`, and C and Go guests build
/// with `spindle guest`.
fn build_spindle(root: &Path) -> anyhow::Result<()> {
    let mut build = cargo();
    build.current_dir(root).args(["build", "-p", "spindle-cli", "--bin", "spindle"]);
    run(build, "cargo build -p spindle-cli (the tests start `spindle serve`; C and Go guests build with it)")
}

/// The `spindle` binary and every test of the workspace, built by one cargo command so
/// that they share one feature resolution: built alone, `spindle` resolves its
/// dependencies' features without the tests' (dev-dependencies, the tests crate's HTTP
/// and WebDriver clients), and `cargo test` then rebuilt wasmtime, sqlx, hyper and the
/// rest a second time (about 8 of a cold CI run's 44 minutes).
fn build_for_tests(root: &Path) -> anyhow::Result<()> {
    let mut build = cargo();
    build.current_dir(root).args(["build", "--workspace", "--bins", "--tests"]);
    run(
        build,
        "cargo build --workspace --bins --tests (the tests start `spindle serve`; C and Go guests build with it)",
    )
}

/// The dependencies' checks: `cargo deny` (licences, bans, sources; installed when
/// missing), and one HTTP client and one wasm-tools stack in the host's tree.
fn dependencies(root: &Path) -> anyhow::Result<()> {
    toolchains::cargo_deny()?;
    let mut deny = cargo();
    deny.current_dir(root).args(["deny", "check", "bans", "licenses", "sources"]);
    run(deny, "cargo deny check bans licenses sources")?;
    let output = cargo()
        .current_dir(root)
        .args(["tree", "--duplicates", "--edges", "normal", "--format", "{p}"])
        .output()
        .context("running cargo tree --duplicates")?;
    ensure!(output.status.success(), "cargo tree --duplicates failed ({})", output.status);
    let tree = String::from_utf8_lossy(&output.stdout);
    let twice: Vec<&str> = ["reqwest", "wasmparser", "wit-component"]
        .into_iter()
        .filter(|name| tree.lines().any(|line| line.starts_with(&format!("{name} v"))))
        .collect();
    ensure!(twice.is_empty(), "the host's tree holds two versions of {twice:?}:\n{tree}");
    Ok(())
}

/// The whole test suite. Extra arguments go to `cargo test` (e.g. a test name filter).
fn test(root: &Path, extra: &[String]) -> anyhow::Result<()> {
    build_for_tests(root)?;
    guests::build_guests(root, guests::Languages::All)?;
    toolchains::chromium()?;
    toolchains::clients(root, &target_dir(root))?;
    // Under the system temp directory: the `postgres` user must reach it, and a clone's
    // own directory (made by `mktemp -d`, mode 0700) may be closed to it.
    let pg_dir = std::env::temp_dir().join(format!("spindle-test-postgres-{}", std::process::id()));
    let server = postgres::Server::start(&pg_dir)?;
    eprintln!("PostgreSQL for the tests: {}", server.url);
    let mut fmt = cargo();
    fmt.current_dir(root).args(["fmt", "--all", "--", "--check"]);
    run(fmt, "cargo fmt --check")?;
    let mut clippy = cargo();
    clippy.current_dir(root).args(["clippy", "--all-targets", "--", "-D", "warnings"]);
    run(clippy, "cargo clippy (host crates)")?;
    let mut clippy_guests = cargo();
    clippy_guests.current_dir(root).args([
        "clippy",
        "--target",
        guests::GUEST_TARGET,
        "--workspace",
        "--exclude",
        "spindle",
    ]);
    for excluded in [
        "spindle-cli",
        "spindle-bench",
        "spindle-core",
        "spindle-views",
        "spindle-client",
        "spindle-runtime",
        "spindle-guest-tools",
        "spindle-tests",
        "xtask",
    ] {
        clippy_guests.args(["--exclude", excluded]);
    }
    clippy_guests.args(["--", "-D", "warnings"]);
    run(clippy_guests, "cargo clippy (guests, wasm32-wasip2)")?;
    dependencies(root)?;
    // The tables refuse an unlisted state change in release builds too, where no
    // debug assertion would catch it: the core's tests run there as well.
    let mut release_core = cargo();
    release_core.current_dir(root).args(["test", "--release", "-p", "spindle-core"]).args(extra);
    run(release_core, "cargo test --release -p spindle-core (the tables hold without debug assertions)")?;
    let mut tests = cargo();
    tests.current_dir(root).args(["test", "--workspace"]).args(extra).env("SPINDLE_TEST_DATABASE_URL", &server.url);
    run(tests, "cargo test --workspace (SQLite and PostgreSQL)")
}

/// Builds the guests and the `spindle` binary, then runs `spindle demo`.
fn demo(root: &Path, extra: &[String]) -> anyhow::Result<()> {
    let guests = guests::build_guests(root, guests::Languages::Rust)?;
    let mut build = cargo();
    build.current_dir(root).args(["build", "--quiet", "-p", "spindle-cli", "--bin", "spindle"]);
    run(build, "cargo build -p spindle-cli")?;
    let bin = target_dir(root).join("debug").join("spindle");
    let data = target_dir(root).join("demo");
    let mut demo = Command::new(bin);
    demo.arg("demo").arg("--guests").arg(&guests).arg("--data-dir").arg(&data).args(extra);
    run(demo, "spindle demo")
}
