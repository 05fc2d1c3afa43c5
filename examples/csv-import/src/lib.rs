//! Kind `csv-import`: validates a CSV's header, imports its rows in checkpointed
//! slices, then summarises the totals.
//!
//! Input: `{"csv": "id,name,amount\n1,Ada,12.50\n"}` or `{"generate_rows": 100000}`
//! (rows generated deterministically, every 97th with an unparsable amount), plus an
//! optional `"slice"`: rows per call, 1000 by default.
//!
//! - `validate` refuses `bad-header` unless the header has `id`, `name` and `amount`
//!   (in any order), and counts the rows.
//! - `import` parses one slice per call and returns `more` until the last slice, which
//!   completes with `{"rows", "sum_cents", "rejected"}`. The running totals travel in
//!   the cursor, so a retried or resumed attempt never recounts a slice. A row whose
//!   amount does not parse is counted as rejected, not fatal.
//! - `summarise` reads `import`'s output and completes with the average and a display
//!   total.

use serde::{Deserialize, Serialize};
use spindle_guest::prelude::*;

struct CsvImport;

const REQUIRED_COLUMNS: [&str; 3] = ["id", "name", "amount"];
const DEFAULT_SLICE: u64 = 1_000;

/// The job's input: the CSV text, or a number of rows to generate.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Input {
    csv: Option<String>,
    generate_rows: Option<u64>,
    slice: Option<u64>,
}

/// Where the rows come from.
enum Source {
    Text(String),
    Generated(u64),
}

impl Input {
    fn source(self) -> Result<(Source, u64), StepError> {
        let slice = self.slice.unwrap_or(DEFAULT_SLICE);
        if slice == 0 {
            return Err(StepError::refused("invalid-input", "`slice` must be at least 1"));
        }
        let source = match (self.csv, self.generate_rows) {
            (Some(text), None) => Source::Text(text),
            (None, Some(rows)) => Source::Generated(rows),
            _ => {
                return Err(StepError::refused("invalid-input", "give exactly one of `csv` and `generate_rows`"));
            }
        };
        Ok((source, slice))
    }
}

/// `validate`'s output.
#[derive(Debug, Serialize, Deserialize)]
struct Validated {
    rows: u64,
    columns: Columns,
}

/// Positions of the required columns in each record.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Columns {
    id: usize,
    name: usize,
    amount: usize,
}

/// `import`'s cursor: the next row and the totals of the rows before it.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Progress {
    /// Rows read so far (accepted and rejected).
    offset: u64,
    /// Byte position of row `offset` in the CSV text (unused for generated rows).
    byte: usize,
    sum: i64,
    count: u64,
    bad: u64,
}

/// `import`'s output.
#[derive(Debug, Serialize, Deserialize)]
struct Imported {
    rows: u64,
    sum_cents: i64,
    rejected: u64,
}

impl Kind for CsvImport {
    fn describe() -> KindSpec {
        KindSpec::new("csv-import")
            .input::<Input>()
            .step("validate", 1)
            .step("import", 8)
            .step("summarise", 1)
            .cancellable()
            .retry(3, 100, 5_000)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        match step.key() {
            "validate" => validate(step),
            "import" => import(step),
            "summarise" => summarise(step),
            other => Err(StepError::unknown_step(other)),
        }
    }
}

fn validate(step: &mut Step) -> Result<Outcome, StepError> {
    let (source, _) = step.input::<Input>()?.source()?;
    let validated = match source {
        Source::Generated(rows) => Validated { rows, columns: Columns { id: 0, name: 1, amount: 2 } },
        Source::Text(text) => {
            let (header, mut at) =
                read_record(&text, 0).ok_or_else(|| StepError::refused("bad-header", "the CSV is empty"))?;
            let columns = columns(&header)?;
            let mut rows = 0;
            while let Some((record, next)) = read_record(&text, at) {
                rows += u64::from(!is_blank(&record));
                at = next;
            }
            Validated { rows, columns }
        }
    };
    log::info(format!("{} rows to import", validated.rows));
    Ok(Outcome::complete(&validated))
}

fn columns(header: &[String]) -> Result<Columns, StepError> {
    let position = |name: &str| header.iter().position(|column| column.trim() == name);
    match (position("id"), position("name"), position("amount")) {
        (Some(id), Some(name), Some(amount)) => Ok(Columns { id, name, amount }),
        _ => Err(StepError::refused(
            "bad-header",
            format!("the header must name the columns {}", REQUIRED_COLUMNS.join(",")),
        )),
    }
}

