//! From a core transition to a store write: the effects the core answered as data
//! become lease-key operations, outbox rows, a spawned retry job, and what must happen
//! around the commit (a failure effect first, a dispatcher woken after).

use spindle_core::job::{Effect, EffectOrder, Transition};
use spindle_core::{Fence, Job, Refusal, Timestamp};

use spindle_core::job::Submission;

use crate::store::NewJob;
use crate::store::{JobRecord, JobWrite, LeaseOp, NewSignal, OutboxEffect, Relay};

/// A write and what must happen around it.
#[derive(Debug)]
pub struct Plan {
    /// The version-checked write.
    pub write: JobWrite,
    /// Run the failure effect before committing the write.
    pub failure_effect_first: bool,
    /// The job becomes dispatchable now: wake a dispatcher after the commit.
    pub wake: bool,
    /// Workflow effects were queued: wake the relay after the commit.
    pub relay: bool,
}

/// Plans the write of `transition`, derived from `before` at `now`.
pub fn plan(before: &JobRecord, transition: Transition, now: Timestamp) -> Result<Plan, Refusal> {
    let Transition { job, steps_changed, previous_pass, history, effects } = transition;
    let mut leases = LeaseOp::None;
    let mut outbox = Vec::new();
    let mut spawn = None;
    let mut failure_effect_first = false;
    let mut wake = false;
    let mut children = Vec::new();
    let mut store_signal = None;
    let mut consume_signal = None;
    let mut relay = Vec::new();
    for effect in effects {
        match effect {
            Effect::Dispatch { at } => wake |= at <= now,
            Effect::AcquireLeaseKeys { fence, expires_at } => {
                let owner = job.claim.as_ref().map(|c| c.owner.clone()).unwrap_or_default();
                leases = LeaseOp::Acquire { fence: fence_i64(fence), owner, expires_at };
            }
            Effect::RenewLeaseKeys { fence, expires_at } => {
                leases = LeaseOp::Renew { fence: fence_i64(fence), expires_at };
            }
            Effect::ReleaseLeaseKeys { fence, verify } => {
                leases = LeaseOp::Release { fence: fence_i64(fence), verify };
            }
            Effect::FailureEffect { order: EffectOrder::BeforeSettlement } => failure_effect_first = true,
            Effect::FailureEffect { order: EffectOrder::AfterSettlement } => outbox.push(OutboxEffect::FailureEffect),
            Effect::NotifySuccess => outbox.push(OutboxEffect::NotifySuccess),
            Effect::SpawnRetry { successor, onto } => {
                let (retry, retry_history) = Job::successor_of(&job, successor, onto.as_ref(), now)?;
                let mut retry = before.retry_job(retry, retry_history);
                if let Some(onto) = onto {
                    retry.kind_version = onto.version;
                }
                spawn = Some(retry);
                wake = true;
            }
            Effect::SpawnChildren { slot, children: orders } => {
                for (index, order) in orders.into_iter().enumerate() {
                    let submission = Submission { id: order.id, rules: order.rules, steps: order.steps, run_at: now };
                    let index = u32::try_from(index).unwrap_or(u32::MAX);
                    let (child, history) = Job::child_of(submission, &job, &slot, index, now);
                    children.push(NewJob {
                        job: child,
                        tenant: before.tenant.clone(),
                        kind: order.kind,
                        kind_version: order.kind_version,
                        priority: order.priority,
                        payload: order.payload,
                        idempotency_key: order.idempotency_key,
                        lease_keys: order.lease_keys,
                        history,
                    });
                }
                wake = true;
            }
            Effect::CancelChildren { slot, reason } => {
                let detail = serde_json::json!({ "slot": slot, "reason": reason }).to_string();
                relay.push(Relay { job: job.id, effect: OutboxEffect::CancelChildren, detail: Some(detail) });
            }
            Effect::NotifyParent { parent } => {
                relay.push(Relay { job: parent, effect: OutboxEffect::ChildSettled, detail: None });
            }
            Effect::StoreSignal { name, body, key } => store_signal = Some(NewSignal { name, body, key }),
            Effect::ConsumeSignal { name } => consume_signal = Some(name),
        }
    }
    let previous_pass = previous_pass.map(|steps| (before.job.pass, steps));
    let frees_slot = before.job.claim.as_ref().is_some_and(|c| c.limited) && job.claim.is_none();
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
            children,
            store_signal,
            consume_signal,
            relay: relay.clone(),
            frees_slot,
            at: now,
        },
        failure_effect_first,
        wake,
        relay: !relay.is_empty(),
    })
}

/// Fences are u64 in the core and BIGINT in the store; they never come near 2^63.
pub(crate) fn fence_i64(fence: Fence) -> i64 {
    i64::try_from(fence.0).unwrap_or(i64::MAX)
}
