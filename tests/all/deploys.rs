//! Deploying, as a team writing kinds in any language meets it: a component reaching for
//! an import the world lacks is refused before anything compiles, naming the import,
//! whatever its size; a `describe` that traps answers its message and what the guest
//! printed; a component must describe the kind it is deployed as; a large component is
//! answered at once and compiles in the background; and a failed step keeps the guest's
//! last stderr lines where its tenant reads them.

use std::time::Instant;

use serde_json::{Value, json};
use spindle::store::Backend;
use spindle_core::step::AttemptEnd;
use spindle_runtime::{LoadError, SandboxFault};
use spindle_tests::harness::Harness;
use spindle_tests::{guest, guest_path};

/// The interface the oversized component imports: nothing a job kind may reach.
const FORBIDDEN: &str = "wasi:keyvalue/store@0.2.0-draft";

/// A component of about 24 MB that imports [`FORBIDDEN`] (an instance of no functions)
/// and exports the kind interface, carrying a real component to compile (`noop`, nested)
/// and 24 MB of custom-section padding before its import: only reading its imports is
/// cheap, and only if the bulk is skipped rather than read.
fn oversized_with_a_forbidden_import() -> Vec<u8> {
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
    fn name(text: &str, out: &mut Vec<u8>) {
        out.push(0x00);
        leb(text.len(), out);
        out.extend_from_slice(text.as_bytes());
    }
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    // The bulk first, so that the import is read only after all of it has been passed.
    section(4, &guest("noop"), &mut component); // a nested component with real code
    let mut padding = vec![7];
    padding.extend_from_slice(b"padding");
    padding.resize(24 << 20, 0x5a);
    section(0, &padding, &mut component);
    section(7, &[1, 0x42, 0], &mut component); // type 0: (instance)
    let mut import = vec![1];
    name(FORBIDDEN, &mut import);
    import.extend([0x05, 0]); // an instance of type 0
    section(10, &import, &mut component);
    section(5, &[1, 0x01, 0], &mut component); // instance 1: from no exports
    let mut export = vec![1];
    name("spindle:job/kind@0.2.0", &mut export);
    export.extend([0x05, 1, 0x00]);
    section(11, &export, &mut component);
    component
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_import_is_refused_before_anything_compiles() {
    let h = Harness::new(Backend::Sqlite).await;
    let bytes = oversized_with_a_forbidden_import();
    assert!(bytes.len() > 24 << 20, "{} bytes", bytes.len());
    let runtime = h.registry.runtime();
    let compiles = runtime.compiles();
    let started = Instant::now();
    let refused = runtime.load(&bytes).await.expect_err("refused");
    eprintln!("a {}-byte component refused in {:?}", bytes.len(), started.elapsed());
    assert!(matches!(&refused, LoadError::ForbiddenImport(import) if import == FORBIDDEN), "{refused}");
    assert!(refused.to_string().contains(FORBIDDEN), "the refusal names the import: {refused}");
    assert_eq!(runtime.compiles(), compiles, "nothing was compiled");
    // Through the API, as a deploy: the same refusal, its code as `reason`, nothing stored.
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = spindle_tests::served::Served::start(&url, &["--max-component-bytes", "33554432"]);
    let token = host.tenant("acme");
    let answer = spindle_tests::http_client()
        .put(format!("{}/v1/kinds/noop", host.url))
        .bearer_auth(&token)
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 422);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["reason"], "component.forbidden-import", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains(FORBIDDEN), "{body}");
    let kinds = host.cli(Some(&token), &["kinds", "--json"]).json();
    assert_eq!(kinds["kinds"], json!([]), "nothing was deployed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_describe_that_traps_answers_its_message_and_what_the_guest_printed() {
    let h = Harness::new(Backend::Sqlite).await;
    let refused = h.registry.runtime().load(&guest("describe-trap")).await.expect_err("refused");
    let LoadError::Describe { fault, detail, stderr } = &refused else { panic!("a describe failure: {refused}") };
    assert_eq!(*fault, SandboxFault::Panic);
    assert!(!detail.is_empty(), "the trap's own message");
    let stderr = stderr.as_deref().expect("the guest's stderr");
    assert!(stderr.contains("describe-trap: the step table is empty"), "{stderr}");
    assert!(stderr.contains("describe-trap panics on purpose"), "the panic message: {stderr}");
    assert!(refused.to_string().contains("the step table is empty"), "the answer carries it: {refused}");
}

on_both_backends!(
    the_current_versions_bytes_deployed_again_the_same_way_are_that_version,
    a_kind_is_deployed_only_under_the_name_it_describes,
    a_failed_attempt_keeps_the_guests_last_stderr_lines,
    a_submission_pins_the_version_another_host_made_current
);

