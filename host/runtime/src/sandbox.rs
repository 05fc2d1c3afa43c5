//! The sandbox: one wasmtime engine per process, a linker that offers `host` and WASI
//! with no authority, an epoch ticker, and the calls that run a step or a hook in a
//! fresh, limited store — on the sandbox's own threads, so that guests busy computing
//! never stand in the way of the host's own work (claims, settlements, the API).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

use crate::bindings::{v1, v2};
use crate::cache::{ArtifactCache, PendingArtifact};
use crate::compile::{Compiled, Compiler};
use crate::config::SandboxConfig;
use crate::contract::{Contract, KindPre, Reported};
use crate::control::{StepControl, Unsupervised};
use crate::kind::KindSpec;
use crate::load::{LoadError, check_contract, check_header};
use crate::outbound::{Capabilities, MetricKey, Outbound, Shared};
use crate::outcome::{Ceilings, GuestOutcome, HookRun, JobSummary, SandboxFault, StepCall, StepInput, StepRun};
use crate::schema::InputSchema;
use crate::state::{GuestState, Tags};

/// Why the sandbox itself could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the sandbox: {0}")]
pub struct SetupError(pub(crate) String);

/// The process's sandbox. Cheap to share (`Arc`); dropping the last one stops the
/// epoch ticker.
pub struct Runtime {
    engine: Engine,
    linker: Linker<GuestState>,
    config: SandboxConfig,
    cache: Option<ArtifactCache>,
    ticker: Arc<Ticker>,
    compiler: Compiler,
    outbound: Arc<Shared>,
    /// Compiles started, for the metrics and for tests that check a refusal compiled nothing.
    compiles: std::sync::atomic::AtomicU64,
    /// The threads steps and hooks go on running on once they wait or compute past their
    /// first epoch tick (taken when the runtime is dropped). A guest computes until the
    /// epoch makes it yield, 10 ms at a time: on the host's executor, 192 of them would
    /// hold every other task about a second per await.
    guests: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("config", &self.config).finish_non_exhaustive()
    }
}

/// A validated, compiled, linked component version, ready to run steps.
pub struct LoadedKind {
    /// SHA-256 of the component's bytes, hex.
    pub digest: String,
    /// What it says about itself.
    pub spec: KindSpec,
    /// Whether the compiled artifact came from the disk cache.
    pub from_cache: bool,
    /// How long loading took (compile or cache load, link, describe).
    pub load_time: Duration,
    /// Its input schema, compiled once for every submission (none: any input).
    pub input_schema: Option<Arc<InputSchema>>,
    pre: Arc<KindPre>,
}

impl LoadedKind {
    /// Bytes of host memory its compiled code occupies: what keeping it loaded costs.
    pub fn resident_bytes(&self) -> usize {
        let image = self.pre.instance_pre().component().image_range();
        (image.end as usize).saturating_sub(image.start as usize)
    }

    /// The contract the component targets.
    pub fn contract(&self) -> Contract {
        self.pre.contract()
    }
}

impl std::fmt::Debug for LoadedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedKind").field("digest", &self.digest).field("spec", &self.spec).finish_non_exhaustive()
    }
}

/// The hooks a kind may export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// The business failure effect.
    OnFailure,
    /// The success notification.
    OnSuccess,
}

impl Hook {
    /// Its name in the contract, as records and idempotency keys carry it.
    pub fn name(self) -> &'static str {
        match self {
            Self::OnFailure => "on-failure",
            Self::OnSuccess => "on-success",
        }
    }
}

