//! A tenant's capacity as the API shows it: the limits the operator set, each kind's
//! running limit, usage so far and what is queued and running now.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A tenant's limits. Each field left out (or null) is "no limit" (for the sandbox
/// ceilings: the host's own); a `PUT` replaces them all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsView {
    /// Its share of claims within a priority layer, against other tenants' (1 to 1000;
    /// default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Steps running at once, on every host together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<u32>,
    /// Jobs submitted and not yet started; a submission past it is refused (429).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queued: Option<u64>,
    /// Submissions per second, sustained; past it a submission is refused (429).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_sec: Option<u32>,
    /// Submissions in one burst (default: one second's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_burst: Option<u32>,
    /// Bytes of deployed components, every version together; a deploy past it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deployed_bytes: Option<u64>,
    /// A step's linear memory (at most the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_memory_bytes: Option<u64>,
    /// A step's time in milliseconds (at most the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_step_timeout_ms: Option<u64>,
    /// A step's fuel (at most the host's, where it meters fuel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fuel: Option<u64>,
}

/// One kind's usage and load.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KindUsageView {
    /// The kind.
    pub kind: String,
    /// Its running limit, when its deployment set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<u32>,
    /// Jobs submitted and not yet started, now.
    pub queued: u64,
    /// Steps running, now.
    pub running: u64,
    /// Steps run so far (every attempt).
    pub steps: u64,
    /// Steps that faulted in the sandbox or ran out of time.
    pub faults: u64,
    /// Time inside the sandbox, in microseconds.
    pub sandbox_micros: u64,
    /// Time from claim to outcome, in microseconds.
    pub wall_micros: u64,
    /// Outbound HTTP requests sent.
    pub outbound_requests: u64,
}

/// A tenant's limits and usage.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CapacityView {
    /// The tenant.
    pub tenant: String,
    /// Its limits.
    pub limits: LimitsView,
    /// Its kinds.
    pub kinds: Vec<KindUsageView>,
    /// Bytes its kinds' versions hold, uploads and compiled code together (what
    /// `max_deployed_bytes` bounds).
    #[serde(default)]
    pub deployed_bytes: u64,
}
