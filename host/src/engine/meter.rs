//! Usage metering: each step run adds to its tenant's and kind's counters in memory, and
//! the dispatcher's meter loop adds them to the store every second (and at shutdown), so
//! the hot path never waits on a usage write. Every host adds to the same rows.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::{Engine, EngineError};
use crate::store::{TenantId, Usage};

/// Usage not yet added to the store.
#[derive(Debug, Default)]
pub struct Meter {
    pending: Mutex<HashMap<(TenantId, String), Usage>>,
}

/// One step run, as metered.
#[derive(Clone, Copy, Debug, Default)]
pub struct StepUsage {
    /// Time inside the sandbox.
    pub sandbox: Duration,
    /// Time from the claim to the outcome.
    pub wall: Duration,
    /// Whether it faulted in the sandbox or ran out of time.
    pub fault: bool,
    /// Outbound requests it sent.
    pub outbound_requests: u64,
}

impl Meter {
    /// Adds one step run of `tenant`'s `kind`.
    pub fn record(&self, tenant: &TenantId, kind: &str, step: StepUsage) {
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let usage = pending.entry((tenant.clone(), kind.to_owned())).or_insert_with(|| Usage::new(tenant, kind));
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        usage.steps += 1;
        usage.faults += u64::from(step.fault);
        usage.sandbox_micros += micros(step.sandbox);
        usage.wall_micros += micros(step.wall);
        usage.outbound_requests += step.outbound_requests;
    }

    /// Takes what was recorded so far.
    fn take(&self) -> Vec<Usage> {
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.drain().map(|(_, usage)| usage).collect()
    }

    /// Puts back what could not be stored, to go with the next flush.
    fn restore(&self, usage: Vec<Usage>) {
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for u in usage {
            pending.entry((u.tenant.clone(), u.kind.clone())).or_insert_with(|| Usage::new(&u.tenant, &u.kind)).add(&u);
        }
    }
}

impl Engine {
    /// The meter, to record step runs.
    pub(crate) fn meter(&self) -> &Meter {
        &self.meter
    }
}

impl super::CapacityRoom<'_> {
    /// Adds the usage metered since the last flush to the store; on failure it is kept
    /// for the next one.
    pub async fn flush_usage(&self) -> Result<(), EngineError> {
        let usage = self.meter.take();
        if usage.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.store.add_usage(&usage).await {
            self.meter.restore(usage);
            return Err(e.into());
        }
        Ok(())
    }
}
