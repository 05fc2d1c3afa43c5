//! The durable engine through real components, on both backends: outcomes, retries,
//! failure effects, retry jobs, competing engines, fencing and exclusive lease keys.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use spindle::clock::ManualClock;
use spindle::engine::{Command, EngineConfig, Outcome, SubmitRequest};
use spindle::store::prelude::*;
use spindle::store::{Backend, Storage};
use spindle_core::{HistoryEvent, JobId, JobState, StepState, Timestamp};
use spindle_tests::harness::{Harness, test_engine_config};

on_both_backends!(
    a_job_runs_all_steps_to_succeeded,
    retryable_errors_back_off_and_succeed,
    a_refusal_fails_the_job_after_running_the_failure_effect,
    a_skip_advances_progress,
    a_retry_job_bypasses_completed_steps,
    two_engines_competing_never_both_commit_a_step,
    a_stale_fence_is_refused,
    an_exclusive_lease_key_is_never_held_by_two_jobs_at_once,
    an_idempotency_key_returns_the_first_job,
    bad_submissions_are_refused_and_change_nothing,
    an_invalidated_lease_frees_its_key_and_stops_its_holder,
);

async fn history_names(h: &Harness, id: JobId) -> Vec<String> {
    h.store.history(id).await.unwrap().iter().map(|e| e.event.name().to_owned()).collect()
}

