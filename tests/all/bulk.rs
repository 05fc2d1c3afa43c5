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
    the_audit_trail_pages_filters_and_keeps_what_the_operator_did_with_the_tenants_tokens,
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
            spindle_tests::http_client().request(method, format!("{}{path}", self.host.url)).bearer_auth(self.token);
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
    // One kind counted from its own jobs.
    let (status, noop) = api.get("/v1/jobs/counts?kind=noop").await;
    assert_eq!(status, 200, "{noop}");
    let pending = noop["states"].as_array().unwrap().iter().find(|s| s["state"] == "pending").unwrap().clone();
    assert_eq!((pending["count"].as_u64(), pending["capped"].as_bool()), (Some(3), Some(false)), "{noop}");

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
    // The count says how many the cancel would skip: those the first one cancelled.
    let (_, count) = api.get("/v1/jobs/count?q=bulk-&action=cancel").await;
    assert_eq!(count["matching"].as_u64(), Some(N as u64), "{count}");
    assert_eq!(count["skipping"].as_u64(), Some(cancelled_before as u64), "{count}");
    let (status, refused) = api.post("/v1/jobs/bulk", &json!({ "action": "cancel", "filter": { "q": "bulk-" } })).await;
    assert_eq!(status, 400, "without the count's through: {refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("through"), "{refused}");
    let body = json!({ "action": "cancel", "filter": { "q": "bulk-" }, "through": count["through"] });
    let (status, started) = api.post("/v1/jobs/bulk", &body).await;
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
    let retried = (0..N).filter(|i| format!("bulk-{i}").starts_with("bulk-1")).count();
    for round in 0..2 {
        let (_, count) = api.get("/v1/jobs/count?q=bulk-1&state=cancelled&action=retry").await;
        let skipping = if round == 0 { 0 } else { retried as u64 };
        assert_eq!(count["skipping"].as_u64(), Some(skipping), "round {round}, retried ones skipped: {count}");
        let retry = json!({ "action": "retry", "filter": { "q": "bulk-1", "state": "cancelled" }, "through": count["through"] });
        let (status, started) = api.post("/v1/jobs/bulk", &retry).await;
        assert_eq!(status, 202, "{started}");
        let id = started["operation"]["id"].as_str().unwrap().to_owned();
        while api.get(&format!("/v1/operations/{id}")).await.1["state"] == "running" {
            tokio::task::yield_now().await;
        }
    }
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
    let (_, theirs) =
        Api { host: &open, token: &other, tenant_header: None }.get("/v1/operations?action=operator-read").await;
    assert_eq!(theirs["operations"].as_array().map(Vec::len), Some(0), "{theirs}");
    open.terminate();
}

/// Every entry of an audit trail, following its pages (`limit` each), with `filter`.
async fn whole_trail(api: &Api<'_>, filter: &str, limit: usize) -> Vec<Value> {
    let (mut all, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/operations?limit={limit}&{filter}&cursor={c}"),
            None => format!("/v1/operations?limit={limit}&{filter}"),
        };
        let (status, page) = api.get(&path).await;
        assert_eq!(status, 200, "{path}: {page}");
        let entries = page["operations"].as_array().unwrap();
        assert!(entries.len() <= limit);
        all.extend(entries.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return all,
        }
    }
}

