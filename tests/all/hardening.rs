//! Regressions from the fault-injection runs, the code review and the black-box probes:
//! each test here failed before its fix.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use spindle::clock::{Clock, ManualClock};
use spindle::engine::{CONFIGURED_OPERATOR_TOKEN, EngineError, TokenScope};
use spindle::store::prelude::*;
use spindle::store::sql::Ty;
use spindle::store::{Backend, Role, TenantId};
use spindle_core::Timestamp;
use spindle_tests::harness::{Harness, Scratch, fresh_store, test_engine_config};
use spindle_tests::served::Served;

on_both_backends!(
    hosts_starting_together_register_one_operator_token,
    hostile_inputs_answer_typed_errors_not_panics,
    a_revoked_token_is_refused_at_once,
    an_expired_token_is_refused,
    a_tenant_manages_its_own_tokens_and_no_others,
    a_changed_operator_token_retires_the_old_one,
    the_configured_operator_token_rotates_and_a_retired_one_stays_retired,
    the_operator_sets_a_tenants_retention,
    a_claim_that_lapsed_before_its_step_ran_is_never_run,
);

/// Hosts started together with one `SPINDLE_OPERATOR_TOKEN` each register it: every one
/// of them must come up (a duplicate key crashed all but the first).
async fn hosts_starting_together_register_one_operator_token(backend: Backend) {
    let h = Harness::new(backend).await;
    let engines: Vec<_> = (0..8).map(|_| h.engine()).collect();
    let token = "spo_shared_operator_token";
    let barrier = Arc::new(tokio::sync::Barrier::new(engines.len()));
    let starts: Vec<_> = engines
        .iter()
        .map(|engine| {
            let (engine, barrier) = (engine.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                engine.tenancy().register_operator_token(token).await
            })
        })
        .collect();
    for start in starts {
        start.await.unwrap().expect("every host registers the token");
    }
    let presented = engines[0].tenancy().authenticate(token).await.unwrap().expect("the token is known");
    let (tenant, role) = (presented.tenant, presented.role);
    assert_eq!((tenant, role), (None, Role::Operator));
}

/// A clock that says each time it is read.
#[derive(Debug)]
struct Watched {
    clock: ManualClock,
    reads: tokio::sync::mpsc::UnboundedSender<()>,
}

impl Clock for Watched {
    fn now(&self) -> Timestamp {
        let _ = self.reads.send(());
        self.clock.now()
    }
}

/// A claim waiting for the database (here: SQLite's one writer, held by another
/// transaction) is stamped when it gets its rows, not when its host began asking: its
/// lease lasts its whole TTL after the claim commits, and history times follow commits.
async fn a_claim_is_stamped_when_it_holds_its_rows() {
    let h = Harness::new(Backend::Sqlite).await;
    h.deploy("scripted").await;
    let clock = ManualClock::new(Timestamp::from_millis(1_750_000_000_000));
    let (reads, mut read) = tokio::sync::mpsc::unbounded_channel();
    let engine = h.engine_clocked(test_engine_config(), Arc::new(Watched { clock: clock.clone(), reads }));
    let id = h.submit(&engine, "scripted", serde_json::json!({})).await;
    while read.try_recv().is_ok() {}

    let writer = h.store.db().begin().await.expect("hold the writer");
    let claiming = tokio::spawn({
        let engine = engine.clone();
        async move { engine.execution().claim(1).await }
    });
    read.recv().await.expect("the claim read the clock before asking the store");
    clock.advance(Duration::from_secs(5));
    drop(writer);
    let claimed = claiming.await.unwrap().expect("claimed").pop().expect("the job");
    assert_eq!(claimed.job.id, id);
    let claim = claimed.job.claim.expect("a claim");
    eprintln!("claimed at {} with the clock at {}", claim.claimed_at, clock.now());
    assert_eq!(claim.claimed_at, clock.now(), "stamped when its rows were locked, five seconds later");
    assert_eq!(claim.expires_at, clock.now().plus(test_engine_config().lease_ttl));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_claim_is_stamped_when_it_holds_its_rows() {
    a_claim_is_stamped_when_it_holds_its_rows().await;
}

/// Inputs that panicked a request task (the connection dropped, no answer) answer a
/// typed `invalid-request` now, and the host goes on serving.
async fn hostile_inputs_answer_typed_errors_not_panics(backend: Backend) {
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(backend).await;
    drop(store);
    let host = spindle_tests::served::Served::start(&url, &[]);
    let token = host.tenant("acme");
    let wasm = spindle_tests::guest_path("scripted").to_string_lossy().into_owned();
    assert_eq!(host.cli(Some(&token), &["deploy", "scripted", &wasm]).code, 0);
    let done = host.cli(Some(&token), &["submit", "scripted"]).stdout.trim().to_owned();
    let http = spindle_tests::http_client();
    let submit = |body: &'static str| {
        http.post(format!("{}/v1/jobs", host.url))
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let invalid = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.expect("a JSON error body");
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid-request")), "{body}");
    };
    for wait in ["NaN", "inf", "-1", "1e309"] {
        let response = http
            .get(format!("{}/v1/jobs/{done}/wait?timeout={wait}", host.url))
            .bearer_auth(&token)
            .send()
            .await
            .expect("an answer, not a dropped connection");
        invalid(response).await;
    }
    for body in [
        r#"{"kind": "scripted", "delay_secs": 1e300}"#,
        r#"{"kind": "scripted", "delay_secs": -1}"#,
        r#"{"kind": "scripted", "run_at": "99999999999-01-01T00:00:00Z"}"#,
        r#"{"kind": "scripted", "run_at": "2026-01-01T00:00:00.1éZ"}"#,
        r#"{"kind": "scripted", "run_at": "2026-02-30T00:00:00Z"}"#,
    ] {
        invalid(submit(body).await.expect("an answer, not a dropped connection")).await;
    }
    let fine = submit(r#"{"kind": "scripted", "run_at": "2030-01-01T00:00:00.5+02:00"}"#).await.unwrap();
    assert_eq!(fine.status().as_u16(), 201, "an offset is a time like any other");
    let job: serde_json::Value = fine.json().await.unwrap();
    assert_eq!(job["run_at"], "2029-12-31T22:00:00.500000Z");
    assert_eq!(host.cli(Some(&token), &["wait", &done]).code, 0, "the host still serves");
}

/// A host's data directory holds its database and its operator token: other local
/// users may not read it (it was 0755, the database 0644).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_directory_is_the_hosts_alone() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = spindle_tests::harness::Scratch::new();
    let dir = scratch.path.join("data");
    let host = spindle::host::Host::open(spindle::host::HostConfig::in_dir(&dir)).await.expect("a host");
    host.engine.tenancy().create_tenant("acme").await.expect("a write, so the log exists");
    let mode = |path: &std::path::Path| std::fs::metadata(path).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "the data directory");
    assert_eq!(mode(&dir.join("artifacts")), 0o700, "the compiled-artifact cache");
    for file in ["spindle.db", "spindle.db-wal"] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    host.shutdown(Duration::from_secs(1)).await;
}

