//! The schedule machine: a cron schedule's states and its firing decision.
//!
//! A schedule is `active` (it fires at its cron times), `paused` (it fires nothing; a
//! resume skips the times passed meanwhile) or `deleted`. A pass over an active schedule
//! at `now` decides which of its due times fire and where the next one lies:
//!
//! - the due times are its exact cron times from the stored `next_fire_at` up to `now`,
//!   each found from the one before it ([`CronPlan::next_after`]), never from the clock
//!   reading; so every time is a whole second of the expression, and no time between
//!   two passes is lost however late a pass runs;
//! - a time at most [`ON_TIME`] late is on time and always eligible; older ones are
//!   missed, and the catch-up rule ([`CATCH_UP_RULES`]) says which of them are eligible;
//! - the overlap rule ([`OVERLAP_RULES`]) says which eligible times fire, given whether
//!   the last firing's job is still open;
//! - `next_fire_at` becomes the first cron time after the last time considered.
//!
//! Each firing's job carries the idempotency key [`firing_key`] (the schedule and the
//! time), so a pass carried out twice — a crash between the jobs' submission and the
//! schedule's write, two hosts during a lease hand-over — submits each time once.
//! Pure: the engine reads the schedule and whether its last job is open, asks
//! [`transition`], submits the firings and writes the schedule, checked against the row
//! it read.

mod calendar;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use calendar::{CronPlan, PlanError, whole_second_floor};

use crate::ids::JobId;
use crate::table::{Allowed, DiagramState, Forbidden, NotInTable, change};
use crate::time::Timestamp;

/// How late a time may be when a pass sees it and still count as on time.
pub const ON_TIME: Duration = Duration::from_secs(60);
/// Most due times one pass considers before it jumps (`none`, `one`) or leaves the rest
/// to the next pass (`all`): a schedule whose host was down for a year does not make
/// one pass walk millions of times.
pub const MAX_CATCH_UP: usize = 1_000;

/// Where a schedule stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleState {
    /// It fires at its cron times.
    Active,
    /// It fires nothing until resumed.
    Paused,
    /// Gone: its row is deleted; the jobs it fired stay. Final.
    Deleted,
}

impl ScheduleState {
    /// Lower-case name, as shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Deleted => "deleted",
        }
    }
}

impl DiagramState for ScheduleState {
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn is_final(self) -> bool {
        self == Self::Deleted
    }
    fn all() -> &'static [Self] {
        &[Self::Active, Self::Paused, Self::Deleted]
    }
}

/// Every allowed schedule transition (a pass that fires is drawn as `active → active`).
pub const SCHEDULE_TRANSITIONS: &[Allowed<ScheduleState>] = {
    use ScheduleState::*;
    &[
        Allowed { from: None, to: Active, trigger: "created: first time after now", seed: "issue 37 schedules" },
        Allowed {
            from: Some(Active),
            to: Active,
            trigger: "a pass fires the due times, next from the last one; or fired by hand, now",
            seed: "issue 37 schedules",
        },
        Allowed {
            from: Some(Active),
            to: Paused,
            trigger: "paused, or its stored expression no longer parses",
            seed: "issue 37 schedules",
        },
        Allowed { from: Some(Paused), to: Active, trigger: "resumed: next time after now", seed: "issue 37 schedules" },
        Allowed { from: Some(Active), to: Deleted, trigger: "deleted", seed: "issue 37 schedules" },
        Allowed { from: Some(Paused), to: Deleted, trigger: "deleted", seed: "issue 37 schedules" },
    ]
};

/// Schedule transitions that may never happen.
pub const SCHEDULE_FORBIDDEN: &[Forbidden<ScheduleState>] = {
    use ScheduleState::*;
    &[
        Forbidden {
            from: Deleted,
            to: Active,
            why: "A deleted schedule never fires again; one created under its name starts afresh.",
            seed: "issue 37 schedules",
        },
        Forbidden {
            from: Deleted,
            to: Paused,
            why: "A deleted schedule is gone; there is nothing to pause.",
            seed: "issue 37 schedules",
        },
    ]
};

