//! Compiled components cached on disk, keyed by the component's content hash and the
//! engine's configuration, so a restarted host loads a kind in well under a millisecond
//! instead of recompiling it.
//!
//! Deserializing a compiled artifact runs native code that wasmtime produced, so the
//! host only deserializes files it wrote itself into its own cache directory, and checks
//! a SHA-256 trailer first so a torn or corrupted file is recompiled, never loaded.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The on-disk artifact cache.
#[derive(Clone, Debug)]
pub(crate) struct ArtifactCache {
    dir: PathBuf,
    engine_tag: String,
}

impl ArtifactCache {
    pub(crate) fn new(dir: &Path, engine: &Engine) -> std::io::Result<Self> {
        // Compiled artifacts are native code this host loads: other local users may not
        // read or plant them.
        {
            use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        // Stable within one build of the host, which is all an artifact needs: a
        // different wasmtime or configuration gets a different tag.
        let mut hasher = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(Self { dir: dir.to_owned(), engine_tag: format!("{:016x}", hasher.finish()) })
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_tag))
    }

    /// The cached component for `digest`, if a sound artifact is there.
    pub(crate) fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let bytes = std::fs::read(self.path(digest)).ok()?;
        let split = bytes.len().checked_sub(32)?;
        let (artifact, trailer) = bytes.split_at(split);
        if Sha256::digest(artifact)[..] != *trailer {
            tracing::warn!(digest, "discarding a corrupted compiled artifact");
            return None;
        }
        // SAFETY: the artifact was produced by `Component::serialize` of an engine with
        // the same compatibility hash (it is in the file name), written by this host into
        // its own cache directory, and its checksum matches what was written.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(engine, artifact) };
        match component {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(digest, error = %format!("{e:#}"), "discarding an unloadable compiled artifact");
                None
            }
        }
    }

    /// Stores `component`'s artifact for `digest` (atomically: write, then rename).
    pub(crate) fn store(&self, digest: &str, component: &Component) -> std::io::Result<()> {
        let mut bytes = component.serialize().map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let checksum = Sha256::digest(&bytes);
        bytes.extend_from_slice(&checksum);
        let path = self.path(digest);
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, &path)
    }
}
