//! Hosts and the storage format gate as the API shows them (operator token), and what
//! `/v1/health` says of this host.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A host as it announced itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HostView {
    /// Its id (claims carry it).
    pub id: String,
    /// Its process's instance: two processes of one host id are two rows, told apart by
    /// it (empty for a process of a build from before instances).
    #[serde(default)]
    pub instance: String,
    /// Its build: version and commit (`spindle 0.1.0 (3f2a9c1e4b7d)`).
    pub build: String,
    /// The storage formats it reads, oldest and newest.
    pub reads: [u32; 2],
    /// The newest storage format it writes.
    pub writes: u32,
    /// The contract versions it runs.
    pub contracts: Vec<String>,
    /// Whether it finishes what it holds and claims nothing new.
    pub draining: bool,
    /// Whether its heartbeat is current (an expired process is gone; its row stays
    /// listed for an hour).
    pub live: bool,
    /// When it started.
    pub started_at: String,
    /// Its last heartbeat.
    pub heartbeat_at: String,
}

/// The storage format gate: the format every host writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GateView {
    /// The format.
    pub format: u32,
    /// When it was set or last moved.
    pub moved_at: String,
    /// Who set it (the first host) or moved it (the operator, through which host).
    pub moved_by: String,
}

/// `GET /v1/hosts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HostList {
    /// The gate; absent before any host joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateView>,
    /// Every recorded host, by id.
    pub hosts: Vec<HostView>,
}

/// `POST /v1/upgrade/finalize`: the gate moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Finalized {
    /// The format before.
    pub from: u32,
    /// The format every host writes now.
    pub to: u32,
}

/// This host's storage formats, in `/v1/health`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StorageHealth {
    /// The formats this build reads, oldest and newest.
    pub reads: [u32; 2],
    /// The newest format it writes.
    pub writes: u32,
    /// The format it writes now; absent while it refuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writing: Option<u32>,
    /// Why it claims and writes nothing, while it refuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}
