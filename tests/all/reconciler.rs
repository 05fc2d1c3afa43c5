//! The reconciler on a simulated clock (no sleeping): each path of seed 001, the
//! three-probe rule, the silence threshold boundary, the failure-effect ordering, no
//! failure effect on cancel, late reports, and one reconciler across hosts.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use spindle::clock::ManualClock;
use spindle::engine::{Command, Engine, EngineConfig};
use spindle::reconciler::reconcile_once;
use spindle::store::prelude::*;
use spindle::store::{Backend, JobRecord, JobWrite, LeaseOp};
use spindle_core::job::JobEvent;
use spindle_core::step::StepState;
use spindle_core::{JobId, JobState, ReconcilePolicy, Timestamp, transition};
use spindle_tests::harness::{Harness, test_engine_config};

on_both_backends!(
    a_pending_job_with_no_execution_fails_after_three_trailing_misses,
    a_probe_that_finds_the_execution_resets_the_misses,
    the_silence_threshold_is_a_boundary,
    a_running_job_whose_host_vanished_fails_after_three_misses,
    a_failed_execution_settles_the_job_failed_at_once,
    a_completed_execution_settles_the_job_succeeded,
    a_success_with_steps_in_flight_is_corrected_and_the_effect_runs_after,
    a_recorded_cancel_with_a_lost_execution_settles_cancelled_without_the_effect,
    a_late_success_for_a_failed_job_is_ignored_with_an_alert,
    one_reconciler_runs_at_a_time_across_hosts,
);

const START: i64 = 1_900_000_000_000;

struct Sim {
    h: Harness,
    clock: ManualClock,
    engine: Arc<Engine>,
    policy: ReconcilePolicy,
}

impl Sim {
    async fn new(backend: Backend) -> Self {
        let h = Harness::new(backend).await;
        h.deploy("scripted").await;
        let clock = ManualClock::new(Timestamp::from_millis(START));
        let engine = h.engine_clocked(test_engine_config(), Arc::new(clock.clone()));
        Self { h, clock, engine, policy: ReconcilePolicy::default() }
    }

    async fn submit(&self) -> JobId {
        self.h.submit(&self.engine, "scripted", json!({})).await
    }

    async fn job(&self, id: JobId) -> JobRecord {
        self.h.store.job(id).await.unwrap().unwrap()
    }

    async fn pass(&self) -> spindle::reconciler::PassReport {
        reconcile_once(&self.engine, &self.policy).await.unwrap().expect("this host holds the reconciler lease")
    }

    /// Moves the clock to the next pass (the interval) and runs it.
    async fn next_pass(&self) -> spindle::reconciler::PassReport {
        self.clock.advance(self.policy.interval);
        self.pass().await
    }

    async fn history(&self, id: JobId) -> Vec<String> {
        self.h.store.history(id).await.unwrap().iter().map(|e| e.event.name().to_owned()).collect()
    }

    /// Takes the job out of the dispatch queue without a claim: a lost dispatch, which
    /// only a damaged row (or a defect) can leave behind.
    async fn lose_dispatch(&self, id: JobId) {
        self.tamper(id, |job| job.queue = spindle_core::QueueState::Idle).await;
    }

    /// Rewrites a job's machine by hand (to build states a crash or a bug leaves behind).
    async fn tamper(&self, id: JobId, change: impl FnOnce(&mut spindle_core::Job)) {
        let record = self.job(id).await;
        let mut next = record.clone();
        change(&mut next.job);
        let steps_changed = (0..next.job.steps.len()).collect();
        let frees_slot = record.job.claim.as_ref().is_some_and(|c| c.limited) && next.job.claim.is_none();
        let write = JobWrite {
            record: next,
            expected_version: record.version,
            steps_changed,
            previous_pass: None,
            history: vec![],
            leases: LeaseOp::None,
            outbox: vec![],
            spawn: None,
            children: vec![],
            store_signal: None,
            consume_signal: None,
            relay: vec![],
            frees_slot,
            at: self.clock_now(),
        };
        self.h.store.write(vec![write], self.clock_now(), self.engine.deriver()).await.unwrap();
    }

    fn clock_now(&self) -> Timestamp {
        use spindle::clock::Clock;
        self.clock.now()
    }

    /// Claims the job and completes its first step through the engine.
    async fn run_first_step(&self) -> JobRecord {
        let claimed = self.engine.execution().claim(1).await.unwrap().pop().expect("claimed");
        let id = claimed.job.id;
        self.engine.execution().execute(claimed).await;
        self.job(id).await
    }
}

