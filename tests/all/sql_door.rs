//! Submitting from an application's own PostgreSQL transaction (issue 41): a real
//! `spindle serve`, a real database role mapped to a tenant, and `spindle.submit`
//! called inside transactions the test commits or rolls back.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use spindle::failpoints;
use spindle::sqlx::{self, PgPool};
use spindle_tests::harness::Scratch;
use spindle_tests::served::Served;

const PATIENCE: Duration = Duration::from_secs(120);

/// A database with a host, tenants `acme` and `globex`, the `scripted` and `typed-noop`
/// kinds, and a role of acme's application.
struct Door {
    database: String,
    admin: PgPool,
    app: PgPool,
    role: String,
    token: String,
    http: reqwest::Client,
}

/// A login role of its own for each test (roles are the server's, not the database's).
fn fresh_role() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("app_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

impl Door {
    async fn new(host: &Served, database: String) -> Self {
        let admin = PgPool::connect(&database).await.expect("connect");
        let token = host.tenant("acme");
        host.tenant("globex");
        for kind in ["scripted", "typed-noop"] {
            let path = spindle_tests::guest_path(kind);
            let ran = host.cli(Some(&token), &["deploy", kind, path.to_str().unwrap()]);
            assert_eq!(ran.code, 0, "deploy {kind}: {}", ran.stderr);
        }
        let role = fresh_role();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE ROLE {role} LOGIN"))).execute(&admin).await.expect("a role");
        let ran = host.cli(Some(&host.operator), &["tenant", "grant-sql", "acme", "--role", &role]);
        assert_eq!(ran.code, 0, "grant-sql: {}", ran.stderr);
        let as_role = database.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
        let app = PgPool::connect(&as_role).await.expect("connect as the application's role");
        Self { database, admin, app, role, token, http: reqwest::Client::new() }
    }

    async fn get(&self, host: &Served, path: &str) -> (u16, Value) {
        let answer = self.http.get(format!("{}{path}", host.url)).bearer_auth(&self.token).send().await.expect("GET");
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    /// Calls `spindle.submit` in a transaction of the application's, then commits it or
    /// rolls it back; answers the submission's id.
    async fn submit(&self, kind: &str, input: Value, options: Value, commit: bool) -> String {
        let mut tx = self.app.begin().await.expect("begin");
        let id: String = sqlx::query_scalar("SELECT spindle.submit($1, $2::jsonb, $3::jsonb)::text")
            .bind(kind)
            .bind(input.to_string())
            .bind(options.to_string())
            .fetch_one(&mut *tx)
            .await
            .expect("spindle.submit");
        if commit {
            tx.commit().await.expect("commit")
        } else {
            tx.rollback().await.expect("rollback")
        }
        id
    }

    /// Waits until submission `id` is no longer queued; answers its view.
    async fn settled(&self, host: &Served, id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let (status, view) = self.get(host, &format!("/v1/submissions/{id}")).await;
            assert_eq!(status, 200, "{view}");
            if view["state"] != "queued" {
                return view;
            }
            assert!(tokio::time::Instant::now() < deadline, "submission {id} never admitted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn final_job(&self, host: &Served, job: &str) -> Value {
        let (status, view) = self.get(host, &format!("/v1/jobs/{job}/wait?timeout=60")).await;
        assert_eq!(status, 200, "{view}");
        view
    }

    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(&self.admin).await.expect(sql)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_submitted_in_a_transaction_exists_if_and_only_if_the_transaction_commits() {
    let database = spindle_tests::postgres::fresh_database().await;
    let host = Served::start(&database, &["--host-id", "h1"]);
    let door = Door::new(&host, database).await;

    let rolled_back = door.submit("scripted", json!({}), json!({}), false).await;
    let committed = door.submit("scripted", json!({}), json!({ "priority": "critical" }), true).await;
    let view = door.settled(&host, &committed).await;
    assert_eq!(view["state"], "admitted", "{view}");
    assert_eq!(view["submitted_by"], door.role.as_str());
    let job = view["job"].as_str().expect("its job").to_owned();
    let ran = door.final_job(&host, &job).await;
    assert_eq!((ran["state"].as_str(), ran["priority"].as_str()), (Some("succeeded"), Some("critical")), "{ran}");
    // The id spindle.submit answered reads as the job.
    let (status, same) = door.get(&host, &format!("/v1/jobs/{committed}")).await;
    assert_eq!((status, same["id"].as_str()), (200, Some(job.as_str())), "{same}");

    // The rolled-back one never was, and never will be.
    let (status, _) = door.get(&host, &format!("/v1/submissions/{rolled_back}")).await;
    assert_eq!(status, 404);
    assert_eq!(door.count("SELECT count(*) FROM sql_submissions").await, 1);
    assert_eq!(door.count("SELECT count(*) FROM jobs").await, 1, "one job in all");
}

/// The host is killed after it inserted a submission's job and before it recorded the
/// verdict: the next host admits it again and finds the same job by its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_host_killed_between_admitting_and_recording_leaves_one_job() {
    let database = spindle_tests::postgres::fresh_database().await;
    let setup = Served::start(&database, &["--host-id", "setup"]);
    let door = Door::new(&setup, database.clone()).await;
    let (code, _) = setup.terminate();
    assert_eq!(code, 0);
    // No host runs: the committed submission waits.
    let id = door.submit("scripted", json!({}), json!({}), true).await;
    let dying = Served::start_with_env(
        Scratch::new(),
        &door.database,
        // Draining: it admits but runs nothing, so no claim of its outlives it.
        &["--host-id", "dying", "--drain"],
        &[(failpoints::ENV, "admission.admitted")],
    );
    // Its job is in (the failpoint holds the verdict back; the host may reach it before
    // it says it listens, so the database says when).
    let key = format!("SELECT count(*) FROM jobs WHERE idempotency_key = 'sql:{id}'");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while door.count(&key).await == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the host never admitted the submission");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(dying.kill_hard());
    assert_eq!(door.count("SELECT count(*) FROM sql_submissions WHERE state = 'queued'").await, 1, "no verdict yet");
    let next = Served::start(&database, &["--host-id", "next"]);
    let view = door.settled(&next, &id).await;
    assert_eq!(view["state"], "admitted", "{view}");
    let job = view["job"].as_str().expect("a job").to_owned();
    assert_eq!(door.final_job(&next, &job).await["state"], "succeeded");
    assert_eq!(door.count(&key).await, 1, "one job for the submission");
    assert_eq!(door.count("SELECT count(*) FROM jobs").await, 1);
}

/// A submission the host refuses keeps its code and violations, visible through the API;
/// nothing else is written. One idempotency key through both doors makes one job.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_submission_says_why_and_one_key_makes_one_job_through_both_doors() {
    let database = spindle_tests::postgres::fresh_database().await;
    let host = Served::start(&database, &["--host-id", "h1"]);
    let door = Door::new(&host, database).await;
    let jobs_before = door.count("SELECT count(*) FROM jobs").await;

    let bad = door.submit("typed-noop", json!({ "account": "" }), json!({}), true).await;
    let view = door.settled(&host, &bad).await;
    assert_eq!((view["state"].as_str(), view["code"].as_str()), (Some("refused"), Some("invalid-input")), "{view}");
    let pointers: Vec<&str> =
        view["violations"].as_array().expect("violations").iter().filter_map(|v| v["pointer"].as_str()).collect();
    assert!(pointers.contains(&"/account"), "{view}");
    let (status, answer) = door.get(&host, &format!("/v1/jobs/{bad}")).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (422, Some("invalid-input")), "{answer}");
    assert!(answer["error"]["violations"].as_array().is_some_and(|v| !v.is_empty()), "{answer}");
    let unknown = door.submit("no-such-kind", json!({}), json!({}), true).await;
    assert_eq!(door.settled(&host, &unknown).await["code"], "unknown-kind");
    let options = door.submit("scripted", json!({}), json!({ "colour": "blue" }), true).await;
    assert_eq!(door.settled(&host, &options).await["code"], "invalid-request");
    assert_eq!(door.count("SELECT count(*) FROM jobs").await, jobs_before, "nothing else written");

    // One key, both doors: one job.
    let http = door.submit("scripted", json!({}), json!({ "idempotency_key": "order-7" }), true).await;
    let first = door.settled(&host, &http).await["job"].clone();
    let again = door
        .http
        .post(format!("{}/v1/jobs", host.url))
        .bearer_auth(&door.token)
        .json(&json!({ "kind": "scripted", "input": {}, "idempotency_key": "order-7" }))
        .send()
        .await
        .expect("POST");
    assert_eq!(again.status().as_u16(), 200, "the key's job, not a new one");
    let again: Value = again.json().await.expect("a job");
    assert_eq!(again["id"], first);
    assert_eq!(door.count("SELECT count(*) FROM jobs WHERE idempotency_key = 'order-7'").await, 1);
}

/// A role mapped to one tenant submits as that tenant only, reads none of Spindle's
/// tables and calls nothing else: PostgreSQL refuses each attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mapped_role_may_submit_for_its_tenant_and_do_nothing_else() {
    let database = spindle_tests::postgres::fresh_database().await;
    let host = Served::start(&database, &["--host-id", "h1"]);
    let door = Door::new(&host, database).await;
    let id = door.submit("scripted", json!({}), json!({}), true).await;
    let tenant: String = sqlx::query_scalar("SELECT tenant_id FROM sql_submissions WHERE id = $1")
        .bind(&id)
        .fetch_one(&door.admin)
        .await
        .expect("read");
    assert_eq!(tenant, "acme", "the tenant comes from the role, never from an argument");
    let denied = |sql: &'static str| {
        let app = door.app.clone();
        async move {
            let e = sqlx::raw_sql(sql).execute(&app).await.expect_err(sql);
            let code = e.as_database_error().and_then(|d| d.code()).map(|c| c.into_owned());
            assert_eq!(code.as_deref(), Some("42501"), "{sql}: {e}");
        }
    };
    denied("SELECT count(*) FROM jobs").await;
    denied("SELECT count(*) FROM sql_submissions").await;
    denied("SELECT count(*) FROM sql_roles").await;
    denied("INSERT INTO sql_submissions (id) VALUES ('forged')").await;
    denied("UPDATE sql_roles SET tenant_id = 'globex'").await;
    // A role no operator mapped may not submit at all.
    let stranger = fresh_role();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE ROLE {stranger} LOGIN")))
        .execute(&door.admin)
        .await
        .expect("a role");
    let as_stranger = door.database.replacen("postgres://postgres@", &format!("postgres://{stranger}@"), 1);
    let stranger_pool = PgPool::connect(&as_stranger).await.expect("connect");
    let e = sqlx::query("SELECT spindle.submit('scripted', '{}', '{}')")
        .execute(&stranger_pool)
        .await
        .expect_err("an unmapped role");
    assert_eq!(e.as_database_error().and_then(|d| d.code()).as_deref(), Some("42501"), "{e}");
    let view = door.settled(&host, &id).await;
    assert_eq!(view["state"], "admitted");
}

/// `spindle bench --only sql-submit`: the section runs against a real server and reports
/// commit → admitted, commit → started, and bulk submission beside the API's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_submit_benchmark_reports_its_figures() {
    let admin = spindle_tests::postgres::fresh_database().await;
    let report = spindle_tests::bench(&[
        "--backend",
        "postgres",
        "--database-url",
        &admin,
        "--only",
        "sql-submit",
        "--jobs",
        "400",
        "--latency-rate",
        "50",
        "--latency-secs",
        "2",
        "--warmup-secs",
        "1",
    ]);
    let sql = &report["sql_submit"];
    assert_eq!((sql["rate"].as_u64(), sql["bulk"].as_u64()), (Some(50), Some(100)), "{sql}");
    for figure in
        [&sql["admitted_ms"]["p50"], &sql["started_ms"]["p99"], &sql["sql_jobs_per_sec"], &sql["api_jobs_per_sec"]]
    {
        assert!(figure.as_f64().is_some_and(|f| f > 0.0), "{sql}");
    }
}
