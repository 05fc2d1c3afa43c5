//! Crash recovery: a host killed with SIGKILL mid-run loses nothing. After its claims
//! lapse, another host rescues them with higher fences and runs those steps again
//! (at-least-once execution), and every step's outcome is committed exactly once.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use spindle::engine::SubmitRequest;
use spindle::store::prelude::*;
use spindle::store::{Backend, JobFilter};
use spindle_core::{HistoryEvent, JobId, JobState};
use spindle_tests::harness::Harness;
use spindle_tests::spindle_bin;

on_both_backends!(
    a_host_killed_mid_run_leaves_every_job_settled_once_after_restart,
    a_fan_out_of_a_thousand_survives_hosts_killed_during_it,
    signals_survive_hosts_killed_between_arrival_and_answer,
);

async fn a_host_killed_mid_run_leaves_every_job_settled_once_after_restart(backend: Backend) {
    const JOBS: usize = 40;
    let h = Harness::new(backend).await;
    h.deploy_as("versioned", "versioned-v1").await;
    let engine = h.engine();
    // Each step heartbeats 60 times, 5 ms apart: long enough to be caught mid-step.
    let requests = (0..JOBS)
        .map(|_| SubmitRequest { kind: "versioned".into(), input: br#"{"spins": 60}"#.to_vec(), ..Default::default() })
        .collect();
    let ids: Vec<JobId> =
        engine.submission().submit_many(&h.tenant, requests).await.unwrap().iter().map(|i| i.record().job.id).collect();

    let data = spindle_tests::harness::Scratch::new();
    let mut child = serve(&h, &data, &["--concurrency", "16"]);
    // Kill it as soon as it has committed some steps (so others are in flight).
    let filter = JobFilter { state: Some(JobState::Succeeded), limit: 1000, ..Default::default() };
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("spindle serve exited early: {status}");
        }
        let done = h.store.list_jobs(&h.tenant, &filter).await.unwrap().len();
        if done >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
    let claimed_at_kill = count_open_claims(&h, &ids).await;
    assert!(claimed_at_kill > 0, "the kill should catch steps in flight");

    // A new host takes over: the dead host's claims lapse and are rescued.
    let survivor = h.engine();
    let dispatcher = h.dispatch(&survivor);
    for id in &ids {
        assert_eq!(h.wait_final(*id).await.job.state, JobState::Succeeded, "job {id}");
    }
    dispatcher.shutdown(Duration::from_secs(5)).await;

    let mut commits: HashMap<JobId, usize> = HashMap::new();
    let mut rescued = 0;
    for id in &ids {
        for entry in h.store.history(*id).await.unwrap() {
            match entry.event {
                HistoryEvent::StepCompleted { .. } => *commits.entry(*id).or_default() += 1,
                HistoryEvent::Rescued { .. } => rescued += 1,
                _ => {}
            }
        }
    }
    assert!(ids.iter().all(|id| commits.get(id) == Some(&1)), "every step committed exactly once: {commits:?}");
    assert!(rescued >= claimed_at_kill, "the steps in flight at the kill were rescued ({rescued} < {claimed_at_kill})");
}

async fn count_open_claims(h: &Harness, ids: &[JobId]) -> usize {
    let mut n = 0;
    for id in ids {
        if h.store.job(*id).await.unwrap().unwrap().job.claim.is_some() {
            n += 1;
        }
    }
    n
}

/// Starts `spindle serve` on the harness's database with a short lease and `extra` flags.
fn serve(h: &Harness, data: &spindle_tests::harness::Scratch, extra: &[&str]) -> std::process::Child {
    Command::new(spindle_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--lease-ttl", "2s", "--step-timeout", "1s"])
        .args(extra)
        .arg("--database-url")
        .arg(&h.url)
        .arg("--data-dir")
        .arg(&data.path)
        .env("SPINDLE_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start spindle serve")
}

/// Counts rows with `sql` (one bound parameter: the parent's id).
async fn count(h: &Harness, sql: &str, parent: JobId) -> i64 {
    use spindle::store::sql::{Ty, Value};
    let rows = h.store.db().fetch(sql, vec![Value::from(parent.to_string())], &[Ty::Int]).await.expect("count");
    rows.first().map_or(0, |r| r.int(0, "test row").expect("a decodable row"))
}

/// A step fans out 1,000 children while hosts are killed with SIGKILL at random points
/// (before the fan-out commits, and after a random number of children settled) and
/// started again: exactly 1,000 children exist afterwards, each completed its step
/// once, and the parent completes with all 1,000 results.
async fn a_fan_out_of_a_thousand_survives_hosts_killed_during_it(backend: Backend) {
    use rand::{Rng, SeedableRng};
    const CHILDREN: i64 = 1_000;
    let seed: u64 = std::env::var("SPINDLE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("fan-out kills: SPINDLE_TEST_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let h = Harness::new(backend).await;
    h.deploy("workflow").await;
    h.deploy("noop").await;
    let engine = h.engine();
    let input = serde_json::json!({ "fan_out": CHILDREN, "child_kind": "noop" });
    let request =
        SubmitRequest { kind: "workflow".into(), input: serde_json::to_vec(&input).unwrap(), ..Default::default() };
    let parent = engine.submission().submit(&h.tenant, request).await.unwrap().record().job.id;
    let children = "SELECT count(*) FROM jobs WHERE parent_id = $1";
    let settled = "SELECT count(*) FROM jobs WHERE parent_id = $1 AND settled_at IS NOT NULL";
    let data = spindle_tests::harness::Scratch::new();
    // Kill points: while the parent's first call runs (before its fan-out commits, or
    // just after), then at random numbers of settled children.
    let mut points: Vec<i64> = (0..3).map(|_| rng.random_range(1..CHILDREN - 50)).collect();
    points.sort_unstable();
    let mut kills = 0;
    let mut host = serve(&h, &data, &[]);
    loop {
        if let Some(status) = host.try_wait().unwrap() {
            panic!("spindle serve exited early: {status}");
        }
        let record = h.store.job(parent).await.unwrap().unwrap();
        let made = count(&h, children, parent).await;
        let done = count(&h, settled, parent).await;
        let due = match kills {
            0 => record.job.claim.is_some() || made > 0,
            k => points.get(k - 1).is_some_and(|p| done >= *p),
        };
        if due {
            host.kill().expect("SIGKILL");
            host.wait().unwrap();
            eprintln!("killed a host with {made} children created, {done} settled");
            kills += 1;
            if kills > points.len() {
                break;
            }
            host = serve(&h, &data, &[]);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A survivor finishes the work once the dead hosts' claims lapse.
    let survivor = h.engine();
    let dispatcher = h.dispatch(&survivor);
    let record = h.wait_final(parent).await;
    dispatcher.shutdown(Duration::from_secs(5)).await;
    assert_eq!(record.job.state, JobState::Succeeded, "{:?}", record.job.failure);
    assert_eq!(count(&h, children, parent).await, CHILDREN, "exactly {CHILDREN} children");
    let output: serde_json::Value = serde_json::from_slice(record.job.steps[0].output.as_deref().unwrap()).unwrap();
    assert_eq!(output["succeeded"], CHILDREN);
    assert_eq!(output["children"].as_array().map(Vec::len), Some(1_000));
    let ids: Vec<JobId> =
        output["children"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().parse().unwrap()).collect();
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), 1_000, "each result is a different child");
    for id in ids {
        let completed = h
            .store
            .history(id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| matches!(e.event, HistoryEvent::StepCompleted { .. }))
            .count();
        assert_eq!(completed, 1, "child {id} completed its step once");
    }
}

/// Where a round stops the host a signal was sent to before killing it.
#[derive(Clone, Copy, Debug)]
enum SignalKill {
    /// Before anything of the signal is written.
    Arrived,
    /// Once the signal's write committed, before the answer is sent.
    Stored,
    /// At a random moment 0-8 ms after the request went out.
    Random,
}

/// POSTs signal `go` to job `id` with an idempotency key; answers the status, or the
/// error of a request whose host died before answering.
async fn post_signal(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    id: &str,
    key: &str,
    body: String,
) -> Result<u16, reqwest::Error> {
    http.post(format!("{base}/v1/jobs/{id}/signals/go"))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(body)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .map(|r| r.status().as_u16())
}

/// With no host running: the job's view shows every signal stored and not consumed.
async fn assert_no_invisible_signal(store: &spindle::store::SqlStore, id: JobId, round: usize) {
    use spindle::store::sql::{Ty, Value};
    let rows = store
        .db()
        .fetch(
            "SELECT count(*) FROM signals WHERE job_id = $1 AND consumed_at IS NULL",
            vec![Value::from(id.to_string())],
            &[Ty::Int],
        )
        .await
        .expect("count");
    let stored = rows.first().map_or(0, |r| r.int(0, "test row").expect("a decodable row"));
    let job = store.job(id).await.expect("read").expect("the job");
    let shown: u32 = job.job.signals.values().sum();
    assert_eq!(i64::from(shown), stored, "round {round}: unconsumed signals stored {stored}, the job shows {shown}");
}

/// A job awaits 30 signals while the host each one is sent to is killed with SIGKILL:
/// before the signal is written, after it committed but before the answer, or at a
/// random moment. The client, answered or not, sends it again with the same key to the
/// next host. Every signal is delivered exactly once and in order, and at every kill the
/// job's view shows each signal stored and not yet consumed.
async fn signals_survive_hosts_killed_between_arrival_and_answer(backend: Backend) {
    use rand::{Rng, SeedableRng};
    use spindle::failpoints;
    use spindle_tests::harness::{Scratch, fresh_store};
    use spindle_tests::served::Served;
    const ROUNDS: usize = 30;
    let seed: u64 = std::env::var("SPINDLE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("signal kills: SPINDLE_TEST_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (store, url, _db) = fresh_store(backend).await;
    let flags = ["--lease-ttl", "2s", "--step-timeout", "1s"];
    let first = Served::start(&url, &flags);
    let token = first.tenant("acme");
    let wasm = spindle_tests::guest_path("workflow").to_string_lossy().into_owned();
    assert_eq!(first.cli(Some(&token), &["deploy", "workflow", &wasm]).code, 0);
    let input = serde_json::json!({ "signal": "go", "timeout_secs": 600, "waits": ROUNDS }).to_string();
    let submitted = first.cli(Some(&token), &["submit", "workflow", "--input", &input]);
    assert_eq!(submitted.code, 0, "{}", submitted.stderr);
    let id_text = submitted.stdout.trim().to_owned();
    let id: JobId = id_text.parse().expect("a job id");
    drop(first.kill_hard());
    let http = spindle_tests::http_client();
    let mut host = None;
    for round in 0..ROUNDS {
        drop(host.take().map(Served::kill_hard));
        let kill = [SignalKill::Arrived, SignalKill::Stored, SignalKill::Random][round % 3];
        let point = match kill {
            SignalKill::Arrived => "signal.arrived",
            SignalKill::Stored => "signal.stored",
            SignalKill::Random => "",
        };
        let receiver = Served::start_with_env(Scratch::new(), &url, &flags, &[(failpoints::ENV, point)]);
        let key = format!("round-{round}");
        let body = serde_json::json!({ "n": round }).to_string();
        let send = tokio::spawn({
            let (http, base, token, id, key, body) =
                (http.clone(), receiver.url.clone(), token.clone(), id_text.clone(), key.clone(), body.clone());
            async move { post_signal(&http, &base, &token, &id, &key, body).await }
        });
        match kill {
            SignalKill::Random => tokio::time::sleep(Duration::from_micros(rng.random_range(0..8_000))).await,
            _ => assert!(
                receiver.wait_for_output(&format!("{}{point}", failpoints::REACHED), Duration::from_secs(60)),
                "round {round}: the host never reached {point}"
            ),
        }
        drop(receiver.kill_hard());
        let answered = send.await.expect("the sender");
        if !matches!(kill, SignalKill::Random) {
            assert!(answered.is_err(), "round {round}: a host killed at {point} answered {answered:?}");
        }
        assert_no_invisible_signal(&store, id, round).await;
        // The client sends it again, with the same key, to the next host.
        let next = Served::start(&url, &flags);
        let again = post_signal(&http, &next.url, &token, &id_text, &key, body).await;
        assert_eq!(again.ok(), Some(202), "round {round} ({kill:?}): the retried signal is accepted");
        host = Some(next);
    }
    let host = host.expect("a host");
    let waited = host.cli(Some(&token), &["wait", &id_text]);
    assert_eq!(waited.code, 0, "the job succeeds: {} {}", waited.stdout, waited.stderr);
    let job = host.cli(Some(&token), &["job", &id_text, "--json"]).json();
    let delivered: Vec<serde_json::Value> = job["steps"][0]["output"]["signals"].as_array().expect("signals").clone();
    let want: Vec<serde_json::Value> = (0..ROUNDS).map(|n| serde_json::json!({ "n": n })).collect();
    assert_eq!(delivered, want, "seed {seed}: each signal delivered once, in order");
    drop(host.kill_hard());
    assert_no_invisible_signal(&store, id, ROUNDS).await;
}
