//! Steps running over time, per tenant, for the dashboard's chart: every
//! [`SAMPLE_EVERY`] this host counts the claims held (on every host sharing the
//! database, through the claimed jobs' index) and keeps the last hour of counts.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use spindle_core::Timestamp;

use crate::store::TenantId;

/// How often the running steps are counted.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Samples kept per tenant: an hour's.
const KEPT: usize = 360;

/// The last hour's counts: when, and each tenant's with steps running then.
#[derive(Debug, Default)]
pub(crate) struct Samples(std::sync::Mutex<VecDeque<(Timestamp, HashMap<TenantId, u64>)>>);

impl Samples {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(Timestamp, HashMap<TenantId, u64>)>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl super::CapacityRoom<'_> {
    /// Counts the steps running now, per tenant, into the last hour's samples.
    pub async fn sample_running(&self) -> Result<(), crate::store::StoreError> {
        let running: HashMap<TenantId, u64> = self.store.running_by_tenant().await?.into_iter().collect();
        let now = self.now();
        let mut samples = self.samples.lock();
        samples.push_back((now, running));
        while samples.len() > KEPT {
            samples.pop_front();
        }
        Ok(())
    }

    /// `tenant`'s steps running over the last hour, oldest first (0 where it had none).
    pub fn running_over_time(&self, tenant: &TenantId) -> Vec<(Timestamp, u64)> {
        self.samples.lock().iter().map(|(at, running)| (*at, running.get(tenant).copied().unwrap_or(0))).collect()
    }
}
