//! Steps that make one outbound HTTP call to a server on this machine: what the sandbox
//! and the policy add to a call, and the throughput of such jobs through a whole host.
//!
//! - **bare client**: hyper on the host, one fresh connection and one `GET` per call (as
//!   the sandbox makes them), sequential: the floor any host pays.
//! - **through a step**: the `outbound` test kind calling the same URL once per step
//!   (instantiate, policy checks, resolution, connect, request, response, record),
//!   sequential; the difference from the bare client is the per-call overhead.
//! - **jobs**: `jobs / 4` one-step jobs of that kind, bulk-submitted to a host whose
//!   operator, tenant and deployment allow the server, until all have settled.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use http_body_util::BodyExt;
use serde::Serialize;
use spindle_core::JobState;
use spindle_runtime::outbound::{Capabilities, OperatorPolicy, OutboundConfig, Rules};
use spindle_runtime::{GuestOutcome, Runtime, SandboxConfig, StepInput, StepRun, Unsupervised};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::stats::Summary;
use super::{Context, count_in_state, submit_bulk, wait_settled};
use spindle::capabilities::Deployment;

const WARMUP_CALLS: usize = 200;
const CALLS: usize = 2_000;

/// The section's figures.
#[derive(Clone, Debug, Serialize)]
pub struct OutboundBench {
    /// One `GET` with a fresh connection from a bare hyper client, µs.
    pub bare_call_us: Summary,
    /// One step making that `GET` through the sandbox, µs.
    pub step_call_us: Summary,
    /// `step_call_us.p50 - bare_call_us.p50`: what the sandbox, the policy and the
    /// record add to a call (the no-op step's own cost included).
    pub overhead_us: f64,
    /// Jobs in the end-to-end run.
    pub jobs: usize,
    /// Their throughput, bulk submission to all settled.
    pub jobs_per_sec: f64,
}

/// A server answering every request with `{}`, one request per connection or many.
async fn serve() -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buffer = Vec::with_capacity(1024);
                let mut chunk = [0u8; 1024];
                loop {
                    let Ok(n) = stream.read(&mut chunk).await else { return };
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        buffer.drain(..end + 4);
                        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
                        if stream.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// One `GET` on a fresh connection, the body read whole.
async fn bare_call(addr: SocketAddr) -> anyhow::Result<()> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    let driver = tokio::spawn(connection);
    let request =
        http::Request::get("/").header("host", addr.to_string()).body(http_body_util::Empty::<bytes::Bytes>::new())?;
    let response = sender.send_request(request).await?;
    ensure!(response.status() == 200, "the bench server answered {}", response.status());
    let _ = response.into_body().collect().await?;
    drop(sender);
    let _ = driver.await;
    Ok(())
}

fn rules(addr: SocketAddr) -> anyhow::Result<Rules> {
    Ok(Rules::parse(&[format!("GET http://127.0.0.1:{}/*", addr.port())])?)
}

fn outbound_config(addr: SocketAddr) -> anyhow::Result<OutboundConfig> {
    let operator = OperatorPolicy {
        allow: rules(addr)?,
        block_private: true,
        allow_cidrs: vec!["127.0.0.0/8".parse().context("cidr")?],
    };
    Ok(OutboundConfig { operator, ..OutboundConfig::default() })
}

fn input(addr: SocketAddr) -> Vec<u8> {
    serde_json::json!({ "requests": [{ "method": "GET", "url": format!("http://{addr}/") }] }).to_string().into_bytes()
}

