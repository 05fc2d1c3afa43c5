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
//!
//! Format 3 (lean kinds' jobs are one row) is rehearsed with a host pinned to format 2:
//! while it is live, a lean record is refused at deploy.

use std::time::Duration;

use serde_json::{Value, json};
use spindle::sqlx::{self, PgPool};
use spindle::store::JobStore;
use spindle::store::schema::Phase;
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
            http: spindle_tests::http_client(),
            token: String::new(),
        }
    }

    /// Starts a host: `pinned` to format 1 or of this build; every host renews its row
    /// rarely (a long lease), so that the bypassed gate is not noticed by the old one.
    fn host(&self, id: &str, pinned: bool, extra: &[&str]) -> Served {
        self.host_at(id, pinned.then_some("1"), extra)
    }

    /// Starts a host pinned to storage format `format`, or of this build.
    fn host_at(&self, id: &str, format: Option<&str>, extra: &[&str]) -> Served {
        let mut args = vec!["--host-id", id, "--concurrency", "8", "--lease-ttl", "600s"];
        if let Some(format) = format {
            args.extend(["--storage-format", format]);
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

/// One host id, two processes (a surge, or a rollback in place while the old process
/// still finishes a step): the new one overwrote the old one's row, or deleted it as it
/// stopped, and the gate moved with an old-build process alive. Each process announces
/// itself under its own instance now, removes only its own row, and the gate counts
/// every live process. `spindle hosts` names each build by version and commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_of_one_host_id_are_two_hosts_to_the_gate() {
    let rolling = &mut Rolling::new().await;
    let old = rolling.host("h1", true, &[]);
    let new = rolling.host("h1", false, &[]);
    let operator = new.operator.clone();
    let processes = |hosts: &Value| -> Vec<(String, String, bool)> {
        hosts["hosts"]
            .as_array()
            .expect("hosts")
            .iter()
            .filter(|h| h["live"] == true)
            .map(|h| {
                (
                    h["id"].as_str().unwrap().to_owned(),
                    h["instance"].as_str().unwrap().to_owned(),
                    h["reads"] == json!([1, 1]),
                )
            })
            .collect()
    };
    let (_, hosts) = rolling.get(&new, "/v1/hosts", &operator).await;
    let live = processes(&hosts);
    assert_eq!(live.len(), 2, "two processes of h1: {hosts}");
    assert!(live.iter().all(|(id, instance, _)| id == "h1" && instance.len() == 8), "{hosts}");
    assert_ne!(live[0].1, live[1].1, "each its own instance");
    let build = hosts["hosts"][0]["build"].as_str().unwrap();
    assert!(
        build.starts_with("spindle ") && build.contains(" (") && build.ends_with(')'),
        "version and commit: {build}"
    );
    // The old-build process holds the gate, whoever shares its id.
    let (status, refused) = rolling.post(&new, "/v1/upgrade/finalize", &operator, json!({})).await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("h1 [process "), "{refused}");
    // A third process of h1 stops: it removes its own row, not the old one's.
    let third = rolling.host("h1", false, &[]);
    let (code, _) = third.terminate();
    assert_eq!(code, 0);
    let (_, hosts) = rolling.get(&new, "/v1/hosts", &operator).await;
    let live = processes(&hosts);
    assert_eq!(live.len(), 2, "the old process and the new one: {hosts}");
    assert!(live.iter().any(|(_, _, old)| *old), "the old build's row stays: {hosts}");
    let (status, _) = rolling.post(&new, "/v1/upgrade/finalize", &operator, json!({})).await;
    assert_eq!(status, 409, "still held by the old process");
    let (code, _) = old.terminate();
    assert_eq!(code, 0);
    let (status, moved) = rolling.post(&new, "/v1/upgrade/finalize", &operator, json!({})).await;
    assert_eq!(status, 200, "{moved}");
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
    assert_eq!(seen, [("new", &json!([1, 3]), true), ("old", &json!([1, 1]), true)], "{hosts}");
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
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("old [process "), "{refused}");

    // The old host stops (SIGTERM: it finishes or hands back what it holds, and leaves).
    ordinary.extend(rolling.load(&[&old, &new], 60).await);
    let (code, _) = old.terminate();
    assert_eq!(code, 0, "the old host stops cleanly");
    let ran = new.cli(Some(&operator), &["upgrade", "finalize", "--json"]);
    assert_eq!(ran.code, 0, "finalize: {}", ran.stderr);
    assert_eq!(ran.json(), json!({ "from": 1, "to": 3 }));
    let (_, health) = rolling.get(&new, "/v1/health", "").await;
    assert_eq!(health["storage"]["writing"], 3, "the new build writes format 3 at once");

    // Format 3 from now on: claims write the job row alone, and read back right.
    ordinary.extend(rolling.load(&[&new], 60).await);
    let probes = rolling.probes(&new, 4).await;
    assert_eq!(rolling.misreads(&new, &new, &probes).await, 0);
    rolling.cancel(&new, &probes).await;
    rolling.wait_final(&new, &ordinary).await;
    rolling.wait_final(&new, &probes).await;
    rolling.assert_exactly_once(&ordinary).await;

    // An old build started now refuses, says why, and writes nothing. (First the new
    // host's after-commit effects, which add history, run out.)
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while rolling.count("SELECT count(*) FROM outbox").await > 0 {
        assert!(tokio::time::Instant::now() < deadline, "the outbox never drained");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = rolling.snapshot().await;
    let late = rolling.host("late-old", true, &[]);
    let (status, health) = rolling.get(&late, "/v1/health", "").await;
    assert_eq!((status, health["status"].as_str()), (503, Some("refusing")), "{health}");
    let why = health["storage"]["refusal"].as_str().unwrap_or_default();
    assert!(why.contains("storage format is 3") && why.contains("refuses to claim or write"), "{why}");
    let (status, body) =
        rolling.post(&late, "/v1/jobs", &rolling.token, json!({ "kind": "scripted", "input": {} })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("storage-format")), "{body}");
    // Reads too: a build that cannot read the format serves no misread as the truth.
    let job = ordinary[0].clone();
    for (path, token) in [
        (format!("/v1/jobs/{job}"), rolling.token.as_str()),
        ("/v1/jobs".to_owned(), rolling.token.as_str()),
        ("/v1/kinds".to_owned(), rolling.token.as_str()),
        ("/v1/tenants".to_owned(), operator.as_str()),
    ] {
        let (status, body) = rolling.get(&late, &path, token).await;
        assert_eq!((status, body["error"]["code"].as_str()), (503, Some("storage-format")), "{path}: {body}");
    }
    let (status, body) = rolling.post(&late, "/v1/tenants", &operator, json!({ "name": "initech" })).await;
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

