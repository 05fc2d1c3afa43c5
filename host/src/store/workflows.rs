//! What workflows keep beside the job rows: a parent's children (found by the parent's
//! fan-out slot), signals waiting to be consumed in order, and cron schedules.

use async_trait::async_trait;
use spindle_core::{JobId, Timestamp};

use super::jobs::JobRecord;
use super::rows::{JOB_COLS, fetch_jobs};
use super::sql::{Ty, Value};
use super::{SqlStore, StoreError, TenantId};

/// A cron schedule as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleRow {
    /// Its tenant.
    pub tenant: TenantId,
    /// Its name, unique in the tenant.
    pub name: String,
    /// The kind each firing submits.
    pub kind: String,
    /// The cron expression (five fields, or six with seconds).
    pub cron: String,
    /// The IANA time zone the expression is read in.
    pub timezone: String,
    /// Each firing's input.
    pub input: Vec<u8>,
    /// `none`, `one` or `all`: what to fire for times missed while no host fired.
    pub catch_up: String,
    /// `skip` or `allow`: whether a firing may start while the last one is open.
    pub overlap: String,
    /// Whether it is paused.
    pub paused: bool,
    /// The next time it fires.
    pub next_fire_at: Timestamp,
    /// The last time it fired.
    pub last_fired_at: Option<Timestamp>,
    /// The job of its last firing.
    pub last_job: Option<JobId>,
    /// Firings so far.
    pub fired: i64,
    /// When it was created.
    pub created_at: Timestamp,
}

/// Children, signals and schedules.
#[async_trait]
pub trait WorkflowStore: Send + Sync {
    /// The children of `parent`'s fan-out `slot`, in their order.
    async fn children(&self, parent: JobId, slot: &str) -> Result<Vec<JobRecord>, StoreError>;
    /// How many children of `parent`'s fan-out `slot` are final.
    async fn settled_children(&self, parent: JobId, slot: &str) -> Result<u32, StoreError>;
    /// `parent`'s open children (of one fan-out, or all).
    async fn open_children(&self, parent: JobId, slot: Option<&str>) -> Result<Vec<JobId>, StoreError>;
    /// Stores a signal for `job`; answers its id.
    async fn insert_signal(&self, job: JobId, name: &str, body: &[u8], now: Timestamp) -> Result<i64, StoreError>;
    /// Withdraws a signal its job refused (it was final).
    async fn delete_signal(&self, id: i64) -> Result<(), StoreError>;
    /// The body of the oldest signal of `name` not yet consumed by `job`.
    async fn oldest_signal(&self, job: JobId, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Creates a schedule (its name must be free in its tenant).
    async fn insert_schedule(&self, schedule: &ScheduleRow) -> Result<(), StoreError>;
    /// A tenant's schedules, by name.
    async fn schedules(&self, tenant: &TenantId) -> Result<Vec<ScheduleRow>, StoreError>;
    /// One schedule.
    async fn schedule(&self, tenant: &TenantId, name: &str) -> Result<Option<ScheduleRow>, StoreError>;
    /// Pauses or resumes a schedule, with its next firing time; answers whether it existed.
    async fn set_schedule_paused(
        &self,
        tenant: &TenantId,
        name: &str,
        paused: bool,
        next_fire_at: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Deletes a schedule; answers whether it existed.
    async fn delete_schedule(&self, tenant: &TenantId, name: &str) -> Result<bool, StoreError>;
    /// Schedules due at `now` (not paused), soonest first.
    async fn due_schedules(&self, now: Timestamp, limit: u32) -> Result<Vec<ScheduleRow>, StoreError>;
    /// Records a pass over a due schedule: its next firing time and, when it fired, the
    /// last firing. Only lands if the schedule still expects `expected_next` (a
    /// concurrent pause, resume or pass wins).
    async fn advance_schedule(
        &self,
        schedule: &ScheduleRow,
        expected_next: Timestamp,
        fired: Option<(Timestamp, JobId, i64)>,
    ) -> Result<bool, StoreError>;
}

const SCHEDULE_COLS: &str = "tenant_id, name, kind, cron, timezone, input, catch_up, overlap, paused, next_fire_at, \
                             last_fired_at, last_job_id, fired, created_at";
const SCHEDULE_TYS: &[Ty] = &[
    Ty::Text,
    Ty::Text,
    Ty::Text,
    Ty::Text,
    Ty::Text,
    Ty::OptBlob,
    Ty::Text,
    Ty::Text,
    Ty::Int,
    Ty::Int,
    Ty::OptInt,
    Ty::OptText,
    Ty::Int,
    Ty::Int,
];

fn schedule_from_row(mut r: super::sql::Row) -> Result<ScheduleRow, StoreError> {
    Ok(ScheduleRow {
        tenant: TenantId(r.text(0)),
        name: r.text(1),
        kind: r.text(2),
        cron: r.text(3),
        timezone: r.text(4),
        input: r.take_blob(5).unwrap_or_default(),
        catch_up: r.text(6),
        overlap: r.text(7),
        paused: r.int(8) != 0,
        next_fire_at: Timestamp::from_micros(r.int(9)),
        last_fired_at: r.opt_int(10).map(Timestamp::from_micros),
        last_job: r.opt_text(11).map(|id| super::rows::parse_id(&id, "schedule's last job")).transpose()?,
        fired: r.int(12),
        created_at: Timestamp::from_micros(r.int(13)),
    })
}

#[async_trait]
impl WorkflowStore for SqlStore {
    async fn children(&self, parent: JobId, slot: &str) -> Result<Vec<JobRecord>, StoreError> {
        let sql =
            format!("SELECT {JOB_COLS} FROM jobs WHERE parent_id = $1 AND parent_slot = $2 ORDER BY parent_index");
        let mut tx = self.db.begin().await?;
        let records = fetch_jobs(&mut tx, &sql, vec![Value::from(parent.to_string()), Value::from(slot)]).await?;
        tx.commit().await?;
        Ok(records)
    }

    async fn settled_children(&self, parent: JobId, slot: &str) -> Result<u32, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT count(*) FROM jobs WHERE parent_id = $1 AND parent_slot = $2 AND settled_at IS NOT NULL",
                vec![Value::from(parent.to_string()), Value::from(slot)],
                &[Ty::Int],
            )
            .await?;
        Ok(rows.first().map_or(0, |r| u32::try_from(r.int(0)).unwrap_or(u32::MAX)))
    }

