//! Lean kinds end to end (issue 44): a real `spindle serve` on SQLite and PostgreSQL, a
//! kind deployed with `--record lean`, its jobs run, controlled, retried and fanned out
//! to as children; each is one row (no step row, no history row), and the API, the CLI
//! and the event stream show its lifecycle from that row.

use std::time::{Duration, Instant};

use serde_json::Value;
use spindle::store::Backend;
use spindle::store::sql::{Ty, Value as SqlValue};
use spindle_tests::guest_path;
use spindle_tests::harness::fresh_store;
use spindle_tests::served::Served;

on_both_backends!(a_lean_kind_runs_on_one_row_per_job_through_the_cli_and_the_api);

/// Longest a job here takes to reach the state a step waits for.
const PATIENCE: Duration = Duration::from_secs(60);

fn wasm(name: &str) -> String {
    guest_path(name).to_string_lossy().into_owned()
}

/// Step rows and history rows of job `id`.
async fn rows_of(store: &spindle::store::SqlStore, id: &str) -> (i64, i64) {
    let mut counts = [0; 2];
    for (i, table) in ["steps", "history"].into_iter().enumerate() {
        let sql = format!("SELECT count(*) FROM {table} WHERE job_id = $1");
        let rows = store.db().fetch(&sql, vec![SqlValue::from(id)], &[Ty::Int]).await.expect("count rows");
        counts[i] = rows[0].int(0, "count").expect("a count");
    }
    (counts[0], counts[1])
}