/// What fires of times missed by more than [`ON_TIME`] (no host fired then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// None of them (the default).
    #[default]
    None,
    /// The latest of them.
    One,
    /// All of them, oldest first.
    All,
}

/// Whether a firing may start while the last firing's job is open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// No: one firing at a time (the default).
    #[default]
    Skip,
    /// Yes: firings may run side by side.
    Allow,
}

macro_rules! named {
    ($ty:ty { $($variant:ident = $name:literal),* $(,)? }) => {
        impl $ty {
            /// Lower-case name, as stored and shown.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name),* }
            }
            /// Parses [`as_str`](Self::as_str)'s output.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($name => Some(Self::$variant),)* _ => None }
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
named!(CatchUp { None = "none", One = "one", All = "all" });
named!(Overlap { Skip = "skip", Allow = "allow" });

/// Which of a list of times fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fires {
    /// None of them.
    Nothing,
    /// The latest of them.
    Latest,
    /// Every one, oldest first.
    Every,
}

impl Fires {
    /// The times of `times` (oldest first) this selects.
    pub fn select(self, times: &[Timestamp]) -> Vec<Timestamp> {
        match self {
            Self::Nothing => Vec::new(),
            Self::Latest => times.last().copied().into_iter().collect(),
            Self::Every => times.to_vec(),
        }
    }
}

/// A catch-up rule: which missed times are eligible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CatchUpRule {
    /// The schedule's setting.
    pub catch_up: CatchUp,
    /// Which missed times are eligible.
    pub missed: Fires,
    /// Why, in a few words.
    pub why: &'static str,
}

/// The catch-up rules, one row per setting. On-time times are always eligible.
pub const CATCH_UP_RULES: &[CatchUpRule] = &[
    CatchUpRule { catch_up: CatchUp::None, missed: Fires::Nothing, why: "missed times are skipped" },
    CatchUpRule { catch_up: CatchUp::One, missed: Fires::Latest, why: "the latest missed time fires, however late" },
    CatchUpRule {
        catch_up: CatchUp::All,
        missed: Fires::Every,
        why: "every missed time fires, oldest first, up to 1,000 a pass",
    },
];

/// An overlap rule: which eligible times fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverlapRule {
    /// The schedule's setting.
    pub overlap: Overlap,
    /// Whether the last firing's job is still open.
    pub last_open: bool,
    /// Which eligible times fire.
    pub fires: Fires,
    /// Why, in a few words.
    pub why: &'static str,
}

/// The overlap rules, one row per setting and state of the last firing's job.
pub const OVERLAP_RULES: &[OverlapRule] = &[
    OverlapRule { overlap: Overlap::Allow, last_open: false, fires: Fires::Every, why: "every eligible time fires" },
    OverlapRule {
        overlap: Overlap::Allow,
        last_open: true,
        fires: Fires::Every,
        why: "firings run beside the open one",
    },
    OverlapRule {
        overlap: Overlap::Skip,
        last_open: false,
        fires: Fires::Latest,
        why: "one firing at a time: the latest eligible time",
    },
    OverlapRule {
        overlap: Overlap::Skip,
        last_open: true,
        fires: Fires::Nothing,
        why: "nothing fires while the last firing's job is open",
    },
];

fn catch_up_rule(catch_up: CatchUp) -> &'static CatchUpRule {
    CATCH_UP_RULES.iter().find(|r| r.catch_up == catch_up).unwrap_or(&CATCH_UP_RULES[0])
}

fn overlap_rule(overlap: Overlap, last_open: bool) -> &'static OverlapRule {
    OVERLAP_RULES.iter().find(|r| r.overlap == overlap && r.last_open == last_open).unwrap_or(&OVERLAP_RULES[3])
}

/// What every firing's idempotency key starts with: the scheduler's alone (a submission
/// may not use it), so the jobs whose keys start `schedule:NAME:` are NAME's firings.
pub const FIRING_KEY_PREFIX: &str = "schedule:";

