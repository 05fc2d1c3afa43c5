//! The step machine, table-driven: every allowed transition of seed 002 and every
//! forbidden one.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;

use common::at;
use spindle_core::step::{STEP_FORBIDDEN, STEP_TRANSITIONS, Step, StepChange, StepEvent, StepRefusal, StepState};
use spindle_core::{Fence, SafeFailure};

fn step_in(state: StepState) -> Step {
    let mut s = Step::new("a", 1);
    let now = at(0);
    match state {
        StepState::Queued => {}
        StepState::Running => {
            s.apply(StepEvent::Start { fence: Fence(1) }, now).unwrap();
        }
        StepState::Waiting => {
            s.apply(StepEvent::Start { fence: Fence(1) }, now).unwrap();
            s.apply(StepEvent::Park { cursor: Some("w".into()) }, now).unwrap();
        }
        StepState::Retrying => {
            s.apply(StepEvent::Start { fence: Fence(1) }, now).unwrap();
            s.apply(StepEvent::Retry { failure: transient() }, now).unwrap();
        }
        StepState::Completed => {
            s.apply(StepEvent::Start { fence: Fence(1) }, now).unwrap();
            s.apply(StepEvent::Complete { output: b"out".to_vec() }, now).unwrap();
        }
        StepState::Skipped => {
            s.apply(StepEvent::Start { fence: Fence(1) }, now).unwrap();
            s.apply(StepEvent::Skip { reason: "n/a".into() }, now).unwrap();
        }
        StepState::Failed => {
            s.apply(StepEvent::Start { fence: Fence(1) }, now).unwrap();
            s.apply(StepEvent::Fail { failure: permanent() }, now).unwrap();
        }
    }
    assert_eq!(s.state, state);
    s
}

fn transient() -> SafeFailure {
    SafeFailure::transient("timeout", "corr-9")
}

fn permanent() -> SafeFailure {
    SafeFailure::permanent("refused", "not allowed")
}

fn events() -> Vec<StepEvent> {
    vec![
        StepEvent::Start { fence: Fence(2) },
        StepEvent::Continue,
        StepEvent::Checkpoint { cursor: "c".into(), partial: Default::default() },
        StepEvent::Complete { output: b"out".to_vec() },
        StepEvent::Complete { output: b"other".to_vec() },
        StepEvent::Skip { reason: "n/a".into() },
        StepEvent::Retry { failure: transient() },
        StepEvent::Fail { failure: permanent() },
        StepEvent::Carry { output: b"out".to_vec() },
        StepEvent::Park { cursor: None },
    ]
}

struct Case {
    seed: &'static str,
    from: StepState,
    event: StepEvent,
    expect: Result<StepState, StepRefusal>,
}

