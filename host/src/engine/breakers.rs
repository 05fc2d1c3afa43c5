//! This host's fault breakers, one per (tenant, kind, version): the core's
//! [`Breaker`] fed with the outcomes of the steps this host ran, and asked before each
//! claim. A version whose steps keep faulting is held back (its jobs wait, queue
//! `blocked`, on the breaker's gate) for a cool-down, then one probe runs at a time, and
//! consecutive successes close it. A redeploy gives the kind a new version with a closed
//! breaker at once, and lets the old version's held jobs probe without waiting out the
//! cool-down; an operator can reset a kind's breakers.
//!
//! Breakers are per host: each host stops claiming what faults on it.

use std::collections::HashMap;
use std::sync::Mutex;

use spindle_core::Timestamp;
use spindle_core::breaker::{Breaker, BreakerEvent, BreakerPolicy, BreakerState};

use crate::store::{JobRecord, TenantId};

/// Which breaker: a tenant's kind's version.
type Key = (TenantId, String, i64);

/// This host's breakers.
#[derive(Debug)]
pub struct Breakers {
    policy: BreakerPolicy,
    map: Mutex<HashMap<Key, Breaker>>,
}

/// A breaker as shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BreakerView {
    /// The kind.
    pub kind: String,
    /// The version.
    pub version: i64,
    /// Where it stands.
    pub state: BreakerState,
    /// Faults counted in its window now.
    pub recent_faults: usize,
}

/// What the engine must do after a breaker changed: wake jobs held on its gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wake {
    /// The gate.
    pub gate: String,
    /// How many (one probe, or all).
    pub count: u32,
}

/// How many held jobs one wake lets go when a breaker closes (the rest follow as
/// their claims end: a wake per freed slot is not needed here, everything may run).
pub const WAKE_ALL: u32 = 10_000;

/// The gate a held version's jobs wait on.
pub fn breaker_gate(tenant: &TenantId, kind: &str, version: i64) -> String {
    format!("@breaker/{tenant}/{kind}/{version}")
}

