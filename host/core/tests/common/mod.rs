//! Builders shared by the core's tests: jobs in every state, reached through the
//! transition function itself (never by writing fields), so every fixture is a state
//! the machine can really be in.

#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use spindle_core::job::{JobEvent, KindRules, StepReport, Submission};
use spindle_core::policy::priority::Priority;
use spindle_core::step::Partial;
use spindle_core::workflow::{ChildOrder, Join, Leftover};
use spindle_core::{Actor, Evidence, Fence, Job, JobId, ReconcilePolicy, SafeFailure, Timestamp, transition};
use uuid::Uuid;

pub const TTL: Duration = Duration::from_secs(30);

/// A fixed origin for simulated time.
pub fn t0() -> Timestamp {
    Timestamp::from_millis(1_700_000_000_000)
}

/// `t0` plus `secs` seconds.
pub fn at(secs: u64) -> Timestamp {
    t0().plus(Duration::from_secs(secs))
}

pub fn rules() -> KindRules {
    KindRules { cancellable: true, max_attempts: 3, failure_effect: true, notify_on_success: true, lean: false }
}

pub fn actor() -> Actor {
    Actor::new("ops@example")
}

/// A pending job of three steps `a` (1), `b` (1), `c` (2).
pub fn pending() -> Job {
    pending_with(rules())
}

pub fn pending_with(rules: KindRules) -> Job {
    let submission = Submission {
        id: JobId(Uuid::from_u128(1)),
        rules,
        steps: vec![("a".into(), 1), ("b".into(), 1), ("c".into(), 2)],
        run_at: t0(),
    };
    Job::submit(submission, t0()).0
}

/// The effect that releases the lease keys of `j`'s claim; `verify` when its holder
/// reported.
pub fn released(j: &Job, verify: bool) -> spindle_core::Effect {
    let fence = j.claim.as_ref().map(|c| c.fence).unwrap_or_default();
    spindle_core::Effect::ReleaseLeaseKeys { fence, verify }
}

/// Applies `event` at `now`, panicking on refusal.
pub fn apply(job: &Job, event: JobEvent, now: Timestamp) -> Job {
    match transition(job, &event, now) {
        Ok(t) => t.job,
        Err(e) => panic!("fixture event {} refused: {e}", event.name()),
    }
}

pub fn claim_ev() -> JobEvent {
    JobEvent::Claim { owner: "host-1".into(), ttl: TTL, record: spindle_core::upgrade::ClaimRecord::JobAlone }
}

pub fn report(fence: Fence, report: StepReport) -> JobEvent {
    JobEvent::Report { fence, report }
}

pub fn complete() -> StepReport {
    StepReport::Complete { output: b"{}".to_vec() }
}

pub fn retryable() -> StepReport {
    StepReport::Retryable {
        failure: SafeFailure::transient("upstream-unavailable", "corr-1"),
        backoff: Duration::from_secs(5),
    }
}

pub fn refused() -> StepReport {
    StepReport::Refused { failure: SafeFailure::permanent("card-declined", "the card was declined") }
}

pub fn more() -> StepReport {
    StepReport::More { cursor: "c1".into(), partial: Partial { done: 1, total: Some(2) } }
}

/// Running, with step `a`'s first attempt claimed (fence 1).
pub fn running_claimed() -> Job {
    apply(&pending(), claim_ev(), t0())
}

/// Running, between steps: `a` completed, nothing claimed, `b` due.
pub fn running_idle() -> Job {
    let j = running_claimed();
    let fence = j.fence;
    apply(&j, report(fence, complete()), at(1))
}

/// Running with step `a` retrying (backoff until at(6)).
pub fn running_retrying() -> Job {
    let j = running_claimed();
    let fence = j.fence;
    apply(&j, report(fence, retryable()), at(1))
}

/// Running, pause requested while `a` is in flight.
pub fn pausing() -> Job {
    apply(&running_claimed(), JobEvent::Pause { actor: actor() }, at(1))
}

/// Running, cancel requested while `a` is in flight.
pub fn cancelling() -> Job {
    apply(&running_claimed(), JobEvent::Cancel { actor: actor(), reason: "customer asked".into() }, at(1))
}

/// Running, restart requested while `a` is in flight.
pub fn restart_pending() -> Job {
    apply(&running_claimed(), JobEvent::RequestRestart { actor: actor() }, at(1))
}

pub fn paused_started() -> Job {
    apply(&running_idle(), JobEvent::Pause { actor: actor() }, at(2))
}

pub fn paused_unstarted() -> Job {
    apply(&pending(), JobEvent::Pause { actor: actor() }, at(1))
}

/// A child order of kind `thumbnail` (id `100 + i`).
pub fn child(i: u128) -> ChildOrder {
    ChildOrder {
        id: JobId(Uuid::from_u128(100 + i)),
        kind: "thumbnail".into(),
        kind_version: 1,
        rules: rules(),
        steps: vec![("resize".into(), 1)],
        payload: format!("{{\"i\":{i}}}").into_bytes(),
        idempotency_key: None,
        priority: Priority::Normal,
        lease_keys: Vec::new(),
    }
}