/// Slow clients cannot hold the API: a request whose headers do not arrive in time is
/// closed, and one client may hold only so many connections (1,000 half-sent requests
/// were all still open after 35 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_closed_and_capped() {
    use std::io::{Read, Write};
    const CAP: usize = 256;
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = spindle_tests::served::Served::start(&url, &[]);
    let addr = host.url.trim_start_matches("http://").to_owned();
    let half_sent = || {
        let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
        stream.write_all(b"GET /v1/health HTTP/1.1\r\nHost: spindle\r\n").expect("send half a request");
        stream
    };
    let mut held: Vec<std::net::TcpStream> = (0..CAP).map(|_| half_sent()).collect();
    // One connection over the cap is closed at once.
    let mut over = half_sent();
    over.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buffer = [0u8; 64];
    let read = over.read(&mut buffer);
    let closed = matches!(read, Ok(0)) || matches!(read, Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset);
    assert!(closed, "a connection over the cap stays open: {read:?}");
    // Those under it are closed when their headers do not come in time.
    let first = &mut held[0];
    first.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let read = first.read(&mut buffer);
    assert!(
        !matches!(read, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut),
        "still open after a minute: {read:?}"
    );
    drop(held);
    // The host still serves.
    let health = spindle_tests::http_client().get(format!("{}/v1/health", host.url)).send().await.expect("served");
    assert_eq!(health.status().as_u16(), 200);
}

/// `bytes` with a custom section appended: the same component under another digest.
fn variant(bytes: &[u8], n: u8) -> Vec<u8> {
    let name = b"spindle-variant";
    let mut out = bytes.to_vec();
    out.extend([0u8, u8::try_from(name.len() + 2).unwrap(), u8::try_from(name.len()).unwrap()]);
    out.extend_from_slice(name);
    out.push(n);
    out
}

/// The registry's caches never evicted: every version a tenant deployed stayed compiled
/// in memory. Now compiled code is bounded by bytes, least recently used out, and an
/// evicted version loads again when it next runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_kinds_are_bounded_by_their_bytes() {
    use spindle::registry::{Registry, RegistryLimits};
    let h = Harness::new(Backend::Sqlite).await;
    let rt = spindle_tests::runtime(spindle_tests::test_sandbox());
    let noop = spindle_tests::guest("noop");
    let one = rt.load(&noop).await.unwrap().resident_bytes();
    assert!(one > 0, "a loaded kind occupies memory");
    let limits = RegistryLimits { max_loaded_bytes: one * 5 / 2, ..RegistryLimits::default() };
    let registry = Registry::with_limits(h.store.clone(), rt, limits);
    let now = Timestamp::from_millis(1_750_000_000_000);
    let mut versions = Vec::new();
    for n in 0..8u8 {
        let (version, _) = registry.deploy(&h.tenant, "noop", &variant(&noop, n), now).await.expect("deployed");
        versions.push(version.version);
        let (kinds, bytes) = registry.loaded();
        assert!(kinds <= 2 && bytes <= limits.max_loaded_bytes, "{kinds} kinds, {bytes} bytes after version {n}");
    }
    // The first version was evicted long ago; it loads again to run.
    let first = registry.version(&h.tenant, "noop", versions[0]).await.expect("reloaded");
    assert_eq!(first.kind.spec.name, "noop");
    assert!(registry.loaded().1 <= limits.max_loaded_bytes);
}

