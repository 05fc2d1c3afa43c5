//! The typed clients (issue 41) against a real `spindle serve`: the Rust crate in this
//! process, the Python and TypeScript packages in their own runtimes (installed by
//! `cargo xtask test`), each through submit, get, wait, signal, cancel, list, logs and
//! events, a refusal's code and violations, and a 429 tried again after `Retry-After`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use spindle::store::Backend;
use spindle_client::views::LimitsView;
use spindle_client::{Client, Error, JobEvent, JobFilter, Retry, Submission};
use spindle_tests::harness::Scratch;
use spindle_tests::served::Served;

const PATIENCE: Duration = Duration::from_secs(120);

/// A host on a fresh SQLite file with tenant `acme` and the kinds the clients' tests use.
async fn host() -> (Served, String, Scratch) {
    let (store, url, scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = Served::start(&url, &[]);
    let token = host.tenant("acme");
    for kind in ["scripted", "workflow", "typed-noop"] {
        let path = spindle_tests::guest_path(kind);
        let ran = host.cli(Some(&token), &["deploy", kind, path.to_str().unwrap()]);
        assert_eq!(ran.code, 0, "deploy {kind}: {}", ran.stderr);
    }
    (host, token, scratch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_submits_once_per_key_waits_lists_and_follows_a_job() {
    let (host, token, _scratch) = host().await;
    let client = Client::new(&host.url, &token).unwrap();
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let submission = Submission::new("scripted", json!({ "first": "more:3" }))
        .idempotency_key("order-42")
        .traceparent(traceparent)
        .priority("critical");
    let first = client.submit(&submission).await.unwrap();
    assert!(first.created);
    assert_eq!((first.job.kind.as_str(), first.job.priority.as_str()), ("scripted", "critical"));
    let again = client.submit(&submission).await.unwrap();
    assert!(!again.created, "the same key answers the first job");
    assert_eq!(again.job.id, first.job.id);

    let id = first.job.id.clone();
    let mut events = client.events(&id).await.unwrap();
    let mut lines = client.follow_logs(&id, None).await.unwrap();
    let done = client.wait(&id, PATIENCE).await.unwrap();
    assert!(done.is_final());
    assert_eq!(done.state, "succeeded");

    // The events, from the first entry, end once the job is final.
    let mut history = Vec::new();
    let mut last_state = None;
    while let Some(event) = events.next().await.unwrap() {
        match event {
            JobEvent::History(entry) => history.push(entry.event),
            JobEvent::Job(live) => last_state = Some(live.state),
        }
    }
    assert_eq!(history.first().map(String::as_str), Some("submitted"));
    assert!(history.iter().any(|event| event == "succeeded"), "{history:?}");
    assert_eq!(last_state.as_deref(), Some("succeeded"));
    // Followed lines are the lines kept, in order.
    let mut followed = Vec::new();
    while let Some(line) = lines.next().await.unwrap() {
        followed.push(line);
    }
    let kept = client.logs(&id, None).await.unwrap();
    assert!(!kept.lines.is_empty(), "the scripted kind logs as it goes");
    assert_eq!(followed, kept.lines);

    let whole = client.job(&id).await.unwrap();
    assert_eq!(whole.idempotency_key.as_deref(), Some("order-42"));
    assert!(whole.history.is_some_and(|h| !h.is_empty()));
    let filter = JobFilter { kind: Some("scripted".into()), state: Some("succeeded".into()), ..JobFilter::default() };
    let page = client.list(&filter).await.unwrap();
    assert_eq!(page.jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), [id.as_str()]);
    let none = client.list(&JobFilter { kind: Some("workflow".into()), ..JobFilter::default() }).await.unwrap();
    assert!(none.jobs.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_signals_and_cancels_and_a_refused_command_says_why() {
    let (host, token, _scratch) = host().await;
    let client = Client::new(&host.url, &token).unwrap();
    let waiting =
        client.submit(&Submission::new("workflow", json!({ "signal": "shipped", "timeout_secs": 3600 }))).await;
    let id = waiting.unwrap().job.id;
    let sent = client.signal(&id, "shipped", &json!({ "carrier": "post" }), Some("ship-1")).await.unwrap();
    assert_eq!(sent.id, id);
    client.signal(&id, "shipped", &json!({ "carrier": "post" }), Some("ship-1")).await.unwrap();
    let done = client.wait(&id, PATIENCE).await.unwrap();
    assert_eq!(done.state, "succeeded");
    let output = done.steps[0].output.clone().expect("the step's output");
    assert_eq!(output["signals"], json!([{ "carrier": "post" }]), "one delivery for one key");

    let stuck = client.submit(&Submission::new("scripted", json!({ "first": "wait-for-stop" }))).await.unwrap().job;
    client.cancel(&stuck.id, "the customer changed their mind").await.unwrap();
    let cancelled = client.wait(&stuck.id, PATIENCE).await.unwrap();
    assert_eq!(cancelled.state, "cancelled");
    match client.cancel(&stuck.id, "again").await {
        Err(Error::Refused(refused)) => {
            assert_eq!((refused.status, refused.code.as_str()), (409, "illegal-transition"));
            assert_eq!(refused.state.as_deref(), Some("cancelled"));
            assert!(refused.reason.is_some());
        }
        other => panic!("a final job refuses a cancel: {other:?}"),
    }
    match client.job("00000000-0000-0000-0000-000000000000").await {
        Err(Error::Refused(refused)) => assert_eq!(refused.known(), Some(spindle_client::views::ErrorCode::NotFound)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_carries_violations_and_tries_a_quota_again_after_retry_after() {
    let (host, token, _scratch) = host().await;
    let client = Client::new(&host.url, &token).unwrap();
    match client.submit(&Submission::new("typed-noop", json!({ "account": "" }))).await {
        Err(Error::Refused(refused)) => {
            assert_eq!((refused.status, refused.code.as_str()), (422, "invalid-input"));
            assert!(refused.violations.iter().any(|v| v.pointer == "/account"), "{:?}", refused.violations);
        }
        other => panic!("a schema violation is refused: {other:?}"),
    }
    assert_eq!(
        client.submit(&Submission::new("no-such-kind", json!({}))).await.unwrap_err().code(),
        Some("unknown-kind")
    );

    // One submission a second: the second at once is refused 429 with `Retry-After`,
    // which a client that does not retry sees, and one that does waits out.
    let operator = Client::new(&host.url, &host.operator).unwrap();
    let limits = LimitsView { rate_per_sec: Some(1), rate_burst: Some(1), ..LimitsView::default() };
    let _: serde_json::Value =
        operator.call(reqwest::Method::PUT, "/v1/tenants/acme/limits", Some(&limits)).await.unwrap();
    let impatient = Client::builder(&host.url).token(&token).retry(Retry::NEVER).build().unwrap();
    impatient.submit(&Submission::new("scripted", json!({}))).await.unwrap();
    match impatient.submit(&Submission::new("scripted", json!({}))).await {
        Err(Error::Refused(refused)) => {
            assert_eq!((refused.status, refused.code.as_str()), (429, "quota-exceeded"));
            assert!(refused.retry_after.is_some_and(|after| after >= Duration::from_secs(1)), "{refused:?}");
        }
        other => panic!("the rate refuses the second submission: {other:?}"),
    }
    let patient = client.submit(&Submission::new("scripted", json!({}))).await.unwrap();
    assert!(patient.created, "tried again after Retry-After, and admitted");
}

/// The toolchain `cargo xtask test` installs for a client's tests, under `target/toolchains`.
fn client_toolchain(relative: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| spindle_tests::workspace_root().join("target"), PathBuf::from);
    let path = target.join("toolchains").join(relative);
    assert!(path.exists(), "{} is missing: `cargo xtask test` installs it", path.display());
    path
}

/// Runs a client's own test suite against `host`, with its address and tokens in the
/// environment; fails with the suite's output unless it passed with nothing skipped.
fn run_suite(mut command: Command, host: &Served, token: &str, what: &str) -> String {
    let output = command
        .env("SPINDLE_URL", &host.url)
        .env("SPINDLE_TOKEN", token)
        .env("SPINDLE_OPERATOR_TOKEN", &host.operator)
        .output()
        .unwrap_or_else(|e| panic!("running {what}: {e}"));
    let shown = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{what} failed:\n{shown}");
    shown
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_clients_pass_their_suite_against_a_real_host() {
    let (host, token, _scratch) = host().await;
    let python = client_toolchain("clients-python/bin/python");
    let mut command = Command::new(python);
    command
        .args(["-m", "unittest", "discover", "-s", "tests", "-v"])
        .current_dir(spindle_tests::workspace_root().join("clients/python"));
    let shown = run_suite(command, &host, &token, "the Python client's tests");
    assert!(shown.contains("Ran 6 tests") && !shown.contains("skipped"), "every test ran:\n{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_types_are_generated_from_the_servers_document() {
    let package = spindle_tests::workspace_root().join("clients/typescript");
    let generator = package.join("node_modules/.bin/openapi-typescript");
    assert!(generator.exists(), "{} is missing: `cargo xtask test` installs it", generator.display());
    let scratch = Scratch::new();
    let document = scratch.path.join("openapi.json");
    let printed = Command::new(spindle_tests::spindle_bin()).arg("openapi").output().expect("spindle openapi");
    assert!(printed.status.success());
    std::fs::write(&document, &printed.stdout).unwrap();
    let generated = scratch.path.join("schema.ts");
    let ran = Command::new(&generator).arg(&document).arg("-o").arg(&generated).current_dir(&package).output().unwrap();
    assert!(ran.status.success(), "openapi-typescript: {}", String::from_utf8_lossy(&ran.stderr));
    let committed = std::fs::read_to_string(package.join("src/schema.ts")).unwrap();
    assert!(
        std::fs::read_to_string(&generated).unwrap() == committed,
        "clients/typescript/src/schema.ts is not what the server's document generates: run \
         `spindle openapi > openapi.json && npm run generate` in clients/typescript"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_passes_its_suite_against_a_real_host() {
    let (host, token, _scratch) = host().await;
    let package = spindle_tests::workspace_root().join("clients/typescript");
    let tsc = package.join("node_modules/.bin/tsc");
    assert!(tsc.exists(), "{} is missing: `cargo xtask test` installs it", tsc.display());
    // Compiled under `strict`: a type the client uses that the schema lost fails here.
    let compiled = Command::new(&tsc).args(["-p", "."]).current_dir(&package).output().unwrap();
    assert!(compiled.status.success(), "tsc: {}", String::from_utf8_lossy(&compiled.stdout));
    let mut command = Command::new("node");
    command.args(["--test", "dist/test/"]).current_dir(&package);
    let shown = run_suite(command, &host, &token, "the TypeScript client's tests");
    assert!(shown.contains("# pass 4") && shown.contains("# skipped 0"), "every test ran:\n{shown}");
}

/// The inputs the client documentation submits: each object literal in `docs/clients.md`
/// that names an `order_id`, read as JSON (a TypeScript literal's bare keys quoted).
fn documented_order_inputs() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(spindle_tests::workspace_root().join("docs/clients.md")).unwrap();
    let mut inputs = Vec::new();
    for (at, _) in text.match_indices("order_id") {
        let open = text[..at].rfind('{').expect("an object around order_id");
        let close = at + text[at..].find('}').expect("an object around order_id");
        let mut literal = text[open..=close].to_owned();
        for key in ["order_id", "images", "ship_timeout_secs"] {
            if !literal.contains(&format!("\"{key}\"")) {
                literal = literal.replace(&format!("{key}:"), &format!("\"{key}\":"));
            }
        }
        let input = serde_json::from_str(&literal).unwrap_or_else(|e| panic!("{literal} is not JSON: {e}"));
        inputs.push(input);
    }
    inputs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_input_the_client_documentation_shows_is_one_its_kind_accepts() {
    let inputs = documented_order_inputs();
    assert!(inputs.len() >= 7, "the SQL door's four languages and the three clients: {inputs:?}");
    let (host, token, _scratch) = host().await;
    let path = spindle_tests::guest_path("order-fulfilment");
    let ran = host.cli(Some(&token), &["deploy", "order-fulfilment", path.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "deploy order-fulfilment: {}", ran.stderr);
    let client = Client::new(&host.url, &token).unwrap();
    for input in inputs {
        let submitted = client.submit(&Submission::new("order-fulfilment", input.clone())).await;
        assert!(submitted.is_ok_and(|s| s.created), "order-fulfilment refuses the documented {input}");
    }
}

#[test]
fn the_client_readmes_use_the_default_address_and_kinds_the_examples_build() {
    let root = spindle_tests::workspace_root();
    let mut documents = vec![root.join("docs/clients.md")];
    documents.extend(["python", "typescript", "rust"].map(|c| root.join("clients").join(c).join("README.md")));
    for document in documents {
        let text = std::fs::read_to_string(&document).unwrap();
        for (at, _) in text.match_indices("http://127.0.0.1:") {
            let port: String = text[at + 17..].chars().take_while(char::is_ascii_digit).collect();
            assert_eq!(port, "7464", "{} points at port {port}, not `spindle serve`'s", document.display());
        }
        for opening in ["submit(\"", "Submission::new(\""] {
            for (at, _) in text.match_indices(opening) {
                let kind: String = text[at + opening.len()..].chars().take_while(|c| *c != '"').collect();
                assert!(
                    root.join("examples").join(&kind).is_dir(),
                    "{} submits `{kind}`, which no example builds",
                    document.display()
                );
            }
        }
    }
}

/// Every file under `dir`, relative, sorted.
fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    found
}

/// Copies `from` into `to`, leaving out the names in `skip`.
fn copy_tree(from: &std::path::Path, to: &std::path::Path, skip: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &to.join(&name), skip);
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

#[test]
fn the_python_client_installs_with_pip_and_leaves_its_checkout_as_it_was() {
    let python = client_toolchain("clients-python/bin/python");
    let scratch = Scratch::new();
    let checkout = scratch.path.join("python");
    copy_tree(&spindle_tests::workspace_root().join("clients/python"), &checkout, &["__pycache__"]);
    let before = files_under(&checkout);
    let site = scratch.path.join("site");
    // No network and no build isolation: the build backend is the one the toolchain holds.
    let installed = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps", "--no-index", "--target"])
        .arg(&site)
        .arg(&checkout)
        .output()
        .unwrap();
    assert!(installed.status.success(), "pip install: {}", String::from_utf8_lossy(&installed.stderr));
    assert_eq!(files_under(&checkout), before, "pip install wrote into the checkout");
    let imported = Command::new(&python)
        .args(["-c", "import spindle_client; assert spindle_client.Client and spindle_client.AsyncClient"])
        .env("PYTHONPATH", &site)
        .current_dir(&scratch.path)
        .output()
        .unwrap();
    assert!(imported.status.success(), "import: {}", String::from_utf8_lossy(&imported.stderr));
}

#[test]
fn the_typescript_client_packs_from_its_folder_and_an_application_imports_it() {
    let package = spindle_tests::workspace_root().join("clients/typescript");
    let modules = package.join("node_modules");
    assert!(modules.join(".bin/tsc").exists(), "{} is missing: `cargo xtask test` installs it", modules.display());
    let scratch = Scratch::new();
    // A checkout as a clone has it: no `dist/` (the `prepare` script builds it).
    let checkout = scratch.path.join("typescript");
    copy_tree(&package, &checkout, &["node_modules", "dist"]);
    std::os::unix::fs::symlink(&modules, checkout.join("node_modules")).unwrap();
    let packed = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(&scratch.path)
        .current_dir(&checkout)
        .output()
        .unwrap();
    assert!(packed.status.success(), "npm pack: {}", String::from_utf8_lossy(&packed.stderr));
    let tarball = scratch.path.join("spindle-client-0.1.0.tgz");
    assert!(tarball.is_file(), "npm pack made no {}", tarball.display());
    let app = scratch.path.join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(
        app.join("package.json"),
        r#"{"name": "app", "version": "1.0.0", "private": true, "type": "module"}"#,
    )
    .unwrap();
    let installed = Command::new("npm")
        .args(["install", "--offline", "--no-audit", "--no-fund"])
        .arg(&tarball)
        .current_dir(&app)
        .output()
        .unwrap();
    assert!(installed.status.success(), "npm install: {}", String::from_utf8_lossy(&installed.stderr));
    let imported = Command::new("node")
        .args([
            "-e",
            "import('@spindle/client').then(m => { if (typeof m.SpindleClient !== 'function') process.exit(3) })",
        ])
        .current_dir(&app)
        .output()
        .unwrap();
    assert!(imported.status.success(), "import: {}", String::from_utf8_lossy(&imported.stderr));
}

/// A TLS front on 127.0.0.1 for `host`, with a certificate for `localhost` made here;
/// answers its address and the certificate's PEM.
async fn tls_front(host: &Served) -> (String, String) {
    use tokio_rustls::rustls;
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(made.signing_key.serialize_der()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = host.url.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                // A client that refuses the certificate ends its handshake: nothing to carry.
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let mut plain = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (format!("https://localhost:{port}"), made.cert.pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_reaches_a_host_over_https_and_trusts_only_what_it_is_told() {
    let (host, token, _scratch) = host().await;
    let (url, pem) = tls_front(&host).await;
    let client = Client::builder(&url).token(&token).root_certificates_pem(pem).build().unwrap();
    let submitted = client.submit(&Submission::new("scripted", json!({}))).await.unwrap();
    assert_eq!(client.wait(&submitted.job.id, PATIENCE).await.unwrap().state, "succeeded");
    // Without the private root the host's certificate is refused, and nothing is sent.
    let untrusting = Client::new(&url, &token).unwrap();
    match untrusting.job(&submitted.job.id).await {
        Err(Error::Transport { .. }) => {}
        other => panic!("an untrusted certificate is a transport error: {other:?}"),
    }
    let garbled = Client::builder(&url).root_certificates_pem("not a certificate").build();
    assert!(matches!(garbled, Err(Error::Invalid(_))), "{garbled:?}");
}
