//! `spindle serve`'s configuration: defaults, overridden by a TOML file, overridden by
//! `SPINDLE_*` environment variables, overridden by flags. Every default is stated on
//! its flag and in `docs/configuration.md`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::host::HostConfig;

/// `spindle serve` flags. Each also reads `SPINDLE_<NAME>` and the TOML key `<name>`
/// (with underscores).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ServeArgs {
    /// TOML configuration file [env: SPINDLE_CONFIG] (default: none).
    #[arg(long, env = "SPINDLE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Directory for the embedded database, compiled components and the operator token
    /// (default: ./.spindle).
    #[arg(long, env = "SPINDLE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Database: `sqlite://FILE` or `postgres://…` (default: sqlite://DATA_DIR/spindle.db).
    #[arg(long, env = "SPINDLE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Address the HTTP API listens on (default: 127.0.0.1:7464, loopback only).
    #[arg(long, env = "SPINDLE_LISTEN")]
    pub listen: Option<String>,
    /// Export spans over OTLP/HTTP to this collector, e.g. `http://127.0.0.1:4318`
    /// (default: none; plain HTTP, a collector agent beside the host).
    #[arg(long, env = "SPINDLE_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Steps run at once on this host (default: 192).
    #[arg(long, env = "SPINDLE_CONCURRENCY")]
    pub concurrency: Option<usize>,
    /// Slots beyond `concurrency` that only a tenant under its weighted share of the host
    /// may take while the pool is full (default: a sixteenth of concurrency, 12; 0: none).
    #[arg(long, env = "SPINDLE_FAIR_RESERVE")]
    pub fair_reserve: Option<usize>,
    /// Most PostgreSQL connections (default: 16).
    #[arg(long, env = "SPINDLE_MAX_CONNECTIONS")]
    pub max_connections: Option<u32>,
    /// SQLite: `normal` (a commit survives a process crash) or `full` (an OS crash or
    /// power loss too, one fsync per commit) (default: normal).
    #[arg(long, env = "SPINDLE_SQLITE_SYNCHRONOUS")]
    pub sqlite_synchronous: Option<String>,
    /// How long a claim lasts without renewal, e.g. `60s` (default: 60s).
    #[arg(long, env = "SPINDLE_LEASE_TTL")]
    pub lease_ttl: Option<String>,
    /// Least time between two heartbeat writes of one step, e.g. `250ms` (default: 250ms);
    /// a running step sees a cancellation within it. Must be shorter than the lease TTL.
    #[arg(long, env = "SPINDLE_HEARTBEAT_INTERVAL")]
    pub heartbeat_interval: Option<String>,
    /// Wall-clock budget of one step call, e.g. `30s` (default: 30s).
    #[arg(long, env = "SPINDLE_STEP_TIMEOUT")]
    pub step_timeout: Option<String>,
    /// Longest a component may take to compile, e.g. `60s` (default: 120s).
    #[arg(long, env = "SPINDLE_COMPILE_TIMEOUT")]
    pub compile_timeout: Option<String>,
    /// Memory a compile may use, in MiB (default: 2048); its CPU time is the compile timeout.
    #[arg(long, env = "SPINDLE_COMPILE_MEMORY_MIB")]
    pub compile_memory_mib: Option<usize>,
    /// Largest guest linear memory in MiB (default: 64).
    #[arg(long, env = "SPINDLE_MAX_MEMORY_MIB")]
    pub max_memory_mib: Option<usize>,
    /// Instruction fuel per step call (default: none, the wall clock alone bounds it).
    #[arg(long, env = "SPINDLE_FUEL")]
    pub fuel: Option<u64>,
    /// Largest job input in bytes (default: 1048576).
    #[arg(long, env = "SPINDLE_MAX_PAYLOAD_BYTES")]
    pub max_payload_bytes: Option<usize>,
    /// Largest component upload in bytes (default: 33554432).
    #[arg(long, env = "SPINDLE_MAX_COMPONENT_BYTES")]
    pub max_component_bytes: Option<usize>,
    /// Time between reconciliation passes (default: 5m).
    #[arg(long, env = "SPINDLE_RECONCILE_INTERVAL")]
    pub reconcile_interval: Option<String>,
    /// Silence after which a job is a reconciliation candidate (default: 15m).
    #[arg(long, env = "SPINDLE_RECONCILE_SILENCE")]
    pub reconcile_silence: Option<String>,
    /// Trailing probe misses that settle a job with no execution (default: 3).
    #[arg(long, env = "SPINDLE_RECONCILE_MISSES")]
    pub reconcile_misses: Option<u32>,
    /// This host's name in claims and leases (default: `host-<random>`).
    #[arg(long, env = "SPINDLE_HOST_ID")]
    pub host_id: Option<String>,
    /// How long shutdown waits for running steps before handing them back (default: 30s).
    #[arg(long, env = "SPINDLE_SHUTDOWN_GRACE")]
    pub shutdown_grace: Option<String>,
    /// How long finished jobs are kept before they are deleted, e.g. `30d` (default: 30d);
    /// a tenant may have a time of its own.
    #[arg(long, env = "SPINDLE_RETENTION")]
    pub retention: Option<String>,
    /// Longest a client may take to send a request's headers, e.g. `10s` (default: 10s).
    #[arg(long, env = "SPINDLE_HEADER_READ_TIMEOUT")]
    pub header_read_timeout: Option<String>,
    /// Most connections one client address may hold (default: 256).
    #[arg(long, env = "SPINDLE_MAX_CLIENT_CONNECTIONS")]
    pub max_client_connections: Option<usize>,
    /// Run only these kinds, comma-separated (default: all).
    #[arg(long, env = "SPINDLE_KINDS", value_delimiter = ',')]
    pub kinds: Option<Vec<String>>,
    /// Run only these tenants' jobs, comma-separated (default: all).
    #[arg(long, env = "SPINDLE_TENANTS", value_delimiter = ',')]
    pub tenants: Option<Vec<String>>,
    /// Finish the steps this host holds and claim nothing new (a host to retire in a
    /// rolling upgrade: docs/operations.md). It still serves the API.
    #[arg(long, env = "SPINDLE_DRAIN")]
    pub drain: bool,
    /// Let the operator token read tenants' jobs, logs and kinds (never act on them), each
    /// read written to the tenant's audit trail (default: off).
    #[arg(long, env = "SPINDLE_OPERATOR_READS_TENANTS")]
    pub operator_reads_tenants: bool,
    /// Behave as the build that introduced storage format N did: read and write format N
    /// and older only. For rehearsing an upgrade (and its tests) with one binary; a host
    /// so pinned refuses to claim or write on a database past N.
    #[arg(long, value_name = "N", hide = true)]
    pub storage_format: Option<u32>,
}

