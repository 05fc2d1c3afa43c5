//! The queue machine, table-driven: every row of `QUEUE_TRANSITIONS` reached through the
//! job's transition function, each asserting where the job then waits (queue, `run_at`,
//! the key it waits for), the queue events' refusals, and — exhaustively — that no event
//! from any queue state reaches a forbidden one.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use spindle_core::job::{JobEvent, StepReport, Submission};
use spindle_core::queue::{BLOCKED_RECHECK, QUEUE_FORBIDDEN, QUEUE_TRANSITIONS};
use spindle_core::{Job, JobId, QueueState, Refusal, Timestamp, transition};
use uuid::Uuid;

const KEY: &str = "account:42";

fn busy() -> JobEvent {
    JobEvent::KeyBusy { key: KEY.into(), held_until: at(30) }
}

/// Pending, its claim found `KEY` held until at(30): blocked, rechecked at t0 + 1 s.
fn blocked() -> Job {
    apply(&pending(), busy(), t0())
}

/// Submitted at t0 to run at at(60).
fn delayed_submission() -> Job {
    let submission =
        Submission { id: JobId(Uuid::from_u128(7)), rules: rules(), steps: vec![("a".into(), 1)], run_at: at(60) };
    Job::submit(submission, t0()).0
}

struct Case {
    row: &'static str,
    given: fn() -> Job,
    event: fn(&Job) -> JobEvent,
    now: Timestamp,
    /// Where the job waits after: queue, run_at, blocked_on.
    expect: Result<(QueueState, Timestamp, Option<&'static str>), Refusal>,
}

fn cases() -> Vec<Case> {
    use QueueState::*;
    vec![
        Case {
            row: "ready → idle: claimed",
            given: pending,
            event: |_| claim_ev(),
            now: t0(),
            expect: Ok((Idle, t0(), None)),
        },
        Case {
            row: "ready → idle: paused",
            given: pending,
            event: |_| JobEvent::Pause { actor: actor() },
            now: at(1),
            expect: Ok((Idle, t0(), None)),
        },
        Case {
            row: "ready → blocked: the claim found a key held; rechecked after BLOCKED_RECHECK at the latest",
            given: pending,
            event: |_| busy(),
            now: t0(),
            expect: Ok((Blocked, t0().plus(BLOCKED_RECHECK), Some(KEY))),
        },
        Case {
            row: "ready → blocked: rechecked at the holder's expiry when that is sooner",
            given: pending,
            event: |_| JobEvent::KeyBusy { key: KEY.into(), held_until: t0().plus(Duration::from_millis(200)) },
            now: t0(),
            expect: Ok((Blocked, t0().plus(Duration::from_millis(200)), Some(KEY))),
        },
        Case {
            row: "ready → blocked: the claim found a running limit full; rechecked when the gate says",
            given: pending,
            event: |_| JobEvent::AtCapacity { gate: "@running/acme".into(), recheck_at: at(30) },
            now: t0(),
            expect: Ok((Blocked, at(30), Some("@running/acme"))),
        },
        Case {
            row: "delayed → ready: a backoff's time came",
            given: running_retrying,
            event: |_| JobEvent::Due,
            now: at(6),
            expect: Ok((Ready, at(6), None)),
        },
        Case {
            row: "delayed → ready: a delayed submission's time came",
            given: delayed_submission,
            event: |_| JobEvent::Due,
            now: at(61),
            expect: Ok((Ready, at(60), None)),
        },
        Case {
            row: "delayed → idle: paused while waiting",
            given: running_retrying,
            event: |_| JobEvent::Pause { actor: actor() },
            now: at(2),
            expect: Ok((Idle, at(6), None)),
        },
        Case {
            row: "delayed → idle: a due job claimed before it was promoted",
            given: running_retrying,
            event: |_| claim_ev(),
            now: at(7),
            expect: Ok((Idle, at(6), None)),
        },
        Case {
            row: "blocked → ready: the key was released",
            given: blocked,
            event: |_| JobEvent::KeyReleased { key: KEY.into() },
            now: t0().plus(Duration::from_millis(300)),
            expect: Ok((Ready, t0().plus(Duration::from_millis(300)), None)),
        },
        Case {
            row: "blocked → ready: its recheck time came",
            given: blocked,
            event: |_| JobEvent::Due,
            now: at(1),
            expect: Ok((Ready, at(1), None)),
        },
        Case {
            row: "blocked → idle: cancelled while waiting",
            given: blocked,
            event: |_| JobEvent::Cancel { actor: actor(), reason: "no longer needed".into() },
            now: at(1),
            expect: Ok((Idle, at(1), None)),
        },
        Case {
            row: "blocked → idle: paused while waiting",
            given: blocked,
            event: |_| JobEvent::Pause { actor: actor() },
            now: t0(),
            expect: Ok((Idle, at(1), None)),
        },
        Case {
            row: "idle → ready: a step completed and the next one is due",
            given: running_claimed,
            event: |j| report(j.fence, complete()),
            now: at(1),
            expect: Ok((Ready, at(1), None)),
        },
        Case {
            row: "idle → ready: resumed",
            given: paused_started,
            event: |_| JobEvent::Resume { actor: actor() },
            now: at(3),
            expect: Ok((Ready, at(3), None)),
        },
        Case {
            row: "idle → delayed: a snooze",
            given: running_claimed,
            event: |j| report(j.fence, StepReport::Snooze { delay: Duration::from_secs(60) }),
            now: at(1),
            expect: Ok((Delayed, at(61), None)),
        },
        Case {
            row: "idle → delayed: a retryable failure's backoff",
            given: running_claimed,
            event: |j| report(j.fence, retryable()),
            now: at(1),
            expect: Ok((Delayed, at(6), None)),
        },
        Case {
            row: "idle → delayed: resumed before a backoff ran out",
            given: || apply(&running_retrying(), JobEvent::Pause { actor: actor() }, at(2)),
            event: |_| JobEvent::Resume { actor: actor() },
            now: at(3),
            expect: Ok((Delayed, at(6), None)),
        },
        Case {
            row: "idle stays idle: the last step settles the job",
            given: || {
                let j = apply(&running_idle(), claim_ev(), at(2));
                let j = apply(&j, report(j.fence, complete()), at(3));
                apply(&j, claim_ev(), at(4))
            },
            event: |j| report(j.fence, complete()),
            now: at(5),
            expect: Ok((Idle, at(3), None)),
        },
        // ---- refusals of the queue events ------------------------------------------
        Case {
            row: "due: a ready job waits for nothing",
            given: pending,
            event: |_| JobEvent::Due,
            now: at(1),
            expect: Err(Refusal::NotWaiting { queue: Ready }),
        },
        Case {
            row: "due: not before its time",
            given: running_retrying,
            event: |_| JobEvent::Due,
            now: at(5),
            expect: Err(Refusal::NotDue { run_at: at(6) }),
        },
        Case {
            row: "due: a claimed job waits for nothing",
            given: running_claimed,
            event: |_| JobEvent::Due,
            now: at(5),
            expect: Err(Refusal::NotWaiting { queue: Idle }),
        },
        Case {
            row: "key busy: only a ready job is claimed, so only it can find a key held",
            given: running_retrying,
            event: |_| busy(),
            now: at(2),
            expect: Err(Refusal::NotWaiting { queue: Delayed }),
        },
        Case {
            row: "key released: another key frees nothing",
            given: blocked,
            event: |_| JobEvent::KeyReleased { key: "account:7".into() },
            now: at(1),
            expect: Err(Refusal::NotWaiting { queue: Blocked }),
        },
        Case {
            row: "queue events leave final jobs alone",
            given: succeeded,
            event: |_| JobEvent::Due,
            now: at(100),
            expect: Err(Refusal::Finished { state: spindle_core::JobState::Succeeded }),
        },
    ]
}

#[test]
fn every_row_of_the_queue_table_holds() {
    let mut covered = HashSet::new();
    let mut failures = Vec::new();
    for case in cases() {
        let job = (case.given)();
        let event = (case.event)(&job);
        match (transition(&job, &event, case.now), &case.expect) {
            (Ok(t), Ok((queue, run_at, blocked_on))) => {
                let got = (t.job.queue, t.job.run_at, t.job.blocked_on.as_deref());
                if got != (*queue, *run_at, *blocked_on) {
                    failures.push(format!("{}: expected {:?}, got {got:?}", case.row, (queue, run_at, blocked_on)));
                }
                covered.insert((job.queue, t.job.queue));
            }
            (Err(got), Err(want)) if got == *want => {}
            (got, want) => failures.push(format!("{}: expected {want:?}, got {got:?}", case.row)),
        }
    }
    assert!(failures.is_empty(), "{} rows failed:\n{}", failures.len(), failures.join("\n"));
    for row in QUEUE_TRANSITIONS {
        if let Some(from) = row.from {
            assert!(covered.contains(&(from, row.to)), "no case exercises {from:?} → {:?}", row.to);
        }
    }
    assert_eq!(pending().queue, QueueState::Ready, "submitted due: ready");
    assert_eq!(delayed_submission().queue, QueueState::Delayed, "submitted for later: delayed");
}

/// From a job in each queue state, no event of the universe, at any of several times,
/// reaches a forbidden queue state.
#[test]
fn no_event_reaches_a_forbidden_queue_state() {
    type Given = (&'static str, fn() -> Job);
    let givens: [Given; 8] = [
        ("ready", pending),
        ("delayed", running_retrying),
        ("delayed submission", delayed_submission),
        ("blocked", blocked),
        ("idle: claimed", running_claimed),
        ("idle: paused", paused_started),
        ("idle: pausing", pausing),
        ("idle: final", succeeded),
    ];
    for (name, given) in givens {
        let job = given();
        for now in [t0(), at(1), at(6), at(61), at(5_000)] {
            for event in universe(&job) {
                let Ok(t) = transition(&job, &event, now) else { continue };
                for f in QUEUE_FORBIDDEN {
                    assert!(
                        !(job.queue == f.from && t.job.queue == f.to),
                        "{name}: {} took {:?} → {:?} ({})",
                        event.name(),
                        f.from,
                        f.to,
                        f.why
                    );
                }
            }
        }
    }
}
