//! What workflows keep beside the job rows: a parent's children (found by the parent's
//! fan-out slot), signals waiting to be consumed in order, and cron schedules.

use async_trait::async_trait;
use spindle_core::schedule::{CatchUp, Overlap, Schedule, ScheduleState};
use spindle_core::{JobId, Timestamp};

use super::error::StoreError;
use super::handle::SqlStore;
use super::job_rows::{JOB_COLS, fetch_jobs};
use super::records::JobRecord;
use super::records::TenantId;
use super::rows::Columns;
use super::sql::{Row, Ty, Value};

/// A cron schedule as stored: what a tenant asked for, and its machine.
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
    /// When it was created.
    pub created_at: Timestamp,
    /// Its state, rules, next time and last firing.
    pub machine: Schedule,
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
    /// The body of the oldest signal of `name` not yet consumed by `job`.
    async fn oldest_signal(&self, job: JobId, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Creates a schedule (its name must be free in its tenant).
    async fn insert_schedule(&self, schedule: &ScheduleRow) -> Result<(), StoreError>;
    /// A tenant's schedules, by name.
    async fn schedules(&self, tenant: &TenantId) -> Result<Vec<ScheduleRow>, StoreError>;
    /// One schedule.
    async fn schedule(&self, tenant: &TenantId, name: &str) -> Result<Option<ScheduleRow>, StoreError>;
    /// Writes a schedule's machine as a transition left it; lands only if the stored
    /// machine still is `expected` (its state and next time): answers whether it landed.
    async fn update_schedule(&self, schedule: &ScheduleRow, expected: &Schedule) -> Result<bool, StoreError>;
    /// Deletes a schedule; answers whether it existed.
    async fn delete_schedule(&self, tenant: &TenantId, name: &str) -> Result<bool, StoreError>;
    /// The soonest next time of the schedules not paused.
    async fn next_schedule_at(&self) -> Result<Option<Timestamp>, StoreError>;
    /// Schedules due at `now` (not paused), soonest first.
    async fn due_schedules(&self, now: Timestamp, limit: u32) -> Result<Vec<ScheduleRow>, StoreError>;
}

/// The columns a [`ScheduleRow`] is read from.
static SCHEDULE: Columns = Columns {
    table: "schedules",
    names: &[
        "tenant_id",
        "name",
        "kind",
        "cron",
        "timezone",
        "input",
        "catch_up",
        "overlap",
        "paused",
        "next_fire_at",
        "last_fired_at",
        "last_job_id",
        "fired",
        "created_at",
    ],
    tys: &[
        Ty::Text,
        Ty::Text,
        Ty::Text,
        Ty::Text,
        Ty::Text,
        Ty::Blob,
        Ty::Text,
        Ty::Text,
        Ty::Int,
        Ty::Int,
        Ty::OptInt,
        Ty::OptText,
        Ty::Int,
        Ty::Int,
    ],
};

fn schedule_from_row(mut row: Row) -> Result<ScheduleRow, StoreError> {
    let mut r = SCHEDULE.read(&mut row);
    let machine = Schedule {
        state: match r.int("paused")? {
            0 => ScheduleState::Active,
            1 => ScheduleState::Paused,
            other => return Err(r.corrupt("paused", format!("{other} is neither 0 nor 1"))),
        },
        next_fire_at: r.ts("next_fire_at")?,
        catch_up: r.parse("catch_up", CatchUp::parse)?,
        overlap: r.parse("overlap", Overlap::parse)?,
        last_fired_at: r.opt_ts("last_fired_at")?,
        last_job: r.opt_id("last_job_id")?,
        fired: r.num("fired")?,
    };
    Ok(ScheduleRow {
        tenant: TenantId(r.text("tenant_id")?),
        name: r.text("name")?,
        kind: r.text("kind")?,
        cron: r.text("cron")?,
        timezone: r.text("timezone")?,
        input: r.take_blob("input")?,
        created_at: r.ts("created_at")?,
        machine,
    })
}

