//! The fault-injection scenario, as a test: three `spindle serve` hosts on one PostgreSQL
//! server of the test's own, first with no faults (the control run), then killed with
//! SIGKILL, paused with SIGSTOP past their lease TTL, cut off by terminated backends and
//! by a server restart while jobs run.
//!
//! Both runs must end with every job succeeded and no step completed twice, no deadlock
//! in the server's log, and every host back to idle (under 2 % of a core) after the last
//! job. The control run must rescue nothing; in the fault run a step that checkpointed
//! before its host was killed resumes from its last committed cursor on another host.
//!
//! Half the one-step jobs are a lean kind's (issue 44: the job row alone, its steps in
//! it, no history), and a lean job's checkpointing step is killed too: the same promises
//! hold, witnessed from the row (no step completed twice: one completed attempt each).
//!
//! Waits watch the hosts and the database for the state a step needs (a checkpoint
//! reached, a claim held, a rescue recorded) or long-poll the jobs; the one fixed
//! window is the idle-CPU measurement itself.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use spindle::sqlx::{self, PgPool};
use spindle_core::policy::budget::SLICE_RATE_GRACE;
use spindle_tests::harness::Scratch;
use spindle_tests::postgres::PrivateServer;
use spindle_tests::served::Served;

/// The kinds both runs deploy: full for one tenant, lean for another.
const KINDS: [&str; 2] = ["noop", "scripted"];
/// Whether a job row is a lean job's (SQL, on `jobs j`).
const IS_LEAN: &str = "(j.machine::jsonb -> 'rules' ->> 'lean') = 'true'";
/// Lease keys the keyed jobs share, so their claims contend for the same rows.
const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];
/// An idle host uses less than this share of one core.
const IDLE_CPU: f64 = 0.02;
/// How long the idle measurement watches each host.
const IDLE_WINDOW: Duration = Duration::from_secs(5);
/// Longest any wait here may take before the test gives up.
const PATIENCE: Duration = Duration::from_secs(300);

/// Three hosts on one database, their logs, and a tenant to submit as.
struct Cluster {
    hosts: Vec<Option<Served>>,
    database: String,
    db: PgPool,
    token: String,
    /// The tenant whose kinds keep a lean record.
    lean_token: String,
    http: reqwest::Client,
    logs: Scratch,
    /// Every job submitted, with the token it was submitted with.
    jobs: Vec<(String, String)>,
}

impl Cluster {
    /// Starts `n` hosts on a fresh database of `server`, each with `extra` flags, and
    /// deploys the kinds.
    async fn start(server: &PrivateServer, n: usize, extra: &[&str]) -> Self {
        let database = server.fresh_database().await;
        let logs = Scratch::new();
        let mut cluster = Self {
            hosts: Vec::new(),
            db: PgPool::connect(&database).await.expect("connect to the scenario's database"),
            database,
            token: String::new(),
            lean_token: String::new(),
            // Idle connections are dropped before the hosts close them (10 s), so a request
            // never goes out on a connection the host is closing.
            http: spindle_tests::http_client_with(reqwest::Client::builder().pool_idle_timeout(Duration::from_secs(5))),
            logs,
            jobs: Vec::new(),
        };
        for i in 0..n {
            cluster.start_host(&format!("h{i}"), extra);
        }
        cluster.token = cluster.host(0).tenant("acme");
        cluster.lean_token = cluster.host(0).tenant("lean-co");
        let first = cluster.host(0);
        for kind in KINDS {
            let path = spindle_tests::guest_path(kind);
            let ran = first.cli(Some(&cluster.token), &["deploy", kind, path.to_str().unwrap()]);
            assert_eq!(ran.code, 0, "deploy {kind}: {}", ran.stderr);
            let lean = ["deploy", kind, path.to_str().unwrap(), "--record", "lean"];
            let ran = first.cli(Some(&cluster.lean_token), &lean);
            assert_eq!(ran.code, 0, "deploy {kind} lean: {}", ran.stderr);
        }
        cluster
    }

