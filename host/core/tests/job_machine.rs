//! The job machine, table-driven: every allowed transition of seeds 001 and 003 and every
//! forbidden one, each row citing its seed and asserting the exact state, history and
//! effects (or the exact refusal).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use spindle_core::job::{
    EffectOrder, HeartbeatReply, JOB_FORBIDDEN, JOB_TRANSITIONS, JobEvent, KindRules, RetryOnto, StepReport,
};
use spindle_core::workflow::Join;
use spindle_core::{Effect, Evidence, Fence, Job, JobId, JobState, Refusal, StepState, transition};
use uuid::Uuid;

enum Expect {
    /// The event applies: resulting state, history event names in order, effects in order.
    Applies { state: JobState, history: &'static [&'static str], effects: fn(&Job) -> Vec<Effect> },
    /// The event is refused with exactly this reason, and nothing changes.
    Refused(fn(&Job) -> Refusal),
}

struct Case {
    /// Seed line the row comes from.
    seed: &'static str,
    given: fn() -> Job,
    event: fn(&Job) -> JobEvent,
    now: fn() -> spindle_core::Timestamp,
    expect: Expect,
}

fn none(_: &Job) -> Vec<Effect> {
    Vec::new()
}

/// Pending, after `n` trailing probe misses.
fn pending_missed(n: u32) -> Job {
    let mut j = pending();
    for i in 0..n {
        j = apply(&j, probe(Evidence::Missing), silent().plus(Duration::from_secs(u64::from(i) * 300)));
    }
    j
}

fn running_missed(n: u32) -> Job {
    let mut j = running_idle();
    for i in 0..n {
        j = apply(&j, probe(Evidence::Missing), silent().plus(Duration::from_secs(u64::from(i) * 300)));
    }
    j
}

fn third_probe() -> spindle_core::Timestamp {
    silent().plus(Duration::from_secs(600))
}

/// Step `a` on its last allowed attempt (max 3).
fn last_attempt() -> Job {
    let mut j = running_claimed();
    for i in 0..2u64 {
        let fence = j.fence;
        j = apply(&j, report(fence, retryable()), at(10 + i * 10));
        j = apply(&j, claim_ev(), at(20 + i * 10));
    }
    j
}

/// Running with the last step `c` claimed.
fn last_step_claimed() -> Job {
    let mut j = running_idle();
    j = apply(&j, claim_ev(), at(2));
    let fence = j.fence;
    j = apply(&j, report(fence, complete()), at(3));
    apply(&j, claim_ev(), at(4))
}

fn pausing_last_step() -> Job {
    apply(&last_step_claimed(), JobEvent::Pause { actor: actor() }, at(5))
}

fn restart_while_pausing() -> Job {
    apply(&pausing(), JobEvent::RequestRestart { actor: actor() }, at(2))
}

fn stale_claimed() -> Job {
    // Claimed at t0 with a 30 s lease; never renewed.
    running_claimed()
}

