//! Tenants sharing a host (issue 15), through real components on both backends: fair
//! claiming by weight across tenants inside a priority layer, submission quotas (jobs
//! queued, a rate) refused whole with nothing written, running limits that are never
//! exceeded with several engines claiming at once, per-kind limits from the deployment,
//! usage metering, and the fault breaker on a simulated clock.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use spindle::clock::ManualClock;
use spindle::engine::{Engine, EngineError, SubmitRequest};
use spindle::store::prelude::*;
use spindle::store::{Backend, JobRecord, StoreError, TenantId, TenantLimits};
use spindle_core::breaker::{BreakerPolicy, BreakerState};
use spindle_core::policy::priority::Priority;
use spindle_core::{JobState, QueueState, Timestamp};
use spindle_tests::harness::{Harness, test_engine_config};

/// A tenant named `name`, created, with `noop` (and whatever else) deployed.
async fn tenant(h: &Harness, engine: &Engine, name: &str, kinds: &[(&str, &str)]) -> TenantId {
    let (created, _) = engine.tenancy().create_tenant(name).await.expect("create tenant");
    for (kind, guest) in kinds {
        h.registry
            .deploy(&created.id, kind, &spindle_tests::guest(guest), engine.now())
            .await
            .unwrap_or_else(|e| panic!("deploy {guest}: {e}"));
    }
    created.id
}

fn request(kind: &str, input: serde_json::Value) -> SubmitRequest {
    SubmitRequest { kind: kind.into(), input: serde_json::to_vec(&input).expect("json"), ..Default::default() }
}

async fn submit_n(engine: &Engine, tenant: &TenantId, kind: &str, n: usize) {
    let requests = (0..n).map(|_| request(kind, json!({}))).collect();
    engine.submission().submit_many(tenant, requests).await.expect("submit");
}

/// Claims one job at a time until `n` are claimed; answers their tenants in claim order.
async fn claim_order(engine: &std::sync::Arc<Engine>, n: usize) -> Vec<TenantId> {
    let mut order = Vec::new();
    while order.len() < n {
        let claimed = engine.execution().claim(1).await.expect("claim");
        assert!(!claimed.is_empty(), "ran out of ready jobs after {}", order.len());
        order.extend(claimed.into_iter().map(|r| r.tenant));
    }
    order
}

/// Tenants of weight 3 and 1, both with backlogs, share the claims 3:1 — counted over
/// the first 100 claims and over every window of 20 — and a job submitted later by a
/// third tenant starts within one round of the backlogged tenants (as many jobs as each
/// one's weight), not behind their backlogs.
async fn claims_are_shared_by_weight_and_a_late_tenant_goes_first(backend: Backend) {
    let h = Harness::new(backend).await;
    let engine = h.engine();
    let a = tenant(&h, &engine, "heavy", &[("noop", "noop")]).await;
    let b = tenant(&h, &engine, "light", &[("noop", "noop")]).await;
    let c = tenant(&h, &engine, "late", &[("noop", "noop")]).await;
    engine
        .capacity()
        .set_tenant_limits(&a, TenantLimits { weight: 3, ..TenantLimits::unlimited() })
        .await
        .expect("weight");
    // The light tenant submits first: submission order alone would serve it first.
    submit_n(&engine, &b, "noop", 200).await;
    submit_n(&engine, &a, "noop", 200).await;
    let order = claim_order(&engine, 100).await;
    let heavy = order.iter().filter(|t| **t == a).count();
    assert!((70..=80).contains(&heavy), "weight 3:1 gave the heavy tenant {heavy} of 100 claims");
    for window in order.chunks(20) {
        let heavy = window.iter().filter(|t| **t == a).count();
        assert!((13..=17).contains(&heavy), "a window of 20 claims gave the heavy tenant {heavy}");
    }
    submit_n(&engine, &c, "noop", 1).await;
    let next = claim_order(&engine, 6).await;
    assert!(next.contains(&c), "the late tenant's job waited behind the backlogs: {next:?}");
}