fn import(step: &mut Step) -> Result<Outcome, StepError> {
    let (source, slice) = step.input::<Input>()?.source()?;
    let validated: Validated = step.prior("validate")?;
    let total = validated.rows;
    let mut progress = match (step.cursor_json::<Progress>()?, &source) {
        (Some(progress), _) => progress,
        // The first call starts on the row after the header.
        (None, Source::Text(text)) => {
            Progress { byte: read_record(text, 0).map_or(text.len(), |(_, next)| next), ..Progress::default() }
        }
        (None, Source::Generated(_)) => Progress::default(),
    };

    // Ask before starting a slice: after a stop the job is cancelled or owned
    // elsewhere, so the work would be thrown away.
    let checkpoint = step.cursor().map(|cursor| Checkpoint::new(cursor, progress.offset, total));
    let reply = step.heartbeat(checkpoint);
    if reply.should_stop() {
        log::info(format!("stopping at row {} ({reply:?})", progress.offset));
        return Ok(Outcome::more_json(&progress, progress.offset, total));
    }

    let end = progress.offset.saturating_add(slice).min(total);
    // Ends the step even if the text holds fewer rows than `validate` counted, which
    // would otherwise ask to be called again forever.
    let mut exhausted = false;
    match source {
        Source::Text(text) => {
            while progress.offset < end {
                let Some((record, next)) = read_record(&text, progress.byte) else {
                    exhausted = true;
                    break;
                };
                progress.byte = next;
                if !is_blank(&record) {
                    tally(&mut progress, &record, validated.columns)?;
                }
            }
        }
        Source::Generated(_) => {
            while progress.offset < end {
                let line = generated_row(progress.offset);
                let (record, _) = read_record(&line, 0).unwrap_or_default();
                tally(&mut progress, &record, validated.columns)?;
            }
        }
    }

    if exhausted || progress.offset >= total {
        log::info(format!("imported {} rows, rejected {}", progress.count, progress.bad));
        Ok(Outcome::complete(&Imported { rows: progress.count, sum_cents: progress.sum, rejected: progress.bad }))
    } else {
        Ok(Outcome::more_json(&progress, progress.offset, total))
    }
}

/// Counts one data row into the running totals.
fn tally(progress: &mut Progress, record: &[String], columns: Columns) -> Result<(), StepError> {
    progress.offset += 1;
    let has_id = record.get(columns.id).is_some_and(|id| !id.trim().is_empty());
    let has_name = record.get(columns.name).is_some();
    match record.get(columns.amount).and_then(|amount| parse_cents(amount)) {
        Some(cents) if has_id && has_name => {
            progress.sum = progress
                .sum
                .checked_add(cents)
                .ok_or_else(|| StepError::refused("sum-overflow", "the amounts add up to more than fits in 64 bits"))?;
            progress.count += 1;
        }
        _ => progress.bad += 1,
    }
    Ok(())
}

fn summarise(step: &mut Step) -> Result<Outcome, StepError> {
    let imported: Imported = step.prior("import")?;
    let average_cents = match i64::try_from(imported.rows) {
        Ok(rows) if rows > 0 => imported.sum_cents / rows,
        _ => 0,
    };
    Ok(Outcome::complete(&serde_json::json!({
        "rows": imported.rows,
        "rejected": imported.rejected,
        "sum_cents": imported.sum_cents,
        "average_cents": average_cents,
        "total": format_cents(imported.sum_cents),
    })))
}

/// Row `index` of a generated import: deterministic, with an unparsable amount every
/// 97th row so that rejection is exercised too.
fn generated_row(index: u64) -> String {
    let id = index + 1;
    if id.is_multiple_of(97) {
        return format!("{id},customer-{id:06},n/a\n");
    }
    let cents = (index * 7_919) % 100_000;
    format!("{id},customer-{id:06},{}.{:02}\n", cents / 100, cents % 100)
}

/// Parses an amount such as `12`, `12.5` or `-0.07` into cents; `None` for anything
/// else (more than two decimals included: rounding money silently is a bug).
fn parse_cents(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (units, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if units.is_empty() || !all_digits(units) || !all_digits(fraction) || fraction.len() > 2 {
        return None;
    }
    let fraction_cents = match fraction.len() {
        0 => 0,
        1 => fraction.parse::<i64>().ok()? * 10,
        _ => fraction.parse::<i64>().ok()?,
    };
    let cents = units.parse::<i64>().ok()?.checked_mul(100)?.checked_add(fraction_cents)?;
    Some(if negative { -cents } else { cents })
}

fn format_cents(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}{}.{:02}", cents / 100, cents % 100)
}

fn is_blank(record: &[String]) -> bool {
    matches!(record, [only] if only.trim().is_empty())
}