fn cases() -> Vec<Case> {
    use JobState::*;
    vec![
        // ---- issue 14: waits for children and signals ----------------------------------
        Case {
            seed: "issue 14 running→waiting: await-children creates the children with the outcome",
            given: running_claimed,
            event: |j| report(j.fence, await_children(3, Join::All)),
            now: || at(1),
            expect: Expect::Applies {
                state: Waiting,
                history: &["awaiting_children"],
                effects: |j| {
                    vec![
                        released(j, true),
                        Effect::SpawnChildren { slot: "1/0/1".into(), children: (0..3).map(child).collect() },
                    ]
                },
            },
        },
        Case {
            seed: "issue 14 running→waiting: await-signal parks until the signal or the timeout",
            given: running_claimed,
            event: |j| report(j.fence, await_shipped()),
            now: || at(1),
            expect: Expect::Applies {
                state: Waiting,
                history: &["awaiting_signal"],
                effects: |j| vec![released(j, true)],
            },
        },
        Case {
            seed: "issue 14 a signal sent before the step waits wakes it at once",
            given: || apply(&running_claimed(), signal("shipped"), at(1)),
            event: |j| report(j.fence, await_shipped()),
            now: || at(2),
            expect: Expect::Applies {
                state: Running,
                history: &["awaiting_signal", "wait_over"],
                effects: |j| vec![released(j, true), Effect::Dispatch { at: at(2) }],
            },
        },
        Case {
            seed: "issue 14 waiting→running: the join is met; the step is dispatched",
            given: waiting_children,
            event: |_| JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 3 },
            now: || at(3),
            expect: Expect::Applies {
                state: Running,
                history: &["wait_over"],
                effects: |_| vec![Effect::Dispatch { at: at(3) }],
            },
        },
        Case {
            seed: "issue 14 a count short of the join changes the count only",
            given: waiting_children,
            event: |_| JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 2 },
            now: || at(3),
            expect: Expect::Applies { state: Waiting, history: &[], effects: none },
        },
        Case {
            seed: "issue 14 an old count changes nothing",
            given: || apply(&waiting_children(), JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 2 }, at(2)),
            event: |_| JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 1 },
            now: || at(3),
            expect: Expect::Refused(|j| Refusal::NotWaiting { queue: j.queue }),
        },
        Case {
            seed: "issue 14 await-any wakes on the first final child and cancels the others",
            given: || {
                let j = running_claimed();
                apply(&j, report(j.fence, await_children(3, Join::Any)), at(1))
            },
            event: |_| JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 1 },
            now: || at(3),
            expect: Expect::Applies {
                state: Running,
                history: &["wait_over"],
                effects: |j| {
                    vec![
                        Effect::CancelChildren {
                            slot: Some("1/0/1".into()),
                            reason: format!("parent {}'s join was met", j.id),
                        },
                        Effect::Dispatch { at: at(3) },
                    ]
                },
            },
        },
        Case {
            seed: "issue 14 waiting→running: a signal of the awaited name",
            given: waiting_signal,
            event: |_| signal("shipped"),
            now: || at(5),
            expect: Expect::Applies {
                state: Running,
                history: &["signal_received", "wait_over"],
                effects: |_| vec![stored("shipped"), Effect::Dispatch { at: at(5) }],
            },
        },
        Case {
            seed: "issue 14 a signal of another name is kept, the wait goes on",
            given: waiting_signal,
            event: |_| signal("other"),
            now: || at(5),
            expect: Expect::Applies {
                state: Waiting,
                history: &["signal_received"],
                effects: |_| vec![stored("other")],
            },
        },
        Case {
            seed: "issue 37 a job that ends with signals pending discards them, saying so",
            given: || apply(&waiting_signal(), signal("other"), at(5)),
            event: |_| JobEvent::Cancel { actor: actor(), reason: "stop".into() },
            now: || at(6),
            expect: Expect::Applies {
                state: Cancelled,
                history: &["cancel_requested", "step_failed", "cancelled", "signals_discarded"],
                effects: none,
            },
        },
        Case {
            seed: "issue 14 waiting→running: the signal's timeout passes",
            given: waiting_signal,
            event: |_| JobEvent::Due,
            now: || at(61),
            expect: Expect::Applies {
                state: Running,
                history: &["wait_over"],
                effects: |_| vec![Effect::Dispatch { at: at(61) }],
            },
        },
        Case {
            seed: "issue 14 a wait is not timed out early",
            given: waiting_signal,
            event: |_| JobEvent::Due,
            now: || at(30),
            expect: Expect::Refused(|_| Refusal::NotDue { run_at: at(61) }),
        },
        Case {
            seed: "issue 14 a waiting job is not claimed",
            given: waiting_children,
            event: |_| claim_ev(),
            now: || at(2),
            expect: Expect::Refused(|_| Refusal::Waiting),
        },
        Case {
            seed: "issue 14 silence while waiting is not a lost execution",
            given: waiting_children,
            event: |_| probe(Evidence::Missing),
            now: silent,
            expect: Expect::Refused(|_| Refusal::Waiting),
        },
        Case {
            seed: "issue 14 waiting→paused: a pause while waiting",
            given: waiting_children,
            event: |_| JobEvent::Pause { actor: actor() },
            now: || at(2),
            expect: Expect::Applies { state: Paused, history: &["pause_requested", "paused"], effects: none },
        },
        Case {
            seed: "issue 14 paused→waiting: resumed, its children not in yet",
            given: paused_waiting,
            event: |_| JobEvent::Resume { actor: actor() },
            now: || at(3),
            expect: Expect::Applies { state: Waiting, history: &["resumed"], effects: none },
        },
        Case {
            seed: "issue 14 paused→running: resumed after its children settled while paused",
            given: || apply(&paused_waiting(), JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 3 }, at(3)),
            event: |_| JobEvent::Resume { actor: actor() },
            now: || at(4),
            expect: Expect::Applies {
                state: Running,
                history: &["resumed"],
                effects: |_| vec![Effect::Dispatch { at: at(4) }],
            },
        },
        Case {
            seed: "issue 14 waiting→cancelled: the open children are cancelled with the parent",
            given: waiting_children,
            event: |_| JobEvent::Cancel { actor: actor(), reason: "order withdrawn".into() },
            now: || at(2),
            expect: Expect::Applies {
                state: Cancelled,
                history: &["cancel_requested", "step_failed", "cancelled"],
                effects: |j| vec![Effect::CancelChildren { slot: None, reason: format!("parent {} cancelled", j.id) }],
            },
        },
        Case {
            seed: "issue 14 the woken step is called again in the same attempt",
            given: woken,
            event: |_| claim_ev(),
            now: || at(4),
            expect: Expect::Applies {
                state: Running,
                history: &[],
                effects: |_| vec![Effect::AcquireLeaseKeys { fence: Fence(2), expires_at: at(4).plus(TTL) }],
            },
        },
        Case {
            seed: "issue 14 a signal to a finished job is refused",
            given: succeeded,
            event: |_| signal("shipped"),
            now: || at(90),
            expect: Expect::Refused(|j| Refusal::Finished { state: j.state }),
        },
        // ---- seed 001: allowed transitions ------------------------------------------
        Case {
            seed: "001 pending→running: the task handler records the first step report",
            given: pending,
            event: |_| claim_ev(),
            now: t0,
            expect: Expect::Applies {
                state: Running,
                history: &["step_started"],
                effects: |_| vec![Effect::AcquireLeaseKeys { fence: Fence(1), expires_at: t0().plus(TTL) }],
            },
        },
        Case {
            seed: "001 running→succeeded: the settling task finishes; progress 100; a notifying kind is notified",
            given: last_step_claimed,
            event: |j| report(j.fence, complete()),
            now: || at(5),
            expect: Expect::Applies {
                state: Succeeded,
                history: &["step_completed", "succeeded"],
                effects: |j| vec![released(j, true), Effect::NotifySuccess],
            },
        },
        Case {
            seed: "001 running→failed: a permanent refusal; the effect applies before failed settlement",
            given: running_claimed,
            event: |j| report(j.fence, refused()),
            now: || at(1),
            expect: Expect::Applies {
                state: Failed,
                history: &["step_failed", "failed"],
                effects: |j| vec![released(j, true), Effect::FailureEffect { order: EffectOrder::BeforeSettlement }],
            },
        },
        Case {
            seed: "001 running→failed: an exhausted retry budget reaches failure handling",
            given: last_attempt,
            event: |j| report(j.fence, retryable()),
            now: || at(40),
            expect: Expect::Applies {
                state: Failed,
                history: &["step_failed", "failed"],
                effects: |j| vec![released(j, true), Effect::FailureEffect { order: EffectOrder::BeforeSettlement }],
            },
        },
        Case {
            seed: "001 running→failed: reconciliation discovers repeatedly missing execution (third miss)",
            given: || running_missed(2),
            event: |_| probe(Evidence::Missing),
            now: third_probe,
            expect: Expect::Applies {
                state: Failed,
                history: &["reconciled", "failed"],
                effects: |_| vec![Effect::FailureEffect { order: EffectOrder::BeforeSettlement }],
            },
        },
        Case {
            seed: "001 running→failed: reconciliation discovers terminal execution; retrying steps fail",
            given: running_retrying,
            event: |_| probe(Evidence::Failed),
            now: silent,
            expect: Expect::Applies {
                state: Failed,
                history: &["reconciled", "step_failed", "failed"],
                effects: |_| vec![Effect::FailureEffect { order: EffectOrder::BeforeSettlement }],
            },
        },
        Case {
            seed: "001 running→failed: reconciliation corrects success with in-flight steps; effect after settlement",
            given: running_claimed,
            event: |_| probe(Evidence::Succeeded),
            now: silent,
            expect: Expect::Applies {
                state: Failed,
                history: &["reconciled", "step_failed", "failed"],
                effects: |j| vec![released(j, false), Effect::FailureEffect { order: EffectOrder::AfterSettlement }],
            },
        },
        Case {
            seed: "001 running→succeeded: reconciliation observes success without running or retrying steps",
            given: running_idle,
            event: |_| probe(Evidence::Succeeded),
            now: silent,
            expect: Expect::Applies {
                state: Succeeded,
                history: &["reconciled", "succeeded"],
                effects: |_| vec![Effect::NotifySuccess],
            },
        },
        Case {
            seed: "001 pending→failed: no execution handle after three trailing probe misses",
            given: || pending_missed(2),
            event: |_| probe(Evidence::Missing),
            now: third_probe,
            expect: Expect::Applies {
                state: Failed,
                history: &["reconciled", "failed"],
                effects: |_| vec![Effect::FailureEffect { order: EffectOrder::BeforeSettlement }],
            },
        },
        Case {
            seed: "001 pending→cancelled: request and cancelled outcome recorded together",
            given: pending,
            event: |_| JobEvent::Cancel { actor: actor(), reason: "customer asked".into() },
            now: || at(1),
            expect: Expect::Applies { state: Cancelled, history: &["cancel_requested", "cancelled"], effects: none },
        },
        Case {
            seed: "001 running→cancelled: the observing task confirms; in-flight steps fail as stopped; no failure effect",
            given: cancelling,
            event: |j| report(j.fence, retryable()),
            now: || at(2),
            expect: Expect::Applies {
                state: Cancelled,
                history: &["step_retrying", "step_failed", "cancelled"],
                effects: |j| vec![released(j, true)],
            },
        },
        Case {
            seed: "001 running→cancelled: the reconciler confirms a recorded cancel whose execution is gone",
            given: || {
                let mut j = cancelling();
                for i in 0..2u64 {
                    j = apply(&j, probe(Evidence::Missing), silent().plus(Duration::from_secs(i * 300)));
                }
                j
            },
            event: |_| probe(Evidence::Missing),
            now: third_probe,
            expect: Expect::Applies {
                state: Cancelled,
                history: &["reconciled", "step_failed", "cancelled"],
                effects: |j| vec![released(j, false)],
            },
        },
        Case {
            seed: "001 running→cancelled: a rescued claim of a cancelling job confirms the cancel",
            given: cancelling,
            event: |_| JobEvent::Rescue { backoff: Duration::ZERO },
            now: || at(60),
            expect: Expect::Applies {
                state: Cancelled,
                history: &["rescued", "step_retrying", "step_failed", "cancelled"],
                effects: |j| vec![released(j, false)],
            },
        },
        // ---- seed 003: run control ----------------------------------------------------
        Case {
            seed: "003 pause: a job with nothing in flight pauses at once",
            given: pending,
            event: |_| JobEvent::Pause { actor: actor() },
            now: || at(1),
            expect: Expect::Applies { state: Paused, history: &["pause_requested", "paused"], effects: none },
        },
        Case {
            seed: "003 pause: a running job between steps pauses at once",
            given: running_idle,
            event: |_| JobEvent::Pause { actor: actor() },
            now: || at(2),
            expect: Expect::Applies { state: Paused, history: &["pause_requested", "paused"], effects: none },
        },
        Case {
            seed: "003 pause: with a step in flight the request is recorded (pausing)",
            given: running_claimed,
            event: |_| JobEvent::Pause { actor: actor() },
            now: || at(1),
            expect: Expect::Applies { state: Running, history: &["pause_requested"], effects: none },
        },
        Case {
            seed: "003 precedence: pausing + the batch returns more → paused, nothing dispatched",
            given: pausing,
            event: |j| report(j.fence, more()),
            now: || at(2),
            expect: Expect::Applies { state: Paused, history: &["paused"], effects: |j| vec![released(j, true)] },
        },
        Case {
            seed: "003 precedence: pausing + the batch snoozes → paused",
            given: pausing,
            event: |j| report(j.fence, StepReport::Snooze { delay: Duration::from_secs(60) }),
            now: || at(2),
            expect: Expect::Applies {
                state: Paused,
                history: &["snoozed", "paused"],
                effects: |j| vec![released(j, true)],
            },
        },
        Case {
            seed: "003 precedence: pausing + the batch is done → completed (nothing is left to pause)",
            given: pausing_last_step,
            event: |j| report(j.fence, complete()),
            now: || at(6),
            expect: Expect::Applies {
                state: Succeeded,
                history: &["step_completed", "succeeded"],
                effects: |j| vec![released(j, true), Effect::NotifySuccess],
            },
        },
        Case {
            seed: "003 precedence: running, no restart pending + more → next batch dispatched",
            given: running_claimed,
            event: |j| report(j.fence, more()),
            now: || at(1),
            expect: Expect::Applies {
                state: Running,
                history: &[],
                effects: |j| vec![released(j, true), Effect::Dispatch { at: at(1) }],
            },
        },
        Case {
            seed: "003 precedence: running, no restart pending + snooze → dispatched after the delay, no attempt used",
            given: running_claimed,
            event: |_| report(spindle_core::Fence(1), StepReport::Snooze { delay: Duration::from_secs(60) }),
            now: || at(1),
            expect: Expect::Applies {
                state: Running,
                history: &["snoozed"],
                effects: |j| vec![released(j, true), Effect::Dispatch { at: at(61) }],
            },
        },
        Case {
            seed: "003 precedence: running, restart pending + more → the pass restarts",
            given: restart_pending,
            event: |j| report(j.fence, more()),
            now: || at(2),
            expect: Expect::Applies {
                state: Running,
                history: &["step_failed", "pass_started"],
                effects: |j| vec![released(j, true), Effect::Dispatch { at: at(2) }],
            },
        },
        Case {
            seed: "003 precedence: running, restart pending + done → the pass restarts",
            given: || apply(&last_step_claimed(), JobEvent::RequestRestart { actor: actor() }, at(5)),
            event: |j| report(j.fence, complete()),
            now: || at(6),
            expect: Expect::Applies {
                state: Running,
                history: &["step_completed", "pass_started"],
                effects: |j| vec![released(j, true), Effect::Dispatch { at: at(6) }],
            },
        },
        Case {
            seed: "003 precedence: cancelling + more → cancelled",
            given: cancelling,
            event: |j| report(j.fence, more()),
            now: || at(2),
            expect: Expect::Applies {
                state: Cancelled,
                history: &["step_failed", "cancelled"],
                effects: |j| vec![released(j, true)],
            },
        },
        Case {
            seed: "003 precedence: cancelling + done → cancelled",
            given: cancelling,
            event: |j| report(j.fence, complete()),
            now: || at(2),
            expect: Expect::Applies {
                state: Cancelled,
                history: &["step_completed", "cancelled"],
                effects: |j| vec![released(j, true)],
            },
        },
        Case {
            seed: "003 a pending restart never overrides a pause: pausing + restart + more → paused",
            given: restart_while_pausing,
            event: |j| report(j.fence, more()),
            now: || at(3),
            expect: Expect::Applies { state: Paused, history: &["paused"], effects: |j| vec![released(j, true)] },
        },
        Case {
            seed: "003 a pending restart never overrides a cancel: cancelling + restart + done → cancelled",
            given: || apply(&cancelling(), JobEvent::RequestRestart { actor: actor() }, at(2)),
            event: |j| report(j.fence, complete()),
            now: || at(3),
            expect: Expect::Applies {
                state: Cancelled,
                history: &["step_completed", "cancelled"],
                effects: |j| vec![released(j, true)],
            },
        },
        Case {
            seed: "003 restart: a running job with nothing in flight starts a fresh pass at once",
            given: running_idle,
            event: |_| JobEvent::RequestRestart { actor: actor() },
            now: || at(2),
            expect: Expect::Applies {
                state: Running,
                history: &["restart_requested", "pass_started"],
                effects: |_| vec![Effect::Dispatch { at: at(2) }],
            },
        },
        Case {
            seed: "003 resume: a paused job that had started runs again and is dispatched",
            given: paused_started,
            event: |_| JobEvent::Resume { actor: actor() },
            now: || at(3),
            expect: Expect::Applies {
                state: Running,
                history: &["resumed"],
                effects: |_| vec![Effect::Dispatch { at: at(3) }],
            },
        },
        Case {
            seed: "003 resume: a paused job that never started is pending again",
            given: paused_unstarted,
            event: |_| JobEvent::Resume { actor: actor() },
            now: || at(2),
            expect: Expect::Applies {
                state: Pending,
                history: &["resumed"],
                effects: |_| vec![Effect::Dispatch { at: at(2) }],
            },
        },
        Case {
            seed: "003 resume while pausing withdraws the request; the step carries on",
            given: pausing,
            event: |_| JobEvent::Resume { actor: actor() },
            now: || at(2),
            expect: Expect::Applies { state: Running, history: &["resumed"], effects: none },
        },
        Case {
            seed: "003 cancel: a paused job is cancelled at once, without the failure effect",
            given: paused_started,
            event: |_| JobEvent::Cancel { actor: actor(), reason: "obsolete".into() },
            now: || at(3),
            expect: Expect::Applies { state: Cancelled, history: &["cancel_requested", "cancelled"], effects: none },
        },
        Case {
            seed: "003 cancel: with a step in flight the request is recorded (cancelling)",
            given: running_claimed,
            event: |_| JobEvent::Cancel { actor: actor(), reason: "obsolete".into() },
            now: || at(1),
            expect: Expect::Applies { state: Running, history: &["cancel_requested"], effects: none },
        },
        Case {
            seed: "003 rescue: a lapsed claim is taken back; the attempt counts and is retried",
            given: stale_claimed,
            event: |_| JobEvent::Rescue { backoff: Duration::from_secs(2) },
            now: || at(31),
            expect: Expect::Applies {
                state: Running,
                history: &["rescued", "step_retrying"],
                effects: |j| vec![released(j, false), Effect::Dispatch { at: at(33) }],
            },
        },
        Case {
            seed: "003 heartbeat: renews the claim, adds no history",
            given: running_claimed,
            event: |j| JobEvent::Heartbeat { fence: j.fence, ttl: TTL, progress: None },
            now: || at(10),
            expect: Expect::Applies {
                state: Running,
                history: &[],
                effects: |j| vec![Effect::RenewLeaseKeys { fence: j.fence, expires_at: at(10).plus(TTL) }],
            },
        },
        Case {
            seed: "001/002 retry: a failed job records its successor and spawns it; it stays failed",
            given: failed,
            event: |_| JobEvent::Retry { successor: JobId(Uuid::from_u128(2)), onto: None },
            now: || at(100),
            expect: Expect::Applies {
                state: Failed,
                history: &["retried_as"],
                effects: |_| vec![Effect::SpawnRetry { successor: JobId(Uuid::from_u128(2)), onto: None }],
            },
        },
        Case {
            seed: "001 reconciliation: a probe that finds the execution alive settles nothing",
            given: running_claimed,
            event: |_| probe(Evidence::Alive),
            now: silent,
            expect: Expect::Applies { state: Running, history: &[], effects: none },
        },
        Case {
            seed: "001 reconciliation: a miss short of three is recorded, the job stays pending",
            given: || pending_missed(1),
            event: |_| probe(Evidence::Missing),
            now: || silent().plus(Duration::from_secs(300)),
            expect: Expect::Applies { state: Pending, history: &["probe_missed"], effects: none },
        },
        // ---- seed 001: forbidden transitions --------------------------------------------
        Case {
            seed: "001 invalid succeeded→running: a final job cannot return to active execution",
            given: succeeded,
            event: |_| claim_ev(),
            now: || at(100),
            expect: Expect::Refused(|_| Refusal::Finished { state: JobState::Succeeded }),
        },
        Case {
            seed: "001 invalid succeeded→running: a late report leaves the record unchanged",
            given: succeeded,
            event: |_| report(Fence(99), retryable()),
            now: || at(100),
            expect: Expect::Refused(|_| Refusal::Finished { state: JobState::Succeeded }),
        },
        Case {
            seed: "001 invalid failed→succeeded: a late success is ignored and raises an operational alert",
            given: failed,
            event: |j| report(j.fence, complete()),
            now: || at(100),
            expect: Expect::Refused(|_| Refusal::LateSuccessAfterFailure),
        },
        Case {
            seed: "001 invalid failed→pending: resume never reopens a failed record",
            given: failed,
            event: |_| JobEvent::Resume { actor: actor() },
            now: || at(100),
            expect: Expect::Refused(|_| Refusal::Finished { state: JobState::Failed }),
        },
        Case {
            seed: "001 invalid cancelled→running: a cancelled job has a permanent outcome",
            given: cancelled,
            event: |_| claim_ev(),
            now: || at(100),
            expect: Expect::Refused(|_| Refusal::Finished { state: JobState::Cancelled }),
        },
        Case {
            seed: "001 invalid running→pending: resume of a running job is refused",
            given: running_idle,
            event: |_| JobEvent::Resume { actor: actor() },
            now: || at(2),
            expect: Expect::Refused(|_| Refusal::NotPaused),
        },
        // ---- guards ------------------------------------------------------------------------
        Case {
            seed: "001 pending→cancelled guard: the kind supports cancellation",
            given: || pending_with(KindRules { cancellable: false, ..rules() }),
            event: |_| JobEvent::Cancel { actor: actor(), reason: "stop".into() },
            now: || at(1),
            expect: Expect::Refused(|_| Refusal::NotCancellable),
        },
        Case {
            seed: "001 pending→cancelled guard: the reason is nonblank",
            given: pending,
            event: |_| JobEvent::Cancel { actor: actor(), reason: " \t".into() },
            now: || at(1),
            expect: Expect::Refused(|_| Refusal::BlankReason),
        },
        Case {
            seed: "001 reconciliation guard: the candidate passed the silence threshold (one µs short)",
            given: running_idle,
            event: |_| probe(Evidence::Missing),
            now: || at(1).plus(Duration::from_secs(15 * 60)).minus(Duration::from_micros(1)),
            expect: Expect::Refused(|_| Refusal::NotSilent {
                silent_for: Duration::from_secs(15 * 60) - Duration::from_micros(1),
            }),
        },
        Case {
            seed: "001 reconciliation guard: exactly at the silence threshold the probe counts",
            given: running_idle,
            event: |_| probe(Evidence::Missing),
            now: || at(1).plus(Duration::from_secs(15 * 60)),
            expect: Expect::Applies { state: Running, history: &["probe_missed"], effects: none },
        },
        Case {
            seed: "003 claim needs no claim held",
            given: running_claimed,
            event: |_| claim_ev(),
            now: || at(1),
            expect: Expect::Refused(|j| Refusal::Claimed { fence: j.fence }),
        },
        Case {
            seed: "003 claim_lost: a report under a stale fence is refused",
            given: running_claimed,
            event: |_| report(Fence(0), complete()),
            now: || at(1),
            expect: Expect::Refused(|j| Refusal::StaleFence { presented: Fence(0), current: j.fence }),
        },
        Case {
            seed: "003 claim: a paused job is not dispatched",
            given: paused_started,
            event: |_| claim_ev(),
            now: || at(3),
            expect: Expect::Refused(|_| Refusal::Paused),
        },
        Case {
            seed: "003 claim: a retrying job waits for its backoff",
            given: running_retrying,
            event: |_| claim_ev(),
            now: || at(5),
            expect: Expect::Refused(|_| Refusal::NotDue { run_at: at(6) }),
        },
        Case {
            seed: "003 already_pausing",
            given: pausing,
            event: |_| JobEvent::Pause { actor: actor() },
            now: || at(2),
            expect: Expect::Refused(|_| Refusal::AlreadyPausing),
        },
        Case {
            seed: "003 already_paused",
            given: paused_started,
            event: |_| JobEvent::Pause { actor: actor() },
            now: || at(3),
            expect: Expect::Refused(|_| Refusal::AlreadyPaused),
        },
        Case {
            seed: "003 already_cancelling",
            given: cancelling,
            event: |_| JobEvent::Cancel { actor: actor(), reason: "again".into() },
            now: || at(2),
            expect: Expect::Refused(|_| Refusal::AlreadyCancelling),
        },
        Case {
            seed: "003 cancelling: a pause does not apply to a job being cancelled",
            given: cancelling,
            event: |_| JobEvent::Pause { actor: actor() },
            now: || at(2),
            expect: Expect::Refused(|_| Refusal::Cancelling),
        },
        Case {
            seed: "003 not_paused",
            given: running_claimed,
            event: |_| JobEvent::Resume { actor: actor() },
            now: || at(2),
            expect: Expect::Refused(|_| Refusal::NotPaused),
        },
        Case {
            seed: "003 rescue is refused while the claim is live",
            given: running_claimed,
            event: |_| JobEvent::Rescue { backoff: Duration::ZERO },
            now: || at(29),
            expect: Expect::Refused(|_| Refusal::ClaimLive { expires_at: at(30) }),
        },
        Case {
            seed: "003 rescue needs a claim",
            given: running_idle,
            event: |_| JobEvent::Rescue { backoff: Duration::ZERO },
            now: || at(100),
            expect: Expect::Refused(|_| Refusal::NotClaimed),
        },
        Case {
            seed: "003 restart of a job that never started",
            given: pending,
            event: |_| JobEvent::RequestRestart { actor: actor() },
            now: || at(1),
            expect: Expect::Refused(|_| Refusal::NotStarted),
        },
        Case {
            seed: "001 retry creates a linked job only once",
            given: || apply(&failed(), JobEvent::Retry { successor: JobId(Uuid::from_u128(2)), onto: None }, at(50)),
            event: |_| JobEvent::Retry { successor: JobId(Uuid::from_u128(3)), onto: None },
            now: || at(100),
            expect: Expect::Refused(|_| Refusal::AlreadyRetried { successor: JobId(Uuid::from_u128(2)) }),
        },
        Case {
            seed: "001 retry: only failed or cancelled jobs",
            given: running_idle,
            event: |_| JobEvent::Retry { successor: JobId(Uuid::from_u128(2)), onto: None },
            now: || at(100),
            expect: Expect::Refused(|_| Refusal::NotRetryable { state: JobState::Running }),
        },
        Case {
            seed: "001 reconciliation leaves paused jobs alone",
            given: paused_started,
            event: |_| probe(Evidence::Missing),
            now: silent,
            expect: Expect::Refused(|_| Refusal::Paused),
        },
    ]
}

