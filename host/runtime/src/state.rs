//! The data of one sandbox store: WASI with no ambient authority, resource limits, the
//! engine's control of the step, and the guest's log budget.

use std::sync::Arc;
use std::time::Instant;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::bindings::{v1, v2};
use crate::config::SandboxConfig;
use crate::control::{HeartbeatReply, Partial, StepControl};
use crate::lines::{GuestLine, Level, Stream};
use crate::outbound::Outbound;
use crate::output::Capture;

/// Who a store runs for, to tag its log lines.
#[derive(Clone, Debug)]
pub struct Tags {
    /// The kind's name.
    pub kind: Arc<str>,
    /// The job's id.
    pub job: String,
    /// The step's key, or the hook's name.
    pub step: String,
}

/// Limits enforced through wasmtime's resource limiter. Denied growth traps and is
/// remembered, so the fault is reported as a memory limit and not a generic trap.
#[derive(Debug)]
pub(crate) struct Limits {
    max_memory: usize,
    /// The guest's linear memory so far, every memory together.
    memory: usize,
    max_table_elements: usize,
    instances: usize,
    tables: usize,
    memories: usize,
    pub(crate) exceeded: bool,
}

impl Limits {
    /// Bytes the guest's memory limit still leaves: what a host call may hand it at most.
    pub(crate) fn headroom(&self) -> usize {
        self.max_memory.saturating_sub(self.memory)
    }
}

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.exceeded = true;
            return Err(wasmtime::Error::msg("memory limit reached"));
        }
        self.memory = self.memory.saturating_add(desired.saturating_sub(current));
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_table_elements {
            self.exceeded = true;
            return Err(wasmtime::Error::msg("table limit reached"));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }

    fn tables(&self) -> usize {
        self.tables
    }

    fn memories(&self) -> usize {
        self.memories
    }
}

/// A store's data.
pub(crate) struct GuestState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    pub(crate) outbound: Outbound,
    /// Outputs of the job's completed steps, for `host.prior-output`.
    prior: Arc<[(String, Vec<u8>)]>,
    table: ResourceTable,
    pub(crate) limits: Limits,
    control: Arc<dyn StepControl>,
    pub(crate) tags: Tags,
    log_lines_left: usize,
    log_line_bytes: usize,
    pub(crate) logs_dropped: usize,
    /// The `log` lines kept, for the job's logs.
    pub(crate) lines: Vec<GuestLine>,
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    pub(crate) deadline: Instant,
    pub(crate) deadline_hit: bool,
}

impl GuestState {
    pub(crate) fn new(
        config: &SandboxConfig,
        max_memory: usize,
        control: Arc<dyn StepControl>,
        tags: Tags,
        deadline: Instant,
        outbound: Outbound,
        prior: Arc<[(String, Vec<u8>)]>,
    ) -> Self {
        let stdout = Capture::new(config.max_stdio_bytes);
        let stderr = Capture::new(config.max_stdio_bytes);
        // No preopened directories, no environment, no arguments, no sockets: a guest
        // reaches nothing but its own memory, the clocks, randomness, `host`, `config`
        // and outbound HTTP through the policy (`outbound`).
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            wasi,
            http: WasiHttpCtx::new(),
            outbound,
            prior,
            table: ResourceTable::new(),
            limits: Limits {
                max_memory,
                memory: 0,
                max_table_elements: config.max_table_elements,
                instances: config.max_instances,
                tables: config.max_tables,
                memories: config.max_memories,
                exceeded: false,
            },
            control,
            tags,
            log_lines_left: config.max_log_lines,
            log_line_bytes: config.max_log_line_bytes,
            logs_dropped: 0,
            lines: Vec::new(),
            stdout,
            stderr,
            deadline,
            deadline_hit: false,
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for GuestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.outbound }
    }
}

impl GuestState {
    /// Logs one guest line, capped in length and in number per call, on one line.
    fn log(&mut self, level: tracing::Level, message: String) {
        if self.log_lines_left == 0 {
            self.logs_dropped += 1;
            return;
        }
        self.log_lines_left -= 1;
        // Scrubbed before it is kept or logged: no form of a secret value is written.
        let message = self.outbound.scrub(&message).unwrap_or(message);
        let message = spindle_core::failure::clip(message, self.log_line_bytes);
        self.lines.push(GuestLine {
            at_micros: crate::lines::now_micros(),
            level: match level {
                tracing::Level::TRACE => Level::Trace,
                tracing::Level::DEBUG => Level::Debug,
                tracing::Level::INFO => Level::Info,
                tracing::Level::WARN => Level::Warn,
                tracing::Level::ERROR => Level::Error,
            },
            stream: Stream::Log,
            message: message.clone(),
        });
        let message = spindle_core::failure::for_log(&message);
        let Tags { kind, job, step } = &self.tags;
        let kind: &str = kind;
        match level {
            tracing::Level::TRACE => tracing::trace!(target: "spindle::guest", kind, job, step, "{message}"),
            tracing::Level::DEBUG => tracing::debug!(target: "spindle::guest", kind, job, step, "{message}"),
            tracing::Level::INFO => tracing::info!(target: "spindle::guest", kind, job, step, "{message}"),
            tracing::Level::WARN => tracing::warn!(target: "spindle::guest", kind, job, step, "{message}"),
            tracing::Level::ERROR => tracing::error!(target: "spindle::guest", kind, job, step, "{message}"),
        }
    }

