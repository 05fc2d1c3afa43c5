//! Kind `nightly-report`: a report meant to be fired by a cron schedule, once a night.
//!
//! Input: `{"report": "orders", "buckets": 24}`; `buckets` (how many slices the day is
//! cut into, 1 to 96) may be left out: 24, one an hour.
//!
//! The report covers the day before the job was created, which its id says: job ids are
//! UUIDv7, whose first 48 bits are the creation time. So a job fired just after midnight
//! reports the day that ended, and running it again (a retry, a rescued step) reports the
//! same day, whatever the clock says then.
//!
//! - `tally` counts the day's events per bucket. The events are made up: each count is a
//!   hash of the report, the day and the bucket, so that a report is deterministic
//!   without a data source (no network, no clock).
//! - `publish` logs a line and completes with the report: `{"report", "date", "buckets",
//!   "total", "peak_bucket", "checksum"}`.

use serde::{Deserialize, Serialize};
use spindle_guest::prelude::*;

struct NightlyReport;

const DEFAULT_BUCKETS: u32 = 24;
/// Quarter hours: the finest slice a daily report needs, and a cap on its output.
const MAX_BUCKETS: u32 = 96;
/// The longest report name, so that names stay labels rather than payloads.
const MAX_REPORT_NAME: usize = 64;
const MS_PER_DAY: u64 = 86_400_000;

/// Fields it does not know are ignored, so a schedule may label its jobs.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Input {
    report: String,
    #[serde(default = "default_buckets")]
    buckets: u32,
}

fn default_buckets() -> u32 {
    DEFAULT_BUCKETS
}

/// `tally`'s output.
#[derive(Debug, Serialize, Deserialize)]
struct Tally {
    report: String,
    date: String,
    counts: Vec<u64>,
}

/// `publish`'s output.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Report {
    report: String,
    date: String,
    buckets: usize,
    total: u64,
    peak_bucket: usize,
    checksum: String,
}

impl Kind for NightlyReport {
    fn describe() -> KindSpec {
        KindSpec::new("nightly-report").input::<Input>().step("tally", 2).step("publish", 1)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        match step.key() {
            "tally" => tally(step),
            "publish" => publish(step),
            other => Err(StepError::unknown_step(other)),
        }
    }
}

fn tally(step: &Step) -> Result<Outcome, StepError> {
    let input: Input = step.input()?;
    if input.report.is_empty() || input.report.len() > MAX_REPORT_NAME {
        return Err(StepError::refused("invalid-input", "`report` must be 1 to 64 bytes"));
    }
    if !(1..=MAX_BUCKETS).contains(&input.buckets) {
        return Err(StepError::refused("invalid-input", "`buckets` must be between 1 and 96"));
    }
    let date = report_date(step.job_id())?;
    let counts = (0..input.buckets).map(|bucket| fnv1a(format!("{}/{date}/{bucket}", input.report)) % 500).collect();
    Ok(Outcome::complete(&Tally { report: input.report, date, counts }))
}

fn publish(step: &Step) -> Result<Outcome, StepError> {
    let tally: Tally = step.prior("tally")?;
    let total = tally.counts.iter().sum();
    // The first bucket of the highest count.
    let peak_bucket = tally
        .counts
        .iter()
        .enumerate()
        .max_by(|(a_index, a), (b_index, b)| a.cmp(b).then(b_index.cmp(a_index)))
        .map_or(0, |(bucket, _)| bucket);
    let checksum = format!("{:016x}", fnv1a(tally.counts.iter().map(u64::to_string).collect::<Vec<_>>().join(",")));
    log::info(format!(
        "nightly report {} for {}: {total} events, peak in bucket {peak_bucket}",
        tally.report, tally.date
    ));
    Ok(Outcome::complete(&Report {
        report: tally.report,
        date: tally.date,
        buckets: tally.counts.len(),
        total,
        peak_bucket,
        checksum,
    }))
}

