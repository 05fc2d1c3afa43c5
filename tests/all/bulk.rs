//! Jobs in number, through a real `spindle serve`: counts per state, a bulk cancel or
//! retry confirmed by its count (and cut short by SIGKILL: each job acted on once or not
//! at all, the next operation finishing the rest), and the operator's audited reads of a
//! tenant's jobs.

use serde_json::{Value, json};
use spindle::store::Backend;
use spindle_tests::served::Served;

on_both_backends!(
    a_bulk_cancel_killed_midway_acts_on_each_job_once_and_the_next_finishes_the_rest,
    an_operator_reads_a_tenants_jobs_only_where_the_host_allows_it_and_each_read_is_audited,
);

/// The API as one token.
struct Api<'a> {
    host: &'a Served,
    token: &'a str,
    tenant_header: Option<&'a str>,
}

impl Api<'_> {
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request =
            reqwest::Client::new().request(method, format!("{}{path}", self.host.url)).bearer_auth(self.token);
        match self.tenant_header {
            Some(tenant) => request.header("spindle-tenant", tenant),
            None => request,
        }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let answer = self.request(reqwest::Method::GET, path).send().await.expect("an answer");
        (answer.status().as_u16(), answer.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let answer = self.request(reqwest::Method::POST, path).json(body).send().await.expect("an answer");
        (answer.status().as_u16(), answer.json().await.unwrap_or(Value::Null))
    }
}

/// Submits `n` jobs of `kind` due in an hour, keyed `{prefix}{i}`.
fn submit_later(host: &Served, token: &str, kind: &str, prefix: &str, n: usize) {
    for i in 0..n {
        let key = format!("{prefix}{i}");
        let ran = host.cli(Some(token), &["submit", kind, "--key", &key, "--delay", "3600", "--json"]);
        assert_eq!(ran.code, 0, "submit {key}: {}", ran.stderr);
    }
}

/// Every job of the tenant, by state, through the listing.
async fn states(api: &Api<'_>) -> Vec<(String, String, Option<String>)> {
    let (mut all, mut cursor) = (Vec::new(), None::<i64>);
    loop {
        let path = match cursor {
            Some(c) => format!("/v1/jobs?limit=500&cursor={c}"),
            None => "/v1/jobs?limit=500".to_owned(),
        };
        let (status, page) = api.get(&path).await;
        assert_eq!(status, 200, "{page}");
        for job in page["jobs"].as_array().unwrap() {
            let key = job["idempotency_key"].as_str().map(str::to_owned);
            all.push((job["id"].as_str().unwrap().to_owned(), job["state"].as_str().unwrap().to_owned(), key));
        }
        match page["next_cursor"].as_i64() {
            Some(c) => cursor = Some(c),
            None => return all,
        }
    }
}

