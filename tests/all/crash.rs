//! Crash recovery: a host killed with SIGKILL mid-run loses nothing. After its claims
//! lapse, another host rescues them with higher fences and runs those steps again
//! (at-least-once execution), and every step's outcome is committed exactly once.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use spindle::engine::SubmitRequest;
use spindle::store::prelude::*;
use spindle::store::{Backend, JobFilter};
use spindle_core::{HistoryEvent, JobId, JobState};
use spindle_tests::harness::Harness;
use spindle_tests::spindle_bin;

on_both_backends!(a_host_killed_mid_run_leaves_every_job_settled_once_after_restart);

async fn a_host_killed_mid_run_leaves_every_job_settled_once_after_restart(backend: Backend) {
    const JOBS: usize = 40;
    let h = Harness::new(backend).await;
    h.deploy_as("slow", "versioned-v1").await;
    let engine = h.engine();
    // Each step heartbeats 60 times, 5 ms apart: long enough to be caught mid-step.
    let requests = (0..JOBS)
        .map(|_| SubmitRequest { kind: "slow".into(), input: br#"{"spins": 60}"#.to_vec(), ..Default::default() })
        .collect();
    let ids: Vec<JobId> =
        engine.submit_many(&h.tenant, requests).await.unwrap().iter().map(|i| i.record().job.id).collect();

    let data = spindle_tests::harness::Scratch::new();
    let mut child = Command::new(spindle_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--concurrency", "16", "--lease-ttl", "2s", "--step-timeout", "1s"])
        .arg("--database-url")
        .arg(&h.url)
        .arg("--data-dir")
        .arg(&data.path)
        .env("SPINDLE_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start spindle serve");
    // Kill it as soon as it has committed some steps (so others are in flight).
    let filter = JobFilter { state: Some(JobState::Succeeded), limit: 1000, ..Default::default() };
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("spindle serve exited early: {status}");
        }
        let done = h.store.list_jobs(&h.tenant, &filter).await.unwrap().len();
        if done >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().unwrap();
    let claimed_at_kill = count_open_claims(&h, &ids).await;
    assert!(claimed_at_kill > 0, "the kill should catch steps in flight");

    // A new host takes over: the dead host's claims lapse and are rescued.
    let survivor = h.engine();
    let dispatcher = h.dispatch(&survivor);
    for id in &ids {
        assert_eq!(h.wait_final(*id).await.job.state, JobState::Succeeded, "job {id}");
    }
    dispatcher.shutdown(Duration::from_secs(5)).await;

    let mut commits: HashMap<JobId, usize> = HashMap::new();
    let mut rescued = 0;
    for id in &ids {
        for entry in h.store.history(*id).await.unwrap() {
            match entry.event {
                HistoryEvent::StepCompleted { .. } => *commits.entry(*id).or_default() += 1,
                HistoryEvent::Rescued { .. } => rescued += 1,
                _ => {}
            }
        }
    }
    assert!(ids.iter().all(|id| commits.get(id) == Some(&1)), "every step committed exactly once: {commits:?}");
    assert!(rescued >= claimed_at_kill, "the steps in flight at the kill were rescued ({rescued} < {claimed_at_kill})");
}

async fn count_open_claims(h: &Harness, ids: &[JobId]) -> usize {
    let mut n = 0;
    for id in ids {
        if h.store.job(*id).await.unwrap().unwrap().job.claim.is_some() {
            n += 1;
        }
    }
    n
}
