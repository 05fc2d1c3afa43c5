//! What the client prints for people (without `--json`).

use serde::Serialize;

use spindle::api::views::{CapacityView, CreatedToken, FailureView, JobPage, JobView, SpecView, TokenList};

/// Prints `value` as pretty JSON with `--json`, else as `human` prints it.
pub(super) fn emit<T: Serialize>(json: bool, value: &T, human: impl FnOnce(&T)) {
    if json {
        out!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
    } else {
        human(value);
    }
}

/// A note when a request is recorded but waits.
pub(super) fn pending(requested: bool, note: &str) -> String {
    if requested { format!(" ({note})") } else { String::new() }
}

/// Whether a job in `state` will never change.
pub(super) fn is_final(state: &str) -> bool {
    matches!(state, "succeeded" | "failed" | "cancelled")
}

/// The process's exit code for a job that ended in `state`.
pub(super) fn exit_for(state: &str) -> u8 {
    if state == "succeeded" { 0 } else { 1 }
}

/// `state progress%`, and the failure when there is one.
pub(super) fn state_line(job: &JobView) -> String {
    let mut line = format!("{} {}%", job.state, job.progress);
    if let Some(failure) = &job.failure {
        line.push_str(&format!(" ({})", failure_summary(failure)));
    }
    line
}

/// A failure in one line: its code, then its message; a transient failure keeps no
/// message in the record (spindle_core::failure), so the guest's last stderr line stands
/// in for it when there is one, and otherwise the reference its detail is logged under.
pub(super) fn failure_summary(failure: &FailureView) -> String {
    let stderr_line = failure.guest_stderr.as_deref().and_then(|s| s.lines().rev().find(|l| !l.trim().is_empty()));
    match (failure.message.as_str(), stderr_line, failure.correlation.as_deref()) {
        ("", Some(line), _) => format!("{}: {}", failure.code, line.trim()),
        ("", None, Some(reference)) => format!("{}, ref {reference}", failure.code),
        ("", None, None) => failure.code.clone(),
        (message, _, _) => format!("{}: {message}", failure.code),
    }
}

/// What a kind's current version expects as input: its schema and an example to submit.
pub(super) fn input_schema(kind: &str, version: i64, spec: &SpecView) {
    match (&spec.input_schema, &spec.input_example) {
        (Some(schema), example) => {
            out!("  input schema (version {version}):");
            for line in serde_json::to_string_pretty(schema).unwrap_or_default().lines() {
                out!("    {line}");
            }
            if let Some(example) = example {
                out!("  example: spindle submit {kind} --input '{example}'");
            }
        }
        (None, _) => out!("  input: any JSON (version {version} declares no schema)"),
    }
}

/// A kind's steps, in order.
pub(super) fn steps(spec: Option<&SpecView>) -> String {
    spec.map(|spec| spec.steps.iter().map(|step| step.key.as_str()).collect::<Vec<_>>().join(" → ")).unwrap_or_default()
}

/// The first 12 characters of a digest.
pub(super) fn short(digest: &str) -> String {
    digest.chars().take(12).collect()
}

/// A page of jobs as a table.
pub(super) fn page(page: &JobPage) {
    out!("{:<38} {:<16} {:>3} {:<10} {:>4}  {:<28} why", "id", "kind", "v", "state", "%", "created");
    for job in &page.jobs {
        out!(
            "{:<38} {:<16} {:>3} {:<10} {:>4}  {:<28} {}",
            job.id,
            job.kind,
            job.kind_version,
            job.state,
            job.progress,
            job.created_at,
            job.failure_code.as_deref().unwrap_or("")
        );
    }
    if let Some(next) = page.next_cursor {
        out!("more: --cursor {next}");
    }
}

/// A job in full: its steps and, when the host sent it, its history.
pub(super) fn job(job: &JobView) {
    out!("job      {}", job.id);
    out!("kind     {} v{} ({} priority)", job.kind, job.kind_version, job.priority);
    out!("state    {}", state_line(job));
    out!("created  {}", job.created_at);
    for (label, value) in [
        ("started", &job.started_at),
        ("settled", &job.settled_at),
        ("retry of", &job.predecessor),
        ("retried", &job.successor),
        ("parent", &job.parent),
    ] {
        if let Some(value) = value {
            out!("{label:<8} {value}");
        }
    }
    if let Some(wait) = &job.waiting_for {
        out!("waits    {wait}");
    }
    for (name, count) in &job.pending_signals {
        out!("signal   {name} ×{count} pending");
    }
    out!("\n  {:<16} {:<10} {:>8}  last attempt", "step", "state", "attempts");
    for step in &job.steps {
        let detail = match step.attempts.last() {
            Some(attempt) => {
                let code = attempt.failure.as_ref().map(|f| format!(" {}", f.code)).unwrap_or_default();
                format!("{}{code}", attempt.outcome)
            }
            None if step.carried => "carried from the predecessor".to_owned(),
            None => String::new(),
        };
        out!("  {:<16} {:<10} {:>8}  {detail}", step.key, step.state, step.attempts.len());
        let stderr = step.attempts.last().and_then(|a| a.failure.as_ref()).and_then(|f| f.guest_stderr.as_deref());
        if let Some(stderr) = stderr {
            out!("    its guest's stderr ended with:");
            for line in stderr.lines() {
                out!("      {line}");
            }
        }
    }
    if let Some(calls) = job.outbound.as_ref().filter(|c| !c.is_empty()) {
        out!("\noutbound requests");
        for c in calls {
            let result = match (c.status, &c.error, &c.denied) {
                (_, _, Some(layer)) => format!("denied ({layer})"),
                (Some(status), _, _) => format!("{status}, {} bytes", c.bytes),
                (None, Some(error), _) => error.clone(),
                (None, None, None) => "no answer".to_owned(),
            };
            out!("  {} #{}.{} {} {} → {result} in {} ms", c.step, c.attempt, c.seq, c.method, c.url, c.duration_ms);
        }
    }
    if job.record == "lean" {
        out!("\nhistory  none: its kind keeps a lean record (the job row alone)");
    }
    if let Some(history) = &job.history {
        out!("\nhistory");
        for entry in history {
            let rest = if entry.fields.is_empty() {
                String::new()
            } else {
                serde_json::to_string(&entry.fields).unwrap_or_default()
            };
            out!("  {}  {:<18} {rest}", entry.at, entry.event);
        }
    }
}

