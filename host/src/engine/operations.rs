//! Bulk operations: a retry of every dead letter a filter matches, and a cancel or retry
//! of every job a listing's filter matches, each as one request that answers at once and
//! runs in the background, page by page, its progress and who asked kept as an audit
//! trail (`store::audit`). Each job is acted on through its own command (one transaction
//! each), so an operation cut short leaves every job either done or untouched.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use spindle_core::policy::priority::Priority;
use spindle_core::{JobId, JobState, Timestamp};

use super::{Command, Engine, EngineError};
use crate::store::{JobFilter, JobRecord, Operation, TenantId};

/// Which dead letters a bulk retry takes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetterFilter {
    /// Only this kind's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only those that failed with this code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<String>,
    /// Only those that failed before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_before: Option<Timestamp>,
}

impl DeadLetterFilter {
    /// Whether a dead letter's failure code and time pass the filter (its kind is the
    /// listing's own filter).
    pub fn admits(&self, record: &JobRecord) -> bool {
        let code = record.job.failure.as_ref().map(|f| f.code.as_str());
        self.failure_code.as_deref().is_none_or(|wanted| code == Some(wanted))
            && self.failed_before.is_none_or(|before| record.job.settled_at.is_some_and(|at| at < before))
    }
}

/// Which jobs a bulk cancel or retry takes: the job listing's filters, bounded by the
/// newest job the count its user confirmed saw, so that jobs submitted after it are left
/// alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSelection {
    /// Only this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// Only this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only children of this job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<JobId>,
    /// Only this priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// Only jobs submitted at or after this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_after: Option<Timestamp>,
    /// Only jobs submitted before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_before: Option<Timestamp>,
    /// The job with this id, or the jobs whose idempotency key starts with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Only jobs up to this sequence number (the newest one the confirmed count saw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<i64>,
}

impl JobSelection {
    /// The listing filter of one page of these jobs, older than `cursor` (a sequence number).
    pub fn filter(&self, cursor: Option<i64>, limit: u32) -> JobFilter {
        let bound = self.through.map(|t| t.saturating_add(1));
        JobFilter {
            state: self.state,
            kind: self.kind.clone(),
            parent: self.parent,
            dead_letters: false,
            before_seq: match (cursor, bound) {
                (Some(c), Some(b)) => Some(c.min(b)),
                (c, b) => c.or(b),
            },
            priority: self.priority,
            created_after: self.created_after,
            created_before: self.created_before,
            text: self.text.clone(),
            limit,
        }
    }
}

/// What a bulk job operation does to each job it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// Cancel it (a running step is stopped at its next heartbeat).
    Cancel,
    /// Retry it as a new, linked job (failed or cancelled jobs only).
    Retry,
}

impl BulkAction {
    /// The operation's `action` as the audit trail names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cancel => "cancel-jobs",
            Self::Retry => "retry-jobs",
        }
    }

    fn command(self, operation: &Operation) -> Command {
        match self {
            Self::Cancel => Command::Cancel { reason: format!("bulk operation {}", operation.id) },
            Self::Retry => Command::Retry,
        }
    }
}

/// What one operation pages through and what it does to each job.
#[derive(Clone, Debug)]
enum Bulk {
    RetryDeadLetters(DeadLetterFilter),
    Jobs(BulkAction, JobSelection),
}

impl Bulk {
    /// The page of jobs older than `cursor` it looks through.
    fn page(&self, cursor: Option<i64>) -> JobFilter {
        match self {
            Self::RetryDeadLetters(f) => JobFilter {
                kind: f.kind.clone(),
                dead_letters: true,
                before_seq: cursor,
                limit: PAGE,
                ..JobFilter::default()
            },
            Self::Jobs(_, selection) => selection.filter(cursor, PAGE),
        }
    }

    /// Whether a listed job is one it takes (what the listing could not filter).
    fn admits(&self, record: &JobRecord) -> bool {
        match self {
            Self::RetryDeadLetters(f) => f.admits(record),
            Self::Jobs(..) => true,
        }
    }

    fn command(&self, operation: &Operation) -> Command {
        match self {
            Self::RetryDeadLetters(_) => Command::Retry,
            Self::Jobs(action, _) => action.command(operation),
        }
    }
}

/// Jobs a bulk operation or a count reads at a time.
const PAGE: u32 = 100;

impl Engine {
    /// The operation itself: page through the jobs it takes and act on each, saving the
    /// counts after every page.
    async fn run_bulk(self: Arc<Self>, mut operation: Operation, bulk: Bulk) {
        let mut cursor = None;
        let outcome = loop {
            let page = bulk.page(cursor);
            let records = match self.store.list_jobs(&operation.tenant, &page).await {
                Ok(records) => records,
                Err(e) => break Err(e.to_string()),
            };
            for record in records.iter().filter(|r| bulk.admits(r)) {
                operation.matched += 1;
                match self
                    .operations()
                    .command(&operation.tenant, record.job.id, bulk.command(&operation), &operation.actor)
                    .await
                {
                    Ok(_) => operation.done += 1,
                    Err(e) => {
                        operation.failed += 1;
                        tracing::info!(job = %record.job.id, operation = %operation.id, "a bulk operation skipped a job: {e}");
                    }
                }
            }
            if let Err(e) = self.store.save_operation(&operation).await {
                tracing::warn!(operation = %operation.id, error = %e, "could not save a bulk operation's progress");
            }
            if records.len() < PAGE as usize {
                break Ok(());
            }
            cursor = records.last().map(|r| r.seq);
        };
        operation.state = if outcome.is_ok() { "done" } else { "failed" }.into();
        operation.finished_at = Some(self.now());
        if let Err(e) = &outcome {
            tracing::warn!(operation = %operation.id, error = %e, "a bulk operation failed");
        }
        if let Err(e) = self.store.save_operation(&operation).await {
            tracing::error!(operation = %operation.id, error = %e, "could not save how a bulk operation ended");
        }
    }
}

