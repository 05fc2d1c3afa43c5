//! What a guest wrote during one call, kept for its job's logs: its `log` lines, as it
//! logged them, and what it printed to stdout and stderr, line by line. Each is capped
//! where it enters the host (lines per call and bytes per line for `log`, bytes per
//! stream for stdio); what a cap dropped is said in a last line of the host's own.

use std::time::{SystemTime, UNIX_EPOCH};

pub use spindle_core::reports::{GuestLine, Level, Stream};

/// Now, in microseconds since the Unix epoch.
pub(crate) fn now_micros() -> i64 {
    let micros = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros());
    i64::try_from(micros).unwrap_or(i64::MAX)
}

/// `text`'s lines as [`GuestLine`]s of `stream`, stamped `at_micros`.
pub(crate) fn split(text: &[u8], stream: Stream, level: Level, at_micros: i64) -> impl Iterator<Item = GuestLine> + '_ {
    text.split(|b| *b == b'\n')
        .map(|line| String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line)).into_owned())
        .filter(|line| !line.is_empty())
        .map(move |message| GuestLine { at_micros, level, stream, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_text_becomes_its_lines() {
        let lines: Vec<String> =
            split(b"one\r\ntwo\n\nthree", Stream::Stdout, Level::Info, 7).map(|l| l.message).collect();
        assert_eq!(lines, ["one", "two", "three"]);
    }

    #[test]
    fn names_go_both_ways() {
        for level in [Level::Trace, Level::Debug, Level::Info, Level::Warn, Level::Error] {
            assert_eq!(Level::parse(level.as_str()), Some(level));
        }
        for stream in [Stream::Log, Stream::Stdout, Stream::Stderr, Stream::Host] {
            assert_eq!(Stream::parse(stream.as_str()), Some(stream));
        }
    }
}
