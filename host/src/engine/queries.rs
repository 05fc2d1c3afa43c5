//! What the API and the host's loops read, through the engine: the engine is the only
//! door to the store, so a read answers for the tenant it is asked for (another
//! tenant's job is not found) and every caller goes through the same checks.

use spindle_core::{JobId, JobState, Timestamp};

use super::{Engine, EngineError};
use crate::store::{
    Alert, JobLogs, JobRecord, LiveCount, Operation, OperationQuery, PruneScope, QueueDepth, ReadySignals,
    RecordedCall, Tenant, TenantId, Usage,
};

impl Engine {
    /// Any tenant's job, for the host's own loops (the reconciler).
    pub(crate) async fn load(&self, id: JobId) -> Result<Option<JobRecord>, EngineError> {
        Ok(self.store.job(id).await?)
    }

    /// Open jobs silent since `before`, oldest first (the reconciler's candidates).
    pub(crate) async fn silent_jobs(&self, before: Timestamp, limit: u32) -> Result<Vec<JobId>, EngineError> {
        Ok(self.store.silent_jobs(before, limit).await?)
    }

    /// When the soonest delayed or blocked job is due.
    pub(crate) async fn next_due(&self) -> Result<Option<Timestamp>, EngineError> {
        Ok(self.store.next_due().await?)
    }

    /// Signals that writes this engine did not make made work ready.
    pub(crate) fn ready_signals(&self) -> ReadySignals {
        self.store.ready_signals()
    }

    /// Takes or renews the singleton lease `name` for `ttl_micros`: whether this host
    /// holds it.
    pub(crate) async fn hold_singleton(&self, name: &str, ttl_micros: i64) -> Result<bool, EngineError> {
        if self.refusing() {
            // A host the storage format gate refuses does none of the one-host work.
            return Ok(false);
        }
        Ok(self.store.singleton(name, &self.config.host_id, ttl_micros, self.now()).await?.is_some())
    }

    /// Deletes up to `limit` SQL submissions whose verdict is older than `before`.
    pub(crate) async fn prune_sql_submissions(&self, before: Timestamp, limit: u32) -> Result<u64, EngineError> {
        self.may_write().await?;
        Ok(self.store.prune_sql_submissions(before, limit).await?)
    }

    /// Gives up the singleton lease `name`, if this host holds it.
    pub(crate) async fn release_singleton(&self, name: &str) -> Result<(), EngineError> {
        Ok(self.store.release_singleton(name, &self.config.host_id).await?)
    }

    /// Deletes up to `limit` jobs of `scope` settled before `before`, with all they kept.
    pub(crate) async fn prune(&self, before: Timestamp, scope: &PruneScope, limit: u32) -> Result<u64, EngineError> {
        self.may_write().await?;
        Ok(self.store.prune(before, scope, limit).await?)
    }

    /// Makes the space pruned jobs held reusable.
    pub(crate) async fn reclaim_pruned(&self) -> Result<(), EngineError> {
        Ok(self.store.reclaim_pruned().await?)
    }
}

impl super::CapacityRoom<'_> {
    /// A tenant's open jobs by kind and priority class, by where each waits.
    pub async fn queue_depth(&self, tenant: &TenantId) -> Result<Vec<QueueDepth>, EngineError> {
        Ok(self.store.queue_depth(tenant).await?)
    }

    /// Metered usage, of one tenant or all.
    pub async fn usage(&self, tenant: Option<&TenantId>) -> Result<Vec<Usage>, EngineError> {
        Ok(self.store.usage(tenant).await?)
    }

    /// Queued and running now, of one tenant or all.
    pub async fn live_counts(&self, tenant: Option<&TenantId>) -> Result<Vec<LiveCount>, EngineError> {
        Ok(self.store.live_counts(tenant).await?)
    }
}

impl super::Tenancy<'_> {
    /// A tenant, if it exists.
    pub async fn tenant(&self, tenant: &TenantId) -> Result<Tenant, EngineError> {
        self.store.tenant(tenant).await?.ok_or(EngineError::NotFound)
    }
}

/// Most rows one state's count reads; past it the count says "at least".
pub const STATE_COUNT_CAP: u64 = 100_000;

impl super::Operations<'_> {
    /// The outbound requests a tenant's job's steps made, as recorded.
    pub async fn job_calls(&self, tenant: &TenantId, id: JobId) -> Result<Vec<RecordedCall>, EngineError> {
        self.job(tenant, id).await?;
        Ok(self.store.calls(id).await?)
    }

    /// A tenant's job's log lines after `after_seq` (of `step` only, when given), at most
    /// `limit`, and how many its cap dropped.
    pub async fn job_logs(
        &self,
        tenant: &TenantId,
        id: JobId,
        step: Option<&str>,
        after_seq: i64,
        limit: u32,
    ) -> Result<JobLogs, EngineError> {
        self.job(tenant, id).await?;
        Ok(self.store.job_logs(id, step, after_seq, limit).await?)
    }

    /// A tenant's jobs by state and kind, each state counted up to [`STATE_COUNT_CAP`]
    /// rows: the counts beside the dashboard's filters, cheap however many jobs are kept.
    pub async fn job_counts(&self, tenant: &TenantId) -> Result<Vec<(JobState, String, u64)>, EngineError> {
        Ok(self.store.count_jobs(tenant, STATE_COUNT_CAP).await?)
    }

    /// One kind's jobs by state, from its newest [`STATE_COUNT_CAP`] jobs: exact while
    /// the kind has fewer, a lower bound (at least) once it has that many, and never a
    /// sample of other kinds' rows.
    pub async fn kind_job_counts(&self, tenant: &TenantId, kind: &str) -> Result<Vec<(JobState, u64)>, EngineError> {
        Ok(self.store.count_kind_jobs(tenant, kind, STATE_COUNT_CAP).await?)
    }

    /// The latest operational alerts (operators'), newest first.
    pub async fn alerts(&self, limit: u32) -> Result<Vec<Alert>, EngineError> {
        Ok(self.store.alerts(limit).await?)
    }

    /// A tenant's latest bulk operations, newest first.
    pub async fn list_operations(
        &self,
        tenant: &TenantId,
        query: &OperationQuery,
    ) -> Result<Vec<Operation>, EngineError> {
        Ok(self.store.operations(tenant, query).await?)
    }

    /// One of a tenant's bulk operations.
    pub async fn operation(&self, tenant: &TenantId, id: &str) -> Result<Operation, EngineError> {
        self.store.operation(tenant, id).await?.ok_or(EngineError::NotFound)
    }
}
