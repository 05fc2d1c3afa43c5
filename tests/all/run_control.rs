//! Run control through real components: cancel before start and mid-step (observed by
//! heartbeat), pause then resume, restart while running, restart while pausing (pause
//! wins), snooze.

use std::time::Duration;

use serde_json::json;
use spindle::engine::{Command, EngineError};
use spindle::store::Backend;
use spindle::store::prelude::*;
use spindle_core::step::{AttemptEnd, StepState};
use spindle_core::{HistoryEvent, JobState, Refusal};
use spindle_tests::harness::Harness;

on_both_backends!(
    cancel_before_start_records_request_and_outcome_together,
    cancel_mid_step_is_observed_by_heartbeat,
    a_kind_that_is_not_cancellable_refuses_cancel,
    pause_then_resume,
    restart_while_running_starts_a_fresh_pass,
    restart_while_pausing_waits_for_the_pause,
    snooze_reschedules_without_consuming_an_attempt,
);

async fn names(h: &Harness, id: spindle_core::JobId) -> Vec<String> {
    h.store.history(id).await.unwrap().iter().map(|e| e.event.name().to_owned()).collect()
}

async fn cancel_before_start_records_request_and_outcome_together(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let id = h.submit(&engine, "scripted", json!({})).await;
    let cancelled = engine
        .operations()
        .command(&h.tenant, id, Command::Cancel { reason: "ordered by mistake".into() }, "alice")
        .await
        .unwrap();
    assert_eq!(cancelled.job.state, JobState::Cancelled);
    assert!(cancelled.job.steps.iter().all(|s| s.state == StepState::Queued));
    let history = names(&h, id).await;
    assert_eq!(history[history.len() - 2..], ["cancel_requested".to_owned(), "cancelled".to_owned()]);
    // A blank reason and a cancel of a final job are refused and change nothing.
    let other = h.submit(&engine, "scripted", json!({})).await;
    let blank = engine
        .operations()
        .command(&h.tenant, other, Command::Cancel { reason: "  ".into() }, "alice")
        .await
        .unwrap_err();
    assert!(matches!(blank, EngineError::Refused { refusal: Refusal::BlankReason, .. }));
    let again = engine
        .operations()
        .command(&h.tenant, id, Command::Cancel { reason: "again".into() }, "alice")
        .await
        .unwrap_err();
    assert!(matches!(again, EngineError::Refused { refusal: Refusal::Finished { .. }, state: JobState::Cancelled }));
}

async fn cancel_mid_step_is_observed_by_heartbeat(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let dispatcher = h.dispatch(&engine);
    let id = h.submit(&engine, "scripted", json!({"second": "wait-for-stop"})).await;
    h.wait_for(id, |r| r.job.steps[1].state == StepState::Running).await;
    engine
        .operations()
        .command(&h.tenant, id, Command::Cancel { reason: "customer hung up".into() }, "bob")
        .await
        .unwrap();
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Cancelled);
    let second = &done.job.steps[1];
    assert_eq!(second.state, StepState::Failed);
    assert_eq!(second.failure.as_ref().unwrap().code, "cancel.stopped", "the in-flight step fails as stopped");
    // The guest itself saw the cancellation through its heartbeat and stopped.
    match second.attempts.last().and_then(|a| a.end.as_ref()) {
        Some(AttemptEnd::Retryable { failure }) => assert_eq!(failure.code, "stopped"),
        other => panic!("the attempt should end as the guest stopped it, got {other:?}"),
    }
    assert_eq!(done.job.steps[2].state, StepState::Queued);
    assert!(!names(&h, id).await.contains(&"effect_ran".to_owned()), "no failure effect on cancellation");
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn a_kind_that_is_not_cancellable_refuses_cancel(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("payment-saga").await;
    let engine = h.engine();
    let id =
        h.submit(&engine, "payment-saga", json!({"account": "a", "amount_cents": 1, "card": "4242424242424242"})).await;
    let refused =
        engine.operations().command(&h.tenant, id, Command::Cancel { reason: "stop".into() }, "bob").await.unwrap_err();
    assert!(matches!(refused, EngineError::Refused { refusal: Refusal::NotCancellable, state: JobState::Pending }));
    assert_eq!(h.store.job(id).await.unwrap().unwrap().job.state, JobState::Pending);
}

/// Runs the claimed slice of `id` with the real component, under its claim.
async fn run_slice(engine: &std::sync::Arc<spindle::engine::Engine>, claimed: spindle::store::JobRecord) {
    let outcome = engine.execution().execute(claimed).await.outcome;
    assert!(matches!(outcome, spindle::engine::Outcome::Settled(_)), "{outcome:?}");
}

