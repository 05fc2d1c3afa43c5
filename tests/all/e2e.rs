//! End to end: a real `spindle serve` process on a free loopback port (SQLite and
//! PostgreSQL), components deployed over HTTP, jobs submitted and watched with the
//! `spindle` CLI; hot deploys and rollback; tenant isolation; bad inputs; a workflow
//! (children, a signal) and a cron schedule; tenant limits, quotas and usage.

use serde_json::{Value, json};
use spindle::store::Backend;
use spindle_tests::guest_path;
use spindle_tests::harness::fresh_store;
use spindle_tests::served::Served;

on_both_backends!(
    deploy_submit_and_wait_through_the_cli,
    a_new_version_serves_new_jobs_while_running_jobs_finish_on_theirs,
    tenants_cannot_reach_each_others_work,
    bad_inputs_answer_typed_errors_and_change_nothing,
    every_refusal_a_caller_can_cause_reaches_it_with_its_code,
    shutdown_hands_running_steps_back,
    a_workflow_and_a_schedule_through_the_cli,
    tenant_limits_through_the_cli_and_the_api,
    a_retry_runs_on_the_failed_jobs_version_unless_asked_for_the_current_one,
);

/// A fresh database and a `spindle serve` on it.
async fn serve(backend: Backend, extra: &[&str]) -> (Served, spindle_tests::harness::Scratch) {
    let (store, url, scratch) = fresh_store(backend).await;
    drop(store);
    (Served::start(&url, extra), scratch)
}

fn wasm(name: &str) -> String {
    guest_path(name).to_string_lossy().into_owned()
}