/// SHA-256 of `bytes`, hex: a component's content address.
pub fn content_digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Runtime {
    /// Sets up the engine, the linker and the epoch ticker.
    pub fn new(config: SandboxConfig) -> Result<Self, SetupError> {
        let (engine, functions) = crate::compile::engine(&config)?;
        let mut linker = Linker::new(&engine);
        let setup = |e: wasmtime::Error| SetupError(format!("{e:#}"));
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(setup)?;
        // `wasi:random`'s draws are the host's own, bounded (`random`): they replace
        // wasmtime-wasi's under the same names.
        linker.allow_shadowing(true);
        {
            use wasmtime_wasi::p2::bindings::random::{insecure, random};
            random::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(setup)?;
            insecure::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(setup)?;
        }
        linker.allow_shadowing(false);
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(setup)?;
        // Both contracts side by side: their interfaces are versioned apart.
        v1::JobKind::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(setup)?;
        v2::spindle::job::types::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(setup)?;
        v2::spindle::job::host::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(setup)?;
        v2::spindle::job::config::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(setup)?;
        crate::state::link_bounded_log(&mut linker).map_err(setup)?;
        let cache = match &config.cache_dir {
            Some(dir) => Some(ArtifactCache::new(dir, &engine).map_err(|e| SetupError(format!("cache: {e}")))?),
            None => None,
        };
        let ticker = Ticker::spawn(engine.clone(), config.epoch_tick)?;
        let compiler = Compiler::new(&config, functions);
        let outbound = Arc::new(Shared::new(config.outbound.clone()));
        let threads = std::thread::available_parallelism().map_or(2, usize::from);
        let guests = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("spindle-guest")
            .on_thread_start(lower_priority)
            // A step that just arrived waits at most one guest's turn (an epoch tick),
            // not a round of every guest computing on this thread: each turn looks at
            // the queue of new calls first, where tokio's default looks every 61st.
            .global_queue_interval(1)
            .enable_all()
            .build()
            .map_err(|e| SetupError(format!("guest threads: {e}")))?;
        Ok(Self {
            engine,
            linker,
            config,
            cache,
            ticker,
            compiler,
            outbound,
            compiles: Default::default(),
            guests: Some(guests),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// A step's time: the host's, or the tenant's ceiling when that is shorter.
    fn step_timeout(&self, ceilings: &Ceilings) -> Duration {
        ceilings.step_timeout.map_or(self.config.step_timeout, |t| t.min(self.config.step_timeout))
    }

    /// What can be checked of a component without compiling it: its size, its header,
    /// and its imports and exports against the contracts. Milliseconds, whatever its size.
    pub fn precheck(&self, bytes: &[u8]) -> Result<(), LoadError> {
        check_header(bytes, self.config.max_component_bytes)?;
        check_contract(bytes)
    }

    /// Validates, compiles (or loads from the cache), links and describes a component.
    pub async fn load(&self, bytes: &[u8]) -> Result<LoadedKind, LoadError> {
        self.load_for(None, bytes).await
    }

    /// [`load`](Self::load) on behalf of `owner` (a tenant's label): what its compile adds
    /// to the shared function cache is its own, and evicted first when it holds more
    /// than its share (see `functions`).
    pub async fn load_for(&self, owner: Option<&str>, bytes: &[u8]) -> Result<LoadedKind, LoadError> {
        let started = Instant::now();
        self.precheck(bytes)?;
        let digest = content_digest(bytes);
        let cached = self.cache.as_ref().and_then(|cache| cache.load(&self.engine, &digest));
        let from_cache = cached.is_some();
        let component = match cached {
            Some(component) => component,
            None => self.compile_and_cache(&digest, bytes, owner).await?,
        };
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::WrongWorld(format!("{e:#}")))
            .and_then(KindPre::new)?;
        let spec = self.describe(&pre).await?;
        let input_schema = match spec.input_schema.as_deref().map(InputSchema::compile).transpose() {
            Ok(schema) => schema.map(Arc::new),
            // `describe` validated it: only a schema that compiled once gets here.
            Err(reason) => {
                return Err(LoadError::InvalidSpec(crate::kind::SpecError::Schema { what: "input".into(), reason }));
            }
        };
        Ok(LoadedKind { digest, spec, from_cache, load_time: started.elapsed(), input_schema, pre: Arc::new(pre) })
    }

    /// Compiles `bytes` and caches the artifact, then maps it from the cache's file
    /// rather than keeping a copy (see `ArtifactCache::load`): the version is loaded as a
    /// restart would load it. A cache that cannot be written or read back costs a
    /// compile in memory, never the deploy.
    async fn compile_and_cache(&self, digest: &str, bytes: &[u8], owner: Option<&str>) -> Result<Component, LoadError> {
        let Some(cache) = &self.cache else { return self.compile_in_memory(bytes, owner).await };
        let pending = match cache.pending(digest) {
            Ok(pending) => Some(pending),
            Err(e) => {
                tracing::warn!(digest, error = %e, "could not cache a compiled component");
                None
            }
        };
        let not_stored = match self.compile(bytes, pending, owner).await? {
            Compiled::Stored => match cache.load(&self.engine, digest) {
                Some(component) => return Ok(component),
                None => std::io::Error::other("the stored artifact does not load"),
            },
            Compiled::Component(compiled) => {
                return Ok(match cache.store(digest, &compiled) {
                    Ok(()) => cache.load(&self.engine, digest).unwrap_or(compiled),
                    Err(e) => {
                        tracing::warn!(digest, error = %e, "could not cache a compiled component");
                        compiled
                    }
                });
            }
            Compiled::NotStored(e) => e,
        };
        tracing::warn!(digest, error = %not_stored, "could not cache a compiled component; compiling it in memory");
        self.compile_in_memory(bytes, owner).await
    }

    async fn compile_in_memory(&self, bytes: &[u8], owner: Option<&str>) -> Result<Component, LoadError> {
        match self.compile(bytes, None, owner).await? {
            Compiled::Component(component) => Ok(component),
            Compiled::Stored | Compiled::NotStored(_) => {
                Err(LoadError::Internal("a compile without a cache file answered no component".into()))
            }
        }
    }

    async fn compile(
        &self,
        bytes: &[u8],
        into: Option<PendingArtifact>,
        owner: Option<&str>,
    ) -> Result<Compiled, LoadError> {
        self.compiles.fetch_add(1, Ordering::Relaxed);
        self.compiler.compile(&self.engine, &self.config, bytes, into, owner).await
    }

    /// Deletes the cached artifact of component `digest`: a deploy that failed after its
    /// compile (its describe trapped, it named another kind, a quota refused it) left
    /// one that no version uses, which nothing would ever read or remove.
    pub fn discard(&self, digest: &str) {
        if let Some(cache) = &self.cache {
            cache.discard(digest);
        }
    }

    /// Compiles started since the runtime was set up (cache hits are not compiles).
    pub fn compiles(&self) -> u64 {
        self.compiles.load(Ordering::Relaxed)
    }

    async fn describe(&self, pre: &KindPre) -> Result<KindSpec, LoadError> {
        let tags = Tags { kind: Arc::from("(describe)"), job: String::new(), step: "describe".into() };
        let _ticking = self.ticker.hold();
        let mut store =
            self.store(Arc::new(Unsupervised), tags, Arc::default(), None, Arc::from(Vec::new()), &Ceilings::default());
        let failed = |fault, detail: String, state: &GuestState| LoadError::Describe {
            fault,
            detail: spindle_core::failure::clip(detail, DESCRIBE_DETAIL_BYTES),
            stderr: state.stderr.tail_lines(STDERR_TAIL_LINES, STDERR_TAIL_BYTES),
        };
        let result = match tokio::time::timeout(self.config.step_timeout, pre.describe(&mut store)).await {
            Err(_) => Err(failed(SandboxFault::Deadline, "wall-clock timeout".into(), store.data())),
            Ok(Err(e)) => Err(failed(classify(&e, store.data()), format!("{e:#}"), store.data())),
            Ok(Ok(spec)) => Ok(spec?),
        };
        flush_stdio(store.data_mut());
        result
    }

    /// Outbound requests made so far, counted by tenant, kind, destination and outcome.
    pub fn outbound_metrics(&self) -> Vec<(MetricKey, u64)> {
        self.outbound.metrics()
    }

    fn store(
        &self,
        control: Arc<dyn StepControl>,
        tags: Tags,
        capabilities: Arc<Capabilities>,
        cursor: Option<&str>,
        prior: Arc<[(String, Vec<u8>)]>,
        ceilings: &Ceilings,
    ) -> Store<GuestState> {
        let deadline = Instant::now() + self.step_timeout(ceilings);
        let idempotency_key = format!("{}/{}", tags.job, tags.step);
        let outbound =
            Outbound::new(self.outbound.clone(), capabilities, idempotency_key, cursor.map(str::to_owned), deadline);
        let max_memory =
            ceilings.max_memory_bytes.map_or(self.config.max_memory_bytes, |m| m.min(self.config.max_memory_bytes));
        let state = GuestState::new(&self.config, max_memory, control, tags, deadline, outbound, prior);
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limits);
        if let Some(fuel) = self.config.fuel {
            let fuel = ceilings.fuel.map_or(fuel, |f| f.min(fuel));
            // Setting fuel cannot fail on an engine configured to consume it.
            let _ = store.set_fuel(fuel);
        }
        // Every tick: yield to the executor, or interrupt once past the deadline.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|mut ctx| {
            if Instant::now() >= ctx.data().deadline {
                ctx.data_mut().deadline_hit = true;
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store
    }

    /// Runs one step of `kind` in a fresh store. Never fails: a guest fault is a
    /// [`StepRun::Fault`]. When the attempt fails (a fault, `retryable`, `refused`), the
    /// call keeps the guest's last stderr lines for the attempt's record.
    pub async fn run_step(&self, kind: &LoadedKind, input: StepInput, control: Arc<dyn StepControl>) -> StepCall {
        let tags =
            Tags { kind: Arc::from(kind.spec.name.as_str()), job: input.job_id.clone(), step: input.step.clone() };
        let prior_bytes: usize = input.prior.iter().map(|(_, output)| output.len()).sum();
        // `host.prior-output` (0.2.0) reads from the same outputs the input carries.
        let prior: Arc<[(String, Vec<u8>)]> = match kind.contract() {
            Contract::V0_2 if !input.prior.is_empty() => Arc::from(input.prior.clone()),
            _ => Arc::from(Vec::new()),
        };
        let capabilities = input.capabilities.clone();
        let ceilings = input.ceilings;
        let mut store = self.store(control.clone(), tags, capabilities, input.cursor.as_deref(), prior, &ceilings);
        // The epoch deadline stops a guest that computes; this stops one waiting in a host
        // call. A little grace lets the epoch report first.
        let budget = self.step_timeout(&ceilings) + self.config.epoch_tick * 5;
        let pre = kind.pre.clone();
        let ticking = self.ticker.hold();
        let (result, mut store) = self
            .on_guest_threads(async move {
                let _ticking = ticking;
                fresh_turn(&mut store);
                let result = tokio::time::timeout(budget, pre.run_step(&mut store, input)).await;
                (result, store)
            })
            .await;
        let run = match result {
            Err(_) => StepRun::Fault { fault: SandboxFault::Deadline, detail: "wall-clock timeout".into() },
            Ok(Err(e)) => {
                let detail = format!("{e:#}");
                let fault = if detail.contains("maximum concurrent") || detail.contains("pooling") {
                    SandboxFault::Capacity
                } else {
                    SandboxFault::Instantiation
                };
                StepRun::Fault { fault, detail }
            }
            Ok(Ok(Err(e))) => StepRun::Fault { fault: classify(&e, store.data()), detail: format!("{e:#}") },
            Ok(Ok(Ok(outcome))) => self.check_outcome(outcome, prior_bytes),
        };
        let stderr = run.failed().then(|| stderr_tail(store.data())).flatten();
        let lines = flush_stdio(store.data_mut());
        let mut run = StepCall { stderr, run, lines };
        if let Some(redactions) = store.data().outbound.redactions() {
            crate::scrub::step_call(&redactions, &mut run);
        }
        let calls = store.data().outbound.calls();
        if !calls.is_empty() {
            self.outbound.count(&store.data().outbound.capabilities().tenant, &kind.spec.name, &calls);
            control.outbound_calls(calls);
        }
        run
    }

    /// The guest's `outcome` within the contract and the limits, the job's earlier outputs
    /// coming to `prior_bytes`.
    fn check_outcome(&self, outcome: Reported, prior_bytes: usize) -> StepRun {
        let malformed = |what| StepRun::Fault { fault: SandboxFault::MalformedOutput(what), detail: what.to_owned() };
        let outcome = match outcome {
            Reported::Complete(output) => {
                if output.len() > self.config.max_output_bytes {
                    let fault = SandboxFault::OutputTooLarge { bytes: output.len(), cap: self.config.max_output_bytes };
                    return StepRun::Fault { fault, detail: String::new() };
                }
                let total = prior_bytes.saturating_add(output.len());
                if total > self.config.max_job_output_bytes {
                    let fault =
                        SandboxFault::JobOutputsTooLarge { bytes: total, cap: self.config.max_job_output_bytes };
                    return StepRun::Fault { fault, detail: String::new() };
                }
                GuestOutcome::Complete(output)
            }
            Reported::Skip(reason) => GuestOutcome::Skip(spindle_core::failure::clip(reason, 1024)),
            Reported::Retryable(code, message) => {
                let (code, message) = guest_failure(code, message);
                GuestOutcome::Retryable { code, message }
            }
            Reported::Refused(code, message) => {
                let (code, message) = guest_failure(code, message);
                GuestOutcome::Refused { code, message }
            }
            Reported::More { cursor, done, total } => {
                if cursor.len() > self.config.max_cursor_bytes {
                    return malformed("checkpoint cursor over its size limit");
                }
                if total.is_some_and(|total| done > total) {
                    return malformed("checkpoint reports more done than in all");
                }
                GuestOutcome::More { cursor, done, total }
            }
            Reported::AwaitChildren { children, join, leftover, cursor } => {
                if cursor.as_ref().is_some_and(|c| c.len() > self.config.max_cursor_bytes) {
                    return malformed("await cursor over its size limit");
                }
                if children.iter().any(|c| c.kind.is_empty() || c.kind.len() > 128) {
                    return malformed("a child's kind is empty or over 128 bytes");
                }
                if children.iter().any(|c| c.idempotency_key.as_ref().is_some_and(|k| k.is_empty() || k.len() > 256)) {
                    return malformed("a child's idempotency key is empty or over 256 bytes");
                }
                GuestOutcome::AwaitChildren { children, join, leftover, cursor }
            }
            Reported::AwaitSignal { name, timeout_secs, cursor } => {
                if cursor.as_ref().is_some_and(|c| c.len() > self.config.max_cursor_bytes) {
                    return malformed("await cursor over its size limit");
                }
                if !spindle_core::workflow::is_valid_signal_name(&name) {
                    return malformed(
                        "a signal name must be 1-128 letters, digits, '-', '_', '.' or ':' (the names a sender may use)",
                    );
                }
                GuestOutcome::AwaitSignal { name, timeout: Duration::from_secs(u64::from(timeout_secs)), cursor }
            }
            Reported::Snooze(secs) => {
                if secs > MAX_SNOOZE_SECS {
                    return malformed("snooze longer than 30 days");
                }
                GuestOutcome::Snooze(Duration::from_secs(u64::from(secs)))
            }
        };
        if let GuestOutcome::Retryable { code, .. } | GuestOutcome::Refused { code, .. } = &outcome
            && code.trim().is_empty()
        {
            return malformed("failure without a code");
        }
        StepRun::Outcome(outcome)
    }

    /// Runs a hook of `kind` in a fresh store.
    /// It reaches outward with `capabilities`, like the kind's steps; its requests are
    /// counted in the metrics and handed to `control` when it ends.
    pub async fn run_hook(
        &self,
        kind: &LoadedKind,
        hook: Hook,
        summary: JobSummary,
        capabilities: Arc<Capabilities>,
        control: Arc<dyn StepControl>,
    ) -> HookRun {
        let tags =
            Tags { kind: Arc::from(kind.spec.name.as_str()), job: summary.job_id.clone(), step: hook.name().into() };
        let tenant = capabilities.tenant.clone();
        let mut store =
            self.store(control.clone(), tags, capabilities, None, Arc::from(Vec::new()), &Ceilings::default());
        let budget = self.config.step_timeout + self.config.epoch_tick * 5;
        let pre = kind.pre.clone();
        let ticking = self.ticker.hold();
        let (result, mut store) = self
            .on_guest_threads(async move {
                let _ticking = ticking;
                fresh_turn(&mut store);
                let call = pre.run_hook(&mut store, hook == Hook::OnFailure, summary);
                (tokio::time::timeout(budget, call).await, store)
            })
            .await;
        let run = match result {
            Err(_) => HookRun::Fault { fault: SandboxFault::Deadline, detail: "wall-clock timeout".into() },
            Ok(Err(e)) => HookRun::Fault { fault: classify(&e, store.data()), detail: format!("{e:#}") },
            Ok(Ok(Ok(()))) => HookRun::Done,
            Ok(Ok(Err((code, message)))) => {
                let (mut code, mut message) = guest_failure(code, message);
                if let Some(redactions) = store.data().outbound.redactions() {
                    crate::scrub::text(&redactions, &mut code);
                    crate::scrub::text(&redactions, &mut message);
                }
                HookRun::Failed { code, message }
            }
        };
        flush_stdio(store.data_mut());
        let calls = store.data().outbound.calls();
        if !calls.is_empty() {
            self.outbound.count(&tenant, &kind.spec.name, &calls);
            control.outbound_calls(calls);
        }
        run
    }
}

impl Runtime {
    /// Runs `work` (a guest's call): its first turn on the caller's executor, where most
    /// calls end (a step that completes at once pays no hand-off), and, once it waits or
    /// has computed for a whole epoch tick, the rest on the sandbox's threads. The call
    /// keeps the caller's span; dropping the wait stops it, as it would on the caller's
    /// own executor; a panic in it is the caller's.
    async fn on_guest_threads<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        use std::task::Poll;
        use tracing::Instrument;
        let mut work = Box::pin(work.instrument(tracing::Span::current()));
        if let Poll::Ready(value) = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await {
            return value;
        }
        let guests = self.guests.as_ref().expect("the guest threads live as long as the runtime");
        let mut call = AbortOnDrop(guests.spawn(work));
        match (&mut call.0).await {
            Ok(value) => value,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Only a runtime shutting down cancels its tasks, and `&self` outlives this call.
            Err(e) => unreachable!("a guest call was cancelled while its runtime lives: {e}"),
        }
    }
}

/// Starts the guest's first turn as it starts running, not when its store was made: a
/// call that waited for its turn would otherwise yield at its first instruction, and
/// wait again behind every guest computing on the sandbox's threads. The first turn is
/// at least a whole tick (it ends at the second tick from now, not the next one, which
/// may come at once): a step that completes in well under a tick, as most do, never
/// yields and never leaves the caller's executor.
fn fresh_turn(store: &mut Store<GuestState>) {
    store.set_epoch_deadline(2);
}

/// A guest call that ends when its waiter goes away.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker.stop();
        // Without waiting: the last handle may be dropped inside the host's executor.
        if let Some(guests) = self.guests.take() {
            guests.shutdown_background();
        }
    }
}