    /// Starts host `id` (guest slice lines logged, to its own log file).
    fn start_host(&mut self, id: &str, extra: &[&str]) {
        let mut args = vec!["--host-id", id];
        args.extend_from_slice(extra);
        let log = self.log_of(id);
        let host = Served::start_logged(&self.database, &args, "warn,spindle::guest=debug", &log);
        self.hosts.push(Some(host));
    }

    fn log_of(&self, id: &str) -> PathBuf {
        self.logs.path.join(format!("{id}.log"))
    }

    fn host(&self, i: usize) -> &Served {
        self.hosts[i].as_ref().expect("a running host")
    }

    /// The running hosts' indices.
    fn running(&self) -> Vec<usize> {
        (0..self.hosts.len()).filter(|&i| self.hosts[i].is_some()).collect()
    }

    /// Submits `n` one-step jobs across the running hosts, every other one of the lean
    /// kind (another tenant's) and every `keyed`-th holding a shared lease key; answers
    /// their ids.
    async fn submit_noops(&mut self, n: usize, keyed: usize) -> Vec<String> {
        let running = self.running();
        let mut ids = Vec::with_capacity(n);
        for chunk in (0..n).collect::<Vec<_>>().chunks(16) {
            let posts = chunk.iter().map(|&i| {
                let lease_keys = if i % keyed == 0 { vec![KEYS[i % KEYS.len()]] } else { vec![] };
                let token = if i % 2 == 1 { &self.lean_token } else { &self.token };
                self.submit_to(running[i % running.len()], token, json!({ "kind": "noop", "lease_keys": lease_keys }))
            });
            ids.extend(futures_util::future::join_all(posts).await);
        }
        for (i, id) in ids.iter().enumerate() {
            let token = if i % 2 == 1 { &self.lean_token } else { &self.token };
            self.jobs.push((id.clone(), token.clone()));
        }
        ids
    }

    /// Submits `body` through host `i` with `token`; answers the job's id.
    async fn submit_to(&self, i: usize, token: &str, body: Value) -> String {
        let url = format!("{}/v1/jobs", self.host(i).url);
        // A 503 writes nothing and says when to try again (a database restart's
        // connections coming back): tried again as the typed clients do, a bounded number
        // of times.
        let mut tries = 0;
        let answer = loop {
            let answer = self.http.post(&url).bearer_auth(token).json(&body).send().await;
            let answer = answer.unwrap_or_else(|e| panic!("submit {body} to h{i}: {e:?}"));
            if answer.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE || tries == 50 {
                break answer;
            }
            tries += 1;
            let after = answer.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            tokio::time::sleep(Duration::from_millis(after.map_or(200, |s| s * 1_000).min(2_000))).await;
        };
        assert!(answer.status().is_success(), "submit {body}: {}", answer.status());
        let job: Value = answer.json().await.expect("a job view");
        job["id"].as_str().expect("an id").to_owned()
    }

    /// Submits `n` `scripted` jobs whose first attempt heartbeats until its deadline
    /// (a timeout) and whose second completes, across the running hosts.
    async fn submit_deadline_steps(&mut self, n: usize) {
        let running = self.running();
        let body = json!({ "kind": "scripted", "input": { "first": ["wait-for-stop", "complete"] } });
        let posts = (0..n).map(|i| self.submit_to(running[i % running.len()], &self.token, body.clone()));
        let ids = futures_util::future::join_all(posts).await;
        self.jobs.extend(ids.into_iter().map(|id| (id, self.token.clone())));
    }

    /// Submits a `scripted` job checkpointing through `slices` slices, of the lean
    /// tenant's kind if `lean`.
    async fn submit_slices(&mut self, lean: bool, slices: u32) -> String {
        let body = json!({ "kind": "scripted", "input": { "first": format!("more:{slices}") } });
        let token = if lean { self.lean_token.clone() } else { self.token.clone() };
        let id = self.submit_to(self.running()[0], &token, body).await;
        self.jobs.push((id.clone(), token));
        id
    }

    /// Waits until every submitted job is final, long-polling each through a running host.
    async fn wait_all_final(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        for (id, token) in &self.jobs {
            self.wait_final(id, token, deadline).await;
        }
    }