/// A redeploy of an unchanged build answers the current version: nothing compiles, no
/// version is added. Other bytes, another deployment, or an older version's bytes while a
/// newer one is current each make a new version.
async fn the_current_versions_bytes_deployed_again_the_same_way_are_that_version(backend: Backend) {
    use spindle::capabilities::Deployment;
    let h = Harness::new(backend).await;
    let now = spindle::clock::Clock::now(&spindle::clock::SystemClock);
    let versions = || async { h.registry.versions(&h.tenant, "noop").await.unwrap().len() };
    let (v1, _) = h.registry.deploy(&h.tenant, "noop", &guest("noop"), now).await.unwrap();
    let before = versions().await;
    let (again, spec) = h.registry.deploy(&h.tenant, "noop", &guest("noop"), now).await.unwrap();
    assert_eq!((again.version, again.digest.as_str(), spec.name.as_str()), (v1.version, v1.digest.as_str(), "noop"));
    assert_eq!(versions().await, before, "no version added");
    let records = h.registry.deploy_records(&h.tenant, "noop").await.unwrap();
    assert!(records.iter().all(|r| r.version == Some(v1.version)), "each deploy says the version it answered");

    let allowing = Deployment::parse(&["GET https://api.example.com/*".into()], &[], &[], false).unwrap();
    let (v2, _) = h.registry.deploy_with(&h.tenant, "noop", &guest("noop"), &allowing, now).await.unwrap();
    assert_eq!(v2.version, v1.version + 1, "another deployment is another version");
    let (v2_again, _) = h.registry.deploy_with(&h.tenant, "noop", &guest("noop"), &allowing, now).await.unwrap();
    assert_eq!(v2_again.version, v2.version);
    // The same rules and bindings in another order, or written twice, are the same deployment.
    let (a, b) = ("GET https://api.example.com/*", "POST https://hooks.example.com/*");
    let rules = |order: &[&str]| order.iter().map(|r| (*r).to_owned()).collect::<Vec<_>>();
    let binding = |order: &[&str]| order.iter().map(|r| format!("key@{r}")).collect::<Vec<_>>();
    let one = Deployment::parse(&rules(&[a, b]), &binding(&[a, b]), &[], false).unwrap();
    let other = Deployment::parse(&rules(&[b, a, b]), &binding(&[b, a]), &[], false).unwrap();
    let (ordered, _) = h.registry.deploy_with(&h.tenant, "noop", &guest("noop"), &one, now).await.unwrap();
    let (reordered, _) = h.registry.deploy_with(&h.tenant, "noop", &guest("noop"), &other, now).await.unwrap();
    assert_eq!(reordered.version, ordered.version, "--allow in another order made another version");
    let (v2, _) = h.registry.deploy_with(&h.tenant, "noop", &guest("noop"), &allowing, now).await.unwrap();
    let (v3, _) = h.registry.deploy(&h.tenant, "noop", &guest("noop"), now).await.unwrap();
    assert_eq!(v3.version, v2.version + 1, "v1's bytes and deployment while v2 is current: a new version");
}

async fn a_kind_is_deployed_only_under_the_name_it_describes(backend: Backend) {
    let h = Harness::new(backend).await;
    let now = spindle::clock::Clock::now(&spindle::clock::SystemClock);
    let refused = h.registry.deploy(&h.tenant, "go-stress", &guest("noop"), now).await.expect_err("refused");
    assert_eq!(refused.code(), "component.name-mismatch", "{refused}");
    assert!(refused.to_string().contains("`noop`") && refused.to_string().contains("`go-stress`"), "{refused}");
    assert!(h.registry.kinds(&h.tenant).await.unwrap().is_empty(), "nothing was stored");
    let records = h.registry.deploy_records(&h.tenant, "go-stress").await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].error_code.as_deref(), Some("component.name-mismatch"), "the deploy says why");
}

