//! Sandbox limits. Every default here guards against a guest we do not trust: each
//! names the threat it bounds.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the sandbox runs guests.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SandboxConfig {
    /// Largest component accepted for upload (default 32 MiB). Compiling is CPU- and
    /// memory-hungry in the size of the input, so an upload is bounded before it is read.
    pub max_component_bytes: usize,
    /// Longest a component may take to compile (default 120 s). A pathological module can
    /// make the compiler work far longer than its size suggests; a Python or JavaScript
    /// kind (13–19 MB, an interpreter inside) takes 7–40 s on a busy 2-core host, and a
    /// deploy compiles in the background, so the limit can be generous.
    pub compile_timeout: Duration,
    /// Memory a compile may use (default 2 GiB), enforced on the compiler child as its
    /// data limit (`RLIMIT_DATA`), with its CPU time limited to the compile timeout
    /// (`RLIMIT_CPU`). A 4.3 MB upload drove an unbounded compile to 6.7 GB: the cost of
    /// compiling grows with what is inside a component, not with its size. A compile over
    /// either ends the deploy with `component.compile-over-limit`, not as malformed.
    /// Python and JavaScript kinds (an interpreter inside) compile in well under 1 GiB.
    #[serde(default = "default_compile_memory")]
    pub compile_memory_bytes: usize,
    /// Largest linear memory a guest may grow to (default 64 MiB). Growth beyond it traps
    /// and the step ends with `sandbox.memory-limit`, leaving the host's memory alone.
    pub max_memory_bytes: usize,
    /// Most table elements per table (default 20,000): tables cost host memory too.
    pub max_table_elements: usize,
    /// Most core instances, tables and memories per store (default 32 / 32 / 8): a
    /// component cannot multiply itself inside one step.
    pub max_instances: usize,
    /// See [`max_instances`](Self::max_instances).
    pub max_tables: usize,
    /// See [`max_instances`](Self::max_instances).
    pub max_memories: usize,
    /// Wasm stack a guest may use (default 1 MiB): unbounded recursion traps with
    /// `sandbox.stack-overflow` instead of overflowing the host's stack.
    pub max_wasm_stack: usize,
    /// Wall-clock budget of one step call (default 30 s): an endless loop is interrupted
    /// by the epoch deadline and reported as `sandbox.deadline`.
    pub step_timeout: Duration,
    /// Period of the epoch ticker (default 1 ms). Guests yield to the async executor on
    /// every tick, so a busy guest never monopolises a tokio worker: a computing step's
    /// first turn, which runs on the host's executor, lasts at most a tick, and a new call
    /// on the sandbox's threads waits at most a tick per guest ahead of it. The deadline is
    /// enforced to within a tick.
    pub epoch_tick: Duration,
    /// Optional fuel per call (default none): a deterministic instruction budget on top
    /// of the wall clock, for operators who want one. Exhaustion is `sandbox.out-of-fuel`.
    pub fuel: Option<u64>,
    /// Largest output a step may complete with (default 4 MiB). Outputs are stored and
    /// handed to later steps, so they are bounded like uploads.
    pub max_output_bytes: usize,
    /// Largest total of a job's completed outputs (default 16 MiB). Every step receives
    /// all earlier outputs, so this bounds what one call copies into the guest; the output
    /// that would pass it is the fault `sandbox.job-outputs-too-large`.
    pub max_job_output_bytes: usize,
    /// Largest checkpoint cursor (default 64 KiB): it is stored with the step.
    pub max_cursor_bytes: usize,
    /// Bytes of stdout and stderr kept per call (default 16 KiB each); the rest is
    /// counted and dropped, so a chatty guest cannot fill the host's memory or logs.
    pub max_stdio_bytes: usize,
    /// Guest `log` lines accepted per call (default 200) and bytes per line (default
    /// 2 KiB); beyond that lines are counted and dropped.
    pub max_log_lines: usize,
    /// See [`max_log_lines`](Self::max_log_lines).
    pub max_log_line_bytes: usize,
    /// Use the pooling instance allocator (default on): instantiation is a few
    /// microseconds instead of mmap calls per step.
    pub pooling: bool,
    /// Concurrent sandboxes the pool holds (default 256); instantiation beyond it fails
    /// with `sandbox.capacity` rather than allocating without bound.
    pub pool_slots: u32,
    /// Where compiled components are cached (default none: compile on every load).
    pub cache_dir: Option<PathBuf>,
    /// An executable that compiles a component out of process (`COMPILER
    /// compile-component`, the component on its stdin, the artifact on its stdout;
    /// `spindle serve` names itself). The compile timeout kills it: a component built to
    /// compile slowly costs no CPU past its answer. Without one (default), components
    /// compile on a thread of the host, which a timeout answers for but cannot stop.
    pub compiler: Option<PathBuf>,
    /// Components compiled at once (default 2): compiling takes a core each.
    pub max_concurrent_compiles: usize,
    /// Compiles that may wait for a turn (default 8); past it a load answers
    /// `component.busy` at once instead of queueing without end.
    pub max_queued_compiles: usize,
    /// Outbound HTTP: the operator's policy layer (deny everything by default, special
    /// addresses blocked) and the limits on each request.
    pub outbound: crate::outbound::OutboundConfig,
}

fn default_compile_memory() -> usize {
    2 << 30
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            max_component_bytes: 32 << 20,
            compile_timeout: Duration::from_secs(120),
            compile_memory_bytes: default_compile_memory(),
            max_memory_bytes: 64 << 20,
            max_table_elements: 20_000,
            max_instances: 32,
            max_tables: 32,
            max_memories: 8,
            max_wasm_stack: 1 << 20,
            step_timeout: Duration::from_secs(30),
            epoch_tick: Duration::from_millis(1),
            fuel: None,
            max_output_bytes: 4 << 20,
            max_job_output_bytes: 16 << 20,
            max_cursor_bytes: 64 << 10,
            max_stdio_bytes: 16 << 10,
            max_log_lines: 200,
            max_log_line_bytes: 2 << 10,
            pooling: true,
            pool_slots: 256,
            cache_dir: None,
            compiler: None,
            max_concurrent_compiles: 2,
            max_queued_compiles: 8,
            outbound: crate::outbound::OutboundConfig::default(),
        }
    }
}
