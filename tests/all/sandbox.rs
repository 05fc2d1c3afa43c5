//! The sandbox through real components: the examples' outcomes step by step, hostile
//! guests stopped with the right typed fault while the host keeps serving, and upload
//! validation.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use spindle_runtime::{
    GuestOutcome, HeartbeatReply, Hook, HookRun, JobSummary, LoadError, Partial, SandboxConfig, SandboxFault,
    StepControl, StepRun, Unsupervised,
};
use spindle_tests::{guest, input, json, load, runtime, test_sandbox};

fn free() -> Arc<dyn StepControl> {
    Arc::new(Unsupervised)
}

fn complete(run: StepRun) -> serde_json::Value {
    match run {
        StepRun::Outcome(GuestOutcome::Complete(out)) => json(&out),
        other => panic!("expected complete, got {other:?}"),
    }
}

fn fault(run: StepRun) -> SandboxFault {
    match run {
        StepRun::Fault { fault, .. } => fault,
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_examples_describe_themselves() {
    let rt = runtime(test_sandbox());
    for (name, steps) in [
        ("csv-import", vec!["validate", "import", "summarise"]),
        ("payment-saga", vec!["authorise", "capture", "receipt"]),
        ("thumbnail", vec!["render", "resize", "encode"]),
        ("noop", vec!["run"]),
        ("noop3", vec!["one", "two", "three"]),
        ("scripted", vec!["first", "second", "third"]),
    ] {
        let kind = load(&rt, name).await;
        assert_eq!(kind.spec.name, name);
        let keys: Vec<&str> = kind.spec.steps.iter().map(|s| s.key.as_str()).collect();
        if name != "noop3" {
            assert_eq!(keys, steps, "{name}");
        } else {
            assert_eq!(keys.len(), 3);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn csv_import_works_through_a_large_input_in_checkpointed_slices() {
    let rt = runtime(test_sandbox());
    let kind = load(&rt, "csv-import").await;
    let payload = json!({"generate_rows": 10_000, "slice": 1_000});
    let validated = complete(rt.run_step(&kind, input("validate", 1, payload.clone()), free()).await.run);
    let validated = ("validate".to_owned(), serde_json::to_vec(&validated).unwrap());
    let mut step = input("import", 1, payload.clone());
    step.prior = vec![validated.clone()];
    let mut calls = 0;
    let import = loop {
        calls += 1;
        match rt.run_step(&kind, step.clone(), free()).await.run {
            StepRun::Outcome(GuestOutcome::More { cursor, done, total }) => {
                assert_eq!(total, Some(10_000));
                assert_eq!(done, calls * 1_000);
                step.cursor = Some(cursor);
            }
            StepRun::Outcome(GuestOutcome::Complete(out)) => break json(&out),
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(calls, 10, "one call per slice");
    assert_eq!(import["rows"].as_u64().unwrap() + import["rejected"].as_u64().unwrap(), 10_000);
    assert!(import["rejected"].as_u64().unwrap() > 0, "generated rows include unparsable amounts");
    let mut summarise = input("summarise", 1, payload);
    summarise.prior = vec![validated, ("import".into(), serde_json::to_vec(&import).unwrap())];
    complete(rt.run_step(&kind, summarise, free()).await.run);

    let bad = json!({"csv": "id,label\n1,x\n"});
    match rt.run_step(&kind, input("validate", 1, bad), free()).await.run {
        StepRun::Outcome(GuestOutcome::Refused { code, .. }) => assert_eq!(code, "bad-header"),
        other => panic!("expected refused bad-header, got {other:?}"),
    }
}

/// `payment-saga` against a payment service on 127.0.0.1: a declined card is refused, a
/// capture the service answers 503 twice is retried and then completes, and the failure
/// effect voids the authorisation through the same service, with the deployment's
/// settings and rules.
#[tokio::test(flavor = "multi_thread")]
async fn payment_saga_refuses_retries_and_runs_its_failure_effect() {
    use spindle_runtime::outbound::{Capabilities, OperatorPolicy, OutboundConfig, Rules};
    use spindle_tests::http::{Reply, TestServer};
    let captures = std::sync::atomic::AtomicUsize::new(0);
    let server = TestServer::start(move |seen, _| match seen.target.as_str() {
        "/authorisations" if String::from_utf8_lossy(&seen.body).contains("4000000000000002") => {
            Reply::Answer(402, br#"{"error": "the card was declined"}"#.to_vec())
        }
        "/authorisations" => Reply::Answer(201, br#"{"id": "auth_1"}"#.to_vec()),
        "/captures" if captures.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 => {
            Reply::Answer(503, b"{}".to_vec())
        }
        "/captures" => Reply::Answer(200, br#"{"id": "cap_1"}"#.to_vec()),
        "/voids" => Reply::Answer(200, b"{}".to_vec()),
        _ => Reply::Answer(404, b"{}".to_vec()),
    })
    .await;
    let rules = Rules::parse(&[format!("POST http://127.0.0.1:{}/*", server.addr.port())]).unwrap();
    let operator =
        OperatorPolicy { allow: rules.clone(), block_private: true, allow_cidrs: vec!["127.0.0.0/8".parse().unwrap()] };
    let rt =
        runtime(SandboxConfig { outbound: OutboundConfig { operator, ..OutboundConfig::default() }, ..test_sandbox() });
    let capabilities = std::sync::Arc::new(Capabilities {
        tenant: "acme".into(),
        tenant_rules: rules.clone(),
        kind_rules: rules,
        settings: [("payments_url".to_owned(), server.url(""))].into(),
        ..Capabilities::default()
    });
    let with = |mut step: spindle_runtime::StepInput| {
        step.capabilities = capabilities.clone();
        step
    };
    let kind = load(&rt, "payment-saga").await;
    assert!(kind.spec.has_failure_effect && kind.spec.notifies_on_success);
    let declined = json!({"account": "acct-1", "amount_cents": 1200, "card": "4000000000000002"});
    match rt.run_step(&kind, with(input("authorise", 1, declined.clone())), free()).await.run {
        StepRun::Outcome(GuestOutcome::Refused { code, .. }) => assert_eq!(code, "card-declined"),
        other => panic!("expected card-declined, got {other:?}"),
    }
    let payment = json!({"account": "acct-1", "amount_cents": 1200, "card": "4242424242424242"});
    let auth = complete(rt.run_step(&kind, with(input("authorise", 1, payment.clone())), free()).await.run);
    for attempt in 1..=2 {
        let mut capture = with(input("capture", attempt, payment.clone()));
        capture.prior = vec![("authorise".into(), serde_json::to_vec(&auth).unwrap())];
        match rt.run_step(&kind, capture, free()).await.run {
            StepRun::Outcome(GuestOutcome::Retryable { code, .. }) => assert_eq!(code, "processor-unavailable"),
            other => panic!("attempt {attempt}: expected retryable, got {other:?}"),
        }
    }
    let mut capture = with(input("capture", 3, payment.clone()));
    capture.prior = vec![("authorise".into(), serde_json::to_vec(&auth).unwrap())];
    let captured = complete(rt.run_step(&kind, capture, free()).await.run);
    let mut receipt = with(input("receipt", 1, payment.clone()));
    receipt.prior = vec![
        ("authorise".into(), serde_json::to_vec(&auth).unwrap()),
        ("capture".into(), serde_json::to_vec(&captured).unwrap()),
    ];
    complete(rt.run_step(&kind, receipt, free()).await.run);

    let summary = JobSummary {
        job_id: "j".into(),
        payload: serde_json::to_vec(&payment).unwrap(),
        outputs: vec![("authorise".into(), serde_json::to_vec(&auth).unwrap())],
        failure: Some(("payment-rejected-400".into(), "rejected".into())),
    };
    let recording = std::sync::Arc::new(spindle_runtime::Recording::default());
    assert_eq!(
        rt.run_hook(&kind, Hook::OnFailure, summary, capabilities.clone(), recording.clone()).await,
        HookRun::Done
    );
    let calls = recording.0.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "the hook's request is handed over to be recorded");
    assert_eq!((calls[0].path.as_str(), calls[0].status), ("/voids", Some(200)));
    let voids: Vec<_> = server.seen().into_iter().filter(|s| s.target == "/voids").collect();
    assert_eq!(voids.len(), 1, "the failure effect voided the authorisation");
    assert_eq!(voids[0].header("idempotency-key"), Some("j/on-failure:1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn thumbnail_renders_resizes_and_encodes() {
    let rt = runtime(test_sandbox());
    let kind = load(&rt, "thumbnail").await;
    let payload = json!({"width": 640, "height": 480, "max_edge": 64});
    let rendered = complete(rt.run_step(&kind, input("render", 1, payload.clone()), free()).await.run);
    let mut resize = input("resize", 1, payload.clone());
    resize.prior = vec![("render".into(), serde_json::to_vec(&rendered).unwrap())];
    let resized = complete(rt.run_step(&kind, resize, free()).await.run);
    let mut encode = input("encode", 1, payload);
    encode.prior = vec![
        ("render".into(), serde_json::to_vec(&rendered).unwrap()),
        ("resize".into(), serde_json::to_vec(&resized).unwrap()),
    ];
    let encoded = complete(rt.run_step(&kind, encode, free()).await.run);
    assert!(encoded.to_string().contains("64"), "a 64-pixel edge is reported: {encoded}");
}

fn hostile_config() -> SandboxConfig {
    SandboxConfig {
        step_timeout: Duration::from_secs(2),
        max_memory_bytes: 160 << 20,
        max_output_bytes: 1 << 20,
        max_stdio_bytes: 4 << 10,
        ..test_sandbox()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_loop_is_stopped_at_the_deadline_while_other_calls_are_served() {
    let config = hostile_config();
    let timeout = config.step_timeout;
    let rt = runtime(config);
    let kind = Arc::new(load(&rt, "hostile").await);
    let spin_done = Arc::new(AtomicBool::new(false));
    let spin = {
        let (rt, kind, done) = (rt.clone(), kind.clone(), spin_done.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let run = rt.run_step(&kind, input("spin", 1, json!({})), Arc::new(Unsupervised)).await.run;
            done.store(true, Ordering::SeqCst);
            (run, started.elapsed())
        })
    };
    // While the loop spins, other calls are served (the loop yields on every epoch tick).
    for _ in 0..20 {
        complete(rt.run_step(&kind, input("ok", 1, json!({})), free()).await.run);
    }
    assert!(!spin_done.load(Ordering::SeqCst), "the spinning step ended before the other calls were served");
    let (run, elapsed) = spin.await.unwrap();
    assert_eq!(fault(run), SandboxFault::Deadline);
    assert!(elapsed < timeout + Duration::from_secs(5), "stopped after {elapsed:?}, deadline {timeout:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_guests_get_typed_faults_and_the_host_keeps_serving() {
    // Each fault here is told by its cause, not by time: the deadline only has to stop a
    // runaway. With two seconds, a step expected to complete came back a fault once while
    // the whole suite shared two cores (the heaviest is the 20 MiB stdout flood, some
    // 20,000 writes through the unoptimised test build's host).
    let rt = runtime(SandboxConfig { step_timeout: Duration::from_secs(20), ..hostile_config() });
    let kind = load(&rt, "hostile").await;
    for (step, expected) in [
        ("alloc", SandboxFault::MemoryLimit),
        ("recurse-native", SandboxFault::StackOverflow),
        ("recurse", SandboxFault::OutOfBounds),
        ("panic", SandboxFault::Panic),
        ("huge-output", SandboxFault::OutputTooLarge { bytes: 64 << 20, cap: 1 << 20 }),
    ] {
        assert_eq!(fault(rt.run_step(&kind, input(step, 1, json!({})), free()).await.run), expected, "{step}");
        complete(rt.run_step(&kind, input("ok", 1, json!({})), free()).await.run);
    }
    // A flood of output is captured up to the cap; the step itself completes.
    complete(rt.run_step(&kind, input("stdout-flood", 1, json!({})), free()).await.run);
}

/// Every step receives all earlier steps' outputs, so a job of 64 steps with 4 MiB outputs
/// handed each call up to 256 MiB. The total a job's outputs may reach is capped (16 MiB by
/// default): the output that would pass it is a typed fault, and each call copies at most
/// that much.
#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_outputs_together_are_capped() {
    let rt = runtime(test_sandbox());
    let kind = load(&rt, "hostile").await;
    let with_prior = |outputs: usize| {
        let mut call = input("ok", 1, json!({}));
        call.prior = (0..outputs).map(|n| (format!("s{n}"), vec![b'x'; 4 << 20])).collect();
        call
    };
    complete(rt.run_step(&kind, with_prior(3), free()).await.run);
    let over = fault(rt.run_step(&kind, with_prior(4), free()).await.run);
    assert_eq!(over.code(), "sandbox.job-outputs-too-large", "{over}");
}

#[tokio::test(flavor = "multi_thread")]
async fn files_sockets_and_the_environment_are_out_of_reach() {
    let rt = runtime(hostile_config());
    let kind = load(&rt, "hostile").await;
    for step in ["read-file", "write-file", "socket", "env"] {
        let out = complete(rt.run_step(&kind, input(step, 1, json!({})), free()).await.run);
        assert_eq!(out["denied"], json!(true), "{step}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fuel_bounds_instructions_when_configured() {
    let rt = runtime(SandboxConfig { fuel: Some(50_000_000), step_timeout: Duration::from_secs(20), ..test_sandbox() });
    let kind = load(&rt, "hostile").await;
    assert_eq!(fault(rt.run_step(&kind, input("spin", 1, json!({})), free()).await.run), SandboxFault::OutOfFuel);
    complete(rt.run_step(&kind, input("ok", 1, json!({})), free()).await.run);
}

/// Answers `proceed` a few times, then `stop-cancelled`.
struct CancelAfter(AtomicU32);

impl StepControl for CancelAfter {
    fn heartbeat(&self, _: Option<Partial>) -> std::pin::Pin<Box<dyn Future<Output = HeartbeatReply> + Send + '_>> {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { if n < 3 { HeartbeatReply::Proceed } else { HeartbeatReply::StopCancelled } })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_step_stops_when_its_heartbeat_says_so() {
    let rt = runtime(test_sandbox());
    let kind = load(&rt, "scripted").await;
    let control = Arc::new(CancelAfter(AtomicU32::new(0)));
    let run = rt.run_step(&kind, input("first", 1, json!({"first": "wait-for-stop"})), control.clone()).await.run;
    match run {
        StepRun::Outcome(GuestOutcome::Retryable { code, .. }) => assert_eq!(code, "stopped"),
        other => panic!("expected the step to stop, got {other:?}"),
    }
    assert_eq!(control.0.load(Ordering::SeqCst), 4, "three proceeds, then the stop");
}

#[tokio::test(flavor = "multi_thread")]
async fn uploads_are_rejected_with_distinct_typed_errors() {
    let rt = runtime(SandboxConfig { max_component_bytes: 4 << 20, ..test_sandbox() });
    let noop = guest("noop");
    let mut codes = Vec::new();
    let other_world = rt.load(&guest("other-world")).await.unwrap_err();
    assert!(matches!(other_world, LoadError::WrongWorld(_)), "{other_world}");
    codes.push(other_world.code());
    let core = rt.load(b"\0asm\x01\0\0\0").await.unwrap_err();
    assert!(matches!(core, LoadError::CoreModule), "{core}");
    codes.push(core.code());
    let truncated = rt.load(&noop[..noop.len() / 2]).await.unwrap_err();
    assert!(matches!(truncated, LoadError::Malformed(_)), "{truncated}");
    codes.push(truncated.code());
    let oversized = rt.load(&vec![0u8; (4 << 20) + 1]).await.unwrap_err();
    assert!(matches!(oversized, LoadError::TooLarge { .. }), "{oversized}");
    codes.push(oversized.code());
    let garbage = rt.load(b"#!/bin/sh\necho hi\n").await.unwrap_err();
    assert!(matches!(garbage, LoadError::NotWasm), "{garbage}");
    codes.push(garbage.code());
    let unique: std::collections::HashSet<_> = codes.iter().collect();
    assert_eq!(unique.len(), codes.len(), "codes must be distinct: {codes:?}");
    // The sandbox is unharmed.
    load(&rt, "noop").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn compiled_components_are_cached_on_disk_and_corruption_is_recompiled() {
    let dir = std::env::temp_dir().join(format!("spindle-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = SandboxConfig { cache_dir: Some(dir.clone()), ..test_sandbox() };
    let first = runtime(config.clone()).load(&guest("noop")).await.unwrap();
    assert!(!first.from_cache);
    let second = runtime(config.clone()).load(&guest("noop")).await.unwrap();
    assert!(second.from_cache, "a new runtime loads the compiled artifact");
    assert_eq!(first.digest, second.digest);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue; // the function cache (see the next test)
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        replace(&path, &bytes);
    }
    let third = runtime(config).load(&guest("noop")).await.unwrap();
    assert!(!third.from_cache, "a corrupted artifact is recompiled, never loaded");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("key"));
}

/// A next version of a kind is mostly the same code (a Python or JavaScript version is
/// the same interpreter with another snapshot): its functions come from the function
/// cache, compiled once per host, so compiling it stores a small fraction of what the
/// first compile stored. A tampered entry is compiled again, never used.
#[tokio::test(flavor = "multi_thread")]
async fn a_next_version_reuses_compiled_functions_and_a_tampered_one_is_compiled_again() {
    let scratch = spindle_tests::harness::Scratch::new();
    let dir = scratch.path.join("artifacts");
    let functions = dir.join("functions");
    let packs = || -> std::collections::BTreeMap<std::path::PathBuf, u64> {
        std::fs::read_dir(&functions)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pack"))
            .map(|p| {
                let len = std::fs::metadata(&p).unwrap().len();
                (p, len)
            })
            .collect()
    };
    let config = SandboxConfig { cache_dir: Some(dir.clone()), ..test_sandbox() };
    let first = runtime(config.clone()).load(&guest("scripted")).await.unwrap();
    let after_first = packs();
    assert_eq!(after_first.len(), 1, "compiling stored its functions as one pack");
    let first_bytes: u64 = after_first.values().sum();

    let next = runtime(config.clone()).load(&with_custom_section(&guest("scripted"), b"v2")).await.unwrap();
    assert_ne!(next.digest, first.digest);
    assert!(!next.from_cache, "a new digest is compiled");
    let stored_by_next: u64 = packs().iter().filter(|(p, _)| !after_first.contains_key(*p)).map(|(_, len)| len).sum();
    // Not nothing: some functions' keys differ from compile to compile (between 3 and
    // 14 % of this small component's bytes were seen stored again, over runs).
    assert!(
        stored_by_next * 4 < first_bytes,
        "nearly every function came from the cache: the next version stored {stored_by_next} bytes, the first {first_bytes}"
    );

    let before_other = packs().len();
    let other = runtime(config.clone()).load(&guest("noop")).await.unwrap();
    assert!(!other.from_cache);
    assert_eq!(packs().len(), before_other + 1, "another component's functions were stored");

    // Each pack begins with its first entry's code: flip a byte of it in every pack.
    for pack in packs().keys() {
        let mut bytes = std::fs::read(pack).unwrap();
        bytes[0] ^= 0xff;
        replace(pack, &bytes);
    }
    let rt = runtime(config);
    let third = rt.load(&with_custom_section(&guest("scripted"), b"v3")).await.unwrap();
    assert!(!third.from_cache);
    for input in [json!({"first": "complete"}), json!({"first": "retryable"})] {
        let run = rt.run_step(&third, spindle_tests::input("first", 1, input.clone()), Arc::new(Unsupervised)).await;
        let expected = if input["first"] == "complete" {
            matches!(run.run, StepRun::Outcome(GuestOutcome::Complete(_)))
        } else {
            matches!(run.run, StepRun::Outcome(GuestOutcome::Retryable { .. }))
        };
        assert!(expected, "{input}: {:?}", run.run);
    }
}

/// Replaces the file at `path` with `bytes` as a new file renamed over it. (Written in
/// place instead, a file that a loaded component still maps would shrink under it: a
/// host whose cache directory is written in place by someone else can be crashed by
/// it, though not made to run what it did not compile.)
fn replace(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("replacing");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `component` with a custom section `name` appended: other bytes, the same code.
fn with_custom_section(component: &[u8], name: &[u8]) -> Vec<u8> {
    assert!(name.len() < 64);
    let mut out = component.to_vec();
    out.extend_from_slice(&[0, name.len() as u8 + 1, name.len() as u8]);
    out.extend_from_slice(name);
    out
}

/// Whoever can write the cache directory could plant native code the host would run:
/// another component's valid artifact, renamed to this one's digest, with its checksum
/// intact. Artifacts are authenticated with a key of the host's own, checked before
/// they are deserialized, so a planted file is recompiled, never loaded.
#[tokio::test(flavor = "multi_thread")]
async fn a_planted_artifact_is_recompiled_not_loaded() {
    let scratch = spindle_tests::harness::Scratch::new();
    let dir = scratch.path.join("artifacts");
    let config = SandboxConfig { cache_dir: Some(dir.clone()), ..test_sandbox() };
    let noop = runtime(config.clone()).load(&guest("noop")).await.unwrap();
    let scripted = runtime(config.clone()).load(&guest("scripted")).await.unwrap();
    let named = |digest: &str| {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(digest))
            .expect("an artifact for the digest")
    };
    // Plant noop's artifact where scripted's belongs.
    replace(&named(&scripted.digest), &std::fs::read(named(&noop.digest)).unwrap());
    let reloaded = runtime(config).load(&guest("scripted")).await.unwrap();
    assert_eq!(reloaded.spec.name, "scripted", "the planted code was not run");
    assert!(!reloaded.from_cache, "the planted artifact was recompiled, not loaded");
}

/// A guest's text reaches the host log capped and on one line: a guest cannot forge
/// whole host log lines through a log call, stdout, or a failure's message and code,
/// nor fill the log with 20 MB per attempt.
#[tokio::test]
async fn guest_text_reaches_the_host_log_capped_and_on_one_line() {
    let (captured, _guard) = spindle_tests::capture_log(tracing::Level::INFO);
    let rt = runtime(hostile_config());
    let kind = load(&rt, "hostile").await;
    let run = rt.run_step(&kind, input("forge-log", 1, json!({})), free()).await.run;
    let StepRun::Outcome(GuestOutcome::Retryable { code, message }) = run else {
        panic!("expected a retryable failure, got {run:?}");
    };
    assert!(code.len() <= 64, "the code is capped where it enters the host: {} bytes", code.len());
    assert!(message.len() <= 1024, "the message is capped where it enters the host: {} bytes", message.len());
    let log = captured.text();
    assert!(log.contains("innocent"), "the guest's own lines are logged: {log}");
    for line in log.lines() {
        assert!(!line.starts_with("2099-01-01"), "a guest forged a host log line: {line:?}");
        assert!(!line.contains("INFO spindle: forged") || line.contains("\\n"), "unescaped: {line:?}");
    }
    assert!(log.len() < 64 << 10, "the log holds {} bytes from one attempt", log.len());
}

/// What a host allocates on a guest's behalf is bounded per call and by the guest's own
/// memory limit: a `wasi:random` draw over 1 MiB (or over what the limit leaves) ends the
/// step as over its memory limit instead of growing the host (wasmtime-wasi took up to
/// 64 MiB per draw, whatever the guest's limit); an 8 MiB log line is read where it lies
/// in the guest's memory and kept to the line cap.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_call_allocates_for_a_guest_only_within_its_bounds() {
    let rt = runtime(SandboxConfig { max_memory_bytes: 16 << 20, ..test_sandbox() });
    let kind = load(&rt, "hog").await;
    let run = |plan: serde_json::Value| {
        let (rt, kind) = (rt.clone(), &kind);
        async move { rt.run_step(kind, input("hog", 1, plan), free()).await }
    };
    for plan in [
        json!({ "draw": 32 << 20, "times": 1 }),
        json!({ "draw": (1 << 20) + 1, "times": 1 }),
        json!({ "draw": 32 << 20, "times": 1, "insecure": true }),
    ] {
        match run(plan.clone()).await.run {
            StepRun::Fault { fault, detail } => {
                assert_eq!(fault, SandboxFault::MemoryLimit, "{plan}: {detail}");
                assert!(detail.contains("a draw is at most 1048576 bytes"), "{plan}: {detail}");
            }
            other => panic!("{plan}: a draw over the cap must fault, got {other:?}"),
        }
    }
    let drawn = complete(run(json!({ "draw": 1 << 20, "times": 8 })).await.run);
    assert_eq!(drawn["drawn"], 8 << 20, "draws within the cap work, as often as the guest likes");
    let call = run(json!({ "log": 8 << 20 })).await;
    complete(call.run);
    let line = call.lines.iter().find(|l| l.message.starts_with("lll")).expect("the log line");
    assert_eq!(line.message.len(), test_sandbox().max_log_line_bytes, "kept to the line cap");
}

/// The host's resident memory under 200 guests that each ask it for 32 MiB of randomness
/// (and 200 more that draw 1 MiB at a time): wasmtime-wasi allocated each draw in full
/// (7.4 GB resident for 200 such guests at once). Now each refused draw costs nothing and
/// a granted one at most 1 MiB per running guest, so the host stays within its baseline,
/// its running guests' own memory and 1 MiB each. The guests belong to 25 tenants, so no
/// kind's fault breaker (10 faults a minute) stops them before they ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_guests_asking_for_randomness_keep_the_hosts_memory_bounded() {
    use spindle_tests::served::Served;
    const RUNNING: usize = 32;
    const TENANTS: usize = 25;
    /// What the host may reach: a baseline (~60 MiB), and per running guest its own memory
    /// (a few MiB for this kind) and one draw.
    const BOUND_MIB: u64 = 400;
    let (store, url, _db) = spindle_tests::harness::fresh_store(spindle::store::Backend::Sqlite).await;
    drop(store);
    let host = Served::start(&url, &["--concurrency", &RUNNING.to_string()]);
    let path = spindle_tests::guest_path("hog");
    let tokens: Vec<String> = (0..TENANTS)
        .map(|n| {
            let token = host.tenant(&format!("t{n}"));
            let ran = host.cli(Some(&token), &["deploy", "hog", path.to_str().unwrap()]);
            assert_eq!(ran.code, 0, "deploy: {}", ran.stderr);
            token
        })
        .collect();
    let http = spindle_tests::http_client();
    let mut jobs = Vec::new();
    for n in 0..400 {
        let plan =
            if n % 2 == 0 { json!({ "draw": 32 << 20, "times": 1 }) } else { json!({ "draw": 1 << 20, "times": 4 }) };
        let token = &tokens[n % TENANTS];
        let answer: serde_json::Value = http
            .post(format!("{}/v1/jobs", host.url))
            .bearer_auth(token)
            .json(&json!({ "kind": "hog", "input": plan }))
            .send()
            .await
            .expect("submit")
            .json()
            .await
            .expect("a job");
        jobs.push((n, token.clone(), answer["id"].as_str().expect("its id").to_owned()));
    }
    for (n, token, id) in jobs {
        let view: serde_json::Value = loop {
            let view: serde_json::Value = http
                .get(format!("{}/v1/jobs/{id}/wait?timeout=60", host.url))
                .bearer_auth(&token)
                .send()
                .await
                .expect("wait")
                .json()
                .await
                .expect("a job");
            if view["state"] != "pending" && view["state"] != "running" {
                break view;
            }
        };
        let expected = if n % 2 == 0 { "failed" } else { "succeeded" };
        assert_eq!(view["state"], expected, "{view}");
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", host.pid())).expect("the host's status");
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    eprintln!("the host's peak resident memory: {} MiB", peak_kib / 1024);
    assert!(peak_kib / 1024 <= BOUND_MIB, "the host peaked at {} MiB, over {BOUND_MIB} MiB", peak_kib / 1024);
}

/// A step may wait only for a signal name a sender could use: the API's rule (letters,
/// digits, `-`, `_`, `.`, `:`), or the outcome is malformed rather than a wait no signal
/// can ever end.
#[tokio::test(flavor = "multi_thread")]
async fn a_step_waits_only_for_a_signal_name_a_sender_could_use() {
    let rt = runtime(test_sandbox());
    let kind = load(&rt, "workflow").await;
    let waits = |name: &str| input("run", 1, json!({ "signal": name, "timeout_secs": 60 }));
    let run = rt.run_step(&kind, waits("order.shipped:v2"), free()).await.run;
    assert!(matches!(run, StepRun::Outcome(GuestOutcome::AwaitSignal { .. })), "{run:?}");
    for refused in ["has space", "emoji-✓", "slash/name"] {
        let run = rt.run_step(&kind, waits(refused), free()).await.run;
        assert!(matches!(fault(run), SandboxFault::MalformedOutput(_)), "{refused}");
    }
}
