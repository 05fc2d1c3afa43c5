//! Compiling components, bounded: a few at a time with a short queue behind them
//! (`component.busy` past it), each within the compile timeout. With a compiler
//! executable configured, a compile runs in a child process that the timeout kills, so
//! a component built to compile slowly costs no CPU after its answer; without one it runs
//! on a blocking thread, which the timeout answers for but cannot stop.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::cache::PendingArtifact;
use crate::config::SandboxConfig;
use crate::functions::FunctionCache;
use crate::load::LoadError;
use crate::sandbox::SetupError;

/// The environment variable that hands a compiler child the sandbox configuration (its
/// engine must be configured exactly as the host's for the artifact to load).
pub const COMPILE_CONFIG_ENV: &str = "SPINDLE_COMPILE_CONFIG";

/// The environment variable that names whose compile a compiler child runs (a tenant's
/// label), for the packs it adds to the function cache.
pub const COMPILE_OWNER_ENV: &str = "SPINDLE_COMPILE_OWNER";

/// The engine a sandbox with `config` runs guests in, and its function cache (when it
/// has a cache directory), which compiles flush when they end.
pub(crate) fn engine(config: &SandboxConfig) -> Result<(Engine, Option<Arc<FunctionCache>>), SetupError> {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .consume_fuel(config.fuel.is_some())
        .max_wasm_stack(config.max_wasm_stack)
        .async_stack_size(config.max_wasm_stack + (1 << 20));
    if config.pooling {
        let mut pool = PoolingAllocationConfig::new();
        let slots = config.pool_slots.max(1);
        let memory_slots = slots.saturating_mul(u32::try_from(config.max_memories).unwrap_or(8).min(4));
        pool.total_component_instances(slots)
            .total_core_instances(slots.saturating_mul(16))
            .max_core_instances_per_component(u32::try_from(config.max_instances).unwrap_or(32))
            .total_memories(memory_slots)
            .max_memories_per_component(u32::try_from(config.max_memories).unwrap_or(8))
            .total_tables(slots.saturating_mul(8))
            .max_tables_per_component(u32::try_from(config.max_tables).unwrap_or(32))
            .table_elements(config.max_table_elements)
            .total_stacks(slots)
            .max_memory_size(config.max_memory_bytes)
            // Reset a slot between steps by rewriting the pages the step touched
            // (found with PAGEMAP_SCAN where the kernel has it, 6.7+), keeping them
            // resident, instead of decommitting them (madvise) after every call:
            // most steps touch little memory, and the decommit's cross-core TLB
            // shootdowns cost more than the pages.
            .linear_memory_keep_resident(2 << 20)
            .table_keep_resident(64 << 10)
            .pagemap_scan(wasmtime::Enabled::Auto);
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    let mut functions = None;
    if let Some(dir) = &config.cache_dir {
        // Functions compiled once are reused by every component that has them (the same
        // interpreter in each version of a Python or JavaScript kind): see `functions`.
        // Without it compiles are slower, not wrong (the cache is not part of the
        // engine's compatibility hash, so host and children still agree).
        match FunctionCache::open(dir) {
            Ok(cache) => {
                let cache = Arc::new(cache);
                wasm.enable_incremental_compilation(cache.clone()).map_err(|e| SetupError(format!("{e:#}")))?;
                functions = Some(cache);
            }
            Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "compiling without the function cache"),
        }
    }
    let engine = Engine::new(&wasm).map_err(|e| SetupError(format!("{e:#}")))?;
    Ok((engine, functions))
}

/// Writes what a compile added to the function cache; a failure costs only speed.
fn flush(functions: Option<&FunctionCache>) {
    if let Some(Err(e)) = functions.map(FunctionCache::flush) {
        tracing::warn!(error = %e, "could not write compiled functions to the function cache");
    }
}

/// What a compiler child does: compiles `bytes` for a sandbox configured as
/// `SPINDLE_COMPILE_CONFIG` says and answers the artifact (an error's text otherwise).
pub fn compile_in_this_process(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let config = std::env::var(COMPILE_CONFIG_ENV).map_err(|_| format!("{COMPILE_CONFIG_ENV} is not set"))?;
    let mut config: SandboxConfig = serde_json::from_str(&config).map_err(|e| format!("{COMPILE_CONFIG_ENV}: {e}"))?;
    // A compiler instantiates nothing: without the pooling allocator's pools (hundreds
    // of MiB of writable mappings) its memory limit counts what compiling uses. The
    // allocation strategy is not part of the artifact's compatibility hash.
    config.pooling = false;
    // The engine the host runs guests in: compiled code depends on its settings (memory
    // bounds, fuel, stack), and the host checks their compatibility hash.
    let (engine, functions) = engine(&config).map_err(|e| e.to_string())?;
    if let (Some(functions), Ok(owner)) = (&functions, std::env::var(COMPILE_OWNER_ENV)) {
        functions.set_owner(&owner);
    }
    let artifact = engine.precompile_component(bytes).map_err(|e| format!("{e:#}"))?;
    flush(functions.as_deref());
    Ok(artifact)
}

