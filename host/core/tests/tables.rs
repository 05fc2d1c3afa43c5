//! The tables are the code: every machine changes state only through its table's one
//! function, which refuses a pair that is not a row — in release builds too
//! (`cargo test --release -p spindle-core` runs this file; `cargo xtask test` does).

#![allow(clippy::unwrap_used)]

use spindle_core::breaker::{BREAKER_FORBIDDEN, BREAKER_TRANSITIONS};
use spindle_core::job::{JOB_FORBIDDEN, JOB_TRANSITIONS, JobState, Refusal, change_state};
use spindle_core::queue::{QUEUE_FORBIDDEN, QUEUE_TRANSITIONS, QueueState};
use spindle_core::schedule::{SCHEDULE_FORBIDDEN, SCHEDULE_TRANSITIONS};
use spindle_core::step::{self, STEP_FORBIDDEN, STEP_TRANSITIONS, StepRefusal, StepState};
use spindle_core::table::{Allowed, DiagramState, NotInTable, change, is_allowed};

/// Every (from, to) pair of `S`: listed ones change, unlisted ones are refused naming the
/// machine and both states; the forbidden rows are among the refused.
fn walk<S: DiagramState + std::fmt::Debug>(
    machine: &'static str,
    table: &[Allowed<S>],
    forbidden: &[(S, S)],
    check: impl Fn(S, S) -> Result<S, NotInTable>,
) {
    for &from in S::all() {
        for &to in S::all() {
            let got = check(from, to);
            if from == to || is_allowed(table, from, to) {
                assert_eq!(got, Ok(to), "{machine}: {from:?} → {to:?} is a row");
            } else {
                assert_eq!(
                    got,
                    Err(NotInTable { machine, from: from.name(), to: to.name() }),
                    "{machine}: {from:?} → {to:?} is not a row"
                );
            }
        }
    }
    for (from, to) in forbidden {
        assert!(check(*from, *to).is_err(), "{machine}: forbidden {from:?} → {to:?} was allowed");
    }
}

#[test]
fn a_job_state_change_outside_its_table_is_refused() {
    let forbidden: Vec<_> = JOB_FORBIDDEN.iter().map(|f| (f.from, f.to)).collect();
    walk("job", JOB_TRANSITIONS, &forbidden, |from, to| {
        change_state(from, to).map_err(|refusal| match refusal {
            Refusal::NotInTable(not) => not,
            other => panic!("unexpected refusal {other:?}"),
        })
    });
    // Final states never change, whatever the table says of them.
    for from in [JobState::Succeeded, JobState::Failed, JobState::Cancelled] {
        for &to in JobState::all() {
            assert_eq!(change_state(from, to).is_ok(), from == to, "final {from:?} → {to:?}");
        }
    }
    let refusal = change_state(JobState::Succeeded, JobState::Running).unwrap_err();
    assert_eq!(refusal.code(), "not-in-table");
}

#[test]
fn a_step_state_change_outside_its_table_is_refused() {
    let forbidden: Vec<_> = STEP_FORBIDDEN.iter().map(|f| (f.from, f.to)).collect();
    walk("step", STEP_TRANSITIONS, &forbidden, |from, to| {
        step::change_state(from, to).map_err(|refusal| match refusal {
            StepRefusal::NotInTable(not) => not,
            other => panic!("unexpected refusal {other:?}"),
        })
    });
    assert!(step::change_state(StepState::Completed, StepState::Running).is_err());
}

#[test]
fn a_queue_change_outside_its_table_is_refused() {
    let forbidden: Vec<_> = QUEUE_FORBIDDEN.iter().map(|f| (f.from, f.to)).collect();
    walk("queue", QUEUE_TRANSITIONS, &forbidden, |from, to| change("queue", QUEUE_TRANSITIONS, from, to));
    assert!(change("queue", QUEUE_TRANSITIONS, QueueState::Idle, QueueState::Blocked).is_err());
}

#[test]
fn a_breaker_change_outside_its_table_is_refused() {
    let forbidden: Vec<_> = BREAKER_FORBIDDEN.iter().map(|f| (f.from, f.to)).collect();
    walk("breaker", BREAKER_TRANSITIONS, &forbidden, |from, to| change("breaker", BREAKER_TRANSITIONS, from, to));
    for f in BREAKER_FORBIDDEN {
        assert!(!is_allowed(BREAKER_TRANSITIONS, f.from, f.to), "breaker {:?} → {:?} is both", f.from, f.to);
    }
}

#[test]
fn a_schedule_change_outside_its_table_is_refused() {
    let forbidden: Vec<_> = SCHEDULE_FORBIDDEN.iter().map(|f| (f.from, f.to)).collect();
    walk("schedule", SCHEDULE_TRANSITIONS, &forbidden, |from, to| change("schedule", SCHEDULE_TRANSITIONS, from, to));
}

#[test]
fn forbidden_rows_are_never_allowed_rows() {
    for f in JOB_FORBIDDEN {
        assert!(!is_allowed(JOB_TRANSITIONS, f.from, f.to), "job {:?} → {:?} is both", f.from, f.to);
    }
    for f in STEP_FORBIDDEN {
        assert!(!is_allowed(STEP_TRANSITIONS, f.from, f.to), "step {:?} → {:?} is both", f.from, f.to);
    }
    for f in QUEUE_FORBIDDEN {
        assert!(!is_allowed(QUEUE_TRANSITIONS, f.from, f.to), "queue {:?} → {:?} is both", f.from, f.to);
    }
}