/// A host pins new jobs to the version it last knew without reading it; when another
/// host sharing the database has deployed or rolled back since, the insert notices and
/// the job still gets the version current when it was written.
async fn a_submission_pins_the_version_another_host_made_current(backend: Backend) {
    async fn pinned(h: &Harness, engine: &std::sync::Arc<spindle::engine::Engine>, kind_version: i64) {
        let id = h.submit(engine, "noop", json!({})).await;
        let job = engine.operations().job(&h.tenant, id).await.expect("the job");
        assert_eq!(job.kind_version, kind_version, "job {id}");
    }
    let h = Harness::new(backend).await;
    let engine = h.engine();
    assert_eq!(h.deploy("noop").await.version, 1);
    pinned(&h, &engine, 1).await;
    let other = spindle::registry::Registry::new(h.store.clone(), h.runtime.clone());
    let now = spindle::clock::Clock::now(&spindle::clock::SystemClock);
    // A setting makes it another version (the same bytes deployed the same way would be v1).
    let setting = spindle::capabilities::Deployment::parse(&[], &[], &["v=2".into()], false).unwrap();
    let (deployed, _) =
        other.deploy_with(&h.tenant, "noop", &guest("noop"), &setting, now).await.expect("the other host deploys");
    assert_eq!(deployed.version, 2);
    pinned(&h, &engine, 2).await;
    other.set_current(&h.tenant, "noop", 1, now).await.expect("the other host rolls back");
    pinned(&h, &engine, 1).await;
    let request =
        || spindle::engine::SubmitRequest { kind: "noop".into(), input: b"{}".to_vec(), ..Default::default() };
    other.set_current(&h.tenant, "noop", 2, now).await.expect("and forward again");
    let batch = engine.submission().submit_many(&h.tenant, vec![request(), request()]).await.expect("a batch");
    assert!(batch.iter().all(|i| i.record().kind_version == 2), "{batch:?}");
    assert_eq!(
        spindle::store::JobStore::depths(&*h.store).await.unwrap().iter().map(|d| d.count).sum::<i64>(),
        5,
        "no job twice, none lost"
    );
}

