//! What a step's sandbox reports besides its outcome, as data: the lines its guest
//! wrote (its `log` calls, its stdout and stderr) and the outbound requests it made. The
//! runtime produces them, the store keeps them and the API shows them; none of those
//! needs the others to name them.

use serde::{Deserialize, Serialize};

/// A guest log line's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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

/// One outbound request as the step attempt's record keeps it: no query values, no
/// headers, no body, so no secret.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundCall {
    /// Its position among the call's requests, from 1.
    pub seq: u32,
    /// The method.
    pub method: String,
    /// `http` or `https`.
    pub scheme: String,
    /// The host as the guest named it.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path, without the query.
    pub path: String,
    /// The response's status, when one came.
    pub status: Option<u16>,
    /// The error the guest got instead, as a `wasi:http` error code name.
    pub error: Option<String>,
    /// Which policy layer denied it, when one did.
    pub denied: Option<String>,
    /// Response body bytes the guest received.
    pub bytes: u64,
    /// Time from the request to its response head (or error), in milliseconds.
    pub duration_ms: u64,
}

impl OutboundCall {
    /// What the metrics count it as: `ok` (2xx/3xx), `client-error`, `server-error`,
    /// `denied` or `error`.
    pub fn outcome(&self) -> &'static str {
        match (self.status, &self.denied) {
            (_, Some(_)) => "denied",
            (Some(s), _) if s < 400 => "ok",
            (Some(s), _) if s < 500 => "client-error",
            (Some(_), _) => "server-error",
            (None, _) => "error",
        }
    }
}