/// Measures the section.
pub async fn measure(ctx: &Context) -> anyhow::Result<OutboundBench> {
    let addr = serve().await?;
    let bytes = ctx.guest_bytes("outbound")?;

    let task = ctx.progress.task("outbound: bare client", Some((WARMUP_CALLS + CALLS) as u64));
    let mut bare = Vec::with_capacity(CALLS);
    for i in 0..WARMUP_CALLS + CALLS {
        let started = Instant::now();
        bare_call(addr).await?;
        if i >= WARMUP_CALLS {
            bare.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    let bare_call_us = Summary::of(&mut bare).context("no samples")?;
    task.finish(&format!("median {:.1} µs", bare_call_us.p50));

    let task = ctx.progress.task("outbound: one call per step", Some((WARMUP_CALLS + CALLS) as u64));
    let runtime = Runtime::new(SandboxConfig { outbound: outbound_config(addr)?, ..SandboxConfig::default() })?;
    let kind = runtime.load(&bytes).await.context("loading outbound")?;
    let capabilities = Arc::new(Capabilities {
        tenant: ctx.tenant.0.clone(),
        tenant_rules: rules(addr)?,
        kind_rules: rules(addr)?,
        ..Capabilities::default()
    });
    let step_input = StepInput {
        job_id: "0190a0a0-0000-7000-8000-000000000000".into(),
        step: "call".into(),
        attempt: 1,
        idempotency_key: "0190a0a0-0000-7000-8000-000000000000/call".into(),
        payload: input(addr),
        prior: Vec::new(),
        cursor: None,
        capabilities,
        awaited: None,
        ceilings: Default::default(),
    };
    let control = Arc::new(Unsupervised);
    let mut through = Vec::with_capacity(CALLS);
    for i in 0..WARMUP_CALLS + CALLS {
        let started = Instant::now();
        let run = runtime.run_step(&kind, step_input.clone(), control.clone()).await.run;
        let us = started.elapsed().as_secs_f64() * 1e6;
        let StepRun::Outcome(GuestOutcome::Complete(output)) = run else { bail!("the outbound step failed: {run:?}") };
        if i == 0 && !String::from_utf8_lossy(&output).contains("\"status\":200") {
            bail!("the outbound step did not reach the server: {}", String::from_utf8_lossy(&output));
        }
        if i >= WARMUP_CALLS {
            through.push(us);
        }
        if i % 200 == 0 {
            task.set(i as u64);
        }
    }
    let step_call_us = Summary::of(&mut through).context("no samples")?;
    task.finish(&format!("median {:.1} µs", step_call_us.p50));

    let jobs = (ctx.settings.jobs / 4).max(1);
    let jobs_per_sec = end_to_end(ctx, addr, &bytes, jobs).await?;
    Ok(OutboundBench {
        overhead_us: step_call_us.p50 - bare_call_us.p50,
        bare_call_us,
        step_call_us,
        jobs,
        jobs_per_sec,
    })
}

/// `jobs` one-call jobs through a host, bulk submission to all settled.
async fn end_to_end(ctx: &Context, addr: SocketAddr, bytes: &[u8], jobs: usize) -> anyhow::Result<f64> {
    let outbound = outbound_config(addr)?;
    let mut scenario =
        ctx.open_with("outbound", ctx.settings.concurrency, move |config| config.sandbox.outbound = outbound).await?;
    let engine = scenario.host.engine.clone();
    engine.tenancy().set_tenant_outbound(&ctx.tenant, Some(rules(addr)?)).await?;
    let deployment = Deployment { allow: rules(addr)?.0, ..Deployment::default() };
    scenario.host.registry.deploy_with(&ctx.tenant, "outbound", bytes, &deployment, engine.now()).await?;
    scenario.start();
    let task = ctx.progress.task(format!("outbound × {jobs}: live"), Some(jobs as u64));
    let started = Instant::now();
    let settled = || engine.counters().steps_settled.load(Ordering::Relaxed);
    submit_bulk(ctx, &engine, "outbound", &input(addr), jobs, &task, settled).await?;
    wait_settled(&engine, jobs as u64, Duration::from_secs(60 + jobs as u64 / 50), &task).await?;
    let secs = started.elapsed().as_secs_f64();
    let succeeded = count_in_state(&scenario.host, JobState::Succeeded).await?;
    ensure!(succeeded == jobs as i64, "{succeeded} of {jobs} outbound jobs succeeded");
    let rate = jobs as f64 / secs;
    task.finish(&format!("{rate:.0} jobs/s"));
    ctx.close(scenario, Duration::from_secs(5)).await;
    Ok(rate)
}
