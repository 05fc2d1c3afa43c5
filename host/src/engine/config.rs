//! The engine's settings.

use std::time::Duration;

/// Engine settings. Defaults are documented where they are defined.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// This host's name in claims and singleton leases.
    pub host_id: String,
    /// How long a claim lasts without renewal (default 60 s). It must outlast one step
    /// call (the sandbox's step timeout): a step that never heartbeats still commits
    /// before its claim lapses; a crashed host's claims lapse after it and are rescued.
    pub lease_ttl: Duration,
    /// Least time between two heartbeat writes of one step (default 250 ms): a chatty
    /// guest costs the database at most four writes a second, and sees a cancellation
    /// within that delay.
    pub heartbeat_interval: Duration,
    /// Rereads allowed when a write loses a version race (default 8).
    pub conflict_retries: u32,
    /// Largest job input accepted (default 1 MiB); inputs are stored and copied into
    /// every step call.
    pub max_payload_bytes: usize,
    /// Most exclusive lease keys per job (default 16).
    pub max_lease_keys: usize,
    /// Delay before a step whose claim lapsed runs again (default 1 s).
    pub rescue_backoff: Duration,
    /// Seed for the backoff jitter (default: from the OS). Tests fix it.
    pub rng_seed: Option<u64>,
    /// When a kind version's breaker opens and closes (default: 10 faults within 60 s
    /// open it for 30 s; 3 successful probes in a row close it).
    pub breaker: spindle_core::breaker::BreakerPolicy,
    /// How much of its guests' lines a job keeps (default 5,000 lines, 1 MiB).
    pub log_caps: crate::store::LogCaps,
    /// The storage formats this host reads and writes (default: this build's; a host
    /// pinned to an older one rehearses an upgrade, see `spindle serve --storage-format`).
    pub formats: spindle_core::upgrade::Formats,
    /// Whether the host finishes what it holds and claims nothing new (`--drain`).
    pub draining: bool,
    /// Whether an operator token may read tenants' jobs, logs and kinds (default: no).
    /// Each such read is written to the tenant's audit trail; actions stay the tenant's.
    pub operator_reads_tenants: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            host_id: format!("host-{}", uuid::Uuid::new_v4().simple()),
            lease_ttl: Duration::from_secs(60),
            heartbeat_interval: Duration::from_millis(250),
            conflict_retries: 8,
            max_payload_bytes: 1 << 20,
            max_lease_keys: 16,
            rescue_backoff: Duration::from_secs(1),
            rng_seed: None,
            breaker: spindle_core::breaker::BreakerPolicy::default(),
            log_caps: crate::store::LogCaps::default(),
            formats: spindle_core::upgrade::Formats::this_build(),
            draining: false,
            operator_reads_tenants: false,
        }
    }
}
