//! What a guest wrote during one call, kept for its job's logs: its `log` lines, as it
//! logged them, and what it printed to stdout and stderr, line by line. Each is capped
//! where it enters the host (lines per call and bytes per line for `log`, bytes per
//! stream for stdio); what a cap dropped is said in a last line of the host's own.

use std::time::{SystemTime, UNIX_EPOCH};

/// A guest log line's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `trace`.
    Trace,
    /// `debug`.
    Debug,
    /// `info`.
    Info,
    /// `warn`.
    Warn,
    /// `error`.
    Error,
}

impl Level {
    /// Its name, as the API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trace => "trace",
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
        }
    }

    /// The level named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "trace" => Self::Trace,
            "debug" => Self::Debug,
            "info" => Self::Info,
            "warn" => Self::Warn,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

/// Where a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The host's `log` function.
    Log,
    /// The guest's stdout.
    Stdout,
    /// The guest's stderr.
    Stderr,
    /// The host, about the guest's lines (what a cap dropped).
    Host,
}

impl Stream {
    /// Its name, as the API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::Host => "spindle",
        }
    }

    /// The stream named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "log" => Self::Log,
            "stdout" => Self::Stdout,
            "stderr" => Self::Stderr,
            "spindle" => Self::Host,
            _ => return None,
        })
    }
}

/// One line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestLine {
    /// When it was written, in microseconds since the Unix epoch (stdio lines: when the
    /// call ended, which is when the host reads them).
    pub at_micros: i64,
    /// Its level (stdout is `info`, stderr `warn`).
    pub level: Level,
    /// Where it came from.
    pub stream: Stream,
    /// The text, without its line break.
    pub message: String,
}

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