/// Longest a step may snooze in one go.
const MAX_SNOOZE_SECS: u32 = 30 * 24 * 3600;

/// Lines and bytes of a guest's stderr a failed attempt keeps: a traceback's end.
pub const STDERR_TAIL_LINES: usize = 40;
/// See [`STDERR_TAIL_LINES`].
pub const STDERR_TAIL_BYTES: usize = 2 << 10;
/// Bytes of a describe trap's message a refused deploy answers.
const DESCRIBE_DETAIL_BYTES: usize = 2 << 10;

/// The guest's last stderr lines, for a failed attempt's record.
fn stderr_tail(state: &GuestState) -> Option<String> {
    state.stderr.tail_lines(STDERR_TAIL_LINES, STDERR_TAIL_BYTES)
}

/// Names the fault behind a failed call.
fn classify(error: &wasmtime::Error, state: &GuestState) -> SandboxFault {
    if state.limits.exceeded {
        return SandboxFault::MemoryLimit;
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => SandboxFault::Deadline,
        Some(Trap::OutOfFuel) => SandboxFault::OutOfFuel,
        Some(Trap::StackOverflow) => SandboxFault::StackOverflow,
        Some(Trap::MemoryOutOfBounds) => SandboxFault::OutOfBounds,
        // Rust guests abort on panic, which compiles to `unreachable`.
        Some(Trap::UnreachableCodeReached) => SandboxFault::Panic,
        _ if state.deadline_hit => SandboxFault::Deadline,
        _ => SandboxFault::Trap,
    }
}