/// A database as a host of the build before 0015 left it (0015 to 0022 and the
/// swap undone, on its empty tables), then a host's engine (its dispatcher running) with
/// 100,000 finished jobs, their steps and history.
async fn before_0015_with_100_000_jobs(
    h: &spindle_tests::harness::Harness,
) -> (PgPool, std::sync::Arc<spindle::engine::Engine>, spindle::dispatcher::Dispatcher) {
    let db = PgPool::connect(&h.url).await.expect("connect");
    // The kind is deployed first: this build writes what a component compiles to (0021).
    h.deploy("noop").await;
    // The database as a host of the build before 0015 left it: 0015 to 0022 and the swap
    // undone (on empty tables, at once).
    let undo = [
        "DROP INDEX signals_key",
        "ALTER TABLE signals DROP COLUMN idempotency_key",
        "DROP TABLE hosts, storage_gate",
        "DROP VIEW sql_submissions, sql_roles",
        "DROP SCHEMA spindle CASCADE",
        "ALTER TABLE components DROP COLUMN compiled_size",
        "ALTER TABLE api_tokens DROP COLUMN minted_by",
        "DELETE FROM spindle_schema WHERE version >= 15",
    ];
    for sql in undo {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&db).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let text: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND data_type = 'text' AND table_name <> 'spindle_schema'",
    )
    .fetch_all(&db)
    .await
    .expect("text columns");
    for (table, column) in &text {
        let sql = format!("ALTER TABLE {table} ALTER COLUMN \"{column}\" TYPE TEXT COLLATE \"default\"");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&db).await.expect("back to the database's collation");
    }

    // A host, one finished job, and 100,000 more like it (with their steps and history).
    let engine = h.engine();
    let dispatcher = h.dispatch(&engine);
    let seed = h.submit(&engine, "noop", json!({})).await;
    h.wait_final(seed).await;
    for (table, key) in [("jobs", "id"), ("steps", "job_id"), ("history", "job_id")] {
        let columns: Vec<String> = sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns WHERE table_schema = current_schema() \
             AND table_name = $1 AND column_name NOT IN ('seq', 'id') ORDER BY ordinal_position",
        )
        .bind(table)
        .fetch_all(&db)
        .await
        .expect("columns");
        let (into, from): (Vec<String>, Vec<String>) =
            columns.iter().filter(|c| c.as_str() != key).map(|c| (format!("\"{c}\""), format!("t.\"{c}\""))).unzip();
        let sql = format!(
            "INSERT INTO {table} ({key}, {}) SELECT 'bulk-' || g, {} FROM {table} t, generate_series(1, 100000) g \
             WHERE t.{key} = '{seed}'",
            into.join(", "),
            from.join(", ")
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&db).await.unwrap_or_else(|e| panic!("fill {table}: {e}"));
    }
    sqlx::raw_sql("ANALYZE").execute(&db).await.expect("analyze");
    assert!(h.store.job(seed).await.expect("read").is_some());
    (db, engine, dispatcher)
}