    async fn heartbeat(&mut self, progress: Option<(u64, Option<u64>)>) -> HeartbeatReply {
        if !self.lines.is_empty() && self.control.lines_so_far(&mut self.lines) {
            self.lines.clear();
        }
        let partial = progress.map(|(done, total)| Partial { done, total });
        self.control.heartbeat(partial).await
    }
}

/// The five log levels of both contracts, as tracing's.
macro_rules! level {
    ($types:path, $level:expr) => {{
        use $types as t;
        match $level {
            t::LogLevel::Trace => tracing::Level::TRACE,
            t::LogLevel::Debug => tracing::Level::DEBUG,
            t::LogLevel::Info => tracing::Level::INFO,
            t::LogLevel::Warn => tracing::Level::WARN,
            t::LogLevel::Error => tracing::Level::ERROR,
        }
    }};
}

/// The heartbeat reply of both contracts.
macro_rules! reply {
    ($types:path, $reply:expr) => {{
        use $types as t;
        match $reply {
            HeartbeatReply::Proceed => t::HeartbeatReply::Proceed,
            HeartbeatReply::StopCancelled => t::HeartbeatReply::StopCancelled,
            HeartbeatReply::StopLeaseLost => t::HeartbeatReply::StopLeaseLost,
        }
    }};
}

/// Bytes read past a log line's cap before it is scrubbed and cut: the longest form of a
/// secret a scrub replaces (a 16 KiB value, hex-encoded) fits, so no secret is cut in
/// two at the cap and half of it kept.
const LOG_SCRUB_MARGIN: usize = 64 << 10;

/// Replaces both contracts' `host.log` with one that reads the guest's string where it
/// lies, in the guest's memory, and copies at most the line's cap (and the scrub's
/// margin): the generated binding lifted the whole string first, so one call with a
/// 60 MiB message cost the host 60 MiB and a scrub of all of it, per guest at once.
pub(crate) fn link_bounded_log(linker: &mut wasmtime::component::Linker<GuestState>) -> wasmtime::Result<()> {
    use wasmtime::component::WasmStr;
    linker.allow_shadowing(true);
    linker.instance("spindle:job/host@0.1.0")?.func_wrap(
        "log",
        |mut store, (level, message): (v1::spindle::job::types::LogLevel, WasmStr)| {
            let line = prefix(&message, &store, store.data().log_line_bytes)?;
            store.data_mut().log(level!(v1::spindle::job::types, level), line);
            Ok(())
        },
    )?;
    linker.instance("spindle:job/host@0.2.0")?.func_wrap(
        "log",
        |mut store, (level, message): (v2::spindle::job::types::LogLevel, WasmStr)| {
            let line = prefix(&message, &store, store.data().log_line_bytes)?;
            store.data_mut().log(level!(v2::spindle::job::types, level), line);
            Ok(())
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The start of `message`, at most `cap` bytes and the scrub's margin.
fn prefix(
    message: &wasmtime::component::WasmStr,
    store: &wasmtime::StoreContextMut<'_, GuestState>,
    cap: usize,
) -> wasmtime::Result<String> {
    let text = message.to_str(store)?;
    let mut end = text.len().min(cap.saturating_add(LOG_SCRUB_MARGIN));
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Ok(text[..end].to_owned())
}

impl v1::spindle::job::types::Host for GuestState {}

impl v1::spindle::job::host::Host for GuestState {
    async fn log(&mut self, level: v1::spindle::job::types::LogLevel, message: String) {
        GuestState::log(self, level!(v1::spindle::job::types, level), message);
    }

    async fn heartbeat(
        &mut self,
        progress: Option<v1::spindle::job::types::Checkpoint>,
    ) -> v1::spindle::job::types::HeartbeatReply {
        let reply = GuestState::heartbeat(self, progress.map(|c| (c.done, c.total))).await;
        reply!(v1::spindle::job::types, reply)
    }
}

impl v2::spindle::job::types::Host for GuestState {}

impl v2::spindle::job::host::Host for GuestState {
    async fn log(&mut self, level: v2::spindle::job::types::LogLevel, message: String) {
        GuestState::log(self, level!(v2::spindle::job::types, level), message);
    }

    async fn heartbeat(
        &mut self,
        progress: Option<v2::spindle::job::types::Checkpoint>,
    ) -> v2::spindle::job::types::HeartbeatReply {
        let reply = GuestState::heartbeat(self, progress.map(|c| (c.done, c.total))).await;
        reply!(v2::spindle::job::types, reply)
    }

    async fn prior_output(&mut self, step: String) -> Option<Vec<u8>> {
        self.prior.iter().find(|(key, _)| *key == step).map(|(_, output)| output.clone())
    }
}

impl v2::spindle::job::config::Host for GuestState {
    async fn get(&mut self, name: String) -> Option<String> {
        self.outbound.capabilities().settings.get(&name).cloned()
    }

    async fn secret(&mut self, name: String) -> Option<String> {
        self.outbound.placeholder(&name)
    }

    async fn hmac_sha256(&mut self, name: String, message: Vec<u8>) -> Option<Vec<u8>> {
        let secret = self.outbound.capabilities().secrets.get(&name)?;
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.0.as_bytes()).ok()?;
        mac.update(&message);
        Some(mac.finalize().into_bytes().to_vec())
    }
}
