//! Hosts of two builds on one PostgreSQL database (issue 40): real `spindle serve`
//! processes, one pinned to storage format 1 (`--storage-format 1`: this binary reading
//! and writing as the build before format 2 did, see `spindle_core::upgrade`) and one of
//! this build, under load; the gate moves; the old host stops; an old build started
//! after the move refuses and writes nothing.
//!
//! Why the pin is faithful: format 2 changed one rule (a claim writes the job row alone,
//! and readers restore the attempt from the claim). A pinned host writes the step row at
//! every claim and never restores, exactly as the build before did, so what it reads of
//! a format-2 claim (its step still `queued`) is the misread an older build would make.
//! The misread check is shown to bite: with the gate bypassed (moved in the database
//! behind the live old host's back) the same check finds claimed steps read as queued.

use std::time::Duration;

use serde_json::{Value, json};
use spindle::sqlx::{self, PgPool};
use spindle_tests::served::Served;

/// Longest any wait here may take.
const PATIENCE: Duration = Duration::from_secs(120);

/// Two hosts (or more) on one database, a tenant, and the database itself.
struct Rolling {
    db: PgPool,
    database: String,
    http: reqwest::Client,
    token: String,
}

impl Rolling {
    async fn new() -> Self {
        let database = spindle_tests::postgres::fresh_database().await;
        Self {
            db: PgPool::connect(&database).await.expect("connect"),
            database,
            http: reqwest::Client::new(),
            token: String::new(),
        }
    }

    /// Starts a host: `pinned` to format 1 or of this build; every host renews its row
    /// rarely (a long lease), so that the bypassed gate is not noticed by the old one.
    fn host(&self, id: &str, pinned: bool, extra: &[&str]) -> Served {
        let mut args = vec!["--host-id", id, "--concurrency", "8", "--lease-ttl", "600s"];
        if pinned {
            args.extend(["--storage-format", "1"]);
        }
        args.extend_from_slice(extra);
        Served::start(&self.database, &args)
    }

    async fn get(&self, host: &Served, path: &str, token: &str) -> (u16, Value) {
        let answer = self.http.get(format!("{}{path}", host.url)).bearer_auth(token).send().await.expect("GET");
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, host: &Served, path: &str, token: &str, body: Value) -> (u16, Value) {
        let answer =
            self.http.post(format!("{}{path}", host.url)).bearer_auth(token).json(&body).send().await.expect("POST");
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    async fn submit(&self, host: &Served, input: Value) -> String {
        let (status, job) =
            self.post(host, "/v1/jobs", &self.token, json!({ "kind": "scripted", "input": input })).await;
        assert_eq!(status, 201, "submit: {job}");
        job["id"].as_str().expect("an id").to_owned()
    }

    /// `n` ordinary jobs (three steps that complete), through `hosts` in turn.
    async fn load(&self, hosts: &[&Served], n: usize) -> Vec<String> {
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            ids.push(self.submit(hosts[i % hosts.len()], json!({})).await);
        }
        ids
    }