/// A token just made: what it is, then the token alone on the last line (shown once), so
/// that `| tail -1` takes it.
pub(super) fn created_token(created: &CreatedToken) {
    let whose = created.tenant.as_deref().map_or_else(|| "an operator token".to_owned(), |t| format!("tenant {t}"));
    let expires = created.expires_at.as_deref().map(|at| format!(", expires {at}")).unwrap_or_default();
    out!("token {} ({whose}, {:?}{expires}) created; the token (shown once):", created.id, created.name);
    out!("{}", created.token);
}

/// Tokens as a table.
pub(super) fn tokens(list: &TokenList) {
    out!("{:<18} {:<16} {:<9} {:<8} {:<28} {:<28} name", "id", "tenant", "role", "state", "created", "expires");
    for token in &list.tokens {
        out!(
            "{:<18} {:<16} {:<9} {:<8} {:<28} {:<28} {}",
            token.id,
            token.tenant.as_deref().unwrap_or("-"),
            token.role,
            token.state,
            token.created_at,
            token.expires_at.as_deref().unwrap_or("-"),
            token.name
        );
    }
}

/// A parent's children, one line each, under its job view.
pub(super) fn children(page: &JobPage) {
    out!("children ({}{}):", page.jobs.len(), if page.next_cursor.is_some() { ", more" } else { "" });
    for job in &page.jobs {
        let why = job.failure_code.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
        out!("  └─ {} {} {}{why}", job.id, job.kind, job.state);
    }
}

/// Schedules as a table.
pub(super) fn schedules(list: &spindle::api::ScheduleList) {
    out!("{:<20} {:<18} {:<16} {:<14} {:<6} {:>6}  next", "name", "kind", "cron", "zone", "state", "fired");
    for s in &list.schedules {
        out!(
            "{:<20} {:<18} {:<16} {:<14} {:<6} {:>6}  {}",
            s.name,
            s.kind,
            s.cron,
            s.timezone,
            if s.paused { "paused" } else { "active" },
            s.fired,
            s.next_fire_at
        );
    }
}

/// A tenant's limits, then one line per kind: load now, usage so far.
pub(super) fn capacity(c: &CapacityView) {
    let l = &c.limits;
    let or_none = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    out!("tenant {}", c.tenant);
    out!(
        "  weight {}  max-running {}  max-queued {}  rate {}  burst {}",
        l.weight.unwrap_or(1),
        or_none(l.max_running.map(u64::from)),
        or_none(l.max_queued),
        l.rate_per_sec.map_or_else(|| "-".to_owned(), |r| format!("{r}/s")),
        or_none(l.rate_burst.map(u64::from)),
    );
    out!(
        "  max-deployed-bytes {}  max-memory {}  max-step-timeout-ms {}  max-fuel {}",
        or_none(l.max_deployed_bytes),
        or_none(l.max_memory_bytes),
        or_none(l.max_step_timeout_ms),
        or_none(l.max_fuel),
    );
    if c.kinds.is_empty() {
        out!("  no kinds have run");
        return;
    }
    out!(
        "  {:<24} {:>8} {:>8} {:>8} {:>10} {:>7} {:>12} {:>12} {:>9}",
        "KIND",
        "LIMIT",
        "QUEUED",
        "RUNNING",
        "STEPS",
        "FAULTS",
        "SANDBOX_MS",
        "WALL_MS",
        "OUTBOUND"
    );
    for k in &c.kinds {
        out!(
            "  {:<24} {:>8} {:>8} {:>8} {:>10} {:>7} {:>12} {:>12} {:>9}",
            k.kind,
            or_none(k.max_running.map(u64::from)),
            k.queued,
            k.running,
            k.steps,
            k.faults,
            k.sandbox_micros / 1000,
            k.wall_micros / 1000,
            k.outbound_requests,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(message: &str, correlation: Option<&str>, stderr: Option<&str>) -> FailureView {
        FailureView {
            code: "uncaught-exception".into(),
            message: message.into(),
            correlation: correlation.map(Into::into),
            guest_stderr: stderr.map(Into::into),
        }
    }

    #[test]
    fn a_transient_failure_reads_as_its_guests_last_stderr_line_never_a_dangling_colon() {
        let traceback = "Traceback (most recent call last):\n  File \"kind.py\", line 9\nKeyError: 'missing'\n\n";
        assert_eq!(
            failure_summary(&failure("", Some("c-17"), Some(traceback))),
            "uncaught-exception: KeyError: 'missing'"
        );
        assert_eq!(failure_summary(&failure("", Some("c-17"), None)), "uncaught-exception, ref c-17");
        assert_eq!(failure_summary(&failure("", None, Some("  \n"))), "uncaught-exception");
        assert_eq!(failure_summary(&failure("card declined", None, Some("x"))), "uncaught-exception: card declined");
    }
}