/// A component built to compile slowly: one function of 40,000 blocks inside a loop,
/// each adding two of 2,000 locals (SSA construction gives every block a parameter per
/// live local). About 700 KB; half a minute of compiling on a machine of this kind.
fn slow_to_compile() -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = u8::try_from(n & 0x7f).unwrap();
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    fn section(id: u8, body: &[u8], out: &mut Vec<u8>) {
        out.push(id);
        leb(body.len(), out);
        out.extend_from_slice(body);
    }
    const LOCALS: usize = 2_000;
    let mut body = Vec::new();
    body.push(1); // one run of locals
    leb(LOCALS, &mut body);
    body.push(0x7e); // i64
    body.extend([0x03, 0x40]); // loop
    let mut seed = 1u64;
    for _ in 0..40_000 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let (a, b) = (1 + (seed >> 33) as usize % LOCALS, 1 + (seed >> 13) as usize % LOCALS);
        body.extend([0x02, 0x40, 0x20, 0x00, 0x50, 0x0d, 0x00, 0x20]); // block; br_if 0 (param == 0)
        leb(a, &mut body);
        body.push(0x20);
        leb(b, &mut body);
        body.extend([0x7c, 0x21]); // i64.add; local.set b
        leb(b, &mut body);
        body.push(0x0b); // end block
    }
    body.extend([0x20, 0x00, 0x42, 0x01, 0x7d, 0x22, 0x00, 0x50, 0x45, 0x0d, 0x00, 0x0b, 0x20, 0x01, 0x0b]);
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 1, 0x7e, 1, 0x7e], &mut module); // type (i64) -> i64
    section(3, &[1, 0], &mut module); // one function
    let mut code = vec![1];
    leb(body.len(), &mut code);
    code.extend(body);
    section(10, &code, &mut module);
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    section(1, &module, &mut component); // a core module section
    // An empty instance exported as the kind interface: enough for the checks made before
    // compiling (which read names only), so that it is the compile that is bounded.
    section(5, &[1, 0x01, 0], &mut component); // (instance) from no exports
    let name = b"spindle:job/kind@0.2.0";
    let mut export = vec![1, 0x00];
    leb(name.len(), &mut export);
    export.extend_from_slice(name);
    export.extend([0x05, 0, 0x00]); // instance 0, no type ascription
    section(11, &export, &mut component);
    component
}

/// Live (not yet reaped or exited) child processes of process `pid`: compiles run in one.
fn live_children(pid: u32) -> usize {
    let Ok(procs) = std::fs::read_dir("/proc") else { return 0 };
    procs
        .filter_map(|p| std::fs::read_to_string(p.ok()?.path().join("stat")).ok())
        .filter_map(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.to_owned()))
        .filter(|rest| {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.get(1).and_then(|ppid| ppid.parse::<u32>().ok()) == Some(pid) && fields.first() != Some(&"Z")
        })
        .count()
}

/// Compiling is bounded: a component that compiles slowly is refused at the time limit
/// and nothing goes on compiling it afterwards (a blocking thread used to, for as long
/// as it took, while the deploy had long been answered), and a tenant compiles one
/// component at a time — a second deploy meanwhile answers `busy` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiling_is_bounded_in_time_and_in_number() {
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = spindle_tests::served::Served::start(&url, &["--compile-timeout", "2s"]);
    let token = host.tenant("acme");
    let slow = slow_to_compile();
    assert!(slow.len() > 600_000 && slow.len() < 800_000, "{} bytes", slow.len());
    let http = spindle_tests::http_client();
    let deploy = |kind: &str| {
        // Waiting for the compile's end (it is refused at 2 s), not answered `202` first.
        let url = format!("{}/v1/kinds/{kind}?wait=30", host.url);
        http.put(url).bearer_auth(&token).body(slow.clone()).send()
    };
    let (first, second) = tokio::join!(deploy("slow"), async {
        // The second asks while the first compiles.
        tokio::task::yield_now().await;
        deploy("slow-too").await
    });
    let mut answers = Vec::new();
    for response in [first.unwrap(), second.unwrap()] {
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap();
        answers.push((status, body["error"]["code"].as_str().unwrap_or("").to_owned(), body.to_string()));
    }
    answers.sort();
    assert_eq!(answers[0].1, "invalid-component", "{answers:?}");
    assert!(answers[0].2.contains("component.compile-timeout"), "{answers:?}");
    assert_eq!((answers[1].0, answers[1].1.as_str()), (503, "busy"), "{answers:?}");
    // Nothing compiles on after the answer: no compile process is left, and over a
    // second the host uses far less than the core a compile would (the one fixed window).
    assert_eq!(live_children(host.pid()), 0, "a compile outlived its answer");
    let before = host.cpu_time();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let used = host.cpu_time().saturating_sub(before);
    assert!(
        used < std::time::Duration::from_millis(500),
        "the host used {used:?} of CPU in the second after answering"
    );
}

/// A 4.3 MB upload drove an unbounded compile to 6.7 GB. A compile now runs under a
/// memory limit (and its CPU time under the compile timeout): over it, the deploy is
/// refused as over the limit — not as a malformed component — and the host deploys the
/// next one as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_over_its_memory_limit_is_refused_as_such() {
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    // A Python kind (an interpreter inside) needs some 450 MiB to compile.
    let host = spindle_tests::served::Served::start(&url, &["--compile-memory-mib", "128"]);
    let token = host.tenant("acme");
    let python = spindle_tests::guest_path("greet-python");
    let ran = host.cli(Some(&token), &["deploy", "greet-python", python.to_str().unwrap()]);
    assert_ne!(ran.code, 0, "deployed over the limit: {}", ran.stdout);
    assert!(ran.stderr.contains("component.compile-over-limit"), "{}", ran.stderr);
    assert!(ran.stderr.contains("memory limit (128 MiB)"), "{}", ran.stderr);
    let noop = spindle_tests::guest_path("noop");
    let ran = host.cli(Some(&token), &["deploy", "noop", noop.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "a small kind compiles within the limit: {}", ran.stderr);
    assert_eq!(live_children(host.pid()), 0, "no compile outlived its answer");
}

