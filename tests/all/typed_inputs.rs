//! Typed inputs, as a user meets them through `spindle serve`: a kind that declares an
//! input schema has a bad submission refused `422 invalid-input` with each violation's
//! JSON pointer, before anything is queued; the CLI shows the schema and an example and
//! says what is expected; kinds without a schema (0.1.0 components, 0.2 ones that
//! declare none) take any JSON as before.

use serde_json::{Value, json};
use spindle::store::Backend;
use spindle_tests::guest_path;
use spindle_tests::harness::Scratch;
use spindle_tests::served::Served;

/// The input from the issue: no account, a card too short to be one.
const BAD_PAYMENT: &str = r#"{"amount_cents": 1200, "card": "4242"}"#;

async fn host(backend: Backend) -> (Served, String, Scratch) {
    let (store, url, scratch) = spindle_tests::harness::fresh_store(backend).await;
    drop(store);
    let host = Served::start(&url, &[]);
    let token = host.tenant("typed");
    (host, token, scratch)
}

fn deploy(host: &Served, token: &str, kind: &str) {
    let ran = host.cli(Some(token), &["deploy", kind, guest_path(kind).to_str().unwrap()]);
    assert_eq!(ran.code, 0, "deploy {kind}: {}{}", ran.stdout, ran.stderr);
}

/// `POST /v1/jobs` with `body`; answers the status and the body.
async fn post_job(host: &Served, token: &str, body: &Value) -> (u16, Value) {
    let answer = spindle_tests::http_client()
        .post(format!("{}/v1/jobs", host.url))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("the host answers");
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// The tenant's jobs, as `spindle jobs` lists them.
fn jobs(host: &Served, token: &str) -> Vec<Value> {
    let listed = host.cli(Some(token), &["jobs", "--json"]);
    assert_eq!(listed.code, 0, "jobs: {}", listed.stderr);
    listed.json()["jobs"].as_array().expect("a list of jobs").clone()
}

async fn a_bad_payment_is_refused_before_anything_is_queued(backend: Backend) {
    let (host, token, _scratch) = host(backend).await;
    deploy(&host, &token, "payment-saga");
    let input: Value = serde_json::from_str(BAD_PAYMENT).unwrap();

    let (status, body) = post_job(&host, &token, &json!({"kind": "payment-saga", "input": input})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "invalid-input", "{body}");
    let violations = body["error"]["violations"].as_array().expect("violations");
    let at = |pointer: &str| violations.iter().filter(|v| v["pointer"] == pointer).count();
    assert!(
        violations.iter().any(|v| v["pointer"] == "" && v["message"].as_str().unwrap().contains("account")),
        "the missing field is named at the root: {body}"
    );
    assert_eq!(at("/card"), 1, "the card is too short: {body}");
    assert_eq!(violations.len(), 2, "nothing else is wrong: {body}");
    assert!(jobs(&host, &token).is_empty(), "nothing was queued");

    // The CLI says the same, one line per violation, and exits non-zero.
    let submitted = host.cli(Some(&token), &["submit", "payment-saga", "--input", BAD_PAYMENT]);
    assert_ne!(submitted.code, 0, "{}", submitted.stdout);
    assert!(submitted.stderr.contains("invalid-input"), "{}", submitted.stderr);
    assert!(submitted.stderr.contains("/card:"), "{}", submitted.stderr);

    // Without --input it says what is expected, and submits nothing.
    let bare = host.cli(Some(&token), &["submit", "payment-saga"]);
    assert_ne!(bare.code, 0, "{}", bare.stdout);
    assert!(bare.stderr.contains("expects an input"), "{}", bare.stderr);
    assert!(bare.stderr.contains("\"card\""), "the schema is shown: {}", bare.stderr);
    assert!(jobs(&host, &token).is_empty(), "still nothing queued");

    // A schedule whose input breaks the schema is refused when it is made.
    let schedule = host.cli(
        Some(&token),
        &[
            "schedule",
            "create",
            "nightly-pay",
            "--kind",
            "payment-saga",
            "--cron",
            "0 0 3 * * *",
            "--input",
            BAD_PAYMENT,
        ],
    );
    assert_ne!(schedule.code, 0, "{}", schedule.stdout);
    assert!(schedule.stderr.contains("invalid-input"), "{}", schedule.stderr);

    // `spindle kinds` shows the schema and an example that the host accepts.
    let shown = host.cli(Some(&token), &["kinds", "payment-saga"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains("input schema (version 1)"), "{}", shown.stdout);
    let example = shown
        .stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("example: spindle submit payment-saga --input '"))
        .and_then(|rest| rest.strip_suffix('\''))
        .unwrap_or_else(|| panic!("an example: {}", shown.stdout));
    let good = host.cli(Some(&token), &["submit", "payment-saga", "--input", example, "--json"]);
    assert_eq!(good.code, 0, "the example is accepted: {}", good.stderr);
    assert_eq!(jobs(&host, &token).len(), 1);

    // The API shows the schema with the kind's version.
    let kind = host.cli(Some(&token), &["kinds", "payment-saga", "--json"]).json();
    let spec = &kind["versions"][0]["spec"];
    assert_eq!(spec["input_schema"]["required"], json!(["account", "amount_cents", "card"]), "{spec}");
    assert_eq!(spec["input_example"]["card"], "4242424242424242", "the schema's own example: {spec}");
    assert!(spec["steps"][0]["output_schema"]["properties"]["last4"].is_object(), "{spec}");
}

async fn kinds_without_a_schema_accept_any_json(backend: Backend) {
    let (host, token, _scratch) = host(backend).await;
    // `contract-v0-1` is built against 0.1.0, whose description has no schema; `noop`
    // against 0.2.0, declaring none.
    for kind in ["contract-v0-1", "noop"] {
        deploy(&host, &token, kind);
        for input in [json!({"anything": [1, 2]}), json!([1, "two"]), json!("text"), json!(null), json!(7)] {
            let (status, body) = post_job(&host, &token, &json!({"kind": kind, "input": input})).await;
            assert_eq!(status, 201, "{kind} takes {input}: {body}");
        }
        let shown = host.cli(Some(&token), &["kinds", kind]);
        assert!(shown.stdout.contains("input: any JSON"), "{}", shown.stdout);
        let bare = host.cli(Some(&token), &["submit", kind]);
        assert_eq!(bare.code, 0, "{kind} without --input: {}", bare.stderr);
    }
    assert_eq!(jobs(&host, &token).len(), 12);
}

on_both_backends!(a_bad_payment_is_refused_before_anything_is_queued, kinds_without_a_schema_accept_any_json);

/// `spindle bench --only validation` runs both kinds' submissions and the bare check and
/// reports them (the figures themselves are the benchmark's business, not the test's).
#[test]
fn the_bench_submits_without_and_with_a_schema() {
    let report = spindle_tests::bench(&["--only", "validation", "--jobs", "200", "--submit-batch", "50"]);
    let validation = &report["validation"];
    assert_eq!(validation["jobs"], 200, "{validation}");
    assert_eq!(validation["rounds"].as_array().map(Vec::len), Some(5), "{validation}");
    for figure in ["untyped_jobs_per_sec", "typed_jobs_per_sec", "check_us", "check_share"] {
        assert!(validation[figure].as_f64().is_some_and(|f| f > 0.0), "{figure}: {validation}");
    }
    let target = report["targets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["what"].as_str().unwrap().contains("input schema")));
    assert!(target.is_some(), "the 10 % target is checked: {}", report["targets"]);
}
