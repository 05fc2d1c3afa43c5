//! Deployed components: content-addressed blobs and per-tenant kind versions in the
//! store, loaded into the sandbox on demand and kept loaded.
//!
//! Deploying validates the upload in the sandbox first (so nothing invalid is ever
//! stored), then stores the blob and the next version, which new submissions use at
//! once on every host sharing the database. It comes in two halves: what is checked at
//! once ([`Registry::accept`]: the name, the quota, the component's imports and exports,
//! without compiling) and what may take tens of seconds ([`Registry::complete`]: compile,
//! describe, store), so the API can answer a large component before it has compiled;
//! each deploy is recorded with how far it got ([`DeployRecord`]). Jobs stay pinned to the version they were
//! submitted with; any host loads that version's blob from the store when it first runs
//! one of its steps (from its compiled-artifact cache when it can).
//!
//! What stays loaded is bounded: compiled code by the bytes it occupies, least recently
//! used first out ([`RegistryLimits`]); an evicted kind is loaded again on its next step.
//! A tenant deploying version after version cannot grow the host's memory without end.

use std::num::NonZeroUsize;
use std::sync::Arc;

use spindle_core::Timestamp;
use spindle_runtime::{KindSpec, LoadError, LoadedKind, Runtime, is_valid_name};
use thiserror::Error;
use tokio::sync::Mutex;

use crate::capabilities::Deployment;
use crate::store::{DeployRecord, DeployState, KindEntry, KindVersion, Storage, StoreError, TenantId};

/// Why a registry operation failed.
#[derive(Debug, Error)]
pub enum RegistryError {
    /// The kind name is not valid.
    #[error("invalid kind name {0:?}: 1-64 characters of a-z, 0-9, '-', '_' or '.'")]
    InvalidName(String),
    /// The upload is not a valid job-kind component.
    #[error(transparent)]
    Invalid(#[from] LoadError),
    /// The tenant has no such kind.
    #[error("unknown kind {0:?}")]
    UnknownKind(String),
    /// The kind has no such version.
    #[error("kind {kind:?} has no version {version}")]
    UnknownVersion {
        /// The kind.
        kind: String,
        /// The version asked for.
        version: i64,
    },
    /// The tenant has a deploy under way: one compile per tenant at a time.
    #[error("a deploy of this tenant's is under way; try again when it is done")]
    Busy,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RegistryError {
    /// A stable code for records (a failed deploy's): the component's own reason where
    /// it is the component's fault.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidName(_) => "invalid-request",
            Self::Invalid(load) => load.code(),
            Self::UnknownKind(_) => "unknown-kind",
            Self::UnknownVersion { .. } => "unknown-version",
            Self::Busy => "busy",
            Self::Store(StoreError::QuotaExceeded(_)) => "quota-exceeded",
            Self::Store(_) => "internal",
        }
    }
}

/// Deploys a kind's listing shows.
const RECENT_DEPLOYS: u32 = 10;

/// A deploy checked and recorded, to [`complete`](Registry::complete). It holds the
/// tenant's turn to deploy until it is completed or dropped.
#[derive(Debug)]
pub struct Accepted {
    /// The deploy as recorded (`compiling`).
    pub record: DeployRecord,
    bytes: Vec<u8>,
    deployment: Deployment,
    _turn: Deploying,
}

/// A kind version, loaded and ready to run.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The stored version.
    pub version: KindVersion,
    /// The loaded component.
    pub kind: Arc<LoadedKind>,
    /// What its deployment allows, declares and sets.
    pub deployment: Arc<Deployment>,
}

/// A kind version's key: tenant, kind, version.
type VersionKey = (TenantId, String, i64);

/// A stored version's deployment.
fn deployment_of(version: &KindVersion) -> Result<Deployment, StoreError> {
    serde_json::from_str(&version.deployment).map_err(|e| StoreError::Corrupt(format!("deployment: {e}")))
}

