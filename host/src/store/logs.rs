//! Each job's logs: what its steps' guests logged and printed, per attempt, kept with the
//! job (and pruned with it) so that its tenant reads them through the API.
//!
//! A job keeps at most [`LogCaps`] lines and bytes; past them its lines are counted, not
//! kept, and the first one past says so in a line of the host's, so that neither a
//! chatty guest nor a long job fills the database.

use async_trait::async_trait;
use spindle_core::reports::{GuestLine, Level, Stream};
use spindle_core::{JobId, Timestamp};

use super::error::StoreError;
use super::handle::SqlStore;
use super::rows::{Columns, MAX_PARAMS, insert_rows};
use super::sql::{Ty, Value};

/// How much of its lines a job keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogCaps {
    /// Lines (default 5,000).
    pub lines: u64,
    /// Bytes of their text (default 1 MiB).
    pub bytes: u64,
}

impl Default for LogCaps {
    fn default() -> Self {
        Self { lines: 5_000, bytes: 1 << 20 }
    }
}

/// A line as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    /// Its order within the whole store: a follower asks for lines after the last it saw.
    pub seq: i64,
    /// The step it came from.
    pub step: String,
    /// Its attempt.
    pub attempt: u32,
    /// When it was written.
    pub at: Timestamp,
    /// Its level.
    pub level: Level,
    /// Where it came from.
    pub stream: Stream,
    /// Its text.
    pub message: String,
}

/// A job's lines, and whether it reached its cap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobLogs {
    /// The lines asked for, in order.
    pub lines: Vec<LogLine>,
    /// Lines the job's cap dropped (0: it never reached it).
    pub dropped: u64,
}

/// Jobs' logs.
#[async_trait]
pub trait LogStore: Send + Sync {
    /// Keeps `lines` of `job`'s `step`, attempt `attempt`, within the job's `caps`.
    async fn append_logs(
        &self,
        job: JobId,
        step: &str,
        attempt: u32,
        lines: &[GuestLine],
        caps: LogCaps,
    ) -> Result<(), StoreError>;
    /// `job`'s lines after `after_seq` (0: from the first), of `step` only when given, at
    /// most `limit`; and how many its cap dropped.
    async fn job_logs(&self, job: JobId, step: Option<&str>, after_seq: i64, limit: u32)
    -> Result<JobLogs, StoreError>;
}

/// Columns of one `job_logs` row.
const LOG_COLS: usize = 7;

#[async_trait]
impl LogStore for SqlStore {
    async fn append_logs(
        &self,
        job: JobId,
        step: &str,
        attempt: u32,
        lines: &[GuestLine],
        caps: LogCaps,
    ) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        let id = job.to_string();
        let mut tx = self.db.begin().await?;
        let totals = tx
            .fetch(
                "SELECT lines, bytes, dropped FROM job_log_totals WHERE job_id = $1",
                vec![Value::from(id.as_str())],
                &[Ty::Int, Ty::Int, Ty::Int],
            )
            .await?;
        let (mut kept_lines, mut kept_bytes, mut dropped) = match totals.first() {
            Some(r) => (
                r.num::<u64>(0, "job_log_totals.lines")?,
                r.num::<u64>(1, "job_log_totals.bytes")?,
                r.num::<u64>(2, "job_log_totals.dropped")?,
            ),
            None => (0, 0, 0),
        };
        let mut rows = Vec::with_capacity(lines.len().min(MAX_PARAMS / LOG_COLS));
        let mut note = None;
        for line in lines {
            let bytes = line.message.len() as u64;
            if dropped > 0 || kept_lines + 1 > caps.lines || kept_bytes + bytes > caps.bytes {
                if dropped == 0 {
                    note = Some(line.at_micros);
                }
                dropped += 1;
                continue;
            }
            kept_lines += 1;
            kept_bytes += bytes;
            rows.push(vec![
                Value::from(id.as_str()),
                Value::from(step),
                Value::from(i64::from(attempt)),
                Value::from(line.at_micros),
                Value::from(line.level.as_str()),
                Value::from(line.stream.as_str()),
                Value::from(line.message.as_str()),
            ]);
        }
        if let Some(at) = note {
            // The first line past the cap says so, once per job.
            let message = format!(
                "the job reached its log cap ({} lines, {} bytes): later lines are counted, not kept",
                caps.lines, caps.bytes
            );
            rows.push(vec![
                Value::from(id.as_str()),
                Value::from(step),
                Value::from(i64::from(attempt)),
                Value::from(at),
                Value::from(Level::Warn.as_str()),
                Value::from(Stream::Host.as_str()),
                Value::from(message),
            ]);
        }
        insert_rows(
            &mut tx,
            "INSERT INTO job_logs (job_id, step, attempt, at, level, stream, message)",
            "",
            LOG_COLS,
            rows,
        )
        .await?;
        tx.execute(
            "INSERT INTO job_log_totals (job_id, lines, bytes, dropped) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (job_id) DO UPDATE SET lines = excluded.lines, bytes = excluded.bytes, dropped = excluded.dropped",
            vec![
                Value::from(id.as_str()),
                Value::from(kept_lines as i64),
                Value::from(kept_bytes as i64),
                Value::from(dropped as i64),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn job_logs(
        &self,
        job: JobId,
        step: Option<&str>,
        after_seq: i64,
        limit: u32,
    ) -> Result<JobLogs, StoreError> {
        let id = job.to_string();
        let mut args = vec![Value::from(id.as_str()), Value::from(after_seq), Value::from(i64::from(limit))];
        static LINE: Columns = Columns {
            table: "job_logs",
            names: &["id", "step", "attempt", "at", "level", "stream", "message"],
            tys: &[Ty::Int, Ty::Text, Ty::Int, Ty::Int, Ty::Text, Ty::Text, Ty::Text],
        };
        let mut sql = format!("SELECT {} FROM job_logs WHERE job_id = $1 AND id > $2", LINE.list());
        if let Some(step) = step {
            args.push(Value::from(step));
            sql.push_str(" AND step = $4");
        }
        sql.push_str(" ORDER BY id LIMIT $3");
        let rows = self.db.fetch(&sql, args, LINE.tys).await.map_err(|e| LINE.in_table(e))?;
        let mut lines = Vec::with_capacity(rows.len());
        for mut row in rows {
            let r = LINE.read(&mut row);
            lines.push(LogLine {
                seq: r.int("id")?,
                step: r.text("step")?,
                attempt: r.num("attempt")?,
                at: r.ts("at")?,
                level: r.parse("level", Level::parse)?,
                stream: r.parse("stream", Stream::parse)?,
                message: r.text("message")?,
            });
        }
        let dropped = self
            .db
            .fetch("SELECT dropped FROM job_log_totals WHERE job_id = $1", vec![Value::from(id.as_str())], &[Ty::Int])
            .await?
            .first()
            .map_or(Ok(0), |r| r.num::<u64>(0, "job_log_totals.dropped"))?;
        Ok(JobLogs { lines, dropped })
    }
}