async fn a_job_runs_all_steps_to_succeeded(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let dispatcher = h.dispatch(&engine);
    let id = h.submit(&engine, "scripted", json!({})).await;
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Succeeded);
    assert_eq!(done.job.progress, 100);
    assert!(done.job.steps.iter().all(|s| s.state == StepState::Completed));
    let names = history_names(&h, id).await;
    assert_eq!(names.first().map(String::as_str), Some("submitted"));
    assert!(names.contains(&"succeeded".to_owned()));
    assert_eq!(names.iter().filter(|n| *n == "step_completed").count(), 3);
    // The kind notifies on success: the outbox runs the hook after the settlement.
    let notified = h.wait_for(id, |_| true).await;
    assert_eq!(notified.job.state, JobState::Succeeded);
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn retryable_errors_back_off_and_succeed(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let dispatcher = h.dispatch(&engine);
    let id = h.submit(&engine, "scripted", json!({"first": ["retryable", "retryable", "complete"]})).await;
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Succeeded);
    let first = &done.job.steps[0];
    assert_eq!(first.attempts.len(), 3, "two retries, then success");
    let history = h.store.history(id).await.unwrap();
    let mut retries = 0;
    for entry in &history {
        if let HistoryEvent::StepRetrying { failure, retry_at, attempt, .. } = &entry.event {
            retries += 1;
            assert_eq!(failure.code, "scripted-retryable");
            assert!(failure.message.is_empty(), "no transient detail in the record");
            assert!(failure.correlation.is_some());
            // scripted: 10 ms doubling, capped at 50 ms; equal jitter keeps at least half.
            let ceiling = Duration::from_millis(10 * 2u64.pow(attempt - 1)).min(Duration::from_millis(50));
            let delay = retry_at.since(entry.at);
            assert!(
                delay >= ceiling / 2 && delay <= ceiling,
                "attempt {attempt}: delay {delay:?} outside backoff bounds"
            );
            // The next attempt did not start before its backoff ended.
        }
    }
    assert_eq!(retries, 2);
    assert!(first.attempts[1].started_at >= first.attempts[0].ended_at.unwrap());
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn a_refusal_fails_the_job_after_running_the_failure_effect(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let dispatcher = h.dispatch(&engine);
    let id = h.submit(&engine, "scripted", json!({"second": "refused"})).await;
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Failed);
    assert_eq!(done.job.failure.as_ref().unwrap().code, "scripted-refused");
    assert_eq!(done.job.steps[0].state, StepState::Completed);
    assert_eq!(done.job.steps[1].state, StepState::Failed);
    assert_eq!(done.job.steps[2].state, StepState::Queued);
    let names = history_names(&h, id).await;
    let effect = names.iter().position(|n| n == "effect_ran").expect("the failure effect ran");
    let failed = names.iter().position(|n| n == "failed").expect("the job failed");
    assert!(effect < failed, "seed 001: the effect applies before failed settlement: {names:?}");
    // A dead letter: failed and not retried.
    let filter = spindle::store::JobFilter { dead_letters: true, limit: 10, ..Default::default() };
    let dead = h.store.list_jobs(&h.tenant, &filter).await.unwrap();
    assert_eq!(dead.iter().map(|r| r.job.id).collect::<Vec<_>>(), vec![id]);
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn a_skip_advances_progress(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let dispatcher = h.dispatch(&engine);
    let id = h.submit(&engine, "scripted", json!({"first": "skip", "second": "wait-for-stop"})).await;
    let running = h.wait_for(id, |r| r.job.steps[1].state == StepState::Running).await;
    assert_eq!(running.job.steps[0].state, StepState::Skipped);
    assert_eq!(running.job.progress, 33, "one of three equal weights settled by a skip");
    engine.operations().command(&h.tenant, id, Command::Cancel { reason: "test over".into() }, "tester").await.unwrap();
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Cancelled);
    assert_eq!(done.job.progress, 33, "progress is kept");
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn a_retry_job_bypasses_completed_steps(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let dispatcher = h.dispatch(&engine);
    let id = h.submit(&engine, "scripted", json!({"second": "refused"})).await;
    assert_eq!(h.wait_final(id).await.job.state, JobState::Failed);
    let failed = engine.operations().command(&h.tenant, id, Command::Retry, "tester").await.unwrap();
    assert_eq!(failed.job.state, JobState::Failed, "retry never reopens the failed job");
    let successor = failed.job.successor.expect("a linked retry job");
    let retry = h.wait_final(successor).await;
    assert_eq!(retry.job.predecessor, Some(id));
    assert_eq!(retry.job.steps[0].state, StepState::Completed);
    assert!(retry.job.steps[0].carried && retry.job.steps[0].attempts.is_empty(), "the completed step is bypassed");
    let started: Vec<String> = h
        .store
        .history(successor)
        .await
        .unwrap()
        .iter()
        .filter_map(|e| match &e.event {
            HistoryEvent::StepStarted { step, .. } => Some(step.clone()),
            _ => None,
        })
        .collect();
    assert!(!started.contains(&"first".to_owned()), "the carried step never ran again: {started:?}");
    // A second retry of the same job is refused.
    let again = engine.operations().command(&h.tenant, id, Command::Retry, "tester").await.unwrap_err();
    assert_eq!(spindle::api::ApiError::from(again).code().as_str(), "illegal-transition");
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn two_engines_competing_never_both_commit_a_step(backend: Backend) {
    const JOBS: usize = 1_000;
    let h = Harness::new(backend).await;
    h.deploy("noop3").await;
    let a = h.engine();
    let b = h.engine();
    let requests =
        (0..JOBS).map(|_| SubmitRequest { kind: "noop3".into(), input: b"{}".to_vec(), ..Default::default() });
    let ids: Vec<JobId> = a
        .submission()
        .submit_many(&h.tenant, requests.collect())
        .await
        .unwrap()
        .iter()
        .map(|i| i.record().job.id)
        .collect();
    let (da, db) = (h.dispatch(&a), h.dispatch(&b));
    for id in &ids {
        assert_eq!(h.wait_final(*id).await.job.state, JobState::Succeeded);
    }
    da.shutdown(Duration::from_secs(5)).await;
    db.shutdown(Duration::from_secs(5)).await;
    let mut commits: HashMap<(JobId, String), usize> = HashMap::new();
    for id in &ids {
        for entry in h.store.history(*id).await.unwrap() {
            if let HistoryEvent::StepCompleted { step } = entry.event {
                *commits.entry((*id, step)).or_default() += 1;
            }
        }
    }
    assert_eq!(commits.len(), JOBS * 3, "every step committed");
    assert!(commits.values().all(|n| *n == 1), "a step was committed twice");
    let settled = |e: &spindle::engine::Engine| e.counters().steps_settled.load(std::sync::atomic::Ordering::Relaxed);
    assert!(settled(&a) > 0 && settled(&b) > 0, "both engines took part: {} / {}", settled(&a), settled(&b));
    assert_eq!(settled(&a) + settled(&b), (JOBS * 3) as u64);
}

async fn a_stale_fence_is_refused(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let clock = ManualClock::new(Timestamp::from_millis(1_800_000_000_000));
    let config = EngineConfig { lease_ttl: Duration::from_secs(30), ..test_engine_config() };
    let engine = h.engine_clocked(config.clone(), Arc::new(clock.clone()));
    let id = h.submit(&engine, "scripted", json!({})).await;
    let stale = engine.execution().claim(1).await.unwrap().pop().expect("claimed");
    // The holder: a host paused since it claimed, whose clock still reads that time (one
    // whose clock has moved on would not start the step at all: the claim lapsed).
    let paused = h.engine_clocked(config, Arc::new(ManualClock::new(spindle::clock::Clock::now(&clock))));
    // The holder goes quiet past its lease; the rescuer takes the claim back and another
    // claim follows with a higher fence.
    clock.advance(Duration::from_secs(31));
    assert_eq!(engine.execution().rescue_lapsed(10).await.unwrap(), 1);
    clock.advance(Duration::from_secs(1));
    assert_eq!(engine.execution().promote_due().await.unwrap(), 1, "the rescued step is due again after its backoff");
    let fresh = engine.execution().claim(1).await.unwrap().pop().expect("claimed again");
    assert!(fresh.job.fence > stale.job.fence);
    // The stale holder finishes its step: its outcome is refused and changes nothing.
    let before = h.store.job(id).await.unwrap().unwrap();
    assert_eq!(paused.execution().execute(stale).await.outcome, Outcome::Stale);
    let after = h.store.job(id).await.unwrap().unwrap();
    assert_eq!(after.version, before.version, "the stale commit changed the job");
    // The fresh holder commits.
    assert_eq!(engine.execution().execute(fresh).await.outcome, Outcome::Settled(JobState::Running));
    let completed = h
        .store
        .history(id)
        .await
        .unwrap()
        .iter()
        .filter(|e| matches!(&e.event, HistoryEvent::StepCompleted { step } if step == "first"))
        .count();
    assert_eq!(completed, 1);
}

async fn an_exclusive_lease_key_is_never_held_by_two_jobs_at_once(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let submit = |keys: Vec<String>| SubmitRequest {
        kind: "scripted".into(),
        input: serde_json::to_vec(&json!({"first": "more:3", "second": "heartbeat-then-complete"})).unwrap(),
        lease_keys: keys,
        ..Default::default()
    };
    let shared: Vec<SubmitRequest> = (0..12).map(|_| submit(vec!["account:42".into()])).collect();
    let free: Vec<SubmitRequest> = (0..12).map(|_| submit(vec![])).collect();
    let shared_ids: Vec<String> = engine
        .submission()
        .submit_many(&h.tenant, shared)
        .await
        .unwrap()
        .iter()
        .map(|i| i.record().job.id.to_string())
        .collect();
    let free_ids: Vec<String> = engine
        .submission()
        .submit_many(&h.tenant, free)
        .await
        .unwrap()
        .iter()
        .map(|i| i.record().job.id.to_string())
        .collect();
    let dispatcher = h.dispatch(&engine);
    // Sample the claims of both groups, each sample one consistent query, until all are done.
    let (mut most_shared, mut most_free) = (0, 0);
    loop {
        let shared_claimed = count_claimed(&h, &shared_ids).await;
        let free_claimed = count_claimed(&h, &free_ids).await;
        most_shared = most_shared.max(shared_claimed);
        most_free = most_free.max(free_claimed);
        let open = h.store.depths().await.unwrap().iter().map(|d| d.count).sum::<i64>();
        if open == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(most_shared <= 1, "{most_shared} jobs holding account:42 were claimed at once");
    assert!(most_free > 1, "the sampler never saw concurrent claims in the control group, so it proves nothing");
    for id in shared_ids.iter().chain(&free_ids) {
        let record = h.store.job(id.parse().unwrap()).await.unwrap().unwrap();
        assert_eq!(record.job.state, JobState::Succeeded);
    }
    assert_eq!(h.lease_holder("default/account:42").await, None, "released at the end");
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

/// How many of `ids` hold a claim, in one query.
async fn count_claimed(h: &Harness, ids: &[String]) -> usize {
    let placeholders = (1..=ids.len()).map(|n| format!("${n}")).collect::<Vec<_>>().join(",");
    let sql = format!("SELECT COUNT(*) FROM jobs WHERE claim_expires_at IS NOT NULL AND id IN ({placeholders})");
    let args = ids.iter().map(|id| spindle::store::sql::Value::from(id.as_str())).collect();
    let rows = h.store.db().fetch(&sql, args, &[spindle::store::sql::Ty::Int]).await.unwrap();
    usize::try_from(rows[0].int(0, "test row").expect("a decodable row")).unwrap()
}

async fn an_idempotency_key_returns_the_first_job(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("noop").await;
    let engine = h.engine();
    let request = SubmitRequest {
        kind: "noop".into(),
        input: b"{}".to_vec(),
        idempotency_key: Some("order-7".into()),
        ..Default::default()
    };
    let first = engine.submission().submit(&h.tenant, request.clone()).await.unwrap();
    let second = engine.submission().submit(&h.tenant, request).await.unwrap();
    assert!(matches!(first, spindle::store::Inserted::Created(_)));
    assert!(matches!(second, spindle::store::Inserted::Existing(_)));
    assert_eq!(first.record().job.id, second.record().job.id);
}

async fn bad_submissions_are_refused_and_change_nothing(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("noop").await;
    let engine = h.engine();
    let unknown = SubmitRequest { kind: "nope".into(), input: b"{}".to_vec(), ..Default::default() };
    assert_eq!(
        spindle::api::ApiError::from(engine.submission().submit(&h.tenant, unknown).await.unwrap_err()).code().as_str(),
        "unknown-kind"
    );
    let huge = SubmitRequest { kind: "noop".into(), input: vec![b' '; (1 << 20) + 1], ..Default::default() };
    assert_eq!(
        spindle::api::ApiError::from(engine.submission().submit(&h.tenant, huge).await.unwrap_err()).code().as_str(),
        "payload-too-large"
    );
    let bad_key = SubmitRequest {
        kind: "noop".into(),
        input: b"{}".to_vec(),
        lease_keys: vec![String::new()],
        ..Default::default()
    };
    assert_eq!(
        spindle::api::ApiError::from(engine.submission().submit(&h.tenant, bad_key).await.unwrap_err()).code().as_str(),
        "invalid-request"
    );
    let listed =
        h.store.list_jobs(&h.tenant, &spindle::store::JobFilter { limit: 10, ..Default::default() }).await.unwrap();
    assert!(listed.is_empty(), "a refused submission stored a job");
    let _ = Storage::backend(h.store.as_ref());
}

async fn an_invalidated_lease_frees_its_key_and_stops_its_holder(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let submit = |input: serde_json::Value| SubmitRequest {
        kind: "scripted".into(),
        input: serde_json::to_vec(&input).unwrap(),
        lease_keys: vec!["account:7".into()],
        ..Default::default()
    };
    let holder =
        engine.submission().submit(&h.tenant, submit(json!({"first": "wait-for-stop"}))).await.unwrap().record().job.id;
    let waiter = engine.submission().submit(&h.tenant, submit(json!({}))).await.unwrap().record().job.id;
    let dispatcher = h.dispatch(&engine);
    h.wait_for(holder, |r| r.job.steps[0].state == StepState::Running).await;
    assert_eq!(h.store.job(waiter).await.unwrap().unwrap().job.state, JobState::Pending, "blocked on the key");
    // The account is deleted: its lease is invalidated.
    let held_by = engine.execution().invalidate_lease(&h.tenant, "account:7").await.unwrap();
    assert_eq!(held_by, Some(holder));
    assert_eq!(h.wait_final(waiter).await.job.state, JobState::Succeeded, "the waiting job ran");
    // The holder's heartbeat told it to stop, and its outcome was refused.
    let stale = &engine.counters().stale_commits;
    while stale.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        tokio::task::yield_now().await;
    }
    let record = h.store.job(holder).await.unwrap().unwrap();
    assert_eq!(record.job.state, JobState::Running);
    assert!(record.job.steps[0].attempts[0].end.is_none(), "nothing was committed under the invalidated lease");
    dispatcher.shutdown(Duration::from_millis(100)).await;
}
