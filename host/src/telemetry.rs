//! Traces: with an OTLP endpoint (`spindle serve --otlp-endpoint http://HOST:4318`), the
//! host's spans — a job's submission, its claim, each step call with its sandbox time, the
//! commit of its outcome — are exported over OTLP/HTTP (protobuf) with the well-kept
//! `opentelemetry-otlp` and `tracing-opentelemetry` crates. A submission carrying a W3C
//! `traceparent` header links its job's spans to the caller's trace: the header is kept
//! with the job, so steps run later, on any host, join the same trace.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Whether spans are exported (the engine keeps and reads jobs' trace parents only then).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The process's tracing: log lines to stderr, and spans to `otlp` when given. Flushes
/// and stops the exporter when dropped.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Sets up the process's tracing, logging at `default_level` unless `SPINDLE_LOG` says
/// otherwise, exporting spans to `otlp` (`http://HOST:4318`, or with `/v1/traces`) when given.
///
/// Call it inside the tokio runtime the process runs on (`Runtime::enter`): the spans go
/// out in batches from a task on it, through the async HTTP client, and the returned
/// guard, dropped outside the runtime's own threads before the runtime is, flushes them.
pub fn init(default_level: &str, otlp: Option<&str>) -> anyhow::Result<Telemetry> {
    use tracing_subscriber::filter::FilterExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPINDLE_LOG").unwrap_or_else(|_| default_level.into());
    // wasmtime-wasi logs what a guest writes to its streams at debug and trace, before
    // Spindle scrubs it of secret values: those events never reach the log, whatever
    // `SPINDLE_LOG` asks (the guest's lines are logged scrubbed, as `spindle::guest`).
    let guest_streams = tracing_subscriber::filter::filter_fn(|meta| {
        !(meta.target().starts_with("wasmtime_wasi") && *meta.level() > tracing::Level::INFO)
    });
    let filter = filter.and(guest_streams);
    let Some(endpoint) = otlp else {
        let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter);
        tracing_subscriber::registry().with(fmt).init();
        return Ok(Telemetry { provider: None });
    };
    let endpoint = if endpoint.ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    };
    spindle_runtime::use_ring_for_tls();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| anyhow::anyhow!("the OTLP exporter: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder().with_service_name("spindle").build();
    let batches = BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
    let provider = SdkTracerProvider::builder().with_span_processor(batches).with_resource(resource).build();
    let tracer = provider.tracer("spindle");
    // The claim span is written with its own start (the claim's transaction) through the
    // OpenTelemetry API; the other spans go through `tracing`.
    opentelemetry::global::set_tracer_provider(provider.clone());
    // Spans go out at info and above whatever the log filter says; the log lines keep it.
    let spans = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::Targets::new().with_target("spindle::trace", tracing::Level::INFO));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter);
    tracing_subscriber::registry().with(fmt).with(spans).init();
    ENABLED.store(true, Ordering::Relaxed);
    Ok(Telemetry { provider: Some(provider) })
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: the OTLP exporter did not shut down cleanly: {e}");
        }
    }
}

/// Makes `span` a child of the W3C `traceparent` (a caller's span), if it is one.
pub fn set_parent(span: &tracing::Span, traceparent: &str) {
    let carrier = std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(context);
}

/// The span of `job`'s claim, from `start` (the claim's transaction) to now, under
/// `traceparent`: written after the fact, as the claim covers many jobs at once.
pub fn claim_span(traceparent: Option<&str>, start: std::time::SystemTime, attributes: Vec<opentelemetry::KeyValue>) {
    use opentelemetry::trace::{Span as _, Tracer as _};
    let parent = match traceparent {
        Some(traceparent) => {
            let carrier = std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
            TraceContextPropagator::new().extract(&carrier)
        }
        None => opentelemetry::Context::new(),
    };
    let now = std::time::SystemTime::now();
    let tracer = opentelemetry::global::tracer("spindle");
    let mut span = tracer
        .span_builder("claim")
        .with_start_time(start.min(now))
        .with_attributes(attributes)
        .start_with_context(&tracer, &parent);
    span.end_with_timestamp(now);
}

/// Whether `value` is a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), so that nothing
/// else is kept with a job.
pub fn is_traceparent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |s: &str, len| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    parts.len() == 4 && hex(parts[0], 2) && hex(parts[1], 32) && hex(parts[2], 16) && hex(parts[3], 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_traceparent_is_one() {
        assert!(is_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        for bad in ["", "00-4bf92f35-00f067aa0ba902b7-01", "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"] {
            assert!(!is_traceparent(bad), "{bad}");
        }
    }
}