/// How much the registry keeps in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistryLimits {
    /// Bytes of compiled code kept loaded (default 512 MiB); past it the least recently
    /// used kinds are dropped and loaded again when next needed. A kind larger than the
    /// whole budget still loads, alone.
    pub max_loaded_bytes: usize,
    /// Kind versions whose stored row is kept (default 65,536): a version's row never
    /// changes once deployed, so it is read from the store once, not on every step.
    pub max_versions: usize,
}

impl Default for RegistryLimits {
    fn default() -> Self {
        Self { max_loaded_bytes: 512 << 20, max_versions: 65_536 }
    }
}

/// Loaded kinds by digest, least recently used first out, bounded by their bytes.
#[derive(Debug)]
struct Loaded {
    kinds: lru::LruCache<String, Arc<LoadedKind>>,
    bytes: usize,
    max_bytes: usize,
}

impl Loaded {
    fn get(&mut self, digest: &str) -> Option<Arc<LoadedKind>> {
        self.kinds.get(digest).cloned()
    }

    fn insert(&mut self, kind: Arc<LoadedKind>) {
        if let Some(old) = self.kinds.put(kind.digest.clone(), kind.clone()) {
            self.bytes -= old.resident_bytes();
        }
        self.bytes += kind.resident_bytes();
        while self.bytes > self.max_bytes && self.kinds.len() > 1 {
            match self.kinds.pop_lru() {
                Some((_, evicted)) => self.bytes -= evicted.resident_bytes(),
                None => break,
            }
        }
    }
}

/// The registry.
#[derive(Debug)]
pub struct Registry {
    store: Arc<dyn Storage>,
    runtime: Arc<Runtime>,
    // Plain mutexes: never held across an await, taken on every step.
    loaded: std::sync::Mutex<Loaded>,
    versions: std::sync::Mutex<lru::LruCache<VersionKey, (KindVersion, Arc<Deployment>)>>,
    /// The current version of each kind as this host last read or set it: submissions
    /// pin jobs to it without a read, and the insert checks it is still current
    /// ([`JobStore::submit_jobs`](crate::store::JobStore::submit_jobs)).
    current: std::sync::Mutex<lru::LruCache<(TenantId, String), i64>>,
    loading: Mutex<()>,
    /// Tenants with a deploy under way.
    deploying: Arc<std::sync::Mutex<std::collections::HashSet<TenantId>>>,
}

/// A tenant's turn to deploy, given back when dropped.
#[derive(Debug)]
struct Deploying {
    tenants: Arc<std::sync::Mutex<std::collections::HashSet<TenantId>>>,
    tenant: TenantId,
}

impl Drop for Deploying {
    fn drop(&mut self) {
        self.tenants.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.tenant);
    }
}

impl Registry {
    /// A registry over `store`, loading into `runtime`, with the default limits.
    pub fn new(store: Arc<dyn Storage>, runtime: Arc<Runtime>) -> Self {
        Self::with_limits(store, runtime, RegistryLimits::default())
    }

    /// A registry keeping in memory no more than `limits` allow.
    pub fn with_limits(store: Arc<dyn Storage>, runtime: Arc<Runtime>, limits: RegistryLimits) -> Self {
        let versions = NonZeroUsize::new(limits.max_versions).unwrap_or(NonZeroUsize::MIN);
        Self {
            store,
            runtime,
            loaded: std::sync::Mutex::new(Loaded {
                kinds: lru::LruCache::unbounded(),
                bytes: 0,
                max_bytes: limits.max_loaded_bytes,
            }),
            versions: std::sync::Mutex::new(lru::LruCache::new(versions)),
            current: std::sync::Mutex::new(lru::LruCache::new(versions)),
            loading: Mutex::new(()),
            deploying: Arc::default(),
        }
    }

    /// Kinds loaded now, and the bytes of compiled code they occupy.
    pub fn loaded(&self) -> (usize, usize) {
        let loaded = self.lock_loaded();
        (loaded.kinds.len(), loaded.bytes)
    }