/// The same settings in a TOML file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    database_url: Option<String>,
    listen: Option<String>,
    concurrency: Option<usize>,
    fair_reserve: Option<usize>,
    max_connections: Option<u32>,
    sqlite_synchronous: Option<String>,
    lease_ttl: Option<String>,
    heartbeat_interval: Option<String>,
    step_timeout: Option<String>,
    compile_timeout: Option<String>,
    compile_memory_mib: Option<usize>,
    max_memory_mib: Option<usize>,
    fuel: Option<u64>,
    max_payload_bytes: Option<usize>,
    max_component_bytes: Option<usize>,
    reconcile_interval: Option<String>,
    reconcile_silence: Option<String>,
    reconcile_misses: Option<u32>,
    host_id: Option<String>,
    shutdown_grace: Option<String>,
    retention: Option<String>,
    header_read_timeout: Option<String>,
    max_client_connections: Option<usize>,
    kinds: Option<Vec<String>>,
    tenants: Option<Vec<String>>,
    operator_reads_tenants: Option<bool>,
    /// The operator's outbound HTTP policy and limits (`[outbound]`).
    outbound: Option<spindle_runtime::outbound::OutboundConfig>,
}

/// The resolved configuration.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The host's settings.
    pub host: HostConfig,
    /// Where the API listens.
    pub listen: String,
    /// Shutdown grace.
    pub shutdown_grace: Duration,
    /// What the API server guards itself with.
    pub server: crate::api::server::ServerLimits,
}

