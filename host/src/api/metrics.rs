//! Prometheus metrics (text exposition format), for the operator token.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::views::ErrorBody;
use super::{ApiError, ApiState, OperatorAuth};
use crate::engine::STEP_BUCKETS;

fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One counter of a usage row.
type UsageField = fn(&crate::engine::Usage) -> u64;

/// Usage per tenant and kind across every host (as stored: up to a second behind), and
/// the steps running now.
async fn write_usage(out: &mut String, engine: &crate::engine::Engine) -> Result<(), ApiError> {
    let usage = engine.capacity().usage(None).await?;
    let metrics: [(&str, &str, UsageField); 5] = [
        ("spindle_tenant_steps_total", "Steps run (every attempt)", |u| u.steps),
        ("spindle_tenant_faults_total", "Steps that faulted in the sandbox or ran out of time", |u| u.faults),
        ("spindle_tenant_sandbox_microseconds_total", "Time inside the sandbox", |u| u.sandbox_micros),
        ("spindle_tenant_wall_microseconds_total", "Time from claim to outcome", |u| u.wall_micros),
        ("spindle_tenant_outbound_requests_total", "Outbound requests sent", |u| u.outbound_requests),
    ];
    for (name, help, value) in metrics {
        let _ = writeln!(out, "# HELP {name} {help}, by tenant and kind.\n# TYPE {name} counter");
        for u in &usage {
            let _ =
                writeln!(out, "{name}{{tenant=\"{}\",kind=\"{}\"}} {}", label(&u.tenant.0), label(&u.kind), value(u));
        }
    }
    let _ = writeln!(
        out,
        "# HELP spindle_breaker_state This host's fault breakers by tenant, kind and version: 1 for the state it is in.\n# TYPE spindle_breaker_state gauge"
    );
    for (tenant, kind, version, state) in engine.capacity().breakers().all() {
        for s in ["closed", "open", "half_open"] {
            let _ = writeln!(
                out,
                "spindle_breaker_state{{tenant=\"{}\",kind=\"{}\",version=\"{version}\",state=\"{s}\"}} {}",
                label(&tenant.0),
                label(&kind),
                u8::from(state.as_str() == s)
            );
        }
    }
    let live = engine.capacity().live_counts(None).await?;
    let _ = writeln!(
        out,
        "# HELP spindle_tenant_running Steps running now, by tenant and kind.\n# TYPE spindle_tenant_running gauge"
    );
    for l in &live {
        let _ = writeln!(
            out,
            "spindle_tenant_running{{tenant=\"{}\",kind=\"{}\"}} {}",
            label(&l.tenant.0),
            label(&l.kind),
            l.running
        );
    }
    Ok(())
}