/// The job `id` as `spindle job --json` shows it.
fn job(host: &Served, token: Option<&str>, id: &str) -> Value {
    let shown = host.cli(token, &["job", id, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    shown.json()
}

/// Waits (polling the CLI) until job `id` is in `state`.
fn until_state(host: &Served, token: Option<&str>, id: &str, state: &str) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let job = job(host, token, id);
        if job["state"] == state {
            return job;
        }
        assert!(Instant::now() < deadline, "job {id} never reached {state}: {job}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn a_lean_kind_runs_on_one_row_per_job_through_the_cli_and_the_api(backend: Backend) {
    let (store, url, _scratch) = fresh_store(backend).await;
    let host = Served::start(&url, &[]);
    let bearer = host.tenant("acme");
    let token = Some(bearer.as_str());
    let deployed = host.cli(token, &["deploy", "scripted", &wasm("scripted"), "--record", "lean"]);
    assert_eq!(deployed.code, 0, "{}", deployed.stderr);
    let kinds = host.cli(token, &["kinds", "scripted", "--json"]).json();
    assert_eq!(kinds["versions"][0]["deployment"]["record"], "lean", "{kinds}");
    let shown = host.cli(token, &["kinds", "scripted"]);
    assert!(shown.stdout.contains("record lean"), "{}", shown.stdout);
    let refused = host.cli(token, &["deploy", "scripted", &wasm("scripted"), "--record", "thin"]);
    assert_ne!(refused.code, 0, "an unknown record is refused");

    // A job that retries its second step and succeeds: its lifecycle, from its row.
    let input = r#"{"second": ["retryable", "complete"]}"#;
    let id = host.cli(token, &["submit", "scripted", "--input", input]).stdout.trim().to_owned();
    assert_eq!(host.cli(token, &["wait", &id]).code, 0);
    let done = job(&host, token, &id);
    assert_eq!((done["state"].as_str(), done["record"].as_str()), (Some("succeeded"), Some("lean")), "{done}");
    assert!(done.get("history").is_none(), "a lean job has no history: {done}");
    assert!(done["started_at"].is_string() && done["settled_at"].is_string(), "{done}");
    assert_eq!(done["progress"], 100);
    assert_eq!(done["steps"][1]["attempts"].as_array().map(Vec::len), Some(2), "the retry shows: {done}");
    assert_eq!(done["steps"][0]["output"], serde_json::json!({"step": "first", "attempt": 1}), "its output: {done}");
    let human = host.cli(token, &["job", &id]);
    assert!(human.stdout.contains("keeps a lean record"), "{}", human.stdout);
    assert_eq!(rows_of(&store, &id).await, (0, 0), "one row, no step or history rows");
    // Its event stream: state changes only, then the end.
    let events = spindle_tests::http_client()
        .get(format!("{}/v1/jobs/{id}/events", host.url))
        .bearer_auth(&bearer)
        .send()
        .await
        .expect("events")
        .text()
        .await
        .expect("the stream");
    assert!(events.contains("event: job") && events.contains("event: end"), "{events}");
    assert!(!events.contains("event: history"), "{events}");

    // Run control: a delayed job paused, resumed and cancelled; a running one cancelled.
    let delayed = host.cli(token, &["submit", "scripted", "--delay", "3600"]).stdout.trim().to_owned();
    assert_eq!(host.cli(token, &["pause", &delayed]).code, 0);
    assert_eq!(job(&host, token, &delayed)["state"], "paused");
    assert_eq!(host.cli(token, &["resume", &delayed]).code, 0);
    assert_eq!(job(&host, token, &delayed)["state"], "pending");
    assert_eq!(host.cli(token, &["cancel", &delayed, "--reason", "not needed"]).code, 0);
    assert_eq!(job(&host, token, &delayed)["state"], "cancelled");
    let long = host.cli(token, &["submit", "scripted", "--input", r#"{"first": "wait-for-stop"}"#]);
    let long = long.stdout.trim().to_owned();
    until_state(&host, token, &long, "running");
    assert_eq!(host.cli(token, &["cancel", &long, "--reason", "stop it"]).code, 0);
    let cancelled = until_state(&host, token, &long, "cancelled");
    assert_eq!(cancelled["steps"][0]["failure"]["code"], "cancel.stopped", "the step in flight stopped: {cancelled}");

    // A failed job, retried: the successor is lean, carries the completed step, and runs
    // the rest.
    let failing = host.cli(token, &["submit", "scripted", "--input", r#"{"second": "refused"}"#]);
    let failing = failing.stdout.trim().to_owned();
    assert_eq!(host.cli(token, &["wait", &failing]).code, 1, "it fails");
    let failed = job(&host, token, &failing);
    assert_eq!(failed["failure"]["code"], "scripted-refused", "the last failure, from its row: {failed}");
    let retried = host.cli(token, &["retry", &failing, "--json"]);
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    let successor = retried.json()["id"].as_str().expect("the successor's id").to_owned();
    assert_eq!(host.cli(token, &["wait", &successor]).code, 1, "its second step is refused again");
    let second = job(&host, token, &successor);
    assert_eq!((second["record"].as_str(), second["predecessor"].as_str()), (Some("lean"), Some(failing.as_str())));
    assert_eq!(second["steps"][0]["state"], "completed", "carried: {second}");
    for id in [&delayed, &long, &failing, &successor] {
        assert_eq!(rows_of(&store, id).await, (0, 0), "job {id} is one row");
    }

    // A lean kind as a workflow's children (the parent full), under a running limit.
    let lean_child =
        host.cli(token, &["deploy", "thumbnail", &wasm("thumbnail"), "--record", "lean", "--max-running", "1"]);
    assert_eq!(lean_child.code, 0, "{}", lean_child.stderr);
    assert_eq!(host.cli(token, &["deploy", "order-fulfilment", &wasm("order-fulfilment")]).code, 0);
    let order = r#"{"order_id": "A-1", "images": ["a.jpg", "b.jpg", "c.jpg"], "ship_timeout_secs": 600}"#;
    let parent = host.cli(token, &["submit", "order-fulfilment", "--input", order]).stdout.trim().to_owned();
    let shipped = host.cli(token, &["signal", &parent, "shipped", "--data", r#"{"carrier": "ups", "tracking": "1Z"}"#]);
    assert_eq!(shipped.code, 0, "{}", shipped.stderr);
    let waited = host.cli(token, &["wait", &parent]);
    assert_eq!(waited.code, 0, "{} {}", waited.stdout, waited.stderr);
    let tree = host.cli(token, &["job", &parent]);
    assert_eq!(tree.stdout.matches("thumbnail succeeded").count(), 3, "{}", tree.stdout);
    let children = host.cli(token, &["jobs", "--parent", &parent, "--json"]).json();
    let children = children["jobs"].as_array().expect("children").clone();
    assert_eq!(children.len(), 3);
    for child in &children {
        let id = child["id"].as_str().expect("an id");
        let child = job(&host, token, id);
        assert_eq!((child["record"].as_str(), child["parent"].as_str()), (Some("lean"), Some(parent.as_str())));
        assert_eq!(rows_of(&store, id).await, (0, 0), "child {id} is one row");
    }
    let (parent_steps, parent_history) = rows_of(&store, &parent).await;
    assert!(parent_steps > 0 && parent_history > 0, "the full parent keeps its rows");
}