/// Finished jobs were kept for ever. Now they are deleted once past their retention,
/// with their steps and history; open jobs stay whatever their age; a tenant may keep its
/// jobs for a time of its own; one host at a time prunes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_are_pruned_after_their_retention() {
    use spindle::pruner::{RetentionPolicy, prune_once};
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let h = Harness::new(backend).await;
        h.deploy("scripted").await;
        let clock = ManualClock::new(Timestamp::from_millis(1_750_000_000_000));
        let engine = h.engine_clocked(test_engine_config(), Arc::new(clock.clone()));
        let done = h.submit(&engine, "scripted", serde_json::json!({})).await;
        for _ in 0..3 {
            let claimed = engine.execution().claim(1).await.unwrap().pop().expect("the job's next step");
            engine.execution().execute(claimed).await;
        }
        assert!(engine.operations().job(&h.tenant, done).await.unwrap().job.state.is_final());
        // Open (delayed a year, so no claim here runs it), however old it grows.
        let later = spindle::engine::SubmitRequest {
            kind: "scripted".into(),
            input: b"{}".to_vec(),
            run_at: Some(clock.now().plus(Duration::from_secs(365 * 86_400))),
            ..Default::default()
        };
        let open = engine.submission().submit(&h.tenant, later).await.unwrap().record().job.id;
        let policy = RetentionPolicy { keep: Duration::from_secs(3600), vacuum_after: 1, ..RetentionPolicy::default() };
        let vacuums = || async {
            let sql = "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'jobs'";
            let rows = h.store.db().fetch(sql, vec![], &[Ty::Int]).await.unwrap();
            rows.first().map_or(0, |r| r.int(0, "test row").expect("a decodable row"))
        };

        clock.advance(Duration::from_secs(3599));
        assert_eq!(prune_once(&engine, &policy).await.unwrap(), Some(0), "{backend:?}: not yet");
        clock.advance(Duration::from_secs(2));
        assert_eq!(prune_once(&engine, &policy).await.unwrap(), Some(1), "{backend:?}: past its retention");
        assert!(engine.operations().job(&h.tenant, done).await.is_err(), "the finished job is gone");
        assert!(h.store.history(done).await.unwrap().is_empty(), "its history with it");
        assert!(engine.operations().job(&h.tenant, open).await.is_ok(), "an open job stays, however old");
        if backend == Backend::Postgres {
            // The pass vacuumed what it deleted: at a high rate autovacuum comes too seldom.
            assert_eq!(vacuums().await, 1, "the pruned tables were vacuumed");
        }

        // Another host holds the lease: this one does not prune.
        let other = h.engine_clocked(
            spindle::engine::EngineConfig { host_id: "other-host".into(), ..test_engine_config() },
            Arc::new(clock.clone()),
        );
        assert_eq!(prune_once(&other, &policy).await.unwrap(), None, "one pruner at a time");

        // A tenant with a retention of its own, shorter than the host's. (The harness's
        // tenant has jobs but no row; give it one.)
        engine.tenancy().create_tenant(&h.tenant.0).await.unwrap();
        let tenant = engine.tenancy().set_retention(&h.tenant, Some(Duration::from_secs(60))).await.unwrap();
        assert_eq!(tenant.retention, Some(Duration::from_secs(60)));
        assert_eq!(
            engine.tenancy().retention_overrides().await.unwrap(),
            vec![(h.tenant.clone(), Duration::from_secs(60))]
        );
        let short = h.submit(&engine, "scripted", serde_json::json!({})).await;
        while engine.operations().job(&h.tenant, short).await.is_ok_and(|j| !j.job.state.is_final()) {
            let claimed = engine.execution().claim(1).await.unwrap().pop().expect("the job's next step");
            engine.execution().execute(claimed).await;
        }
        clock.advance(Duration::from_secs(59));
        assert_eq!(prune_once(&engine, &policy).await.unwrap(), Some(0), "{backend:?}: within its tenant's minute");
        clock.advance(Duration::from_secs(2));
        assert_eq!(prune_once(&engine, &policy).await.unwrap(), Some(1), "{backend:?}: past its tenant's minute");
        assert!(engine.operations().job(&h.tenant, short).await.is_err());
        let out_of_range = engine.tenancy().set_retention(&h.tenant, Some(Duration::from_secs(59))).await;
        assert!(matches!(out_of_range, Err(EngineError::Invalid(_))), "{out_of_range:?}");
        engine.tenancy().set_retention(&h.tenant, None).await.unwrap();
        assert!(engine.tenancy().retention_overrides().await.unwrap().is_empty(), "back to the host's default");
    }
}

/// The status `GET url` answers with bearer `token`.
async fn status_with(url: &str, token: &str) -> u16 {
    spindle_tests::http_client().get(url).bearer_auth(token).send().await.expect("an answer").status().as_u16()
}

/// The ids of the tokens in a `token list --json` answer that work for `tenant` (`None`:
/// operator tokens).
fn ids_of(list: &Value, tenant: Option<&str>) -> Vec<String> {
    let tokens = list["tokens"].as_array().unwrap_or_else(|| panic!("a token list: {list}"));
    tokens.iter().filter(|t| t["tenant"].as_str() == tenant).map(|t| t["id"].as_str().unwrap().to_owned()).collect()
}

