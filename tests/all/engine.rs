//! The durable engine through real components, on both backends.

use serde_json::json;
use spindle::store::{Backend, Storage};
use spindle_core::{HistoryEvent, JobState, StepState};
use spindle_tests::harness::Harness;

on_both_backends!(a_job_runs_all_steps_to_succeeded);

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
    let history: Vec<String> = h.store.history(id).await.unwrap().iter().map(|e| e.event.name().to_owned()).collect();
    assert_eq!(history.first().map(String::as_str), Some("submitted"));
    assert_eq!(history.last().map(String::as_str), Some("succeeded"));
    assert_eq!(history.iter().filter(|n| *n == "step_completed").count(), 3);
    let _ = HistoryEvent::Submitted;
    dispatcher.shutdown(std::time::Duration::from_secs(5)).await;
}