/// Reads schedules with `sql` (which selects [`SCHEDULE`]'s columns).
async fn fetch_schedules(db: &super::sql::Db, sql: &str, args: Vec<Value>) -> Result<Vec<ScheduleRow>, StoreError> {
    let rows = db.fetch(sql, args, SCHEDULE.tys).await.map_err(|e| SCHEDULE.in_table(e))?;
    rows.into_iter().map(schedule_from_row).collect()
}

/// The stored `paused` flag of a machine's state.
fn paused(machine: &Schedule) -> i64 {
    i64::from(machine.state == ScheduleState::Paused)
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
        rows.first().map_or(Ok(0), |r| r.num(0, "jobs.count (children settled)"))
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
        rows.iter().map(|r| super::rows::parse_id(&r.text(0, "jobs.id (child)")?, "jobs.id (child)")).collect()
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
        rows.first_mut()
            .map(|r| {
                r.take_opt_blob(0, "signals.body")?
                    .ok_or_else(|| super::rows::corrupt("signals.body: NULL where bytes must be"))
            })
            .transpose()
    }

    async fn insert_schedule(&self, s: &ScheduleRow) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        let inserted = tx
            .fetch(
                &format!(
                    "INSERT INTO schedules ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, NULL, 0, $11) \
                     ON CONFLICT (tenant_id, name) DO NOTHING RETURNING name",
                    SCHEDULE.list()
                ),
                vec![
                    Value::from(s.tenant.0.as_str()),
                    Value::from(s.name.as_str()),
                    Value::from(s.kind.as_str()),
                    Value::from(s.cron.as_str()),
                    Value::from(s.timezone.as_str()),
                    Value::from(s.input.clone()),
                    Value::from(s.machine.catch_up.as_str()),
                    Value::from(s.machine.overlap.as_str()),
                    Value::from(paused(&s.machine)),
                    Value::from(s.machine.next_fire_at.as_micros()),
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
        let sql = format!("SELECT {} FROM schedules WHERE tenant_id = $1 ORDER BY name", SCHEDULE.list());
        fetch_schedules(&self.db, &sql, vec![Value::from(tenant.0.as_str())]).await
    }

    async fn schedule(&self, tenant: &TenantId, name: &str) -> Result<Option<ScheduleRow>, StoreError> {
        let sql = format!("SELECT {} FROM schedules WHERE tenant_id = $1 AND name = $2", SCHEDULE.list());
        Ok(fetch_schedules(&self.db, &sql, vec![Value::from(tenant.0.as_str()), Value::from(name)]).await?.pop())
    }

    async fn update_schedule(&self, s: &ScheduleRow, expected: &Schedule) -> Result<bool, StoreError> {
        let m = &s.machine;
        let changed = self
            .db
            .execute(
                "UPDATE schedules SET paused = $1, next_fire_at = $2, last_fired_at = $3, last_job_id = $4, fired = $5 \
                 WHERE tenant_id = $6 AND name = $7 AND paused = $8 AND next_fire_at = $9",
                vec![
                    Value::from(paused(m)),
                    Value::from(m.next_fire_at.as_micros()),
                    Value::from(m.last_fired_at.map(Timestamp::as_micros)),
                    Value::from(m.last_job.map(|j| j.to_string())),
                    Value::from(i64::try_from(m.fired).unwrap_or(i64::MAX)),
                    Value::from(s.tenant.0.as_str()),
                    Value::from(s.name.as_str()),
                    Value::from(paused(expected)),
                    Value::from(expected.next_fire_at.as_micros()),
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
            "SELECT {} FROM schedules WHERE paused = 0 AND next_fire_at <= $1 ORDER BY next_fire_at LIMIT $2",
            SCHEDULE.list()
        );
        fetch_schedules(&self.db, &sql, vec![Value::from(now.as_micros()), Value::from(i64::from(limit))]).await
    }

    async fn next_schedule_at(&self) -> Result<Option<Timestamp>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT next_fire_at FROM schedules WHERE paused = 0 ORDER BY next_fire_at LIMIT 1",
                Vec::new(),
                &[Ty::Int],
            )
            .await?;
        rows.first().map(|r| r.int(0, "schedules.next_fire_at").map(Timestamp::from_micros)).transpose()
    }
}