/// Every API answer (an error, a stream's start, health) says `nosniff` and
/// `Cache-Control: no-store`, so no browser guesses a type for tenant data and no cache
/// keeps a tenant's answer; the dashboard's files say `nosniff` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_answers_are_neither_sniffed_nor_cached() {
    let (store, url, _db) = fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = Served::start(&url, &[]);
    let acme = host.tenant("acme");
    let http = spindle_tests::http_client();
    let answers = [
        http.get(format!("{}/v1/health", host.url)).send().await.expect("health"),
        http.get(format!("{}/v1/jobs", host.url)).bearer_auth(&acme).send().await.expect("jobs"),
        http.get(format!("{}/v1/jobs", host.url)).send().await.expect("unauthorised"),
        http.get(format!("{}/v1/jobs/not-a-job", host.url)).bearer_auth(&acme).send().await.expect("malformed"),
        http.get(format!("{}/v1/no-such-route", host.url)).send().await.expect("no route"),
    ];
    for answer in &answers {
        let headers = answer.headers();
        let url = answer.url();
        assert_eq!(headers.get("x-content-type-options").map(|v| v.as_bytes()), Some(&b"nosniff"[..]), "{url}");
        assert_eq!(headers.get("cache-control").map(|v| v.as_bytes()), Some(&b"no-store"[..]), "{url}");
    }
    let page = http.get(format!("{}/", host.url)).send().await.expect("dashboard");
    assert_eq!(page.headers().get("x-content-type-options").map(|v| v.as_bytes()), Some(&b"nosniff"[..]));
    // A method a route does not take answers the typed error, not an empty body.
    let wrong = http.delete(format!("{}/v1/jobs", host.url)).bearer_auth(&acme).send().await.expect("a 405");
    assert_eq!(wrong.status().as_u16(), 405);
    let body: Value = wrong.json().await.expect("a JSON body");
    assert_eq!(body["error"]["code"], "method-not-allowed", "{body}");
}

/// A token could not be revoked: a tenant's token stayed good until the database was
/// edited by hand. Now `token revoke` retires it, and the next request with it is refused.
async fn a_revoked_token_is_refused_at_once(backend: Backend) {
    let (store, url, _db) = fresh_store(backend).await;
    drop(store);
    let host = Served::start(&url, &[]);
    let acme = host.tenant("acme");
    let created = host.cli(Some(&acme), &["token", "create", "--name", "ci", "--json"]);
    assert_eq!(created.code, 0, "token create: {}", created.stderr);
    let created = created.json();
    assert_eq!((created["tenant"].as_str(), created["role"].as_str()), (Some("acme"), Some("tenant")), "{created}");
    let (id, token) = (created["id"].as_str().unwrap().to_owned(), created["token"].as_str().unwrap().to_owned());
    let jobs = format!("{}/v1/jobs", host.url);
    assert_eq!(status_with(&jobs, &token).await, 200, "the new token works");

    let revoked = host.cli(Some(&acme), &["token", "revoke", &id]);
    assert_eq!(revoked.code, 0, "token revoke: {}", revoked.stderr);
    let refused = spindle_tests::http_client().get(&jobs).bearer_auth(&token).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 401, "a revoked token is refused at once");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorised", "{body}");
    assert_eq!(status_with(&jobs, &acme).await, 200, "the tenant's other token still works");

    let listed = host.cli(Some(&acme), &["token", "list", "--json"]).json();
    let row = listed["tokens"].as_array().unwrap().iter().find(|t| t["id"] == id.as_str()).expect("still listed");
    assert_eq!(row["state"], "revoked", "{row}");
    assert!(row["revoked_at"].is_string(), "{row}");
    assert!(!listed.to_string().contains(&token) && !listed.to_string().contains(&acme), "a listing shows no token");

    // The operator revokes any tenant's token: here acme's first one.
    let everything = host.cli(Some(&host.operator), &["token", "list", "--tenant", "acme", "--json"]).json();
    let first = everything["tokens"].as_array().unwrap().iter().find(|t| t["name"] == "initial").expect("the first");
    let first = first["id"].as_str().unwrap();
    assert_eq!(host.cli(Some(&host.operator), &["token", "revoke", first]).code, 0);
    assert_eq!(status_with(&jobs, &acme).await, 401, "revoked by the operator");
    let again = host.cli(Some(&host.operator), &["token", "revoke", "0000000000000000"]);
    assert!(again.code != 0 && again.stderr.contains("not-found"), "no such token: {}", again.stderr);
}

/// Tokens lived for ever. One made to expire is refused from its expiry on, by the clock
/// the host reads (a manual one here: nothing sleeps).
async fn an_expired_token_is_refused(backend: Backend) {
    let (store, url, scratch) = fresh_store(backend).await;
    drop(store);
    let clock = ManualClock::new(Timestamp::from_millis(1_750_000_000_000));
    let mut config = spindle::host::HostConfig::in_dir(scratch.path.join("data"));
    config.database_url = Some(url);
    config.sandbox = spindle_tests::test_sandbox();
    let host = Arc::new(spindle::host::Host::open_with_clock(config, Arc::new(clock.clone())).await.expect("a host"));
    let (_, lasting) = host.engine.tenancy().create_tenant("acme").await.unwrap();
    let acme = TokenScope::Tenant(TenantId("acme".into()));
    let (info, short) = host
        .engine
        .tenancy()
        .create_token(&acme, Some("short-lived"), Some(Duration::from_secs(60)), &acme)
        .await
        .unwrap();
    assert_eq!(info.expires_at, Some(clock.now().plus(Duration::from_secs(60))));
    let zero = host.engine.tenancy().create_token(&acme, None, Some(Duration::ZERO), &acme).await;
    assert!(matches!(zero, Err(EngineError::Invalid(_))), "a token born expired: {zero:?}");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = spindle::api::server::serve(
        listener,
        spindle::api::router(host.clone()),
        spindle::api::server::ServerLimits::default(),
        std::future::pending(),
    );
    let checks = async {
        let jobs = format!("{base}/v1/jobs");
        assert_eq!(status_with(&jobs, &short).await, 200, "before its expiry");
        clock.advance(Duration::from_secs(59));
        assert_eq!(status_with(&jobs, &short).await, 200, "a second before its expiry");
        clock.advance(Duration::from_secs(1));
        assert_eq!(status_with(&jobs, &short).await, 401, "refused from its expiry on");
        assert_eq!(status_with(&jobs, &lasting).await, 200, "a token without an expiry still works");
        let listed: Value = spindle_tests::http_client()
            .get(format!("{base}/v1/tokens"))
            .bearer_auth(&lasting)
            .send()
            .await
            .expect("an answer")
            .json()
            .await
            .expect("a token list");
        let row = listed["tokens"].as_array().unwrap().iter().find(|t| t["id"] == info.id.as_str()).expect("listed");
        assert_eq!(row["state"], "expired", "{row}");
    };
    tokio::select! {
        () = server => panic!("the API server stopped"),
        () = checks => {}
    }
    host.shutdown(Duration::from_secs(1)).await;
}