/// The schema's steps that can run beside a host (0015's online collation change, 0016,
/// 0017, 0019, and 0015's swap, the one contract step) run while a host keeps claiming and
/// committing on a table of 100,000 jobs, and no statement of that host waits on a lock
/// for longer than the steps' lock timeout and their own few milliseconds. (Steps 1-14
/// create the tables a host needs: none can run before them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn migrations_run_beside_a_host_that_keeps_claiming_and_committing() {
    let h = spindle_tests::harness::Harness::new(spindle::store::Backend::Postgres).await;
    let (db, engine, dispatcher) = before_0015_with_100_000_jobs(&h).await;

    // The host keeps claiming and committing: jobs submitted one after another, each
    // awaited, until the migration is done.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (engine, stop) = (engine.clone(), stop.clone());
        let tenant = h.tenant.clone();
        tokio::spawn(async move {
            let mut done = 0_u64;
            let mut changes = engine.subscribe();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let request =
                    spindle::engine::SubmitRequest { kind: "noop".into(), input: b"{}".to_vec(), ..Default::default() };
                let id = engine.submission().submit(&tenant, request).await.expect("submit").record().job.id;
                loop {
                    match changes.recv().await {
                        Ok(change) if change.job == id && change.to.is_final() => break,
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(e) => panic!("state changes: {e}"),
                    }
                }
                done += 1;
            }
            done
        })
    };
    // The longest any of the host's statements has waited on a lock, sampled.
    let sampler = {
        let (db, stop) = (db.clone(), stop.clone());
        tokio::spawn(async move {
            let mut longest = 0.0_f64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let waited: Option<f64> = sqlx::query_scalar(
                    "SELECT max(extract(epoch FROM clock_timestamp() - query_start))::float8 FROM pg_stat_activity \
                     WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() \
                     AND query NOT ILIKE 'CREATE%' AND query NOT ILIKE 'ALTER%' AND query NOT ILIKE 'DROP%' \
                     AND query NOT ILIKE '%spindle_schema%' AND query NOT ILIKE '%pg_advisory%'",
                )
                .fetch_one(&db)
                .await
                .expect("sample");
                longest = longest.max(waited.unwrap_or(0.0));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            longest
        })
    };

    let started = std::time::Instant::now();
    let expanded = h.store.migrate(&[Phase::Expand]).await.expect("expand beside the host");
    let expand_took = started.elapsed();
    let contracted = h.store.migrate(&[Phase::Contract]).await.expect("contract beside the host");
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let committed = load.await.expect("the load");
    let longest = sampler.await.expect("the sampler");
    dispatcher.shutdown(Duration::from_secs(5)).await;
    eprintln!(
        "expand ({expanded} steps) {expand_took:?}, contract ({contracted}) {:?}; {committed} jobs committed meanwhile; \
         longest lock wait of the host's statements {:.0} ms",
        took - expand_took,
        longest * 1000.0
    );
    assert_eq!((expanded, contracted), (7, 1), "0015's twins, 0016, 0017, 0019 to 0022; then the swap");
    assert!(committed > 0, "the host kept committing while the schema changed");
    assert!(longest < 0.5, "a statement of the host waited {longest:.3} s on the migration's locks");

    assert_migrated_keeping_every_job(&db).await;
}