/// Parses `500ms`, `30s`, `5m`, `2h`, `30d` or a bare number of seconds. A duration too
/// long for a `Duration` is an error, not a panic.
pub fn parse_duration(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().with_context(|| format!("invalid duration {text:?}"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86_400.0,
        other => bail!("invalid duration unit {other:?} in {text:?} (use ms, s, m, h or d)"),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        bail!("invalid duration {text:?}");
    }
    Duration::try_from_secs_f64(seconds).with_context(|| format!("duration {text:?} is not a length of time"))
}

impl ServeConfig {
    /// Resolves flags and environment (already merged by clap) over the TOML file over
    /// the defaults.
    pub fn resolve(args: ServeArgs) -> anyhow::Result<Self> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                toml::from_str::<FileConfig>(&text).with_context(|| format!("parsing {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let data_dir = args.data_dir.or(file.data_dir).unwrap_or_else(|| PathBuf::from(".spindle"));
        let mut host = HostConfig::in_dir(data_dir);
        host.database_url = args.database_url.or(file.database_url);
        if let Some(n) = args.max_connections.or(file.max_connections) {
            host.max_connections = n;
        }
        if let Some(text) = args.sqlite_synchronous.or(file.sqlite_synchronous) {
            host.sqlite_sync = text.parse().map_err(anyhow::Error::msg)?;
        }
        if let Some(n) = args.concurrency.or(file.concurrency) {
            if n == 0 {
                bail!("concurrency must be at least 1");
            }
            host.dispatcher.concurrency = n;
            host.dispatcher.fair_reserve = spindle_core::capacity::SlotShare::default_reserve(n);
        }
        if let Some(n) = args.fair_reserve.or(file.fair_reserve) {
            host.dispatcher.fair_reserve = n;
        }
        // Every step the dispatcher may run at once has a sandbox instance, and a few spare.
        let running = host.dispatcher.concurrency.saturating_add(host.dispatcher.fair_reserve);
        host.sandbox.pool_slots =
            host.sandbox.pool_slots.max(u32::try_from(running).unwrap_or(u32::MAX).saturating_add(8));
        if let Some(text) = args.step_timeout.or(file.step_timeout) {
            host.sandbox.step_timeout = parse_duration(&text)?;
        }
        host.engine.draining = args.drain;
        host.engine.operator_reads_tenants = args.operator_reads_tenants || file.operator_reads_tenants == Some(true);
        if let Some(format) = args.storage_format {
            host.engine.formats = spindle_core::upgrade::Formats::pinned(format)?;
        }
        if let Some(text) = args.retention.or(file.retention) {
            host.retention.keep = parse_duration(&text)?;
        }
        if let Some(text) = args.compile_timeout.or(file.compile_timeout) {
            host.sandbox.compile_timeout = parse_duration(&text)?;
        }
        if let Some(mib) = args.compile_memory_mib.or(file.compile_memory_mib) {
            if mib < 64 {
                bail!("compile_memory_mib must be at least 64");
            }
            host.sandbox.compile_memory_bytes = mib << 20;
        }
        match args.lease_ttl.or(file.lease_ttl) {
            Some(text) => host.engine.lease_ttl = parse_duration(&text)?,
            // A step that never heartbeats must still commit before its claim lapses.
            None => {
                host.engine.lease_ttl = host.engine.lease_ttl.max(host.sandbox.step_timeout + Duration::from_secs(30))
            }
        }
        if host.engine.lease_ttl <= host.sandbox.step_timeout {
            bail!(
                "lease TTL ({:?}) must exceed the step timeout ({:?}), or steps that do not heartbeat lose their claim mid-call",
                host.engine.lease_ttl,
                host.sandbox.step_timeout
            );
        }
        if let Some(text) = args.heartbeat_interval.or(file.heartbeat_interval) {
            host.engine.heartbeat_interval = parse_duration(&text)?;
        }
        if host.engine.heartbeat_interval >= host.engine.lease_ttl {
            bail!(
                "the heartbeat interval ({:?}) must be shorter than the lease TTL ({:?}), or claims lapse between renewals",
                host.engine.heartbeat_interval,
                host.engine.lease_ttl
            );
        }
        if let Some(mib) = args.max_memory_mib.or(file.max_memory_mib) {
            host.sandbox.max_memory_bytes = mib << 20;
        }
        host.sandbox.fuel = args.fuel.or(file.fuel);
        if let Some(n) = args.max_payload_bytes.or(file.max_payload_bytes) {
            host.engine.max_payload_bytes = n;
        }
        if let Some(n) = args.max_component_bytes.or(file.max_component_bytes) {
            host.sandbox.max_component_bytes = n;
        }
        if let Some(outbound) = file.outbound {
            host.sandbox.outbound = outbound;
        }
        // Like the operator token, the sealing key stays out of flags and files that get
        // shared: the environment, or the data directory's own 0600 file.
        host.secret_key = std::env::var("SPINDLE_SECRET_KEY").ok().filter(|k| !k.trim().is_empty());
        if let Some(text) = args.reconcile_interval.or(file.reconcile_interval) {
            host.reconcile.interval = parse_duration(&text)?;
        }
        if let Some(text) = args.reconcile_silence.or(file.reconcile_silence) {
            host.reconcile.silence = parse_duration(&text)?;
        }
        if let Some(n) = args.reconcile_misses.or(file.reconcile_misses) {
            host.reconcile.required_misses = n.max(1);
        }
        if let Some(id) = args.host_id.or(file.host_id) {
            host.engine.host_id = id;
        }
        if let Some(kinds) = args.kinds.or(file.kinds) {
            host.dispatcher.filter.kinds = kinds;
        }
        if let Some(tenants) = args.tenants.or(file.tenants) {
            host.dispatcher.filter.tenants = tenants.into_iter().map(crate::store::TenantId).collect();
        }
        let shutdown_grace = match args.shutdown_grace.or(file.shutdown_grace) {
            Some(text) => parse_duration(&text)?,
            None => Duration::from_secs(30),
        };
        let listen = args.listen.or(file.listen).unwrap_or_else(|| "127.0.0.1:7464".to_owned());
        let mut server = crate::api::server::ServerLimits::default();
        if let Some(text) = args.header_read_timeout.or(file.header_read_timeout) {
            server.header_read_timeout = parse_duration(&text)?;
        }
        if let Some(n) = args.max_client_connections.or(file.max_client_connections) {
            if n == 0 {
                bail!("max-client-connections must be at least 1");
            }
            server.max_client_connections = n;
        }
        Ok(Self { host, listen, shutdown_grace, server })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms").ok(), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("30").ok(), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m").ok(), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("30d").ok(), Some(Duration::from_secs(30 * 86_400)));
        assert!(parse_duration("99999999999999999999999d").is_err(), "too long for a duration");
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = std::env::temp_dir().join(format!("spindle-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let file = dir.join("spindle.toml");
        std::fs::write(&file, "concurrency = 4\nstep_timeout = \"10s\"\nlisten = \"127.0.0.1:9000\"\n").ok();
        let args = ServeArgs { config: Some(file), concurrency: Some(8), ..ServeArgs::default() };
        let config = ServeConfig::resolve(args).expect("resolves");
        assert_eq!(config.host.dispatcher.concurrency, 8, "the flag wins");
        assert_eq!(config.host.sandbox.step_timeout, Duration::from_secs(10), "the file wins over the default");
        assert_eq!(config.listen, "127.0.0.1:9000");
        assert_eq!(config.host.engine.lease_ttl, Duration::from_secs(60));
        let bad = ServeArgs { lease_ttl: Some("5s".into()), step_timeout: Some("10s".into()), ..ServeArgs::default() };
        assert!(ServeConfig::resolve(bad).is_err(), "a lease shorter than a step is refused");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn sqlite_durability_is_normal_unless_full_is_asked_for() {
        let resolve = |value: Option<&str>| {
            ServeConfig::resolve(ServeArgs { sqlite_synchronous: value.map(Into::into), ..ServeArgs::default() })
        };
        assert_eq!(resolve(None).expect("resolves").host.sqlite_sync, crate::store::SqliteSync::Normal);
        assert_eq!(resolve(Some("FULL")).expect("resolves").host.sqlite_sync, crate::store::SqliteSync::Full);
        let error = resolve(Some("off")).expect_err("off would lose committed jobs");
        assert!(error.to_string().contains("use normal or full"), "{error}");
    }

    #[test]
    fn the_operators_outbound_policy_comes_from_the_file() {
        let dir = std::env::temp_dir().join(format!("spindle-outbound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let file = dir.join("spindle.toml");
        let text = "[outbound]\nallow = [\"POST https://api.example.com/v1/*\"]\nallow_cidrs = [\"10.1.0.0/16\"]\n\
                    [outbound.limits]\nconnect_timeout = 2\nmax_requests_per_call = 8\n";
        std::fs::write(&file, text).ok();
        let config =
            ServeConfig::resolve(ServeArgs { config: Some(file.clone()), ..ServeArgs::default() }).expect("resolves");
        let outbound = &config.host.sandbox.outbound;
        assert_eq!(outbound.operator.allow.0.len(), 1);
        assert!(outbound.operator.block_private, "blocked unless said otherwise");
        assert!(outbound.operator.address_allowed("10.1.2.3".parse().expect("ip")));
        assert!(!outbound.operator.address_allowed("10.2.0.1".parse().expect("ip")));
        assert_eq!(outbound.limits.connect_timeout, Duration::from_secs(2));
        assert_eq!(outbound.limits.max_requests_per_call, 8);
        std::fs::write(&file, "[outbound]\nallow = [\"api.example.com\"]\n").ok();
        assert!(
            ServeConfig::resolve(ServeArgs { config: Some(file.clone()), ..ServeArgs::default() }).is_err(),
            "a rule without a scheme"
        );
        std::fs::write(&file, "[outbound]\nalow = []\n").ok();
        assert!(
            ServeConfig::resolve(ServeArgs { config: Some(file), ..ServeArgs::default() }).is_err(),
            "a misspelt key"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