impl Breakers {
    /// Breakers with `policy`.
    pub fn new(policy: BreakerPolicy) -> Self {
        Self { policy, map: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Breaker>> {
        self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `record`'s step may be claimed at `now`: `None` if so (in half-open, it
    /// is the probe), else the gate to wait on and when to try again.
    pub fn hold(&self, record: &JobRecord, now: Timestamp) -> Option<(String, Timestamp)> {
        let mut map = self.lock();
        let key = (record.tenant.clone(), record.kind.clone(), record.kind_version);
        let breaker = map.get_mut(&key)?;
        match breaker.admit(now) {
            Ok(true) => None,
            Ok(false) => {
                let recheck = match (breaker.state, breaker.opened_at) {
                    (BreakerState::Open, Some(at)) => at.plus(self.policy.cool_down),
                    _ => now.plus(self.policy.cool_down),
                };
                Some((breaker_gate(&record.tenant, &record.kind, record.kind_version), recheck.max(now)))
            }
            Err(e) => {
                tracing::error!(error = %e, "the breaker refused its own change; admitting");
                None
            }
        }
    }

    /// Feeds a step's outcome to its version's breaker; answers the jobs to wake.
    pub fn report(&self, tenant: &TenantId, kind: &str, version: i64, fault: bool, now: Timestamp) -> Option<Wake> {
        let mut map = self.lock();
        let key = (tenant.clone(), kind.to_owned(), version);
        if !fault && !map.contains_key(&key) {
            return None;
        }
        let breaker = map.entry(key).or_insert_with(|| Breaker::new(self.policy));
        let event = if fault { BreakerEvent::Faulted } else { BreakerEvent::Succeeded };
        let changed = breaker.apply(event, now);
        let gate = breaker_gate(tenant, kind, version);
        match (changed, breaker.state) {
            (Ok(Some(BreakerState::Open)), _) => {
                tracing::warn!(tenant = %tenant, kind, version, "breaker opened: the kind's steps keep faulting");
                None
            }
            (Ok(Some(BreakerState::Closed)), _) => {
                tracing::info!(tenant = %tenant, kind, version, "breaker closed");
                Some(Wake { gate, count: WAKE_ALL })
            }
            // A probe succeeded and more are needed: let the next one through.
            (Ok(None), BreakerState::HalfOpen) if !fault => Some(Wake { gate, count: 1 }),
            (Err(e), _) => {
                tracing::error!(error = %e, "the breaker refused its own change");
                None
            }
            _ => None,
        }
    }

    /// A new version of `kind` was deployed: its older versions' open breakers go
    /// half-open (one probe each) at once.
    pub fn redeployed(&self, tenant: &TenantId, kind: &str, now: Timestamp) -> Vec<Wake> {
        self.apply_to_kind(tenant, kind, BreakerEvent::Redeployed, now)
    }

    /// An operator reset `kind`'s breakers: all closed, held jobs woken.
    pub fn reset(&self, tenant: &TenantId, kind: &str, now: Timestamp) -> Vec<Wake> {
        self.apply_to_kind(tenant, kind, BreakerEvent::Reset, now)
    }

    fn apply_to_kind(&self, tenant: &TenantId, kind: &str, event: BreakerEvent, now: Timestamp) -> Vec<Wake> {
        let mut map = self.lock();
        let mut wakes = Vec::new();
        for ((t, k, version), breaker) in map.iter_mut() {
            if t != tenant || k != kind {
                continue;
            }
            match breaker.apply(event, now) {
                Ok(Some(BreakerState::Closed)) => {
                    wakes.push(Wake { gate: breaker_gate(t, k, *version), count: WAKE_ALL });
                }
                Ok(Some(BreakerState::HalfOpen)) => wakes.push(Wake { gate: breaker_gate(t, k, *version), count: 1 }),
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "the breaker refused its own change"),
            }
        }
        wakes
    }

    /// `tenant`'s breakers that are not closed, or have faults in their window.
    pub fn of_tenant(&self, tenant: &TenantId, now: Timestamp) -> Vec<BreakerView> {
        let mut views: Vec<BreakerView> = self
            .lock()
            .iter()
            .filter(|((t, _, _), _)| t == tenant)
            .map(|((_, kind, version), breaker)| BreakerView {
                kind: kind.clone(),
                version: *version,
                state: breaker.state,
                recent_faults: breaker.recent_faults(now),
            })
            .collect();
        views.sort_by(|a, b| (&a.kind, a.version).cmp(&(&b.kind, b.version)));
        views
    }

    /// Every breaker, for metrics: tenant, kind, version, state.
    pub fn all(&self) -> Vec<(TenantId, String, i64, BreakerState)> {
        let mut all: Vec<_> = self.lock().iter().map(|((t, k, v), b)| (t.clone(), k.clone(), *v, b.state)).collect();
        all.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
        all
    }
}

impl super::Engine {
    /// Wakes the jobs a breaker change lets go.
    pub(crate) async fn wake_held(&self, wakes: Vec<Wake>) {
        for wake in wakes {
            match self.store.wake_gate(&wake.gate, wake.count, self.now(), self.deriver.as_ref()).await {
                Ok(true) => self.wake.notify_one(),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(gate = wake.gate, error = %e, "could not wake held jobs; they wait for their recheck")
                }
            }
        }
    }
}

impl super::CapacityRoom<'_> {
    /// A new version of `kind` was deployed: its older versions' open breakers let a
    /// probe through at once.
    pub async fn kind_redeployed(&self, tenant: &TenantId, kind: &str) {
        let wakes = self.breakers.redeployed(tenant, kind, self.now());
        self.wake_held(wakes).await;
    }

    /// Resets `kind`'s breakers (operator): closed, held jobs woken.
    pub async fn reset_breakers(&self, tenant: &TenantId, kind: &str) {
        let wakes = self.breakers.reset(tenant, kind, self.now());
        self.wake_held(wakes).await;
    }

    /// This host's breakers.
    pub fn breakers(&self) -> &Breakers {
        &self.breakers
    }
}