async fn a_bulk_cancel_killed_midway_acts_on_each_job_once_and_the_next_finishes_the_rest(backend: Backend) {
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(backend).await;
    drop(store);
    let first = Served::start(&url, &[]);
    let token = first.tenant("acme");
    for kind in ["noop", "workflow"] {
        let path = spindle_tests::guest_path(kind);
        assert_eq!(first.cli(Some(&token), &["deploy", kind, path.to_str().unwrap()]).code, 0);
    }
    // `workflow` jobs may be cancelled; `noop` ones may not (a bulk cancel skips them).
    const N: usize = 300;
    submit_later(&first, &token, "workflow", "bulk-", N);
    submit_later(&first, &token, "noop", "keep-", 3);
    let api = Api { host: &first, token: &token, tenant_header: None };

    let (status, counts) = api.get("/v1/jobs/counts").await;
    assert_eq!(status, 200, "{counts}");
    let pending = counts["states"].as_array().unwrap().iter().find(|s| s["state"] == "pending").unwrap().clone();
    assert_eq!((pending["count"].as_u64(), pending["capped"].as_bool()), (Some(N as u64 + 3), Some(false)));
    let kinds: Vec<&str> = counts["kinds"].as_array().unwrap().iter().map(|k| k["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["noop", "workflow"]);

    let (status, count) = api.get("/v1/jobs/count?q=bulk-&state=pending").await;
    assert_eq!(status, 200, "{count}");
    assert_eq!((count["matching"].as_u64(), count["capped"].as_bool()), (Some(N as u64), Some(false)));
    let through = count["through"].as_i64().expect("the newest counted");
    let (status, bad) = api.post("/v1/jobs/bulk", &json!({ "action": "delete" })).await;
    assert_eq!((status, bad["error"]["code"].as_str()), (400, Some("invalid-request")), "{bad}");
    // A misspelled or empty filter never widens to every job: each is refused, by name.
    for (body, names) in [
        (json!({ "action": "cancel", "filtr": { "q": "bulk-" } }), "`filtr`"),
        (json!({ "action": "cancel", "filter": { "kid": "noop" } }), "`filter.kid`"),
        (json!({ "action": "cancel" }), "\"all\": true"),
        (json!({ "action": "cancel", "filter": { "q": " " } }), "\"all\": true"),
        (json!({ "action": "cancel", "filter": { "q": "bulk-" }, "all": true }), "not both"),
    ] {
        let (status, bad) = api.post("/v1/jobs/bulk", &body).await;
        assert_eq!((status, bad["error"]["code"].as_str()), (400, Some("invalid-request")), "{body}: {bad}");
        assert!(bad["error"]["message"].as_str().unwrap().contains(names), "{body}: {bad}");
    }
    let (_, still) = api.get("/v1/jobs/count?state=pending").await;
    assert_eq!(still["matching"].as_u64(), Some(N as u64 + 3), "nothing was cancelled: {still}");
    let body = json!({ "action": "cancel", "filter": { "q": "bulk-", "state": "pending" }, "through": through });
    let (status, started) = api.post("/v1/jobs/bulk", &body).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["operation"]["action"], "cancel-jobs");
    // Killed as the operation goes through the jobs.
    let data = first.kill_hard();

    let second = Served::start_in(data, &url, &[]);
    let api = Api { host: &second, token: &token, tenant_header: None };
    let cancelled_before = states(&api).await.iter().filter(|(_, s, _)| s == "cancelled").count();
    let (_, count) = api.get("/v1/jobs/count?q=bulk-&state=pending").await;
    assert_eq!(count["matching"].as_u64(), Some((N - cancelled_before) as u64), "what is left: {count}");
    let (status, started) = api.post("/v1/jobs/bulk", &json!({ "action": "cancel", "filter": { "q": "bulk-" } })).await;
    assert_eq!(status, 202, "{started}");
    let id = started["operation"]["id"].as_str().unwrap().to_owned();
    let operation = loop {
        let (_, operation) = api.get(&format!("/v1/operations/{id}")).await;
        if operation["state"] != "running" {
            break operation;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(operation["state"], "done", "{operation}");
    // The second takes every bulk- job: those the first cancelled are skipped, not cancelled again.
    assert_eq!(operation["matched"].as_u64(), Some(N as u64), "{operation}");
    assert_eq!(operation["done"].as_u64(), Some((N - cancelled_before) as u64), "{operation}");
    assert_eq!(operation["failed"].as_u64(), Some(cancelled_before as u64), "{operation}");
    let jobs = states(&api).await;
    assert_eq!(jobs.len(), N + 3, "nothing lost, nothing made");
    for (id, state, key) in &jobs {
        let bulk = key.as_deref().is_some_and(|k| k.starts_with("bulk-"));
        assert_eq!(state, if bulk { "cancelled" } else { "pending" }, "{id} {key:?}");
        if bulk {
            let (_, view) = api.get(&format!("/v1/jobs/{id}")).await;
            let cancels = view["history"].as_array().unwrap().iter().filter(|e| e["event"] == "cancelled").count();
            assert_eq!(cancels, 1, "{id} cancelled once: {view}");
        }
    }
    // A bulk retry of the cancelled ones makes one linked job each, however often asked.
    let retry = json!({ "action": "retry", "filter": { "q": "bulk-1", "state": "cancelled" } });
    for _ in 0..2 {
        let (status, started) = api.post("/v1/jobs/bulk", &retry).await;
        assert_eq!(status, 202, "{started}");
        let id = started["operation"]["id"].as_str().unwrap().to_owned();
        while api.get(&format!("/v1/operations/{id}")).await.1["state"] == "running" {
            tokio::task::yield_now().await;
        }
    }
    let retried = (0..N).filter(|i| format!("bulk-{i}").starts_with("bulk-1")).count();
    assert_eq!(states(&api).await.len(), N + 3 + retried, "one retry each");
    let (_, operations) = api.get("/v1/operations").await;
    let actions: Vec<&str> =
        operations["operations"].as_array().unwrap().iter().map(|o| o["action"].as_str().unwrap()).collect();
    assert_eq!(actions.iter().filter(|a| **a == "cancel-jobs").count(), 2, "{actions:?}");
    assert_eq!(actions.iter().filter(|a| **a == "retry-jobs").count(), 2, "{actions:?}");
    second.terminate();
}

async fn an_operator_reads_a_tenants_jobs_only_where_the_host_allows_it_and_each_read_is_audited(backend: Backend) {
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(backend).await;
    drop(store);
    let closed = Served::start(&url, &[]);
    let token = closed.tenant("acme");
    let path = spindle_tests::guest_path("noop");
    assert_eq!(closed.cli(Some(&token), &["deploy", "noop", path.to_str().unwrap()]).code, 0);
    let ran = closed.cli(Some(&token), &["submit", "noop", "--json"]);
    let job = ran.json()["id"].as_str().unwrap().to_owned();
    let operator = Api { host: &closed, token: &closed.operator, tenant_header: Some("acme") };
    let (status, refused) = operator.get("/v1/jobs").await;
    assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("forbidden")), "off by default: {refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("operator_reads_tenants"), "{refused}");
    let (_, data) = closed.terminate();

    let open = Served::start_in(data, &url, &["--operator-reads-tenants"]);
    let operator = Api { host: &open, token: &open.operator, tenant_header: Some("acme") };
    let (status, page) = operator.get("/v1/jobs").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["jobs"][0]["id"], job.as_str());
    for _ in 0..3 {
        let (status, view) = operator.get(&format!("/v1/jobs/{job}")).await;
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["actions"]["cancel"]["allowed"], false, "read-only: {view}");
    }
    assert_eq!(operator.get(&format!("/v1/jobs/{job}/logs")).await.0, 200);
    assert_eq!(operator.get("/v1/kinds").await.0, 200);
    // Actions stay the tenant's; another tenant's name finds nothing; no name, no read.
    let (status, _) = operator.post(&format!("/v1/jobs/{job}/cancel"), &json!({ "reason": "no" })).await;
    assert_eq!(status, 403, "the operator cannot act");
    let (status, _) = operator.post("/v1/jobs", &json!({ "kind": "noop", "input": {} })).await;
    assert_eq!(status, 403, "nor submit");
    let nobody = Api { host: &open, token: &open.operator, tenant_header: Some("globex") };
    assert_eq!(nobody.get("/v1/jobs").await.0, 404);
    let unnamed = Api { host: &open, token: &open.operator, tenant_header: None };
    assert_eq!(unnamed.get("/v1/jobs").await.0, 403);
    // A tenant's token cannot read another tenant by naming it: its own jobs answer.
    let other = open.tenant("globex");
    let sneaky = Api { host: &open, token: &other, tenant_header: Some("acme") };
    let (status, page) = sneaky.get("/v1/jobs").await;
    assert_eq!((status, page["jobs"].as_array().map(Vec::len)), (200, Some(0)), "{page}");

    // The tenant's trail: each path read, who, how many times; nothing in globex's.
    let tenant = Api { host: &open, token: &token, tenant_header: None };
    let (_, operations) = tenant.get("/v1/operations").await;
    let reads: Vec<&Value> =
        operations["operations"].as_array().unwrap().iter().filter(|o| o["action"] == "operator-read").collect();
    let read_of = |what: &str| reads.iter().find(|o| o["filter"]["read"] == what).copied();
    let job_reads = read_of(&format!("GET /v1/jobs/{job}")).expect("the job's reads");
    assert_eq!((job_reads["matched"].as_u64(), job_reads["actor"].as_str()), (Some(3), Some("operator")));
    for what in ["GET /v1/jobs", &format!("GET /v1/jobs/{job}/logs") as &str, "GET /v1/kinds"] {
        assert!(read_of(what).is_some(), "{what}: {operations}");
    }
    let (_, theirs) = Api { host: &open, token: &other, tenant_header: None }.get("/v1/operations").await;
    assert_eq!(theirs["operations"].as_array().map(Vec::len), Some(0), "{theirs}");
    open.terminate();
}