/// A tenant's share holds however it submits: jobs sent one submission at a time
/// continue that tenant's tags, so they share the claims evenly with another tenant's
/// single batch; and a tenant arriving once claiming has moved on starts at the layer's
/// clock, interleaved with the others, not ahead of everything queued.
async fn a_tenants_later_submissions_continue_its_share(backend: Backend) {
    let h = Harness::new(backend).await;
    let engine = h.engine();
    let a = tenant(&h, &engine, "one-by-one", &[("noop", "noop")]).await;
    let b = tenant(&h, &engine, "batched", &[("noop", "noop")]).await;
    let c = tenant(&h, &engine, "newcomer", &[("noop", "noop")]).await;
    for _ in 0..30 {
        submit_n(&engine, &a, "noop", 1).await;
    }
    submit_n(&engine, &b, "noop", 30).await;
    let order = claim_order(&engine, 20).await;
    let singles = order.iter().filter(|t| **t == a).count();
    assert!((8..=12).contains(&singles), "one-by-one submissions took {singles} of 20 claims: {order:?}");
    submit_n(&engine, &c, "noop", 10).await;
    let next = claim_order(&engine, 9).await;
    let newcomer = next.iter().filter(|t| **t == c).count();
    assert!((1..=5).contains(&newcomer), "the newcomer took {newcomer} of the next 9 claims: {next:?}");
}

/// With fair claiming off, tenants' jobs are claimed in submission order, whatever
/// their weights, and tenants' quotas still hold: a submission past a tenant's queue
/// quota is refused whole, and one that fits is admitted.
async fn without_fair_claims_jobs_go_in_submission_order_and_quotas_hold(backend: Backend) {
    let h = Harness::without_fair_claims(backend).await;
    let engine = h.engine();
    let a = tenant(&h, &engine, "unlimited", &[("noop", "noop")]).await;
    let b = tenant(&h, &engine, "capped", &[("noop", "noop")]).await;
    engine
        .capacity()
        .set_tenant_limits(&a, TenantLimits { weight: 1000, ..TenantLimits::unlimited() })
        .await
        .expect("weight");
    let capped = TenantLimits { max_queued: Some(4), ..TenantLimits::unlimited() };
    engine.capacity().set_tenant_limits(&b, capped).await.expect("limits");
    submit_n(&engine, &b, "noop", 3).await;
    submit_n(&engine, &a, "noop", 3).await;
    let batch = (0..2).map(|_| request("noop", json!({}))).collect();
    let refusal = quota_of(engine.submission().submit_many(&b, batch).await.expect_err("a batch past the quota"));
    assert_eq!(refusal.quota.as_str(), "max-queued");
    submit_n(&engine, &b, "noop", 1).await;
    submit_n(&engine, &a, "noop", 1).await;
    let order = claim_order(&engine, 8).await;
    let expected = [&b, &b, &b, &a, &a, &a, &b, &a].map(|t| t.clone());
    assert_eq!(order, expected, "claims in submission order");
}

/// Priority layers keep their meaning across tenants: a higher layer's job is claimed
/// before any lower layer's, whatever the tenants' weights and backlogs.
async fn priority_layers_hold_across_tenants(backend: Backend) {
    let h = Harness::new(backend).await;
    let engine = h.engine();
    let a = tenant(&h, &engine, "heavy", &[("noop", "noop")]).await;
    let b = tenant(&h, &engine, "light", &[("noop", "noop")]).await;
    engine
        .capacity()
        .set_tenant_limits(&a, TenantLimits { weight: 1000, ..TenantLimits::unlimited() })
        .await
        .expect("weight");
    submit_n(&engine, &a, "noop", 50).await;
    let urgent = SubmitRequest { priority: Priority::Critical, ..request("noop", json!({})) };
    engine.submission().submit(&b, urgent).await.expect("submit");
    assert_eq!(claim_order(&engine, 1).await, vec![b]);
}

async fn pending_count(h: &Harness, tenant: &TenantId) -> u64 {
    let live = h.store.live_counts(Some(tenant)).await.expect("live counts");
    live.iter().map(|l| l.queued).sum()
}

fn quota_of(e: EngineError) -> spindle::store::QuotaRefusal {
    match e {
        EngineError::Store(StoreError::QuotaExceeded(refusal)) => refusal,
        other => panic!("expected a quota refusal, got {other}"),
    }
}

