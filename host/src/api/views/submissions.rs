//! Submissions applications made in their own PostgreSQL transactions, as the API shows
//! them, and the role mapping that lets a database role make them.

use crate::api::time::rfc3339;
use crate::engine::{SqlSubmission, SqlVerdict};
use spindle_views::{SubmissionView, ViolationView};

impl From<&SqlSubmission> for SubmissionView {
    fn from(s: &SqlSubmission) -> Self {
        let (state, job, code, message, violations) = match &s.verdict {
            SqlVerdict::Queued => ("queued", None, None, None, None),
            SqlVerdict::Waiting { reason, .. } => {
                ("waiting", None, Some("quota-exceeded".to_owned()), Some(reason.clone()), None)
            }
            SqlVerdict::Admitted(job) => ("admitted", Some(job.to_string()), None, None, None),
            SqlVerdict::Refused { code, message, violations } => {
                let violations = violations
                    .as_deref()
                    .and_then(|v| serde_json::from_str::<Vec<spindle_runtime::Violation>>(v).ok())
                    .map(|v| v.into_iter().map(|v| ViolationView { pointer: v.pointer, message: v.message }).collect());
                ("refused", None, Some(code.clone()), Some(message.clone()), violations)
            }
        };
        Self {
            id: s.id.clone(),
            kind: s.kind.clone(),
            state: state.to_owned(),
            job,
            code,
            message,
            violations,
            submitted_by: s.submitted_by.clone(),
            submitted_at: rfc3339(s.submitted_at),
        }
    }
}
