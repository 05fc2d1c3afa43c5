//! Cron schedules: each firing submits a job whose idempotency key is the schedule and
//! the time it fires for, so two hosts, a lease handed over mid-pass or a restart can
//! never fire one time twice. One host at a time fires (the `scheduler` singleton
//! lease, as the reconciler's), every second.
//!
//! Missed times (no host was up) are caught up as the schedule says: `none` fires only a
//! time at most one minute late, `one` the latest missed time however late, `all` every
//! missed time, oldest first. `overlap = skip` fires nothing while the last firing's job
//! is still open.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use croner::Cron;
use serde::{Deserialize, Serialize};
use spindle_core::Timestamp;
use spindle_core::policy::priority::Priority;

use crate::engine::{Engine, EngineError, SubmitRequest};
use crate::registry::RegistryError;
use crate::singleton::SingletonLoop;
use crate::store::{ScheduleRow, TenantId};

/// The singleton lease's name.
pub const LEASE: &str = "scheduler";
/// How often the holder looks for due schedules.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// How late a firing may be and still count as on time (`catch-up none`).
pub const ON_TIME: Duration = Duration::from_secs(60);
/// Most firings one schedule makes in one pass (`catch-up all`).
pub const MAX_CATCH_UP: usize = 1_000;

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
    "none".into()
}
fn skip() -> String {
    "skip".into()
}

/// A schedule's parsed expression and zone.
struct Plan {
    cron: Cron,
    zone: chrono_tz::Tz,
}

impl Plan {
    fn parse(cron: &str, timezone: &str) -> Result<Self, String> {
        let parsed = Cron::from_str(cron).map_err(|e| format!("cron {cron:?}: {e}"))?;
        let zone = chrono_tz::Tz::from_str(timezone).map_err(|_| format!("unknown time zone {timezone:?}"))?;
        Ok(Self { cron: parsed, zone })
    }

    /// The first time it fires after `after` (or at it, when `inclusive`).
    fn next(&self, after: Timestamp, inclusive: bool) -> Option<Timestamp> {
        let at = DateTime::<Utc>::from_timestamp_micros(after.as_micros())?.with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&at, inclusive).ok()?;
        Some(Timestamp::from_micros(next.timestamp_micros()))
    }
}

/// Checks a request's fields (not the kind).
fn check(request: &ScheduleRequest) -> Result<Plan, EngineError> {
    let name_ok = !request.name.is_empty()
        && request.name.len() <= 64
        && request.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(EngineError::Invalid(format!(
            "schedule name {:?}: 1-64 letters, digits, '-', '_' or '.'",
            request.name
        )));
    }
    if !matches!(request.catch_up.as_str(), "none" | "one" | "all") {
        return Err(EngineError::Invalid(format!("catch-up {:?}: none, one or all", request.catch_up)));
    }
    if !matches!(request.overlap.as_str(), "skip" | "allow") {
        return Err(EngineError::Invalid(format!("overlap {:?}: skip or allow", request.overlap)));
    }
    Plan::parse(&request.cron, &request.timezone).map_err(EngineError::Invalid)
}

/// Creates a schedule for `tenant`; it first fires at the expression's next time.
pub async fn create(engine: &Engine, tenant: &TenantId, request: ScheduleRequest) -> Result<ScheduleRow, EngineError> {
    let plan = check(&request)?;
    let current = match engine.registry().current(tenant, &request.kind).await {
        Err(RegistryError::UnknownKind(kind)) => return Err(EngineError::UnknownKind(kind)),
        other => other?,
    };
    // Refused now rather than at every firing: the input is fixed.
    if let Some(schema) = &current.kind.input_schema
        && let Err(violations) = schema.check_value(&request.input)
    {
        return Err(EngineError::InvalidInput { kind: request.kind, index: None, violations });
    }
    let input = serde_json::to_vec(&request.input).unwrap_or_default();
    if input.len() > engine.config().max_payload_bytes {
        return Err(EngineError::PayloadTooLarge { bytes: input.len(), cap: engine.config().max_payload_bytes });
    }
    let now = engine.now();
    let next = plan.next(now, false).ok_or_else(|| EngineError::Invalid("the expression never fires".into()))?;
    let row = ScheduleRow {
        tenant: tenant.clone(),
        name: request.name,
        kind: request.kind,
        cron: request.cron,
        timezone: request.timezone,
        input,
        catch_up: request.catch_up,
        overlap: request.overlap,
        paused: false,
        next_fire_at: next,
        last_fired_at: None,
        last_job: None,
        fired: 0,
        created_at: now,
    };
    engine.store().insert_schedule(&row).await?;
    Ok(row)
}

