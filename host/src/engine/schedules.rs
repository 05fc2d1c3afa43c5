//! Cron schedules through the core's schedule machine: each change (create, pause,
//! resume, delete, a pass that fires) reads the schedule, asks
//! [`spindle_core::schedule::transition`] and writes what it answers, checked against
//! the row it read; a change that lost a race reads again.
//!
//! A pass's firings are jobs whose idempotency key is the schedule and the time
//! ([`firing_key`]): they are submitted before the schedule's write, so a pass carried
//! out twice (a crash in between, two hosts during a lease hand-over) derives the same
//! times from the same stored row and submits each once.

use serde::{Deserialize, Serialize};
use spindle_core::policy::priority::Priority;
use spindle_core::schedule::{
    CatchUp, CronPlan, Overlap, Schedule, ScheduleEvent, ScheduleRefusal, ScheduleState, firing_key, transition,
};
use spindle_core::{JobId, Timestamp};

use super::{Engine, EngineError, SubmitRequest};
use crate::registry::RegistryError;
use crate::store::{ScheduleRow, TenantId};

/// Longest a schedule's name may be.
pub const MAX_SCHEDULE_NAME: usize = 64;
/// Most due schedules one pass reads.
const PASS_LIMIT: u32 = 100;

/// A schedule as a tenant asks for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRequest {
    /// Its name, unique in the tenant.
    pub name: String,
    /// The kind each firing submits.
    pub kind: String,
    /// A cron expression: five fields (minute to weekday), or six with seconds first.
    pub cron: String,
    /// The IANA time zone it is read in (default UTC).
    #[serde(default = "utc")]
    pub timezone: String,
    /// Each firing's input (JSON).
    #[serde(default)]
    pub input: serde_json::Value,
    /// `none` (default), `one` or `all`.
    #[serde(default = "none")]
    pub catch_up: String,
    /// `skip` (default) or `allow`.
    #[serde(default = "skip")]
    pub overlap: String,
}

fn utc() -> String {
    "UTC".into()
}
fn none() -> String {
    CatchUp::None.as_str().into()
}
fn skip() -> String {
    Overlap::Skip.as_str().into()
}

/// A request's fields, checked (not the kind).
fn check(request: &ScheduleRequest) -> Result<(CronPlan, CatchUp, Overlap), EngineError> {
    let name_ok = !request.name.is_empty()
        && request.name.len() <= MAX_SCHEDULE_NAME
        && request.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(EngineError::Invalid(format!(
            "schedule name {:?}: 1-{MAX_SCHEDULE_NAME} letters, digits, '-', '_' or '.'",
            request.name
        )));
    }
    let catch_up = CatchUp::parse(&request.catch_up)
        .ok_or_else(|| EngineError::Invalid(format!("catch-up {:?}: none, one or all", request.catch_up)))?;
    let overlap = Overlap::parse(&request.overlap)
        .ok_or_else(|| EngineError::Invalid(format!("overlap {:?}: skip or allow", request.overlap)))?;
    let plan = CronPlan::parse(&request.cron, &request.timezone).map_err(|e| EngineError::Invalid(e.to_string()))?;
    Ok((plan, catch_up, overlap))
}

impl Engine {
    /// Reads a schedule, asks the machine, writes its answer; reads again when another
    /// change landed in between.
    async fn change_schedule(
        &self,
        tenant: &TenantId,
        name: &str,
        event: ScheduleEvent,
    ) -> Result<ScheduleRow, EngineError> {
        self.may_write().await?;
        for _ in 0..=self.config.conflict_retries {
            let row = self.workflows().schedule(tenant, name).await?;
            let plan = CronPlan::parse(&row.cron, &row.timezone).map_err(|e| EngineError::Invalid(e.to_string()))?;
            let changed = transition(&row.machine, &plan, event, self.now()).map_err(schedule_refused)?;
            if changed.schedule.state == ScheduleState::Deleted {
                return if self.store.delete_schedule(tenant, name).await? {
                    Ok(row)
                } else {
                    Err(EngineError::NotFound)
                };
            }
            let written = ScheduleRow { machine: changed.schedule, ..row.clone() };
            if written.machine == row.machine || self.store.update_schedule(&written, &row.machine).await? {
                return Ok(written);
            }
        }
        Err(EngineError::Contention)
    }

