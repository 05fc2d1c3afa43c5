//! Compiled components cached on disk, keyed by the component's content hash and the
//! engine's configuration, so a restarted host loads a kind in well under a millisecond
//! instead of recompiling it.
//!
//! Deserializing a compiled artifact runs native code that wasmtime produced, so the
//! host only deserializes files it authenticated: each ends with an HMAC-SHA256, under
//! a key only this host holds (a file beside the cache directory, mode 0600), of the
//! engine's tag, the component's digest and the artifact. A torn, corrupted or planted
//! file (another component's valid artifact under this one's name) is recompiled,
//! never loaded.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::Engine;
use wasmtime::component::Component;

/// The on-disk artifact cache.
#[derive(Clone)]
pub(crate) struct ArtifactCache {
    dir: PathBuf,
    engine_tag: String,
    key: [u8; 32],
}

impl std::fmt::Debug for ArtifactCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactCache").field("dir", &self.dir).field("engine_tag", &self.engine_tag).finish()
    }
}

/// Bytes of an artifact's authentication trailer.
pub(crate) const TAG_LEN: usize = 32;

/// The host's artifact key, made on first use: 32 random bytes in a file readable by
/// this user only.
pub(crate) fn artifact_key(path: &Path) -> std::io::Result<[u8; 32]> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::read(path) {
        Ok(bytes) if bytes.len() == 32 => {
            let mut key = [0u8; 32];
            key.copy_from_slice(&bytes);
            return Ok(key);
        }
        Ok(_) => {
            // A key of the wrong size is no key of ours: make a new one (every
            // artifact under the old one is then recompiled).
            std::fs::remove_file(path)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let key: [u8; 32] = rand::random();
    // Its own temporary file: runtimes may start together in one process too.
    let tmp = temporary(path);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    file.write_all(&key)?;
    file.sync_all()?;
    // Two hosts starting at once: the first key to land wins, and both read it.
    if std::fs::hard_link(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return artifact_key(path);
    }
    std::fs::remove_file(&tmp)?;
    Ok(key)
}

/// Where a file for `path` is written before it is renamed there: a name of its own,
/// since runtimes may write at once, in one process or several.
fn temporary(path: &Path) -> PathBuf {
    path.with_extension(format!("tmp{}-{:016x}", std::process::id(), rand::random::<u64>()))
}

/// Age past which a file still being written is taken for one whose writer was killed.
const STALE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Whether a file still being written, last modified as `meta` says, is stale.
pub(crate) fn is_stale(meta: &std::fs::Metadata) -> bool {
    meta.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|age| age > STALE)
}

/// Deletes the temporary files in `dir` that a killed compile or store left (an
/// artifact being written is `….tmp<pid>-<random>`) once they are stale: younger ones
/// may still be another host's or compile's, being written.
fn sweep_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let unfinished = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.starts_with("tmp"));
        if unfinished && entry.metadata().is_ok_and(|m| is_stale(&m)) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Feeds `len` bytes of `file`, from where it stands, to `mac`, a chunk at a time: an