/// Jobs queued past `max_queued` are refused whole — a batch that would pass it writes
/// none of its jobs — and a submission fits again once jobs have started.
async fn a_submission_over_the_queue_quota_is_refused_whole(backend: Backend) {
    let h = Harness::new(backend).await;
    let engine = h.engine();
    let a = tenant(&h, &engine, "capped", &[("noop", "noop")]).await;
    engine
        .capacity()
        .set_tenant_limits(&a, TenantLimits { max_queued: Some(5), ..TenantLimits::unlimited() })
        .await
        .expect("limits");
    submit_n(&engine, &a, "noop", 4).await;
    let batch = (0..2).map(|_| request("noop", json!({}))).collect();
    let refusal = quota_of(engine.submission().submit_many(&a, batch).await.expect_err("a batch past the quota"));
    assert_eq!(refusal.quota.as_str(), "max-queued");
    assert!(refusal.retry_after >= Duration::from_secs(1));
    assert_eq!(pending_count(&h, &a).await, 4, "the refused batch wrote none of its jobs");
    submit_n(&engine, &a, "noop", 1).await;
    assert_eq!(pending_count(&h, &a).await, 5);
    quota_of(engine.submission().submit(&a, request("noop", json!({}))).await.expect_err("the sixth"));
    // Another tenant is not affected.
    let b = tenant(&h, &engine, "free", &[("noop", "noop")]).await;
    submit_n(&engine, &b, "noop", 10).await;
    // Started jobs are no longer queued.
    let claimed = engine.execution().claim(10).await.expect("claim");
    assert!(claimed.iter().filter(|r| r.tenant == a).count() >= 2);
    submit_n(&engine, &a, "noop", 2).await;
}

/// The submission rate is a token bucket on the engine's clock: a burst passes, the next
/// is refused with how long to wait, and after that wait it passes.
async fn a_submission_over_the_rate_is_refused_until_its_time(backend: Backend) {
    let h = Harness::new(backend).await;
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000)));
    let engine = h.engine_clocked(test_engine_config(), clock.clone());
    let a = tenant(&h, &engine, "metered", &[("noop", "noop")]).await;
    engine
        .capacity()
        .set_tenant_limits(&a, TenantLimits { rate_per_sec: Some(4), rate_burst: Some(2), ..TenantLimits::unlimited() })
        .await
        .expect("limits");
    submit_n(&engine, &a, "noop", 2).await;
    let refusal =
        quota_of(engine.submission().submit(&a, request("noop", json!({}))).await.expect_err("past the burst"));
    assert_eq!(refusal.quota.as_str(), "rate");
    assert_eq!(refusal.retry_after, Duration::from_millis(250));
    assert_eq!(pending_count(&h, &a).await, 2);
    clock.advance(Duration::from_millis(250));
    submit_n(&engine, &a, "noop", 1).await;
    // A batch larger than the burst can never pass, and says so.
    let batch = (0..3).map(|_| request("noop", json!({}))).collect();
    let refusal = quota_of(engine.submission().submit_many(&a, batch).await.expect_err("a batch over the burst"));
    assert!(refusal.message.contains("burst"), "{}", refusal.message);
    assert_eq!(pending_count(&h, &a).await, 3);
}

/// The most steps of `jobs` whose attempts (claim to outcome) overlap at one time.
fn most_at_once(jobs: &[JobRecord]) -> usize {
    let mut edges: Vec<(Timestamp, i32)> = Vec::new();
    for job in jobs {
        for attempt in job.job.steps.iter().flat_map(|s| s.attempts.iter()) {
            let end = attempt.ended_at.expect("every attempt ended");
            edges.push((attempt.started_at, 1));
            edges.push((end, -1));
        }
    }
    // An attempt that ended at the instant another began does not overlap it.
    edges.sort_by_key(|(at, delta)| (*at, *delta));
    let (mut now, mut most) = (0, 0);
    for (_, delta) in edges {
        now += delta;
        most = most.max(now);
    }
    usize::try_from(most).unwrap_or(0)
}

async fn jobs_of(h: &Harness, tenant: &TenantId, n: u32) -> Vec<JobRecord> {
    let filter = spindle::store::JobFilter { limit: n, ..Default::default() };
    h.store.list_jobs(tenant, &filter).await.expect("list")
}