/// Signals left when a job ends are no longer pending: its history counts them.
#[test]
fn signals_left_at_the_end_are_discarded_and_counted() {
    let waiting = apply(&apply(&waiting_signal(), signal("other"), at(5)), signal("other"), at(5));
    assert_eq!(waiting.signals.get("other"), Some(&2));
    let t = transition(&waiting, &JobEvent::Cancel { actor: actor(), reason: "stop".into() }, at(6)).unwrap();
    assert!(t.job.signals.is_empty(), "nothing pending once final");
    let discarded = t.history.iter().find_map(|e| match e {
        spindle_core::HistoryEvent::SignalsDiscarded { signals } => Some(signals.clone()),
        _ => None,
    });
    assert_eq!(discarded, Some([("other".to_owned(), 2)].into_iter().collect()));
}

#[test]
fn every_row_of_the_table_holds() {
    let mut covered = HashSet::new();
    let mut failures = Vec::new();
    for case in cases() {
        let job = (case.given)();
        let event = (case.event)(&job);
        let result = transition(&job, &event, (case.now)());
        match (&case.expect, result) {
            (Expect::Applies { state, history, effects }, Ok(t)) => {
                let names: Vec<&str> = t.history.iter().map(|h| h.name()).collect();
                if t.job.state != *state || names != *history || t.effects != effects(&job) {
                    failures.push(format!(
                        "{}:\n  expected {state:?} {history:?} {:?}\n  got      {:?} {names:?} {:?}",
                        case.seed,
                        effects(&job),
                        t.job.state,
                        t.effects
                    ));
                }
                covered.insert((job.state, t.job.state));
            }
            (Expect::Refused(reason), Err(got)) => {
                if got != reason(&job) {
                    failures.push(format!("{}: expected refusal {:?}, got {got:?}", case.seed, reason(&job)));
                }
            }
            (Expect::Applies { .. }, Err(e)) => failures.push(format!("{}: refused unexpectedly: {e:?}", case.seed)),
            (Expect::Refused(reason), Ok(t)) => failures.push(format!(
                "{}: expected refusal {:?}, applied → {:?}",
                case.seed,
                reason(&job),
                t.job.state
            )),
        }
    }
    assert!(failures.is_empty(), "{} rows failed:\n{}", failures.len(), failures.join("\n"));
    for row in JOB_TRANSITIONS {
        if let Some(from) = row.from {
            assert!(covered.contains(&(from, row.to)), "no case exercises {from:?} → {:?} ({})", row.to, row.seed);
        }
    }
}