async fn deploy_submit_and_wait_through_the_cli(backend: Backend) {
    let (host, _db) = serve(backend, &[]).await;
    let token = host.tenant("acme");
    let token = Some(token.as_str());
    let deployed = host.cli(token, &["deploy", "scripted", &wasm("scripted")]);
    assert_eq!(deployed.code, 0, "{}", deployed.stderr);
    assert!(deployed.stdout.contains("deployed scripted version 1"), "{}", deployed.stdout);

    let submitted = host.cli(token, &["submit", "scripted", "--input", r#"{"second": ["retryable", "complete"]}"#]);
    assert_eq!(submitted.code, 0, "{}", submitted.stderr);
    let id = submitted.stdout.trim().to_owned();
    let waited = host.cli(token, &["wait", &id]);
    assert_eq!(waited.code, 0, "wait exits 0 on success: {} {}", waited.stdout, waited.stderr);
    assert!(waited.stdout.contains("succeeded"));

    let job = host.cli(token, &["job", &id, "--json"]).json();
    assert_eq!(job["state"], "succeeded");
    assert_eq!(job["progress"], 100);
    assert_eq!(job["steps"][1]["attempts"].as_array().unwrap().len(), 2, "the retry is visible");
    assert!(job["history"].as_array().unwrap().iter().any(|e| e["event"] == "step_retrying"));
    let human = host.cli(token, &["job", &id]);
    assert!(human.stdout.contains("second") && human.stdout.contains("history"), "{}", human.stdout);

    let refused =
        host.cli(token, &["submit", "scripted", "--input", r#"{"first": "refused"}"#]).stdout.trim().to_owned();
    let waited = host.cli(token, &["wait", &refused]);
    assert_eq!(waited.code, 1, "wait exits non-zero when the job failed");
    let dead = host.cli(token, &["dead-letters", "--json"]).json();
    assert_eq!(dead["jobs"].as_array().unwrap().len(), 1);
    let retried = host.cli(token, &["retry", &refused, "--json"]);
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert_eq!(retried.json()["predecessor"], refused.as_str());

    let listed = host.cli(token, &["jobs", "--state", "succeeded", "--json"]).json();
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1);
    let watched = host.cli(token, &["watch", &id]);
    assert_eq!(watched.code, 0);
}

async fn a_new_version_serves_new_jobs_while_running_jobs_finish_on_theirs(backend: Backend) {
    let (host, _db) = serve(backend, &[]).await;
    let token = host.tenant("acme");
    let token = Some(token.as_str());
    assert_eq!(host.cli(token, &["deploy", "versioned", &wasm("versioned-v1")]).code, 0);
    let slow = r#"{"spins": 400}"#;
    let v1: Vec<String> =
        (0..4).map(|_| host.cli(token, &["submit", "versioned", "--input", slow]).stdout.trim().to_owned()).collect();
    // Version 2 arrives while version-1 jobs are still running; no restart.
    let running = host.cli(token, &["job", &v1[0], "--json"]).json();
    assert!(!["succeeded", "failed"].contains(&running["state"].as_str().unwrap()), "v1 jobs must still be in flight");
    let deployed = host.cli(token, &["deploy", "versioned", &wasm("versioned-v2")]);
    assert!(deployed.stdout.contains("version 2"), "{}", deployed.stdout);
    let v2: Vec<String> = (0..4)
        .map(|_| host.cli(token, &["submit", "versioned", "--input", r#"{"spins": 2}"#]).stdout.trim().to_owned())
        .collect();
    for (ids, version) in [(&v1, 1), (&v2, 2)] {
        for id in ids {
            assert_eq!(host.cli(token, &["wait", id]).code, 0);
            let job = host.cli(token, &["job", id, "--json"]).json();
            assert_eq!(job["kind_version"], version, "job {id} is pinned to its version");
            assert_eq!(job["steps"][0]["output"]["version"], version, "job {id} ran on its own version");
        }
    }
    // Roll back: new jobs run version 1 again.
    let rolled = host.cli(token, &["rollback", "versioned", "1"]);
    assert_eq!(rolled.code, 0, "{}", rolled.stderr);
    let id = host.cli(token, &["submit", "versioned", "--input", "{}"]).stdout.trim().to_owned();
    assert_eq!(host.cli(token, &["wait", &id]).code, 0);
    let job = host.cli(token, &["job", &id, "--json"]).json();
    assert_eq!(job["kind_version"], 1);
    assert_eq!(job["steps"][0]["output"]["version"], 1);
    let kind = host.cli(token, &["kinds", "versioned", "--json"]).json();
    assert_eq!(kind["current_version"], 1);
    assert_eq!(kind["latest_version"], 2);
}

/// A job failed on a faulty version; its fix is deployed. `spindle retry` still runs the
/// version the job ran on (and fails the same way); `--on-current` runs the fix.
async fn a_retry_runs_on_the_failed_jobs_version_unless_asked_for_the_current_one(backend: Backend) {
    let (host, _db) = serve(backend, &[]).await;
    let token = host.tenant("acme");
    let token = Some(token.as_str());
    assert_eq!(host.cli(token, &["deploy", "versioned", &wasm("versioned-v1")]).code, 0);
    let input = r#"{"v1_panics": true}"#;
    let failed = host.cli(token, &["submit", "versioned", "--input", input]).stdout.trim().to_owned();
    let waited = host.cli(token, &["wait", &failed]);
    assert_eq!(waited.code, 1, "version 1 panics: {}", waited.stdout);
    assert!(waited.stdout.contains("(sandbox.panic") && !waited.stdout.contains(": )"), "{}", waited.stdout);
    assert!(host.cli(token, &["deploy", "versioned", &wasm("versioned-v2")]).stdout.contains("version 2"));

    let again = host.cli(token, &["retry", &failed, "--json"]).json();
    assert_eq!(again["kind_version"], 1, "a plain retry keeps the failed job's version");
    let again = again["id"].as_str().unwrap().to_owned();
    assert_eq!(host.cli(token, &["wait", &again]).code, 1, "and fails the same way");

    let fixed = host.cli(token, &["retry", &again, "--on-current"]);
    assert_eq!(fixed.code, 0, "{}", fixed.stderr);
    assert!(fixed.stdout.contains("(version 2)"), "{}", fixed.stdout);
    let fixed = host.cli(token, &["job", &again, "--json"]).json()["successor"].as_str().unwrap().to_owned();
    assert_eq!(host.cli(token, &["wait", &fixed]).code, 0);
    let job = host.cli(token, &["job", &fixed, "--json"]).json();
    assert_eq!((job["kind_version"].clone(), job["predecessor"].clone()), (json!(2), json!(again)));
    assert_eq!(job["steps"][0]["output"]["version"], 2);
    // Retried once is retried: the job machine refuses a second retry either way.
    // The original, retried plainly before: the refusal names the retry to retry instead.
    let twice = host.cli(token, &["retry", &failed, "--on-current"]);
    assert_ne!(twice.code, 0);
    assert!(twice.stderr.contains("already-retried"), "{}", twice.stderr);
    assert!(twice.stderr.contains(&format!("retry {again} instead")), "{}", twice.stderr);
}

async fn tenants_cannot_reach_each_others_work(backend: Backend) {
    let (host, _db) = serve(backend, &[]).await;
    let alice = host.tenant("alice");
    let bob = host.tenant("bob");
    let (alice, bob) = (Some(alice.as_str()), Some(bob.as_str()));
    assert_eq!(host.cli(alice, &["deploy", "scripted", &wasm("scripted")]).code, 0);
    let job = host.cli(alice, &["submit", "scripted", "--input", r#"{"first": "refused"}"#]).stdout.trim().to_owned();
    assert_eq!(host.cli(alice, &["wait", &job]).code, 1);

    let listed = host.cli(bob, &["jobs", "--json"]).json();
    assert!(listed["jobs"].as_array().unwrap().is_empty(), "bob lists none of alice's jobs");
    assert!(host.cli(bob, &["dead-letters", "--json"]).json()["jobs"].as_array().unwrap().is_empty());
    for args in [
        vec!["job", job.as_str()],
        vec!["cancel", job.as_str(), "--reason", "x"],
        vec!["retry", job.as_str()],
        vec!["pause", job.as_str()],
    ] {
        let ran = host.cli(bob, &args);
        assert_ne!(ran.code, 0, "{args:?} must fail for bob");
        assert!(ran.stderr.contains("not-found"), "{args:?}: another tenant's job is not found: {}", ran.stderr);
        assert!(!ran.stderr.contains("scripted"), "no data of alice's job leaks: {}", ran.stderr);
    }
    // Bob submitting alice's kind finds no such kind; deploying under the same name makes
    // his own kind and leaves alice's alone.
    let submitted = host.cli(bob, &["submit", "scripted"]);
    assert!(submitted.stderr.contains("unknown-kind"), "{}", submitted.stderr);
    assert_eq!(host.cli(bob, &["deploy", "scripted", &wasm("scripted")]).code, 0);
    let alices = host.cli(alice, &["kinds", "scripted", "--json"]).json();
    assert_eq!(alices["latest_version"], 1, "bob did not deploy over alice's kind");
    assert_eq!(alices["versions"].as_array().unwrap().len(), 1);
    let still = host.cli(alice, &["job", &job, "--json"]).json();
    assert_eq!(still["state"], "failed");
    assert!(still["successor"].is_null(), "bob's retry changed nothing");
    // The operator token manages tenants, not their jobs; no token gets nothing.
    let operator = host.cli(Some(&host.operator), &["jobs"]);
    assert!(operator.stderr.contains("forbidden"), "{}", operator.stderr);
    let anonymous = host.cli(None, &["jobs"]);
    assert!(anonymous.stderr.contains("unauthorised"), "{}", anonymous.stderr);
    let forged = host.cli(Some("spt_forged"), &["jobs"]);
    assert!(forged.stderr.contains("unauthorised"), "{}", forged.stderr);
}

async fn bad_inputs_answer_typed_errors_and_change_nothing(backend: Backend) {
    let (host, _db) = serve(backend, &["--max-component-bytes", "300000"]).await;
    let token = host.tenant("acme");
    let http = spindle_tests::http_client();
    let url = |path: &str| format!("{}{path}", host.url);
    let error_of = |v: &Value| {
        (v["error"]["code"].as_str().unwrap_or("").to_owned(), v["error"]["message"].as_str().unwrap_or("").to_owned())
    };
    assert_eq!(host.cli(Some(&token), &["deploy", "scripted", &wasm("scripted")]).code, 0);
    let done = host.cli(Some(&token), &["submit", "scripted"]).stdout.trim().to_owned();
    assert_eq!(host.cli(Some(&token), &["wait", &done]).code, 0);
    let jobs_before = host.cli(Some(&token), &["jobs", "--json"]).json()["jobs"].as_array().unwrap().len();

    let post = |path: &str, body: Vec<u8>| {
        http.post(url(path)).bearer_auth(&token).header("content-type", "application/json").body(body).send()
    };
    let malformed = post("/v1/jobs", b"{\"kind\": \"scripted\", ".to_vec()).await.unwrap();
    assert_eq!(malformed.status(), 400);
    assert_eq!(error_of(&malformed.json().await.unwrap()).0, "invalid-request");

    let huge_body = serde_json::to_vec(&json!({"kind": "scripted", "input": "x".repeat(3 << 20)})).unwrap();
    let oversized = post("/v1/jobs", huge_body).await.unwrap();
    assert_eq!(oversized.status(), 413);
    assert_eq!(error_of(&oversized.json().await.unwrap()).0, "payload-too-large");
    let big_input = serde_json::to_vec(&json!({"kind": "scripted", "input": "x".repeat((1 << 20) + 10)})).unwrap();
    let over_cap = post("/v1/jobs", big_input).await.unwrap();
    assert_eq!(over_cap.status(), 413, "an input over the input cap in a body under the body cap");
    assert_eq!(error_of(&over_cap.json().await.unwrap()).0, "payload-too-large");

    let unknown = post("/v1/jobs", br#"{"kind": "nope"}"#.to_vec()).await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert_eq!(error_of(&unknown.json().await.unwrap()).0, "unknown-kind");

    let put =
        |kind: &str, body: Vec<u8>| http.put(url(&format!("/v1/kinds/{kind}"))).bearer_auth(&token).body(body).send();
    let core = put("bad", b"\0asm\x01\0\0\0".to_vec()).await.unwrap();
    assert_eq!(core.status(), 422);
    let (code, message) = error_of(&core.json().await.unwrap());
    assert_eq!(code, "invalid-component");
    assert!(message.contains("component.core-module"), "{message}");
    let other_world = put("bad", std::fs::read(guest_path("other-world")).unwrap()).await.unwrap();
    assert_eq!(other_world.status(), 422);
    assert!(error_of(&other_world.json().await.unwrap()).1.contains("component.wrong-world"));
    let too_big = put("bad", std::fs::read(guest_path("thumbnail")).unwrap()).await.unwrap();
    assert_eq!(too_big.status(), 413, "a component over --max-component-bytes");
    let kinds = host.cli(Some(&token), &["kinds", "--json"]).json();
    assert_eq!(kinds["kinds"].as_array().unwrap().len(), 1, "no invalid component was stored");

    let cancel = post(&format!("/v1/jobs/{done}/cancel"), br#"{"reason": "too late"}"#.to_vec()).await.unwrap();
    assert_eq!(cancel.status(), 409);
    let body: Value = cancel.json().await.unwrap();
    assert_eq!(body["error"]["code"], "illegal-transition");
    assert_eq!(body["error"]["reason"], "finished", "the error keeps the core's own refusal code");
    assert_eq!(body["error"]["state"], "succeeded", "the error names the current state");
    let job = host.cli(Some(&token), &["job", &done, "--json"]).json();
    assert_eq!(job["state"], "succeeded");
    let jobs_after = host.cli(Some(&token), &["jobs", "--json"]).json()["jobs"].as_array().unwrap().len();
    assert_eq!(jobs_before, jobs_after, "no bad request created a job");

    // The API describes itself (the document is generated from the router's own routes), and
    // every described route answers (not the fallback).
    let spec: Value = http.get(url("/v1/openapi.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!(spec["openapi"], "3.1.0");
    let mut described = 0;
    for (path, item) in spec["paths"].as_object().expect("the document lists paths") {
        for method in ["get", "put", "post", "delete"] {
            if !item[method].is_object() {
                continue;
            }
            described += 1;
            let concrete = path.replace("{id}", &done).replace("{kind}", "scripted").replace("{name}", "acme");
            let concrete = concrete.replace("{key}", "account:1");
            let request = match method {
                "get" => http.get(url(&concrete)),
                "put" => http.put(url(&concrete)),
                "delete" => http.delete(url(&concrete)),
                _ => http.post(url(&concrete)),
            };
            let response = request.bearer_auth("spt_nobody").send().await.unwrap();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            assert_ne!(body["error"]["message"], "no such route", "{method} {path} is not routed");
        }
    }
    assert_eq!(described, 59, "the document describes every route");
    let metrics = http.get(url("/metrics")).bearer_auth(&host.operator).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("spindle_step_duration_seconds_count") && metrics.contains("spindle_jobs"), "{metrics}");
}

/// Each refusal of the job machine that an API caller can bring about arrives in the
/// error body: `illegal-transition` as the code, the machine's own code as `reason`, the
/// job's state. (The refusals only a host's own writers meet — stale fences, claims,
/// rescues, queue events — are checked through the same mapping in `api::error`'s tests.)
async fn every_refusal_a_caller_can_cause_reaches_it_with_its_code(backend: Backend) {
    // Heartbeats written at most every 10 s: a cancellation recorded now is seen by the
    // running step only then, so the requests below all meet it still in flight.
    let (host, _db) = serve(backend, &["--heartbeat-interval", "10s", "--lease-ttl", "90s"]).await;
    let token = host.tenant("acme");
    let cli = |args: &[&str]| host.cli(Some(&token), args);
    assert_eq!(cli(&["deploy", "scripted", &wasm("scripted")]).code, 0);
    assert_eq!(cli(&["deploy", "noop", &wasm("noop")]).code, 0);
    let http = spindle_tests::http_client();
    let call = |id: &str, action: &str, body: Option<&str>| {
        let request = http.post(format!("{}/v1/jobs/{id}/{action}", host.url)).bearer_auth(&token);
        let request = match body {
            Some(body) => request.header("content-type", "application/json").body(body.to_owned()),
            None => request,
        };
        async move {
            let response = request.send().await.expect("the host answers");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let refused = |(status, body): (u16, Value), reason: &str, state: &str| {
        assert_eq!(status, 409, "{reason}: {body}");
        assert_eq!(body["error"]["code"], "illegal-transition", "{body}");
        assert_eq!(body["error"]["reason"], reason, "{body}");
        assert_eq!(body["error"]["state"], state, "{body}");
    };
    let cancel = r#"{"reason": "no longer needed"}"#;

    // A job whose first step runs until it is told to stop.
    let running = cli(&["submit", "scripted", "--input", r#"{"first": "wait-for-stop"}"#]).stdout.trim().to_owned();
    while cli(&["job", &running, "--json"]).json()["claimed"] != true {}
    assert_eq!(call(&running, "pause", None).await.0, 200, "a pause waits for the step boundary");
    refused(call(&running, "pause", None).await, "already-pausing", "running");
    refused(call(&running, "cancel", Some(r#"{"reason": "  "}"#)).await, "blank-reason", "running");
    assert_eq!(call(&running, "cancel", Some(cancel)).await.0, 200, "a cancellation is recorded");
    refused(call(&running, "pause", None).await, "cancelling", "running");
    refused(call(&running, "cancel", Some(cancel)).await, "already-cancelling", "running");
    assert_eq!(cli(&["wait", &running]).code, 1, "the step saw the stop and the job ended cancelled");
    assert_eq!(cli(&["job", &running, "--json"]).json()["state"], "cancelled");
    assert_eq!(call(&running, "retry", None).await.0, 201);
    refused(call(&running, "retry", None).await, "already-retried", "cancelled");
    refused(call(&running, "resume", None).await, "finished", "cancelled");

    // A job not yet due: nothing has started.
    let later = cli(&["submit", "scripted", "--delay", "3600"]).stdout.trim().to_owned();
    refused(call(&later, "resume", None).await, "not-paused", "pending");
    refused(call(&later, "restart", None).await, "not-started", "pending");
    refused(call(&later, "retry", None).await, "not-retryable", "pending");
    assert_eq!(call(&later, "pause", None).await.0, 200);
    refused(call(&later, "pause", None).await, "already-paused", "paused");

    // A kind that does not allow cancellation.
    let noop = cli(&["submit", "noop", "--delay", "3600"]).stdout.trim().to_owned();
    refused(call(&noop, "cancel", Some(cancel)).await, "not-cancellable", "pending");
}

async fn shutdown_hands_running_steps_back(backend: Backend) {
    let (store, url, _db) = fresh_store(backend).await;
    drop(store);
    let host = Served::start(&url, &["--shutdown-grace", "100ms"]);
    let token = host.tenant("acme");
    let token = Some(token.as_str());
    assert_eq!(host.cli(token, &["deploy", "versioned", &wasm("versioned-v1")]).code, 0);
    let id = host.cli(token, &["submit", "versioned", "--input", r#"{"spins": 400}"#]).stdout.trim().to_owned();
    loop {
        let job = host.cli(token, &["job", &id, "--json"]).json();
        if job["claimed"] == true {
            break;
        }
    }
    let (code, data) = host.terminate();
    assert_eq!(code, 0, "a graceful shutdown exits cleanly");
    // The step was handed back (no attempt consumed), so a restarted host runs it at once.
    let host = Served::start_in(data, &url, &[]);
    let job = host.cli(token, &["job", &id, "--json"]).json();
    assert!(job["history"].as_array().unwrap().iter().any(|e| e["event"] == "released"), "{job}");
    assert_eq!(host.cli(token, &["wait", &id]).code, 0);
}

/// The `order-fulfilment` example through the CLI: it fans out one `thumbnail` child per
/// image and waits for the `shipped` signal (sent before it waits: kept until it does);
/// `spindle job` prints the children, `jobs --parent` lists them; a signal to the
/// finished job is refused. Then a schedule fires `nightly-report` jobs until paused.
async fn a_workflow_and_a_schedule_through_the_cli(backend: Backend) {
    let (host, _db) = serve(backend, &[]).await;
    let token = host.tenant("acme");
    let token = Some(token.as_str());
    for kind in ["thumbnail", "order-fulfilment", "nightly-report"] {
        let deployed = host.cli(token, &["deploy", kind, &wasm(kind)]);
        assert_eq!(deployed.code, 0, "{}", deployed.stderr);
    }
    let order = r#"{"order_id": "A-1", "images": ["front.jpg", "back.jpg"], "ship_timeout_secs": 600}"#;
    let id = host.cli(token, &["submit", "order-fulfilment", "--input", order]).stdout.trim().to_owned();
    let signalled = host.cli(token, &["signal", &id, "shipped", "--data", r#"{"carrier": "ups", "tracking": "1Z"}"#]);
    assert_eq!(signalled.code, 0, "{}", signalled.stderr);
    let waited = host.cli(token, &["wait", &id]);
    assert_eq!(waited.code, 0, "{} {}", waited.stdout, waited.stderr);
    let tree = host.cli(token, &["job", &id]);
    assert_eq!(tree.stdout.matches("thumbnail succeeded").count(), 2, "{}", tree.stdout);
    let children = host.cli(token, &["jobs", "--parent", &id, "--json"]).json();
    assert_eq!(children["jobs"].as_array().unwrap().len(), 2);
    let child = &children["jobs"][0]["id"];
    let child = host.cli(token, &["job", child.as_str().unwrap(), "--json"]).json();
    assert_eq!(child["parent"], id.as_str());
    let late = host.cli(token, &["signal", &id, "shipped", "--data", "{}"]);
    assert_ne!(late.code, 0);
    assert!(late.stderr.contains("finished"), "{}", late.stderr);

    let created = host.cli(
        token,
        &[
            "schedule",
            "create",
            "nightly",
            "--kind",
            "nightly-report",
            "--cron",
            "* * * * * *",
            "--input",
            r#"{"report": "orders"}"#,
        ],
    );
    assert_eq!(created.code, 0, "{}", created.stderr);
    let bad = host.cli(token, &["schedule", "create", "bad", "--kind", "nightly-report", "--cron", "61 * * * *"]);
    assert_ne!(bad.code, 0, "a bad expression is refused");
    // The schedule fires every second: wait for its first job, by its record.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let first = loop {
        let list = host.cli(token, &["schedule", "list", "--json"]).json();
        if let Some(job) = list["schedules"][0]["last_job"].as_str() {
            break job.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "the schedule never fired: {list}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(host.cli(token, &["wait", &first]).code, 0);
    let job = host.cli(token, &["job", &first, "--json"]).json();
    assert_eq!(job["kind"], "nightly-report");
    assert_eq!(job["priority"], "scheduled");
    assert!(job["idempotency_key"].as_str().unwrap().starts_with("schedule:nightly:"));
    let list = host.cli(token, &["schedule", "list", "--json"]).json();
    assert_eq!(list["schedules"][0]["upcoming"].as_array().unwrap().len(), 5, "its next five times: {list}");
    assert_eq!(host.cli(token, &["schedule", "pause", "nightly"]).code, 0);
    let list = host.cli(token, &["schedule", "list", "--json"]).json();
    assert_eq!(list["schedules"][0]["paused"], true);
    assert_eq!(list["schedules"][0]["upcoming"], serde_json::json!([]), "a paused schedule has no next times");
    // Fired by hand while paused: one job now, recorded as its last firing; still paused.
    let fired_before = list["schedules"][0]["fired"].as_i64().unwrap();
    let triggered = host.cli(token, &["schedule", "trigger", "nightly", "--json"]);
    assert_eq!(triggered.code, 0, "{}", triggered.stderr);
    let triggered = triggered.json();
    let by_hand = triggered["id"].as_str().unwrap().to_owned();
    assert!(triggered["idempotency_key"].as_str().unwrap().starts_with("schedule:nightly:"));
    assert_eq!(host.cli(token, &["wait", &by_hand]).code, 0);
    let list = host.cli(token, &["schedule", "list", "--json"]).json();
    let nightly = &list["schedules"][0];
    assert_eq!((nightly["paused"].as_bool(), nightly["last_job"].as_str()), (Some(true), Some(by_hand.as_str())));
    assert_eq!(nightly["fired"].as_i64(), Some(fired_before + 1));
    assert_ne!(host.cli(token, &["schedule", "trigger", "no-such-schedule"]).code, 0);
    assert_eq!(host.cli(token, &["schedule", "delete", "nightly"]).code, 0);
    let list = host.cli(token, &["schedule", "list", "--json"]).json();
    assert_eq!(list["schedules"].as_array().unwrap().len(), 0);
}

/// The operator sets a tenant's limits with `spindle tenant set` (flags left out keep
/// their value, `none` lifts one); a submission over the queue quota or the rate answers
/// 429 `quota-exceeded` with `Retry-After` and queues nothing; `tenant show` and `usage`
/// report limits and load; a deployment sets a kind's running limit; `kinds` shows the
/// breaker.
async fn tenant_limits_through_the_cli_and_the_api(backend: Backend) {
    let (host, _db) = serve(backend, &[]).await;
    let token = host.tenant("acme");
    let tenant = Some(token.as_str());
    let deployed = host.cli(tenant, &["deploy", "noop", &wasm("noop"), "--max-running", "2"]);
    assert_eq!(deployed.code, 0, "{}", deployed.stderr);
    let set = host.cli(Some(&host.operator), &["tenant", "set", "acme", "--weight", "2", "--max-queued", "2"]);
    assert_eq!(set.code, 0, "{}", set.stderr);
    assert!(set.stdout.contains("weight 2") && set.stdout.contains("max-queued 2"), "{}", set.stdout);
    // Two delayed jobs stay queued; the third is over the quota.
    for _ in 0..2 {
        assert_eq!(host.cli(tenant, &["submit", "noop", "--delay", "3600"]).code, 0);
    }
    let http = spindle_tests::http_client();
    let submit = || {
        http.post(format!("{}/v1/jobs", host.url))
            .bearer_auth(&token)
            .json(&json!({"kind": "noop", "input": {}, "delay_secs": 3600}))
            .send()
    };
    let refused = submit().await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "quota-exceeded");
    assert_eq!(body["error"]["reason"], "max-queued");
    let cli_refused = host.cli(tenant, &["submit", "noop"]);
    assert_ne!(cli_refused.code, 0);
    assert!(cli_refused.stderr.contains("quota"), "{}", cli_refused.stderr);
    let listed = host.cli(tenant, &["jobs", "--json"]).json();
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 2, "the refused submissions queued nothing");
    // What the operator and the tenant see.
    let shown = host.cli(Some(&host.operator), &["tenant", "show", "acme", "--json"]).json();
    assert_eq!(shown["limits"]["weight"], 2);
    assert_eq!(shown["limits"]["max_queued"], 2);
    let noop = shown["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == "noop").cloned().unwrap();
    assert_eq!(noop["queued"], 2);
    assert_eq!(noop["max_running"], 2, "the deployment's running limit");
    assert_eq!(host.cli(tenant, &["usage", "--json"]).json()["kinds"], shown["kinds"]);
    assert_eq!(host.cli(tenant, &["tenant", "show", "acme"]).code, 1, "a tenant token is not the operator");
    // Lifting the queue quota and setting a rate of one a second, in bursts of one.
    let set = host.cli(Some(&host.operator), &["tenant", "set", "acme", "--max-queued", "none", "--rate", "1/s"]);
    assert_eq!(set.code, 0, "{}", set.stderr);
    let shown = host.cli(Some(&host.operator), &["tenant", "show", "acme", "--json"]).json();
    assert_eq!(shown["limits"]["weight"], 2, "a flag left out keeps its value");
    assert!(shown["limits"].get("max_queued").is_none());
    assert_eq!(submit().await.unwrap().status(), 201);
    let over = submit().await.unwrap();
    assert_eq!(over.status(), 429);
    assert!(over.headers().contains_key("retry-after"));
    assert_eq!(over.json::<Value>().await.unwrap()["error"]["reason"], "rate");
    let kinds = host.cli(tenant, &["kinds"]);
    assert!(kinds.stdout.contains("breaker") && kinds.stdout.contains("closed"), "{}", kinds.stdout);
    let bad = host.cli(Some(&host.operator), &["tenant", "set", "acme", "--weight", "0"]);
    assert_ne!(bad.code, 0, "a weight of 0 is refused");
    let metrics = spindle_tests::http_client()
        .get(format!("{}/metrics", host.url))
        .bearer_auth(&host.operator)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("spindle_tenant_running{tenant=\"acme\",kind=\"noop\"} 0"), "{metrics}");
}
