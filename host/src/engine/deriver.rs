//! The core's answers inside store transactions: when a claim, a promotion or a lease
//! key's release needs a decision about a job the transaction did not come with, the
//! store asks this host's [`HostDeriver`], which asks the job machine and plans the
//! write. The store commits what it answers, version-checked, and decides nothing.

use std::sync::Arc;
use std::time::Duration;

use spindle_core::job::JobEvent;
use spindle_core::{Refusal, Timestamp, transition};

use super::breakers::Breakers;
use super::plan;
use crate::clock::Clock;
use crate::store::{Deriver, JobRecord, JobWrite, OutboxEffect};

/// This host's derivations: its claims carry its name and its lease TTL.
#[derive(Clone, Debug)]
pub struct HostDeriver {
    owner: String,
    ttl: Duration,
    clock: Option<Arc<dyn Clock>>,
    breakers: Option<Arc<Breakers>>,
    gate: Option<Arc<crate::upgrade::Gate>>,
}

impl HostDeriver {
    /// Claims by `owner` lasting `ttl` without a heartbeat, stamped with the time the
    /// store asks at.
    pub fn new(owner: &str, ttl: Duration) -> Self {
        Self { owner: owner.to_owned(), ttl, clock: None, breakers: None, gate: None }
    }

    /// Derivations stamped by `clock`, read when the store asks — inside its
    /// transaction, once the job's row is locked — rather than when the host began: a
    /// transaction that waited for a connection or a lock (120 ms and more under load)
    /// would otherwise shorten its claims' leases by that wait and stamp history out of
    /// commit order.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self { clock: Some(clock), ..self }
    }

    /// Derivations that hold back the candidates whose version's breaker is open.
    pub fn with_breakers(self, breakers: Arc<Breakers>) -> Self {
        Self { breakers: Some(breakers), ..self }
    }

    /// Claims that write what the storage format gate says, and none while it refuses.
    pub fn with_gate(self, gate: Arc<crate::upgrade::Gate>) -> Self {
        Self { gate: Some(gate), ..self }
    }

    /// The write of `event` on `record`, or `None` when the core refuses it or nothing
    /// changes.
    fn derive(&self, record: &JobRecord, event: &JobEvent, asked_at: Timestamp) -> Option<JobWrite> {
        let now = self.clock.as_ref().map_or(asked_at, |clock| clock.now().max(asked_at));
        let planned = transition(&record.job, event, now)
            .and_then(|t| if t.is_noop(&record.job) { Ok(None) } else { plan(record, t, now).map(Some) });
        match planned {
            Ok(Some(mut plan)) => {
                if plan.failure_effect_first {
                    // No hook runs inside a transaction; these events never fail a job,
                    // but if one ever did, the effect would still run from the outbox.
                    plan.write.outbox.push(OutboxEffect::FailureEffect);
                }
                Some(plan.write)
            }
            Ok(None) => None,
            Err(refusal @ Refusal::NotDue { .. }) => {
                // Made ready by a host whose clock runs ahead of this one's.
                tracing::debug!(job = %record.job.id, event = event.name(), "not due yet by this host's clock: {refusal}");
                None
            }
            Err(refusal) => {
                // The store selected the job by its indexed columns, which project the
                // machine: a refusal here means they disagree with it.
                tracing::warn!(job = %record.job.id, event = event.name(), code = refusal.code(), queue = %record.job.queue, "the core refused a queue event: {refusal}");
                None
            }
        }
    }
}

impl Deriver for HostDeriver {
    fn claim(&self, record: &JobRecord, now: Timestamp) -> Option<JobWrite> {
        let record_as = match &self.gate {
            Some(gate) => gate.claim_record()?,
            None => spindle_core::upgrade::ClaimRecord::of(spindle_core::upgrade::NEWEST),
        };
        self.derive(record, &JobEvent::Claim { owner: self.owner.clone(), ttl: self.ttl, record: record_as }, now)
    }

    fn key_busy(&self, record: &JobRecord, key: &str, held_until: Timestamp, now: Timestamp) -> Option<JobWrite> {
        self.derive(record, &JobEvent::KeyBusy { key: key.to_owned(), held_until }, now)
    }

    fn key_released(&self, record: &JobRecord, key: &str, now: Timestamp) -> Option<JobWrite> {
        self.derive(record, &JobEvent::KeyReleased { key: key.to_owned() }, now)
    }

    fn due(&self, record: &JobRecord, now: Timestamp) -> Option<JobWrite> {
        self.derive(record, &JobEvent::Due, now)
    }

    fn children_settled(&self, record: &JobRecord, slot: &str, settled: u32, now: Timestamp) -> Option<JobWrite> {
        // A parent cancelled (or failed) while its children ran: they settle afterwards
        // as the cancellation reaches them, the normal end of a cancelled fan-out, and
        // there is nothing to wake.
        if record.job.state.is_final() {
            return None;
        }
        self.derive(record, &JobEvent::ChildrenSettled { slot: slot.to_owned(), settled }, now)
    }

    fn at_capacity(&self, record: &JobRecord, gate: &str, recheck_at: Timestamp, now: Timestamp) -> Option<JobWrite> {
        self.derive(record, &JobEvent::AtCapacity { gate: gate.to_owned(), recheck_at }, now)
    }

    fn hold(&self, record: &JobRecord, now: Timestamp) -> Option<(String, Timestamp)> {
        let now = self.clock.as_ref().map_or(now, |clock| clock.now().max(now));
        self.breakers.as_ref()?.hold(record, now)
    }
}
