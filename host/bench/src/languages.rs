//! The same kind in every guest language (`examples/greet-*`), as a host meets it: the
//! component's size; its deploy-time load (upload checks, compile in a child process as
//! `spindle serve` does, link, describe); its load from the compiled-artifact cache (a
//! host restarting, or another host loading the version); its first step and its steady
//! step (`compose`, a fresh sandbox each call); and the host memory a loaded version
//! costs (resident set with it loaded and stepped, less before), split into the host's
//! own pages and pages mapped from the artifact cache's file. A next version (the same
//! component with a custom section added: new bytes, the same code) is then deployed
//! and stepped beside the first: what another version of the language costs.
//!
//! Each language is measured in a `spindle bench` process of its own, so that the resident
//! set it adds is its own and not what an earlier language left in the allocator. A
//! language whose component is not built is left out (`cargo xtask guests` builds all).
//!
//! Then a shared host ([`SharedHost`]), also in a process of its own: a host on a fresh
//! database with its dispatcher running, into which 30 tenants deploy 300 Python and
//! JavaScript versions (`--shared-versions`), each version a kind of its own with bytes
//! of its own, a job run on each as it is deployed and again on every one once all are
//! deployed; the host's resident set is read after each phase.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use serde::Serialize;
use spindle_runtime::{GuestOutcome, Runtime, SandboxConfig, StepInput, StepRun, Unsupervised};

use spindle::store::TenantId;
use spindle_core::JobState;

use super::stats::{Summary, peak_rss_mib, reset_peak, rss_mib, rss_split_mib};
use super::{Context, count_in_state, requests};

/// The languages, by the suffix of their example's name.
pub const LANGUAGES: [&str; 5] = ["rust", "python", "js", "c", "go"];
/// Steady-state step calls measured after the first.
const STEADY_CALLS: usize = 50;
/// Cache loads measured.
const CACHE_LOADS: usize = 3;

/// One language's figures.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct LanguageFigures {
    /// The language.
    pub language: String,
    /// The component's size, bytes.
    pub bytes: usize,
    /// Load on deploy (checks, compile, link, describe), milliseconds.
    pub deploy_ms: f64,
    /// Load from the warm artifact cache, milliseconds (median).
    pub cache_load_ms: f64,
    /// The first `compose` call after loading, milliseconds.
    pub first_step_ms: f64,
    /// Steady `compose` calls, milliseconds.
    pub steady_step_ms: Summary,
    /// Resident set the loaded version adds, stepped, MiB (`None` off Linux).
    pub resident_mib: Option<f64>,
    /// Of that, the host's own pages (anonymous and shared memory), MiB.
    #[serde(default)]
    pub resident_own_mib: Option<f64>,
    /// Of that, pages mapped from the artifact's file, MiB.
    #[serde(default)]
    pub resident_file_mib: Option<f64>,
    /// Load on deploy of a next version, the first still loaded, milliseconds.
    #[serde(default)]
    pub next_deploy_ms: Option<f64>,
    /// Resident set the next version adds, stepped: (all, own, file-mapped), MiB.
    #[serde(default)]
    pub next_resident_mib: Option<(f64, f64, f64)>,
}

/// The `--language` a child process is given to measure the shared host.
const SHARED_HOST: &str = "shared-host";
/// Tenants the shared host's versions are spread over.
const SHARED_TENANTS: usize = 30;

/// A host serving many tenants' Python and JavaScript versions.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct SharedHost {
    /// Versions deployed (half Python, half JavaScript), each a kind of its own.
    pub versions: usize,
    /// Tenants they belong to.
    pub tenants: usize,
    /// Deploy of each version after its language's first (compile in a child process,
    /// store), milliseconds.
    pub next_deploy_ms: Option<Summary>,
    /// The first Python and the first JavaScript deploy, milliseconds.
    pub first_deploy_ms: Vec<f64>,
    /// Jobs that succeeded (two per version: one as it is deployed, one once all are).
    pub jobs_succeeded: i64,
    /// Resident set once every version is deployed and its first job has run, MiB.
    pub deployed_rss_mib: Option<f64>,
    /// Resident set after a job has run on every version again, MiB.
    pub rss_mib: Option<f64>,
    /// Of that, the host's own pages and pages mapped from files, MiB.
    pub rss_split_mib: Option<(f64, f64)>,
    /// Peak resident set over the whole scenario, MiB.
    pub peak_rss_mib: Option<f64>,
    /// Versions loaded at the end (the registry's LRU keeps compiled code within its
    /// budget; the rest load from the artifact cache when next stepped), and their
    /// compiled code's bytes.
    pub loaded: (usize, usize),
}

