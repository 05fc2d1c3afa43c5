//! A host assembled for tests: a fresh store (SQLite file or PostgreSQL database), the
//! shared sandbox, a registry, and engines and dispatchers on demand.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use spindle::clock::{Clock, SystemClock};
use spindle::dispatcher::{Dispatcher, DispatcherConfig};
use spindle::engine::{Engine, EngineConfig, SubmitRequest};
use spindle::registry::Registry;
use spindle::store::prelude::*;
use spindle::store::{Backend, ConnectOptions, JobRecord, KindVersion, SqlStore, TenantId};
use spindle_core::JobId;
use spindle_runtime::Runtime;

use crate::{guest, runtime, test_sandbox};

/// Which database a harness runs on.
pub fn backends() -> [Backend; 2] {
    [Backend::Sqlite, Backend::Postgres]
}

/// A fresh, migrated store on `backend`; answers it and its URL.
pub async fn fresh_store(backend: Backend) -> (Arc<SqlStore>, String, Scratch) {
    let scratch = Scratch::new();
    let url = match backend {
        Backend::Sqlite => format!("sqlite://{}", scratch.path.join("spindle.db").display()),
        Backend::Postgres => crate::postgres::fresh_database().await,
    };
    let store =
        SqlStore::connect(&ConnectOptions::new(url.clone(), 24)).await.unwrap_or_else(|e| panic!("connect {url}: {e}"));
    (Arc::new(store), url, scratch)
}

/// A directory removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    /// Its path.
    pub path: PathBuf,
}

impl Scratch {
    /// A new, empty directory.
    pub fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "spindle-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a scratch directory");
        Self { path }
    }
}

