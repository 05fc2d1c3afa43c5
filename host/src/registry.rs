//! Deployed components: content-addressed blobs and per-tenant kind versions in the
//! store, loaded into the sandbox on demand and kept loaded.
//!
//! Deploying validates the upload in the sandbox first (so nothing invalid is ever
//! stored), then stores the blob and the next version, which new submissions use at
//! once on every host sharing the database. Jobs stay pinned to the version they were
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
use crate::store::{KindEntry, KindVersion, Storage, StoreError, TenantId};

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
    loading: Mutex<()>,
    /// Tenants with a deploy under way.
    deploying: Arc<std::sync::Mutex<std::collections::HashSet<TenantId>>>,
}

/// A tenant's turn to deploy, given back when dropped.
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

    /// The sandbox.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Validates and stores a component as the next version of `tenant`'s `kind`, and
    /// makes it current.
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
        if !is_valid_name(kind) {
            return Err(RegistryError::InvalidName(kind.to_owned()));
        }
        // One compile per tenant at a time: a tenant cannot pile up compile work.
        let _turn = {
            let mut tenants = self.deploying.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if !tenants.insert(tenant.clone()) {
                return Err(RegistryError::Busy);
            }
            Deploying { tenants: self.deploying.clone(), tenant: tenant.clone() }
        };
        self.check_deployed_bytes(tenant, bytes.len()).await?;
        let loaded = Arc::new(self.runtime.load(bytes).await?);
        let spec_json = serde_json::to_string(&loaded.spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.store.put_component(&loaded.digest, bytes, now).await?;
        let deployment_json = serde_json::to_string(deployment).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let version =
            self.store.add_kind_version(tenant, kind, &loaded.digest, &spec_json, &deployment_json, now).await?;
        self.store.set_kind_limit(tenant, kind, deployment.max_running).await?;
        let spec = loaded.spec.clone();
        self.lock_loaded().insert(loaded);
        Ok((version, spec))
    }

    /// Refuses a component that would take the tenant's deployed bytes past its limit.
    async fn check_deployed_bytes(&self, tenant: &TenantId, adding: usize) -> Result<(), RegistryError> {
        let Some(max) = self.store.tenant_limits(tenant).await?.max_deployed_bytes else { return Ok(()) };
        let deployed = self.store.deployed_bytes(tenant).await?;
        let after = deployed.saturating_add(adding as u64);
        if after > max {
            return Err(RegistryError::Store(StoreError::QuotaExceeded(crate::store::QuotaRefusal {
                quota: "max-deployed-bytes",
                message: format!(
                    "tenant {tenant} has {deployed} bytes of components deployed; {adding} more would pass its limit of {max}"
                ),
                retry_after: std::time::Duration::ZERO,
            })));
        }
        Ok(())
    }

    /// The version of `kind` new submissions use, loaded.
    pub async fn current(&self, tenant: &TenantId, kind: &str) -> Result<Resolved, RegistryError> {
        let version =
            self.store.current_kind(tenant, kind).await?.ok_or_else(|| RegistryError::UnknownKind(kind.to_owned()))?;
        let loaded = self.load(&version.digest).await?;
        let deployment = Arc::new(deployment_of(&version)?);
        Ok(Resolved { version, kind: loaded, deployment })
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
            other => Ok(other?),
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
