//! Operator-safe failure accounts.
//!
//! Whatever a job's record holds may be shown to the tenant and to operators. A transient
//! failure keeps only its code and a correlation reference; its detail (an upstream's
//! message, a trap's backtrace) goes to the host's log under that reference and never
//! into the record. The one exception is the guest's own last stderr lines when its
//! attempt failed: what the tenant's code printed (a traceback, a panic message) is the
//! tenant's to read, and without it a tenant cannot see why its step failed.

use serde::{Deserialize, Serialize};

/// Longest code kept in a record; longer codes are cut. A guest controls the code, so it
/// is bounded like any other guest-sized value.
pub const MAX_CODE_LEN: usize = 64;
/// Longest message kept in a record; longer messages are cut at a character boundary.
pub const MAX_MESSAGE_LEN: usize = 1024;

/// A failure as the job's record keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafeFailure {
    /// Stable, machine-readable reason, e.g. `card-declined` or `sandbox.deadline`.
    pub code: String,
    /// Operator-safe explanation. Empty for transient failures, whose detail is logged.
    pub message: String,
    /// Reference to the host log lines that hold the detail, when there is any.
    pub correlation: Option<String>,
    /// The guest's last stderr lines when its attempt failed (capped by the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_stderr: Option<String>,
}

impl SafeFailure {
    /// A permanent failure whose message the reporter declared operator-safe.
    pub fn permanent(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: clip(code.into(), MAX_CODE_LEN),
            message: clip(message.into(), MAX_MESSAGE_LEN),
            correlation: None,
            guest_stderr: None,
        }
    }

    /// A transient failure: only the code and the correlation reference are kept.
    pub fn transient(code: impl Into<String>, correlation: impl Into<String>) -> Self {
        Self {
            code: clip(code.into(), MAX_CODE_LEN),
            message: String::new(),
            correlation: Some(correlation.into()),
            guest_stderr: None,
        }
    }

    /// A failure the host itself explains (reconciliation, cancellation, restart).
    pub fn host(code: &'static str, message: &'static str) -> Self {
        Self { code: code.to_owned(), message: message.to_owned(), correlation: None, guest_stderr: None }
    }

    /// The same failure with the guest's last stderr lines attached.
    pub fn with_guest_stderr(self, guest_stderr: Option<String>) -> Self {
        Self { guest_stderr, ..self }
    }
}

/// `s` as one line of a host log: line breaks, tabs and other control characters are
/// escaped (`\n`, `\u{1b}`), so text a guest supplied can never start a log line of its
/// own and pass for the host's. Text without them is borrowed as it is.
pub fn for_log(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Cuts `s` to at most `max` bytes at a character boundary.
pub fn clip(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// Explanations the host records in its own words.
pub mod host_codes {
    /// An attempt made more checkpoints than its budget allows.
    pub const CHECKPOINT_BUDGET: (&str, &str) =
        ("checkpoint.budget-exceeded", "the attempt made more checkpoints than one attempt may");
    /// An attempt checkpointed faster than its budget allows.
    pub const CHECKPOINT_RATE: (&str, &str) =
        ("checkpoint.rate-exceeded", "the attempt checkpointed faster than one attempt may");
    /// The reconciler found no execution for a job that never started.
    pub const NEVER_STARTED: (&str, &str) =
        ("reconciler.never-started", "the job never started: no execution was found for it");
    /// The reconciler found the execution missing or terminal.
    pub const EXECUTION_LOST: (&str, &str) =
        ("reconciler.execution-lost", "the job's execution was lost before it reported an outcome");
    /// The reconciler found the execution failed.
    pub const EXECUTION_FAILED: (&str, &str) = ("reconciler.execution-failed", "the job's execution ended in failure");
    /// The execution reported success while steps were still in flight.
    pub const SUCCESS_CORRECTED: (&str, &str) =
        ("reconciler.success-corrected", "the job was reported successful with steps still in flight");
    /// A step in flight when the job was cancelled.
    pub const STOPPED: (&str, &str) = ("cancel.stopped", "the step was stopped by a cancellation");
    /// A step in flight when a restart began a fresh pass.
    pub const SUPERSEDED: (&str, &str) = ("restart.superseded", "the step was superseded by a restart");
    /// The holder of a claim stopped renewing its lease.
    pub const LEASE_EXPIRED: (&str, &str) = ("lease.expired", "the host running the step stopped renewing its lease");
    /// An `await-children` outcome asked for more children than one fan-out may create.
    pub const FAN_OUT_TOO_LARGE: &str = "workflow.fan-out-too-large";
    /// Children would nest deeper than the depth limit.
    pub const TOO_DEEP: &str = "workflow.too-deep";
    /// A join waits for more children than the fan-out creates.
    pub const INVALID_JOIN: &str = "workflow.invalid-join";
    /// A signal wait without a name.
    pub const INVALID_SIGNAL: &str = "workflow.invalid-signal";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_text_stays_on_one_log_line() {
        assert_eq!(for_log("plain text"), "plain text");
        assert_eq!(
            for_log("a\n2099-01-01T00:00:00Z INFO spindle: forged"),
            "a\\n2099-01-01T00:00:00Z INFO spindle: forged"
        );
        assert_eq!(for_log("\r\t\u{1b}[31m"), "\\r\\t\\u{1b}[31m");
    }

    #[test]
    fn transient_failures_keep_no_detail() {
        let f = SafeFailure::transient("upstream-unavailable", "c-123");
        assert!(f.message.is_empty());
        assert_eq!(f.correlation.as_deref(), Some("c-123"));
    }

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("héllo".to_owned(), 2), "h");
        assert_eq!(clip("abc".to_owned(), 10), "abc");
        assert_eq!(SafeFailure::permanent("x".repeat(100), "m").code.len(), MAX_CODE_LEN);
    }
}