/// A guest's failure, capped where it enters the host: a guest may hand back megabytes
/// of message per attempt, which the host would keep, log and show.
fn guest_failure(code: String, message: String) -> (String, String) {
    use spindle_core::failure::{MAX_CODE_LEN, MAX_MESSAGE_LEN, clip};
    (clip(code, MAX_CODE_LEN), clip(message, MAX_MESSAGE_LEN))
}

/// Sends what the guest printed to the host's log, one escaped line per stream, and
/// answers every line the call wrote (its `log` lines, then stdout's and stderr's), with
/// a last line of the host's when a cap dropped some.
fn flush_stdio(state: &mut GuestState) -> Vec<crate::GuestLine> {
    use crate::lines::{Level, Stream, now_micros, split};
    let mut lines = std::mem::take(&mut state.lines);
    let at = now_micros();
    let mut dropped = Vec::new();
    for (stream, capture, level) in
        [(Stream::Stdout, &state.stdout, Level::Info), (Stream::Stderr, &state.stderr, Level::Warn)]
    {
        let mut captured = capture.take();
        if captured.kept.is_empty() && captured.dropped == 0 {
            continue;
        }
        if let Some(scrubbed) = state.outbound.redactions().and_then(|r| r.apply(&captured.kept)) {
            captured.kept = scrubbed;
        }
        lines.extend(split(&captured.kept, stream, level, at));
        if captured.dropped > 0 {
            dropped.push(format!(
                "{} bytes of {} past its {}-byte cap",
                captured.dropped,
                stream.as_str(),
                capture.cap()
            ));
        }
        let text = String::from_utf8_lossy(&captured.kept);
        let text = spindle_core::failure::for_log(&text);
        let Tags { kind, job, step } = &state.tags;
        let kind: &str = kind;
        let stream = stream.as_str();
        tracing::info!(target: "spindle::guest", kind, job, step, stream, dropped = captured.dropped, "{text}");
    }
    if state.logs_dropped > 0 {
        tracing::warn!(target: "spindle::guest", job = %state.tags.job, dropped = state.logs_dropped, "guest log lines over the limit were dropped");
        dropped.insert(0, format!("{} log lines past the per-call cap", state.logs_dropped));
    }
    if !dropped.is_empty() {
        lines.push(crate::GuestLine {
            at_micros: at,
            level: Level::Warn,
            stream: Stream::Host,
            message: format!("dropped: {}", dropped.join(", ")),
        });
    }
    lines
}

