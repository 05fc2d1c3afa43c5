//! A tenant's capacity as the API shows it: the limits the operator set, each kind's
//! running limit, usage so far and what is queued and running now.

use crate::engine::Capacity;
use crate::engine::TenantLimits;
use spindle_views::{CapacityView, KindUsageView, LimitsView};

impl From<&TenantLimits> for LimitsView {
    fn from(l: &TenantLimits) -> Self {
        Self {
            weight: Some(l.weight),
            max_running: l.max_running,
            max_queued: l.max_queued,
            rate_per_sec: l.rate_per_sec,
            rate_burst: l.rate_burst,
            max_deployed_bytes: l.max_deployed_bytes,
            max_memory_bytes: l.max_memory_bytes,
            max_step_timeout_ms: l.max_step_timeout_ms,
            max_fuel: l.max_fuel,
        }
    }
}

impl From<&LimitsView> for TenantLimits {
    fn from(v: &LimitsView) -> Self {
        Self {
            weight: v.weight.unwrap_or(1),
            max_running: v.max_running,
            max_queued: v.max_queued,
            rate_per_sec: v.rate_per_sec,
            rate_burst: v.rate_burst,
            max_deployed_bytes: v.max_deployed_bytes,
            max_memory_bytes: v.max_memory_bytes,
            max_step_timeout_ms: v.max_step_timeout_ms,
            max_fuel: v.max_fuel,
        }
    }
}

/// The view of `capacity` for `tenant`.
pub fn capacity_view(tenant: &str, capacity: &Capacity) -> CapacityView {
    let mut kinds: std::collections::BTreeMap<String, KindUsageView> = std::collections::BTreeMap::new();
    fn entry<'a>(
        kinds: &'a mut std::collections::BTreeMap<String, KindUsageView>,
        kind: &str,
    ) -> &'a mut KindUsageView {
        kinds
            .entry(kind.to_owned())
            .or_insert_with(|| KindUsageView { kind: kind.to_owned(), ..KindUsageView::default() })
    }
    for u in &capacity.usage {
        let k = entry(&mut kinds, &u.kind);
        k.steps = u.steps;
        k.faults = u.faults;
        k.sandbox_micros = u.sandbox_micros;
        k.wall_micros = u.wall_micros;
        k.outbound_requests = u.outbound_requests;
    }
    for l in &capacity.live {
        let k = entry(&mut kinds, &l.kind);
        k.queued = l.queued;
        k.running = l.running;
    }
    for (kind, max) in &capacity.kind_limits {
        entry(&mut kinds, kind).max_running = Some(*max);
    }
    CapacityView {
        tenant: tenant.to_owned(),
        limits: LimitsView::from(&capacity.limits),
        kinds: kinds.into_values().collect(),
        deployed_bytes: capacity.deployed_bytes,
    }
}
