//! Deployed components: content-addressed blobs and per-tenant kind versions in the
//! store, loaded into the sandbox on demand and kept loaded.
//!
//! Deploying validates the upload in the sandbox first (so nothing invalid is ever
//! stored), then stores the blob and the next version, which new submissions use at
//! once on every host sharing the database. Jobs stay pinned to the version they were
//! submitted with; any host loads that version's blob from the store when it first runs
//! one of its steps (from its compiled-artifact cache when it can).

use std::collections::HashMap;
use std::sync::Arc;

use spindle_core::Timestamp;
use spindle_runtime::{KindSpec, LoadError, LoadedKind, Runtime, is_valid_name};
use thiserror::Error;
use tokio::sync::{Mutex, RwLock};

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
}

/// The registry.
#[derive(Debug)]
pub struct Registry {
    store: Arc<dyn Storage>,
    runtime: Arc<Runtime>,
    loaded: RwLock<HashMap<String, Arc<LoadedKind>>>,
    /// Resolved versions: a version's row never changes once deployed, so each is read
    /// from the store once, not on every step.
    versions: RwLock<HashMap<(TenantId, String, i64), Resolved>>,
    loading: Mutex<()>,
}

impl Registry {
    /// A registry over `store`, loading into `runtime`.
    pub fn new(store: Arc<dyn Storage>, runtime: Arc<Runtime>) -> Self {
        Self {
            store,
            runtime,
            loaded: RwLock::new(HashMap::new()),
            versions: RwLock::new(HashMap::new()),
            loading: Mutex::new(()),
        }
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
        if !is_valid_name(kind) {
            return Err(RegistryError::InvalidName(kind.to_owned()));
        }
        let loaded = Arc::new(self.runtime.load(bytes).await?);
        let spec_json = serde_json::to_string(&loaded.spec).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.store.put_component(&loaded.digest, bytes, now).await?;
        let version = self.store.add_kind_version(tenant, kind, &loaded.digest, &spec_json, now).await?;
        let spec = loaded.spec.clone();
        self.loaded.write().await.insert(loaded.digest.clone(), loaded);
        Ok((version, spec))
    }

    /// The version of `kind` new submissions use, loaded.
    pub async fn current(&self, tenant: &TenantId, kind: &str) -> Result<Resolved, RegistryError> {
        let version =
            self.store.current_kind(tenant, kind).await?.ok_or_else(|| RegistryError::UnknownKind(kind.to_owned()))?;
        let loaded = self.load(&version.digest).await?;
        Ok(Resolved { version, kind: loaded })
    }

    /// A specific version of `kind`, loaded.
    pub async fn version(&self, tenant: &TenantId, kind: &str, version: i64) -> Result<Resolved, RegistryError> {
        let key = (tenant.clone(), kind.to_owned(), version);
        if let Some(resolved) = self.versions.read().await.get(&key) {
            return Ok(resolved.clone());
        }
        let found = self
            .store
            .kind_version(tenant, kind, version)
            .await?
            .ok_or_else(|| RegistryError::UnknownVersion { kind: kind.to_owned(), version })?;
        let loaded = self.load(&found.digest).await?;
        let resolved = Resolved { version: found, kind: loaded };
        self.versions.write().await.insert(key, resolved.clone());
        Ok(resolved)
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
        if let Some(kind) = self.loaded.read().await.get(digest) {
            return Ok(kind.clone());
        }
        // One load at a time: concurrent first runs of a new version compile it once.
        let _guard = self.loading.lock().await;
        if let Some(kind) = self.loaded.read().await.get(digest) {
            return Ok(kind.clone());
        }
        let bytes =
            self.store.component(digest).await?.ok_or_else(|| StoreError::NotFound(format!("component {digest}")))?;
        let loaded = Arc::new(self.runtime.load(&bytes).await?);
        self.loaded.write().await.insert(digest.to_owned(), loaded.clone());
        Ok(loaded)
    }
}
