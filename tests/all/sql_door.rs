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
        Self { database, admin, app, role, token, http: spindle_tests::http_client() }
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
    assert_eq!(door.count("SELECT count(*) FROM spindle.sql_submissions").await, 1);
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
    assert_eq!(
        door.count("SELECT count(*) FROM spindle.sql_submissions WHERE state = 'queued'").await,
        1,
        "no verdict yet"
    );
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
    let tenant: String = sqlx::query_scalar("SELECT tenant_id FROM spindle.sql_submissions WHERE id = $1")
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
    denied("SELECT count(*) FROM spindle.sql_submissions").await;
    denied("SELECT count(*) FROM spindle.sql_roles").await;
    denied("SELECT key FROM spindle.door_key").await;
    denied("INSERT INTO spindle.sql_submissions (id) VALUES ('forged')").await;
    denied("UPDATE spindle.sql_roles SET tenant_id = 'globex'").await;
    // The views older hosts read through are closed to it as well.
    denied("SELECT count(*) FROM sql_submissions").await;
    denied("UPDATE sql_roles SET tenant_id = 'globex'").await;
    denied("CREATE FUNCTION spindle.planted() RETURNS int LANGUAGE sql AS 'SELECT 1'").await;
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

/// Runs `sql` (statements, no parameters) on `pool`.
async fn run(pool: &PgPool, sql: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(pool).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// `url` with the user `role` instead of `postgres`.
fn as_user(url: &str, role: &str) -> String {
    url.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1)
}

/// Objects that shadow, for their exact argument types, every operator and function
/// `spindle.submit` uses, each recording in `public.ran` that it ran (and, run with a
/// superuser's rights, making `who` one). Planted by `who`, suffixed `tag`.
fn planted(who: &str, tag: &str) -> String {
    let record = format!(
        "INSERT INTO public.ran VALUES (current_user, '{tag}'); \
         BEGIN EXECUTE 'ALTER ROLE {who} SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;"
    );
    let function = |name: &str, args: &str, returns: &str, value: &str| {
        format!(
            "CREATE FUNCTION public.{name}({args}) RETURNS {returns} LANGUAGE plpgsql AS $p$ BEGIN {record} \
             RETURN {value}; END $p$;"
        )
    };
    [
        function(&format!("times_{tag}"), "numeric, integer", "numeric", "$1"),
        format!("CREATE OPERATOR public.* (leftarg = numeric, rightarg = integer, function = public.times_{tag});"),
        function(&format!("ftimes_{tag}"), "float8, float8", "float8", "$1"),
        format!("CREATE OPERATOR public.* (leftarg = float8, rightarg = float8, function = public.ftimes_{tag});"),
        function(&format!("eq_{tag}"), "text, text", "boolean", "true"),
        format!("CREATE OPERATOR public.= (leftarg = text, rightarg = text, function = public.eq_{tag});"),
        function(&format!("ne_{tag}"), "text, text", "boolean", "false"),
        format!("CREATE OPERATOR public.<> (leftarg = text, rightarg = text, function = public.ne_{tag});"),
        function("gen_random_uuid", "", "uuid", "'00000000-0000-0000-0000-000000000000'"),
        function("jsonb_typeof", "jsonb", "text", "'object'"),
        function("pg_notify", "text, text", "void", ""),
        function("clock_timestamp", "", "timestamptz", "now()"),
        function("date_part", "text, timestamptz", "float8", "0"),
        function("sha256", "bytea", "bytea", "'\\x00'::bytea"),
        function("encode", "bytea, text", "text", "''"),
        function("convert_to", "text, name", "bytea", "'\\x00'::bytea"),
    ]
    .join("\n")
}