    /// A pass over one due schedule: the machine's firings submitted, then the
    /// schedule written (checked against the row read).
    async fn fire_schedule(&self, row: ScheduleRow, now: Timestamp) -> Result<usize, EngineError> {
        let plan = match CronPlan::parse(&row.cron, &row.timezone) {
            Ok(plan) => plan,
            Err(e) => {
                tracing::error!(schedule = %row.name, error = %e, "a stored schedule does not parse; paused");
                let paused = Schedule { state: ScheduleState::Paused, ..row.machine.clone() };
                self.store.update_schedule(&ScheduleRow { machine: paused, ..row.clone() }, &row.machine).await?;
                return Ok(0);
            }
        };
        let last_open = match (row.machine.overlap, row.machine.last_job) {
            (Overlap::Skip, Some(job)) => self.store.job(job).await?.is_some_and(|r| !r.job.state.is_final()),
            _ => false,
        };
        let pass = match transition(&row.machine, &plan, ScheduleEvent::Pass { last_open }, now) {
            Ok(pass) => pass,
            // Another pass (or a pause) moved it on since it was read.
            Err(ScheduleRefusal::NotDue { .. } | ScheduleRefusal::Paused | ScheduleRefusal::Deleted) => return Ok(0),
            Err(e) => return Err(schedule_refused(e)),
        };
        if pass.skipped > 0 {
            tracing::info!(schedule = %row.name, skipped = pass.skipped, "schedule times skipped by its rules");
        }
        let mut machine = pass.schedule;
        let mut count = 0;
        for at in pass.fire {
            if let Some(job) = self.fire_one(&row, at).await? {
                machine.record_firing(at, job);
                count += 1;
            }
        }
        self.store.update_schedule(&ScheduleRow { machine, ..row.clone() }, &row.machine).await?;
        Ok(count)
    }