/// How much less the guest threads weigh with the kernel's scheduler than the host's own:
/// at nice 10 a busy host thread wins the core about nine times in ten, so a claim, a
/// settlement or an API answer waits milliseconds, not the turns of a hundred spinning
/// guests; with nothing else to run, guests still take every core.
const GUEST_NICE: libc::c_int = 10;

/// Lowers the calling thread's priority to [`GUEST_NICE`] (Linux: nice is per thread).
/// Where the call fails the thread keeps its priority, which is only slower, never wrong.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `setpriority` takes plain integers and touches no memory of ours; `0`
        // names the calling thread.
        #[allow(unsafe_code)]
        let failed = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, GUEST_NICE) } != 0;
        if failed {
            tracing::debug!(error = %std::io::Error::last_os_error(), "guest thread keeps its priority");
        }
    }
}

/// The epoch ticker: a thread that advances the engine's epoch every tick while a guest
/// call is in progress and sleeps otherwise, so that an idle host spends nothing on it.
/// A call holds it ticking (a [`Ticking`]) for as long as its guest may run: inside the
/// call's future, so that a call whose waiter went away still yields, and ends.
#[derive(Debug)]
struct Ticker {
    calls: AtomicUsize,
    stop: AtomicBool,
    thread: std::thread::Thread,
}

