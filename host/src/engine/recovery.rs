//! Recovery: claims whose holder stopped renewing are taken back, delayed and blocked
//! jobs whose time has come are promoted, and lease keys are invalidated on request.

use spindle_core::JobId;
use spindle_core::job::JobEvent;

use super::{EngineError, Writer, tenant_key};
use crate::store::TenantId;

/// Due jobs promoted per transaction.
const PROMOTE_BATCH: u32 = 256;

impl super::Execution<'_> {
    /// Takes back the steps whose claims lapsed (their host stopped renewing): the step
    /// runs again elsewhere, under a higher fence. Answers how many were rescued.
    pub async fn rescue_lapsed(&self, limit: u32) -> Result<usize, EngineError> {
        if self.refusing() {
            return Ok(0);
        }
        let now = self.now();
        let mut rescued = 0;
        for id in self.store.lapsed_claims(now, limit).await? {
            let backoff = self.config.rescue_backoff;
            let result = self
                .apply(None, id, Writer::Recovery, |r| {
                    r.job.claim.as_ref().filter(|c| c.expires_at <= now).map(|_| JobEvent::Rescue { backoff })
                })
                .await;
            match result {
                Ok(_) => rescued += 1,
                Err(EngineError::Refused { .. } | EngineError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(rescued)
    }

    /// Invalidates a tenant's lease key (its target was deleted, or it was revoked);
    /// answers the job that held it, which can no longer commit under it.
    pub async fn invalidate_lease(&self, tenant: &TenantId, key: &str) -> Result<Option<JobId>, EngineError> {
        self.may_write().await?;
        let holder = self.store.invalidate_lease(&tenant_key(tenant, key), self.now(), self.deriver()).await?;
        if holder.is_some() {
            self.wake.notify_one();
        }
        Ok(holder)
    }

    /// Makes delayed and blocked jobs whose time has come ready, each through the core
    /// (its `due` event); answers how many.
    pub async fn promote_due(&self) -> Result<u64, EngineError> {
        if self.refusing() {
            return Ok(0);
        }
        let mut promoted = 0;
        loop {
            let n = self.store.promote_due(self.now(), PROMOTE_BATCH, self.deriver()).await?;
            promoted += n;
            if n < u64::from(PROMOTE_BATCH) {
                break;
            }
        }
        if promoted > 0 {
            self.wake.notify_one();
        }
        Ok(promoted)
    }
}