/// docs/operations.md's runbook, end to end: three hosts of the previous build (pinned to
/// format 1) rolled one by one to this build while jobs run (some checkpointing through
/// slices as their hosts stop), one of them rolled back and forward again before the
/// finalize, then the gate moved and the contract steps run; every job final once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_upgrade_of_three_hosts_follows_the_runbook() {
    let rolling = &mut Rolling::new().await;
    let mut hosts: Vec<(String, Served)> =
        (1..=3).map(|i| (format!("h{i}-old"), rolling.host(&format!("h{i}-old"), true, &[]))).collect();
    rolling.token = hosts[0].1.tenant("acme");
    let scripted = spindle_tests::guest_path("scripted");
    let ran = hosts[0].1.cli(Some(&rolling.token), &["deploy", "scripted", scripted.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "deploy: {}", ran.stderr);
    let operator = hosts[0].1.operator.clone();
    let mut ordinary = Vec::new();
    let mut sliced = Vec::new();

    // Step 2 for each host; the second is rolled back, then forward again.
    for (from, to) in [
        ("h1-old", ("h1-new", false)),
        ("h2-old", ("h2-new", false)),
        ("h2-new", ("h2-old", true)),
        ("h2-old", ("h2-new", false)),
        ("h3-old", ("h3-new", false)),
    ] {
        let refs: Vec<&Served> = hosts.iter().map(|(_, h)| h).collect();
        ordinary.extend(rolling.load(&refs, 30).await);
        sliced.push(rolling.submit(refs[0], json!({ "first": "more:20" })).await);
        let (to, pinned) = to;
        hosts.push((to.to_owned(), rolling.host(to, pinned, &[])));
        let i = hosts.iter().position(|(id, _)| id == from).expect("the host to stop");
        let (_, old) = hosts.remove(i);
        let (code, _) = old.terminate();
        assert_eq!(code, 0, "{from} stops cleanly");
    }
    let hosts: Vec<Served> = hosts.into_iter().map(|(_, h)| h).collect();

    // Step 3: only the new build is live.
    let list = hosts[0].cli(Some(&operator), &["hosts", "--json"]).json();
    let live: Vec<(String, Value)> = list["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter(|h| h["live"] == true)
        .map(|h| (h["id"].as_str().unwrap_or_default().to_owned(), h["reads"].clone()))
        .collect();
    assert_eq!(live.len(), 3, "{list}");
    assert!(live.iter().all(|(id, reads)| id.ends_with("-new") && *reads == json!([1, 3])), "{list}");
    assert_eq!(list["gate"]["format"], 1, "the gate has not moved yet");

    // Steps 4 and 5.
    let moved = hosts[0].cli(Some(&operator), &["upgrade", "finalize", "--json"]);
    assert_eq!(moved.code, 0, "{}", moved.stderr);
    let contract = std::process::Command::new(spindle_tests::spindle_bin())
        .args(["migrate", "--contract", "--database-url", &rolling.database])
        .output()
        .expect("spindle migrate");
    assert!(contract.status.success(), "{}", String::from_utf8_lossy(&contract.stderr));
    assert!(String::from_utf8_lossy(&contract.stdout).contains("contract steps: 1 run"));

    let refs: Vec<&Served> = hosts.iter().collect();
    ordinary.extend(rolling.load(&refs, 40).await);
    rolling.wait_final(&hosts[0], &ordinary).await;
    rolling.wait_final(&hosts[0], &sliced).await;
    rolling.assert_exactly_once(&ordinary).await;
    for id in &sliced {
        let (_, job) = rolling.get(&hosts[0], &format!("/v1/jobs/{id}"), &rolling.token).await;
        assert_eq!(job["state"], "succeeded", "{job}");
    }
}

/// A host started with `--drain` serves the API and claims nothing: a job submitted
/// through it waits until a host that is not draining runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draining_host_claims_nothing() {
    let rolling = &mut Rolling::new().await;
    let draining = rolling.host("draining", false, &["--drain"]);
    rolling.token = draining.tenant("acme");
    let scripted = spindle_tests::guest_path("scripted");
    let ran = draining.cli(Some(&rolling.token), &["deploy", "scripted", scripted.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "deploy: {}", ran.stderr);
    let (_, health) = rolling.get(&draining, "/v1/health", "").await;
    assert_eq!((health["status"].as_str(), health["draining"].as_bool()), (Some("ok"), Some(true)), "{health}");
    let jobs = rolling.load(&[&draining], 5).await;
    let listed = draining.cli(Some(&draining.operator), &["hosts", "--json"]).json();
    assert_eq!(listed["hosts"][0]["draining"], true, "{listed}");
    let (_, job) = rolling.get(&draining, &format!("/v1/jobs/{}", jobs[0]), &rolling.token).await;
    assert_eq!(job["state"], "pending", "{job}");

    let worker = rolling.host("worker", false, &[]);
    rolling.wait_final(&worker, &jobs).await;
    rolling.assert_exactly_once(&jobs).await;
    let metrics = rolling.http.get(format!("{}/metrics", draining.url)).bearer_auth(&draining.operator).send().await;
    let metrics = metrics.expect("metrics").text().await.expect("text");
    assert!(metrics.contains("spindle_claimed_jobs_total 0\n"), "the draining host claimed:\n{metrics}");
    assert!(metrics.contains("spindle_host_draining 1"), "{metrics}");
    assert!(metrics.contains("spindle_host_steps_running 0\n"), "empty: {metrics}");
    let worked = rolling.http.get(format!("{}/metrics", worker.url)).bearer_auth(&worker.operator).send().await;
    let worked = worked.expect("metrics").text().await.expect("text");
    assert!(worked.contains("spindle_host_steps_running 0\n"), "every step it ran ended: {worked}");
}

/// The migrating host dies while it builds a twin index concurrently (its session ended
/// as a SIGKILL ends it): the build leaves an invalid index, the schema is otherwise as
/// it was, and the next run drops it, builds it again and finishes; the swap then
/// completes, every job kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_migration_killed_while_it_builds_an_index_concurrently_finishes_on_the_next_run() {
    let h = spindle_tests::harness::Harness::new(spindle::store::Backend::Postgres).await;
    let (db, _engine, dispatcher) = before_0015_with_100_000_jobs(&h).await;
    let migrating = {
        let store = h.store.clone();
        tokio::spawn(async move { store.migrate(&[Phase::Expand]).await })
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let killed = loop {
        let killed: Option<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() \
             AND query ILIKE 'CREATE%INDEX CONCURRENTLY%' AND state = 'active' LIMIT 1",
        )
        .fetch_optional(&db)
        .await
        .expect("look for the build");
        if let Some(killed) = killed {
            break killed;
        }
        assert!(tokio::time::Instant::now() < deadline, "no concurrent build seen");
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    assert!(killed, "the migrating session ended");
    assert!(migrating.await.expect("the migration task").is_err(), "the migration failed with its session");
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM spindle_schema WHERE version >= 15")
        .fetch_all(&db)
        .await
        .expect("read");
    assert_eq!(versions, Vec::<i64>::new(), "no step after 14 recorded");

    let ran = h.store.migrate(&[Phase::Expand, Phase::Contract]).await.expect("the next run");
    assert_eq!(ran, 8, "0015's twins, 0016, 0017, 0019 to 0022 and the swap");
    assert_migrated_keeping_every_job(&db).await;
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

/// The schema is what a fresh database's is (byte order everywhere, no twin left over,
/// no invalid index), and the 100,000 jobs are all there.
async fn assert_migrated_keeping_every_job(db: &PgPool) {
    let count = |sql: &'static str| async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(db).await.expect(sql) };
    let other = count(
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() \
         AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C' AND table_name <> 'spindle_schema'",
    )
    .await;
    assert_eq!(other, 0, "every text column in byte order");
    let twins = count("SELECT count(*) FROM pg_class WHERE relname LIKE '%\\_bytewise'").await;
    assert_eq!(twins, 0, "every twin took its index's name");
    let invalid = count(
        "SELECT count(*) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
         JOIN pg_namespace s ON s.oid = i.relnamespace WHERE s.nspname = current_schema() AND NOT x.indisvalid",
    )
    .await;
    assert_eq!(invalid, 0, "no invalid index left");
    assert_eq!(count("SELECT count(*) FROM jobs WHERE id LIKE 'bulk-%'").await, 100_000, "every job kept");
}

/// A lean kind beside a host of the build before format 3 (pinned to format 2): the
/// deploy is refused with what to do while the gate is at 2 (that build would refuse the
/// deployment and read a lean job as one without steps), and the kind's jobs, deployed
/// full, keep their rows; once the old host stopped and the gate moved to 3, the lean
/// deploy goes through and its jobs are one row each. Every job succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lean_record_waits_for_the_gate_to_reach_format_3() {
    let rolling = &mut Rolling::new().await;
    let old = rolling.host_at("old", Some("2"), &[]);
    let new = rolling.host_at("new", None, &[]);
    rolling.token = old.tenant("acme");
    let scripted = spindle_tests::guest_path("scripted");
    let path = scripted.to_str().unwrap();
    let refused = new.cli(Some(&rolling.token), &["deploy", "scripted", path, "--record", "lean"]);
    assert_ne!(refused.code, 0, "a lean record before the gate moved");
    assert!(
        refused.stderr.contains("illegal-transition") && refused.stderr.contains("spindle upgrade finalize"),
        "{}",
        refused.stderr
    );
    let ran = new.cli(Some(&rolling.token), &["deploy", "scripted", path]);
    assert_eq!(ran.code, 0, "deploy: {}", ran.stderr);
    let (_, health) = rolling.get(&new, "/v1/health", "").await;
    assert_eq!(health["storage"]["writing"], 2, "the gate waits for the old host");

    let rows = |id: String| {
        let db = rolling.db.clone();
        async move {
            let count = |table: &'static str| {
                let sql = format!("SELECT count(*) FROM {table} WHERE job_id = $1");
                let (db, id) = (db.clone(), id.clone());
                async move {
                    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&db).await.expect("count")
                }
            };
            (count("steps").await, count("history").await)
        }
    };
    let mut full = Vec::new();
    for host in [&old, &new] {
        full.push(rolling.submit(host, json!({})).await);
    }
    rolling.wait_final(&new, &full).await;
    for id in &full {
        let (steps, history) = rows(id.clone()).await;
        assert_eq!(steps, 3, "job {id} keeps a row per step");
        assert!(history > 0, "job {id} has its history");
        let (_, job) = rolling.get(&new, &format!("/v1/jobs/{id}"), &rolling.token).await;
        assert_eq!((job["state"].as_str(), job["record"].as_str()), (Some("succeeded"), Some("full")), "{job}");
    }

    let (code, _) = old.terminate();
    assert_eq!(code, 0, "the old host stops cleanly");
    let operator = new.operator.clone();
    let moved = new.cli(Some(&operator), &["upgrade", "finalize", "--json"]);
    assert_eq!(moved.code, 0, "finalize: {}", moved.stderr);
    assert_eq!(moved.json(), json!({ "from": 2, "to": 3 }));
    let ran = new.cli(Some(&rolling.token), &["deploy", "scripted", path, "--record", "lean"]);
    assert_eq!(ran.code, 0, "the lean deploy once the gate moved: {}", ran.stderr);
    let lean = vec![rolling.submit(&new, json!({})).await];
    rolling.wait_final(&new, &lean).await;
    let (_, job) = rolling.get(&new, &format!("/v1/jobs/{}", lean[0]), &rolling.token).await;
    assert_eq!((job["state"].as_str(), job["record"].as_str()), (Some("succeeded"), Some("lean")), "{job}");
    assert_eq!(job["steps"].as_array().map(Vec::len), Some(3), "its steps read from its row: {job}");
    assert_eq!(rows(lean[0].clone()).await, (0, 0), "one row from format 3 on");
}