/// A tenant token manages its own tenant's tokens, and nothing more: it cannot list,
/// create or revoke another tenant's, nor make or revoke an operator token (which would
/// own every tenant). Another tenant's token is "not found" to it, like another's job.
async fn a_tenant_manages_its_own_tokens_and_no_others(backend: Backend) {
    let (store, url, _db) = fresh_store(backend).await;
    drop(store);
    let host = Served::start(&url, &[]);
    let (alice, bob) = (host.tenant("alice"), host.tenant("bob"));
    let (alice, bob) = (Some(alice.as_str()), Some(bob.as_str()));
    let operator = Some(host.operator.as_str());
    let all = host.cli(operator, &["token", "list", "--json"]).json();
    let (alices, bobs, operators) = (ids_of(&all, Some("alice")), ids_of(&all, Some("bob")), ids_of(&all, None));
    assert_eq!((alices.len(), bobs.len(), operators.len()), (1, 1, 1), "the operator lists every token: {all}");

    let mine = host.cli(alice, &["token", "list", "--json"]).json();
    assert_eq!(ids_of(&mine, Some("alice")), alices, "alice lists her own");
    assert_eq!(mine["tokens"].as_array().unwrap().len(), 1, "and only her own: {mine}");
    for args in [
        vec!["token", "list", "--tenant", "bob"],
        vec!["token", "create", "--tenant", "bob"],
        vec!["token", "create", "--operator"],
    ] {
        let ran = host.cli(alice, &args);
        assert_ne!(ran.code, 0, "{args:?} must fail for alice");
        assert!(ran.stderr.contains("forbidden"), "{args:?}: {}", ran.stderr);
    }
    for id in bobs.iter().chain(&operators) {
        let ran = host.cli(alice, &["token", "revoke", id.as_str()]);
        assert_ne!(ran.code, 0, "alice revoked {id}");
        assert!(ran.stderr.contains("not-found"), "another's token is not found: {}", ran.stderr);
    }
    let http = spindle_tests::http_client();
    let forbidden = http
        .post(format!("{}/v1/tokens", host.url))
        .bearer_auth(alice.unwrap())
        .json(&serde_json::json!({ "tenant": "bob" }))
        .send()
        .await
        .unwrap();
    assert_eq!(forbidden.status().as_u16(), 403);
    assert_eq!(host.cli(bob, &["jobs"]).code, 0, "bob's token still works");
    assert_eq!(host.cli(operator, &["tenant", "list"]).code, 0, "the operator's still works");
    let unchanged = host.cli(operator, &["token", "list", "--json"]).json();
    assert_eq!(unchanged["tokens"].as_array().unwrap().len(), 3, "alice made no token: {unchanged}");
    assert!(unchanged["tokens"].as_array().unwrap().iter().all(|t| t["state"] == "active"), "{unchanged}");

    // What alice may not do, the operator may; and alice may for herself.
    let for_bob = host.cli(operator, &["token", "create", "--tenant", "bob", "--json"]).json();
    assert_eq!(host.cli(Some(for_bob["token"].as_str().unwrap()), &["jobs"]).code, 0, "{for_bob}");
    let ops = host.cli(operator, &["token", "create", "--operator", "--name", "ops", "--expires", "30d", "--json"]);
    let ops = ops.json();
    assert_eq!((ops["role"].as_str(), ops["tenant"].as_str()), (Some("operator"), None), "{ops}");
    assert!(ops["expires_at"].is_string(), "{ops}");
    assert_eq!(host.cli(Some(ops["token"].as_str().unwrap()), &["tenant", "list"]).code, 0);
    let own = host.cli(alice, &["token", "create", "--json"]).json();
    assert_eq!(own["tenant"], "alice", "{own}");
    let nobody = host.cli(operator, &["token", "create", "--tenant", "initech"]);
    assert!(nobody.stderr.contains("not-found"), "no such tenant: {}", nobody.stderr);
}

/// The operator token could not be changed: a host restarted with another
/// `SPINDLE_OPERATOR_TOKEN` added it, and the old one went on working. Now the old one is
/// retired at start, while tokens made with `token create` are kept.
async fn a_changed_operator_token_retires_the_old_one(backend: Backend) {
    let (store, url, _db) = fresh_store(backend).await;
    drop(store);
    let first = Served::start_configured(Scratch::new(), &url, &[], "spt_operator_a");
    let acme = first.tenant("acme");
    let made = first.cli(Some("spt_operator_a"), &["token", "create", "--operator", "--name", "deploys", "--json"]);
    assert_eq!(made.code, 0, "token create: {}", made.stderr);
    let made = made.json()["token"].as_str().unwrap().to_owned();
    let (code, data) = first.terminate();
    assert_eq!(code, 0);

    let second = Served::start_configured(data, &url, &[], "spt_operator_b");
    let new = second.cli(Some("spt_operator_b"), &["tenant", "list"]);
    assert_eq!(new.code, 0, "the new operator token works: {}", new.stderr);
    let old = second.cli(Some("spt_operator_a"), &["tenant", "list"]);
    assert_ne!(old.code, 0, "the old operator token still works");
    assert!(old.stderr.contains("unauthorised"), "{}", old.stderr);
    assert_eq!(second.cli(Some(&made), &["tenant", "list"]).code, 0, "a created operator token is kept");
    assert_eq!(second.cli(Some(&acme), &["jobs"]).code, 0, "tenants' tokens are kept");
    let listed = second.cli(Some("spt_operator_b"), &["token", "list", "--json"]).json();
    let configured: Vec<&Value> =
        listed["tokens"].as_array().unwrap().iter().filter(|t| t["name"] == CONFIGURED_OPERATOR_TOKEN).collect();
    let states: Vec<&str> = configured.iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["revoked", "active"], "the old one, then the new one: {listed}");
}