/// Compiles within bounds.
#[derive(Debug)]
pub(crate) struct Compiler {
    turns: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
    /// The engine's function cache, flushed after each compile on a thread (a compiler
    /// child flushes its own).
    functions: Option<Arc<FunctionCache>>,
}

impl Compiler {
    pub(crate) fn new(config: &SandboxConfig, functions: Option<Arc<FunctionCache>>) -> Self {
        Self {
            functions,
            turns: Arc::new(Semaphore::new(config.max_concurrent_compiles.max(1))),
            waiting: AtomicUsize::new(0),
            max_waiting: config.max_queued_compiles,
        }
    }

    /// Compiles `bytes` for `engine` when a turn is free (or answers `Busy` when too many
    /// already wait), within the configured timeout. Given a pending cache entry, a
    /// compiler child writes its artifact there (see [`Compiled::Stored`]).
    pub(crate) async fn compile(
        &self,
        engine: &Engine,
        config: &SandboxConfig,
        bytes: &[u8],
        into: Option<PendingArtifact>,
        owner: Option<&str>,
    ) -> Result<Compiled, LoadError> {
        let _turn = match self.turns.clone().try_acquire_owned() {
            Ok(turn) => turn,
            Err(_) => {
                if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.max_waiting {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    return Err(LoadError::Busy);
                }
                let turn = self.turns.clone().acquire_owned().await;
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                turn.map_err(|_| LoadError::Internal("the compiler is closed".into()))?
            }
        };
        match &config.compiler {
            Some(compiler) => in_child(compiler, engine, config, bytes, into, owner).await,
            None => on_a_thread(engine, config, bytes, self.functions.clone()).await.map(Compiled::Component),
        }
    }
}

/// What a compile produced.
pub(crate) enum Compiled {
    /// The component, in memory.
    Component(Component),
    /// The compile succeeded but its artifact could not be written to the cache (a
    /// full disk): compile again without it.
    NotStored(std::io::Error),
    /// The artifact, entered into the cache: load it from there. A compiler child's
    /// output goes from its pipe to the file, so a Python or JavaScript artifact (tens of
    /// MiB) is never a buffer of the host's: freed, such a buffer stayed with the
    /// allocator, and each version cost the host that much more resident memory.
    Stored,
}

/// Compiles in a child process, killed at the timeout.
async fn in_child(
    compiler: &std::path::Path,
    engine: &Engine,
    config: &SandboxConfig,
    bytes: &[u8],
    mut into: Option<PendingArtifact>,
    owner: Option<&str>,
) -> Result<Compiled, LoadError> {
    let internal = |what: &str, e: std::io::Error| LoadError::Internal(format!("compiler {what}: {e}"));
    let mut sink = match into.as_mut().map(PendingArtifact::file).transpose() {
        Ok(file) => file.map(tokio::fs::File::from_std),
        Err(e) => return Err(internal("artifact file", e)),
    };
    let settings = serde_json::to_string(config).map_err(|e| LoadError::Internal(format!("compiler settings: {e}")))?;
    let mut child = tokio::process::Command::new(compiler)
        .arg("compile-component")
        .env(COMPILE_CONFIG_ENV, settings)
        .env(COMPILE_OWNER_ENV, owner.unwrap_or_default())
        .env_remove("SPINDLE_OPERATOR_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| internal("start", e))?;
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(LoadError::Internal("compiler pipes".into()));
    };
    // Limited before it reads a byte of the component: the child waits on its stdin.
    if let Some(pid) = child.id() {
        limit(pid, config).map_err(|e| internal("limits", e))?;
    }
    let work = async {
        let write = async {
            stdin.write_all(bytes).await?;
            drop(stdin);
            Ok::<_, std::io::Error>(())
        };
        let mut artifact = Vec::new();
        let mut message = Vec::new();
        // Ok(Err(_)): the artifact could not be written. The rest of it is read and
        // dropped all the same, so the child is not left blocked on a full pipe.
        let read = async {
            match sink.as_mut() {
                Some(file) => {
                    let written = async {
                        tokio::io::copy(&mut stdout, file).await?;
                        file.flush().await
                    }
                    .await;
                    if written.is_err() {
                        tokio::io::copy(&mut stdout, &mut tokio::io::sink()).await?;
                    }
                    Ok(written)
                }
                None => stdout.read_to_end(&mut artifact).await.map(|_| Ok(())),
            }
        };
        let (written, read, _) = tokio::join!(write, read, stderr.read_to_end(&mut message));
        let status = child.wait().await.map_err(|e| internal("wait", e))?;
        let stored = read.map_err(|e| internal("output", e))?;
        if !status.success() {
            let message = String::from_utf8_lossy(&message).trim().to_owned();
            if let Some(over) = over_limit(status, &message, config) {
                return Err(over);
            }
            return Err(LoadError::Malformed(if message.is_empty() {
                format!("the compiler {status}")
            } else {
                message
            }));
        }
        written.map_err(|e| internal("input", e))?;
        Ok((artifact, stored))
    };
    let (artifact, stored) = match tokio::time::timeout(config.compile_timeout, work).await {
        Ok(artifact) => artifact?,
        Err(_) => {
            // Dropping the work dropped its wait; the child is killed when dropped too,
            // but reap it now, so nothing of this compile outlives the answer.
            let _ = child.kill().await;
            return Err(LoadError::CompileTimeout(config.compile_timeout));
        }
    };
    if let Some(pending) = into {
        drop(sink);
        return Ok(match stored.and_then(|()| pending.commit()) {
            Ok(()) => Compiled::Stored,
            Err(e) => Compiled::NotStored(e),
        });
    }
    // SAFETY: the artifact was produced just now by our own compiler executable, for an
    // engine configured from the same settings (wasmtime checks its compatibility hash
    // before loading), read from the child's stdout with nothing in between.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, &artifact) };
    component
        .map(Compiled::Component)
        .map_err(|e| LoadError::Internal(format!("the compiler's artifact does not load: {e:#}")))
}

