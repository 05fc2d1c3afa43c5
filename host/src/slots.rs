//! This host's execution slots as tenants hold them: how many steps each tenant runs here
//! and its weight, from which the core's [`over_share`] names the tenants a claim passes
//! over (the pool) or turns away (the reserve). The dispatcher counts a step in when it is
//! claimed and out when its worker lets it go.

use std::collections::HashMap;
use std::sync::Mutex;

use spindle_core::capacity::{Holding, over_share};

use crate::store::TenantId;

/// Steps running on this host, per tenant, with the tenant's weight as last read.
#[derive(Debug, Default)]
pub struct Slots {
    held: Mutex<HashMap<TenantId, (usize, u32)>>,
}

impl Slots {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<TenantId, (usize, u32)>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A step of `tenant` (of `weight`) starts holding a slot.
    pub fn take(&self, tenant: &TenantId, weight: u32) {
        let mut held = self.held();
        let entry = held.entry(tenant.clone()).or_insert((0, weight));
        entry.0 += 1;
        entry.1 = weight;
    }

    /// A step of `tenant` lets its slot go.
    pub fn free(&self, tenant: &TenantId) {
        let mut held = self.held();
        if let Some(entry) = held.get_mut(tenant) {
            entry.0 = entry.0.saturating_sub(1);
            if entry.0 == 0 {
                held.remove(tenant);
            }
        }
    }

    /// Steps `tenant` runs here now.
    pub fn running(&self, tenant: &TenantId) -> usize {
        self.held().get(tenant).map_or(0, |held| held.0)
    }

    /// The tenants holding at least their share of `pool` slots, counting `leaving`'s
    /// step as already gone (a worker asks as its step ends, for its next claim).
    pub fn over_share(&self, pool: usize, leaving: Option<&TenantId>) -> Vec<TenantId> {
        let held = self.held();
        if held.len() < 2 && held.values().all(|h| h.0 < pool) {
            // One tenant under the whole pool, or none: nobody is passed over.
            return Vec::new();
        }
        let holdings: Vec<Holding<TenantId>> = held
            .iter()
            .map(|(tenant, &(running, weight))| Holding {
                tenant: tenant.clone(),
                running: running - usize::from(leaving == Some(tenant) && running > 0),
                weight,
            })
            .collect();
        over_share(pool, &holdings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> TenantId {
        TenantId(name.to_owned())
    }

    #[test]
    fn a_tenant_alone_is_passed_over_only_once_it_holds_the_whole_pool() {
        let slots = Slots::default();
        for _ in 0..3 {
            slots.take(&t("a"), 1);
        }
        assert!(slots.over_share(4, None).is_empty());
        slots.take(&t("a"), 1);
        assert_eq!(slots.over_share(4, None), vec![t("a")]);
        assert!(slots.over_share(4, Some(&t("a"))).is_empty(), "its ending step frees a slot");
    }

    #[test]
    fn beside_another_tenant_the_one_over_its_share_is_named_until_its_steps_end() {
        let slots = Slots::default();
        for _ in 0..4 {
            slots.take(&t("a"), 1);
        }
        slots.take(&t("b"), 1);
        assert_eq!(slots.over_share(4, None), vec![t("a")]);
        for _ in 0..3 {
            slots.free(&t("a"));
        }
        assert!(slots.over_share(4, None).is_empty());
        assert_eq!(slots.running(&t("a")), 1);
        slots.free(&t("a"));
        assert_eq!(slots.running(&t("a")), 0, "a tenant with nothing running is forgotten");
    }
}