    fn lock_loaded(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_versions(&self) -> std::sync::MutexGuard<'_, lru::LruCache<VersionKey, (KindVersion, Arc<Deployment>)>> {
        self.versions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_current(&self) -> std::sync::MutexGuard<'_, lru::LruCache<(TenantId, String), i64>> {
        self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn remember_current(&self, tenant: &TenantId, kind: &str, version: i64) {
        self.lock_current().put((tenant.clone(), kind.to_owned()), version);
    }

    /// The sandbox.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Validates and stores a component as the next version of `tenant`'s `kind`, and
    /// makes it current: [`accept`](Self::accept) and [`complete`](Self::complete) in one.
    pub async fn deploy(
        &self,
        tenant: &TenantId,
        kind: &str,
        bytes: &[u8],
        now: Timestamp,
    ) -> Result<(KindVersion, KindSpec), RegistryError> {
        self.deploy_with(tenant, kind, bytes, &Deployment::default(), now).await
    }

    /// [`deploy`](Self::deploy) with what the deployment allows, declares and sets.
    pub async fn deploy_with(
        &self,
        tenant: &TenantId,
        kind: &str,
        bytes: &[u8],
        deployment: &Deployment,
        now: Timestamp,
    ) -> Result<(KindVersion, KindSpec), RegistryError> {
        let accepted = self.accept(tenant, kind, bytes.to_vec(), deployment.clone(), now).await?;
        self.complete(accepted, now).await.1
    }

    /// The first half of a deploy, what is answered at once: the name, the tenant's
    /// turn (one compile per tenant at a time), its deployed-bytes quota, and the
    /// component's header, imports and exports (checked without compiling). Records the
    /// deploy as `compiling`.
    pub async fn accept(
        &self,
        tenant: &TenantId,
        kind: &str,
        bytes: Vec<u8>,
        deployment: Deployment,
        now: Timestamp,
    ) -> Result<Accepted, RegistryError> {
        if !is_valid_name(kind) {
            return Err(RegistryError::InvalidName(kind.to_owned()));
        }
        let turn = {
            let mut tenants = self.deploying.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if !tenants.insert(tenant.clone()) {
                return Err(RegistryError::Busy);
            }
            Deploying { tenants: self.deploying.clone(), tenant: tenant.clone() }
        };
        self.check_deployed_bytes(tenant, bytes.len()).await?;
        self.runtime.precheck(&bytes)?;
        let record = DeployRecord {
            id: uuid::Uuid::now_v7().to_string(),
            tenant: tenant.clone(),
            kind: kind.to_owned(),
            digest: spindle_runtime::content_digest(&bytes),
            size: i64::try_from(bytes.len()).unwrap_or(i64::MAX),
            state: DeployState::Compiling,
            version: None,
            error_code: None,
            error_message: None,
            created_at: now,
            finished_at: None,
        };
        self.store.insert_deploy(&record).await?;
        Ok(Accepted { record, bytes, deployment, _turn: turn })
    }

    /// The second half, which may take a while (a 20 MB component compiles for tens of
    /// seconds): compile, describe, check the name it describes, store the version and
    /// make it current. Records how it ended, and answers the record beside the result.
    pub async fn complete(
        &self,
        accepted: Accepted,
        now: Timestamp,
    ) -> (DeployRecord, Result<(KindVersion, KindSpec), RegistryError>) {
        let Accepted { mut record, bytes, deployment, _turn } = accepted;
        // Timed across the compile: a 3 s deploy used to record its end 1 ms after it began.
        let started = std::time::Instant::now();
        let result = self.store_version(&record, &bytes, &deployment, now).await;
        record.finished_at = Some(now.plus(started.elapsed()));
        match &result {
            Ok((version, _)) => {
                record.state = DeployState::Ready;
                record.version = Some(version.version);
            }
            Err(e) => {
                record.state = DeployState::Failed;
                record.error_code = Some(e.code().to_owned());
                record.error_message = Some(e.to_string());
                // What its compile cached belongs to no version (unless another deploy
                // of the same bytes made one): it would stay on disk for ever.
                match self.store.component_in_use(&record.digest).await {
                    Ok(false) => self.runtime.discard(&record.digest),
                    Ok(true) => {}
                    Err(e) => tracing::warn!(deploy = %record.id, error = %e, "kept a refused deploy's artifact"),
                }
            }
        }
        if let Err(e) = self.store.finish_deploy(&record).await {
            tracing::error!(deploy = %record.id, error = %e, "could not record how a deploy ended");
        }
        (record, result)
    }

    async fn store_version(
        &self,
        record: &DeployRecord,
        bytes: &[u8],
        deployment: &Deployment,
        now: Timestamp,
    ) -> Result<(KindVersion, KindSpec), RegistryError> {
        let (tenant, kind) = (&record.tenant, record.kind.as_str());
        let deployment_json = serde_json::to_string(deployment).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        // The current version's bytes deployed the same way again are that version: no
        // compile, no new version, nothing more held in memory.
        if let Some(current) = self.store.current_kind(tenant, kind).await?
            && current.digest == record.digest
            && current.deployment == deployment_json
        {
            let spec: KindSpec = serde_json::from_str(&current.spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            return Ok((current, spec));
        }
        let loaded = Arc::new(self.runtime.load_for(Some(&owner_label(tenant)), bytes).await?);
        if loaded.spec.name != kind {
            return Err(
                LoadError::NameMismatch { deployed: kind.to_owned(), described: loaded.spec.name.clone() }.into()
            );
        }
        // Its compiled code counts against the tenant's deployed bytes beside its upload:
        // an artifact reaches tens of times the upload's size.
        let compiled = loaded.resident_bytes();
        self.check_deployed_bytes(tenant, bytes.len().saturating_add(compiled)).await?;
        let spec_json = serde_json::to_string(&loaded.spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.store.put_component(&loaded.digest, bytes, Some(compiled as u64), now).await?;
        let version =
            self.store.add_kind_version(tenant, kind, &loaded.digest, &spec_json, &deployment_json, now).await?;
        self.store.set_kind_limit(tenant, kind, deployment.max_running).await?;
        self.remember_current(tenant, kind, version.version);
        let spec = loaded.spec.clone();
        self.lock_loaded().insert(loaded);
        Ok((version, spec))
    }

    /// A tenant's deploy by id.
    pub async fn deploy_record(&self, tenant: &TenantId, id: &str) -> Result<Option<DeployRecord>, RegistryError> {
        Ok(self.store.deploy_record(tenant, id).await?)
    }

    /// A tenant's latest deploys of `kind`, newest first.
    pub async fn deploy_records(&self, tenant: &TenantId, kind: &str) -> Result<Vec<DeployRecord>, RegistryError> {
        Ok(self.store.deploy_records(tenant, kind, RECENT_DEPLOYS).await?)
    }

    /// A tenant's deploys still compiling, newest first.
    pub async fn compiling(&self, tenant: &TenantId) -> Result<Vec<DeployRecord>, RegistryError> {
        Ok(self.store.compiling_deploys(tenant, RECENT_DEPLOYS).await?)
    }

    /// How long after its upload a deploy still recorded `compiling` counts as
    /// interrupted: its host went away, since no compile outlives its time limit.
    pub fn stale_after(&self) -> std::time::Duration {
        self.runtime.config().compile_timeout + std::time::Duration::from_secs(60)
    }

    /// Refuses a component that would take the tenant's deployed bytes (uploads and
    /// their compiled code) past its limit.
    async fn check_deployed_bytes(&self, tenant: &TenantId, adding: usize) -> Result<(), RegistryError> {
        let Some(max) = self.store.tenant_limits(tenant).await?.max_deployed_bytes else { return Ok(()) };
        let deployed = self.store.deployed_bytes(tenant).await?;
        spindle_core::capacity::admit_component(&tenant.0, deployed, adding as u64, Some(max))
            .map_err(|refusal| RegistryError::Store(StoreError::QuotaExceeded(refusal)))?;
        Ok(())
    }

    /// The version of `kind` new submissions use, read from the store, loaded.
    pub async fn current(&self, tenant: &TenantId, kind: &str) -> Result<Resolved, RegistryError> {
        let Some(version) = self.store.current_kind(tenant, kind).await? else {
            self.forget_current(tenant, kind);
            return Err(RegistryError::UnknownKind(kind.to_owned()));
        };
        let loaded = self.load(&version.digest).await?;
        let deployment = Arc::new(deployment_of(&version)?);
        self.remember_current(tenant, kind, version.version);
        Ok(Resolved { version, kind: loaded, deployment })
    }

    /// The version of `kind` this host last knew as current, loaded, without a read
    /// when it knows one. It may have moved on another host since: write jobs pinned to
    /// it with [`JobStore::submit_jobs`](crate::store::JobStore::submit_jobs), which
    /// checks, and [`forget_current`](Self::forget_current) when it refuses.
    pub async fn last_current(&self, tenant: &TenantId, kind: &str) -> Result<Resolved, RegistryError> {
        let known = self.lock_current().get(&(tenant.clone(), kind.to_owned())).copied();
        match known {
            Some(version) => match self.version(tenant, kind, version).await {
                Err(RegistryError::UnknownVersion { .. }) => self.current(tenant, kind).await,
                other => other,
            },
            None => self.current(tenant, kind).await,
        }
    }

    /// Forgets what this host knew of `kind`'s current version: the next
    /// [`last_current`](Self::last_current) reads it.
    pub fn forget_current(&self, tenant: &TenantId, kind: &str) {
        self.lock_current().pop(&(tenant.clone(), kind.to_owned()));
    }

    /// A specific version of `kind`, loaded.
    pub async fn version(&self, tenant: &TenantId, kind: &str, version: i64) -> Result<Resolved, RegistryError> {
        let key = (tenant.clone(), kind.to_owned(), version);
        let known = self.lock_versions().get(&key).cloned();
        let (found, deployment) = match known {
            Some(found) => found,
            None => {
                let found = self
                    .store
                    .kind_version(tenant, kind, version)
                    .await?
                    .ok_or_else(|| RegistryError::UnknownVersion { kind: kind.to_owned(), version })?;
                let deployment = Arc::new(deployment_of(&found)?);
                self.lock_versions().put(key, (found.clone(), deployment.clone()));
                (found, deployment)
            }
        };
        let loaded = self.load(&found.digest).await?;
        Ok(Resolved { version: found, kind: loaded, deployment })
    }

    /// Makes an earlier (or later) version current.
    pub async fn set_current(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
        now: Timestamp,
    ) -> Result<(), RegistryError> {
        match self.store.set_current_version(tenant, kind, version, now).await {
            Err(StoreError::NotFound(_)) => Err(RegistryError::UnknownVersion { kind: kind.to_owned(), version }),
            other => {
                other?;
                self.remember_current(tenant, kind, version);
                Ok(())
            }
        }
    }

    /// A tenant's kinds.
    pub async fn kinds(&self, tenant: &TenantId) -> Result<Vec<KindEntry>, RegistryError> {
        Ok(self.store.kinds(tenant).await?)
    }

    /// Every version of a tenant's kind.
    pub async fn versions(&self, tenant: &TenantId, kind: &str) -> Result<Vec<KindVersion>, RegistryError> {
        Ok(self.store.kind_versions(tenant, kind).await?)
    }

    /// The loaded component with `digest`, loading it from the store the first time.
    pub async fn load(&self, digest: &str) -> Result<Arc<LoadedKind>, RegistryError> {
        if let Some(kind) = self.lock_loaded().get(digest) {
            return Ok(kind);
        }
        // One load at a time: concurrent first runs of a new version compile it once.
        let _guard = self.loading.lock().await;
        if let Some(kind) = self.lock_loaded().get(digest) {
            return Ok(kind);
        }
        let bytes =
            self.store.component(digest).await?.ok_or_else(|| StoreError::NotFound(format!("component {digest}")))?;
        let loaded = Arc::new(self.runtime.load(&bytes).await?);
        self.lock_loaded().insert(loaded.clone());
        Ok(loaded)
    }
}

/// A tenant's label for what its compiles add to the shared function cache: hex, fixed
/// length, saying nothing of its name on disk.
fn owner_label(tenant: &TenantId) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(format!("spindle tenant {}", tenant.0).as_bytes())[..8])
}