/// Seed 001 "invalid" and "final states never change", exhaustively: from a job in
/// each source state, no event of the universe — with the current fence, a stale one
/// or a future one — ever reaches the forbidden target.
#[test]
fn no_event_makes_a_forbidden_transition() {
    let fixtures: Vec<(&str, Job)> = vec![
        ("succeeded", succeeded()),
        ("failed", failed()),
        ("cancelled", cancelled()),
        ("running claimed", running_claimed()),
        ("running idle", running_idle()),
        ("running retrying", running_retrying()),
        ("pausing", pausing()),
        ("cancelling", cancelling()),
        ("waiting for children", waiting_children()),
        ("waiting for a signal", waiting_signal()),
        ("paused waiting", paused_waiting()),
        ("woken", woken()),
        ("pending", pending()),
    ];
    for rule in JOB_FORBIDDEN {
        for (name, job) in fixtures.iter().filter(|(_, j)| j.state == rule.from) {
            for event in universe(job) {
                for now in [at(1), at(31), silent()] {
                    if let Ok(t) = transition(job, &event, now) {
                        assert_ne!(
                            t.job.state, rule.to,
                            "{} broken from {name} by {event:?} ({})",
                            rule.seed, rule.why
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn final_states_never_change() {
    for job in [succeeded(), failed(), cancelled()] {
        for event in universe(&job) {
            if let Ok(t) = transition(&job, &event, silent()) {
                assert_eq!(t.job.state, job.state, "{event:?} changed a final job");
                assert_eq!(t.job.steps, job.steps, "{event:?} changed a final job's steps");
                assert_eq!(t.job.progress, job.progress);
            }
        }
    }
}

#[test]
fn an_identical_repeated_report_adds_nothing_and_a_different_one_is_refused() {
    // seed 002 concurrency: "Repeated identical reports add no event, while changed final
    // reports are refused."
    let job = running_claimed();
    let fence = job.fence;
    let first = transition(&job, &report(fence, complete()), at(1)).unwrap();
    let again = transition(&first.job, &report(fence, complete()), at(2)).unwrap();
    assert!(again.is_noop(&first.job), "identical repeat changed something: {again:?}");
    let different = transition(&first.job, &report(fence, refused()), at(2));
    assert_eq!(different.unwrap_err(), Refusal::ConflictingReport { fence });
}

#[test]
fn pending_to_failed_keeps_unstarted_steps_queued_and_explains_never_started() {
    // seed 001 pending→failed side effects.
    let job = apply(&pending_missed(2), probe(Evidence::Missing), third_probe());
    assert_eq!(job.state, JobState::Failed);
    assert!(job.steps.iter().all(|s| s.state == StepState::Queued), "seed 002: queued steps are never failed");
    assert_eq!(job.failure.as_ref().unwrap().code, "reconciler.never-started");
}

#[test]
fn a_probe_that_finds_life_resets_trailing_misses() {
    let job = apply(&pending_missed(2), probe(Evidence::Alive), third_probe());
    assert_eq!(job.probe_misses, 0);
    let job = apply(&job, probe(Evidence::Missing), third_probe().plus(Duration::from_secs(300)));
    assert_eq!(job.state, JobState::Pending, "misses must be trailing");
}

#[test]
fn a_retryable_failure_keeps_only_the_safe_account() {
    // seed 001 running→failed: "lets no detail of the transient error reach the job".
    let job = running_retrying();
    let attempt = &job.steps[0].attempts[0];
    match attempt.end.as_ref().unwrap() {
        spindle_core::step::AttemptEnd::Retryable { failure } => {
            assert_eq!(failure.code, "upstream-unavailable");
            assert!(failure.message.is_empty());
            assert_eq!(failure.correlation.as_deref(), Some("corr-1"));
        }
        other => panic!("unexpected attempt end {other:?}"),
    }
}

#[test]
fn cancellation_is_seen_by_the_heartbeat_of_the_step_in_flight() {
    let job = cancelling();
    assert_eq!(job.heartbeat_reply(job.fence), HeartbeatReply::StopCancelled);
    assert_eq!(running_claimed().heartbeat_reply(Fence(1)), HeartbeatReply::Proceed);
    assert_eq!(running_claimed().heartbeat_reply(Fence(0)), HeartbeatReply::StopLeaseLost);
}

#[test]
fn a_snooze_consumes_no_attempt_and_more_continues_the_same_attempt() {
    let job = running_claimed();
    let job = apply(&job, report(job.fence, StepReport::Snooze { delay: Duration::from_secs(5) }), at(1));
    let job = apply(&job, claim_ev(), at(6));
    let job = apply(&job, report(job.fence, more()), at(7));
    let job = apply(&job, claim_ev(), at(7));
    assert_eq!(job.steps[0].attempts.len(), 1);
    assert_eq!(job.steps[0].cursor.as_deref(), Some("c1"));
}

#[test]
fn a_retry_job_carries_completed_steps_and_bypasses_them() {
    // seed 002 queued→completed: "Pass the completed key to execution so orchestration
    // bypasses it."
    let job = running_idle(); // a completed
    let job = apply(&job, claim_ev(), at(2));
    let job = apply(&job, report(job.fence, refused()), at(3)); // b refused → failed
    let successor = JobId(Uuid::from_u128(7));
    let job = apply(&job, JobEvent::Retry { successor, onto: None }, at(4));
    let (retry, history) = Job::successor_of(&job, successor, None, at(5)).unwrap();
    assert_eq!(retry.state, JobState::Pending);
    assert_eq!(retry.predecessor, Some(job.id));
    assert_eq!(retry.steps[0].state, StepState::Completed);
    assert!(retry.steps[0].carried);
    assert_eq!(retry.steps[1].state, StepState::Queued);
    assert!(history.iter().any(|h| h.name() == "step_carried"));
    let claimed = apply(&retry, claim_ev(), at(5));
    assert_eq!(claimed.claim.as_ref().unwrap().step, 1, "the carried step is bypassed");
    // A restart of the retry job keeps the carried step completed.
    let idle = apply(&claimed, report(claimed.fence, more()), at(6));
    let restarted = apply(&idle, JobEvent::RequestRestart { actor: actor() }, at(7));
    assert_eq!(restarted.pass, 2);
    assert_eq!(restarted.steps[0].state, StepState::Completed);
}

#[test]
fn a_retry_on_another_version_has_its_steps_and_rules_and_carries_completed_steps_by_key() {
    let job = running_idle(); // a completed
    let job = apply(&job, claim_ev(), at(2));
    let job = apply(&job, report(job.fence, refused()), at(3)); // b refused → failed
    let successor = JobId(Uuid::from_u128(8));
    // The fix: `b` became `b2`, a step `a0` runs first, `c` stays; fewer attempts.
    let fixed = KindRules { max_attempts: 1, ..rules() };
    let onto = RetryOnto {
        version: 2,
        rules: fixed,
        steps: vec![("a0".into(), 1), ("a".into(), 1), ("b2".into(), 3), ("c".into(), 2)],
    };
    let retried = transition(&job, &JobEvent::Retry { successor, onto: Some(onto.clone()) }, at(4)).unwrap();
    assert_eq!(retried.effects, vec![Effect::SpawnRetry { successor, onto: Some(onto.clone()) }]);
    let (retry, history) = Job::successor_of(&retried.job, successor, Some(&onto), at(5)).unwrap();
    let keys: Vec<_> = retry.steps.iter().map(|s| (s.key.as_str(), s.weight, s.state)).collect();
    assert_eq!(
        keys,
        vec![
            ("a0", 1, StepState::Queued),
            ("a", 1, StepState::Completed),
            ("b2", 3, StepState::Queued),
            ("c", 2, StepState::Queued),
        ]
    );
    assert_eq!(retry.steps[1].output, job.steps[0].output, "the completed step's output is carried");
    assert_eq!(retry.rules, fixed);
    assert_eq!(history.iter().filter(|h| h.name() == "step_carried").count(), 1);
    // On its own version the retry is what it always was.
    let (own, _) = Job::successor_of(&retried.job, successor, None, at(5)).unwrap();
    assert_eq!(own.steps.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), vec!["a", "b", "c"]);
    assert_eq!(own.rules, rules());
}

#[test]
fn a_refusal_has_a_stable_code_and_only_a_late_success_alerts() {
    assert_eq!(Refusal::LateSuccessAfterFailure.code(), "late-success-after-failure");
    assert!(Refusal::LateSuccessAfterFailure.is_alert());
    assert!(!Refusal::Finished { state: JobState::Succeeded }.is_alert());
}

/// Every refusal has a distinct stable code, listed in `Refusal::CODES` (which the API
/// documents); a new variant must be given one.
#[test]
fn every_refusal_has_a_listed_code() {
    use spindle_core::QueueState;
    use spindle_core::step::{StepRefusal, StepState};
    use spindle_core::table::NotInTable;
    let not_in_table = NotInTable { machine: "job", from: "succeeded", to: "running" };
    let examples = vec![
        Refusal::Finished { state: JobState::Succeeded },
        Refusal::LateSuccessAfterFailure,
        Refusal::StaleFence { presented: Fence(1), current: Fence(2) },
        Refusal::ConflictingReport { fence: Fence(1) },
        Refusal::Claimed { fence: Fence(1) },
        Refusal::NotClaimed,
        Refusal::ClaimLive { expires_at: t0() },
        Refusal::NotDue { run_at: t0() },
        Refusal::Paused,
        Refusal::AlreadyPausing,
        Refusal::AlreadyPaused,
        Refusal::NotPaused,
        Refusal::Cancelling,
        Refusal::AlreadyCancelling,
        Refusal::NotCancellable,
        Refusal::BlankReason,
        Refusal::NotStarted,
        Refusal::NothingToRun,
        Refusal::NotSilent { silent_for: Duration::ZERO },
        Refusal::NotRetryable { state: JobState::Running },
        Refusal::AlreadyRetried { successor: JobId(Uuid::from_u128(9)) },
        Refusal::NotWaiting { queue: QueueState::Idle },
        Refusal::Waiting,
        Refusal::Step(StepRefusal::Invalid { step: "a".into(), from: StepState::Queued, event: "skip" }),
        Refusal::Step(StepRefusal::DifferentFinal { step: "a".into(), state: StepState::Completed }),
        Refusal::NotInTable(not_in_table),
    ];
    // The match is exhaustive: a variant added without an example here fails to compile.
    for refusal in &examples {
        match refusal {
            Refusal::Finished { .. }
            | Refusal::LateSuccessAfterFailure
            | Refusal::StaleFence { .. }
            | Refusal::ConflictingReport { .. }
            | Refusal::Claimed { .. }
            | Refusal::NotClaimed
            | Refusal::ClaimLive { .. }
            | Refusal::NotDue { .. }
            | Refusal::Paused
            | Refusal::AlreadyPausing
            | Refusal::AlreadyPaused
            | Refusal::NotPaused
            | Refusal::Cancelling
            | Refusal::AlreadyCancelling
            | Refusal::NotCancellable
            | Refusal::BlankReason
            | Refusal::NotStarted
            | Refusal::NothingToRun
            | Refusal::NotSilent { .. }
            | Refusal::NotRetryable { .. }
            | Refusal::AlreadyRetried { .. }
            | Refusal::NotWaiting { .. }
            | Refusal::Waiting
            | Refusal::Step(_)
            | Refusal::NotInTable(_) => {}
        }
    }
    let codes: Vec<&str> = examples.iter().map(Refusal::code).collect();
    assert_eq!(codes, Refusal::CODES, "Refusal::CODES lists every code once, in declaration order");
    assert_eq!(Refusal::Step(StepRefusal::NotInTable(not_in_table)).code(), "not-in-table");
}

/// Seed 003 keeps the cursor in the run's progress across a rescue or a release; only a
/// restart begins a fresh pass. A step that committed slices and then failed
/// transiently, or whose host died, resumes from its last committed cursor.
#[test]
fn a_retried_or_rescued_attempt_resumes_from_its_last_cursor() {
    let slice = |cursor: &str| StepReport::More {
        cursor: cursor.into(),
        partial: spindle_core::step::Partial { done: 59, total: Some(60) },
    };
    // Retried: 59 slices committed, then a transient failure.
    let j = running_claimed();
    let j = apply(&j, report(j.fence, slice("59")), at(1));
    let j = apply(&j, claim_ev(), at(2));
    assert_eq!(j.steps[0].cursor.as_deref(), Some("59"), "the same attempt continues from its cursor");
    let j = apply(&j, report(j.fence, retryable()), at(3));
    let j = apply(&j, claim_ev(), at(10));
    assert_eq!(j.steps[0].attempts_made(), 2, "a new attempt");
    assert_eq!(j.steps[0].cursor.as_deref(), Some("59"), "it resumes from the last committed cursor");

    // Rescued: the host died after committing 59 slices.
    let j = running_claimed();
    let j = apply(&j, report(j.fence, slice("59")), at(1));
    let j = apply(&j, claim_ev(), at(2));
    let j = apply(&j, JobEvent::Rescue { backoff: Duration::ZERO }, at(100));
    let j = apply(&j, claim_ev(), at(101));
    assert_eq!(j.steps[0].cursor.as_deref(), Some("59"), "a rescued step resumes from its cursor");

    // Restarted: a fresh pass begins from nothing.
    let j = running_claimed();
    let j = apply(&j, report(j.fence, slice("59")), at(1));
    let j = apply(&j, JobEvent::RequestRestart { actor: actor() }, at(2));
    let j = apply(&j, claim_ev(), at(3));
    assert_eq!(j.steps[0].cursor, None, "a restart begins a fresh pass");
}

/// `snooze(0)` in a loop was a hot loop writing a history row per turn: a snooze waits
/// at least the floor, and one attempt's snoozes make one history event.
#[test]
fn a_snooze_loop_waits_its_floor_and_keeps_history_bounded() {
    let mut j = running_claimed();
    let mut now = at(1);
    let mut events = 0;
    for _ in 0..1_000 {
        let t = transition(&j, &report(j.fence, StepReport::Snooze { delay: Duration::ZERO }), now).unwrap();
        events += t.history.len();
        j = t.job;
        assert!(j.run_at >= now.plus(spindle_core::policy::budget::SNOOZE_FLOOR), "snoozed less than the floor");
        now = j.run_at;
        j = apply(&j, claim_ev(), now);
    }
    assert!(events <= 1, "{events} history events for one attempt's snoozes");
}

/// An endless `more` was a hot loop: an attempt has a budget of slices, and a typed
/// failure ends the attempt past it (a retry, then the job fails).
#[test]
fn an_endless_checkpoint_loop_ends_the_attempt_with_a_typed_failure() {
    use spindle_core::policy::budget::MAX_SLICES_PER_ATTEMPT;
    let slice = |n: u64| StepReport::More {
        cursor: n.to_string(),
        partial: spindle_core::step::Partial { done: n, total: None },
    };
    let mut j = running_claimed();
    let mut now = at(1);
    for n in 0..=u64::from(MAX_SLICES_PER_ATTEMPT) {
        // Slow enough for the rate budget: only the count runs out.
        now = now.plus(Duration::from_millis(20));
        j = apply(&j, report(j.fence, slice(n)), now);
        if j.steps[0].state != StepState::Running {
            break;
        }
        j = apply(&j, claim_ev(), now);
    }
    assert_eq!(j.steps[0].state, StepState::Retrying, "the attempt ended");
    let failure = j.steps[0].attempts[0].end.clone();
    assert!(format!("{failure:?}").contains("checkpoint.budget-exceeded"), "{failure:?}");

    // As fast as the database answers: the rate budget ends it sooner.
    let mut j = running_claimed();
    for n in 0..10_000u64 {
        j = apply(&j, report(j.fence, slice(n)), at(1));
        if j.steps[0].state != StepState::Running {
            break;
        }
        j = apply(&j, claim_ev(), at(1));
    }
    let failure = j.steps[0].attempts[0].end.clone();
    assert!(format!("{failure:?}").contains("checkpoint.rate-exceeded"), "{failure:?}");
}
