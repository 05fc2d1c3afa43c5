//! Submissions applications made in their own PostgreSQL transactions, as the API shows
//! them, and the role mapping that lets a database role make them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ViolationView;

/// `GET /v1/submissions/{id}`: a submission made with `spindle.submit`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubmissionView {
    /// Its id, as `spindle.submit` answered it.
    pub id: String,
    /// The kind.
    pub kind: String,
    /// `queued` (committed, not yet admitted), `waiting` (committed, over one of the
    /// tenant's quotas: it is admitted once the quota allows, never refused for it;
    /// `message` says which), `admitted` or `refused`.
    pub state: String,
    /// The job it made (or the one its idempotency key already named), once admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Why it was refused: the code `POST /v1/jobs` would have answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// What was wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// With `invalid-input`: each offending value's JSON pointer and message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<ViolationView>>,
    /// The database role that submitted it.
    pub submitted_by: String,
    /// When its transaction called `spindle.submit`.
    pub submitted_at: String,
}

/// `PUT /v1/tenants/{name}/sql-roles/{role}`: the role now submits as the tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SqlRoleGranted {
    /// The tenant.
    pub tenant: String,
    /// The database role.
    pub role: String,
}