fn cases() -> Vec<Case> {
    use StepState::*;
    let invalid = |from, event| Err(StepRefusal::Invalid { step: "a".into(), from, event });
    let final_ = |state| Err(StepRefusal::DifferentFinal { step: "a".into(), state });
    vec![
        Case {
            seed: "002 queued→running: the task handler begins the step",
            from: Queued,
            event: StepEvent::Start { fence: Fence(1) },
            expect: Ok(Running),
        },
        Case {
            seed: "002 running→completed",
            from: Running,
            event: StepEvent::Complete { output: vec![1] },
            expect: Ok(Completed),
        },
        Case {
            seed: "002 running→skipped",
            from: Running,
            event: StepEvent::Skip { reason: "n/a".into() },
            expect: Ok(Skipped),
        },
        Case {
            seed: "002 running→retrying",
            from: Running,
            event: StepEvent::Retry { failure: transient() },
            expect: Ok(Retrying),
        },
        Case {
            seed: "002 retrying→running: the next attempt",
            from: Retrying,
            event: StepEvent::Start { fence: Fence(2) },
            expect: Ok(Running),
        },
        Case {
            seed: "002 running→failed",
            from: Running,
            event: StepEvent::Fail { failure: permanent() },
            expect: Ok(Failed),
        },
        Case {
            seed: "002 retrying→failed",
            from: Retrying,
            event: StepEvent::Fail { failure: permanent() },
            expect: Ok(Failed),
        },
        Case {
            seed: "002 queued→completed: carried from a predecessor",
            from: Queued,
            event: StepEvent::Carry { output: vec![1] },
            expect: Ok(Completed),
        },
        Case {
            seed: "issue 14 running→waiting: an await outcome parks the attempt",
            from: Running,
            event: StepEvent::Park { cursor: Some("c".into()) },
            expect: Ok(Waiting),
        },
        Case {
            seed: "issue 14 waiting→running: woken and claimed, same attempt",
            from: Waiting,
            event: StepEvent::Continue,
            expect: Ok(Running),
        },
        Case {
            seed: "issue 14 waiting→failed: stopped while waiting",
            from: Waiting,
            event: StepEvent::Fail { failure: permanent() },
            expect: Ok(Failed),
        },
        Case {
            seed: "issue 14 invalid waiting→completed",
            from: Waiting,
            event: StepEvent::Complete { output: vec![1] },
            expect: invalid(Waiting, "complete"),
        },
        Case {
            seed: "issue 14 invalid waiting→retrying",
            from: Waiting,
            event: StepEvent::Retry { failure: transient() },
            expect: invalid(Waiting, "retry"),
        },
        Case {
            seed: "issue 14 a parked step is not parked again without being called",
            from: Waiting,
            event: StepEvent::Park { cursor: None },
            expect: invalid(Waiting, "park"),
        },
        Case {
            seed: "issue 14 a queued step cannot wait without running",
            from: Queued,
            event: StepEvent::Park { cursor: None },
            expect: invalid(Queued, "park"),
        },
        Case {
            seed: "002 invalid completed→running",
            from: Completed,
            event: StepEvent::Start { fence: Fence(2) },
            expect: final_(Completed),
        },
        Case {
            seed: "002 invalid failed→retrying",
            from: Failed,
            event: StepEvent::Retry { failure: transient() },
            expect: final_(Failed),
        },
        Case {
            seed: "002 invalid queued→failed",
            from: Queued,
            event: StepEvent::Fail { failure: permanent() },
            expect: invalid(Queued, "fail"),
        },
        Case {
            seed: "002 a different final report is refused",
            from: Completed,
            event: StepEvent::Complete { output: b"other".to_vec() },
            expect: final_(Completed),
        },
        Case {
            seed: "002 a different final report is refused (skip after complete)",
            from: Completed,
            event: StepEvent::Skip { reason: "x".into() },
            expect: final_(Completed),
        },
        Case {
            seed: "002 queued steps cannot complete without running",
            from: Queued,
            event: StepEvent::Complete { output: vec![1] },
            expect: invalid(Queued, "complete"),
        },
        Case {
            seed: "002 a retrying step cannot complete without a new attempt",
            from: Retrying,
            event: StepEvent::Complete { output: vec![1] },
            expect: invalid(Retrying, "complete"),
        },
    ]
}

#[test]
fn every_row_of_the_table_holds() {
    let mut covered = HashSet::new();
    for case in cases() {
        let mut step = step_in(case.from);
        let got = step.apply(case.event.clone(), at(5)).map(|_| step.state);
        assert_eq!(got, case.expect, "{}", case.seed);
        if let Ok(to) = got {
            covered.insert((case.from, to));
        }
    }
    for row in STEP_TRANSITIONS {
        if let Some(from) = row.from {
            assert!(covered.contains(&(from, row.to)), "no case exercises {from:?} → {:?} ({})", row.to, row.seed);
        }
    }
}

#[test]
fn no_event_makes_a_forbidden_transition() {
    for rule in STEP_FORBIDDEN {
        for event in events() {
            let mut step = step_in(rule.from);
            if step.apply(event.clone(), at(5)).is_ok() {
                assert_ne!(step.state, rule.to, "{} broken by {event:?}: {}", rule.seed, rule.why);
            }
        }
    }
}

#[test]
fn final_steps_never_change_and_identical_reports_add_nothing() {
    for state in [StepState::Completed, StepState::Skipped, StepState::Failed] {
        for event in events() {
            let before = step_in(state);
            let mut step = before.clone();
            match step.apply(event.clone(), at(5)) {
                Ok(change) => {
                    assert_eq!(change, StepChange::Unchanged, "{event:?} changed a final {state:?} step");
                    assert_eq!(step, before);
                }
                Err(StepRefusal::DifferentFinal { state: s, .. }) => assert_eq!(s, state),
                Err(other) => panic!("unexpected refusal {other:?}"),
            }
        }
    }
}

#[test]
fn attempts_are_appended_and_closed_with_their_outcome() {
    let mut s = step_in(StepState::Retrying);
    s.apply(StepEvent::Start { fence: Fence(2) }, at(9)).unwrap();
    s.apply(StepEvent::Complete { output: vec![] }, at(10)).unwrap();
    assert_eq!(s.attempts.len(), 2);
    assert_eq!(s.attempts[1].number, 2);
    assert_eq!(s.attempts[1].fence, Fence(2));
    assert_eq!(s.attempts[1].ended_at, Some(at(10)));
    assert_eq!(s.started_at, Some(at(0)), "first start is stamped once");
}
