//! A host assembled: store, sandbox, registry, engine and the background loops. Used by
//! `spindle serve`, the demo, the benchmarks and the tests alike.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use spindle_core::ReconcilePolicy;
use spindle_runtime::{Runtime, SandboxConfig};

use crate::capabilities::SecretKey;
use crate::clock::{Clock, SystemClock};
use crate::dispatcher::{Dispatcher, DispatcherConfig};
use crate::engine::{Engine, EngineConfig};
use crate::pruner::{Pruner, RetentionPolicy};
use crate::reconciler::Reconciler;
use crate::registry::{Registry, RegistryLimits};
use crate::store::{ConnectOptions, SqlStore, SqliteSync, StoreError, TenantId, TenantStore};

/// Everything a host needs to know.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Where the embedded database, the compiled-component cache and the operator
    /// token live.
    pub data_dir: PathBuf,
    /// `sqlite://…` or `postgres://…`; `None`: `sqlite://<data_dir>/spindle.db`.
    pub database_url: Option<String>,
    /// Most PostgreSQL connections.
    pub max_connections: u32,
    /// SQLite: whether a commit must survive an OS crash too (`Full`) or a process
    /// crash (`Normal`, the default).
    pub sqlite_sync: SqliteSync,
    /// The sandbox's limits.
    pub sandbox: SandboxConfig,
    /// The engine's settings.
    pub engine: EngineConfig,
    /// The dispatcher's settings.
    pub dispatcher: DispatcherConfig,
    /// The reconciler's thresholds.
    pub reconcile: ReconcilePolicy,
    /// What the registry keeps loaded.
    pub registry: RegistryLimits,
    /// How long finished jobs are kept.
    pub retention: RetentionPolicy,
    /// The key that seals tenants' secrets, 64 hex digits (`SPINDLE_SECRET_KEY`); `None`:
    /// the `secret-key` file in the data directory, made on first start.
    pub secret_key: Option<String>,
    /// Whether claims share a priority layer between tenants by weight (default) or take
    /// jobs in submission order (`false`: only to compare, as the benchmark does).
    pub fair_claims: bool,
}

impl HostConfig {
    /// A configuration with every default, keeping its files in `data_dir`.
    pub fn in_dir(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            database_url: None,
            max_connections: 16,
            sqlite_sync: SqliteSync::Normal,
            sandbox: SandboxConfig::default(),
            engine: EngineConfig::default(),
            dispatcher: DispatcherConfig::default(),
            reconcile: ReconcilePolicy::default(),
            registry: RegistryLimits::default(),
            retention: RetentionPolicy::default(),
            secret_key: None,
            fair_claims: true,
        }
    }

    /// The database URL in force.
    pub fn database_url(&self) -> String {
        self.database_url.clone().unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("spindle.db").display()))
    }
}

/// Why a host could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The data directory could not be made.
    #[error("data directory {0}: {1}")]
    DataDir(PathBuf, std::io::Error),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine failed (announcing the host).
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    /// The sandbox failed.
    #[error(transparent)]
    Sandbox(#[from] spindle_runtime::SetupError),
    /// The secret key is malformed or its file unreadable.
    #[error("secret key: {0}")]
    SecretKey(String),
}

/// A running host.
#[derive(Debug)]
pub struct Host {
    /// The store.
    pub store: Arc<SqlStore>,
    /// The registry (and through it, the sandbox).
    pub registry: Arc<Registry>,
    /// The engine.
    pub engine: Arc<Engine>,
    dispatcher: tokio::sync::Mutex<Option<Dispatcher>>,
    reconciler: tokio::sync::Mutex<Option<Reconciler>>,
    pruner: tokio::sync::Mutex<Option<Pruner>>,
    scheduler: tokio::sync::Mutex<Option<crate::scheduler::Scheduler>>,
    announcer: tokio::sync::Mutex<Option<crate::upgrade::Announcer>>,
    admission: tokio::sync::Mutex<Option<crate::admission::Admission>>,
    started_at: spindle_core::Timestamp,
    config: HostConfig,
}

/// Makes `dir` (and its parents) if missing and closes it to other local users: it
/// holds the database, the operator token and compiled code.
fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Makes `file` if missing, readable and writable by this user only.
fn private_file(file: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(file)?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
}

impl Host {
    /// Opens the store (migrating it), sets up the sandbox and the engine. Nothing runs
    /// until [`start`](Self::start).
    pub async fn open(config: HostConfig) -> Result<Self, HostError> {
        Self::open_with_clock(config, Arc::new(SystemClock)).await
    }