/// CVE-2018-1058's case: roles that may create in `public` — the database's owner (on
/// PostgreSQL 15 it owns `public`) and a mapped role granted CREATE there — plant
/// operators and functions that `spindle.submit`'s body would prefer to the built-in ones
/// if it resolved any name through `public`. Nothing of theirs runs with the function's
/// rights: submissions still make their tenant's jobs, nobody became superuser, and
/// neither can create in or change the `spindle` schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_a_caller_plants_in_public_runs_with_the_doors_rights() {
    let database = spindle_tests::postgres::fresh_database().await;
    let owner = fresh_role();
    {
        let admin = PgPool::connect(&database).await.expect("connect");
        let name = database.rsplit('/').next().expect("a database name");
        run(&admin, &format!("CREATE ROLE {owner} LOGIN; ALTER DATABASE {name} OWNER TO {owner}")).await;
        admin.close().await;
    }
    let host = Served::start(&database, &["--host-id", "h1"]);
    let door = Door::new(&host, database.clone()).await;
    let as_owner = PgPool::connect(&as_user(&database, &owner)).await.expect("connect as the owner");
    run(&as_owner, "CREATE TABLE public.ran (who text, what text); GRANT ALL ON public.ran TO PUBLIC").await;
    run(&as_owner, &planted(&owner, "owner")).await;
    let first = door.submit("scripted", json!({}), json!({}), true).await;

    // A mapped role that may create in `public` plants the same, under its own names.
    run(&door.admin, &format!("GRANT CREATE ON SCHEMA public TO {}", door.role)).await;
    run(&as_owner, "DROP FUNCTION public.gen_random_uuid(), public.jsonb_typeof(jsonb), public.pg_notify(text, text), \
        public.clock_timestamp(), public.date_part(text, timestamptz), public.sha256(bytea), public.encode(bytea, text), \
        public.convert_to(text, name) CASCADE").await;
    run(&as_owner, "DROP OPERATOR public.* (numeric, integer), public.* (float8, float8), public.= (text, text), public.<> (text, text)").await;
    run(&door.app, &planted(&door.role, "app")).await;
    let second = door.submit("scripted", json!({}), json!({}), true).await;

    for id in [&first, &second] {
        let view = door.settled(&host, id).await;
        assert_eq!(view["state"], "admitted", "{view}");
    }
    assert_eq!(door.count("SELECT count(*) FROM public.ran").await, 0, "a planted object ran");
    let superusers: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_roles WHERE rolsuper AND rolname = ANY($1)")
        .bind(vec![owner.clone(), door.role.clone()])
        .fetch_one(&door.admin)
        .await
        .expect("roles");
    assert_eq!(superusers, 0, "nobody became superuser");
    assert_eq!(door.count("SELECT count(*) FROM jobs WHERE tenant_id <> 'acme'").await, 0, "no job in another tenant");
    assert_eq!(door.count("SELECT count(*) FROM jobs WHERE tenant_id = 'acme'").await, 2);

    // Neither can plant in `spindle`, nor move the door's tables out of their way.
    for (pool, who) in [(&as_owner, "the database's owner"), (&door.app, "a mapped role")] {
        for sql in [
            "CREATE FUNCTION spindle.planted() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "CREATE TABLE spindle.planted (x int)",
            "DROP TABLE spindle.sql_roles",
            "ALTER TABLE spindle.sql_roles RENAME TO moved",
        ] {
            let e = sqlx::raw_sql(sql).execute(pool).await.expect_err(sql);
            let code = e.as_database_error().and_then(|d| d.code()).map(|c| c.into_owned());
            assert_eq!(code.as_deref(), Some("42501"), "{who}: {sql}: {e}");
        }
    }
    // Every function that runs with its owner's rights fixes its search path.
    let loose: Vec<String> = sqlx::query_scalar(
        "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
         AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)",
    )
    .fetch_all(&door.admin)
    .await
    .expect("functions");
    assert_eq!(loose, Vec::<String>::new(), "SECURITY DEFINER functions without search_path = pg_catalog, pg_temp");
    as_owner.close().await;
}

