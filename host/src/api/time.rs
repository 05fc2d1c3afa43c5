//! Timestamps as RFC 3339 text: written in UTC with microseconds, read with the `time`
//! crate (any offset), never by hand.

use spindle_core::Timestamp;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// `2026-11-30T12:00:00.123456Z`.
pub fn rfc3339(t: Timestamp) -> String {
    let micros = t.as_micros();
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Parses an RFC 3339 date-time (`2026-11-30T12:00:00.5Z`, `…+02:00`), years 0 to 9999;
/// `None` for anything else. Precision beyond a microsecond is dropped.
pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let parsed = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    let micros = parsed.unix_timestamp_nanos().div_euclid(1_000);
    i64::try_from(micros).ok().map(Timestamp::from_micros)
}

/// Howard Hinnant's civil-from-days algorithm: days since the epoch → (year, month, day).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

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