/// Most jobs a count reads before it answers "at least this many".
pub const COUNT_CAP: u64 = 10_000;

/// What a count before a bulk operation found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkCount {
    /// How many match (up to [`COUNT_CAP`]).
    pub matching: u64,
    /// Whether the count stopped at the cap.
    pub capped: bool,
    /// The newest matching job's sequence number: the bound a confirmed operation keeps.
    pub through: Option<i64>,
    /// Of those counted, how many the action would skip now (the job machine refuses
    /// it: a final job to cancel, a running one to retry, one retried already).
    pub skipping: u64,
}

impl super::Operations<'_> {
    /// How many jobs of `tenant` the operation `bulk` would take now, read the way it
    /// reads them, up to [`COUNT_CAP`].
    async fn count(&self, tenant: &TenantId, bulk: &Bulk) -> Result<BulkCount, EngineError> {
        let (mut cursor, mut matching, mut through, mut skipping) = (None, 0_u64, None, 0_u64);
        loop {
            let records = self.store.list_jobs(tenant, &bulk.page(cursor)).await?;
            for record in records.iter().filter(|r| bulk.admits(r)) {
                through = through.or(Some(record.seq));
                matching += 1;
                if !self.would_act(bulk, record) {
                    skipping += 1;
                }
                if matching >= COUNT_CAP {
                    return Ok(BulkCount { matching, capped: true, through, skipping });
                }
            }
            if records.len() < PAGE as usize {
                return Ok(BulkCount { matching, capped: false, through, skipping });
            }
            cursor = records.last().map(|r| r.seq);
        }
    }

    /// Whether `bulk`'s action would change `record` now, as the job machine answers.
    fn would_act(&self, bulk: &Bulk, record: &JobRecord) -> bool {
        let checks = self.actions(record);
        match bulk {
            Bulk::RetryDeadLetters(_) | Bulk::Jobs(BulkAction::Retry, _) => checks.retry.is_ok(),
            Bulk::Jobs(BulkAction::Cancel, _) => checks.cancel.is_ok(),
        }
    }

    /// How many dead letters of `tenant` a retry with `filter` would take now. Asked
    /// before a bulk retry, so that whoever starts one knows what it will do.
    pub async fn count_dead_letters(
        &self,
        tenant: &TenantId,
        filter: &DeadLetterFilter,
    ) -> Result<BulkCount, EngineError> {
        self.count(tenant, &Bulk::RetryDeadLetters(filter.clone())).await
    }

    /// How many jobs of `tenant` `selection` takes now, and the newest of them: what a
    /// bulk cancel or retry asks its user to confirm.
    pub async fn count_jobs(
        &self,
        tenant: &TenantId,
        selection: &JobSelection,
        action: BulkAction,
    ) -> Result<BulkCount, EngineError> {
        self.count(tenant, &Bulk::Jobs(action, selection.clone())).await
    }

    /// Starts retrying every dead letter of `tenant` that `filter` matches, in the
    /// background; answers the operation as it starts (its progress follows in the store).
    pub async fn retry_dead_letters(
        &self,
        tenant: &TenantId,
        filter: DeadLetterFilter,
        actor: &str,
    ) -> Result<Operation, EngineError> {
        let recorded = serde_json::to_string(&filter).map_err(|e| EngineError::Invalid(e.to_string()))?;
        self.start(tenant, "retry-dead-letters", recorded, Bulk::RetryDeadLetters(filter), actor).await
    }

    /// Starts `action` on every job of `tenant` that `selection` takes, in the background;
    /// answers the operation as it starts.
    pub async fn act_on_jobs(
        &self,
        tenant: &TenantId,
        action: BulkAction,
        selection: JobSelection,
        actor: &str,
    ) -> Result<Operation, EngineError> {
        let recorded = serde_json::to_string(&selection).map_err(|e| EngineError::Invalid(e.to_string()))?;
        self.start(tenant, action.name(), recorded, Bulk::Jobs(action, selection), actor).await
    }

    async fn start(
        &self,
        tenant: &TenantId,
        action: &str,
        filter: String,
        bulk: Bulk,
        actor: &str,
    ) -> Result<Operation, EngineError> {
        let operation = Operation {
            id: uuid::Uuid::now_v7().to_string(),
            tenant: tenant.clone(),
            action: action.into(),
            filter,
            state: "running".into(),
            matched: 0,
            done: 0,
            failed: 0,
            actor: actor.to_owned(),
            created_at: self.now(),
            finished_at: None,
        };
        self.store.save_operation(&operation).await?;
        let engine = self.shared();
        let started = operation.clone();
        tokio::spawn(async move { engine.run_bulk(started, bulk).await });
        Ok(operation)
    }
}