/// The documented URL, `postgres://spindle@…/spindle`: a database user named like the
/// door's schema, owning the database (not a superuser). Its search path (`"$user",
/// public`) finds the schema `spindle` first; the door works all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_door_works_for_a_database_user_named_spindle_that_owns_the_database() {
    let database = spindle_tests::postgres::fresh_database().await;
    {
        let admin = PgPool::connect(&database).await.expect("connect");
        let name = database.rsplit('/').next().expect("a database name");
        // Roles are the server's: another test process may have made it already.
        run(
            &admin,
            &format!(
                "DO $$ BEGIN CREATE ROLE spindle LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$; \
                 ALTER DATABASE {name} OWNER TO spindle"
            ),
        )
        .await;
        admin.close().await;
    }
    let url = as_user(&database, "spindle");
    let host = Served::start(&url, &["--host-id", "h1"]);
    let mut door = Door::new(&host, database.clone()).await;
    let admitted = door.submit("scripted", json!({}), json!({}), true).await;
    let view = door.settled(&host, &admitted).await;
    assert_eq!(view["state"], "admitted", "{view}");
    let job = view["job"].as_str().expect("a job").to_owned();
    assert_eq!(door.final_job(&host, &job).await["state"], "succeeded");
    let owner: String = sqlx::query_scalar(
        "SELECT pg_get_userbyid(c.relowner)::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = 'spindle' AND c.relname = 'sql_roles'",
    )
    .fetch_one(&door.admin)
    .await
    .expect("the door's table");
    assert_eq!(owner, "spindle");

    // Unmapped, the role's next call is refused; a second unmapping finds nothing.
    let ran = host.cli(Some(&host.operator), &["tenant", "revoke-sql", "acme", "--role", &door.role]);
    assert_eq!(ran.code, 0, "revoke-sql: {}", ran.stderr);
    let e = sqlx::query("SELECT spindle.submit('scripted', '{}', '{}')")
        .execute(&door.app)
        .await
        .expect_err("an unmapped role");
    assert_eq!(e.as_database_error().and_then(|d| d.code()).as_deref(), Some("42501"), "{e}");
    let again = host.cli(Some(&host.operator), &["tenant", "revoke-sql", "acme", "--role", &door.role]);
    assert_ne!(again.code, 0, "nothing left to unmap");
    assert!(again.stderr.contains("not-found"), "{}", again.stderr);
    // Mapped again (to another tenant), it submits there.
    let ran = host.cli(Some(&host.operator), &["tenant", "grant-sql", "globex", "--role", &door.role]);
    assert_eq!(ran.code, 0, "grant-sql: {}", ran.stderr);
    door.app = PgPool::connect(&as_user(&database, &door.role)).await.expect("reconnect");
    let moved = door.submit("scripted", json!({}), json!({}), true).await;
    let tenant: String = sqlx::query_scalar("SELECT tenant_id FROM spindle.sql_submissions WHERE id = $1")
        .bind(&moved)
        .fetch_one(&door.admin)
        .await
        .expect("read");
    assert_eq!(tenant, "globex");
}

/// Inputs are measured as the API measures them (compact JSON), and one over what a host
/// reads is refused by its size alone: the database's spacing of a JSON value never
/// makes an input the API takes too large here, and a 25 MiB one is never read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inputs_are_measured_as_the_api_measures_them_and_oversized_ones_are_never_read() {
    let database = spindle_tests::postgres::fresh_database().await;
    let host = Served::start(&database, &["--host-id", "h1", "--max-payload-bytes", "1000000"]);
    let door = Door::new(&host, database).await;
    // A script of 220,000 steps' actions: 880,007 bytes compact, 1,100,006 as the database
    // spaces them (`"x", "x", …`).
    let script = |n: usize| json!({ "s": vec!["x"; n] });
    let spaced = door.submit("scripted", script(220_000), json!({}), true).await;
    let huge = door.submit("scripted", json!({ "s": "x".repeat(25 << 20) }), json!({}), true).await;
    let over = door.submit("scripted", script(300_000), json!({}), true).await;
    let view = door.settled(&host, &spaced).await;
    assert_eq!(view["state"], "admitted", "{view}");
    for id in [&huge, &over] {
        let view = door.settled(&host, id).await;
        assert_eq!(
            (view["state"].as_str(), view["code"].as_str()),
            (Some("refused"), Some("payload-too-large")),
            "{view}"
        );
    }
    assert!(door.settled(&host, &huge).await["message"].as_str().is_some_and(|m| m.contains("26214409 bytes")));
}

