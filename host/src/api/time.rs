//! Timestamps as RFC 3339 text, written in UTC with microseconds and read with any
//! offset, by chrono (the one calendar the host uses; no date arithmetic by hand).

use chrono::{DateTime, SecondsFormat, Utc};
use spindle_core::Timestamp;

/// `2026-11-30T12:00:00.123456Z`.
pub fn rfc3339(t: Timestamp) -> String {
    match DateTime::<Utc>::from_timestamp_micros(t.as_micros()) {
        Some(at) => at.to_rfc3339_opts(SecondsFormat::Micros, true),
        // Past year 262143 either way: no RFC 3339 text can say it.
        None => String::from("out of range"),
    }
}

pub use spindle_core::time::parse_rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_known_dates() {
        assert_eq!(rfc3339(Timestamp::EPOCH), "1970-01-01T00:00:00.000000Z");
        assert_eq!(rfc3339(Timestamp::from_micros(1_796_040_000_123_456)), "2026-11-30T12:00:00.123456Z");
        for micros in [0, 951_782_400_000_000, 1_796_040_000_123_456, 4_102_444_800_000_001] {
            let t = Timestamp::from_micros(micros);
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        }
        assert_eq!(parse_rfc3339("2026-11-30T12:00:00Z"), Some(Timestamp::from_micros(1_796_040_000_000_000)));
        assert_eq!(parse_rfc3339("2026-13-30T12:00:00Z"), None);
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(parse_rfc3339("2026-11-30T14:00:00+02:00"), Some(Timestamp::from_micros(1_796_040_000_000_000)));
        for hostile in ["99999999999-01-01T00:00:00Z", "2026-01-01T00:00:00.1éZ", "2026-02-30T00:00:00Z", ""] {
            assert_eq!(parse_rfc3339(hostile), None, "{hostile}");
        }
    }
}
