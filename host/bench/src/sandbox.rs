//! Per-step sandbox overhead: `noop`'s step through [`Runtime::run_step`] in a loop, each
//! call a fresh store, instantiation and call (what every step of every job costs on
//! top of the guest's own work), with the pooling allocator on and off.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, bail};
use serde::Serialize;
use spindle_runtime::{GuestOutcome, Runtime, SandboxConfig, StepInput, StepRun, Unsupervised};

use super::Context;
use super::stats::Summary;

/// Calls not counted (warming caches, the pool's slots).
const WARMUP_CALLS: usize = 500;
/// Calls measured.
const CALLS: usize = 10_000;

/// One configuration's figures.
#[derive(Clone, Debug, Serialize)]
pub struct SandboxOverhead {
    /// Pooling allocator on?
    pub pooling: bool,
    /// Per call (instantiate + call + drop), microseconds.
    pub call_us: Summary,
}

/// Measures with pooling on, then off.
pub async fn measure(ctx: &Context) -> anyhow::Result<Vec<SandboxOverhead>> {
    let bytes = ctx.guest_bytes("noop")?;
    let mut out = Vec::new();
    for pooling in [true, false] {
        let task = ctx.progress.task(
            format!("sandbox: noop step, pooling {}", if pooling { "on" } else { "off" }),
            Some((WARMUP_CALLS + CALLS) as u64),
        );
        let runtime = Runtime::new(SandboxConfig { pooling, cache_dir: None, ..SandboxConfig::default() })?;
        let kind = runtime.load(&bytes).await.context("loading noop")?;
        let input = StepInput {
            job_id: "0190a0a0-0000-7000-8000-000000000000".into(),
            step: "run".into(),
            attempt: 1,
            idempotency_key: "0190a0a0-0000-7000-8000-000000000000/run".into(),
            payload: b"{}".to_vec(),
            prior: Vec::new(),
            cursor: None,
            capabilities: Arc::default(),
            awaited: None,
            ceilings: Default::default(),
        };
        let control = Arc::new(Unsupervised);
        let mut samples = Vec::with_capacity(CALLS);
        for i in 0..WARMUP_CALLS + CALLS {
            let started = Instant::now();
            let run = runtime.run_step(&kind, input.clone(), control.clone()).await.run;
            let us = started.elapsed().as_secs_f64() * 1e6;
            if !matches!(run, StepRun::Outcome(GuestOutcome::Complete(_))) {
                bail!("noop's step did not complete: {run:?}");
            }
            if i >= WARMUP_CALLS {
                samples.push(us);
            }
            if i % 500 == 0 {
                task.set(i as u64);
            }
        }
        let call_us = Summary::of(&mut samples).context("no samples")?;
        task.finish(&format!("median {:.1} µs, mean {:.1} µs", call_us.p50, call_us.mean));
        out.push(SandboxOverhead { pooling, call_us });
    }
    Ok(out)
}