impl Ticker {
    /// Starts the thread, asleep until the first call.
    fn spawn(engine: Engine, tick: Duration) -> Result<Arc<Self>, SetupError> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Arc<Ticker>>(1);
        let handle = std::thread::Builder::new()
            .name("spindle-epoch".into())
            .spawn(move || {
                let Ok(ticker) = rx.recv() else { return };
                while !ticker.stop.load(Ordering::Relaxed) {
                    if ticker.calls.load(Ordering::Acquire) == 0 {
                        // An `unpark` between the load and here makes this return at once.
                        std::thread::park();
                        continue;
                    }
                    std::thread::sleep(tick);
                    engine.increment_epoch();
                }
            })
            .map_err(|e| SetupError(format!("epoch ticker: {e}")))?;
        let ticker = Arc::new(Self {
            calls: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            thread: handle.thread().clone(),
        });
        tx.send(ticker.clone()).map_err(|e| SetupError(format!("epoch ticker: {e}")))?;
        Ok(ticker)
    }

    /// Keeps the epoch advancing until the answer is dropped.
    fn hold(self: &Arc<Self>) -> Ticking {
        if self.calls.fetch_add(1, Ordering::AcqRel) == 0 {
            self.thread.unpark();
        }
        Ticking(self.clone())
    }

    /// Ends the thread.
    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

/// A guest call in progress, for the [`Ticker`].
#[derive(Debug)]
struct Ticking(Arc<Ticker>);

impl Drop for Ticking {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::AcqRel);
    }
}