async fn a_pending_job_with_no_execution_fails_after_three_trailing_misses(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    s.lose_dispatch(id).await;
    s.clock.advance(s.policy.silence);
    assert_eq!(s.pass().await.misses, 1);
    assert_eq!(s.next_pass().await.misses, 1);
    assert_eq!(s.job(id).await.job.state, JobState::Pending, "two misses do not settle");
    assert_eq!(s.next_pass().await.settled, 1);
    let job = s.job(id).await;
    assert_eq!(job.job.state, JobState::Failed);
    assert_eq!(job.job.failure.unwrap().code, "reconciler.never-started");
    assert!(job.job.steps.iter().all(|st| st.state == StepState::Queued), "unstarted steps stay queued");
    let names = s.history(id).await;
    let effect = names.iter().position(|n| n == "effect_ran").expect("the failure effect ran");
    let failed = names.iter().position(|n| n == "failed").unwrap();
    assert!(effect < failed, "the effect runs before this failure's settlement: {names:?}");
}

async fn a_probe_that_finds_the_execution_resets_the_misses(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    s.lose_dispatch(id).await;
    s.clock.advance(s.policy.silence);
    s.pass().await;
    s.next_pass().await;
    assert_eq!(s.job(id).await.job.probe_misses, 2);
    // The job is back in the queue (its dispatch was found): the next probe finds it.
    s.tamper(id, |job| job.queue = spindle_core::QueueState::Ready).await;
    s.next_pass().await;
    assert_eq!(s.job(id).await.job.probe_misses, 0, "misses must be trailing");
    s.lose_dispatch(id).await;
    s.next_pass().await;
    s.next_pass().await;
    assert_eq!(s.job(id).await.job.state, JobState::Pending, "only two trailing misses since the reset");
    s.next_pass().await;
    assert_eq!(s.job(id).await.job.state, JobState::Failed);
}

async fn the_silence_threshold_is_a_boundary(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    s.lose_dispatch(id).await;
    s.clock.advance(s.policy.silence - Duration::from_micros(1));
    assert_eq!(s.pass().await.examined, 0, "one microsecond short of the threshold: not a candidate");
    s.clock.advance(Duration::from_micros(1));
    let report = s.pass().await;
    assert_eq!((report.examined, report.misses), (1, 1), "at the threshold the probe counts");
}

async fn a_running_job_whose_host_vanished_fails_after_three_misses(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    s.engine.execution().claim(1).await.unwrap();
    // The host holding the claim vanished; nobody rescued it (no dispatcher runs here).
    s.clock.advance(s.policy.silence);
    s.pass().await;
    s.next_pass().await;
    assert_eq!(s.job(id).await.job.state, JobState::Running);
    s.next_pass().await;
    let job = s.job(id).await;
    assert_eq!(job.job.state, JobState::Failed);
    assert_eq!(job.job.steps[0].state, StepState::Failed, "the running step is failed");
    assert_eq!(job.job.steps[0].failure.as_ref().unwrap().code, "reconciler.execution-lost");
    assert_eq!(job.job.steps[1].state, StepState::Queued);
    assert!(job.job.claim.is_none());
    let names = s.history(id).await;
    assert!(names.iter().position(|n| n == "effect_ran") < names.iter().position(|n| n == "failed"));
}

async fn a_failed_execution_settles_the_job_failed_at_once(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    s.run_first_step().await;
    // The second step failed, but the job was never settled (a crash between the two).
    s.tamper(id, |job| {
        job.steps[1].state = StepState::Failed;
        job.steps[1].failure = Some(spindle_core::SafeFailure::permanent("boom", "it broke"));
    })
    .await;
    s.clock.advance(s.policy.silence);
    assert_eq!(s.pass().await.settled, 1, "terminal evidence settles without waiting for misses");
    assert_eq!(s.job(id).await.job.state, JobState::Failed);
}

async fn a_completed_execution_settles_the_job_succeeded(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    s.run_first_step().await;
    s.tamper(id, |job| {
        for step in &mut job.steps {
            step.state = StepState::Completed;
        }
    })
    .await;
    s.clock.advance(s.policy.silence);
    assert_eq!(s.pass().await.settled, 1);
    let job = s.job(id).await;
    assert_eq!(job.job.state, JobState::Succeeded);
    assert_eq!(job.job.progress, 100);
    assert!(s.history(id).await.contains(&"reconciled".to_owned()));
}

async fn a_success_with_steps_in_flight_is_corrected_and_the_effect_runs_after(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    s.run_first_step().await;
    // The execution reported its last step done while the second was still in flight.
    s.tamper(id, |job| {
        job.steps[1].state = StepState::Retrying;
        job.steps[2].state = StepState::Completed;
    })
    .await;
    s.clock.advance(s.policy.silence);
    assert_eq!(s.pass().await.settled, 1);
    let job = s.job(id).await;
    assert_eq!(job.job.state, JobState::Failed);
    assert_eq!(job.job.steps[1].state, StepState::Failed);
    assert_eq!(job.job.failure.unwrap().code, "reconciler.success-corrected");
    assert!(!s.history(id).await.contains(&"effect_ran".to_owned()), "not before the settlement");
    // The effect was queued with the settlement and runs after it.
    assert_eq!(s.engine.execution().run_outbox(10).await.unwrap(), 1);
    let names = s.history(id).await;
    let failed = names.iter().position(|n| n == "failed").unwrap();
    let effect = names.iter().position(|n| n == "effect_ran").expect("the effect ran");
    assert!(failed < effect, "a corrected failure's effect runs after its settlement: {names:?}");
}