/// Measures every language whose greet component is built, each in a child process,
/// then the shared host in another (or, in such a child, its one part).
pub async fn measure(ctx: &Context) -> anyhow::Result<(Vec<LanguageFigures>, Option<SharedHost>)> {
    match ctx.settings.language.as_deref() {
        Some(SHARED_HOST) => return Ok((Vec::new(), measure_shared(ctx).await?)),
        Some(language) => return Ok((measure_one(ctx, language).await?.into_iter().collect(), None)),
        None => {}
    }
    let task = ctx.progress.task("languages: the greet kind in each", Some(LANGUAGES.len() as u64 + 1));
    let mut out = Vec::new();
    for (i, language) in LANGUAGES.iter().enumerate() {
        task.note(format!("greet-{language}"));
        let report = in_child(ctx, language).await?;
        for figures in report["languages"].as_array().into_iter().flatten() {
            out.push(serde_json::from_value(figures.clone()).context("a language's figures")?);
        }
        task.set(i as u64 + 1);
    }
    let mut shared = None;
    if ctx.settings.shared_versions > 0 {
        task.note(format!("{} versions on a shared host", ctx.settings.shared_versions));
        let report = in_child(ctx, SHARED_HOST).await?;
        if !report["shared_host"].is_null() {
            shared = Some(serde_json::from_value(report["shared_host"].clone()).context("the shared host's figures")?);
        }
    }
    task.finish(&format!("{} languages", out.len()));
    Ok((out, shared))
}

/// Runs `spindle bench --only languages --language <language>` and reads its JSON report.
async fn in_child(ctx: &Context, language: &str) -> anyhow::Result<serde_json::Value> {
    let exe = std::env::current_exe().context("this executable, to measure each language in")?;
    let child = tokio::process::Command::new(&exe)
        .args(["bench", "--only", "languages", "--json", "--language", language, "--guests"])
        .arg(&ctx.settings.guests)
        .arg("--work-dir")
        .arg(&ctx.settings.work_dir)
        .arg("--shared-versions")
        .arg(ctx.settings.shared_versions.to_string())
        .arg("--concurrency")
        .arg(ctx.settings.concurrency.to_string())
        .stderr(std::process::Stdio::null())
        .output()
        .await
        .with_context(|| format!("measuring {language}"))?;
    anyhow::ensure!(child.status.success(), "measuring {language} failed ({})", child.status);
    serde_json::from_slice(&child.stdout).context("the child's report")
}