/// `n` children awaited with `join`; leftovers cancelled.
pub fn await_children(n: u128, join: Join) -> StepReport {
    StepReport::AwaitChildren {
        children: (0..n).map(child).collect(),
        join,
        leftover: Leftover::Cancel,
        cursor: Some("fanned".into()),
    }
}

/// A wait for the `shipped` signal, timing out after a minute.
pub fn await_shipped() -> StepReport {
    StepReport::AwaitSignal { name: "shipped".into(), timeout: Duration::from_secs(60), cursor: None }
}

/// Waiting: step `a` fanned out 3 children (join all), at(1); none final yet.
pub fn waiting_children() -> Job {
    let j = running_claimed();
    let fence = j.fence;
    apply(&j, report(fence, await_children(3, Join::All)), at(1))
}

/// Waiting: step `a` waits for `shipped` from at(1), timing out at at(61).
pub fn waiting_signal() -> Job {
    let j = running_claimed();
    let fence = j.fence;
    apply(&j, report(fence, await_shipped()), at(1))
}

/// Paused while step `a` waits for its children.
pub fn paused_waiting() -> Job {
    apply(&waiting_children(), JobEvent::Pause { actor: actor() }, at(2))
}

/// Running again: the children's join was met, step `a` not yet claimed.
pub fn woken() -> Job {
    apply(&waiting_children(), JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 3 }, at(3))
}

/// Runs every remaining step to completion.
pub fn run_to_end(mut job: Job, mut now: Timestamp) -> Job {
    while !job.state.is_final() {
        now = now.plus(Duration::from_secs(1));
        job = apply(&job, claim_ev(), now);
        let fence = job.fence;
        job = apply(&job, report(fence, complete()), now);
    }
    job
}

pub fn succeeded() -> Job {
    run_to_end(pending(), t0())
}

pub fn failed() -> Job {
    let j = running_claimed();
    let fence = j.fence;
    apply(&j, report(fence, refused()), at(1))
}

pub fn cancelled() -> Job {
    apply(&pending(), JobEvent::Cancel { actor: actor(), reason: "not needed".into() }, at(1))
}

pub fn policy() -> ReconcilePolicy {
    ReconcilePolicy::default()
}

/// A reconcile event with the default policy.
pub fn probe(evidence: Evidence) -> JobEvent {
    JobEvent::Reconcile { evidence, policy: policy() }
}

/// Long enough after anything above for a probe to pass the silence threshold.
pub fn silent() -> Timestamp {
    at(3600)
}

/// Every kind of event, with the job's current and a stale fence: the universe the
/// forbidden-transition tests and the property tests draw from.
pub fn universe(job: &Job) -> Vec<JobEvent> {
    let fences = [job.fence, Fence(job.fence.0.saturating_sub(1)), job.fence.next()];
    let mut events = vec![
        claim_ev(),
        JobEvent::Rescue { backoff: Duration::from_secs(1) },
        JobEvent::Pause { actor: actor() },
        JobEvent::Resume { actor: actor() },
        JobEvent::Cancel { actor: actor(), reason: "stop".into() },
        JobEvent::Cancel { actor: actor(), reason: "  ".into() },
        JobEvent::RequestRestart { actor: actor() },
        JobEvent::Retry { successor: JobId(Uuid::from_u128(2)), onto: None },
        JobEvent::Due,
        JobEvent::KeyBusy { key: "account:1".into(), held_until: job.run_at.plus(Duration::from_secs(5)) },
        JobEvent::AtCapacity { gate: "@running/acme".into(), recheck_at: job.run_at.plus(Duration::from_secs(30)) },
        JobEvent::KeyReleased { key: "@running/acme".into() },
        JobEvent::KeyReleased { key: "account:1".into() },
        JobEvent::KeyReleased { key: "account:2".into() },
        signal("shipped"),
        signal("other"),
        JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 1 },
        JobEvent::ChildrenSettled { slot: "1/0/1".into(), settled: 3 },
        JobEvent::ChildrenSettled { slot: "9/9/9".into(), settled: 3 },
    ];
    for evidence in [Evidence::Alive, Evidence::Missing, Evidence::Failed, Evidence::Succeeded] {
        events.push(probe(evidence));
    }
    for fence in fences {
        events.push(JobEvent::Heartbeat { fence, ttl: TTL, progress: Some(Partial { done: 1, total: Some(4) }) });
        for r in [
            complete(),
            StepReport::Skip { reason: "n/a".into() },
            more(),
            StepReport::Snooze { delay: Duration::from_secs(60) },
            retryable(),
            refused(),
            StepReport::Release,
            await_children(2, Join::Any),
            await_children(0, Join::All),
            await_shipped(),
        ] {
            events.push(report(fence, r));
        }
    }
    events
}

/// Signal `name` with a small body and no key.
pub fn signal(name: &str) -> JobEvent {
    JobEvent::Signal { name: name.into(), body: br#"{"ok":true}"#.to_vec(), key: None }
}

/// The effect that stores [`signal`]`(name)` with its write.
pub fn stored(name: &str) -> spindle_core::Effect {
    spindle_core::Effect::StoreSignal { name: name.into(), body: br#"{"ok":true}"#.to_vec(), key: None }
}