    async fn open_children(&self, parent: JobId, slot: Option<&str>) -> Result<Vec<JobId>, StoreError> {
        let mut args = vec![Value::from(parent.to_string())];
        let mut sql = "SELECT id FROM jobs WHERE parent_id = $1 AND settled_at IS NULL".to_owned();
        if let Some(slot) = slot {
            sql.push_str(" AND parent_slot = $2");
            args.push(Value::from(slot));
        }
        sql.push_str(" ORDER BY parent_slot, parent_index");
        let rows = self.db.fetch(&sql, args, &[Ty::Text]).await?;
        rows.iter().map(|r| super::rows::parse_id(&r.text(0), "child id")).collect()
    }

    async fn insert_signal(&self, job: JobId, name: &str, body: &[u8], now: Timestamp) -> Result<i64, StoreError> {
        let mut tx = self.db.begin().await?;
        let rows = tx
            .fetch(
                "INSERT INTO signals (job_id, name, body, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
                vec![
                    Value::from(job.to_string()),
                    Value::from(name),
                    Value::from(body.to_vec()),
                    Value::from(now.as_micros()),
                ],
                &[Ty::Int],
            )
            .await?;
        tx.commit().await?;
        Ok(rows.first().map_or(0, |r| r.int(0)))
    }

    async fn delete_signal(&self, id: i64) -> Result<(), StoreError> {
        self.db.execute("DELETE FROM signals WHERE id = $1", vec![Value::from(id)]).await?;
        Ok(())
    }

    async fn oldest_signal(&self, job: JobId, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut rows = self
            .db
            .fetch(
                "SELECT body FROM signals WHERE job_id = $1 AND name = $2 AND consumed_at IS NULL ORDER BY id LIMIT 1",
                vec![Value::from(job.to_string()), Value::from(name)],
                &[Ty::OptBlob],
            )
            .await?;
        Ok(rows.first_mut().map(|r| r.take_blob(0).unwrap_or_default()))
    }