/// The shared host: `--shared-versions` versions of greet-python and greet-js (each with
/// a custom section of its own: new bytes, the same code) as kinds of 30 tenants, on a
/// host whose dispatcher runs throughout and which compiles in a child process as
/// `spindle serve` does, with an artifact cache of its own (so the first version of each
/// language compiles from nothing). `None` when either component is not built.
async fn measure_shared(ctx: &Context) -> anyhow::Result<Option<SharedHost>> {
    let (Ok(python), Ok(js)) = (ctx.guest_bytes("greet-python"), ctx.guest_bytes("greet-js")) else {
        return Ok(None);
    };
    let versions = ctx.settings.shared_versions;
    let tenants = SHARED_TENANTS.min(versions).max(1);
    let cache_dir = ctx.settings.work_dir.join("shared-host-cache");
    let _ = std::fs::remove_dir_all(&cache_dir);
    let compiler = std::env::current_exe().ok();
    let mut scenario = ctx
        .open_with("shared-host", ctx.settings.concurrency, |config| {
            config.sandbox.cache_dir = Some(cache_dir.clone());
            config.sandbox.compiler = compiler;
        })
        .await?;
    scenario.start();
    reset_peak();
    let host = &scenario.host;
    let task = ctx.progress.task(format!("shared host: {versions} versions, {tenants} tenants"), Some(versions as u64));
    let input = br#"{"name": "Ada"}"#;
    let (mut first, mut next) = (Vec::new(), Vec::new());
    let mut deployed = Vec::with_capacity(versions);
    for i in 0..versions {
        let tenant = TenantId(format!("tenant-{:02}", i % tenants));
        // Each tenant in turn, Python versions and JavaScript versions by rounds.
        let (kind, base) = if (i / tenants).is_multiple_of(2) { ("greet-python", &python) } else { ("greet-js", &js) };
        let bytes = with_custom_section(base, format!("spindle-bench-version-{i}").as_bytes());
        let started = Instant::now();
        let (version, _) = host
            .registry
            .deploy(&tenant, kind, &bytes, host.engine.now())
            .await
            .with_context(|| format!("deploying {kind} for {tenant}"))?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        if deployed.iter().any(|(_, k, _)| k == &kind) {
            next.push(ms)
        } else {
            first.push(ms)
        }
        host.engine.submission().submit_many(&tenant, requests(kind, input, 1)).await.context("submitting")?;
        deployed.push((tenant, kind, version.version));
        task.set(i as u64 + 1);
    }
    wait_succeeded(host, versions as i64, &task).await?;
    let deployed_rss_mib = rss_mib();
    // Again on every version, the oldest first: each made current in turn (a rollback)
    // and given a job, then the newest made current again.
    for (tenant, kind, version) in &deployed {
        host.registry.set_current(tenant, kind, *version, host.engine.now()).await?;
        host.engine.submission().submit_many(tenant, requests(kind, input, 1)).await.context("submitting")?;
    }
    let mut newest = std::collections::HashMap::new();
    for (tenant, kind, version) in &deployed {
        newest.insert((tenant, kind), *version);
    }
    for ((tenant, kind), version) in newest {
        host.registry.set_current(tenant, kind, version, host.engine.now()).await?;
    }
    let jobs_succeeded = wait_succeeded(host, 2 * versions as i64, &task).await?;
    let figures = SharedHost {
        versions,
        tenants,
        next_deploy_ms: Summary::of(&mut next),
        first_deploy_ms: first,
        jobs_succeeded,
        deployed_rss_mib,
        rss_mib: rss_mib(),
        rss_split_mib: rss_split_mib(),
        peak_rss_mib: peak_rss_mib(),
        loaded: host.registry.loaded(),
    };
    task.finish(&format!("{:.0} MiB resident", figures.rss_mib.unwrap_or_default()));
    ctx.close(scenario, std::time::Duration::from_secs(5)).await;
    let _ = std::fs::remove_dir_all(&cache_dir);
    Ok(Some(figures))
}

