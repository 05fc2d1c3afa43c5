//! Time as the core sees it: an instant passed in by the caller.
//!
//! The core never reads a clock. Every transition takes `now`, so tests drive time by
//! hand and the engine decides where time comes from (a real clock, or a simulated one).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Microseconds since the Unix epoch, UTC.
///
/// Stored as a plain 64-bit integer so that both SQLite and PostgreSQL compare and
/// index it the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The Unix epoch.
    pub const EPOCH: Self = Self(0);

    /// From microseconds since the Unix epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Self(micros)
    }

    /// From milliseconds since the Unix epoch.
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis.saturating_mul(1000))
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// Milliseconds since the Unix epoch (rounded down).
    pub const fn as_millis(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// `self + d`, saturating at the far future.
    pub fn plus(self, d: Duration) -> Self {
        Self(self.0.saturating_add(micros_of(d)))
    }

    /// `self - d`, saturating at the far past.
    pub fn minus(self, d: Duration) -> Self {
        Self(self.0.saturating_sub(micros_of(d)))
    }

    /// How long after `earlier` this instant is; zero if it is not after it.
    pub fn since(self, earlier: Self) -> Duration {
        let micros = self.0.saturating_sub(earlier.0);
        Duration::from_micros(u64::try_from(micros).unwrap_or(0))
    }
}

fn micros_of(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}µs", self.0)
    }
}

/// Parses an RFC 3339 date-time (`2026-11-30T12:00:00.5Z`, `…+02:00`), years 0 to 9999;
/// `None` for anything else. Precision beyond a microsecond is dropped. The one reading
/// of a time both of Spindle's doors (the API, `spindle.submit`) use.
pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let parsed = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    Some(Timestamp::from_micros(parsed.timestamp_micros()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_since_is_never_negative() {
        let t = Timestamp::from_millis(1_000);
        assert_eq!(t.plus(Duration::from_millis(500)).as_millis(), 1_500);
        assert_eq!(t.minus(Duration::from_millis(500)).as_millis(), 500);
        assert_eq!(t.since(t.plus(Duration::from_secs(1))), Duration::ZERO);
        assert_eq!(t.plus(Duration::from_secs(2)).since(t), Duration::from_secs(2));
        assert_eq!(Timestamp::from_micros(i64::MAX).plus(Duration::from_secs(1)).as_micros(), i64::MAX);
    }
}
