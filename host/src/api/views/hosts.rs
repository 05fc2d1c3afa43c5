//! Hosts and the storage format gate as the API shows them (operator token), and what
//! `/v1/health` says of this host.

use crate::api::time::rfc3339;
use crate::store::{GateRow, HostRow};
use spindle_views::{GateView, HostView};

/// `host` as seen at `now`.
pub fn host_view(host: &HostRow, now: spindle_core::Timestamp) -> HostView {
    HostView {
        instance: host.instance.clone(),
        id: host.id.clone(),
        build: host.build.clone(),
        reads: [*host.formats.reads.start(), *host.formats.reads.end()],
        writes: host.formats.writes,
        contracts: host.contracts.clone(),
        draining: host.draining,
        live: host.expires_at > now,
        started_at: rfc3339(host.started_at),
        heartbeat_at: rfc3339(host.heartbeat_at),
    }
}

impl From<&GateRow> for GateView {
    fn from(g: &GateRow) -> Self {
        Self { format: g.format, moved_at: rfc3339(g.moved_at), moved_by: g.moved_by.clone() }
    }
}
