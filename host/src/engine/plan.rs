//! From a core transition to a store write: the effects the core answered as data
//! become lease operations, outbox rows, a spawned retry job, and hooks to run before
//! the commit.

use spindle_core::job::{Effect, EffectOrder, Transition};
use spindle_core::{Job, Refusal, Timestamp};

use crate::store::{JobRecord, JobWrite, LeaseOp, OutboxEffect};

/// A write and what must happen around it.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The version-checked write.
    pub write: JobWrite,
    /// Run the failure effect before committing the write.
    pub failure_effect_first: bool,
    /// The job becomes dispatchable now: wake a dispatcher after the commit.
    pub wake: bool,
}

/// Who makes the change: it decides how leases are treated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Actor {
    /// The claim's holder reporting or heartbeating: its lease keys must still be held.
    Holder,
    /// A dispatcher claiming the job.
    Claimer {
        /// The claiming host.
        owner: String,
    },
    /// The reconciler probing the job.
    Reconciler,
    /// The rescuer taking back a lapsed claim.
    Rescuer,
    /// Anyone else (an API call, the rescuer).
    Other,
}

/// Plans the write of `transition`, derived from `before` at `now`.
pub(crate) fn plan(before: &JobRecord, transition: Transition, actor: &Actor, now: Timestamp) -> Result<Plan, Refusal> {
    let Transition { job, steps_changed, previous_pass, history, effects } = transition;
    let mut leases = LeaseOp::None;
    let mut outbox = Vec::new();
    let mut spawn = None;
    let mut failure_effect_first = false;
    let mut wake = false;
    let released_fence = before.job.claim.as_ref().map(|c| fence_i64(c.fence));
    for effect in &effects {
        match effect {
            Effect::Dispatch { at } => wake |= *at <= now,
            Effect::ReleaseLeases => {
                if let Some(fence) = released_fence {
                    leases = LeaseOp::Release { fence, verify: *actor == Actor::Holder };
                }
            }
            Effect::FailureEffect { order: EffectOrder::BeforeSettlement } => failure_effect_first = true,
            Effect::FailureEffect { order: EffectOrder::AfterSettlement } => outbox.push(OutboxEffect::FailureEffect),
            Effect::NotifySuccess => outbox.push(OutboxEffect::NotifySuccess),
            Effect::SpawnRetry { successor } => {
                let (retry, retry_history) = Job::successor_of(&job, *successor, now)?;
                spawn = Some(before.retry_job(retry, retry_history));
                wake = true;
            }
        }
    }
    match (actor, &job.claim) {
        (Actor::Claimer { owner }, Some(claim)) if before.job.claim.is_none() => {
            leases =
                LeaseOp::Acquire { fence: fence_i64(claim.fence), owner: owner.clone(), expires_at: claim.expires_at };
        }
        (Actor::Holder, Some(claim)) if leases == LeaseOp::None => {
            leases = LeaseOp::Renew { fence: fence_i64(claim.fence), expires_at: claim.expires_at };
        }
        _ => {}
    }
    let previous_pass = previous_pass.map(|steps| (before.job.pass, steps));
    let preserve_queue = *actor == Actor::Reconciler && !job.state.is_final();
    // Everything but the job as read (which the transition replaces) carries over.
    let record = JobRecord {
        job,
        version: before.version,
        seq: before.seq,
        tenant: before.tenant.clone(),
        kind: before.kind.clone(),
        kind_version: before.kind_version,
        priority: before.priority,
        payload: before.payload.clone(),
        idempotency_key: before.idempotency_key.clone(),
        lease_keys: before.lease_keys.clone(),
        queued: before.queued,
    };
    Ok(Plan {
        write: JobWrite {
            record,
            expected_version: before.version,
            steps_changed,
            previous_pass,
            history,
            leases,
            outbox,
            spawn,
            preserve_queue,
            at: now,
        },
        failure_effect_first,
        wake,
    })
}

/// Fences are u64 in the core and BIGINT in the store; they never come near 2^63.
pub(crate) fn fence_i64(fence: spindle_core::Fence) -> i64 {
    i64::try_from(fence.0).unwrap_or(i64::MAX)
}