/// The day before the job was created (`YYYY-MM-DD`, UTC), read from its UUIDv7 id.
fn report_date(job_id: &str) -> Result<String, StepError> {
    let hex: String = job_id.chars().filter(|c| *c != '-').collect();
    let created_ms = match (hex.len(), hex.get(12..13), hex.get(..12)) {
        (32, Some("7"), Some(timestamp)) => u64::from_str_radix(timestamp, 16).ok(),
        _ => None,
    }
    .ok_or_else(|| {
        StepError::refused("undated-job", "the job id is not a UUIDv7").with_detail(format!("job id {job_id:?}"))
    })?;
    // 48 bits of milliseconds: the day count fits an i64 with room to spare.
    let day = i64::try_from(created_ms / MS_PER_DAY).unwrap_or(i64::MAX) - 1;
    let (year, month, day) = civil_from_days(day);
    Ok(format!("{year:04}-{month:02}-{day:02}"))
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// FNV-1a, 64 bits: small, stable across platforms and releases, good enough to spread
/// made-up counts.
fn fnv1a(text: impl AsRef<[u8]>) -> u64 {
    text.as_ref()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

spindle_guest::export_kind!(NightlyReport);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_day_numbers() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn the_report_covers_the_day_before_the_job_was_created() {
        // RFC 9562's UUIDv7 example, made 2022-02-22 19:22:22 UTC.
        assert_eq!(report_date("017F22E2-79B0-7CC3-98C4-DC0C0C07398F").as_deref(), Ok("2022-02-21"));
        assert_eq!(report_date("00000000-0000-7000-8000-000000000000").as_deref(), Ok("1969-12-31"));
        for id in ["not a uuid", "017F22E2-79B0-4CC3-98C4-DC0C0C07398F", "017F22E2-79B0-7CC3-98C4"] {
            assert_eq!(report_date(id).map_err(|e| e.code().to_owned()), Err("undated-job".into()), "{id}");
        }
    }

    #[test]
    fn fnv1a_matches_its_reference_values() {
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}

#[cfg(test)]
mod job_tests {
    use spindle_guest::testing::run_job;

    use super::*;

    #[test]
    fn reports_the_same_figures_every_run() {
        let run = run_job::<NightlyReport>(br#"{"report": "orders"}"#);
        assert!(run.succeeded(), "{:?}", run.failure);
        let tally: Tally = run.output("tally").expect("tally completed");
        assert_eq!(tally.counts.len(), 24);
        let report: Report = run.output("publish").expect("publish completed");
        assert_eq!((report.report.as_str(), report.date.as_str(), report.buckets), ("orders", "1969-12-31", 24));
        assert_eq!(report.total, tally.counts.iter().sum::<u64>());
        let peak = tally.counts.iter().max().expect("24 counts");
        assert_eq!(tally.counts.iter().position(|count| count == peak), Some(report.peak_bucket));

        let again: Report = run_job::<NightlyReport>(br#"{"report": "orders"}"#).output("publish").expect("again");
        assert_eq!(again, report);
        let other: Report = run_job::<NightlyReport>(br#"{"report": "refunds"}"#).output("publish").expect("other");
        assert_ne!(other.checksum, report.checksum);
    }

    #[test]
    fn buckets_are_bounded() {
        let quarter_hours: Report =
            run_job::<NightlyReport>(br#"{"report": "orders", "buckets": 96}"#).output("publish").expect("96");
        assert_eq!(quarter_hours.buckets, 96);
        for input in [
            &br#"{"report": "orders", "buckets": 0}"#[..],
            br#"{"report": "orders", "buckets": 97}"#,
            br#"{"report": ""}"#,
            br#"{}"#,
        ] {
            let run = run_job::<NightlyReport>(input);
            assert_eq!(
                run.failure.map(|f| f.code).as_deref(),
                Some("invalid-input"),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
