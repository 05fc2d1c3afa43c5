//! The W3C `traceparent` a job was submitted under, kept only while the host exports
//! spans, so that its steps — run later, on any host — join the caller's trace.

use async_trait::async_trait;
use spindle_core::JobId;

use super::error::StoreError;
use super::handle::SqlStore;
use super::rows::insert_rows;
use super::sql::{Ty, Value};

/// Jobs' trace parents.
#[async_trait]
pub trait TraceStore: Send + Sync {
    /// Keeps each job's trace parent (before the jobs are inserted: a job claimed the
    /// moment it is written must already find its parent).
    async fn keep_traceparents(&self, parents: &[(JobId, String)]) -> Result<(), StoreError>;
    /// Forgets the trace parents of jobs that were not inserted after all.
    async fn forget_traceparents(&self, jobs: &[JobId]) -> Result<(), StoreError>;
    /// `job`'s trace parent, if it was submitted with one.
    async fn traceparent(&self, job: JobId) -> Result<Option<String>, StoreError>;
}

#[async_trait]
impl TraceStore for SqlStore {
    async fn keep_traceparents(&self, parents: &[(JobId, String)]) -> Result<(), StoreError> {
        if parents.is_empty() {
            return Ok(());
        }
        let rows = parents.iter().map(|(job, parent)| vec![Value::from(job.to_string()), Value::from(parent.as_str())]);
        let mut tx = self.db.begin().await?;
        insert_rows(&mut tx, "INSERT INTO job_traces (job_id, traceparent)", "", 2, rows.collect()).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn forget_traceparents(&self, jobs: &[JobId]) -> Result<(), StoreError> {
        for job in jobs {
            self.db.execute("DELETE FROM job_traces WHERE job_id = $1", vec![Value::from(job.to_string())]).await?;
        }
        Ok(())
    }

    async fn traceparent(&self, job: JobId) -> Result<Option<String>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT traceparent FROM job_traces WHERE job_id = $1",
                vec![Value::from(job.to_string())],
                &[Ty::Text],
            )
            .await?;
        rows.first().map(|r| r.text(0, "job_traces.traceparent")).transpose()
    }
}