/// Registering the configured operator token is idempotent; registering another retires
/// it (and no token made with `token create`); a host configured with a retired token
/// refuses to start instead of bringing it back (a host left on the old configuration
/// would otherwise undo the rotation).
async fn the_configured_operator_token_rotates_and_a_retired_one_stays_retired(backend: Backend) {
    let h = Harness::new(backend).await;
    let engine = h.engine();
    engine.tenancy().register_operator_token("spt_a").await.unwrap();
    engine.tenancy().register_operator_token("spt_a").await.expect("registering it again changes nothing");
    assert_eq!(
        engine.tenancy().authenticate("spt_a").await.unwrap().map(|p| (p.tenant, p.role)),
        Some((None, Role::Operator))
    );
    let (_, made) = engine
        .tenancy()
        .create_token(&TokenScope::Operator, Some("deploys"), None, &TokenScope::Operator)
        .await
        .unwrap();

    engine.tenancy().register_operator_token("spt_b").await.unwrap();
    assert_eq!(
        engine.tenancy().authenticate("spt_a").await.unwrap().map(|p| (p.tenant, p.role)),
        None,
        "the old one is retired"
    );
    assert_eq!(
        engine.tenancy().authenticate("spt_b").await.unwrap().map(|p| (p.tenant, p.role)),
        Some((None, Role::Operator))
    );
    assert_eq!(
        engine.tenancy().authenticate(&made).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((None, Role::Operator)),
        "a created one is kept"
    );

    let back = engine.tenancy().register_operator_token("spt_a").await;
    assert!(matches!(back, Err(EngineError::Invalid(_))), "a retired token is not brought back: {back:?}");
    assert_eq!(engine.tenancy().authenticate("spt_a").await.unwrap().map(|p| (p.tenant, p.role)), None);
    assert_eq!(
        engine.tenancy().authenticate("spt_b").await.unwrap().map(|p| (p.tenant, p.role)),
        Some((None, Role::Operator)),
        "nor the rotation undone"
    );
    let named = engine
        .tenancy()
        .create_token(&TokenScope::Operator, Some(CONFIGURED_OPERATOR_TOKEN), None, &TokenScope::Operator)
        .await;
    assert!(matches!(named, Err(EngineError::Invalid(_))), "a created token cannot pass for a configured one");
}

/// A tenant's retention is the operator's to set, through the API and the CLI: in range,
/// for a tenant that exists, and back to the host's default.
async fn the_operator_sets_a_tenants_retention(backend: Backend) {
    let (store, url, _db) = fresh_store(backend).await;
    drop(store);
    let host = Served::start(&url, &[]);
    let acme = host.tenant("acme");
    let operator = Some(host.operator.as_str());
    let set = host.cli(operator, &["tenant", "retention", "acme", "--keep", "7d", "--json"]).json();
    assert_eq!(set["retention_secs"], 7 * 86_400, "{set}");
    let listed = host.cli(operator, &["tenant", "list", "--json"]).json();
    assert_eq!(listed["tenants"][0]["retention_secs"], 7 * 86_400, "{listed}");
    for (args, code) in [
        (vec!["tenant", "retention", "acme", "--keep", "5s"], "invalid-request"),
        (vec!["tenant", "retention", "acme", "--keep", "11000d"], "invalid-request"),
        (vec!["tenant", "retention", "nobody", "--keep", "1d"], "not-found"),
    ] {
        let ran = host.cli(operator, &args);
        assert_ne!(ran.code, 0, "{args:?}");
        assert!(ran.stderr.contains(code), "{args:?}: {}", ran.stderr);
    }
    let ran = host.cli(Some(&acme), &["tenant", "retention", "acme", "--default"]);
    assert!(ran.code != 0 && ran.stderr.contains("forbidden"), "a tenant token may not: {}", ran.stderr);
    let unchanged = host.cli(operator, &["tenant", "list", "--json"]).json();
    assert_eq!(unchanged["tenants"][0]["retention_secs"], 7 * 86_400, "nothing changed: {unchanged}");
    let cleared = host.cli(operator, &["tenant", "retention", "acme", "--default", "--json"]).json();
    assert!(cleared.get("retention_secs").is_none(), "the host's default again: {cleared}");
}