    /// Submits the job of one firing; `None` when its kind is gone or its input no
    /// longer follows the kind's schema (that time fires nothing).
    async fn fire_one(&self, row: &ScheduleRow, at: Timestamp) -> Result<Option<JobId>, EngineError> {
        match self.submission().submit(&row.tenant, firing_request(row, at)).await {
            Ok(inserted) => Ok(Some(inserted.record().job.id)),
            Err(EngineError::UnknownKind(kind)) => {
                tracing::warn!(schedule = %row.name, kind, "a schedule's kind is gone; nothing fired");
                Ok(None)
            }
            // A version deployed since the schedule was made may declare a schema its
            // input breaks: that time fires nothing, and the schedule moves on.
            Err(e @ EngineError::InvalidInput { .. }) => {
                tracing::warn!(schedule = %row.name, error = %e, "a schedule's input no longer follows its kind's schema; nothing fired");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

impl super::Workflows<'_> {
    /// Creates a schedule for `tenant`; it first fires at the expression's first time
    /// after now.
    pub async fn create_schedule(
        &self,
        tenant: &TenantId,
        request: ScheduleRequest,
    ) -> Result<ScheduleRow, EngineError> {
        self.may_write().await?;
        let (plan, catch_up, overlap) = check(&request)?;
        let current = match self.registry.current(tenant, &request.kind).await {
            Err(RegistryError::UnknownKind(kind)) => return Err(EngineError::UnknownKind(kind)),
            other => other?,
        };
        // Refused now rather than at every firing: the input is fixed.
        if let Some(schema) = &current.kind.input_schema
            && let Err(violations) = schema.check_value(&request.input)
        {
            return Err(EngineError::InvalidInput { kind: request.kind, index: None, violations });
        }
        let input = serde_json::to_vec(&request.input).map_err(|e| EngineError::Invalid(e.to_string()))?;
        if input.len() > self.config.max_payload_bytes {
            return Err(EngineError::PayloadTooLarge { bytes: input.len(), cap: self.config.max_payload_bytes });
        }
        let now = self.now();
        let machine = Schedule::create(&plan, catch_up, overlap, now)
            .ok_or_else(|| EngineError::Invalid("the expression never fires".into()))?;
        let row = ScheduleRow {
            tenant: tenant.clone(),
            name: request.name,
            kind: request.kind,
            cron: request.cron,
            timezone: request.timezone,
            input,
            created_at: now,
            machine,
        };
        self.store.insert_schedule(&row).await?;
        Ok(row)
    }

    /// A tenant's schedules, by name.
    pub async fn schedules(&self, tenant: &TenantId) -> Result<Vec<ScheduleRow>, EngineError> {
        Ok(self.store.schedules(tenant).await?)
    }

    /// One of a tenant's schedules.
    pub async fn schedule(&self, tenant: &TenantId, name: &str) -> Result<ScheduleRow, EngineError> {
        self.store.schedule(tenant, name).await?.ok_or(EngineError::NotFound)
    }

    /// Pauses a schedule (pausing a paused one changes nothing).
    pub async fn pause_schedule(&self, tenant: &TenantId, name: &str) -> Result<ScheduleRow, EngineError> {
        self.change_schedule(tenant, name, ScheduleEvent::Pause).await
    }

    /// Resumes a schedule: it fires next at its first time after now (times passed while
    /// it was paused are skipped).
    pub async fn resume_schedule(&self, tenant: &TenantId, name: &str) -> Result<ScheduleRow, EngineError> {
        self.change_schedule(tenant, name, ScheduleEvent::Resume).await
    }

    /// Fires a schedule by hand, now (its whole second), active or paused: submits the
    /// job a firing at that time submits (same idempotency key, so a trigger in the second
    /// a pass fires makes one job) and records the firing. Its next cron time does not
    /// move. Answers the job's record and the schedule as written.
    ///
    /// Like a pass, the job goes in before the schedule's write; a write that lost a race
    /// reads the schedule again and fires the same time, which finds the same job.
    pub async fn trigger_schedule(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<(crate::engine::JobRecord, ScheduleRow), EngineError> {
        self.may_write().await?;
        let now = self.now();
        for _ in 0..=self.config.conflict_retries {
            let row = self.workflows().schedule(tenant, name).await?;
            let plan = CronPlan::parse(&row.cron, &row.timezone).map_err(|e| EngineError::Invalid(e.to_string()))?;
            let fired = transition(&row.machine, &plan, ScheduleEvent::Trigger, now).map_err(schedule_refused)?;
            let mut machine = fired.schedule;
            let mut job = None;
            for at in fired.fire {
                let inserted = self.submission().submit(tenant, firing_request(&row, at)).await?;
                machine.record_firing(at, inserted.record().job.id);
                job = Some(inserted.record().clone());
            }
            let job = job.ok_or_else(|| EngineError::Invalid("the trigger fired nothing".into()))?;
            let written = ScheduleRow { machine, ..row.clone() };
            if self.store.update_schedule(&written, &row.machine).await? {
                return Ok((job, written));
            }
        }
        Err(EngineError::Contention)
    }

    /// Deletes a schedule; the jobs it fired are untouched.
    pub async fn delete_schedule(&self, tenant: &TenantId, name: &str) -> Result<(), EngineError> {
        self.change_schedule(tenant, name, ScheduleEvent::Delete).await.map(drop)
    }

    /// One pass over the due schedules (the caller holds the scheduler's lease):
    /// answers the jobs submitted.
    pub async fn fire_due_schedules(&self) -> Result<usize, EngineError> {
        if self.refusing() {
            return Ok(0);
        }
        let now = self.now();
        let mut submitted = 0;
        for row in self.store.due_schedules(now, PASS_LIMIT).await? {
            submitted += self.fire_schedule(row, now).await?;
        }
        Ok(submitted)
    }

    /// When the next schedule is due, if any is active.
    pub async fn next_schedule_at(&self) -> Result<Option<Timestamp>, EngineError> {
        Ok(self.store.next_schedule_at().await?)
    }
}

fn schedule_refused(refusal: ScheduleRefusal) -> EngineError {
    match refusal {
        ScheduleRefusal::Deleted => EngineError::NotFound,
        other => EngineError::Invalid(other.to_string()),
    }
}

/// The submission of `row`'s firing at `at`: keyed by the time, so that a firing submitted
/// twice (a pass, a retried write, a trigger) is one job.
fn firing_request(row: &ScheduleRow, at: Timestamp) -> SubmitRequest {
    SubmitRequest {
        kind: row.kind.clone(),
        input: row.input.clone(),
        priority: Priority::Scheduled,
        run_at: None,
        idempotency_key: Some(firing_key(&row.name, at)),
        lease_keys: Vec::new(),
        traceparent: None,
    }
}