/// Pauses (`true`) or resumes a schedule; a resumed one fires next at its next time
/// after now (times passed while paused are skipped).
pub async fn set_paused(
    engine: &Engine,
    tenant: &TenantId,
    name: &str,
    paused: bool,
) -> Result<ScheduleRow, EngineError> {
    let row = engine.store().schedule(tenant, name).await?.ok_or(EngineError::NotFound)?;
    let next = if paused {
        row.next_fire_at
    } else {
        let plan = Plan::parse(&row.cron, &row.timezone).map_err(EngineError::Invalid)?;
        plan.next(engine.now(), false).unwrap_or(row.next_fire_at)
    };
    engine.store().set_schedule_paused(tenant, name, paused, next).await?;
    engine.store().schedule(tenant, name).await?.ok_or(EngineError::NotFound)
}

/// Fires the due schedules, if this host holds the scheduler lease. Answers the jobs
/// submitted.
pub async fn fire_due(engine: &Engine) -> Result<usize, EngineError> {
    if !crate::singleton::hold(engine, LEASE, INTERVAL.max(Duration::from_secs(5))).await? {
        return Ok(0);
    }
    let now = engine.now();
    let mut submitted = 0;
    for schedule in engine.store().due_schedules(now, 100).await? {
        submitted += fire(engine, schedule, now).await?;
    }
    Ok(submitted)
}

/// The times a due schedule fires for now, by its catch-up rule.
fn times_to_fire(plan: &Plan, schedule: &ScheduleRow, now: Timestamp) -> Vec<Timestamp> {
    let mut due = Vec::new();
    let mut at = Some(schedule.next_fire_at);
    while let Some(t) = at.filter(|t| *t <= now) {
        due.push(t);
        if due.len() > MAX_CATCH_UP {
            due.remove(0);
        }
        at = plan.next(t, false);
    }
    match schedule.catch_up.as_str() {
        "all" => due,
        "one" => due.pop().into_iter().collect(),
        _ => due.pop().filter(|t| now.since(*t) <= ON_TIME).into_iter().collect(),
    }
}