    /// [`open`](Self::open) with an injected clock.
    pub async fn open_with_clock(mut config: HostConfig, clock: Arc<dyn Clock>) -> Result<Self, HostError> {
        private_dir(&config.data_dir).map_err(|e| HostError::DataDir(config.data_dir.clone(), e))?;
        if config.database_url.is_none() {
            // SQLite makes its log and shared-memory files with the database's mode.
            let db = config.data_dir.join("spindle.db");
            private_file(&db).map_err(|e| HostError::DataDir(db.clone(), e))?;
        }
        if config.sandbox.cache_dir.is_none() {
            config.sandbox.cache_dir = Some(config.data_dir.join("artifacts"));
        }
        // Before anything is read: a host pinned to an older format reads as its build did.
        crate::store::read_as(&config.engine.formats);
        let store = Arc::new(
            SqlStore::connect(&ConnectOptions {
                url: config.database_url(),
                max_connections: config.max_connections,
                sqlite_sync: config.sqlite_sync,
            })
            .await?
            .with_fairness(config.fair_claims),
        );
        if store.tenant(&TenantId::default_tenant()).await?.is_none() {
            match store.create_tenant(&TenantId::default_tenant().0, clock.now()).await {
                Ok(_) | Err(StoreError::Duplicate(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let runtime = Arc::new(Runtime::new(config.sandbox.clone())?);
        let registry = Arc::new(Registry::with_limits(store.clone(), runtime, config.registry));
        let engine = Arc::new(Engine::new(store.clone(), registry.clone(), clock, config.engine.clone()));
        let key = match &config.secret_key {
            Some(hex) => SecretKey::from_hex(hex),
            None => SecretKey::load_or_create(&config.data_dir.join("secret-key")),
        }
        .map_err(|e| HostError::SecretKey(format!("{e:#}")))?;
        engine.tenancy().use_secret_key(key);
        let started_at = engine.now();
        // Refused, the host still runs (and the engine logged why): it claims and writes
        // nothing, and `/v1/health` and `/metrics` say why.
        let _ = engine.announce_host(started_at).await?;
        Ok(Self {
            store,
            registry,
            engine,
            dispatcher: tokio::sync::Mutex::new(None),
            reconciler: tokio::sync::Mutex::new(None),
            scheduler: tokio::sync::Mutex::new(None),
            pruner: tokio::sync::Mutex::new(None),
            announcer: tokio::sync::Mutex::new(None),
            admission: tokio::sync::Mutex::new(None),
            started_at,
            config,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Starts dispatching and reconciling.
    pub async fn start(&self) {
        let mut dispatcher = self.dispatcher.lock().await;
        if dispatcher.is_none() {
            *dispatcher = Some(Dispatcher::start(self.engine.clone(), self.config.dispatcher.clone()));
        }
        let mut reconciler = self.reconciler.lock().await;
        if reconciler.is_none() {
            *reconciler = Some(Reconciler::start(self.engine.clone(), self.config.reconcile));
        }
        let mut pruner = self.pruner.lock().await;
        if pruner.is_none() {
            *pruner = Some(Pruner::start(self.engine.clone(), self.config.retention.clone()));
        }
        let mut scheduler = self.scheduler.lock().await;
        if scheduler.is_none() {
            *scheduler = Some(crate::scheduler::Scheduler::start(self.engine.clone()));
        }
        let mut admission = self.admission.lock().await;
        if admission.is_none() {
            *admission = crate::admission::Admission::start(self.engine.clone());
        }
        let mut announcer = self.announcer.lock().await;
        if announcer.is_none() {
            *announcer = Some(crate::upgrade::Announcer::start(self.engine.clone(), self.started_at));
        }
    }

    /// Stops claiming, lets running steps finish for up to `grace` (then hands them
    /// back), stops the reconciler and closes the store.
    pub async fn shutdown(&self, grace: Duration) {
        if let Some(reconciler) = self.reconciler.lock().await.take() {
            reconciler.stop().await;
        }
        if let Some(pruner) = self.pruner.lock().await.take() {
            pruner.stop().await;
        }
        if let Some(scheduler) = self.scheduler.lock().await.take() {
            scheduler.stop().await;
        }
        if let Some(admission) = self.admission.lock().await.take() {
            admission.stop().await;
        }
        if let Some(dispatcher) = self.dispatcher.lock().await.take() {
            dispatcher.shutdown(grace).await;
        }
        if let Some(announcer) = self.announcer.lock().await.take() {
            announcer.stop().await;
        }
        // Gone at once from the hosts the gate waits for, rather than when its row expires.
        if let Err(e) = self.engine.leave().await {
            tracing::warn!(error = %e, "could not remove this host's row");
        }
        self.store.db().close().await;
    }
}
