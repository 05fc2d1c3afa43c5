//! Tenants and their tokens as the API shows them (operator token).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A tenant to create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    /// Its name: 1-64 characters of a-z, 0-9, '-', '_' or '.'.
    pub name: String,
}

/// A tenant and a new token for it. The token is shown this once: only its hash is kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantToken {
    /// The tenant's name.
    pub tenant: String,
    /// The bearer token.
    pub token: String,
}

/// A tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantView {
    /// Its name.
    pub name: String,
    /// When it was created.
    pub created_at: String,
    /// How many seconds its finished jobs are kept; absent: the host's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_secs: Option<u64>,
}

/// How long a tenant's finished jobs are kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// Seconds, from 60 to ten years; `null`: the host's default (`--retention`). Named
    /// in every request, `null` included.
    #[serde(deserialize_with = "crate::named")]
    pub retention_secs: Option<u64>,
}

/// Every tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantList {
    /// The tenants.
    pub tenants: Vec<TenantView>,
    /// Whether this host lets the operator read tenants' jobs (`operator_reads_tenants`;
    /// each read audited in the tenant's trail). Absent from older hosts: read as false.
    #[serde(default)]
    pub operator_reads: bool,
}
