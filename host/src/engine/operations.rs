//! Bulk operations: a retry of every dead letter a filter matches, as one request that
//! answers at once and runs in the background, page by page, its progress and who asked
//! kept as an audit trail (`store::audit`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use spindle_core::Timestamp;

use super::{Command, Engine, EngineError};
use crate::store::{JobFilter, Operation, TenantId};

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
    /// The listing of the page of dead letters before `cursor` it looks through (its
    /// kind narrows the listing; the rest is checked on each record).
    fn page(&self, cursor: Option<i64>) -> JobFilter {
        JobFilter {
            kind: self.kind.clone(),
            dead_letters: true,
            before_seq: cursor,
            limit: PAGE,
            ..JobFilter::default()
        }
    }

    /// Whether a dead letter's failure code and time pass the filter (its kind is the
    /// listing's own filter).
    pub fn admits(&self, record: &crate::store::JobRecord) -> bool {
        let code = record.job.failure.as_ref().map(|f| f.code.as_str());
        self.failure_code.as_deref().is_none_or(|wanted| code == Some(wanted))
            && self.failed_before.is_none_or(|before| record.job.settled_at.is_some_and(|at| at < before))
    }
}

/// Dead letters a bulk retry reads at a time.
const PAGE: u32 = 100;

impl Engine {
    /// The retry itself: page through the matching dead letters and retry each, saving
    /// the counts after every page.
    async fn run_retry(self: Arc<Self>, mut operation: Operation, filter: DeadLetterFilter) {
        let mut cursor = None;
        let outcome = loop {
            let page = filter.page(cursor);
            let records = match self.store.list_jobs(&operation.tenant, &page).await {
                Ok(records) => records,
                Err(e) => break Err(e.to_string()),
            };
            for record in records.iter().filter(|r| filter.admits(r)) {
                operation.matched += 1;
                match self
                    .operations()
                    .command(&operation.tenant, record.job.id, Command::Retry, &operation.actor)
                    .await
                {
                    Ok(_) => operation.done += 1,
                    Err(e) => {
                        operation.failed += 1;
                        tracing::info!(job = %record.job.id, operation = %operation.id, "a bulk retry skipped a job: {e}");
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
            tracing::warn!(operation = %operation.id, error = %e, "a bulk retry failed");
        }
        if let Err(e) = self.store.save_operation(&operation).await {
            tracing::error!(operation = %operation.id, error = %e, "could not save how a bulk operation ended");
        }
    }
}

/// Most dead letters a count reads before it answers "at least this many".
pub const COUNT_CAP: u64 = 10_000;

impl super::Operations<'_> {
    /// How many dead letters of `tenant` a retry with `filter` would take now, read the way
    /// the retry reads them, up to [`COUNT_CAP`]; the flag says whether the count stopped
    /// there. Asked before a bulk retry, so that whoever starts one knows what it will do.
    pub async fn count_dead_letters(
        &self,
        tenant: &TenantId,
        filter: &DeadLetterFilter,
    ) -> Result<(u64, bool), EngineError> {
        let (mut cursor, mut matching) = (None, 0_u64);
        loop {
            let page = filter.page(cursor);
            let records = self.store.list_jobs(tenant, &page).await?;
            matching += records.iter().filter(|r| filter.admits(r)).count() as u64;
            if matching >= COUNT_CAP {
                return Ok((COUNT_CAP, true));
            }
            if records.len() < PAGE as usize {
                return Ok((matching, false));
            }
            cursor = records.last().map(|r| r.seq);
        }
    }

    /// Starts retrying every dead letter of `tenant` that `filter` matches, in the
    /// background; answers the operation as it starts (its progress follows in the store).
    pub async fn retry_dead_letters(
        &self,
        tenant: &TenantId,
        filter: DeadLetterFilter,
        actor: &str,
    ) -> Result<Operation, EngineError> {
        let operation = Operation {
            id: uuid::Uuid::now_v7().to_string(),
            tenant: tenant.clone(),
            action: "retry-dead-letters".into(),
            filter: serde_json::to_string(&filter).map_err(|e| EngineError::Invalid(e.to_string()))?,
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
        tokio::spawn(async move { engine.run_retry(started, filter).await });
        Ok(operation)
    }
}
