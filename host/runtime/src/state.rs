//! The data of one sandbox store: WASI with no ambient authority, resource limits, the
//! engine's control of the step, and the guest's log budget.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::spindle::job::{host, types};
use crate::config::SandboxConfig;
use crate::control::{HeartbeatReply, Partial, StepControl};
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
    max_table_elements: usize,
    instances: usize,
    tables: usize,
    memories: usize,
    pub(crate) exceeded: bool,
}

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.exceeded = true;
            return Err(wasmtime::Error::msg("memory limit reached"));
        }
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
    table: ResourceTable,
    pub(crate) limits: Limits,
    control: Arc<dyn StepControl>,
    pub(crate) tags: Tags,
    log_lines_left: usize,
    log_line_bytes: usize,
    pub(crate) logs_dropped: usize,
    pub(crate) stdout: Capture,
    pub(crate) stderr: Capture,
    pub(crate) deadline: Instant,
    pub(crate) deadline_hit: bool,
}

impl GuestState {
    pub(crate) fn new(config: &SandboxConfig, control: Arc<dyn StepControl>, tags: Tags, deadline: Instant) -> Self {
        let stdout = Capture::new(config.max_stdio_bytes);
        let stderr = Capture::new(config.max_stdio_bytes);
        // No preopened directories, no environment, no arguments, no network: a guest
        // reaches nothing but its own memory, the clocks, randomness and `host`.
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limits: Limits {
                max_memory: config.max_memory_bytes,
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

impl types::Host for GuestState {}

impl host::Host for GuestState {
    async fn log(&mut self, level: types::LogLevel, message: String) {
        if self.log_lines_left == 0 {
            self.logs_dropped += 1;
            return;
        }
        self.log_lines_left -= 1;
        let message = spindle_core::failure::clip(message, self.log_line_bytes);
        let message = spindle_core::failure::for_log(&message);
        let Tags { kind, job, step } = &self.tags;
        let kind: &str = kind;
        match level {
            types::LogLevel::Trace => tracing::trace!(target: "spindle::guest", kind, job, step, "{message}"),
            types::LogLevel::Debug => tracing::debug!(target: "spindle::guest", kind, job, step, "{message}"),
            types::LogLevel::Info => tracing::info!(target: "spindle::guest", kind, job, step, "{message}"),
            types::LogLevel::Warn => tracing::warn!(target: "spindle::guest", kind, job, step, "{message}"),
            types::LogLevel::Error => tracing::error!(target: "spindle::guest", kind, job, step, "{message}"),
        }
    }

    async fn heartbeat(&mut self, progress: Option<types::Checkpoint>) -> types::HeartbeatReply {
        let partial = progress.map(|c| Partial { done: c.done, total: c.total });
        match self.control.heartbeat(partial).await {
            HeartbeatReply::Proceed => types::HeartbeatReply::Proceed,
            HeartbeatReply::StopCancelled => types::HeartbeatReply::StopCancelled,
            HeartbeatReply::StopLeaseLost => types::HeartbeatReply::StopLeaseLost,
        }
    }
}