/// One submission, one judgement, whichever door: the API's `POST /v1/jobs` and
/// `spindle.submit` refuse the same submissions with the same codes (the HTTP door
/// allowed a delay of ten years, the SQL one one year; each had its own code strings).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn both_doors_judge_every_submission_alike() {
    let database = spindle_tests::postgres::fresh_database().await;
    let host = Served::start(&database, &["--host-id", "h1", "--max-payload-bytes", "100000"]);
    let door = Door::new(&host, database).await;
    let year = 365.0 * 86_400.0;
    let cases: Vec<(&str, Value, Value, &str)> = vec![
        ("scripted", json!({}), json!({}), "ok"),
        ("scripted", json!({}), json!({ "delay_secs": 9.0 * year }), "ok"),
        ("scripted", json!({}), json!({ "run_at": "2030-01-01T00:00:00Z", "priority": "critical" }), "ok"),
        ("scripted", json!({}), json!({ "delay_secs": 11.0 * year }), "invalid-request"),
        ("scripted", json!({}), json!({ "delay_secs": -1 }), "invalid-request"),
        ("scripted", json!({}), json!({ "delay_secs": "soon" }), "invalid-request"),
        ("scripted", json!({}), json!({ "run_at": "yesterday" }), "invalid-request"),
        ("scripted", json!({}), json!({ "run_at": "9999-12-31T00:00:00Z" }), "invalid-request"),
        ("scripted", json!({}), json!({ "run_at": "2030-01-01T00:00:00Z", "delay_secs": 1 }), "invalid-request"),
        ("scripted", json!({}), json!({ "priority": "urgent" }), "invalid-request"),
        // A schedule's firings are the jobs keyed `schedule:NAME:…`: nobody else's.
        ("scripted", json!({}), json!({ "idempotency_key": "schedule:nightly:1" }), "invalid-request"),
        ("scripted", json!({}), json!({ "lease_keys": [""] }), "invalid-request"),
        ("scripted", json!({}), json!({ "idempotency_key": "k".repeat(201) }), "invalid-request"),
        ("scripted", json!({}), json!({ "colour": "blue" }), "invalid-request"),
        ("no-such-kind", json!({}), json!({}), "unknown-kind"),
        ("typed-noop", json!({ "account": "" }), json!({}), "invalid-input"),
        ("scripted", json!({ "s": "x".repeat(120_000) }), json!({}), "payload-too-large"),
    ];
    for (kind, input, options, expected) in cases {
        let mut body = json!({ "kind": kind, "input": input });
        for (k, v) in options.as_object().expect("options") {
            body[k] = v.clone();
        }
        let answer = door
            .http
            .post(format!("{}/v1/jobs", host.url))
            .bearer_auth(&door.token)
            .json(&body)
            .send()
            .await
            .expect("POST");
        let status = answer.status().as_u16();
        let answer: Value = answer.json().await.unwrap_or(Value::Null);
        let http =
            if status == 201 { "ok".to_owned() } else { answer["error"]["code"].as_str().unwrap_or("?").to_owned() };
        let id = door.submit(kind, input.clone(), options.clone(), true).await;
        let view = door.settled(&host, &id).await;
        let sql = match view["state"].as_str() {
            Some("admitted") => "ok".to_owned(),
            _ => view["code"].as_str().unwrap_or("?").to_owned(),
        };
        assert_eq!((http.as_str(), sql.as_str()), (expected, expected), "{body}: HTTP {answer}, SQL {view}");
    }
}