/// The idempotency key of the job a schedule fires for `at`: its name and the time in
/// microseconds (a whole second), the same on every host and every try.
pub fn firing_key(name: &str, at: Timestamp) -> String {
    format!("{FIRING_KEY_PREFIX}{name}:{}", at.as_micros())
}

/// A schedule's machine: what its firing decisions read and change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// Where it stands.
    pub state: ScheduleState,
    /// The next time it fires (an exact cron time).
    pub next_fire_at: Timestamp,
    /// Its catch-up rule.
    pub catch_up: CatchUp,
    /// Its overlap rule.
    pub overlap: Overlap,
    /// The last time it fired for.
    pub last_fired_at: Option<Timestamp>,
    /// The job of that firing.
    pub last_job: Option<JobId>,
    /// Firings so far.
    pub fired: u64,
}

/// What happens to a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleEvent {
    /// A pass at `now`; `last_open` says whether the last firing's job is open.
    Pass {
        /// Whether the last firing's job is still open.
        last_open: bool,
    },
    /// A tenant paused it (or the host did: its stored expression no longer parses).
    Pause,
    /// A tenant resumed it.
    Resume,
    /// A tenant deleted it.
    Delete,
    /// A tenant fired it by hand: once, now (its whole second), whatever its rules and
    /// whether it is paused; its next cron time does not move.
    Trigger,
}

/// Why a schedule refused an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleRefusal {
    /// A pass found nothing due (another pass moved it on first).
    #[error("nothing is due before {next_fire_at}")]
    NotDue {
        /// Its next time.
        next_fire_at: Timestamp,
    },
    /// A pass over a paused schedule.
    #[error("the schedule is paused")]
    Paused,
    /// The schedule is deleted.
    #[error("the schedule is deleted")]
    Deleted,
    /// The change is not a row of the table.
    #[error(transparent)]
    NotInTable(#[from] NotInTable),
}

/// What a transition answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleTransition {
    /// The schedule as it must be written (its `last_*` fields follow the firings,
    /// through [`Schedule::record_firing`]).
    pub schedule: Schedule,
    /// The times to fire, oldest first.
    pub fire: Vec<Timestamp>,
    /// Due times that did not fire (missed, or skipped for an open job); at least this
    /// many when the pass jumped over a backlog.
    pub skipped: u64,
}

impl Schedule {
    /// A new active schedule: it first fires at the expression's first time after `now`.
    pub fn create(plan: &CronPlan, catch_up: CatchUp, overlap: Overlap, now: Timestamp) -> Option<Self> {
        Some(Self {
            state: ScheduleState::Active,
            next_fire_at: plan.next_after(now)?,
            catch_up,
            overlap,
            last_fired_at: None,
            last_job: None,
            fired: 0,
        })
    }

    /// Records that the firing for `at` submitted `job`.
    pub fn record_firing(&mut self, at: Timestamp, job: JobId) {
        if self.last_fired_at.is_none_or(|last| at >= last) {
            self.last_fired_at = Some(at);
            self.last_job = Some(job);
        }
        self.fired = self.fired.saturating_add(1);
    }
}

/// Applies `event` to `schedule` (whose expression is `plan`) at `now`: the schedule
/// machine's one transition function.
pub fn transition(
    schedule: &Schedule,
    plan: &CronPlan,
    event: ScheduleEvent,
    now: Timestamp,
) -> Result<ScheduleTransition, ScheduleRefusal> {
    let mut next = schedule.clone();
    let (fire, skipped) = match event {
        ScheduleEvent::Pass { last_open } => {
            match schedule.state {
                ScheduleState::Active => {}
                ScheduleState::Paused => return Err(ScheduleRefusal::Paused),
                ScheduleState::Deleted => return Err(ScheduleRefusal::Deleted),
            }
            pass(&mut next, plan, last_open, now)?
        }
        ScheduleEvent::Pause => {
            next.state = enter(schedule.state, ScheduleState::Paused)?;
            (Vec::new(), 0)
        }
        ScheduleEvent::Resume => {
            next.state = enter(schedule.state, ScheduleState::Active)?;
            if schedule.state == ScheduleState::Paused {
                // Times passed while paused are skipped.
                next.next_fire_at = plan.next_after(now).unwrap_or(Timestamp::from_micros(i64::MAX));
            }
            (Vec::new(), 0)
        }
        ScheduleEvent::Delete => {
            next.state = enter(schedule.state, ScheduleState::Deleted)?;
            (Vec::new(), 0)
        }
        ScheduleEvent::Trigger => {
            next.state = enter(schedule.state, schedule.state)?;
            (vec![whole_second_floor(now)], 0)
        }
    };
    Ok(ScheduleTransition { schedule: next, fire, skipped })
}