    /// Waits until job `id` is final (before `deadline`), long-polling a running host.
    async fn wait_final(&self, id: &str, token: &str, deadline: tokio::time::Instant) {
        loop {
            assert!(tokio::time::Instant::now() < deadline, "job {id} never finished");
            let url = format!("{}/v1/jobs/{id}/wait?timeout=30", self.host(self.running()[0]).url);
            let answer = self.http.get(url).bearer_auth(token).send().await;
            let Ok(answer) = answer else { continue };
            let Ok(job) = answer.json::<Value>().await else { continue };
            if matches!(job["state"].as_str(), Some("succeeded" | "failed" | "cancelled")) {
                return;
            }
        }
    }

    /// One number from the scenario's database.
    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&self.db)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The host holding job `id`'s claim, if one does.
    async fn claim_owner(&self, id: &str) -> Option<String> {
        sqlx::query_scalar::<_, Option<String>>("SELECT machine::jsonb -> 'claim' ->> 'owner' FROM jobs WHERE id = $1")
            .bind(id)
            .fetch_one(&self.db)
            .await
            .expect("the job's claim")
    }

    /// Whether `sql` counts at least one row within `window` (a step's deadline: past it,
    /// what it looks for is gone and the caller makes more).
    async fn seen_within(&self, sql: &str, window: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + window;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        while tokio::time::Instant::now() < deadline {
            tick.tick().await;
            if self.count(sql).await > 0 {
                return true;
            }
        }
        false
    }

    /// Watches the database until `sql` counts at least one row.
    async fn until_any(&self, sql: &str, what: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            if sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
                .fetch_one(&self.db)
                .await
                .is_ok_and(|n| n > 0)
            {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                let activity: Vec<(Option<String>, Option<String>)> = sqlx::query_as(
                    "SELECT state, left(query, 120) FROM pg_stat_activity WHERE datname = current_database()",
                )
                .fetch_all(&self.db)
                .await
                .unwrap_or_default();
                let tails: String = (0..self.hosts.len())
                    .map(|i| {
                        let log = std::fs::read_to_string(self.log_of(&format!("h{i}"))).unwrap_or_default();
                        let lines: Vec<&str> = log.lines().filter(|l| !l.contains("spindle::guest")).collect();
                        format!("\nh{i}'s last log lines:\n{}", lines[lines.len().saturating_sub(15)..].join("\n"))
                    })
                    .collect();
                let mut metrics = String::new();
                for i in self.running() {
                    let url = format!("{}/metrics", self.host(i).url);
                    let got = self.http.get(url).bearer_auth(&self.host(i).operator).send().await;
                    let text = match got {
                        Ok(answer) => answer.text().await.unwrap_or_default(),
                        Err(e) => format!("no answer: {e}"),
                    };
                    let wanted = [
                        "spindle_breaker",
                        "spindle_claim",
                        "spindle_steps_settled",
                        "spindle_sandbox_faults",
                        "spindle_tenant_running",
                        "no answer",
                    ];
                    let lines: Vec<&str> = text.lines().filter(|l| wanted.iter().any(|w| l.starts_with(w))).collect();
                    metrics.push_str(&format!("\nh{i}'s metrics:\n{}", lines.join("\n")));
                }
                panic!("never: {what}\nthe database's sessions: {activity:#?}{tails}{metrics}");
            }
        }
    }

    /// The end of a run: everything succeeded, once, with no deadlock, and every host idle.
    async fn assert_settled(&mut self, server: &PrivateServer, run: &str) {
        self.wait_all_final().await;
        let total = i64::try_from(self.jobs.len()).unwrap();
        let succeeded = self.count("SELECT count(*) FROM jobs WHERE state = 'succeeded'").await;
        if succeeded != total {
            // What the others are, for the next look: kind, state, failure, history.
            let others: Vec<(String, String, String)> = sqlx::query_as(
                "SELECT j.kind, j.machine, COALESCE(string_agg(h.event || ' ' || h.body, E'\\n' ORDER BY h.id), '') \
                 FROM jobs j LEFT JOIN history h ON h.job_id = j.id WHERE j.state <> 'succeeded' \
                 GROUP BY j.id, j.kind, j.machine LIMIT 5",
            )
            .fetch_all(&self.db)
            .await
            .unwrap_or_default();
            panic!("{run}: {succeeded} of {total} jobs succeeded; the others: {others:#?}");
        }
        let twice = self
            .count(
                "SELECT count(*) FROM (SELECT job_id, body::jsonb ->> 'step' FROM history \
                 WHERE event = 'step_completed' GROUP BY 1, 2 HAVING count(*) > 1) AS twice",
            )
            .await;
        assert_eq!(twice, 0, "{run}: no step completed twice");
        // A lean job keeps no history: its row's attempts witness the same. Every lean
        // job succeeded, so each of its steps has exactly one completed attempt.
        let lean_steps = "FROM jobs j, jsonb_array_elements(j.machine::jsonb -> 'lean_steps') s";
        let completed = "(SELECT count(*) FROM jsonb_array_elements(s -> 0 -> 'attempts') a \
                         WHERE a -> 'end' ->> 'end' = 'completed')";
        let steps = self.count(&format!("SELECT count(*) {lean_steps}")).await;
        let once = self.count(&format!("SELECT count(*) {lean_steps} WHERE {completed} = 1")).await;
        assert!(steps > 0, "{run}: lean steps ran");
        assert_eq!(once, steps, "{run}: every lean job's step completed once, none twice");
        let lean_jobs = self.count(&format!("SELECT count(*) FROM jobs j WHERE {IS_LEAN}")).await;
        let lean_rows = self
            .count(&format!(
                "SELECT (SELECT count(*) FROM steps s JOIN jobs j ON j.id = s.job_id WHERE {IS_LEAN}) \
                 + (SELECT count(*) FROM history h JOIN jobs j ON j.id = h.job_id WHERE {IS_LEAN})"
            ))
            .await;
        assert!(lean_jobs > 0, "{run}: lean jobs ran");
        assert_eq!(lean_rows, 0, "{run}: the {lean_jobs} lean jobs wrote no step or history row");
        let deadlocks = server.log().matches("deadlock detected").count();
        assert_eq!(deadlocks, 0, "{run}: deadlocks in the server's log");
        for i in self.running() {
            let host = self.hosts[i].as_mut().unwrap();
            assert!(host.is_running(), "{run}: host h{i} exited");
        }
        // Idle: each host's CPU over a quiet window, all of them measured at once.
        let before: Vec<_> = self.running().iter().map(|&i| self.host(i).cpu_time()).collect();
        tokio::time::sleep(IDLE_WINDOW).await;
        for (n, &i) in self.running().iter().enumerate() {
            let used = self.host(i).cpu_time().saturating_sub(before[n]);
            let share = used.as_secs_f64() / IDLE_WINDOW.as_secs_f64();
            assert!(share < IDLE_CPU, "{run}: host h{i} used {:.1} % of a core idle", share * 100.0);
            eprintln!("{run}: host h{i} idle at {:.2} % of a core", share * 100.0);
        }
    }
}