async fn a_failed_attempt_keeps_the_guests_last_stderr_lines(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy_as("versioned", "versioned-v1").await;
    let engine = h.engine();
    let id = h.submit(&engine, "versioned", json!({ "v1_panics": true })).await;
    let claimed = engine.execution().claim(1).await.unwrap().pop().expect("the job");
    engine.execution().execute(claimed).await;
    let job = engine.operations().job(&h.tenant, id).await.unwrap().job;
    let attempt = job.steps[0].attempts.last().expect("an attempt");
    let Some(AttemptEnd::Retryable { failure }) = &attempt.end else { panic!("a retryable fault: {attempt:?}") };
    assert_eq!(failure.code, "sandbox.panic");
    let stderr = failure.guest_stderr.as_deref().expect("the guest's stderr is kept");
    assert!(stderr.contains("version 1 panics on purpose"), "{stderr}");
    // A step that succeeds keeps nothing of the kind.
    let fine = h.submit(&engine, "versioned", json!({})).await;
    let claimed = engine.execution().claim(1).await.unwrap().pop().expect("the job");
    engine.execution().execute(claimed).await;
    let job = engine.operations().job(&h.tenant, fine).await.unwrap().job;
    assert!(matches!(job.steps[0].attempts[0].end, Some(AttemptEnd::Completed)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_is_answered_at_once_and_compiles_in_the_background() {
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = spindle_tests::served::Served::start(&url, &[]);
    let token = host.tenant("acme");
    let http = spindle_tests::http_client();
    let put = |kind: &str, file: &str| {
        http.put(format!("{}/v1/kinds/{kind}?wait=0", host.url)).bearer_auth(&token).body(guest(file)).send()
    };
    // Answered before it has compiled: 202, where to follow it, and its state.
    let answer = put("noop", "noop").await.unwrap();
    assert_eq!(answer.status().as_u16(), 202);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let accepted: Value = answer.json().await.unwrap();
    assert_eq!(accepted["state"], "compiling", "{accepted}");
    assert_eq!(location, format!("/v1/kinds/noop/deploys/{}", accepted["id"].as_str().unwrap()));
    let follow = |location: String| http.get(format!("{}{location}?wait=60", host.url)).bearer_auth(&token).send();
    let done: Value = follow(location).await.unwrap().json().await.unwrap();
    assert_eq!(done["state"], "ready", "{done}");
    assert_eq!(done["version"], 1);
    let kind = host.cli(Some(&token), &["kinds", "noop", "--json"]).json();
    assert_eq!(kind["current_version"], 1);
    assert_eq!(kind["deploys"][0]["state"], "ready", "the kind lists its deploys: {kind}");
    // One that fails after its answer: the deploy says why, and nothing is stored.
    let answer = put("describe-trap", "describe-trap").await.unwrap();
    assert_eq!(answer.status().as_u16(), 202);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let failed: Value = follow(location).await.unwrap().json().await.unwrap();
    assert_eq!(failed["state"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], "component.describe-failed", "{failed}");
    assert!(failed["error"]["message"].as_str().unwrap().contains("the step table is empty"), "{failed}");
    // The CLI follows a deploy to its end and says how it ended; with `--no-wait` it
    // answers once the component is checked.
    let path = guest_path("describe-trap");
    let ran = host.cli(Some(&token), &["deploy", "describe-trap", path.to_str().unwrap()]);
    assert_ne!(ran.code, 0);
    assert!(ran.stderr.contains("component.describe-failed"), "{}", ran.stderr);
    assert!(ran.stderr.contains("the step table is empty"), "{}", ran.stderr);
    let path = guest_path("noop3");
    let ran = host.cli(Some(&token), &["deploy", "noop3", path.to_str().unwrap(), "--no-wait"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stdout.contains("compiling") || ran.stdout.contains("deployed noop3"), "{}", ran.stdout);
}

/// The compiled artifacts (`.cwasm`) in a served host's artifact cache.
fn artifacts(host: &spindle_tests::served::Served) -> Vec<String> {
    let dir = host.data.path.join("artifacts");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|name| name.ends_with(".cwasm"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Six refused uploads left 48 MiB of artifacts that belonged to no version, and nothing
/// removed them; and an artifact (tens of times its upload) was not counted against the
/// tenant's deployed bytes. A deploy refused after its compile now leaves no artifact,
/// and a tenant's deployed bytes count each version's compiled code beside its upload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_deploy_leaves_no_artifact_and_compiled_code_counts_against_the_tenant() {
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = spindle_tests::served::Served::start(&url, &[]);
    let token = host.tenant("acme");
    let deploy = |kind: &str, file: &str| {
        let path = spindle_tests::guest_path(file);
        host.cli(Some(&token), &["deploy", kind, path.to_str().unwrap()])
    };
    for (kind, file, code) in [
        ("describe-trap", "describe-trap", "component.describe-failed"),
        ("go-stress", "noop", "component.name-mismatch"),
    ] {
        let ran = deploy(kind, file);
        assert!(ran.code != 0 && ran.stderr.contains(code), "{kind}: {}", ran.stderr);
        assert_eq!(artifacts(&host), Vec::<String>::new(), "{kind} left an artifact");
    }
    let ran = deploy("noop", "noop");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let kept = artifacts(&host);
    assert_eq!(kept.len(), 1, "the version's artifact stays: {kept:?}");
    let usage = host.cli(Some(&token), &["usage", "--json"]).json();
    let deployed = usage["deployed_bytes"].as_u64().unwrap_or_else(|| panic!("deployed bytes: {usage}"));
    let upload = std::fs::metadata(spindle_tests::guest_path("noop")).expect("noop").len();
    assert!(deployed > upload, "the compiled code counts too: {deployed} bytes for a {upload}-byte upload");

    // A quota the upload fits but its compiled code does not: refused after the compile,
    // and its artifact is gone with it.
    let operator = Some(host.operator.as_str());
    let limit = (deployed + upload + 1_000).to_string();
    let ran = host.cli(operator, &["tenant", "set", "acme", "--max-deployed-bytes", &limit]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let ran = deploy("hog", "hog");
    assert!(ran.code != 0 && ran.stderr.contains("quota-exceeded"), "{}", ran.stderr);
    assert_eq!(artifacts(&host), kept, "only the version's artifact is left");
}

/// `spindle deploy --record lean` sent through a host of an older build, which ignores
/// fields it does not know, deployed a full kind and said nothing. The CLI reads back
/// what the host stored and fails, naming what was dropped. (The older host is played by
/// a server answering as it would: this build's answers without the record.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_the_host_stored_without_what_was_asked_fails_in_the_cli() {
    use spindle_tests::http::{Reply, TestServer};
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = spindle_tests::served::Served::start(&url, &[]);
    let token = host.tenant("acme");
    let noop = spindle_tests::guest_path("noop");
    let ran = host.cli(Some(&token), &["deploy", "noop", noop.to_str().unwrap(), "--record", "lean", "--json"]);
    assert_eq!(ran.code, 0, "this build stores it as asked: {}", ran.stderr);
    let deployed = ran.stdout.clone();
    let http = spindle_tests::http_client();
    let mut kind: serde_json::Value = http
        .get(format!("{}/v1/kinds/noop", host.url))
        .bearer_auth(&token)
        .send()
        .await
        .expect("the kind")
        .json()
        .await
        .expect("JSON");
    assert_eq!(kind["versions"][0]["deployment"]["record"], "lean", "{kind}");
    // What a host that knows nothing of records answers.
    kind["versions"][0]["deployment"].as_object_mut().expect("a deployment").remove("record");
    let older = TestServer::start(move |seen, _| match (seen.method.as_str(), seen.target.split('?').next()) {
        ("PUT", Some("/v1/kinds/noop")) => Reply::Answer(201, deployed.clone().into_bytes()),
        ("GET", Some("/v1/kinds/noop")) => Reply::Answer(200, kind.to_string().into_bytes()),
        _ => Reply::Answer(404, b"{}".to_vec()),
    })
    .await;
    let ran = std::process::Command::new(spindle_tests::spindle_bin())
        .args(["deploy", "noop", noop.to_str().unwrap(), "--record", "lean"])
        .env("SPINDLE_SERVER", format!("http://{}", older.addr))
        .env("SPINDLE_TOKEN", &token)
        .output()
        .expect("the CLI");
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(!ran.status.success(), "the CLI says the deploy is not what was asked");
    assert!(stderr.contains("without what was asked (record lean)"), "{stderr}");
}
