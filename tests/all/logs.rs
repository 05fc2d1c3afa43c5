//! A job's logs, as its tenant reads them: what its steps' guests logged and printed, per
//! attempt, through the API and `spindle logs` — read whole once the job is done,
//! followed live while it runs — capped per job, the cap recorded with the job, and
//! another tenant's job's logs not found.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use spindle::engine::EngineConfig;
use spindle::store::{Backend, LogCaps};
use spindle_tests::harness::{Harness, test_engine_config};
use spindle_tests::served::Served;

/// A host on a fresh SQLite file, a tenant, and `kinds` deployed for it.
async fn host(kinds: &[(&str, &str)]) -> (Served, String, spindle_tests::harness::Scratch) {
    let (store, url, scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = Served::start(&url, &[]);
    let token = host.tenant("acme");
    for (kind, file) in kinds {
        let path = spindle_tests::guest_path(file);
        let ran = host.cli(Some(&token), &["deploy", kind, path.to_str().unwrap()]);
        assert_eq!(ran.code, 0, "deploy {kind}: {}", ran.stderr);
    }
    (host, token, scratch)
}

fn submit(host: &Served, token: &str, kind: &str, input: &Value) -> String {
    let ran = host.cli(Some(token), &["submit", kind, "--input", &input.to_string(), "--json"]);
    assert_eq!(ran.code, 0, "submit {kind}: {}", ran.stderr);
    ran.json()["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_jobs_logs_show_what_its_guests_logged_per_attempt() {
    let (host, token, _data) = host(&[("greet-rust", "greet-rust")]).await;
    let id = submit(&host, &token, "greet-rust", &json!({ "name": "Ada", "flaky": true }));
    let waited = host.cli(Some(&token), &["wait", &id, "--json"]);
    assert_eq!(waited.json()["state"], "succeeded");
    let ran = host.cli(Some(&token), &["logs", &id]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert!(lines[0].contains("compose#1") && lines[0].contains("composing a greeting for Ada"), "{}", ran.stdout);
    assert!(lines.iter().any(|l| l.contains("deliver#2") && l.contains("delivered Hello, Ada!")), "{}", ran.stdout);
    // One step's only, as JSON.
    let deliver = host.cli(Some(&token), &["logs", &id, "--step", "deliver", "--json"]).json();
    let lines = deliver["lines"].as_array().unwrap();
    assert!(!lines.is_empty() && lines.iter().all(|l| l["step"] == "deliver"), "{deliver}");
    assert_eq!(deliver["capped"], false);
    // Another tenant's job's logs are not found.
    let other = host.tenant("other");
    let refused = host.cli(Some(&other), &["logs", &id]);
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("not-found"), "{}", refused.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_jobs_logs_are_followed_live_until_it_ends() {
    let (host, token, _data) = host(&[("versioned", "versioned-v1")]).await;
    // Logs once, then heartbeats for about 10 s.
    let id = submit(&host, &token, "versioned", &json!({ "spins": 2_000 }));
    let mut follow = Command::new(spindle_tests::spindle_bin())
        .args(["logs", &id, "--follow"])
        .env("SPINDLE_SERVER", &host.url)
        .env("SPINDLE_TOKEN", &token)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spindle logs --follow");
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a line").expect("text");
    assert!(first.contains("version 1 heartbeats 2000 times"), "{first}");
    // The line came while the job was still running: it was followed, not read after.
    let now = host.cli(Some(&token), &["job", &id, "--json"]).json();
    assert_eq!(now["state"], "running", "the job runs on after its line was shown");
    // The follow ends by itself once the job is final.
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.is_empty(), "no line more: {rest:?}");
    assert!(follow.wait().unwrap().success());
    let done = host.cli(Some(&token), &["job", &id, "--json"]).json();
    assert_eq!(done["state"], "succeeded");
}

on_both_backends!(a_job_that_logs_without_bound_hits_its_cap_and_its_record_says_so);

async fn a_job_that_logs_without_bound_hits_its_cap_and_its_record_says_so(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine =
        h.engine_with(EngineConfig { log_caps: LogCaps { lines: 10, bytes: 1 << 20 }, ..test_engine_config() });
    // Twenty slices, each logging a line: ten are kept.
    let id = h.submit(&engine, "scripted", json!({ "first": "more:20" })).await;
    loop {
        let Some(claimed) = engine.execution().claim(1).await.unwrap().pop() else { break };
        engine.execution().execute(claimed).await;
    }
    assert!(engine.operations().job(&h.tenant, id).await.unwrap().job.state.is_final());
    let logs = spindle::store::LogStore::job_logs(h.store.as_ref(), id, None, 0, 1_000).await.unwrap();
    assert_eq!(logs.dropped, 10, "the lines past the cap are counted");
    assert_eq!(logs.lines.len(), 11, "ten lines and the host's note of the cap");
    let note = logs.lines.last().unwrap();
    assert!(note.message.contains("reached its log cap"), "{note:?}");
    assert_eq!(note.stream, spindle_runtime::Stream::Host);
}