async fn a_recorded_cancel_with_a_lost_execution_settles_cancelled_without_the_effect(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    s.engine.execution().claim(1).await.unwrap();
    s.engine
        .operations()
        .command(&s.h.tenant, id, Command::Cancel { reason: "no longer needed".into() }, "ops")
        .await
        .unwrap();
    assert_eq!(s.job(id).await.job.state, JobState::Running, "cancelling: waits for the step in flight");
    s.clock.advance(s.policy.silence);
    s.pass().await;
    s.next_pass().await;
    s.next_pass().await;
    let job = s.job(id).await;
    assert_eq!(job.job.state, JobState::Cancelled);
    assert_eq!(job.job.steps[0].failure.as_ref().unwrap().code, "cancel.stopped");
    assert_eq!(s.engine.execution().run_outbox(10).await.unwrap(), 0);
    assert!(!s.history(id).await.contains(&"effect_ran".to_owned()), "never a failure effect on cancellation");
}

async fn a_late_success_for_a_failed_job_is_ignored_with_an_alert(backend: Backend) {
    let s = Sim::new(backend).await;
    let id = s.submit().await;
    let zombie = s.engine.execution().claim(1).await.unwrap().pop().unwrap();
    // The zombie: a host paused since it claimed, its clock still at that time (one whose
    // clock moved on would not start the step at all: the claim lapsed).
    let paused =
        s.h.engine_clocked(test_engine_config(), Arc::new(ManualClock::new(spindle::clock::Clock::now(&s.clock))));
    s.clock.advance(s.policy.silence);
    s.pass().await;
    s.next_pass().await;
    s.next_pass().await;
    let failed = s.job(id).await;
    assert_eq!(failed.job.state, JobState::Failed);
    // The zombie host wakes up and reports success.
    let before = paused.counters().alerts.load(std::sync::atomic::Ordering::Relaxed);
    let fence = zombie.job.claim.as_ref().unwrap().fence;
    let late = JobEvent::Report { fence, report: spindle_core::StepReport::Complete { output: b"{}".to_vec() } };
    assert_eq!(
        transition(&failed.job, &late, s.clock_now()).unwrap_err(),
        spindle_core::Refusal::LateSuccessAfterFailure
    );
    let outcome = paused.execution().execute(zombie).await.outcome;
    assert_eq!(outcome, spindle::engine::Outcome::Stale);
    let after = s.job(id).await;
    assert_eq!(after.job.state, JobState::Failed, "never a state change");
    assert_eq!(after.version, failed.version);
    assert!(paused.counters().alerts.load(std::sync::atomic::Ordering::Relaxed) > before, "an operational alert");
    let counters = s.h.store.counters().await.unwrap();
    assert!(counters.iter().any(|(name, n)| name == "alert.late-success-after-failure" && *n >= 1), "{counters:?}");
}

async fn one_reconciler_runs_at_a_time_across_hosts(backend: Backend) {
    let s = Sim::new(backend).await;
    let other = s
        .h
        .engine_clocked(EngineConfig { host_id: "host-b".into(), ..test_engine_config() }, Arc::new(s.clock.clone()));
    let first = EngineConfig { host_id: "host-a".into(), ..test_engine_config() };
    let a = s.h.engine_clocked(first, Arc::new(s.clock.clone()));
    for round in 0..20 {
        let (ra, rb) = tokio::join!(reconcile_once(&a, &s.policy), reconcile_once(&other, &s.policy));
        let held = usize::from(ra.unwrap().is_some()) + usize::from(rb.unwrap().is_some());
        assert_eq!(held, 1, "round {round}: exactly one host reconciles");
        s.clock.advance(s.policy.interval);
    }
    // The holder keeps the lease while it runs; when it stops, the other takes over.
    s.h.store.release_singleton(spindle::reconciler::LEASE, "host-a").await.unwrap();
    s.h.store.release_singleton(spindle::reconciler::LEASE, "host-b").await.unwrap();
    assert!(reconcile_once(&other, &s.policy).await.unwrap().is_some());
    assert!(reconcile_once(&a, &s.policy).await.unwrap().is_none());
    s.clock.advance(s.policy.interval * 3);
    assert!(reconcile_once(&a, &s.policy).await.unwrap().is_some(), "an expired holder is replaced");
}