/// Limits compiler child `pid`: its memory (`RLIMIT_DATA`: heap and private writable
/// mappings, which is what compiling allocates; the engine's address-space reservations
/// are not writable and do not count) and its CPU time (the compile timeout: a child
/// past it is stopped by the kernel even while its parent waits elsewhere).
fn limit(pid: u32, config: &SandboxConfig) -> std::io::Result<()> {
    use rustix::process::{Pid, Resource, Rlimit, prlimit};
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw).ok_or(std::io::ErrorKind::InvalidInput)?;
    let memory = u64::try_from(config.compile_memory_bytes).unwrap_or(u64::MAX);
    prlimit(Some(pid), Resource::Data, Rlimit { current: Some(memory), maximum: Some(memory) })?;
    let cpu = config.compile_timeout.as_secs().max(1);
    prlimit(Some(pid), Resource::Cpu, Rlimit { current: Some(cpu), maximum: Some(cpu + 1) })?;
    Ok(())
}

/// The refusal of a child that ended over its limits: an allocation its memory limit
/// refused (Rust aborts with "memory allocation of N bytes failed"), or the kernel's
/// signal for CPU time (`SIGXCPU`).
fn over_limit(status: std::process::ExitStatus, message: &str, config: &SandboxConfig) -> Option<LoadError> {
    use std::os::unix::process::ExitStatusExt;
    let memory = || format!("memory limit ({} MiB)", config.compile_memory_bytes >> 20);
    if message.contains("memory allocation of") {
        return Some(LoadError::CompileOverLimit(memory()));
    }
    match status.signal() {
        Some(libc::SIGXCPU) => {
            Some(LoadError::CompileOverLimit(format!("CPU time ({} s)", config.compile_timeout.as_secs().max(1))))
        }
        // The system's out-of-memory killer, or an allocation refused where no message
        // could be printed.
        Some(libc::SIGKILL) => Some(LoadError::CompileOverLimit(memory())),
        Some(libc::SIGABRT | libc::SIGSEGV) if message.is_empty() => Some(LoadError::CompileOverLimit(memory())),
        _ => None,
    }
}

/// Compiles on a blocking thread; the timeout answers but cannot stop it.
async fn on_a_thread(
    engine: &Engine,
    config: &SandboxConfig,
    bytes: &[u8],
    functions: Option<Arc<FunctionCache>>,
) -> Result<Component, LoadError> {
    let engine = engine.clone();
    let owned = bytes.to_vec();
    let job = tokio::task::spawn_blocking(move || {
        let compiled = Component::new(&engine, owned);
        flush(functions.as_deref());
        compiled
    });
    match tokio::time::timeout(config.compile_timeout, job).await {
        Err(_) => Err(LoadError::CompileTimeout(config.compile_timeout)),
        Ok(Err(join)) => Err(LoadError::Internal(format!("compiler worker failed: {join}"))),
        Ok(Ok(Err(e))) => Err(LoadError::Malformed(format!("{e:#}"))),
        Ok(Ok(Ok(component))) => Ok(component),
    }
}
