//! Traces: a host started with `--otlp-endpoint` exports a job's spans over OTLP/HTTP,
//! and a submission's `traceparent` puts them under the caller's trace. The collector
//! here is a stub on 127.0.0.1 that decodes what it is sent.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use spindle::store::Backend;
use spindle_tests::served::Served;

/// The spans a stub collector received, as it received them.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Collector {
    /// Listens on a free loopback port; answers its OTLP endpoint.
    async fn start(&self) -> String {
        let spans = self.spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: Bytes| {
                let spans = spans.clone();
                async move {
                    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP export request");
                    let mut kept = spans.lock().unwrap();
                    for resource in request.resource_spans {
                        for scope in resource.scope_spans {
                            kept.extend(scope.spans);
                        }
                    }
                    ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the collector");
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}")
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes.iter().find(|a| a.key == key).and_then(|a| match a.value.as_ref()?.value.as_ref()? {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_exports_its_spans_under_the_callers_trace() {
    let collector = Collector::default();
    let endpoint = collector.start().await;
    let (store, url, _db) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = Served::start(&url, &["--otlp-endpoint", &endpoint]);
    let token = host.tenant("acme");
    let scripted = spindle_tests::guest_path("scripted");
    let deployed = host.cli(Some(&token), &["deploy", "scripted", scripted.to_str().unwrap()]);
    assert_eq!(deployed.code, 0, "{}", deployed.stderr);

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let submitted = spindle_tests::http_client()
        .post(format!("{}/v1/jobs", host.url))
        .bearer_auth(&token)
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .json(&json!({ "kind": "scripted", "input": { "second": ["retryable", "complete"] } }))
        .send()
        .await
        .expect("submit");
    assert_eq!(submitted.status(), 201);
    let id = submitted.json::<serde_json::Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let waited = host.cli(Some(&token), &["wait", &id, "--json"]);
    assert_eq!(waited.json()["state"], "succeeded", "{}", waited.stdout);
    // A host that stops flushes the spans it still batches.
    let (code, _data) = host.terminate();
    assert_eq!(code, 0);

    let spans = collector.spans.lock().unwrap().clone();
    let ours: Vec<&Span> = spans.iter().filter(|s| hex(&s.trace_id) == trace_id).collect();
    let named = |name: &str| {
        let mut named = ours.iter().filter(|s| s.name == name).copied().collect::<Vec<_>>();
        named.sort_by_key(|s| s.start_time_unix_nano);
        named
    };
    let all: Vec<(&str, String)> = spans.iter().map(|s| (s.name.as_str(), hex(&s.trace_id))).collect();

    let submit = named("submit");
    assert_eq!(submit.len(), 1, "one submission span under the caller's trace: {all:?}");
    assert_eq!(hex(&submit[0].parent_span_id), caller_span, "the submission is the caller's span's child");
    assert_eq!(attribute(submit[0], "job").as_deref(), Some(id.as_str()));
    // Three steps, the second retried once: four claims, four step calls, each with its
    // sandbox call and its commit, all in the caller's trace.
    let (claims, steps, sandboxes, commits) = (named("claim"), named("step"), named("sandbox"), named("commit"));
    assert_eq!((claims.len(), steps.len(), sandboxes.len(), commits.len()), (4, 4, 4, 4), "{all:?}");
    for step in &steps {
        assert_eq!(hex(&step.parent_span_id), caller_span);
        assert_eq!(attribute(step, "job").as_deref(), Some(id.as_str()));
        assert!(attribute(step, "fence").is_some(), "a step span names its fence");
    }
    let step_ids: Vec<String> = steps.iter().map(|s| hex(&s.span_id)).collect();
    for child in sandboxes.iter().chain(&commits) {
        assert!(step_ids.contains(&hex(&child.parent_span_id)), "{} is a step's child", child.name);
    }
    for sandbox in &sandboxes {
        let micros: u64 = attribute(sandbox, "sandbox_us").expect("the sandbox time").parse().unwrap();
        assert!(micros > 0);
    }
    let keys: Vec<String> = claims.iter().filter_map(|c| attribute(c, "step")).collect();
    assert_eq!(keys, ["first", "second", "second", "third"], "the claims, in order");
    assert_eq!(attribute(commits.last().unwrap(), "state").as_deref(), Some("succeeded"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
