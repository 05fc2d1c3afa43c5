//! A tenant's share of the host, as the operator sets it and the API reads it: limits,
//! kinds' running limits, usage and what is queued and running now. The store enforces
//! the limits (see [`crate::store::capacity`]); this checks what may be set.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use spindle_runtime::Ceilings;

use super::{Engine, EngineError};
use crate::store::capacity::MAX_WEIGHT;
use crate::store::{LiveCount, TenantId, TenantLimits, Usage};

/// How long a tenant's sandbox ceilings are used before they are read again: a change
/// reaches every host's steps within this.
const CEILINGS_FRESH_FOR: Duration = Duration::from_secs(1);

/// Tenants' sandbox ceilings and slot weights as last read.
#[derive(Debug, Default)]
pub struct CeilingCache {
    map: Mutex<HashMap<TenantId, (Instant, Ceilings, u32)>>,
}

/// A tenant's capacity as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Its limits.
    pub limits: TenantLimits,
    /// Its kinds' running limits.
    pub kind_limits: BTreeMap<String, u32>,
    /// Its usage so far, per kind.
    pub usage: Vec<Usage>,
    /// What is queued and running now, per kind.
    pub live: Vec<LiveCount>,
    /// Bytes its kinds' versions hold: their uploads and their compiled code.
    pub deployed_bytes: u64,
}

impl Engine {
    /// `tenant`'s sandbox ceilings for its next step (read again once a second; the
    /// host's limits alone if they cannot be read).
    pub(crate) async fn ceilings(&self, tenant: &TenantId) -> Ceilings {
        self.tenant_facts(tenant).await.0
    }

    /// `tenant`'s weight in the division of a host's slots (read with its ceilings; 1 if
    /// its limits cannot be read).
    pub async fn slot_weight(&self, tenant: &TenantId) -> u32 {
        self.tenant_facts(tenant).await.1
    }

    async fn tenant_facts(&self, tenant: &TenantId) -> (Ceilings, u32) {
        let cache = &self.ceilings;
        if let Some((at, ceilings, weight)) =
            cache.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(tenant)
            && at.elapsed() < CEILINGS_FRESH_FOR
        {
            return (*ceilings, *weight);
        }
        let (ceilings, weight) = match self.store.tenant_limits(tenant).await {
            Ok(limits) => (
                Ceilings {
                    max_memory_bytes: limits.max_memory_bytes.map(|m| usize::try_from(m).unwrap_or(usize::MAX)),
                    step_timeout: limits.max_step_timeout_ms.map(Duration::from_millis),
                    fuel: limits.max_fuel,
                },
                limits.weight,
            ),
            Err(e) => {
                tracing::warn!(tenant = %tenant, error = %e, "could not read the tenant's sandbox ceilings; the host's apply");
                (Ceilings::default(), 1)
            }
        };
        cache
            .map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(tenant.clone(), (Instant::now(), ceilings, weight));
        (ceilings, weight)
    }
}

impl super::CapacityRoom<'_> {
    /// Sets a tenant's limits. A weight is 1 to [`MAX_WEIGHT`]; limits are positive; the
    /// sandbox ceilings may only tighten the host's own.
    pub async fn set_tenant_limits(&self, tenant: &TenantId, limits: TenantLimits) -> Result<Capacity, EngineError> {
        if self.store.tenant(tenant).await?.is_none() {
            return Err(EngineError::Store(crate::store::StoreError::NotFound(format!("tenant {tenant}"))));
        }
        if !(1..=MAX_WEIGHT).contains(&limits.weight) {
            return Err(EngineError::Invalid(format!("a weight is 1 to {MAX_WEIGHT}, not {}", limits.weight)));
        }
        let zero = [
            ("max_running", limits.max_running.map(u64::from)),
            ("max_queued", limits.max_queued),
            ("rate", limits.rate_per_sec.map(u64::from)),
            ("rate_burst", limits.rate_burst.map(u64::from)),
            ("max_deployed_bytes", limits.max_deployed_bytes),
            ("max_memory_bytes", limits.max_memory_bytes),
            ("max_step_timeout_ms", limits.max_step_timeout_ms),
            ("max_fuel", limits.max_fuel),
        ]
        .into_iter()
        .find(|(_, v)| *v == Some(0));
        if let Some((name, _)) = zero {
            return Err(EngineError::Invalid(format!("{name} must be at least 1 (leave it out for no limit)")));
        }
        let sandbox = self.registry.runtime().config();
        let over = |name: &str, asked: Option<u64>, host: Option<u64>| match (asked, host) {
            (Some(asked), Some(host)) if asked > host => Err(EngineError::Invalid(format!(
                "{name} {asked} is over the host's {host}: a tenant's may only tighten it"
            ))),
            _ => Ok(()),
        };
        over("max_memory_bytes", limits.max_memory_bytes, Some(sandbox.max_memory_bytes as u64))?;
        over("max_step_timeout_ms", limits.max_step_timeout_ms, Some(sandbox.step_timeout.as_millis() as u64))?;
        over("max_fuel", limits.max_fuel, sandbox.fuel)?;
        if limits.max_fuel.is_some() && sandbox.fuel.is_none() {
            return Err(EngineError::Invalid("max_fuel: this host does not meter fuel (sandbox.fuel)".into()));
        }
        self.store.set_tenant_limits(tenant, &limits, self.clock.now()).await?;
        self.of(tenant).await
    }

    /// A tenant's limits, usage and what it has queued and running now.
    pub async fn of(&self, tenant: &TenantId) -> Result<Capacity, EngineError> {
        Ok(Capacity {
            limits: self.store.tenant_limits(tenant).await?,
            kind_limits: self.store.kind_limits(tenant).await?,
            usage: self.store.usage(Some(tenant)).await?,
            live: self.store.live_counts(Some(tenant)).await?,
            deployed_bytes: self.store.deployed_bytes(tenant).await?,
        })
    }
}
