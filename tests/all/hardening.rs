//! Regressions from the fault-injection runs, the code review and the black-box probes:
//! each test here failed before its fix.

use std::sync::Arc;
use std::time::Duration;

use spindle::clock::{Clock, ManualClock};
use spindle::store::prelude::*;
use spindle::store::{Backend, Role};
use spindle_core::Timestamp;
use spindle_tests::harness::{Harness, test_engine_config};

on_both_backends!(hosts_starting_together_register_one_operator_token, hostile_inputs_answer_typed_errors_not_panics);

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
                engine.register_operator_token(token).await
            })
        })
        .collect();
    for start in starts {
        start.await.unwrap().expect("every host registers the token");
    }
    let (tenant, role) = engines[0].authenticate(token).await.unwrap().expect("the token is known");
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
        async move { engine.claim(1).await }
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
    let http = reqwest::Client::new();
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
    host.engine.create_tenant("acme").await.expect("a write, so the log exists");
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
    let health = reqwest::get(format!("{}/v1/health", host.url)).await.expect("served");
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
    component
}

/// Threads of process `pid` running on a CPU now.
fn running_threads(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
        .filter(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('R')))
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
    let http = reqwest::Client::new();
    let deploy =
        |kind: &str| http.put(format!("{}/v1/kinds/{kind}", host.url)).bearer_auth(&token).body(slow.clone()).send();
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
    // Nothing compiles on after the answer: the host is idle.
    let busy_samples = (0..50).filter(|_| running_threads(host.pid()) > 0).count();
    assert!(busy_samples < 25, "the host ran a thread in {busy_samples} of 50 samples after answering");
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
            let claimed = engine.claim(1).await.unwrap().pop().expect("the job's next step");
            engine.execute(claimed).await;
        }
        assert!(engine.job(&h.tenant, done).await.unwrap().job.state.is_final());
        let open = h.submit(&engine, "scripted", serde_json::json!({})).await;
        let policy = RetentionPolicy { keep: Duration::from_secs(3600), ..RetentionPolicy::default() };

        clock.advance(Duration::from_secs(3599));
        assert_eq!(prune_once(&engine, &policy).await.unwrap(), Some(0), "{backend:?}: not yet");
        clock.advance(Duration::from_secs(2));
        assert_eq!(prune_once(&engine, &policy).await.unwrap(), Some(1), "{backend:?}: past its retention");
        assert!(engine.job(&h.tenant, done).await.is_err(), "the finished job is gone");
        assert!(h.store.history(done).await.unwrap().is_empty(), "its history with it");
        assert!(engine.job(&h.tenant, open).await.is_ok(), "an open job stays, however old");

        // Another host holds the lease: this one does not prune.
        let other = h.engine_clocked(
            spindle::engine::EngineConfig { host_id: "other-host".into(), ..test_engine_config() },
            Arc::new(clock.clone()),
        );
        assert_eq!(prune_once(&other, &policy).await.unwrap(), None, "one pruner at a time");

        // A tenant with a retention of its own.
        let (acme, _) = engine.create_tenant("acme").await.unwrap();
        engine.set_retention(&acme.id, Some(Duration::from_secs(60))).await.unwrap();
        assert_eq!(engine.retention_overrides().await.unwrap(), vec![(acme.id.clone(), Duration::from_secs(60))]);
    }
}
