//! Many clients submitting one job at a time to one tenant, as an API under load sees
//! them (the throughput sections submit 1,000 jobs per transaction instead).
//!
//! [`CLIENTS`] tasks each submit their share of the jobs one `submit` call after the
//! other, host stopped, on a fresh database; the figures are the jobs per second over all
//! of them and each call's time. What this measures is how far one tenant's concurrent
//! submissions commit side by side (the server groups their commits) or wait for each
//! other (a row every submission of the tenant writes, held until it commits). A second
//! round gives each job an idempotency key of its own: what looking keys up costs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

use super::stats::Summary;
use super::{Context, requests};
use spindle::engine::Engine;
use spindle::store::TenantId;

/// Submitting tasks at once.
pub const CLIENTS: usize = 64;

/// The section's figures.
#[derive(Clone, Debug, Serialize)]
pub struct ConcurrentSubmit {
    /// Tasks submitting at once.
    pub clients: usize,
    /// Jobs submitted in all (one per call).
    pub jobs: usize,
    /// Jobs per second, first call to last commit.
    pub jobs_per_sec: f64,
    /// One call's time, ms.
    pub call_ms: Summary,
    /// The same, each job with an idempotency key of its own (the submission looks its
    /// key up before inserting): jobs per second.
    pub keyed_jobs_per_sec: f64,
    /// One keyed call's time, ms.
    pub keyed_call_ms: Summary,
}

/// Measures [`CLIENTS`] tasks submitting a quarter of the settings' jobs, one per call,
/// then as many again with idempotency keys.
pub async fn measure(ctx: &Context) -> anyhow::Result<ConcurrentSubmit> {
    let jobs = (ctx.settings.jobs / 4).max(CLIENTS);
    let per_client = jobs / CLIENTS;
    let jobs = per_client * CLIENTS;
    let task = ctx.progress.task(format!("{CLIENTS} clients × {per_client} single submissions, then keyed"), None);
    let scenario = ctx.open("concurrent-submit", ctx.settings.concurrency).await?;
    ctx.deploy(&scenario, "noop").await?;
    let engine = scenario.host.engine.clone();
    let tenant = Arc::new(ctx.tenant.clone());
    let (jobs_per_sec, call_ms) = round(&engine, &tenant, per_client, false).await?;
    let (keyed_jobs_per_sec, keyed_call_ms) = round(&engine, &tenant, per_client, true).await?;
    task.finish(&format!(
        "{jobs_per_sec:.0} jobs/s, a call p50 {:.2} ms, p99 {:.2} ms; keyed {keyed_jobs_per_sec:.0} jobs/s",
        call_ms.p50, call_ms.p99
    ));
    ctx.close(scenario, Duration::ZERO).await;
    Ok(ConcurrentSubmit { clients: CLIENTS, jobs, jobs_per_sec, call_ms, keyed_jobs_per_sec, keyed_call_ms })
}

/// [`CLIENTS`] tasks each submitting `per_client` jobs one call at a time (with
/// `keyed`, each job under a key no other job has): jobs per second and each call's time.
async fn round(
    engine: &Arc<Engine>,
    tenant: &Arc<TenantId>,
    per_client: usize,
    keyed: bool,
) -> anyhow::Result<(f64, Summary)> {
    let started = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..CLIENTS {
        let (engine, tenant) = (engine.clone(), tenant.clone());
        clients.spawn(async move {
            let mut calls = Vec::with_capacity(per_client);
            for (i, mut request) in requests("noop", b"{}", per_client).into_iter().enumerate() {
                if keyed {
                    request.idempotency_key = Some(format!("client-{client}-job-{i}"));
                }
                let call = Instant::now();
                engine.submission().submit(&tenant, request).await?;
                calls.push(call.elapsed().as_secs_f64() * 1000.0);
            }
            anyhow::Ok(calls)
        });
    }
    let mut calls = Vec::with_capacity(per_client * CLIENTS);
    while let Some(done) = clients.join_next().await {
        calls.extend(done.context("a submitting task panicked")?.context("submitting")?);
    }
    let jobs_per_sec = calls.len() as f64 / started.elapsed().as_secs_f64();
    Ok((jobs_per_sec, Summary::of(&mut calls).context("no submissions")?))
}