/// artifact is tens of MiB, and a buffer that size, freed at once, would stay in the
/// allocator's hands as the host's memory.
fn update_from(mac: &mut Hmac<Sha256>, file: &mut std::fs::File, mut len: u64) -> std::io::Result<()> {
    use std::io::Read;
    let mut chunk = vec![0u8; 1 << 20];
    while len > 0 {
        let take = chunk.len().min(usize::try_from(len).unwrap_or(usize::MAX));
        file.read_exact(&mut chunk[..take])?;
        mac.update(&chunk[..take]);
        len -= take as u64;
    }
    Ok(())
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
        let key = artifact_key(&dir.with_extension("key"))?;
        sweep_stale(dir);
        Ok(Self { dir: dir.to_owned(), engine_tag: format!("{:016x}", hasher.finish()), key })
    }

    /// The authentication tag of `artifact` as the cached form of `digest`.
    fn tag(&self, digest: &str, artifact: &[u8]) -> Hmac<Sha256> {
        // A 32-byte key is always a valid HMAC key.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!());
        for part in [self.engine_tag.as_bytes(), digest.as_bytes()] {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        mac.update(artifact);
        mac
    }

    fn path(&self, digest: &str) -> PathBuf {
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_tag))
    }

    /// The cached component for `digest`, if a sound artifact is there.
    ///
    /// The artifact is mapped from its file, not copied: its code and the guest memory
    /// images wasmtime makes from its data are pages of the file, which processes share
    /// and the kernel can drop and read again, rather than the host's own memory (for a
    /// Python or JavaScript version, tens of MiB each).
    pub(crate) fn load(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.path(digest);
        match self.verify(digest, &path) {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(digest, "discarding a compiled artifact that fails authentication");
                return None;
            }
            Err(_) => return None,
        }
        // SAFETY: the file carries this host's own authentication tag over the engine
        // tag, the digest and the artifact: it was produced by `Component::serialize` of
        // an engine with the same compatibility hash, for this component, by a holder of
        // the key. Only this host's user may write the directory (0700), and a file is
        // replaced by rename, never written in place, so the mapping reads what was
        // verified.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize_file(engine, &path) };
        match component {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!(digest, error = %format!("{e:#}"), "discarding an unloadable compiled artifact");
                None
            }
        }
    }

    /// Whether the file at `path` ends with this host's tag over `digest` and the rest
    /// of the file (read in chunks).
    fn verify(&self, digest: &str, path: &Path) -> std::io::Result<bool> {
        use std::io::Read;
        let mut file = std::fs::File::open(path)?;
        let Some(len) = file.metadata()?.len().checked_sub(TAG_LEN as u64) else { return Ok(false) };
        let mut mac = self.tag(digest, &[]);
        update_from(&mut mac, &mut file, len)?;
        let mut trailer = [0u8; TAG_LEN];
        file.read_exact(&mut trailer)?;
        Ok(mac.verify_slice(&trailer).is_ok())
    }

    /// Stores `component`'s artifact for `digest` (atomically: write, then rename).
    /// Deletes the artifact of `digest`, if there is one (a mapping of it stays valid).
    pub(crate) fn discard(&self, digest: &str) {
        match std::fs::remove_file(self.path(digest)) {
            Ok(()) => tracing::debug!(digest, "discarded a compiled component no version uses"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(digest, error = %e, "could not discard a compiled component"),
        }
    }

    pub(crate) fn store(&self, digest: &str, component: &Component) -> std::io::Result<()> {
        let mut bytes = component.serialize().map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let tag = self.tag(digest, &bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag);
        let path = self.path(digest);
        // Its own temporary file: runtimes may start together in one process too.
        let tmp = temporary(&path);
        std::fs::write(&tmp, &bytes)?;
        std::fs::rename(&tmp, &path)
    }

    /// A file to write `digest`'s artifact into as it arrives (a compiler child's
    /// output), entered into the cache by [`PendingArtifact::commit`] and removed if
    /// dropped before: the artifact goes from the child to the disk without being held
    /// in the host's memory.
    pub(crate) fn pending(&self, digest: &str) -> std::io::Result<PendingArtifact> {
        let path = self.path(digest);
        let tmp = temporary(&path);
        let file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        Ok(PendingArtifact { cache: self.clone(), digest: digest.to_owned(), tmp, file: Some(file) })
    }
}

/// An artifact being written into the cache ([`ArtifactCache::pending`]).
#[derive(Debug)]
pub(crate) struct PendingArtifact {
    cache: ArtifactCache,
    digest: String,
    tmp: PathBuf,
    file: Option<std::fs::File>,
}

impl PendingArtifact {
    /// The file to write the artifact into.
    pub(crate) fn file(&mut self) -> std::io::Result<std::fs::File> {
        self.file.take().ok_or_else(|| std::io::Error::other("the pending artifact's file was taken"))
    }

    /// Tags what was written and enters it into the cache (rename: atomic).
    pub(crate) fn commit(self) -> std::io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().read(true).append(true).open(&self.tmp)?;
        let mut mac = self.cache.tag(&self.digest, &[]);
        let len = file.metadata()?.len();
        update_from(&mut mac, &mut file, len)?;
        file.write_all(&mac.finalize().into_bytes())?;
        drop(file);
        std::fs::rename(&self.tmp, self.cache.path(&self.digest))
    }
}

impl Drop for PendingArtifact {
    fn drop(&mut self) {
        // Gone already when committed.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::{artifact_key, sweep_stale};

    /// A compile killed while its artifact was being written leaves a temporary file;
    /// it is deleted once an hour old, and one younger (maybe another compile's, still
    /// writing) and every finished artifact are left.
    #[test]
    fn a_stale_unfinished_artifact_is_swept() {
        let dir = std::env::temp_dir().join(format!("spindle-sweep-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let old = dir.join("d1-e.tmp123-00ff");
        let young = dir.join("d2-e.tmp456-00ff");
        let done = dir.join("d3-e.cwasm");
        for path in [&old, &young, &done] {
            std::fs::write(path, b"bytes").expect("a file");
        }
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        for path in [&old, &done] {
            std::fs::File::options().write(true).open(path).expect("a file").set_modified(two_hours_ago).expect("aged");
        }
        sweep_stale(&dir);
        assert!(!old.exists(), "the stale unfinished artifact is deleted");
        assert!(young.exists() && done.exists(), "the young one and the finished one are left");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Runtimes starting at once in one process (two hosts, parallel tests) all get the
    /// one key: the temporary file each writes first is its own, not the process's.
    #[test]
    fn runtimes_starting_together_in_one_process_share_one_key() {
        let dir = std::env::temp_dir().join(format!("spindle-key-race-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let path = dir.join("cache.key");
        let keys: Vec<_> = (0..16)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || artifact_key(&path))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().expect("a thread").expect("a key"))
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(keys.windows(2).all(|w| w[0] == w[1]), "every runtime reads the key that landed");
    }
}