/// Prometheus metrics
///
/// Operator token only. Jobs by tenant, kind and state; queue depth per kind; step latency on
/// this host; sandbox faults and alerts across hosts.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "metrics",
    responses(
        (status = 200, description = "The text exposition format", body = String, content_type = "text/plain"),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the operator token", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn render(State(state): State<ApiState>, _: OperatorAuth) -> Result<impl IntoResponse, ApiError> {
    let engine = &state.host.engine;
    let counters = state.host.engine.counters();
    let mut out = String::new();
    let _ = writeln!(out, "# HELP spindle_jobs Open jobs by tenant, kind and state.\n# TYPE spindle_jobs gauge");
    let depths = engine.capacity().depths().await?;
    for d in &depths {
        let _ = writeln!(
            out,
            "spindle_jobs{{tenant=\"{}\",kind=\"{}\",state=\"{}\"}} {}",
            label(&d.tenant.0),
            label(&d.kind),
            d.state,
            d.count
        );
    }
    let _ = writeln!(
        out,
        "# HELP spindle_queue_depth Jobs waiting to run (pending) by tenant and kind.\n# TYPE spindle_queue_depth gauge"
    );
    for d in depths.iter().filter(|d| d.state == "pending") {
        let _ = writeln!(
            out,
            "spindle_queue_depth{{tenant=\"{}\",kind=\"{}\"}} {}",
            label(&d.tenant.0),
            label(&d.kind),
            d.count
        );
    }
    write_usage(&mut out, engine).await?;
    let gate = engine.gate().status();
    let _ = writeln!(
        out,
        "# HELP spindle_storage_format The storage format this host writes (0 while the gate refuses it).\n\
         # TYPE spindle_storage_format gauge\nspindle_storage_format {}\n\
         # HELP spindle_storage_format_refusing 1 while this host's build cannot read or write the database's \
         storage format (it claims nothing and writes no job; /v1/health says why).\n\
         # TYPE spindle_storage_format_refusing gauge\nspindle_storage_format_refusing {}\n\
         # HELP spindle_host_draining 1 while this host finishes what it holds and claims nothing new.\n\
         # TYPE spindle_host_draining gauge\nspindle_host_draining {}\n\
         # HELP spindle_host_steps_running Steps this host is running now (0: a draining host is empty).\n\
         # TYPE spindle_host_steps_running gauge\nspindle_host_steps_running {}",
        gate.writing.unwrap_or(0),
        u8::from(gate.refusal.is_some()),
        u8::from(engine.config().draining),
        engine.counters().steps_running.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "# HELP spindle_outbound_requests_total Outbound requests from steps on this host by tenant, kind, \
         destination host and outcome (ok, client-error, server-error, denied, error).\n\
         # TYPE spindle_outbound_requests_total counter"
    );
    for (key, count) in state.host.registry.runtime().outbound_metrics() {
        let _ = writeln!(
            out,
            "spindle_outbound_requests_total{{tenant=\"{}\",kind=\"{}\",host=\"{}\",outcome=\"{}\"}} {count}",
            label(&key.tenant),
            label(&key.kind),
            label(&key.host),
            key.outcome
        );
    }
    let _ = writeln!(
        out,
        "# HELP spindle_sandbox_faults_total Guest faults by code, all hosts.\n# TYPE spindle_sandbox_faults_total counter"
    );
    let _ = writeln!(
        out,
        "# HELP spindle_alerts_total Operational alerts by code, all hosts.\n# TYPE spindle_alerts_total counter"
    );
    for (name, value) in engine.capacity().shared_counters().await? {
        if let Some(code) = name.strip_prefix("fault.") {
            let _ = writeln!(out, "spindle_sandbox_faults_total{{code=\"{}\"}} {value}", label(code));
        } else if let Some(code) = name.strip_prefix("alert.") {
            let _ = writeln!(out, "spindle_alerts_total{{code=\"{}\"}} {value}", label(code));
        }
    }
    let _ = writeln!(
        out,
        "# HELP spindle_step_duration_seconds Step call durations on this host.\n# TYPE spindle_step_duration_seconds histogram"
    );
    for (bound, bucket) in STEP_BUCKETS.iter().zip(&counters.step_buckets) {
        let le = if bound.is_infinite() { "+Inf".to_owned() } else { bound.to_string() };
        let _ = writeln!(out, "spindle_step_duration_seconds_bucket{{le=\"{le}\"}} {}", bucket.load(Ordering::Relaxed));
    }
    let sum = counters.step_micros.load(Ordering::Relaxed) as f64 / 1e6;
    let _ = writeln!(out, "spindle_step_duration_seconds_sum {sum}");
    let _ = writeln!(out, "spindle_step_duration_seconds_count {}", counters.step_calls.load(Ordering::Relaxed));
    for (name, help, value) in [
        ("spindle_steps_settled_total", "Step outcomes committed by this host.", &counters.steps_settled),
        (
            "spindle_write_conflicts_total",
            "Writes that lost a version race and were derived again.",
            &counters.conflicts,
        ),
        ("spindle_stale_commits_total", "Outcomes refused because their claim was stale.", &counters.stale_commits),
        (
            "spindle_claims_lapsed_before_run_total",
            "Claims that had lapsed by the time their step was to run, and were not run.",
            &counters.lapsed_before_run,
        ),
        ("spindle_claim_transactions_total", "Claim transactions run by this host.", &counters.claims),
        ("spindle_claimed_jobs_total", "Jobs those claims took.", &counters.claimed_jobs),
        ("spindle_claim_microseconds_total", "Time spent in claim transactions.", &counters.claim_micros),
        (
            "spindle_group_commits_total",
            "Group-commit transactions of step outcomes and heartbeats.",
            &counters.flushes,
        ),
        ("spindle_group_commit_writes_total", "Writes those group commits carried.", &counters.flushed_writes),
        ("spindle_group_commit_microseconds_total", "Time spent in group commits.", &counters.flush_micros),
        ("spindle_group_commit_claims_total", "Next jobs claimed inside group commits.", &counters.claimed_in_commits),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", value.load(Ordering::Relaxed));
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out))
}