/// A tenant's running limit holds with three engines (on PostgreSQL; one on SQLite)
/// claiming at once: no two attempts beyond the limit ever overlapped, while another
/// tenant's jobs ran alongside; and a kind's own limit (set by its deployment) holds too.
async fn running_limits_are_never_exceeded(backend: Backend) {
    let h = Harness::new(backend).await;
    let engines: Vec<Arc<Engine>> = (0..if backend == Backend::Postgres { 3 } else { 1 }).map(|_| h.engine()).collect();
    let engine = &engines[0];
    let a = tenant(&h, engine, "limited", &[("noop", "noop"), ("noop3", "noop3")]).await;
    let b = tenant(&h, engine, "other", &[("noop", "noop")]).await;
    engine
        .capacity()
        .set_tenant_limits(&a, TenantLimits { max_running: Some(3), ..TenantLimits::unlimited() })
        .await
        .expect("limits");
    h.store.set_kind_limit(&a, "noop3", Some(1)).await.expect("kind limit");
    submit_n(engine, &a, "noop", 120).await;
    submit_n(engine, &a, "noop3", 20).await;
    submit_n(engine, &b, "noop", 60).await;
    let dispatchers: Vec<_> = engines.iter().map(|e| h.dispatch(e)).collect();
    let all = jobs_of(&h, &a, 500).await;
    for job in all.iter().chain(jobs_of(&h, &b, 500).await.iter()) {
        let done = h.wait_final(job.job.id).await;
        assert_eq!(done.job.state, JobState::Succeeded, "{:?}", done.job.failure);
    }
    for d in dispatchers {
        d.shutdown(Duration::from_secs(5)).await;
    }
    let done = jobs_of(&h, &a, 500).await;
    let most = most_at_once(&done);
    assert!(most <= 3, "tenant {a} had {most} steps running at once; its limit is 3");
    let noop3: Vec<JobRecord> = done.iter().filter(|r| r.kind == "noop3").cloned().collect();
    assert_eq!(most_at_once(&noop3), 1, "the kind limited to one ran more at once");
    // Nothing is left waiting on a gate.
    for job in &done {
        assert_eq!(job.job.queue, QueueState::Idle);
    }
    // Usage was metered per kind: every attempt of every step.
    for e in &engines {
        e.capacity().flush_usage().await.expect("flush usage");
    }
    let usage = h.store.usage(Some(&a)).await.expect("usage");
    let steps: u64 = usage.iter().map(|u| u.steps).sum();
    assert_eq!(steps, 120 + 20 * 3, "{usage:?}");
    assert!(usage.iter().all(|u| u.faults == 0 && u.sandbox_micros > 0 && u.wall_micros >= u.sandbox_micros));
}

