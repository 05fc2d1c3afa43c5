//! Property tests over random event sequences. The seed is printed and can be given
//! back through `SPINDLE_TEST_SEED` to replay a run exactly.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use spindle_core::job::{JOB_FORBIDDEN, JOB_TRANSITIONS, KindRules};
use spindle_core::queue::{QUEUE_FORBIDDEN, QUEUE_TRANSITIONS};
use spindle_core::table::is_allowed;
use spindle_core::{JobState, QueueState, StepState, transition};

/// A step within one pass: (pass, key).
type StepIdentity = (u32, String);
/// A final step's state and output.
type FinalOutcome = (StepState, Option<Vec<u8>>);

fn runner(cases: u32) -> (TestRunner, u64) {
    let seed = std::env::var("SPINDLE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    eprintln!("SPINDLE_TEST_SEED={seed}");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    (TestRunner::new_with_rng(Config { cases, failure_persistence: None, ..Config::default() }, rng), seed)
}

/// Runs `test` over `cases` values of `strategy` from a printed seed, and fails naming
/// the seed that replays the failure.
fn check<S: Strategy>(cases: u32, strategy: S, test: impl Fn(S::Value) -> Result<(), TestCaseError>) {
    let (mut runner, seed) = runner(cases);
    if let Err(e) = runner.run(&strategy, test) {
        panic!("property failed with SPINDLE_TEST_SEED={seed}: {e}");
    }
}

/// A pending job of the scenario's rules, and the clock at its submission.
fn scenario_job(
    cancellable: bool,
    max_attempts: u32,
    failure_effect: bool,
) -> (spindle_core::Job, spindle_core::Timestamp) {
    let rules = KindRules { cancellable, max_attempts, failure_effect, notify_on_success: true, lean: false };
    (pending_with(rules), t0())
}

/// A scenario: the kind's rules, then events as (index into the universe, seconds to
/// advance the clock).
fn scenario() -> impl Strategy<Value = (bool, u32, bool, Vec<(usize, u64)>)> {
    (
        any::<bool>(),
        1u32..4,
        any::<bool>(),
        prop::collection::vec((0usize..64, prop_oneof![Just(0u64), 0u64..40, 900u64..2000]), 1..80),
    )
}

#[test]
fn random_event_sequences_keep_every_invariant() {
    check(2_000, scenario(), |(cancellable, max_attempts, failure_effect, events)| {
        let (mut job, mut now) = scenario_job(cancellable, max_attempts, failure_effect);
        // (pass, step key) → the final outcome first recorded for it.
        let mut finals: HashMap<StepIdentity, FinalOutcome> = HashMap::new();
        for (pick, advance) in events {
            now = now.plus(Duration::from_secs(advance));
            let universe = universe(&job);
            let event = &universe[pick % universe.len()];
            let Ok(t) = transition(&job, event, now) else { continue };
            let next = t.job;
            let (from, to) = (job.state, next.state);
            // Final states are absorbing.
            if from.is_final() {
                prop_assert_eq!(to, from, "final {:?} changed by {:?}", from, event);
                prop_assert_eq!(&next.steps, &job.steps);
            }
            // Every state change is an allowed row, never a forbidden one.
            if from != to {
                prop_assert!(
                    is_allowed(JOB_TRANSITIONS, from, to),
                    "{:?} → {:?} by {:?} is not allowed",
                    from,
                    to,
                    event
                );
                prop_assert!(
                    !JOB_FORBIDDEN.iter().any(|f| f.from == from && f.to == to),
                    "forbidden {:?} → {:?}",
                    from,
                    to
                );
            }
            // Progress is monotone within a pass and 100 exactly on success.
            if next.pass == job.pass {
                prop_assert!(
                    next.progress >= job.progress,
                    "progress went back {} → {} by {:?}",
                    job.progress,
                    next.progress,
                    event
                );
            }
            prop_assert_eq!(
                next.progress == 100,
                next.state == JobState::Succeeded,
                "progress {} in {:?}",
                next.progress,
                next.state
            );
            // No step has two final outcomes; a final step never reopens within its pass.
            let passes = t.previous_pass.iter().map(|p| (job.pass, p)).chain(std::iter::once((next.pass, &next.steps)));
            for (pass, steps) in passes {
                for step in steps {
                    let key = (pass, step.key.clone());
                    match finals.get(&key) {
                        Some((state, output)) => {
                            prop_assert_eq!(step.state, *state, "step {:?} left its final state", key);
                            prop_assert_eq!(&step.output, output);
                        }
                        None if step.state.is_final() => {
                            finals.insert(key, (step.state, step.output.clone()));
                        }
                        None => {}
                    }
                }
            }
            // Claims and final states exclude each other; a paused job holds no claim.
            if next.state.is_final() || next.state == JobState::Paused {
                prop_assert!(next.claim.is_none(), "{:?} job holds a claim", next.state);
            }
            // Fences only grow.
            prop_assert!(next.fence >= job.fence);
            // The queue is the machine's answer: idle exactly when nothing can dispatch
            // the job (a step in flight, paused, final); waiting otherwise, never lost.
            // A waiting job holds no claim and is not dispatchable: out of the queue, or
            // delayed until its signal's timeout; its parked step waits with it.
            let parked = next.state == JobState::Waiting;
            if parked {
                prop_assert!(next.claim.is_none(), "a waiting job holds a claim");
                let wait = next.wait.as_ref().expect("a waiting job records its wait");
                prop_assert!(wait.met.is_none(), "a waiting job's wait is over");
                prop_assert_eq!(next.steps[wait.step].state, spindle_core::StepState::Waiting);
                let delayed = wait.deadline().is_some();
                prop_assert_eq!(next.queue, if delayed { QueueState::Delayed } else { QueueState::Idle });
            }
            let idle = next.state.is_final()
                || next.state == JobState::Paused
                || next.claim.is_some()
                || (parked && next.queue == QueueState::Idle);
            prop_assert_eq!(next.queue == QueueState::Idle, idle, "queue {:?} for {:?}", next.queue, next);
            prop_assert_eq!(next.blocked_on.is_some(), next.queue == QueueState::Blocked);
            if next.queue == QueueState::Ready {
                prop_assert!(next.run_at <= now, "ready before its time");
            }
            if job.queue != next.queue {
                prop_assert!(
                    is_allowed(QUEUE_TRANSITIONS, job.queue, next.queue),
                    "queue {:?} → {:?} by {:?}",
                    job.queue,
                    next.queue,
                    event
                );
                prop_assert!(!QUEUE_FORBIDDEN.iter().any(|f| f.from == job.queue && f.to == next.queue));
            }
            job = next;
        }
        Ok(())
    });
}

#[test]
fn a_job_driven_to_the_end_succeeds_with_exactly_100() {
    check(300, prop::collection::vec(0u8..4, 0..20), |choices| {
        let mut job = pending();
        let mut now = t0();
        let mut choice = choices.into_iter().cycle();
        let mut guard = 0;
        while !job.state.is_final() && guard < 200 {
            guard += 1;
            now = now.plus(Duration::from_secs(10));
            job = apply(&job, claim_ev(), now);
            let r = match choice.next().unwrap_or(0) {
                1 => more(),
                2 => spindle_core::StepReport::Skip { reason: "n/a".into() },
                3 => spindle_core::StepReport::Snooze { delay: Duration::from_secs(1) },
                _ => complete(),
            };
            let before = job.progress;
            job = apply(&job, report(job.fence, r), now);
            prop_assert!(job.progress >= before);
        }
        if job.state.is_final() {
            prop_assert_eq!(job.state, JobState::Succeeded);
            prop_assert_eq!(job.progress, 100);
        }
        Ok(())
    });
}

/// What a store keeps of a job is the rows each transition names (`steps_changed`, the
/// previous pass) plus the job row; read back with [`Job::restore_claimed_step`], that
/// must be the job itself after every transition. A claim that starts an attempt names
/// no step row: this fails if its end, or anything else that changes the step, does not
/// either.
#[test]
fn the_rows_a_transition_names_read_back_as_the_job() {
    check(2_000, scenario(), |(cancellable, max_attempts, failure_effect, events)| {
        let (mut job, mut now) = scenario_job(cancellable, max_attempts, failure_effect);
        // (pass, position) → the step as its row holds it; the submission writes them all.
        let mut rows: HashMap<(u32, usize), spindle_core::step::Step> =
            job.steps.iter().enumerate().map(|(i, s)| ((job.pass, i), s.clone())).collect();
        for (pick, advance) in events {
            now = now.plus(Duration::from_secs(advance));
            let universe = universe(&job);
            let event = &universe[pick % universe.len()];
            let Ok(t) = transition(&job, event, now) else { continue };
            if let Some(previous) = &t.previous_pass {
                for (i, step) in previous.iter().enumerate() {
                    rows.insert((job.pass, i), step.clone());
                }
            }
            for &i in &t.steps_changed {
                rows.insert((t.job.pass, i), t.job.steps[i].clone());
            }
            let mut read = t.job.clone();
            read.steps = (0..t.job.steps.len()).filter_map(|i| rows.get(&(t.job.pass, i)).cloned()).collect();
            read.restore_claimed_step();
            prop_assert_eq!(&read, &t.job, "read back after {:?}", event);
            job = t.job;
        }
        Ok(())
    });
}