async fn pause_then_resume(backend: Backend) {
    // Driven step by step (no dispatcher), so the pause lands exactly between slices.
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let id = h.submit(&engine, "scripted", json!({"first": "more:3"})).await;
    let claimed = engine.execution().claim(1).await.unwrap().pop().expect("claimed");
    run_slice(&engine, claimed).await;
    let between = h.store.job(id).await.unwrap().unwrap();
    assert_eq!(between.job.steps[0].state, StepState::Running, "one slice done, the step goes on");
    engine.operations().command(&h.tenant, id, Command::Pause, "carol").await.unwrap();
    let paused = h.store.job(id).await.unwrap().unwrap();
    assert_eq!(paused.job.state, JobState::Paused, "nothing in flight: paused at once");
    // A paused job is not dispatched.
    engine.execution().promote_due().await.unwrap();
    assert!(engine.execution().claim(10).await.unwrap().is_empty());
    assert_eq!(h.store.job(id).await.unwrap().unwrap().job.steps[0].cursor, paused.job.steps[0].cursor);
    engine.operations().command(&h.tenant, id, Command::Resume, "carol").await.unwrap();
    let dispatcher = h.dispatch(&engine);
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Succeeded);
    assert_eq!(done.job.steps[0].attempts.len(), 1, "pausing between slices costs no attempt");
    let history = names(&h, id).await;
    for event in ["pause_requested", "paused", "resumed", "succeeded"] {
        assert!(history.contains(&event.to_owned()), "{event} missing from {history:?}");
    }
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn restart_while_running_starts_a_fresh_pass(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let id = h.submit(&engine, "scripted", json!({"first": "more:3"})).await;
    let claimed = engine.execution().claim(1).await.unwrap().pop().expect("claimed");
    // The restart arrives while the slice is in flight: it is recorded and waits.
    let recorded = engine.operations().command(&h.tenant, id, Command::Restart, "dave").await.unwrap();
    assert!(recorded.job.requests.restart.is_some());
    assert_eq!(recorded.job.pass, 1);
    run_slice(&engine, claimed).await;
    let restarted = h.store.job(id).await.unwrap().unwrap();
    assert_eq!(restarted.job.pass, 2, "the slice's end began a fresh pass");
    let dispatcher = h.dispatch(&engine);
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Succeeded);
    assert_eq!(done.job.pass, 2);
    let first_pass = h.pass_steps(id, 1).await;
    assert_eq!(first_pass[0].state, StepState::Failed);
    assert_eq!(first_pass[0].failure.as_ref().unwrap().code, "restart.superseded");
    assert!(done.job.steps.iter().all(|s| s.state == StepState::Completed));
    let history = h.store.history(id).await.unwrap();
    assert!(history.iter().any(|e| matches!(e.event, HistoryEvent::PassStarted { pass: 2 })));
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn restart_while_pausing_waits_for_the_pause(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let id = h.submit(&engine, "scripted", json!({"first": "more:3"})).await;
    let claimed = engine.execution().claim(1).await.unwrap().pop().expect("claimed");
    // Both land while a slice is in flight; the pause wins at the boundary.
    engine.operations().command(&h.tenant, id, Command::Pause, "erin").await.unwrap();
    engine.operations().command(&h.tenant, id, Command::Restart, "erin").await.unwrap();
    run_slice(&engine, claimed).await;
    let paused = h.store.job(id).await.unwrap().unwrap();
    assert_eq!(paused.job.state, JobState::Paused);
    assert_eq!(paused.job.pass, 1, "the restart did not override the pause");
    assert!(paused.job.requests.restart.is_some(), "the restart waits");
    engine.operations().command(&h.tenant, id, Command::Resume, "erin").await.unwrap();
    let dispatcher = h.dispatch(&engine);
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Succeeded);
    assert_eq!(done.job.pass, 2, "after the resume the waiting restart applied");
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

async fn snooze_reschedules_without_consuming_an_attempt(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("scripted").await;
    let engine = h.engine();
    let dispatcher = h.dispatch(&engine);
    let id = h.submit(&engine, "scripted", json!({"second": "snooze:1"})).await;
    let done = h.wait_final(id).await;
    assert_eq!(done.job.state, JobState::Succeeded);
    assert_eq!(done.job.steps[1].attempts.len(), 1, "a snooze is not an attempt");
    let history = h.store.history(id).await.unwrap();
    let snoozed = history.iter().find_map(|e| match &e.event {
        HistoryEvent::Snoozed { until, .. } => Some((e.at, *until)),
        _ => None,
    });
    let (at, until) = snoozed.expect("snoozed");
    assert!(until.since(at) >= Duration::from_millis(900), "rescheduled about a second later");
    let resumed = history.iter().filter(|e| e.at >= until).count();
    assert!(resumed > 0, "the step ran again after the snooze");
    dispatcher.shutdown(Duration::from_secs(5)).await;
}