/// A kind version whose steps keep faulting opens its breaker: its jobs wait (blocked on
/// the breaker's gate) while the tenant's other kinds and other tenants run; after the
/// cool-down one probe runs (and faults: open again); a redeploy of the fixed kind runs
/// new jobs at once and probes the old version; an operator reset lets the held jobs go.
async fn a_faulting_kind_is_held_back_by_its_breaker(backend: Backend) {
    // `hostile`'s first step spins until the step's deadline: a fault in 200 ms.
    let sandbox =
        spindle_runtime::SandboxConfig { step_timeout: Duration::from_millis(200), ..spindle_tests::test_sandbox() };
    let h = Harness::with_sandbox(backend, sandbox).await;
    let clock = Arc::new(ManualClock::new(Timestamp::from_micros(1_700_000_000_000_000)));
    let policy = BreakerPolicy {
        threshold: 3,
        window: Duration::from_secs(60),
        cool_down: Duration::from_secs(30),
        close_after: 2,
    };
    let engine =
        h.engine_clocked(spindle::engine::EngineConfig { breaker: policy, ..test_engine_config() }, clock.clone());
    let a = tenant(&h, &engine, "faulty", &[("versioned", "versioned-v1"), ("noop", "noop")]).await;
    let b = tenant(&h, &engine, "bystander", &[("noop", "noop")]).await;
    let faulting: Vec<_> = (0..6).map(|_| request("versioned", json!({ "v1_panics": true }))).collect();
    engine.submission().submit_many(&a, faulting).await.expect("submit");
    // Three faults open it.
    for _ in 0..3 {
        let claimed = engine.execution().claim(1).await.expect("claim");
        assert_eq!(claimed.len(), 1);
        engine.execution().execute(claimed[0].clone()).await;
    }
    let version = h
        .registry
        .kinds(&a)
        .await
        .expect("kinds")
        .iter()
        .find(|k| k.kind == "versioned")
        .expect("versioned")
        .current_version;
    let state = |engine: &Engine| {
        engine
            .capacity()
            .breakers()
            .of_tenant(&a, engine.now())
            .into_iter()
            .find(|b| b.kind == "versioned")
            .map(|b| b.state)
    };
    assert_eq!(state(&engine), Some(BreakerState::Open));
    // Its other jobs are held; the tenant's other kind and another tenant still run.
    submit_n(&engine, &a, "noop", 2).await;
    submit_n(&engine, &b, "noop", 2).await;
    let claimed = engine.execution().claim(10).await.expect("claim");
    assert_eq!(claimed.len(), 4, "only the faulting kind is held");
    assert!(claimed.iter().all(|r| r.kind == "noop"));
    for r in claimed {
        engine.execution().execute(r).await;
    }
    let held = jobs_of(&h, &a, 100).await;
    let gate = format!("@breaker/{a}/versioned/{version}");
    let waiting: Vec<_> = held.iter().filter(|r| r.job.blocked_on.as_deref() == Some(gate.as_str())).collect();
    assert_eq!(waiting.len(), 3, "the faulting kind's other jobs wait on its breaker");
    // After the cool-down one probe runs; it faults, and the breaker opens again.
    clock.advance(Duration::from_secs(31));
    engine.execution().promote_due().await.expect("promote");
    let probe = engine.execution().claim(10).await.expect("claim");
    assert_eq!(probe.len(), 1, "half-open lets one probe through");
    engine.execution().execute(probe[0].clone()).await;
    assert_eq!(state(&engine), Some(BreakerState::Open));
    // A fixed kind is deployed: new jobs run at once, on the new version.
    h.registry.deploy(&a, "versioned", &spindle_tests::guest("versioned-v2"), engine.now()).await.expect("redeploy");
    engine.capacity().kind_redeployed(&a, "versioned").await;
    engine.submission().submit(&a, request("versioned", json!({ "v1_panics": true }))).await.expect("submit");
    let claimed = engine.execution().claim(10).await.expect("claim");
    assert!(claimed.iter().any(|r| r.kind_version > version), "the new version runs at once");
    for r in claimed {
        engine.execution().execute(r).await;
    }
    // An operator reset closes the old version's breaker and lets its held jobs go.
    engine.capacity().reset_breakers(&a, "versioned").await;
    assert_eq!(
        engine.capacity().breakers().of_tenant(&a, engine.now()).iter().find(|b| b.version == version).map(|b| b.state),
        Some(BreakerState::Closed)
    );
    let released = engine.execution().claim(10).await.expect("claim");
    assert!(!released.is_empty(), "the reset let the held jobs run");
    assert!(released.iter().all(|r| r.kind == "versioned" && r.kind_version == version));
}

/// A tenant's sandbox ceilings tighten the host's limits for its steps only, and may not
/// loosen them: a memory ceiling below what a component needs makes its step fault,
/// while another tenant's same step succeeds.
async fn sandbox_ceilings_tighten_the_hosts_limits_for_one_tenant(backend: Backend) {
    use std::sync::atomic::Ordering;
    let h = Harness::new(backend).await;
    let engine = h.engine();
    let tight = tenant(&h, &engine, "tight", &[("noop", "noop")]).await;
    let loose = tenant(&h, &engine, "loose", &[("noop", "noop")]).await;
    let host_memory = h.runtime.config().max_memory_bytes as u64;
    let over = TenantLimits { max_memory_bytes: Some(host_memory + 1), ..TenantLimits::unlimited() };
    let refused = engine.capacity().set_tenant_limits(&tight, over).await.expect_err("a ceiling above the host's");
    assert!(matches!(refused, EngineError::Invalid(_)), "{refused}");
    let ceiling = TenantLimits { max_memory_bytes: Some(64 * 1024), ..TenantLimits::unlimited() };
    engine.capacity().set_tenant_limits(&tight, ceiling).await.expect("limits");
    submit_n(&engine, &tight, "noop", 1).await;
    let claimed = engine.execution().claim(1).await.expect("claim");
    engine.execution().execute(claimed[0].clone()).await;
    assert_eq!(engine.counters().sandbox_faults.load(Ordering::Relaxed), 1, "one page of memory is not enough");
    submit_n(&engine, &loose, "noop", 1).await;
    let claimed = engine.execution().claim(10).await.expect("claim");
    let theirs = claimed.iter().find(|r| r.tenant == loose).cloned().expect("the other tenant's job");
    engine.execution().execute(theirs.clone()).await;
    assert_eq!(engine.counters().sandbox_faults.load(Ordering::Relaxed), 1, "the other tenant's step ran as before");
    let done = h.store.job(theirs.job.id).await.expect("read").expect("job");
    assert_eq!(done.job.state, JobState::Succeeded);
}

