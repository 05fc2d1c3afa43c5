//! Timestamps as RFC 3339 text (UTC), without a date library.

use spindle_core::Timestamp;

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

/// Parses `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` (UTC only).
pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let text = text.strip_suffix('Z').or_else(|| text.strip_suffix("+00:00"))?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (date.next()??, date.next()??, date.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut hms = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, mi, s) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 || frac.len() > 9 {
        return None;
    }
    let frac_micros = format!("{frac:0<6}")[..6].parse::<i64>().ok()?;
    let days = days_from_civil(y, m, d);
    Some(Timestamp::from_micros(((days * 86_400 + h * 3600 + mi * 60 + s) * 1_000_000) + frac_micros))
}

/// Howard Hinnant's days-from-civil algorithm.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

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
    }
}