/// Where a kill caught a checkpointing step.
struct Killed {
    /// The job.
    job: String,
    /// Each host's log length at the kill: only what is logged after it counts.
    logs: Vec<usize>,
    /// Its checkpoint read while its host was stopped.
    at_stop: u64,
    /// Its checkpoint after the kill.
    committed: u64,
}

impl Killed {
    /// Checks that the step resumed from its checkpoint on another host: at a slice past
    /// the one read while its host was stopped, and at most two past the one committed.
    fn assert_resumed(&self, cluster: &Cluster, what: &str) -> u64 {
        let survivors: Vec<u64> = cluster
            .running()
            .iter()
            .flat_map(|&i| {
                slices_logged(&cluster.log_of(&format!("h{i}")), self.logs.get(i).copied().unwrap_or(0), &self.job)
            })
            .collect();
        let resumed = survivors.iter().min().copied().unwrap_or_else(|| panic!("{what} ran on after the kill"));
        assert!(
            resumed > self.at_stop && resumed <= self.committed + 2,
            "{what} resumed at slice {resumed}; its checkpoint was {} when its host stopped, {} after the kill",
            self.at_stop,
            self.committed
        );
        resumed
    }
}

impl Cluster {
    /// SIGKILLs the host running job `sliced`'s checkpointing step once it passed slice
    /// 100 (`checkpoint` reads the step's cursor, wherever its record keeps it), then
    /// starts host `replacement` with `extra` flags.
    ///
    /// A `more` step is claimed afresh for each slice, so the host running it changes:
    /// stop the one that holds it, make sure it still does, and only then kill it. Others
    /// may have run its early slices; only what they log after the kill counts. The
    /// checkpoint is read while the victim is stopped: a commit it sent just before the
    /// stop may still land (releasing the claim), so the step may resume anywhere after
    /// this checkpoint, up to two slices past the one read after the kill.
    async fn kill_while_slicing(
        &mut self,
        sliced: &str,
        checkpoint: &str,
        replacement: &str,
        extra: &[&str],
    ) -> Killed {
        let reached = format!("SELECT count(*) FROM ({checkpoint}) AS c(at) WHERE c.at >= 100");
        self.until_any(&reached, "the sliced step reached slice 100").await;
        let running =
            format!("SELECT count(*) FROM jobs WHERE id = '{sliced}' AND machine::jsonb -> 'claim' IS NOT NULL");
        let log_len = |i: usize| std::fs::metadata(self.log_of(&format!("h{i}"))).map_or(0, |m| m.len() as usize);
        let (victim, logs, at_stop) = loop {
            self.until_any(&running, "the sliced step runs").await;
            let Some(owner) = self.claim_owner(sliced).await else { continue };
            let victim: usize = owner.trim_start_matches('h').parse().expect("a host of this test");
            self.host(victim).signal("STOP");
            if self.claim_owner(sliced).await.as_deref() == Some(owner.as_str()) {
                let logs = (0..self.hosts.len()).map(log_len).collect::<Vec<_>>();
                break (victim, logs, self.count(checkpoint).await as u64);
            }
            self.host(victim).signal("CONT");
        };
        self.hosts[victim].take().unwrap().kill_hard();
        let committed = self.count(checkpoint).await as u64;
        self.start_host(replacement, extra);
        Killed { job: sliced.to_owned(), logs, at_stop, committed }
    }
}

