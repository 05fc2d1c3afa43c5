//! Exact cron times in a time zone: the instants a schedule fires at, whole seconds,
//! each computed from the one before it.
//!
//! A cron expression names wall-clock readings; a time zone with daylight saving has
//! readings that never happen (the spring-forward gap) and readings that happen twice
//! (the fall-back repeat). The rule, as the Open Cron Pattern Specification and croner
//! state it, depends on the schedule's shape:
//!
//! - A **fixed-time** schedule (its second, minute and hour fields each one value, such
//!   as `30 2 * * *`) keeps one firing per matching day: a reading inside a gap fires at
//!   the first instant after the gap (02:30 on the night Paris springs forward fires at
//!   03:00 CEST), and a repeated reading fires at its first occurrence only.
//! - Any other schedule (a `*`, a range, a list or a step in those fields) is an
//!   interval: it fires at every instant whose reading matches, so it has no firing in
//!   a gap and fires in both occurrences of a repeated hour.
//!
//! The expression is matched against readings by croner (treating the reading as if it
//! were UTC, where no reading is skipped or repeated); mapping readings to instants is
//! done here, with chrono-tz, so the rule above is the one written down and tested.

use chrono::offset::LocalResult;
use chrono::{DateTime, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use croner::{Cron, JobType};

use crate::time::Timestamp;

/// One second, in microseconds.
const SECOND: i64 = 1_000_000;
/// Widest a daylight-saving shift may be: the window searched for a repeat ahead.
const MAX_SHIFT_SECS: i64 = 3 * 3600;
/// Farther than any zone's offset from UTC: the window searched for a gap's end.
const ZONE_SPAN_SECS: i64 = 16 * 3600;
/// Most readings one search tries before answering that the expression does not fire
/// (it guards against an expression that matches nothing, such as 30 February).
const MAX_READINGS: u32 = 100_000;

/// A cron expression read in a time zone.
#[derive(Clone, Debug)]
pub struct CronPlan {
    cron: Cron,
    zone: Tz,
    fixed: bool,
}

/// Why an expression or zone was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The expression does not parse.
    #[error("cron {expression:?}: {reason}")]
    Expression {
        /// What was given.
        expression: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No IANA time zone has that name.
    #[error("unknown time zone {0:?}")]
    Zone(String),
    /// The expression matches no time at all.
    #[error("cron {0:?} never fires")]
    Never(String),
}

impl CronPlan {
    /// Parses a five-field (minute to weekday) or six-field (seconds first) expression
    /// and an IANA zone name.
    pub fn parse(expression: &str, zone: &str) -> Result<Self, PlanError> {
        let cron = expression
            .parse::<Cron>()
            .map_err(|e| PlanError::Expression { expression: expression.to_owned(), reason: e.to_string() })?;
        let zone = zone.parse::<Tz>().map_err(|_| PlanError::Zone(zone.to_owned()))?;
        let fixed = cron.determine_job_type() == JobType::FixedTime;
        let plan = Self { cron, zone, fixed };
        if plan.next_after(Timestamp::EPOCH).is_none() {
            return Err(PlanError::Never(expression.to_owned()));
        }
        Ok(plan)
    }

    /// Whether it is a fixed-time schedule (see the module's rule).
    pub fn is_fixed_time(&self) -> bool {
        self.fixed
    }

    /// The first instant it fires at strictly after `t`: a whole second, or `None` when
    /// no such time exists within the search's bound.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let after = whole_second_floor(t);
        let reading = self.reading(after)?;
        let ahead = self.search(reading, false, after, Occurrence::First);
        // An interval schedule whose `after` lies just before a fall-back also fires at
        // the repeated readings, which come after `after` though they read earlier.
        let repeat = if self.fixed { None } else { self.repeat_ahead(after) };
        match (ahead, repeat) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The first instant it fires at at or after `t`.
    pub fn first_at_or_after(&self, t: Timestamp) -> Option<Timestamp> {
        self.next_after(Timestamp::from_micros(t.as_micros().saturating_sub(1)))
    }

    /// The last instant it fires at strictly before `t` and not before `floor`.
    pub fn latest_before(&self, t: Timestamp, floor: Timestamp) -> Option<Timestamp> {
        // Widen a window back from `t` until it holds a firing, then walk forward in it.
        let mut width = SECOND;
        loop {
            let from = Timestamp::from_micros(t.as_micros().saturating_sub(width).max(floor.as_micros()));
            let mut found = None;
            let mut at = self.first_at_or_after(from);
            let mut steps = 0u32;
            while let Some(x) = at.filter(|x| *x < t) {
                found = Some(x);
                steps += 1;
                if steps > MAX_READINGS {
                    break;
                }
                at = self.next_after(x);
            }
            if found.is_some() || from <= floor {
                return found;
            }
            width = width.saturating_mul(2);
        }
    }

    /// The wall-clock reading of instant `t` in the zone.
    fn reading(&self, t: Timestamp) -> Option<NaiveDateTime> {
        let utc = DateTime::<Utc>::from_timestamp_micros(t.as_micros())?;
        Some(utc.with_timezone(&self.zone).naive_local())
    }

    /// The next reading matching the expression (after `from`, or at it when
    /// `inclusive`).
    fn next_reading(&self, from: NaiveDateTime, inclusive: bool) -> Option<NaiveDateTime> {
        let as_if_utc = Utc.from_utc_datetime(&from);
        self.cron.find_next_occurrence(&as_if_utc, inclusive).ok().map(|t| t.naive_utc())
    }

    /// Walks matching readings from `from`, mapping each to instants by the rule, and
    /// answers the first instant after `after`. `occurrence` says which instant of a
    /// repeated reading an interval schedule takes first.
    fn search(
        &self,
        from: NaiveDateTime,
        inclusive: bool,
        after: Timestamp,
        occurrence: Occurrence,
    ) -> Option<Timestamp> {
        let mut reading = self.next_reading(from, inclusive)?;
        for _ in 0..MAX_READINGS {
            let found = match self.zone.from_local_datetime(&reading) {
                LocalResult::Single(at) => Some(micros(&at)).filter(|x| *x > after),
                LocalResult::Ambiguous(first, second) => {
                    let (first, second) = (micros(&first), micros(&second));
                    if self.fixed {
                        Some(first).filter(|x| *x > after)
                    } else {
                        let order = match occurrence {
                            Occurrence::First => [first, second],
                            Occurrence::Second => [second, first],
                        };
                        order.into_iter().find(|x| *x > after)
                    }
                }
                LocalResult::None if self.fixed => self.gap_end(reading).filter(|x| *x > after),
                LocalResult::None => None,
            };
            if found.is_some() {
                return found;
            }
            reading = self.next_reading(reading, false)?;
        }
        None
    }

    /// When a fall-back lies within [`MAX_SHIFT_SECS`] after `after`: the first firing
    /// among the readings that repeat, taken at their second occurrence.
    fn repeat_ahead(&self, after: Timestamp) -> Option<Timestamp> {
        let horizon = Timestamp::from_micros(after.as_micros().saturating_add(MAX_SHIFT_SECS * SECOND));
        let (now_offset, later_offset) = (self.offset_secs(after)?, self.offset_secs(horizon)?);
        if later_offset >= now_offset {
            return None;
        }
        // The instant the clocks go back: the first second at the later offset.
        let turn = self.first_second_where(after, horizon, |t| self.offset_secs(t) == Some(later_offset))?;
        let repeated_from = self.reading(turn)?;
        self.search(repeated_from, true, after, Occurrence::Second)
    }

    /// The first instant after a gap that `reading` falls into (the instant the clocks
    /// jumped forward).
    fn gap_end(&self, reading: NaiveDateTime) -> Option<Timestamp> {
        let as_utc = Utc.from_utc_datetime(&reading).timestamp();
        let lo = Timestamp::from_micros((as_utc - ZONE_SPAN_SECS) * SECOND);
        let hi = Timestamp::from_micros((as_utc + ZONE_SPAN_SECS) * SECOND);
        self.first_second_where(lo, hi, |t| self.reading(t).is_some_and(|r| r > reading))
    }

    /// The first whole second in `(lo, hi]` where `holds` turns true (it must hold at
    /// `hi` and stay true after it turns).
    fn first_second_where(&self, lo: Timestamp, hi: Timestamp, holds: impl Fn(Timestamp) -> bool) -> Option<Timestamp> {
        let (mut lo, mut hi) = (lo.as_micros().div_euclid(SECOND), hi.as_micros().div_euclid(SECOND));
        if !holds(Timestamp::from_micros(hi * SECOND)) {
            return None;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if holds(Timestamp::from_micros(mid * SECOND)) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(Timestamp::from_micros(hi * SECOND))
    }

    fn offset_secs(&self, t: Timestamp) -> Option<i32> {
        let utc = DateTime::<Utc>::from_timestamp_micros(t.as_micros())?;
        Some(utc.with_timezone(&self.zone).offset().fix().local_minus_utc())
    }
}

/// Which instant of a repeated reading an interval schedule meets first.
#[derive(Clone, Copy)]
enum Occurrence {
    First,
    Second,
}

fn micros(at: &DateTime<Tz>) -> Timestamp {
    Timestamp::from_micros(at.timestamp_micros())
}

/// `t` rounded down to a whole second.
pub fn whole_second_floor(t: Timestamp) -> Timestamp {
    Timestamp::from_micros(t.as_micros().div_euclid(SECOND) * SECOND)
}
