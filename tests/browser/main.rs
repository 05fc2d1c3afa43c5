//! The dashboard in a real browser: Debian's headless Chromium, driven through its
//! chromedriver (WebDriver), against a real `spindle serve` with real jobs. A tenant signs
//! in, finds a failed job by filter, reads its failure code and a log line, retries it
//! and sees the new linked job succeed, cancels a running job and deploys a second
//! version of a kind; another tenant's token sees none of it. Each page is saved as a
//! screenshot under `target/dashboard-screenshots/` for review.
//!
//! Waits watch the page for the state a step needs (an element, a text), as the browser
//! renders what the host answers; none is a fixed sleep.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use spindle::store::Backend;
use spindle_tests::harness::Scratch;
use spindle_tests::served::Served;

/// Longest any wait here may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// Chromium under chromedriver, and where its screenshots go.
struct Browser {
    client: Client,
    driver: Child,
    shots: PathBuf,
    _profile: Scratch,
}

impl Browser {
    async fn start(name: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver; `cargo xtask test` installs it)");
        // It says when it listens.
        let stdout = driver.stdout.take().unwrap();
        let started = tokio::task::spawn_blocking(move || {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(stdout).lines();
            let ready = lines.by_ref().map_while(Result::ok).any(|line| line.contains("started successfully"));
            // Keep reading, so that its later lines never fill the pipe.
            std::thread::spawn(move || lines.for_each(drop));
            ready
        });
        assert!(started.await.unwrap(), "chromedriver did not start");
        let profile = Scratch::new();
        let capabilities: serde_json::Map<String, Value> = serde_json::from_value(json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--window-size=1360,1000", format!("--user-data-dir={}", profile.path.display()),
                ],
            },
        }))
        .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("no WebDriver session: {e}"));
        let target = spindle_tests::guest_path("x").parent().unwrap().parent().unwrap().to_path_buf();
        let shots = target.join("dashboard-screenshots").join(name);
        std::fs::create_dir_all(&shots).unwrap();
        Self { client, driver, shots, _profile: profile }
    }

    /// Saves the page as `<name>.png`.
    async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("a screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    /// The element marked `data-test="test"`, once there.
    async fn find(&self, test: &str) -> fantoccini::elements::Element {
        let css = format!("[data-test=\"{test}\"]");
        match self.client.wait().at_most(PATIENCE).for_element(Locator::Css(&css)).await {
            Ok(found) => found,
            Err(e) => {
                self.shot("timed-out").await;
                panic!("{test}: {e}")
            }
        }
    }

    /// Waits until `check` answers `Some`, reading the page again each time.
    async fn until<T, F, Fut>(&self, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(found) = check().await {
                return found;
            }
            if tokio::time::Instant::now() >= deadline {
                let _ = self.shot("timed-out").await;
                panic!("never: {what}");
            }
            // A WebDriver round trip is the pace: each check reads the page anew.
            tokio::task::yield_now().await;
        }
    }

    /// The text of the first element marked `test`, if there is one now.
    async fn text_of(&self, test: &str) -> Option<String> {
        let css = format!("[data-test=\"{test}\"]");
        let element = self.client.find(Locator::Css(&css)).await.ok()?;
        element.text().await.ok()
    }

    /// Waits until the element marked `test` reads `text`.
    async fn until_text(&self, test: &str, text: &str) {
        self.until(&format!("{test} reads {text:?}"), || async {
            self.text_of(test).await.filter(|t| t.trim() == text).map(|_| ())
        })
        .await;
    }

    /// The count the jobs page shows for `state` (`all` for every state), if shown now.
    async fn count(&self, state: &str) -> Option<u64> {
        let css = format!("[data-test=\"count-{state}\"]");
        let element = self.client.find(Locator::Css(&css)).await.ok()?;
        element.attr("data-count").await.ok()??.parse().ok()
    }

    /// The `data-id`s of the rows marked `test` now.
    async fn row_ids(&self, test: &str) -> Option<Vec<String>> {
        let css = format!("[data-test=\"{test}\"]");
        let mut ids = Vec::new();
        for row in self.client.find_all(Locator::Css(&css)).await.ok()? {
            ids.push(row.attr("data-id").await.ok()??);
        }
        Some(ids)
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("goto {url}: {e}"));
    }

    /// Signs in with `token`.
    async fn sign_in(&self, base: &str, token: &str) {
        self.goto(base).await;
        self.find("signin-token").await.send_keys(token).await.unwrap();
        self.find("signin-submit").await.click().await.unwrap();
        self.find("whoami").await;
    }

    async fn close(mut self) {
        let _ = self.client.close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A host on a fresh SQLite file.
async fn host() -> (Served, Scratch) {
    let (store, url, scratch) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    (Served::start(&url, &[]), scratch)
}

/// Submits `input` to `kind` through the CLI; answers the job's id.
fn submit(host: &Served, token: &str, kind: &str, input: &Value) -> String {
    let ran = host.cli(Some(token), &["submit", kind, "--input", &input.to_string(), "--json"]);
    assert_eq!(ran.code, 0, "submit {kind}: {}", ran.stderr);
    ran.json()["id"].as_str().unwrap().to_owned()
}

/// Job `id` as the API shows it now.
async fn job(host: &Served, token: &str, id: &str) -> Value {
    let answer = spindle_tests::http_client().get(format!("{}/v1/jobs/{id}", host.url)).bearer_auth(token).send().await;
    answer.unwrap().json().await.unwrap()
}

/// Submits a job of `kind` with idempotency key `key`, due in an hour; answers its id.
fn submit_later(host: &Served, token: &str, kind: &str, key: &str) -> String {
    let ran = host.cli(Some(token), &["submit", kind, "--key", key, "--delay", "3600", "--json"]);
    assert_eq!(ran.code, 0, "submit {key}: {}", ran.stderr);
    ran.json()["id"].as_str().unwrap().to_owned()
}

/// Waits (through the CLI's long poll) for job `id` to be final; answers its view.
fn wait(host: &Served, token: &str, id: &str) -> Value {
    host.cli(Some(token), &["wait", id, "--timeout", "60", "--json"]).json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_finds_reads_retries_cancels_and_deploys_through_the_dashboard() {
    let (host, _data) = host().await;
    let alice = host.tenant("alice");
    for (kind, file) in [("versioned", "versioned-v1"), ("scripted", "scripted")] {
        let path = spindle_tests::guest_path(file);
        let ran = host.cli(Some(&alice), &["deploy", kind, path.to_str().unwrap()]);
        assert_eq!(ran.code, 0, "deploy {kind}: {}", ran.stderr);
    }
    // A job that fails for a reason its retry will not meet: its tenant's steps may run
    // 100 ms, and it heartbeats for 300 ms (logging first).
    let operator = Some(host.operator.as_str());
    let limited = host.cli(operator, &["tenant", "set", "alice", "--max-step-timeout-ms", "100"]);
    assert_eq!(limited.code, 0, "{}", limited.stderr);
    let failed = submit(&host, &alice, "versioned", &json!({ "spins": 60 }));
    assert_eq!(wait(&host, &alice, &failed)["state"], "failed");
    for _ in 0..3 {
        let fine = submit(&host, &alice, "versioned", &json!({}));
        assert_eq!(wait(&host, &alice, &fine)["state"], "succeeded");
    }

    let browser = Browser::start("tenant").await;
    browser.sign_in(&host.url, &alice).await;
    browser.find("jobs-table").await;
    browser.shot("jobs").await;
    // From the skip link, Enter and Tab reach the first job (past the counts, filters
    // and bulk actions: 33 presses before).
    browser.find("job-row").await;
    browser.client.execute("document.querySelector('[data-test=\"skip\"]').focus()", vec![]).await.unwrap();
    browser.client.active_element().await.unwrap().send_keys("\u{E007}").await.unwrap();
    browser.client.active_element().await.unwrap().send_keys("\u{E004}").await.unwrap();
    let focused = browser.client.active_element().await.unwrap();
    let first = browser.client.find(Locator::Css("[data-test=\"job-row\"] a")).await.unwrap();
    assert_eq!(focused.attr("href").await.unwrap(), first.attr("href").await.unwrap(), "the first job has the focus");

    // Find the failed job by filter.
    browser.find("filter-state").await.select_by_value("failed").await.unwrap();
    browser.find("filter-apply").await.click().await.unwrap();
    let row = format!("[data-test=\"job-row\"][data-id=\"{failed}\"]");
    browser
        .until("the failed job alone in the list", || async {
            let rows = browser.client.find_all(Locator::Css("[data-test=\"job-row\"]")).await.ok()?;
            let [only] = rows.as_slice() else { return None };
            (only.attr("data-id").await.ok()??.as_str() == failed).then_some(())
        })
        .await;
    browser.shot("jobs-filtered").await;

    // Open it: its failure code, and a line its guest logged.
    browser.client.find(Locator::Css(&format!("{row} a"))).await.unwrap().click().await.unwrap();
    browser.until_text("job-state", "failed").await;
    assert_eq!(browser.text_of("failure-code").await.as_deref(), Some("sandbox.deadline"));
    browser
        .until("a log line of the failed job", || async {
            let lines = browser.client.find_all(Locator::Css("[data-test=\"log-line\"]")).await.ok()?;
            for line in lines {
                if line.text().await.ok()?.contains("version 1 heartbeats 60 times") {
                    return Some(());
                }
            }
            None
        })
        .await;
    browser.shot("job-failed").await;

    // Retry it, the ceiling lifted: the new, linked job succeeds.
    let lifted = host.cli(operator, &["tenant", "set", "alice", "--max-step-timeout-ms", "none"]);
    assert_eq!(lifted.code, 0, "{}", lifted.stderr);
    // A job that runs until told to stop (now that its steps may run long).
    let running = submit(&host, &alice, "scripted", &json!({ "first": "wait-for-stop" }));
    browser.find("action-retry").await.click().await.unwrap();
    let retried = browser
        .until("the page of the retry job", || async {
            let url = browser.client.current_url().await.ok()?;
            let id = url.fragment()?.strip_prefix("/jobs/")?.to_owned();
            (id != failed).then_some(id)
        })
        .await;
    browser.until_text("job-state", "succeeded").await;
    browser.find("predecessor-link").await;
    browser.shot("job-retried").await;
    let view = host.cli(Some(&alice), &["job", &retried, "--json"]).json();
    assert_eq!(view["predecessor"], failed.as_str(), "the retry is linked to the failed job");
    assert_eq!(view["state"], "succeeded");

    // Cancel the running job, with a reason.
    browser.goto(&format!("{}/#/jobs/{running}", host.url)).await;
    browser.until_text("job-state", "running").await;
    browser.find("action-cancel").await.click().await.unwrap();
    browser.find("cancel-reason").await.send_keys("started by mistake").await.unwrap();
    browser.find("cancel-confirm").await.click().await.unwrap();
    browser.until_text("job-state", "cancelled").await;
    browser.shot("job-cancelled").await;

    // Deploy a second version of a kind from the kind's page.
    browser.goto(&format!("{}/#/kinds/versioned", host.url)).await;
    let v2 = spindle_tests::guest_path("versioned-v2");
    browser.find("deploy-file").await.send_keys(v2.to_str().unwrap()).await.unwrap();
    browser.find("deploy-submit").await.click().await.unwrap();
    browser
        .until("the deploy to be ready", || async {
            let result = browser.find("deploy-result").await;
            (result.attr("data-state").await.ok()?.as_deref() == Some("ready")).then_some(())
        })
        .await;
    browser.shot("kind-deployed").await;
    let kind = host.cli(Some(&alice), &["kinds", "versioned", "--json"]).json();
    assert_eq!(kind["current_version"], 2, "the upload is the current version");

    // Submit from a kind's page: a bad input is refused with each violation's pointer and
    // queues nothing; the example the page starts with is accepted.
    let saga = spindle_tests::guest_path("payment-saga");
    assert_eq!(host.cli(Some(&alice), &["deploy", "payment-saga", saga.to_str().unwrap()]).code, 0);
    let jobs_before = host.cli(Some(&alice), &["jobs", "--json"]).json()["jobs"].as_array().unwrap().len();
    browser.goto(&format!("{}/#/kinds/payment-saga", host.url)).await;
    browser.find("current-input-schema").await;
    let input = browser.find("submit-input").await;
    let example: Value =
        serde_json::from_str(&input.prop("value").await.unwrap().unwrap()).expect("the example is JSON");
    assert!(example["account"].is_string(), "the example follows the schema: {example}");
    input.clear().await.unwrap();
    input.send_keys(r#"{"amount_cents": 1200, "card": "4242"}"#).await.unwrap();
    browser.find("submit-job").await.click().await.unwrap();
    let pointers = browser
        .until("the refusal's violations", || async {
            let items = browser.client.find_all(Locator::Css("[data-test=\"violation\"]")).await.ok()?;
            let mut pointers = Vec::new();
            for item in items {
                pointers.push(item.attr("data-pointer").await.ok()??);
            }
            (!pointers.is_empty()).then_some(pointers)
        })
        .await;
    assert!(pointers.contains(&String::new()), "the missing account is the input's own violation: {pointers:?}");
    assert!(pointers.contains(&"/card".to_owned()), "the short card: {pointers:?}");
    browser.shot("kind-submit-refused").await;
    let jobs_after = host.cli(Some(&alice), &["jobs", "--json"]).json()["jobs"].as_array().unwrap().len();
    assert_eq!(jobs_before, jobs_after, "the refused input queued nothing");
    input.clear().await.unwrap();
    input.send_keys(&example.to_string()).await.unwrap();
    browser.find("submit-job").await.click().await.unwrap();
    browser.find("submitted-job").await.click().await.unwrap();
    browser.find("job-state").await;
    let submitted = browser
        .until("the submitted job's page", || async {
            let url = browser.client.current_url().await.ok()?;
            url.fragment()?.strip_prefix("/jobs/").map(str::to_owned)
        })
        .await;
    let view = host.cli(Some(&alice), &["job", &submitted, "--json"]).json();
    assert_eq!(view["kind"], "payment-saga");
    assert_eq!(view["input"], example, "the job carries the example as its input");

    // The other pages, for review.
    browser.goto(&format!("{}/#/kinds", host.url)).await;
    browser.find("kinds-table").await;
    browser.shot("kinds").await;
    browser.goto(&format!("{}/#/queues", host.url)).await;
    browser.find("running-chart").await;
    browser.shot("queues").await;
    browser.close().await;

    let operator_browser = Browser::start("operator").await;
    operator_browser.sign_in(&host.url, &host.operator).await;
    operator_browser.goto(&format!("{}/#/operator", host.url)).await;
    operator_browser.find("tenants-table").await;
    // This host keeps tenants' jobs from the operator: nothing offers to read them.
    operator_browser.find("operator-reads-off").await;
    let offered = operator_browser.client.find_all(Locator::Css("[data-test=\"tenant-read\"]")).await.unwrap();
    assert!(offered.is_empty(), "Read jobs offered on a host that refuses every read");
    operator_browser.find("alerts").await;
    operator_browser.shot("operator").await;
    operator_browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_token_sees_nothing_of_another_tenants_jobs_in_the_dashboard() {
    let (host, _data) = host().await;
    let alice = host.tenant("alice");
    let bob = host.tenant("bob");
    let path = spindle_tests::guest_path("noop");
    for token in [&alice, &bob] {
        assert_eq!(host.cli(Some(token), &["deploy", "noop", path.to_str().unwrap()]).code, 0);
    }
    let alices = submit(&host, &alice, "noop", &json!({}));
    assert_eq!(wait(&host, &alice, &alices)["state"], "succeeded");
    let bobs = submit(&host, &bob, "noop", &json!({}));
    assert_eq!(wait(&host, &bob, &bobs)["state"], "succeeded");

    let browser = Browser::start("isolation").await;
    browser.sign_in(&host.url, &bob).await;
    // Bob's list has his job, and not alice's.
    let mine = format!("[data-test=\"job-row\"][data-id=\"{bobs}\"]");
    browser.client.wait().at_most(PATIENCE).for_element(Locator::Css(&mine)).await.expect("bob's job");
    let ids: Vec<String> = {
        let mut ids = Vec::new();
        for row in browser.client.find_all(Locator::Css("[data-test=\"job-row\"]")).await.unwrap() {
            ids.push(row.attr("data-id").await.unwrap().unwrap_or_default());
        }
        ids
    };
    assert_eq!(ids, vec![bobs.clone()], "bob sees his job only");
    // Alice's job by its id, in the address bar: not found, and nothing of it shown.
    browser.goto(&format!("{}/#/jobs/{alices}", host.url)).await;
    let error = browser.find("error").await;
    browser
        .until("the not-found banner", || async { error.text().await.ok().filter(|t| t.contains("not-found")) })
        .await;
    assert!(browser.text_of("job-state").await.is_none(), "no job is shown");
    assert!(browser.client.find(Locator::Css("[data-test=\"action-cancel\"]")).await.is_err(), "nothing to act on");
    browser.shot("not-found").await;
    // Nor can bob cancel it from the browser's own session (the API the page uses).
    let answer = browser
        .client
        .execute_async(
            "const [id, done] = arguments; const token = sessionStorage.getItem('spindle.token'); \
             fetch(`/v1/jobs/${id}/cancel`, {method: 'POST', \
             headers: {'Authorization': `Bearer ${token}`, 'Content-Type': 'application/json'}, \
             body: JSON.stringify({reason: 'not mine'})}).then(r => done(r.status));",
            vec![json!(alices)],
        )
        .await
        .unwrap();
    assert_eq!(answer, json!(404), "another tenant's job is not found, through the page's own session");
    assert_eq!(wait(&host, &alice, &alices)["state"], "succeeded", "alice's job is untouched");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_own_text_cannot_reorder_the_page_fake_a_notice_or_retry_in_one_click() {
    let (host, _data) = host().await;
    let alice = host.tenant("alice");
    for kind in ["scripted", "noop"] {
        let path = spindle_tests::guest_path(kind);
        assert_eq!(host.cli(Some(&alice), &["deploy", kind, path.to_str().unwrap()]).code, 0);
    }
    // A right-to-left override in a key: applied, it would show "edirrevo-LTR".
    let rlo_key = "\u{202E}override-LTR";
    let ran = host
        .cli(Some(&alice), &["submit", "scripted", "--input", r#"{"first": "complete"}"#, "--key", rlo_key, "--json"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let keyed = ran.json()["id"].as_str().unwrap().to_owned();
    // An input that looks like the host's "too large" notice, and one that is too large.
    let fake = submit(&host, &alice, "noop", &json!({ "truncated_bytes": 123_456_789 }));
    let large = submit(&host, &alice, "noop", &json!({ "pad": "x".repeat(70 << 10) }));
    // Two dead letters.
    let dead: Vec<String> = (0..2).map(|_| submit(&host, &alice, "scripted", &json!({ "first": "refused" }))).collect();
    for id in &dead {
        assert_eq!(wait(&host, &alice, id)["state"], "failed");
    }
    let view = wait(&host, &alice, &large);
    assert_eq!(view["input"], Value::Null, "a withheld input is not shown");
    assert_eq!(view["input_withheld"]["reason"], "too-large");

    let browser = Browser::start("tenant-text").await;
    browser.sign_in(&host.url, &alice).await;

    // The key's control is shown as a mark, inside its own isolate.
    let row = format!("[data-test=\"job-row\"][data-id=\"{keyed}\"]");
    let row = browser.client.wait().at_most(PATIENCE).for_element(Locator::Css(&row)).await.expect("the keyed job");
    let text = row.text().await.unwrap();
    assert!(text.contains("⟨U+202E⟩override-LTR"), "the control is shown, not applied: {text:?}");
    assert!(!text.contains('\u{202E}'), "no control reaches the page: {text:?}");
    let cell = row.find(Locator::Css("bdi")).await.expect("the key in a <bdi>");
    assert_eq!(cell.css_value("unicode-bidi").await.unwrap(), "isolate");
    browser.shot("bidi-key").await;

    // A tenant's value is shown as itself; only the host's own field says "too large".
    browser.goto(&format!("{}/#/jobs/{fake}", host.url)).await;
    let input = browser.find("job-input").await;
    input.click().await.unwrap();
    browser
        .until("the fake notice shown as data", || async {
            input.text().await.ok().filter(|t| t.contains("123456789")).map(|_| ())
        })
        .await;
    assert!(browser.text_of("truncated").await.is_none(), "no notice for a value that is shown");
    browser.goto(&format!("{}/#/jobs/{large}", host.url)).await;
    browser.find("job-input").await.click().await.unwrap();
    let note = browser.find("truncated").await.text().await.unwrap();
    assert!(note.starts_with("Too large to show"), "{note}");
    browser.shot("withheld-input").await;

    // The sticky top bar never covers what is scrolled to its top.
    let covered = browser
        .client
        .execute(
            "const el = document.querySelector('[data-test=\"job-input\"]'); \
             document.documentElement.style.scrollBehavior = 'auto'; \
             document.body.style.minHeight = '4000px'; \
             el.scrollIntoView({block: 'start'}); \
             const bar = document.querySelector('.topbar').getBoundingClientRect().bottom; \
             return [el.getBoundingClientRect().top, bar];",
            vec![],
        )
        .await
        .unwrap();
    let (top, bar) = (covered[0].as_f64().unwrap(), covered[1].as_f64().unwrap());
    assert!(top >= bar, "what focus or a scroll brings up sits below the bar: top {top}, bar {bar}");
    browser.client.execute("document.body.style.minHeight = '';", vec![]).await.unwrap();

    // "Retry all dead letters" asks first, with the count; dismissed, it does nothing.
    browser.goto(&format!("{}/#/queues", host.url)).await;
    browser.find("dead-letter-row").await;
    browser.find("bulk-retry").await.click().await.unwrap();
    browser.find("bulk-retry-dialog").await;
    browser
        .until("the count in the dialog", || async {
            browser.text_of("bulk-retry-count").await.filter(|t| t.starts_with("2 dead letters")).map(|_| ())
        })
        .await;
    browser.shot("bulk-retry-confirm").await;
    browser.find("bulk-retry-dismiss").await.click().await.unwrap();
    let operations: Value = spindle_tests::http_client()
        .get(format!("{}/v1/operations", host.url))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bulk: Vec<&Value> = operations["operations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| ["retry-dead-letters", "retry-jobs", "cancel-jobs"].contains(&o["action"].as_str().unwrap_or("")))
        .collect();
    assert!(bulk.is_empty(), "dismissed, no operation started: {bulk:?}");
    for id in &dead {
        assert_eq!(host.cli(Some(&alice), &["job", id, "--json"]).json()["successor"], Value::Null, "not retried");
    }
    browser.find("bulk-retry").await.click().await.unwrap();
    browser
        .until("the count again", || async {
            browser.text_of("bulk-retry-count").await.filter(|t| t.starts_with("2 dead letters")).map(|_| ())
        })
        .await;
    browser.find("bulk-retry-confirm").await.click().await.unwrap();
    browser
        .until("the operation's note", || async {
            browser.text_of("bulk-retry-result").await.filter(|t| t.starts_with("Operation"))
        })
        .await;
    for id in &dead {
        let retried = browser
            .until("the dead letter's successor", || async {
                let view = host.cli(Some(&alice), &["job", id, "--json"]).json();
                view["successor"].as_str().map(str::to_owned)
            })
            .await;
        assert_ne!(&retried, id);
    }
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_sql_submission_shows_its_code_and_violations_on_its_page() {
    use spindle::sqlx::{self, PgPool};
    let database = spindle_tests::postgres::fresh_database().await;
    let host = Served::start(&database, &[]);
    let token = host.tenant("acme");
    let path = spindle_tests::guest_path("typed-noop");
    assert_eq!(host.cli(Some(&token), &["deploy", "typed-noop", path.to_str().unwrap()]).code, 0);
    let admin = PgPool::connect(&database).await.unwrap();
    let role = format!("app_browser_{}", std::process::id());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE ROLE {role} LOGIN"))).execute(&admin).await.unwrap();
    assert_eq!(host.cli(Some(&host.operator), &["tenant", "grant-sql", "acme", "--role", &role]).code, 0);
    let app = PgPool::connect(&database.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1)).await;
    let app = app.expect("connect as the application's role");
    // The application's transaction commits a submission its kind's schema refuses.
    let mut tx = app.begin().await.unwrap();
    let id: String = sqlx::query_scalar("SELECT spindle.submit('typed-noop', '{\"account\": \"\"}'::jsonb)::text")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let browser = Browser::start("sql-submission").await;
    browser.sign_in(&host.url, &token).await;
    browser.goto(&format!("{}/#/jobs/{id}", host.url)).await;
    // Queued or already refused when the page opens: it shows the refusal once a host made it.
    browser.until_text("submission-state", "refused").await;
    let refusal = browser.text_of("submission-refusal").await.unwrap();
    assert!(refusal.contains("invalid-input"), "{refusal}");
    assert!(browser.text_of("violation").await.is_some(), "each violation is a row");
    assert!(refusal.contains("/account"), "the violation's pointer: {refusal}");
    assert!(browser.text_of("job-state").await.is_none(), "no job is shown: none was made");
    browser.shot("refused").await;
    browser.close().await;
    drop(app);
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP OWNED BY {role}; DROP ROLE {role}"))).execute(&admin).await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_is_created_fired_paused_and_resumed_from_its_page_and_filters_apply_as_they_change() {
    let (host, _data) = host().await;
    let token = host.tenant("acme");
    let path = spindle_tests::guest_path("noop");
    assert_eq!(host.cli(Some(&token), &["deploy", "noop", path.to_str().unwrap()]).code, 0);
    let browser = Browser::start("schedules").await;
    browser.sign_in(&host.url, &token).await;
    browser.find("nav-schedules").await.click().await.unwrap();
    browser.find("schedules-empty").await;

    // The API's own validation answers the form: a bad expression is refused, nothing made.
    browser.find("schedule-name").await.send_keys("nightly").await.unwrap();
    browser.find("schedule-kind").await.select_by_value("noop").await.unwrap();
    browser.find("schedule-cron").await.send_keys("61 3 * * *").await.unwrap();
    browser.find("schedule-create").await.click().await.unwrap();
    browser
        .until("the refusal", || async {
            let result = browser.text_of("schedule-result").await?;
            result.contains("invalid-request").then_some(())
        })
        .await;
    browser.shot("refused").await;
    let cron = browser.find("schedule-cron").await;
    cron.clear().await.unwrap();
    cron.send_keys("0 3 * * *").await.unwrap();
    browser.find("schedule-timezone").await.clear().await.unwrap();
    browser.find("schedule-timezone").await.send_keys("Europe/Paris").await.unwrap();
    browser.find("schedule-create").await.click().await.unwrap();

    // Its page: five next times, never fired; fired now by hand, its job among its firings.
    browser.until_text("schedule-cron-shown", "0 3 * * *").await;
    browser
        .until("its next five times", || async {
            let times = browser.client.find_all(Locator::Css("[data-test=\"upcoming\"] li")).await.ok()?;
            (times.len() == 5).then_some(())
        })
        .await;
    browser.until_text("schedule-fired", "0").await;
    // What each firing submits, and its times where the cron reads them, labelled.
    assert!(browser.text_of("schedule-input").await.unwrap().contains("{}"));
    let label = browser.text_of("upcoming-zone-label").await.unwrap();
    assert!(label.contains("the cron reads in Europe/Paris"), "{label}");
    for zoned in browser.client.find_all(Locator::Css("[data-test=\"upcoming-zoned\"]")).await.unwrap() {
        let text = zoned.text().await.unwrap();
        assert!(text.contains("3:00") && text.ends_with("Europe/Paris"), "03:00 in Paris: {text}");
    }
    browser.shot("schedule").await;
    browser.find("schedule-trigger").await.click().await.unwrap();
    let job = browser.find("triggered-job").await;
    let id = job.attr("href").await.unwrap().unwrap().trim_start_matches("#/jobs/").to_owned();
    browser.until_text("schedule-fired", "1").await;
    browser.find("firing-row").await;
    let view = wait(&host, &token, &id);
    assert_eq!((view["kind"].as_str(), view["priority"].as_str()), (Some("noop"), Some("scheduled")));
    assert!(view["idempotency_key"].as_str().unwrap().starts_with("schedule:nightly:"));
    browser.shot("fired").await;

    // Paused, it has no next times; resumed, it has them again.
    browser.find("schedule-pause").await.click().await.unwrap();
    browser.until_text("schedule-state", "paused").await;
    assert!(browser.client.find(Locator::Css("[data-test=\"upcoming\"]")).await.is_err(), "paused: no next times");
    let listed = host.cli(Some(&token), &["schedule", "list", "--json"]).json();
    assert_eq!(listed["schedules"][0]["paused"], true, "paused through the API the page uses");
    browser.shot("paused").await;
    browser.find("schedule-resume").await.click().await.unwrap();
    browser.until_text("schedule-state", "active").await;
    browser.find("upcoming").await;

    // The jobs list applies a filter as it changes, and the address holds it.
    let keyed = host.cli(Some(&token), &["submit", "noop", "--key", "invoice-7", "--json"]);
    assert_eq!(keyed.code, 0, "{}", keyed.stderr);
    let keyed = keyed.json()["id"].as_str().unwrap().to_owned();
    browser.find("nav-jobs").await.click().await.unwrap();
    browser.find("jobs-table").await;
    browser.find("filter-q").await.send_keys("invoice-").await.unwrap();
    browser
        .until("the keyed job alone, with no Apply pressed", || async {
            let rows = browser.client.find_all(Locator::Css("[data-test=\"job-row\"]")).await.ok()?;
            let [only] = rows.as_slice() else { return None };
            (only.attr("data-id").await.ok()??.as_str() == keyed).then_some(())
        })
        .await;
    let address = browser.client.current_url().await.unwrap();
    assert!(address.fragment().unwrap_or_default().contains("q=invoice-"), "{address}");
    // The address, opened anew, shows the same list.
    browser.goto(address.as_str()).await;
    browser.goto(&format!("{}/#/kinds", host.url)).await;
    browser.goto(address.as_str()).await;
    browser
        .until("the same list from the shared address", || async {
            let rows = browser.client.find_all(Locator::Css("[data-test=\"job-row\"]")).await.ok()?;
            let [only] = rows.as_slice() else { return None };
            (only.attr("data-id").await.ok()??.as_str() == keyed).then_some(())
        })
        .await;
    browser.shot("filtered-as-typed").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_shows_its_tree_and_waits_and_a_signal_is_sent_from_its_page() {
    let (host, _data) = host().await;
    let token = host.tenant("acme");
    let path = spindle_tests::guest_path("workflow");
    assert_eq!(host.cli(Some(&token), &["deploy", "workflow", path.to_str().unwrap()]).code, 0);
    // A parent waiting for its one child, which waits for the signal `go`.
    let child_input = json!({ "signal": "go", "timeout_secs": 3600 });
    let parent =
        submit(&host, &token, "workflow", &json!({ "children": [{ "kind": "workflow", "input": child_input }] }));
    let browser = Browser::start("workflow").await;
    browser.sign_in(&host.url, &token).await;
    browser.goto(&format!("{}/#/jobs/{parent}", host.url)).await;
    browser
        .until("the parent waiting for its child", || async {
            browser.text_of("wait-children").await.filter(|t| t.contains("all 1 final")).map(|_| ())
        })
        .await;
    let child_row = browser.find("child-row").await;
    let child = child_row.attr("data-id").await.unwrap().unwrap();
    // The tree opens a level: the child has none of its own.
    browser.find("tree-toggle").await.click().await.unwrap();
    browser
        .until("the child's own children, none", || async {
            let toggle = browser.find("tree-toggle").await;
            (toggle.attr("aria-expanded").await.ok()??.as_str() == "true").then_some(())
        })
        .await;
    browser.shot("parent").await;

    // The child waits for `go`; a signal it does not await is pending.
    let sent = host.cli(Some(&token), &["signal", &child, "later", "--data", "{}"]);
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    browser.goto(&format!("{}/#/jobs/{child}", host.url)).await;
    browser.find("parent-link").await;
    browser
        .until("the awaited signal", || async { browser.text_of("wait-signal").await.filter(|t| t.contains("go")) })
        .await;
    browser
        .until("the pending signal", || async {
            browser.text_of("signal-pending").await.filter(|t| t.contains("later"))
        })
        .await;
    browser.shot("child-waiting").await;
    // Sent from the page (its name filled in from the wait): the child ends, then the parent.
    assert_eq!(browser.find("signal-name").await.prop("value").await.unwrap().as_deref(), Some("go"));
    browser.find("signal-body").await.clear().await.unwrap();
    browser.find("signal-body").await.send_keys(r#"{"from": "the dashboard"}"#).await.unwrap();
    browser.find("signal-send").await.click().await.unwrap();
    browser.until_text("job-state", "succeeded").await;
    browser.find("signal-received").await;
    browser.shot("child-signalled").await;
    let child_view = wait(&host, &token, &child);
    assert_eq!(child_view["steps"][0]["output"]["signal"], json!({ "from": "the dashboard" }));
    assert_eq!(wait(&host, &token, &parent)["state"], "succeeded");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_follow_the_jobs_and_a_bulk_cancel_asks_with_the_count_and_cancels_exactly_those() {
    let (host, _data) = host().await;
    let token = host.tenant("acme");
    for kind in ["noop", "workflow"] {
        let path = spindle_tests::guest_path(kind);
        assert_eq!(host.cli(Some(&token), &["deploy", kind, path.to_str().unwrap()]).code, 0);
    }
    // `workflow` jobs may be cancelled.
    let batch =
        [submit_later(&host, &token, "workflow", "batch-1"), submit_later(&host, &token, "workflow", "batch-2")];
    let other = submit_later(&host, &token, "workflow", "other-1");
    let browser = Browser::start("bulk").await;
    browser.sign_in(&host.url, &token).await;
    browser.find("jobs-table").await;
    browser.until("three pending", || async { (browser.count("pending").await? == 3).then_some(()) }).await;
    assert_eq!(browser.count("succeeded").await, Some(0));

    // A job runs to its end: the counts follow, live, with nothing pressed.
    let ran = submit(&host, &token, "noop", &json!({}));
    assert_eq!(wait(&host, &token, &ran)["state"], "succeeded");
    browser.until("one succeeded", || async { (browser.count("succeeded").await? == 1).then_some(()) }).await;
    assert_eq!((browser.count("pending").await, browser.count("all").await), (Some(3), Some(4)));
    browser.find("kind-counts").await;
    browser.shot("counts").await;
    // One kind chosen: its counts are the host's count of that kind's own jobs.
    browser.goto(&format!("{}/#/jobs?kind=noop", host.url)).await;
    browser
        .until("noop's own counts", || async {
            let counts =
                (browser.count("succeeded").await?, browser.count("pending").await?, browser.count("all").await?);
            (counts == (1, 0, 1)).then_some(())
        })
        .await;
    browser.goto(&format!("{}/#/jobs", host.url)).await;
    browser.until("every kind again", || async { (browser.count("all").await? == 4).then_some(()) }).await;

    // The batch, filtered as typed; the bulk cancel asks first, with the count.
    browser.find("filter-q").await.send_keys("batch-").await.unwrap();
    browser
        .until("the batch alone", || async {
            let mut ids = browser.row_ids("job-row").await?;
            ids.sort();
            let mut want = batch.to_vec();
            want.sort();
            (ids == want).then_some(())
        })
        .await;
    browser.find("jobs-bulk-cancel").await.click().await.unwrap();
    browser
        .until("the count, asked", || async {
            browser.text_of("jobs-bulk-count").await.filter(|t| t.starts_with("2 jobs matching q batch-")).map(|_| ())
        })
        .await;
    browser.shot("jobs-bulk-confirm").await;
    // One submitted after the count matches the filter too, and is left alone.
    let late = submit_later(&host, &token, "workflow", "batch-3");
    browser.find("jobs-bulk-confirm").await.click().await.unwrap();
    browser
        .until("the operation done", || async {
            let note = browser.find("jobs-bulk-result").await;
            (note.attr("data-state").await.ok()??.as_str() == "done").then_some(())
        })
        .await;
    let said = browser.text_of("jobs-bulk-result").await.unwrap();
    assert!(said.contains("2 cancelled, 0 skipped of 2"), "{said}");
    browser.shot("bulk-done").await;
    for id in &batch {
        assert_eq!(job(&host, &token, id).await["state"], "cancelled", "{id}");
    }
    for id in [&other, &late] {
        assert_eq!(job(&host, &token, id).await["state"], "pending", "{id}: not in the confirmed count");
    }
    browser.until("two cancelled", || async { (browser.count("cancelled").await? == 2).then_some(()) }).await;
    // Asked again, the count says which it would skip: the two already cancelled.
    browser.find("jobs-bulk-cancel").await.click().await.unwrap();
    browser
        .until("the skips, said", || async {
            let text = browser.text_of("jobs-bulk-count").await?;
            (text.starts_with("3 jobs matching q batch-") && text.contains("2 of them will be skipped")).then_some(())
        })
        .await;
    browser.find("jobs-bulk-dismiss").await.click().await.unwrap();

    // The operation stays in the tenant's audit trail.
    browser.find("nav-queues").await.click().await.unwrap();
    let row = browser.find("operation-row").await;
    assert_eq!(row.attr("data-action").await.unwrap().as_deref(), Some("cancel-jobs"));
    assert_eq!(row.attr("data-state").await.unwrap().as_deref(), Some("done"));
    browser.shot("operations").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reads_a_tenants_job_read_only_and_the_tenant_sees_the_read_in_its_audit_trail() {
    let (store, url, _data) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let host = Served::start(&url, &["--operator-reads-tenants"]);
    let token = host.tenant("acme");
    let path = spindle_tests::guest_path("noop");
    assert_eq!(host.cli(Some(&token), &["deploy", "noop", path.to_str().unwrap()]).code, 0);
    let id = submit(&host, &token, "noop", &json!({}));
    assert_eq!(wait(&host, &token, &id)["state"], "succeeded");

    let browser = Browser::start("operator-read").await;
    browser.sign_in(&host.url, &host.operator).await;
    browser.find("tenant-read").await.click().await.unwrap();
    browser.find("reading-notice").await;
    browser
        .until("acme's job, listed", || async { browser.row_ids("job-row").await?.contains(&id).then_some(()) })
        .await;
    assert!(browser.client.find(Locator::Css("[data-test=\"jobs-bulk-cancel\"]")).await.is_err(), "no bulk actions");
    browser.shot("tenant-jobs").await;
    browser.goto(&format!("{}/#/jobs/{id}", host.url)).await;
    browser.until_text("job-state", "succeeded").await;
    let retry = browser.find("action-retry").await;
    assert_eq!(retry.attr("disabled").await.unwrap().as_deref(), Some("true"), "actions stay the tenant's");
    let why = browser.text_of("action-retry-reason").await.unwrap();
    assert!(why.contains("actions are the tenant's"), "{why}");
    browser.shot("tenant-job").await;
    browser.find("stop-reading").await.click().await.unwrap();
    browser.find("tenants").await;

    // The tenant, in its own trail: who read what.
    browser.find("signout").await.click().await.unwrap();
    browser.sign_in(&host.url, &token).await;
    browser.find("nav-queues").await.click().await.unwrap();
    browser
        .until("the operator's read of the job", || async {
            let rows = browser.client.find_all(Locator::Css("[data-test=\"operation-row\"]")).await.ok()?;
            for row in rows {
                let text = row.text().await.ok()?;
                if row.attr("data-action").await.ok()?? == "operator-read" && text.contains(&id) {
                    return text.contains("operator").then_some(());
                }
            }
            None
        })
        .await;
    browser.shot("tenant-audit").await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_outbound_requests_have_their_own_card_with_each_denial_and_its_layer() {
    use spindle_tests::http::{Reply, TestServer};
    let server = TestServer::start(|_, _| Reply::Answer(200, b"{}".to_vec())).await;
    let (store, url, data) = spindle_tests::harness::fresh_store(Backend::Sqlite).await;
    drop(store);
    let config = data.path.join("spindle.toml");
    std::fs::write(&config, "[outbound]\nallow = [\"* http://127.0.0.1:*\"]\nallow_cidrs = [\"127.0.0.0/8\"]\n")
        .unwrap();
    let host = Served::start(&url, &["--config", config.to_str().unwrap()]);
    let token = host.tenant("acme");
    let ran = host.cli(Some(&host.operator), &["tenant", "outbound", "acme", "--allow", "* http://127.0.0.1:*"]);
    assert_eq!(ran.code, 0, "tenant outbound: {}", ran.stderr);
    let guest = spindle_tests::guest_path("outbound");
    let rule = format!("POST http://127.0.0.1:{}/hook/*", server.addr.port());
    let ran = host.cli(Some(&token), &["deploy", "outbound", guest.to_str().unwrap(), "--allow", &rule]);
    assert_eq!(ran.code, 0, "deploy: {}", ran.stderr);
    let requests = json!({ "requests": [
        { "method": "POST", "url": server.url("/hook/a"), "body": "{}" },
        { "method": "POST", "url": server.url("/admin"), "body": "{}" },
    ] });
    let id = submit(&host, &token, "outbound", &requests);
    assert_eq!(wait(&host, &token, &id)["state"], "succeeded");

    let browser = Browser::start("outbound").await;
    browser.sign_in(&host.url, &token).await;
    browser.goto(&format!("{}/#/jobs/{id}", host.url)).await;
    browser.until_text("job-state", "succeeded").await;
    let card = browser.find("outbound").await;
    if card.prop("open").await.unwrap().as_deref() != Some("true") {
        card.find(Locator::Css("summary")).await.unwrap().click().await.unwrap();
    }
    browser
        .until("both requests, one answered and one denied with its layer", || async {
            let rows = browser.client.find_all(Locator::Css("[data-test=\"outbound-row\"]")).await.ok()?;
            let mut texts = Vec::new();
            for row in rows {
                texts.push(row.text().await.ok()?);
            }
            let answered = texts.iter().any(|t| t.contains("/hook/a") && t.contains("200"));
            let denied = texts.iter().any(|t| t.contains("/admin") && t.contains("denied: kind-policy"));
            (texts.len() == 2 && answered && denied).then_some(())
        })
        .await;
    browser.shot("outbound").await;
    browser.close().await;
}

/// A lean kind's job (its row alone) shows its lifecycle on its page from that row: its
/// state, its record, each step with its attempts, and a History card that says no
/// history is kept rather than an empty list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lean_kinds_job_page_shows_its_lifecycle_from_its_row_and_says_no_history_is_kept() {
    let (host, _data) = host().await;
    let token = host.tenant("acme");
    let guest = spindle_tests::guest_path("scripted");
    let ran = host.cli(Some(&token), &["deploy", "scripted", guest.to_str().unwrap(), "--record", "lean"]);
    assert_eq!(ran.code, 0, "deploy: {}", ran.stderr);
    let id = submit(&host, &token, "scripted", &json!({ "second": ["retryable", "complete"] }));
    assert_eq!(wait(&host, &token, &id)["state"], "succeeded");

    let browser = Browser::start("lean").await;
    browser.sign_in(&host.url, &token).await;
    browser.goto(&format!("{}/#/jobs/{id}", host.url)).await;
    browser.until_text("job-state", "succeeded").await;
    browser.until_text("job-record", "lean").await;
    let history = browser.find("history").await;
    assert_eq!(history.attr("data-record").await.unwrap().as_deref(), Some("lean"));
    let said = history.text().await.unwrap();
    assert!(said.contains("None kept"), "{said}");
    browser
        .until("three steps succeeded, the second after a retry", || async {
            let steps = browser.client.find_all(Locator::Css("[data-test=\"step\"]")).await.ok()?;
            let mut states = Vec::new();
            for step in &steps {
                states.push(step.attr("data-state").await.ok()??);
            }
            let second = steps.get(1)?.find_all(Locator::Css("[data-test=\"attempt\"]")).await.ok()?;
            let mut outcomes = Vec::new();
            for attempt in &second {
                outcomes.push(attempt.attr("data-outcome").await.ok()??);
            }
            (states == ["completed", "completed", "completed"] && outcomes == ["retryable", "completed"]).then_some(())
        })
        .await;
    browser.shot("job-lean").await;
    browser.close().await;
}