/// A field a body does not know was dropped in silence: a deployment's misspelled
/// `setings`/`max_runing` deployed without them, outbound rules with a misspelled field or
/// a retention of `{}` reset the tenant's setting. Every body now refuses an unknown
/// field with a 400 that names it, and a setting whose `null` means "the default" must be
/// named; nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_body_refuses_a_field_it_does_not_know_by_name() {
    let (store, url, _db) = fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = Served::start(&url, &[]);
    let acme = host.tenant("acme");
    let operator = host.operator.clone();
    let http = spindle_tests::http_client();
    let send = |method: reqwest::Method, path: &str, token: &str, body: Option<Value>| {
        let mut request = http.request(method, format!("{}{path}", host.url)).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let answer = request.send().await.expect("a request");
            let status = answer.status().as_u16();
            (status, answer.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let noop = spindle_tests::guest("noop");
    let deploy = |deployment: Value| {
        let request = http
            .put(format!("{}/v1/kinds/noop", host.url))
            .query(&[("deployment", deployment.to_string())])
            .bearer_auth(&acme)
            .body(noop.clone());
        async move {
            let answer = request.send().await.expect("a deploy");
            let status = answer.status().as_u16();
            (status, answer.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    for (deployment, field) in [
        (serde_json::json!({ "setings": { "a": "b" } }), "`setings`"),
        (serde_json::json!({ "max_runing": 2 }), "`max_runing`"),
    ] {
        let (status, answer) = deploy(deployment.clone()).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (400, Some("invalid-request")), "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(field), "{deployment}: {answer}");
    }
    let (status, kinds) = send(reqwest::Method::GET, "/v1/kinds", &acme, None).await;
    assert_eq!((status, kinds["kinds"].as_array().map(Vec::len)), (200, Some(0)), "nothing deployed: {kinds}");

    let put = reqwest::Method::PUT;
    let (status, _) = send(
        put.clone(),
        "/v1/tenants/acme/retention",
        &operator,
        Some(serde_json::json!({ "retention_secs": 86_400 })),
    )
    .await;
    assert_eq!(status, 200);
    for (path, body, field) in [
        ("/v1/tenants/acme/retention", serde_json::json!({}), "retention_secs"),
        ("/v1/tenants/acme/retention", serde_json::json!({ "retention": 60 }), "`retention`"),
        ("/v1/tenants/acme/outbound", serde_json::json!({ "alow": ["GET https://example.com/"] }), "`alow`"),
        ("/v1/tenants/acme/outbound", serde_json::json!({}), "allow"),
        ("/v1/tenants/acme/limits", serde_json::json!({ "max_runing": 3 }), "`max_runing`"),
    ] {
        let (status, answer) = send(put.clone(), path, &operator, Some(body.clone())).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (400, Some("invalid-request")),
            "{path} {body}: {answer}"
        );
        assert!(answer["error"]["message"].as_str().unwrap().contains(field), "{path} {body}: {answer}");
    }
    let (_, tenants) = send(reqwest::Method::GET, "/v1/tenants", &operator, None).await;
    assert_eq!(tenants["tenants"][0]["retention_secs"], 86_400, "the retention stayed: {tenants}");
    let (status, answer) = send(
        reqwest::Method::POST,
        "/v1/jobs",
        &acme,
        Some(serde_json::json!({ "kind": "noop", "input": {}, "priorty": "critical" })),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("`priorty`"), "{answer}");
}

/// A host paused between stamping a claim and starting its guest (here: the clock moves
/// past the lease between the two) ran the guest on a claim that had lapsed, while another
/// host could take the same lease keys. Such a claim is never run now: its step produces
/// nothing, and the rescue runs it, once, on its next attempt.
async fn a_claim_that_lapsed_before_its_step_ran_is_never_run(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let clock = ManualClock::new(Timestamp::from_millis(1_750_000_000_000));
    let config = test_engine_config();
    let engine = h.engine_clocked(config.clone(), Arc::new(clock.clone()));
    let id = h.submit(&engine, "scripted", serde_json::json!({})).await;
    let claimed = engine.execution().claim(1).await.expect("claimed").pop().expect("the job");
    // Paused past its lease before the guest starts.
    clock.advance(config.lease_ttl + Duration::from_secs(1));
    let executed = engine.execution().execute(claimed).await;
    assert_eq!(executed.outcome, spindle::engine::Outcome::Lapsed);
    assert_eq!(engine.counters().lapsed_before_run.load(std::sync::atomic::Ordering::Relaxed), 1);
    let record = h.store.job(id).await.expect("read").expect("the job");
    assert!(record.job.steps[0].output.is_none(), "no guest ran on the lapsed claim");
    // Rescued, it runs on its next attempt, once.
    assert_eq!(engine.execution().rescue_lapsed(10).await.expect("rescue"), 1);
    clock.advance(Duration::from_secs(60));
    engine.execution().promote_due().await.expect("promote");
    let again = engine.execution().claim(1).await.expect("claimed").pop().expect("the job again");
    let executed = engine.execution().execute(again).await;
    assert!(matches!(executed.outcome, spindle::engine::Outcome::Settled(_)), "{executed:?}");
    let record = h.store.job(id).await.expect("read").expect("the job");
    let output = spindle_tests::json(record.job.steps[0].output.as_deref().expect("the step's output"));
    assert_eq!(output["attempt"], 2, "the guest ran once, on the attempt after the lapsed one: {output}");
}

/// `spindle openapi | head -1`, and any listing piped into a reader that stops early: the
/// command ends quietly with success instead of panicking on the broken pipe (the
/// document is larger than a pipe's buffer, so the write meets the closed end).
#[test]
fn a_command_whose_reader_goes_away_ends_quietly() {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(spindle_tests::spindle_bin())
        .arg("openapi")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert_eq!(first.trim(), "{");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && stderr.is_empty(), "{:?}: {stderr}", output.status);
}

/// Every language `spindle new` writes is named where a newcomer looks: `spindle --help`
/// and the README.
#[test]
fn every_language_spindle_new_writes_is_named_in_help_and_readme() {
    let help = std::process::Command::new(spindle_tests::spindle_bin()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--lang rust|python|js|ts|c|go"), "{help}");
    let readme = std::fs::read_to_string(spindle_tests::workspace_root().join("README.md")).unwrap();
    for lang in ["python", "rust", "js", "ts", "c", "go"] {
        assert!(readme.contains(&format!("`{lang}`")), "the README's `spindle new` leaves out {lang}");
    }
}
