//! Outbound requests as the API shows them: the rules a tenant's steps may use, its
//! secrets (names and times, never values) and the record of a job's requests.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a tenant's steps may reach, within the operator's policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantOutbound {
    /// The tenant.
    #[serde(default)]
    pub tenant: String,
    /// Rules such as `POST https://api.example.com/v1/*`; `null` or empty: nothing.
    /// Named in every request, `null` included.
    #[serde(deserialize_with = "crate::named")]
    pub allow: Option<Vec<String>>,
}

/// A secret, as shown: its name and when it was last set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SecretView {
    /// Its name.
    pub name: String,
    /// When it was last set (RFC 3339).
    pub updated_at: String,
}

/// The tenant's secrets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SecretList {
    /// Each secret, by name.
    pub secrets: Vec<SecretView>,
}

/// One outbound request a step attempt made: no query values, headers or bodies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CallView {
    /// The step.
    pub step: String,
    /// The attempt.
    pub attempt: u32,
    /// Its position among the call's requests, from 1.
    pub seq: u32,
    /// When the call that made it ended.
    pub at: String,
    /// The method.
    pub method: String,
    /// `scheme://host:port/path`, without the query.
    pub url: String,
    /// The response's status, if one came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The error the step got instead (a `wasi:http` error code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The policy layer that denied it (`operator-policy`, `tenant-policy`, `kind-policy`,
    /// `blocked-address`, `request-limit`), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    /// Response body bytes received.
    pub bytes: u64,
    /// Milliseconds to the response head (or the error).
    pub duration_ms: u64,
}