async fn fire(engine: &Engine, schedule: ScheduleRow, now: Timestamp) -> Result<usize, EngineError> {
    let plan = match Plan::parse(&schedule.cron, &schedule.timezone) {
        Ok(plan) => plan,
        Err(e) => {
            tracing::error!(schedule = %schedule.name, error = %e, "a stored schedule does not parse; paused");
            engine.store().set_schedule_paused(&schedule.tenant, &schedule.name, true, schedule.next_fire_at).await?;
            return Ok(0);
        }
    };
    let mut times = times_to_fire(&plan, &schedule, now);
    if schedule.overlap == "skip" {
        if let Some(last) = schedule.last_job {
            let open = engine.store().job(last).await?.is_some_and(|r| !r.job.state.is_final());
            if open {
                times.clear();
            }
        }
        // One firing at a time: the latest of the due times.
        if times.len() > 1 {
            times = times.split_off(times.len() - 1);
        }
    }
    let mut fired = None;
    let mut count = 0i64;
    for at in &times {
        let request = SubmitRequest {
            kind: schedule.kind.clone(),
            input: schedule.input.clone(),
            priority: Priority::Scheduled,
            run_at: None,
            idempotency_key: Some(format!("schedule:{}:{}", schedule.name, at.as_micros())),
            lease_keys: Vec::new(),
            traceparent: None,
        };
        match engine.submit(&schedule.tenant, request).await {
            Ok(inserted) => {
                fired = Some((*at, inserted.record().job.id));
                count += 1;
            }
            Err(EngineError::UnknownKind(kind)) => {
                tracing::warn!(schedule = %schedule.name, kind, "a schedule's kind is gone; nothing fired");
            }
            // A version deployed since the schedule was made may declare a schema its
            // input breaks: that time fires nothing, and the schedule moves on.
            Err(e @ EngineError::InvalidInput { .. }) => {
                tracing::warn!(schedule = %schedule.name, error = %e, "a schedule's input no longer follows its kind's schema; nothing fired");
            }
            Err(e) => return Err(e),
        }
    }
    let next = plan.next(now, false).unwrap_or(Timestamp::from_micros(i64::MAX));
    let advanced = ScheduleRow { next_fire_at: next, ..schedule.clone() };
    engine.store().advance_schedule(&advanced, schedule.next_fire_at, fired.map(|(at, job)| (at, job, count))).await?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// The scheduler's loop on this host.
#[derive(Debug)]
pub struct Scheduler(SingletonLoop);

impl Scheduler {
    /// Starts firing due schedules every [`INTERVAL`] while this host holds the lease.
    pub fn start(engine: Arc<Engine>) -> Self {
        Self(SingletonLoop::start(engine, LEASE, INTERVAL, |engine| async move {
            if let Err(e) = fire_due(&engine).await {
                tracing::error!(error = %e, "firing schedules failed");
            }
        }))
    }

    /// Stops it and gives up the lease.
    pub async fn stop(self) {
        self.0.stop().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(catch_up: &str, next: Timestamp) -> ScheduleRow {
        ScheduleRow {
            tenant: TenantId("acme".into()),
            name: "nightly".into(),
            kind: "report".into(),
            cron: "* * * * *".into(),
            timezone: "UTC".into(),
            input: Vec::new(),
            catch_up: catch_up.into(),
            overlap: "allow".into(),
            paused: false,
            next_fire_at: next,
            last_fired_at: None,
            last_job: None,
            fired: 0,
            created_at: next,
        }
    }

    #[test]
    fn missed_times_are_caught_up_as_the_schedule_says() {
        let plan = Plan::parse("* * * * *", "UTC").expect("parses");
        let start = Timestamp::from_micros(1_700_000_040_000_000); // on a minute
        let now = start.plus(Duration::from_secs(29 * 60));
        assert_eq!(times_to_fire(&plan, &row("all", start), now).len(), 30);
        assert_eq!(times_to_fire(&plan, &row("one", start), now), vec![now]);
        assert_eq!(times_to_fire(&plan, &row("none", start), now), vec![now]);
        // None only fires a time that is on time: an hourly schedule looked at half an
        // hour after its last time fires nothing; `one` fires that time.
        let hourly = Plan::parse("0 * * * *", "UTC").expect("parses");
        let hour = Timestamp::from_micros(1_699_999_200_000_000); // on an hour
        let late = hour.plus(Duration::from_secs(2 * 3600 + 1800));
        assert_eq!(times_to_fire(&hourly, &row("none", hour), late), vec![]);
        assert_eq!(times_to_fire(&hourly, &row("one", hour), late), vec![hour.plus(Duration::from_secs(7200))]);
        assert_eq!(times_to_fire(&hourly, &row("all", hour), late).len(), 3);
    }

    #[test]
    fn time_zones_and_bad_expressions_are_checked() {
        let paris = Plan::parse("0 9 * * *", "Europe/Paris").expect("parses");
        // 2026-12-01T00:00:00Z → 09:00 in Paris (UTC+1) is 08:00Z.
        let midnight = Timestamp::from_micros(1_796_083_200_000_000);
        assert_eq!(paris.next(midnight, false), Some(midnight.plus(Duration::from_secs(8 * 3600))));
        assert!(Plan::parse("61 * * * *", "UTC").is_err());
        assert!(Plan::parse("* * * * *", "Mars/Olympus").is_err());
    }
}
