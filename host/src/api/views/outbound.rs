//! Outbound requests as the API shows them: the rules a tenant's steps may use, its
//! secrets (names and times, never values) and the record of a job's requests.

use crate::api::time::rfc3339;
use crate::engine::{RecordedCall, SecretInfo};
use spindle_views::{CallView, SecretView};

impl From<&SecretInfo> for SecretView {
    fn from(s: &SecretInfo) -> Self {
        Self { name: s.name.clone(), updated_at: rfc3339(s.updated_at) }
    }
}

impl From<&RecordedCall> for CallView {
    fn from(r: &RecordedCall) -> Self {
        let c = &r.call;
        let host = if c.host.contains(':') { format!("[{}]", c.host) } else { c.host.clone() };
        // Port 0: a request too malformed to have a destination, shown as written.
        let url = match (c.port, c.scheme.is_empty() && c.host.is_empty()) {
            (0, true) => format!("(malformed) {}", c.path),
            (0, false) => format!("(malformed) {}://{}{}", c.scheme, c.host, c.path),
            _ => format!("{}://{host}:{}{}", c.scheme, c.port, c.path),
        };
        Self {
            step: r.step.clone(),
            attempt: r.attempt,
            seq: c.seq,
            at: rfc3339(r.at),
            method: c.method.clone(),
            url,
            status: c.status,
            error: c.error.clone(),
            denied: c.denied.clone(),
            bytes: c.bytes,
            duration_ms: c.duration_ms,
        }
    }
}