    async fn insert_schedule(&self, s: &ScheduleRow) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        let inserted = tx
            .fetch(
                &format!(
                    "INSERT INTO schedules ({SCHEDULE_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, NULL, 0, $11) \
                     ON CONFLICT (tenant_id, name) DO NOTHING RETURNING name"
                ),
                vec![
                    Value::from(s.tenant.0.as_str()),
                    Value::from(s.name.as_str()),
                    Value::from(s.kind.as_str()),
                    Value::from(s.cron.as_str()),
                    Value::from(s.timezone.as_str()),
                    Value::from(s.input.clone()),
                    Value::from(s.catch_up.as_str()),
                    Value::from(s.overlap.as_str()),
                    Value::from(i64::from(s.paused)),
                    Value::from(s.next_fire_at.as_micros()),
                    Value::from(s.created_at.as_micros()),
                ],
                &[Ty::Text],
            )
            .await?;
        tx.commit().await?;
        if inserted.is_empty() {
            return Err(StoreError::Duplicate(format!("schedule {}", s.name)));
        }
        Ok(())
    }

    async fn schedules(&self, tenant: &TenantId) -> Result<Vec<ScheduleRow>, StoreError> {
        let sql = format!("SELECT {SCHEDULE_COLS} FROM schedules WHERE tenant_id = $1 ORDER BY name");
        let rows = self.db.fetch(&sql, vec![Value::from(tenant.0.as_str())], SCHEDULE_TYS).await?;
        rows.into_iter().map(schedule_from_row).collect()
    }

    async fn schedule(&self, tenant: &TenantId, name: &str) -> Result<Option<ScheduleRow>, StoreError> {
        let sql = format!("SELECT {SCHEDULE_COLS} FROM schedules WHERE tenant_id = $1 AND name = $2");
        let rows = self.db.fetch(&sql, vec![Value::from(tenant.0.as_str()), Value::from(name)], SCHEDULE_TYS).await?;
        rows.into_iter().next().map(schedule_from_row).transpose()
    }

    async fn set_schedule_paused(
        &self,
        tenant: &TenantId,
        name: &str,
        paused: bool,
        next_fire_at: Timestamp,
    ) -> Result<bool, StoreError> {
        let changed = self
            .db
            .execute(
                "UPDATE schedules SET paused = $1, next_fire_at = $2 WHERE tenant_id = $3 AND name = $4",
                vec![
                    Value::from(i64::from(paused)),
                    Value::from(next_fire_at.as_micros()),
                    Value::from(tenant.0.as_str()),
                    Value::from(name),
                ],
            )
            .await?;
        Ok(changed > 0)
    }

    async fn delete_schedule(&self, tenant: &TenantId, name: &str) -> Result<bool, StoreError> {
        let changed = self
            .db
            .execute(
                "DELETE FROM schedules WHERE tenant_id = $1 AND name = $2",
                vec![Value::from(tenant.0.as_str()), Value::from(name)],
            )
            .await?;
        Ok(changed > 0)
    }

    async fn due_schedules(&self, now: Timestamp, limit: u32) -> Result<Vec<ScheduleRow>, StoreError> {
        let sql = format!(
            "SELECT {SCHEDULE_COLS} FROM schedules WHERE paused = 0 AND next_fire_at <= $1 ORDER BY next_fire_at LIMIT $2"
        );
        let rows = self
            .db
            .fetch(&sql, vec![Value::from(now.as_micros()), Value::from(i64::from(limit))], SCHEDULE_TYS)
            .await?;
        rows.into_iter().map(schedule_from_row).collect()
    }

    async fn advance_schedule(
        &self,
        s: &ScheduleRow,
        expected_next: Timestamp,
        fired: Option<(Timestamp, JobId, i64)>,
    ) -> Result<bool, StoreError> {
        let (sql, mut args) = match fired {
            Some((at, job, count)) => (
                "UPDATE schedules SET next_fire_at = $1, last_fired_at = $2, last_job_id = $3, fired = fired + $4 \
                 WHERE tenant_id = $5 AND name = $6 AND next_fire_at = $7 AND paused = 0",
                vec![
                    Value::from(s.next_fire_at.as_micros()),
                    Value::from(at.as_micros()),
                    Value::from(job.to_string()),
                    Value::from(count),
                ],
            ),
            None => (
                "UPDATE schedules SET next_fire_at = $1 WHERE tenant_id = $2 AND name = $3 AND next_fire_at = $4 \
                 AND paused = 0",
                vec![Value::from(s.next_fire_at.as_micros())],
            ),
        };
        args.extend([
            Value::from(s.tenant.0.as_str()),
            Value::from(s.name.as_str()),
            Value::from(expected_next.as_micros()),
        ]);
        Ok(self.db.execute(sql, args).await? > 0)
    }
}