/// Waits until `check` holds over `tenant`'s jobs, woken by the engine's state changes.
async fn until_jobs(h: &Harness, engine: &Engine, tenant: &TenantId, what: &str, check: impl Fn(&[JobRecord]) -> bool) {
    let mut changes = engine.subscribe();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if check(&jobs_of(h, tenant, 100).await) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        // A change wakes the check; the timeout guards a change no signal announced.
        let _ = tokio::time::timeout(Duration::from_millis(250), changes.recv()).await;
    }
}

fn running(jobs: &[JobRecord]) -> usize {
    jobs.iter().filter(|r| r.job.state == JobState::Running && r.job.claim.is_some()).count()
}

/// Issue 39: a tenant whose long steps fill every slot of a host's pool (as a tenant alone
/// may) does not keep another tenant's jobs from starting: they take the reserve and finish
/// while every one of the first tenant's steps still runs. The first tenant never takes a
/// reserve slot, and once its steps end, nothing is left behind.
async fn a_tenant_filling_every_slot_does_not_keep_another_from_starting(backend: Backend) {
    let h = Harness::new(backend).await;
    let engine = h.engine();
    let noisy = tenant(&h, &engine, "noisy", &[("scripted", "scripted")]).await;
    let quiet = tenant(&h, &engine, "quiet", &[("scripted", "scripted")]).await;
    let pool = 8;
    let config = spindle::dispatcher::DispatcherConfig {
        concurrency: pool,
        fair_reserve: 2,
        maintenance_interval: Duration::from_millis(200),
        ..Default::default()
    };
    let dispatcher = spindle::dispatcher::Dispatcher::start(engine.clone(), config);
    // Ten steps that run until they are stopped: the noisy tenant alone fills the pool.
    let long = (0..10).map(|_| request("scripted", json!({ "first": "wait-for-stop" }))).collect();
    engine.submission().submit_many(&noisy, long).await.expect("submit");
    until_jobs(&h, &engine, &noisy, "the noisy tenant holds every slot", |jobs| running(jobs) == pool).await;
    // The quiet tenant's three one-step jobs start and finish beside it.
    let quick: Vec<_> = (0..3).map(|_| request("scripted", json!({ "first": "complete" }))).collect();
    let inserted = engine.submission().submit_many(&quiet, quick).await.expect("submit");
    for job in &inserted {
        let done = h.wait_final(job.record().job.id).await;
        assert_eq!(done.job.state, JobState::Succeeded, "{:?}", done.job.failure);
    }
    let noisy_jobs = jobs_of(&h, &noisy, 100).await;
    assert_eq!(running(&noisy_jobs), pool, "every noisy step still ran while the quiet jobs started and finished");
    assert!(
        noisy_jobs.iter().all(|r| r.job.steps.iter().flat_map(|s| &s.attempts).all(|a| a.ended_at.is_none())),
        "no noisy step ended to make room"
    );
    assert_eq!(
        noisy_jobs.iter().filter(|r| r.job.state == JobState::Pending).count(),
        10 - pool,
        "the noisy tenant took no reserve slot"
    );
    // Stopped, the noisy tenant's steps end; its last two run; nothing is left running.
    for job in &noisy_jobs {
        let cancel = spindle::engine::Command::Cancel { reason: "test over".into() };
        engine.operations().command(&noisy, job.job.id, cancel, "tester").await.expect("cancel");
    }
    for job in &noisy_jobs {
        assert!(h.wait_final(job.job.id).await.job.state.is_final());
    }
    dispatcher.shutdown(Duration::from_secs(5)).await;
    let noisy_jobs = jobs_of(&h, &noisy, 100).await;
    assert!(most_at_once(&noisy_jobs) <= pool, "the noisy tenant never ran more than the pool");
}

on_both_backends!(
    a_tenant_filling_every_slot_does_not_keep_another_from_starting,
    sandbox_ceilings_tighten_the_hosts_limits_for_one_tenant,
    claims_are_shared_by_weight_and_a_late_tenant_goes_first,
    a_tenants_later_submissions_continue_its_share,
    without_fair_claims_jobs_go_in_submission_order_and_quotas_hold,
    priority_layers_hold_across_tenants,
    a_submission_over_the_queue_quota_is_refused_whole,
    a_submission_over_the_rate_is_refused_until_its_time,
    running_limits_are_never_exceeded,
    a_faulting_kind_is_held_back_by_its_breaker,
);