/// The trail answered its newest 100 entries and no more: 101 reads of made-up job ids
/// pushed a tenant's own bulk operation out of sight. It pages now and filters by actor,
/// kind of entry and time. The operator could mint a tenant token and read and cancel with
/// it, with nothing in the tenant's trail: minting, revoking and every use of a token the
/// operator minted are there now (the tenant's first token, made with it, is named as
/// such), and an operator's read keeps its query.
async fn the_audit_trail_pages_filters_and_keeps_what_the_operator_did_with_the_tenants_tokens(backend: Backend) {
    let (store, url, _scratch) = spindle_tests::harness::fresh_store(backend).await;
    drop(store);
    let host = Served::start(&url, &["--operator-reads-tenants"]);
    let token = host.tenant("acme");
    let path = spindle_tests::guest_path("noop");
    assert_eq!(host.cli(Some(&token), &["deploy", "noop", path.to_str().unwrap()]).code, 0);
    submit_later(&host, &token, "noop", "later-", 2);
    let tenant = Api { host: &host, token: &token, tenant_header: None };
    let through = tenant.get("/v1/jobs/count?q=later-").await.1["through"].clone();
    let (status, started) = tenant
        .post("/v1/jobs/bulk", &json!({ "action": "cancel", "filter": { "q": "later-" }, "through": through }))
        .await;
    assert_eq!(status, 202, "{started}");
    let bulk = started["operation"]["id"].as_str().unwrap().to_owned();

    // The operator reads 101 made-up jobs, and searches.
    let operator = Api { host: &host, token: &host.operator, tenant_header: Some("acme") };
    for n in 0..101 {
        operator.get(&format!("/v1/jobs/00000000-0000-7000-8000-{n:012}")).await;
    }
    assert_eq!(operator.get("/v1/jobs?q=invoice-4711&state=failed").await.0, 200);
    // It mints a token for the tenant, uses it, and revokes it.
    let minted = host.cli(Some(&host.operator), &["tenant", "token", "acme", "--json"]).json()["token"]
        .as_str()
        .expect("a token")
        .to_owned();
    let impostor = Api { host: &host, token: &minted, tenant_header: None };
    assert_eq!(impostor.get("/v1/jobs?state=pending").await.0, 200);
    let listed = host.cli(Some(&host.operator), &["token", "list", "--tenant", "acme", "--json"]).json();
    let minted_id = listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["minted_by"] == "operator")
        .and_then(|t| t["id"].as_str())
        .expect("the minted token, listed as the operator's")
        .to_owned();
    assert_eq!(host.cli(Some(&host.operator), &["token", "revoke", &minted_id]).code, 0);

    let all = whole_trail(&tenant, "", 40).await;
    assert!(all.len() > 104, "{} entries", all.len());
    assert!(all.iter().any(|o| o["id"] == bulk.as_str()), "the bulk operation is still in the trail");
    let times: Vec<&str> = all.iter().map(|o| o["created_at"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first, across pages");
    let ids: std::collections::BTreeSet<&str> = all.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), all.len(), "no entry on two pages");

    let cancels = whole_trail(&tenant, "action=cancel-jobs", 10).await;
    assert_eq!(cancels.iter().map(|o| o["id"].as_str().unwrap()).collect::<Vec<_>>(), [bulk.as_str()]);
    let reads = whole_trail(&tenant, "actor=operator&action=operator-read", 1000).await;
    assert!(reads.iter().any(|o| o["filter"]["read"] == "GET /v1/jobs?q=invoice-4711&state=failed"), "the query");
    let minting = whole_trail(&tenant, "action=token-minted", 100).await;
    let minted_by: Vec<&str> = minting.iter().map(|o| o["filter"]["minted_by"].as_str().unwrap()).collect();
    assert_eq!(minted_by, ["operator", "creation"], "{minting:?}");
    let uses = whole_trail(&tenant, "action=operator-token-use", 100).await;
    assert_eq!(uses.len(), 1, "{uses:?}");
    assert_eq!(uses[0]["filter"]["read"], "GET /v1/jobs?state=pending");
    assert_eq!(uses[0]["actor"], format!("operator-token:{minted_id}"));
    let revoked = whole_trail(&tenant, "action=token-revoked", 100).await;
    assert_eq!(
        revoked.iter().map(|o| o["filter"]["token"].as_str().unwrap()).collect::<Vec<_>>(),
        [minted_id.as_str()]
    );
    // The tenant's own requests with its own token leave no such entry.
    assert!(all.iter().all(|o| !o["actor"].as_str().unwrap().contains(&token[..8])));
    // Time bounds.
    let created = all.iter().find(|o| o["id"] == bulk.as_str()).unwrap()["created_at"].as_str().unwrap().to_owned();
    let until = whole_trail(&tenant, &format!("until={}", created.replace('+', "%2B")), 100).await;
    assert!(until.iter().all(|o| o["created_at"].as_str().unwrap() < created.as_str()), "before it");
    let (status, bad) = tenant.get("/v1/operations?cursor=garbage").await;
    assert_eq!((status, bad["error"]["code"].as_str()), (400, Some("invalid-request")));
    host.terminate();
}