fn enter(from: ScheduleState, to: ScheduleState) -> Result<ScheduleState, ScheduleRefusal> {
    if from == ScheduleState::Deleted {
        return Err(ScheduleRefusal::Deleted);
    }
    Ok(change("schedule", SCHEDULE_TRANSITIONS, from, to)?)
}

/// The firing decision of a pass: the due times from `next_fire_at` up to `now`, the
/// rules' selection among them, and the next time after the last one considered.
fn pass(
    schedule: &mut Schedule,
    plan: &CronPlan,
    last_open: bool,
    now: Timestamp,
) -> Result<(Vec<Timestamp>, u64), ScheduleRefusal> {
    // A stored time with a fraction (written by an older build) stands for its second.
    let first = plan.first_at_or_after(whole_second_floor(schedule.next_fire_at));
    let Some(first) = first.filter(|t| *t <= now) else {
        return Err(ScheduleRefusal::NotDue { next_fire_at: schedule.next_fire_at });
    };
    let on_time_from = now.minus(ON_TIME);
    let mut missed = Vec::new();
    let mut on_time = Vec::new();
    let mut skipped_over = 0u64;
    let mut at = Some(first);
    let mut considered = 0usize;
    while let Some(t) = at.filter(|t| *t <= now) {
        if considered >= MAX_CATCH_UP && t < on_time_from {
            if schedule.catch_up == CatchUp::All {
                // The rest fire in the next passes, oldest first.
                break;
            }
            // Only the latest missed time and the on-time ones can still fire: jump.
            let resume = plan.first_at_or_after(on_time_from.max(t));
            if schedule.catch_up == CatchUp::One
                && let Some(latest) = plan.latest_before(resume.unwrap_or(now), t)
            {
                missed.push(latest);
            }
            skipped_over = 1;
            at = resume;
            considered = 0;
            continue;
        }
        if t < on_time_from {
            missed.push(t)
        } else {
            on_time.push(t)
        }
        considered += 1;
        at = plan.next_after(t);
    }
    schedule.next_fire_at = at.unwrap_or(Timestamp::from_micros(i64::MAX));
    let due = missed.len() + on_time.len();
    let mut eligible = catch_up_rule(schedule.catch_up).missed.select(&missed);
    eligible.extend(on_time);
    let fire = overlap_rule(schedule.overlap, last_open).fires.select(&eligible);
    let skipped = u64::try_from(due - fire.len()).unwrap_or(u64::MAX) + skipped_over;
    Ok((fire, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_has_exactly_one_rule() {
        for catch_up in [CatchUp::None, CatchUp::One, CatchUp::All] {
            assert_eq!(CATCH_UP_RULES.iter().filter(|r| r.catch_up == catch_up).count(), 1, "{catch_up}");
        }
        for overlap in [Overlap::Skip, Overlap::Allow] {
            for last_open in [false, true] {
                let rows = OVERLAP_RULES.iter().filter(|r| r.overlap == overlap && r.last_open == last_open).count();
                assert_eq!(rows, 1, "{overlap} {last_open}");
            }
        }
        assert_eq!(CatchUp::parse("one"), Some(CatchUp::One));
        assert_eq!(Overlap::parse("allow").map(Overlap::as_str), Some("allow"));
        assert_eq!(CatchUp::parse("some"), None);
    }
}
