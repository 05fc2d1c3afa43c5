//! Support for Spindle's workspace-level tests: the built guest components, sandboxes
//! with test limits, and real PostgreSQL servers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use spindle_runtime::{LoadedKind, Runtime, SandboxConfig, StepInput};

pub mod harness;
pub mod http;
pub mod postgres;
pub mod served;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_owned()
}

/// An HTTP client for a test to call a host with (ring as the process's TLS provider,
/// as in every Spindle process).
pub fn http_client() -> reqwest::Client {
    http_client_with(reqwest::Client::builder())
}

/// [`http_client`] as `builder` configures it.
pub fn http_client_with(builder: reqwest::ClientBuilder) -> reqwest::Client {
    spindle_runtime::use_ring_for_tls();
    builder.build().expect("an HTTP client")
}

/// What a tracing subscriber on this thread writes, kept for a test to read
/// ([`capture_log`]).
#[derive(Clone, Debug, Default)]
pub struct CapturedLog(Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLog {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures this thread's log lines at `level` and above until the guard drops: on a
/// current-thread runtime, every task of the test.
pub fn capture_log(level: tracing::Level) -> (CapturedLog, tracing::subscriber::DefaultGuard) {
    let captured = CapturedLog::default();
    let writer = captured.clone();
    let subscriber =
        tracing_subscriber::fmt().with_ansi(false).with_max_level(level).with_writer(move || writer.clone()).finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

/// Path of a built guest component (`target/guests/<name>.wasm`).
pub fn guest_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace_root().join("target"), PathBuf::from);
    dir.join("guests").join(format!("{name}.wasm"))
}

/// The bytes of a built guest component.
pub fn guest(name: &str) -> Vec<u8> {
    let path = guest_path(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("guest component {} is missing ({e}): run `cargo xtask guests` (or `cargo xtask test`)", path.display())
    })
}

/// A sandbox with limits small enough for tests to hit quickly.
pub fn test_sandbox() -> SandboxConfig {
    SandboxConfig {
        step_timeout: std::time::Duration::from_secs(10),
        pool_slots: 64,
        cache_dir: Some(shared_cache_dir()),
        ..SandboxConfig::default()
    }
}

/// One compiled-artifact cache for the whole test run, so each component compiles once.
pub fn shared_cache_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("test-artifact-cache");
    std::fs::create_dir_all(&dir).expect("create the test artifact cache");
    dir
}

/// A runtime with `config`.
pub fn runtime(config: SandboxConfig) -> Arc<Runtime> {
    Arc::new(Runtime::new(config).expect("sandbox"))
}

/// Loads a guest by name.
pub async fn load(runtime: &Runtime, name: &str) -> LoadedKind {
    runtime.load(&guest(name)).await.unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

/// Input for `step` of a job with `payload`.
pub fn input(step: &str, attempt: u32, payload: serde_json::Value) -> StepInput {
    StepInput {
        job_id: "00000000-0000-7000-8000-000000000001".into(),
        step: step.into(),
        attempt,
        idempotency_key: format!("00000000-0000-7000-8000-000000000001/{step}"),
        payload: serde_json::to_vec(&payload).unwrap(),
        prior: Vec::new(),
        cursor: None,
        capabilities: Arc::default(),
        awaited: None,
        ceilings: Default::default(),
    }
}

/// Parses a step output as JSON.
pub fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("output is not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// The `spindle` binary of this build (`target/<profile>/spindle`), built by
/// `cargo build -p spindle` (`cargo xtask test` builds it before the tests).
pub fn spindle_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>/spindle
    let bin = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>").join("spindle");
    assert!(bin.exists(), "{} is missing: run `cargo build -p spindle` (or `cargo xtask test`)", bin.display());
    bin
}

/// Runs `spindle bench` with `args` and `--json`, on the built guests, its scenarios in a
/// scratch directory; answers the report, failing with its error output if it failed.
pub fn bench(args: &[&str]) -> serde_json::Value {
    let scratch = harness::Scratch::new();
    let guests = guest_path("noop").parent().expect("the guests directory").to_owned();
    let ran = std::process::Command::new(spindle_bin())
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg("--guests")
        .arg(&guests)
        .arg("--work-dir")
        .arg(&scratch.path)
        .output()
        .expect("spindle bench runs");
    assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    serde_json::from_slice(&ran.stdout).expect("a JSON report")
}