/// Ten submissions committed in one transaction against a rate of 2/s became two jobs and
/// eight refusals, where the API answers 429 and clients try again. A committed submission
/// is never refused for capacity now: it waits (shown as `waiting`, with the quota), and is
/// admitted when the quota allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_committed_submission_over_a_quota_waits_and_is_admitted() {
    let database = spindle_tests::postgres::fresh_database().await;
    let host = Served::start(&database, &["--host-id", "h1"]);
    let door = Door::new(&host, database).await;
    let ran = host.cli(Some(&host.operator), &["tenant", "set", "acme", "--rate", "2", "--burst", "2"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let mut tx = door.app.begin().await.expect("begin");
    let mut ids = Vec::new();
    for _ in 0..10 {
        let id: String = sqlx::query_scalar("SELECT spindle.submit('scripted', '{}', '{}')::text")
            .fetch_one(&mut *tx)
            .await
            .expect("spindle.submit");
        ids.push(id);
    }
    tx.commit().await.expect("commit");
    let mut seen_waiting = false;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    for id in &ids {
        loop {
            let (status, view) = door.get(&host, &format!("/v1/submissions/{id}")).await;
            assert_eq!(status, 200, "{view}");
            match view["state"].as_str() {
                Some("admitted") => break,
                Some("waiting") => {
                    seen_waiting = true;
                    assert_eq!(view["code"], "quota-exceeded", "{view}");
                    assert!(view["message"].as_str().unwrap().contains("rate"), "{view}");
                }
                Some("queued") => {}
                other => panic!("{id}: {other:?}: {view}"),
            }
            assert!(tokio::time::Instant::now() < deadline, "{id} never admitted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(seen_waiting, "some waited for the rate");
    assert_eq!(door.count("SELECT count(*) FROM jobs").await, 10, "every committed submission is a job");
}

/// The id `spindle.submit` answered is all an application keeps: the clients read the
/// submission by it, and every job call (events, signal, wait, cancel) takes it in place
/// of the job's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_clients_follow_a_job_by_the_id_spindle_submit_answered() {
    let database = spindle_tests::postgres::fresh_database().await;
    let host = Served::start(&database, &["--host-id", "h1"]);
    let door = Door::new(&host, database).await;
    let path = spindle_tests::guest_path("workflow");
    let ran = host.cli(Some(&door.token), &["deploy", "workflow", path.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "deploy workflow: {}", ran.stderr);
    let client = spindle_client::Client::new(&host.url, &door.token).unwrap();
    let waits = json!({ "signal": "shipped", "timeout_secs": 3600 });

    let shipped = door.submit("workflow", waits.clone(), json!({}), true).await;
    let view = door.settled(&host, &shipped).await;
    let submission = client.submission(&shipped).await.unwrap();
    assert_eq!((submission.state.as_str(), submission.job.as_deref()), ("admitted", view["job"].as_str()));
    let job = submission.job.expect("its job");
    let mut events = client.events(&shipped).await.expect("events by the submission's id");
    let sent = client.signal(&shipped, "shipped", &json!({ "carrier": "post" }), Some("ship-1")).await.unwrap();
    assert_eq!(sent.id, job);
    let done = client.wait(&shipped, PATIENCE).await.unwrap();
    assert_eq!((done.id.as_str(), done.state.as_str()), (job.as_str(), "succeeded"));
    let mut last = None;
    while let Some(event) = events.next().await.unwrap() {
        if let spindle_client::JobEvent::Job(live) = event {
            last = Some(live.state);
        }
    }
    assert_eq!(last.as_deref(), Some("succeeded"), "the events followed the job to its end");

    let withdrawn = door.submit("workflow", waits, json!({}), true).await;
    door.settled(&host, &withdrawn).await;
    client.cancel(&withdrawn, "order withdrawn").await.expect("cancel by the submission's id");
    assert_eq!(client.wait(&withdrawn, PATIENCE).await.unwrap().state, "cancelled");
    match client.submission("00000000-0000-0000-0000-000000000000").await {
        Err(spindle_client::Error::Refused(refused)) => assert_eq!(refused.status, 404),
        other => panic!("no such submission: {other:?}"),
    }
}