    /// `n` probes: a first step that heartbeats, holding its claim, until cancelled.
    async fn probes(&self, host: &Served, n: usize) -> Vec<String> {
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(self.submit(host, json!({ "first": ["wait-for-stop", "complete"] })).await);
        }
        ids
    }

    /// Waits until `reader` shows every probe claimed; answers how many of them `other`
    /// reads as claimed with their running step still queued (a claim misread).
    async fn misreads(&self, reader: &Served, other: &Served, probes: &[String]) -> usize {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        for id in probes {
            loop {
                let (_, job) = self.get(reader, &format!("/v1/jobs/{id}"), &self.token).await;
                if job["claimed"] == true && job["steps"][0]["state"] == "running" {
                    break;
                }
                assert!(tokio::time::Instant::now() < deadline, "probe {id} never claimed: {job}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let mut misread = 0;
        for id in probes {
            let (_, job) = self.get(other, &format!("/v1/jobs/{id}"), &self.token).await;
            if job["claimed"] == true && job["steps"][0]["state"] == "queued" {
                misread += 1;
            }
        }
        misread
    }

    async fn cancel(&self, host: &Served, ids: &[String]) {
        for id in ids {
            let (status, body) =
                self.post(host, &format!("/v1/jobs/{id}/cancel"), &self.token, json!({ "reason": "probe done" })).await;
            assert_eq!(status, 200, "cancel {id}: {body}");
        }
    }

    async fn wait_final(&self, host: &Served, ids: &[String]) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        for id in ids {
            loop {
                assert!(tokio::time::Instant::now() < deadline, "job {id} never finished");
                let (_, job) = self.get(host, &format!("/v1/jobs/{id}/wait?timeout=30"), &self.token).await;
                if matches!(job["state"].as_str(), Some("succeeded" | "failed" | "cancelled")) {
                    break;
                }
            }
        }
    }

    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&self.db)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// What the database holds of jobs, steps, history, hosts and the gate, as one text.
    async fn snapshot(&self) -> String {
        let mut out = String::new();
        for sql in [
            "SELECT count(*) FROM jobs",
            "SELECT coalesce(sum(version), 0)::bigint FROM jobs",
            "SELECT count(*) FROM steps",
            "SELECT count(*) FROM history",
            "SELECT count(*) FROM hosts",
            "SELECT format FROM storage_gate",
        ] {
            out.push_str(&format!("{sql}: {}\n", self.count(sql).await));
        }
        out
    }

    /// Every job final once, every ordinary job's steps each started and completed once.
    async fn assert_exactly_once(&self, ordinary: &[String]) {
        let open =
            self.count("SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded', 'failed', 'cancelled')").await;
        assert_eq!(open, 0, "every job is final");
        let twice = self
            .count(
                "SELECT count(*) FROM (SELECT job_id FROM history WHERE event IN ('succeeded', 'failed', 'cancelled') \
                 GROUP BY 1 HAVING count(*) > 1) AS twice",
            )
            .await;
        assert_eq!(twice, 0, "no job settled twice");
        let rerun = self
            .count(
                "SELECT count(*) FROM (SELECT job_id, body::jsonb ->> 'step' FROM history \
                 WHERE event IN ('step_completed', 'step_started') GROUP BY 1, 2 HAVING count(*) > 2) AS rerun",
            )
            .await;
        assert_eq!(rerun, 0, "no step started again after it completed");
        let succeeded = self.count("SELECT count(*) FROM jobs WHERE state = 'succeeded'").await;
        assert!(succeeded >= ordinary.len() as i64, "every ordinary job succeeded: {succeeded} of {}", ordinary.len());
        let steps = self
            .count("SELECT count(*) FROM history WHERE event = 'step_completed' AND body::jsonb ->> 'step' IS NOT NULL")
            .await;
        assert!(steps >= 3 * ordinary.len() as i64, "three steps completed per ordinary job: {steps}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hosts_of_two_builds_share_a_database_through_the_gate_and_an_old_build_then_refuses() {
    let rolling = &mut Rolling::new().await;
    // The old build first: a database no host joined starts at the newest format it writes.
    let old = rolling.host("old", true, &[]);
    rolling.token = old.tenant("acme");
    let scripted = spindle_tests::guest_path("scripted");
    let ran = old.cli(Some(&rolling.token), &["deploy", "scripted", scripted.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "deploy: {}", ran.stderr);
    let new = rolling.host("new", false, &[]);
    let operator = new.operator.clone();

    let (_, hosts) = rolling.get(&new, "/v1/hosts", &operator).await;
    assert_eq!(hosts["gate"]["format"], 1, "{hosts}");
    let seen: Vec<(&str, &Value, bool)> = hosts["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .map(|h| (h["id"].as_str().unwrap_or_default(), &h["reads"], h["live"] == true))
        .collect();
    assert_eq!(seen, [("new", &json!([1, 2]), true), ("old", &json!([1, 1]), true)], "{hosts}");
    let (_, health) = rolling.get(&new, "/v1/health", "").await;
    assert_eq!(health["storage"]["writing"], 1, "the new build writes the old format while the old one runs");

    // Under load, both hosts claim; neither reads the other's claims wrong.
    let mut ordinary = rolling.load(&[&old, &new], 120).await;
    let probes = rolling.probes(&new, 8).await;
    assert_eq!(rolling.misreads(&new, &old, &probes).await, 0, "the old host reads every claim as it is");
    assert_eq!(rolling.misreads(&old, &new, &probes).await, 0, "and so does the new one");
    rolling.cancel(&new, &probes).await;

    // The gate waits for the old host.
    let (status, refused) = rolling.post(&new, "/v1/upgrade/finalize", &operator, json!({})).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("illegal-transition")), "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("old ("), "{refused}");

    // The old host stops (SIGTERM: it finishes or hands back what it holds, and leaves).
    ordinary.extend(rolling.load(&[&old, &new], 60).await);
    let (code, _) = old.terminate();
    assert_eq!(code, 0, "the old host stops cleanly");
    let ran = new.cli(Some(&operator), &["upgrade", "finalize", "--json"]);
    assert_eq!(ran.code, 0, "finalize: {}", ran.stderr);
    assert_eq!(ran.json(), json!({ "from": 1, "to": 2 }));
    let (_, health) = rolling.get(&new, "/v1/health", "").await;
    assert_eq!(health["storage"]["writing"], 2, "the new build writes format 2 at once");

    // Format 2 from now on: claims write the job row alone, and read back right.
    ordinary.extend(rolling.load(&[&new], 60).await);
    let probes = rolling.probes(&new, 4).await;
    assert_eq!(rolling.misreads(&new, &new, &probes).await, 0);
    rolling.cancel(&new, &probes).await;
    rolling.wait_final(&new, &ordinary).await;
    rolling.wait_final(&new, &probes).await;
    rolling.assert_exactly_once(&ordinary).await;

    // An old build started now refuses, says why, and writes nothing.
    let before = rolling.snapshot().await;
    let late = rolling.host("late-old", true, &[]);
    let (_, health) = rolling.get(&late, "/v1/health", "").await;
    assert_eq!(health["status"], "refusing", "{health}");
    let why = health["storage"]["refusal"].as_str().unwrap_or_default();
    assert!(why.contains("storage format is 2") && why.contains("refuses to claim or write"), "{why}");
    let (status, body) =
        rolling.post(&late, "/v1/jobs", &rolling.token, json!({ "kind": "scripted", "input": {} })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("storage-format")), "{body}");
    let metrics = late.cli(Some(&operator), &["hosts"]);
    assert_eq!(metrics.code, 0, "{}", metrics.stderr);
    assert!(!metrics.stdout.contains("late-old"), "a refused host keeps no row:\n{}", metrics.stdout);
    let (_, text) = (0, {
        let answer = rolling.http.get(format!("{}/metrics", late.url)).bearer_auth(&operator).send().await;
        answer.expect("metrics").text().await.expect("text")
    });
    assert!(text.contains("spindle_storage_format_refusing 1"), "{text}");
    assert_eq!(rolling.snapshot().await, before, "the refusing host wrote nothing");
    let (code, _) = late.terminate();
    assert_eq!(code, 0);
    assert_eq!(rolling.snapshot().await, before, "nor when it stopped");
}

/// The misread check bites: the gate moved behind a live old host's back (as a gate that
/// did not wait for every host would), the new build writes format 2, and the old host
/// reads its claimed steps as queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_gate_bypassed_the_old_build_misreads_claims() {
    let rolling = &mut Rolling::new().await;
    // The old host runs no `scripted` steps, so that every probe is the new host's claim.
    let old = rolling.host("old", true, &["--kinds", "noop"]);
    rolling.token = old.tenant("acme");
    let scripted = spindle_tests::guest_path("scripted");
    let ran = old.cli(Some(&rolling.token), &["deploy", "scripted", scripted.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "deploy: {}", ran.stderr);
    sqlx::query("UPDATE storage_gate SET format = 2").execute(&rolling.db).await.expect("bypass the gate");
    let new = rolling.host("new", false, &[]);
    let (_, health) = rolling.get(&new, "/v1/health", "").await;
    assert_eq!(health["storage"]["writing"], 2);
    let probes = rolling.probes(&new, 4).await;
    assert_eq!(rolling.misreads(&new, &old, &probes).await, probes.len(), "every claim misread by the old build");
    rolling.cancel(&new, &probes).await;
    rolling.wait_final(&new, &probes).await;
}