impl Default for Scratch {
    /// An empty placeholder that owns no directory.
    fn default() -> Self {
        Self { path: PathBuf::new() }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A host for tests.
#[allow(missing_debug_implementations)]
pub struct Harness {
    /// The store.
    pub store: Arc<SqlStore>,
    /// Its URL.
    pub url: String,
    /// The sandbox.
    pub runtime: Arc<Runtime>,
    /// The registry.
    pub registry: Arc<Registry>,
    /// The tenant everything runs under.
    pub tenant: TenantId,
    /// Engines made so far (waits listen to all of them).
    pub engines: std::sync::Mutex<Vec<Arc<Engine>>>,
    _scratch: Scratch,
}

impl Harness {
    /// A harness on `backend`.
    pub async fn new(backend: Backend) -> Self {
        Self::with_sandbox(backend, test_sandbox()).await
    }

    /// A harness on `backend` whose sandbox has `sandbox`'s settings.
    pub async fn with_sandbox(backend: Backend, sandbox: spindle_runtime::SandboxConfig) -> Self {
        let (store, url, scratch) = fresh_store(backend).await;
        Self::assemble(store, url, scratch, sandbox)
    }

    /// A harness on `backend` whose store claims in submission order across tenants
    /// (`spindle serve` with fair claiming off).
    pub async fn without_fair_claims(backend: Backend) -> Self {
        let (store, url, scratch) = fresh_store(backend).await;
        let store = Arc::try_unwrap(store).unwrap_or_else(|_| unreachable!("a fresh store has one owner"));
        Self::assemble(Arc::new(store.with_fairness(false)), url, scratch, test_sandbox())
    }

    fn assemble(store: Arc<SqlStore>, url: String, scratch: Scratch, sandbox: spindle_runtime::SandboxConfig) -> Self {
        let runtime = runtime(sandbox);
        let registry = Arc::new(Registry::new(store.clone(), runtime.clone()));
        Self {
            store,
            url,
            runtime,
            registry,
            tenant: TenantId::default_tenant(),
            engines: std::sync::Mutex::new(Vec::new()),
            _scratch: scratch,
        }
    }

    /// An engine with the system clock and `config`.
    pub fn engine_with(&self, config: EngineConfig) -> Arc<Engine> {
        self.engine_clocked(config, Arc::new(SystemClock))
    }

    /// An engine with a given clock.
    pub fn engine_clocked(&self, config: EngineConfig, clock: Arc<dyn Clock>) -> Arc<Engine> {
        let engine = Arc::new(Engine::new(self.store.clone(), self.registry.clone(), clock, config));
        self.engines.lock().expect("engines").push(engine.clone());
        engine
    }

    /// An engine with test settings: fixed jitter seed, short leases.
    pub fn engine(&self) -> Arc<Engine> {
        self.engine_with(test_engine_config())
    }

    /// Who holds lease `key` (read from the table: no store operation answers it).
    pub async fn lease_holder(&self, key: &str) -> Option<(JobId, i64)> {
        use spindle::store::sql::{Ty, Value};
        let rows = self
            .store
            .db()
            .fetch(
                "SELECT job_id, token FROM leases WHERE key = $1 AND job_id <> ''",
                vec![Value::from(key)],
                &[Ty::Text, Ty::Int],
            )
            .await
            .expect("read the leases table");
        rows.first().map(|r| {
            (
                r.text(0, "test row").expect("a decodable row").parse().expect("a job id"),
                r.int(1, "test row").expect("a decodable row"),
            )
        })
    }

    /// The steps of `id`'s pass `pass`, as stored.
    pub async fn pass_steps(&self, id: JobId, pass: u32) -> Vec<spindle_core::step::Step> {
        use spindle::store::sql::{Ty, Value};
        let rows = self
            .store
            .db()
            .fetch(
                "SELECT body, output FROM steps WHERE job_id = $1 AND pass = $2 ORDER BY position",
                vec![Value::from(id.to_string()), Value::from(i64::from(pass))],
                &[Ty::Text, Ty::OptBlob],
            )
            .await
            .expect("read the steps table");
        rows.into_iter()
            .map(|mut r| {
                let mut step: spindle_core::step::Step =
                    serde_json::from_str(&r.text(0, "test row").expect("a decodable row")).expect("a step");
                step.output = r.take_opt_blob(1, "steps.output").expect("a decodable row");
                step
            })
            .collect()
    }

    /// Starts a dispatcher for `engine`, sized so that two of them fit the test sandbox's
    /// pool (`test_sandbox().pool_slots`): steps run in parallel on the sandbox's threads,
    /// and a host whose pool is full hands a step back instead of running it.
    pub fn dispatch(&self, engine: &Arc<Engine>) -> Dispatcher {
        Dispatcher::start(
            engine.clone(),
            DispatcherConfig {
                maintenance_interval: Duration::from_millis(200),
                concurrency: 28,
                fair_reserve: 2,
                ..DispatcherConfig::default()
            },
        )
    }

    /// Deploys the built guest `name` as kind `kind`.
    pub async fn deploy_as(&self, kind: &str, name: &str) -> KindVersion {
        let now = SystemClock.now();
        self.registry
            .deploy(&self.tenant, kind, &guest(name), now)
            .await
            .unwrap_or_else(|e| panic!("deploy {name}: {e}"))
            .0
    }

    /// Deploys the built guest `name` under its own name.
    pub async fn deploy(&self, name: &str) -> KindVersion {
        self.deploy_as(name, name).await
    }

    /// Submits a job of `kind` with JSON `input`.
    pub async fn submit(&self, engine: &Engine, kind: &str, input: serde_json::Value) -> JobId {
        let request =
            SubmitRequest { kind: kind.into(), input: serde_json::to_vec(&input).expect("json"), ..Default::default() };
        engine
            .submission()
            .submit(&self.tenant, request)
            .await
            .unwrap_or_else(|e| panic!("submit {kind}: {e}"))
            .record()
            .job
            .id
    }

    /// Waits until job `id` is final, woken by the engines' state-change signals (with
    /// a slow re-check as a guard against a change made where no engine here saw it).
    pub async fn wait_final(&self, id: JobId) -> JobRecord {
        self.wait_for(id, |r| r.job.state.is_final()).await
    }

    /// Waits until `done(job)` holds.
    pub async fn wait_for(&self, id: JobId, done: impl Fn(&JobRecord) -> bool) -> JobRecord {
        let mut receivers: Vec<_> = self.engines.lock().expect("engines").iter().map(|e| e.subscribe()).collect();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let record = self.store.job(id).await.expect("load job").expect("job exists");
            if done(&record) {
                return record;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {id} never reached the awaited state: {:?}",
                record.job.state
            );
            if receivers.is_empty() {
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
            let any_change = futures_util::future::select_all(receivers.iter_mut().map(|r| Box::pin(r.recv())));
            let _ = tokio::time::timeout(Duration::from_millis(250), any_change).await;
        }
    }
}

/// Engine settings for tests: reproducible jitter, short leases, quick heartbeats.
pub fn test_engine_config() -> EngineConfig {
    EngineConfig {
        lease_ttl: Duration::from_secs(30),
        heartbeat_interval: Duration::from_millis(20),
        rescue_backoff: Duration::from_millis(10),
        rng_seed: Some(7),
        ..EngineConfig::default()
    }
}