/// Waits until `target` jobs have succeeded, failing if any fails or it takes past ten
/// minutes (a Python or JavaScript version evicted from the LRU loads again in
/// milliseconds from the cache; one compiled afresh takes seconds).
async fn wait_succeeded(host: &spindle::host::Host, target: i64, task: &super::progress::Task) -> anyhow::Result<i64> {
    let started = Instant::now();
    loop {
        let succeeded = count_in_state(host, JobState::Succeeded).await?;
        task.note(format!("{succeeded} of {target} jobs succeeded"));
        if succeeded >= target {
            return Ok(succeeded);
        }
        let failed = count_in_state(host, JobState::Failed).await?;
        anyhow::ensure!(failed == 0, "{failed} greet jobs failed on the shared host");
        anyhow::ensure!(
            started.elapsed() < std::time::Duration::from_secs(600),
            "only {succeeded} of {target} jobs succeeded in ten minutes"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Measures `language` in this process; `None` when its component is not built.
async fn measure_one(ctx: &Context, language: &str) -> anyhow::Result<Option<LanguageFigures>> {
    let kind = format!("greet-{language}");
    let Ok(bytes) = ctx.guest_bytes(&kind) else { return Ok(None) };
    let cache_dir = ctx.settings.work_dir.join(format!("languages-cache-{language}"));
    let _ = std::fs::remove_dir_all(&cache_dir);
    let compiler = std::env::current_exe().ok();
    let config =
        SandboxConfig { cache_dir: Some(cache_dir.clone()), compiler: compiler.clone(), ..SandboxConfig::default() };
    let runtime = Runtime::new(config.clone())?;
    let before = rss_mib();
    let before_split = rss_split_mib();
    let started = Instant::now();
    let loaded = runtime.load(&bytes).await.with_context(|| format!("loading {kind}"))?;
    let deploy_ms = started.elapsed().as_secs_f64() * 1e3;
    let input = compose_input();
    let control = Arc::new(Unsupervised);
    let started = Instant::now();
    expect_complete(&kind, runtime.run_step(&loaded, input.clone(), control.clone()).await.run)?;
    let first_step_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut steady = Vec::with_capacity(STEADY_CALLS);
    for _ in 0..STEADY_CALLS {
        let started = Instant::now();
        expect_complete(&kind, runtime.run_step(&loaded, input.clone(), control.clone()).await.run)?;
        steady.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let resident_mib = rss_mib().zip(before).map(|(after, before)| after - before);
    let split = rss_split_mib().zip(before_split).map(|((own, file), (own0, file0))| (own - own0, file - file0));
    // A next version: new bytes (a custom section), the same code, loaded beside the first.
    let next_bytes = with_custom_section(&bytes, b"spindle-bench-next-version");
    let (before_next, before_next_split) = (rss_mib(), rss_split_mib());
    let started = Instant::now();
    let next = runtime.load(&next_bytes).await.with_context(|| format!("loading {kind}'s next version"))?;
    let next_deploy_ms = started.elapsed().as_secs_f64() * 1e3;
    for _ in 0..=STEADY_CALLS {
        expect_complete(&kind, runtime.run_step(&next, input.clone(), control.clone()).await.run)?;
    }
    let next_resident_mib = rss_mib()
        .zip(before_next)
        .zip(rss_split_mib().zip(before_next_split))
        .map(|((after, before), ((own, file), (own0, file0)))| (after - before, own - own0, file - file0));
    drop(next);
    drop(loaded);
    drop(runtime);
    let mut cache_loads = Vec::with_capacity(CACHE_LOADS);
    for _ in 0..CACHE_LOADS {
        let runtime = Runtime::new(config.clone())?;
        let started = Instant::now();
        let loaded = runtime.load(&bytes).await?;
        cache_loads.push(started.elapsed().as_secs_f64() * 1e3);
        if !loaded.from_cache {
            bail!("{kind} did not load from the warm cache");
        }
    }
    let _ = std::fs::remove_dir_all(&cache_dir);
    Ok(Some(LanguageFigures {
        language: language.to_owned(),
        bytes: bytes.len(),
        deploy_ms,
        cache_load_ms: Summary::of(&mut cache_loads).map_or(0.0, |s| s.p50),
        first_step_ms,
        steady_step_ms: Summary::of(&mut steady).context("no steady calls")?,
        resident_mib,
        resident_own_mib: split.map(|s| s.0),
        resident_file_mib: split.map(|s| s.1),
        next_deploy_ms: Some(next_deploy_ms),
        next_resident_mib,
    }))
}

/// `component` with a custom section `name` appended: other bytes (another digest, so
/// another version to compile and cache), the same code.
fn with_custom_section(component: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = component.to_vec();
    let mut payload = Vec::new();
    leb128(&mut payload, name.len());
    payload.extend_from_slice(name);
    out.push(0); // a custom section
    leb128(&mut out, payload.len());
    out.extend_from_slice(&payload);
    out
}

fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// `compose` of `{"name": "Ada"}`, the greet kind's first step.
fn compose_input() -> StepInput {
    StepInput {
        job_id: "0190a0a0-0000-7000-8000-000000000000".into(),
        step: "compose".into(),
        attempt: 1,
        idempotency_key: "0190a0a0-0000-7000-8000-000000000000/compose".into(),
        payload: br#"{"name": "Ada"}"#.to_vec(),
        prior: Vec::new(),
        cursor: None,
        capabilities: Arc::default(),
        awaited: None,
        ceilings: Default::default(),
    }
}

fn expect_complete(kind: &str, run: StepRun) -> anyhow::Result<()> {
    match run {
        StepRun::Outcome(GuestOutcome::Complete(_)) => Ok(()),
        other => bail!("{kind}'s compose did not complete: {other:?}"),
    }
}