/// The query of job `id`'s checkpoint: its step row's cursor, or for a lean job the
/// cursor in its row.
fn checkpoint_of(id: &str, lean: bool) -> String {
    if lean {
        format!(
            "SELECT max((s -> 0 ->> 'cursor')::bigint) FROM jobs j, \
             jsonb_array_elements(j.machine::jsonb -> 'lean_steps') s WHERE j.id = '{id}'"
        )
    } else {
        format!("SELECT max((body::jsonb ->> 'cursor')::bigint) FROM steps WHERE job_id = '{id}'")
    }
}

/// The slices of job `id` the log at `path` shows run after its first `from` bytes.
fn slices_logged(path: &std::path::Path, from: usize, id: &str) -> Vec<u64> {
    let log = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(log.get(from..).unwrap_or_default())
        .lines()
        .filter(|line| line.contains(id))
        .filter_map(|line| line.split_once("slice ").and_then(|(_, rest)| rest.split(' ').next()))
        .filter_map(|n| n.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hosts_survive_kills_pauses_cut_connections_and_a_server_restart() {
    let server = PrivateServer::start("faults");

    // The control run: the same kind of work, no faults. Nothing lapses, so nothing is
    // rescued.
    let mut control = Cluster::start(&server, 3, &[]).await;
    control.submit_slices(false, 200).await;
    control.submit_noops(1_500, 5).await;
    control.submit_slices(true, 200).await;
    control.assert_settled(&server, "control").await;
    let rescued = control.count("SELECT count(*) FROM history WHERE event = 'rescued'").await;
    assert_eq!(rescued, 0, "control: rescues with no fault");
    drop(control);

    // The fault run, with a short lease so that lapsed claims are rescued soon.
    let short = ["--lease-ttl", "4s", "--step-timeout", "2s"];
    let mut faults = Cluster::start(&server, 3, &short).await;

    // 1. SIGKILL the host running a checkpointing step, well into it, first a full
    // kind's, then a lean kind's. Their slices do no work, and an attempt past the
    // checkpoint grace that makes them faster than the host allows is failed as a
    // runaway loop (`checkpoint.rate-exceeded`): a fast host ran two attempts so and
    // failed the job. No attempt here goes past the grace.
    let sliced = faults.submit_slices(false, SLICE_RATE_GRACE).await;
    faults.submit_noops(500, 5).await;
    let killed = faults.kill_while_slicing(&sliced, &checkpoint_of(&sliced, false), "h3", &short).await;
    let lean_sliced = faults.submit_slices(true, SLICE_RATE_GRACE).await;
    faults.submit_noops(500, 5).await;
    let lean_killed = faults.kill_while_slicing(&lean_sliced, &checkpoint_of(&lean_sliced, true), "h4", &short).await;

    // 2. SIGSTOP a host holding claims past the lease TTL, until its claims are rescued.
    faults.submit_noops(1_500, 5).await;
    let paused = *faults.running().iter().find(|&&i| i < 3).unwrap();
    let holds = format!("SELECT count(*) FROM jobs WHERE machine::jsonb -> 'claim' ->> 'owner' = 'h{paused}'");
    // Paused while it holds a claim, but not the sliced step's: the kill cost that job an
    // attempt already, a restart below may cost it another, and a rescue here would spend
    // its third (a rescue counts as an attempt), failing it for a fault the scenario aimed
    // elsewhere. Noop claims last a millisecond and the noops drain as fast as they are
    // submitted, so a few steps that run to their deadline (2 s; their second attempt
    // completes) give the pause a claim that is still held when the host stops.
    loop {
        faults.submit_deadline_steps(3).await;
        if !faults.seen_within(&holds, Duration::from_secs(3)).await {
            continue;
        }
        faults.host(paused).signal("STOP");
        let holder = Some(format!("h{paused}"));
        let holds_sliced =
            faults.claim_owner(&sliced).await == holder || faults.claim_owner(&lean_sliced).await == holder;
        if faults.count(&holds).await > 0 && !holds_sliced {
            break;
        }
        faults.host(paused).signal("CONT");
    }
    let rescued =
        format!("SELECT count(*) FROM history WHERE event = 'rescued' AND body::jsonb ->> 'owner' = 'h{paused}'");
    faults.until_any(&rescued, "the paused host's claims are rescued").await;
    faults.host(paused).signal("CONT");

    // 3. Terminate every backend of the database while jobs run, three times.
    let more = faults.submit_noops(1_500, 5).await;
    for (n, id) in [&more[100], &more[600], &more[1_100]].into_iter().enumerate() {
        let done = format!("SELECT count(*) FROM jobs WHERE id = '{id}' AND settled_at IS NOT NULL");
        faults.until_any(&done, "work to run before the cut").await;
        let cut = sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()) AS cut",
        )
        .fetch_one(&faults.db)
        .await
        .expect("terminate the backends");
        eprintln!("cut {cut} connections ({})", n + 1);
    }

    // 4. Restart the server while jobs run.
    let last = faults.submit_noops(1_500, 5).await;
    let done = format!("SELECT count(*) FROM jobs WHERE id = '{}' AND settled_at IS NOT NULL", last[300]);
    faults.until_any(&done, "work to run before the restart").await;
    server.restart();

    faults.assert_settled(&server, "faults").await;
    let resumed = killed.assert_resumed(&faults, "the sliced step");
    let lean_resumed = lean_killed.assert_resumed(&faults, "the lean job's sliced step");
    let rescues = faults.count("SELECT count(*) FROM history WHERE event = 'rescued'").await;
    eprintln!(
        "faults: {rescues} rescues; the sliced step resumed at slice {resumed} after {}, the lean one at {lean_resumed} after {}",
        killed.committed, lean_killed.committed
    );
}