/// Reads the CSV record that starts at byte `at` (RFC 4180: quoted fields may hold
/// commas, doubled quotes and line breaks). Returns its fields and the byte where the
/// next record starts, or `None` at the end of the text.
fn read_record(text: &str, mut at: usize) -> Option<(Vec<String>, usize)> {
    let bytes = text.as_bytes();
    if at >= bytes.len() {
        return None;
    }
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    // Start of the run of bytes not yet copied into `field`; every boundary below is
    // an ASCII delimiter, so slicing `text` there is always on a char boundary.
    let mut run = at;
    loop {
        let Some(&byte) = bytes.get(at) else {
            field.push_str(&text[run..]);
            fields.push(field);
            return Some((fields, at));
        };
        match (quoted, byte) {
            (true, b'"') => {
                field.push_str(&text[run..at]);
                if bytes.get(at + 1) == Some(&b'"') {
                    field.push('"');
                    at += 2;
                } else {
                    quoted = false;
                    at += 1;
                }
                run = at;
            }
            (false, b'"') => {
                field.push_str(&text[run..at]);
                quoted = true;
                at += 1;
                run = at;
            }
            (false, b',') => {
                field.push_str(&text[run..at]);
                fields.push(std::mem::take(&mut field));
                at += 1;
                run = at;
            }
            (false, b'\n' | b'\r') => {
                field.push_str(&text[run..at]);
                fields.push(field);
                let crlf = byte == b'\r' && bytes.get(at + 1) == Some(&b'\n');
                return Some((fields, at + 1 + usize::from(crlf)));
            }
            _ => at += 1,
        }
    }
}

spindle_guest::export_kind!(CsvImport);

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &str) -> Vec<Vec<String>> {
        let mut at = 0;
        let mut out = Vec::new();
        while let Some((record, next)) = read_record(text, at) {
            out.push(record);
            at = next;
        }
        out
    }

    #[test]
    fn reads_quoted_fields_and_line_endings() {
        let text = "id,name,amount\r\n1,\"Lovelace, Ada\",1.50\n2,\"say \"\"hi\"\"\nthere\",3";
        assert_eq!(
            records(text),
            [vec!["id", "name", "amount"], vec!["1", "Lovelace, Ada", "1.50"], vec!["2", "say \"hi\"\nthere", "3"],]
        );
    }

    #[test]
    fn parses_amounts_into_cents() {
        assert_eq!(parse_cents("12"), Some(1_200));
        assert_eq!(parse_cents("12.5"), Some(1_250));
        assert_eq!(parse_cents(" -0.07 "), Some(-7));
        assert_eq!(parse_cents("1.234"), None);
        assert_eq!(parse_cents("n/a"), None);
        assert_eq!(parse_cents("."), None);
        assert_eq!(format_cents(-1_205), "-12.05");
    }

    #[test]
    fn header_needs_every_required_column_in_any_order() {
        let header = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        assert!(columns(&header("amount, name ,id")).is_ok());
        let error = columns(&header("id,name")).expect_err("amount is missing");
        assert_eq!(error.code(), "bad-header");
    }

    #[test]
    fn generated_rows_reject_every_97th_amount() {
        let mut progress = Progress::default();
        let columns = Columns { id: 0, name: 1, amount: 2 };
        for index in 0..194 {
            let line = generated_row(index);
            let (record, _) = read_record(&line, 0).expect("a generated row");
            tally(&mut progress, &record, columns).expect("no overflow");
        }
        assert_eq!((progress.offset, progress.count, progress.bad), (194, 192, 2));
    }
}

#[cfg(test)]
mod job_tests {
    use spindle_guest::bindings::spindle::job::types::StepOutcome;
    use spindle_guest::testing::run_job;

    use super::*;

    #[test]
    fn imports_generated_rows_in_slices_carrying_totals_in_the_cursor() {
        let run = run_job::<CsvImport>(br#"{"generate_rows": 2500, "slice": 1000}"#);
        assert!(run.succeeded(), "{:?}", run.failure);
        let imported: Imported = run.output("import").expect("import completed");
        assert_eq!((imported.rows, imported.rejected), (2_500 - 25, 25));
        let calls: Vec<_> = run.calls_of("import").collect();
        assert_eq!(calls.len(), 3);
        assert!(matches!(&calls[0].outcome, StepOutcome::More(c) if c.done == 1_000 && c.total == Some(2_500)));
        let expected_sum: i64 = (0..2_500_u64)
            .filter(|i| !(i + 1).is_multiple_of(97))
            .map(|i| i64::try_from((i * 7_919) % 100_000).expect("small"))
            .sum();
        assert_eq!(imported.sum_cents, expected_sum);
    }

    #[test]
    fn imports_csv_text_and_rejects_bad_amounts() {
        let csv = "name,amount,id\nAda,12.50,1\n\nBob,oops,2\n\"Lee, C\",-0.50,3\n";
        let payload = serde_json::json!({ "csv": csv, "slice": 2 }).to_string();
        let run = run_job::<CsvImport>(payload.as_bytes());
        assert!(run.succeeded(), "{:?}", run.failure);
        let imported: Imported = run.output("import").expect("import completed");
        assert_eq!((imported.rows, imported.sum_cents, imported.rejected), (2, 1_200, 1));
        let summary: serde_json::Value = run.output("summarise").expect("summarise completed");
        assert_eq!(summary["total"], "12.00");
    }

    #[test]
    fn a_header_without_amount_is_refused() {
        let payload = serde_json::json!({ "csv": "id,name\n1,Ada\n" }).to_string();
        let run = run_job::<CsvImport>(payload.as_bytes());
        assert_eq!(run.failure.map(|f| f.code), Some("bad-header".to_owned()));
    }
}
