//! Compile time and cache-load time of each example component: [`Runtime::load`] with no
//! cache (validate, compile, link, describe), and with a warm `cache_dir` (validate,
//! deserialize the compiled artifact, link, describe). The median of a few loads each,
//! each load on a fresh runtime.

use std::time::Instant;

use anyhow::{Context as _, ensure};
use serde::Serialize;
use spindle_runtime::{Runtime, SandboxConfig};

use super::Context;

/// The example kinds, as `cargo xtask guests` names them.
pub const EXAMPLES: &[&str] =
    &["noop", "noop3", "scripted", "payment-saga", "webhook-delivery", "csv-import", "thumbnail"];

/// Loads measured per configuration.
const REPEATS: usize = 3;

/// One component's figures.
#[derive(Clone, Debug, Serialize)]
pub struct CompileTime {
    /// The kind.
    pub kind: String,
    /// The component's size in bytes.
    pub bytes: usize,
    /// Load without a cache, milliseconds (median).
    pub compile_ms: f64,
    /// Load from a warm cache, milliseconds (median).
    pub cache_load_ms: f64,
}

/// Measures every example component.
pub async fn measure(ctx: &Context) -> anyhow::Result<Vec<CompileTime>> {
    let task = ctx.progress.task("compile: example components", Some(EXAMPLES.len() as u64));
    let cache_dir = ctx.settings.work_dir.join("compile-cache");
    let mut out = Vec::new();
    for (i, kind) in EXAMPLES.iter().enumerate() {
        task.note((*kind).to_owned());
        let bytes = ctx.guest_bytes(kind)?;
        let mut compile = Vec::new();
        for _ in 0..REPEATS {
            let runtime = Runtime::new(SandboxConfig { cache_dir: None, ..SandboxConfig::default() })?;
            let started = Instant::now();
            runtime.load(&bytes).await.with_context(|| format!("compiling {kind}"))?;
            compile.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        let cached = SandboxConfig { cache_dir: Some(cache_dir.clone()), ..SandboxConfig::default() };
        // Warm the cache once, then load from it.
        Runtime::new(cached.clone())?.load(&bytes).await?;
        let mut cache_load = Vec::new();
        for _ in 0..REPEATS {
            let runtime = Runtime::new(cached.clone())?;
            let started = Instant::now();
            let loaded = runtime.load(&bytes).await?;
            cache_load.push(started.elapsed().as_secs_f64() * 1000.0);
            ensure!(loaded.from_cache, "{kind} did not load from the warm cache");
        }
        out.push(CompileTime {
            kind: (*kind).into(),
            bytes: bytes.len(),
            compile_ms: median(compile),
            cache_load_ms: median(cache_load),
        });
        task.set(i as u64 + 1);
    }
    let _ = std::fs::remove_dir_all(&cache_dir);
    task.finish(&format!("{} components", out.len()));
    Ok(out)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
