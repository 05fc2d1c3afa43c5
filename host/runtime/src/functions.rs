//! Cranelift's incremental compilation cache on disk: each function's compiled code,
//! keyed by what it was compiled from. A new version of a Python or JavaScript kind is the
//! same interpreter with another snapshot of its data, so nearly every function is found
//! here and compiling the version is mostly linking.
//!
//! One compile's new functions are written as one pack file when it ends (a file per
//! function cost the first compile of a language as much again as compiling did), and a
//! compile reads the packs' indexes once, at its first lookup. Entries are native code:
//! each carries an HMAC-SHA256 under the host's artifact key over its cache key and its
//! code, checked on every lookup, so a torn, tampered or planted entry is compiled again,
//! never used.
//!
//! The cache is shared by every tenant's compiles, so no tenant may empty it for the
//! others: each pack is named for whose compile wrote it (a tenant's label), each owner
//! keeps at most a quarter of the bound ([`SHARES`]) — past it its own oldest packs go,
//! never its newest — and past the bound (1 GiB) the owner holding the most loses its
//! oldest packs first. (One tenant once filled the cache in 13 uploads, and emptying it
//! cost every tenant its entries.) The bound is kept when an engine opens the cache and
//! when a flush takes it past. A pack left half-written by a killed compile is deleted
//! once it is an hour old. Nothing here can fail a compile: a cache that cannot be read
//! or written only costs speed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::cache::{TAG_LEN, artifact_key, is_stale};

/// Bytes of packs the cache may hold.
const MAX_BYTES: u64 = 1 << 30;
/// Each owner may hold at most this fraction of [`MAX_BYTES`] (its newest pack aside).
const SHARES: u64 = 4;
/// The last bytes of a pack: its index's length, then this.
const MAGIC: &[u8; 8] = b"spfunc01";
/// What a function's tag begins with, so that no function entry is ever taken for an
/// artifact under the same key, or the reverse.
const TAG_LABEL: &[u8] = b"spindle compiled function\0";
/// Largest compiled function an index may claim: a planted index cannot make a lookup
/// allocate more.
const MAX_CODE_LEN: usize = 64 << 20;

/// Where one entry's code is.
#[derive(Clone, Copy, Debug)]
struct Location {
    pack: usize,
    offset: u64,
    len: usize,
}

/// The packs' indexes, read at the first lookup. Packs are opened per lookup, not held:
/// an engine that lives long (compiling on a thread) would otherwise hold one file per
/// compile it ever ran.
#[derive(Debug, Default)]
struct Index {
    packs: Vec<PathBuf>,
    entries: HashMap<Vec<u8>, Location>,
}

/// The function cache of one engine.
pub(crate) struct FunctionCache {
    dir: PathBuf,
    key: [u8; 32],
    max_bytes: u64,
    /// Bytes of packs as this engine knows them: at open, plus what it wrote since.
    bytes: AtomicU64,
    index: OnceLock<Mutex<Index>>,
    /// Entries compiled since the last [`flush`](Self::flush).
    pending: Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
    /// Whose compiles this engine runs: the first part of its packs' names.
    owner: Mutex<String>,
}

impl std::fmt::Debug for FunctionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionCache").field("dir", &self.dir).finish()
    }
}

impl FunctionCache {
    /// The function cache inside the artifact cache `artifacts` (`…/functions`), under
    /// the same key, emptied first if its packs hold more than 1 GiB.
    pub(crate) fn open(artifacts: &Path) -> std::io::Result<Self> {
        Self::open_bounded(artifacts, MAX_BYTES)
    }

    fn open_bounded(artifacts: &Path, max_bytes: u64) -> std::io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(artifacts)?;
        std::fs::set_permissions(artifacts, std::fs::Permissions::from_mode(0o700))?;
        let dir = artifacts.join("functions");
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        let mut bytes = 0;
        for entry in std::fs::read_dir(&dir)?.filter_map(Result::ok) {
            let Ok(meta) = entry.metadata() else { continue };
            let path = entry.path();
            let written = path.extension().is_some_and(|e| e == "pack");
            if !written && is_stale(&meta) {
                let _ = std::fs::remove_file(&path);
            } else {
                bytes += meta.len();
            }
        }
        let key = artifact_key(&artifacts.with_extension("key"))?;
        let cache = Self {
            dir,
            key,
            max_bytes,
            bytes: AtomicU64::new(bytes),
            index: OnceLock::new(),
            pending: Mutex::default(),
            owner: Mutex::new(HOST_OWNER.to_owned()),
        };
        cache.bound();
        Ok(cache)
    }

    /// Names whose compiles this engine runs from now on (a label of hex digits; anything
    /// else is the host's own).
    pub(crate) fn set_owner(&self, owner: &str) {
        let owner = if !owner.is_empty() && owner.len() <= 32 && owner.bytes().all(|b| b.is_ascii_hexdigit()) {
            owner.to_ascii_lowercase()
        } else {
            HOST_OWNER.to_owned()
        };
        *self.owner.lock().unwrap_or_else(PoisonError::into_inner) = owner;
    }

    /// Keeps each owner within its share and the whole within the bound, deleting the
    /// oldest packs of whoever is over (see the module's doc).
    fn bound(&self) {
        let mut packs = owned_packs(&self.dir);
        let total: u64 = packs.iter().map(|p| p.bytes).sum();
        let share = self.max_bytes / SHARES;
        let mut owners: HashMap<String, u64> = HashMap::new();
        for pack in &packs {
            *owners.entry(pack.owner.clone()).or_default() += pack.bytes;
        }
        // Oldest first, so that the first of an owner's packs found is the one to go.
        packs.sort_by_key(|p| p.modified);
        let mut removed = Vec::new();
        let mut total_left = total;
        loop {
            let over_share = owners
                .iter()
                .find(|(owner, bytes)| **bytes > share && packs.iter().filter(|p| &p.owner == *owner).count() > 1);
            let victim = match over_share {
                Some((owner, _)) => owner.clone(),
                None if total_left > self.max_bytes => {
                    // The owner holding the most (of two alike, the one with the older pack).
                    let oldest = |owner: &str| packs.iter().position(|p| p.owner == owner).unwrap_or(usize::MAX);
                    match owners
                        .iter()
                        .filter(|(_, b)| **b > 0)
                        .max_by_key(|(owner, b)| (**b, std::cmp::Reverse(oldest(owner))))
                    {
                        Some((owner, _)) => owner.clone(),
                        None => break,
                    }
                }
                None => break,
            };
            let Some(at) = packs.iter().position(|p| p.owner == victim) else { break };
            let pack = packs.remove(at);
            if std::fs::remove_file(&pack.path).is_err() && pack.path.exists() {
                // Not ours to delete (another process holds the directory): stop trying.
                break;
            }
            if let Some(bytes) = owners.get_mut(&pack.owner) {
                *bytes -= pack.bytes;
            }
            total_left -= pack.bytes;
            removed.push(pack);
        }
        self.bytes.store(total_left, Ordering::Relaxed);
        if removed.is_empty() {
            return;
        }
        let freed: u64 = removed.iter().map(|p| p.bytes).sum();
        tracing::info!(dir = %self.dir.display(), packs = removed.len(), freed, "function cache kept within its bounds");
        if let Some(index) = self.index.get() {
            let mut fresh = Index::default();
            for path in pack_files(&self.dir).unwrap_or_default() {
                let _ = read_pack_index(&path, &mut fresh);
            }
            *index.lock().unwrap_or_else(PoisonError::into_inner) = fresh;
        }
    }

    fn tag(&self, key: &[u8], code: &[u8]) -> Hmac<Sha256> {
        // A 32-byte key is always a valid HMAC key.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).unwrap_or_else(|_| unreachable!());
        mac.update(TAG_LABEL);
        mac.update(&(key.len() as u64).to_le_bytes());
        mac.update(key);
        mac.update(code);
        mac
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index
            .get_or_init(|| {
                let mut index = Index::default();
                for path in pack_files(&self.dir).unwrap_or_default() {
                    if let Err(e) = read_pack_index(&path, &mut index) {
                        tracing::warn!(pack = %path.display(), error = %e, "ignoring an unreadable function pack");
                    }
                }
                Mutex::new(index)
            })
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes the entries compiled since the last flush as one pack (atomically: write,
    /// then rename). Compiles call it when they end.
    pub(crate) fn flush(&self) -> std::io::Result<()> {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if pending.is_empty() {
            return Ok(());
        }
        let owner = self.owner.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let name = format!("{owner}-{:016x}{:016x}", rand::random::<u64>(), rand::random::<u64>());
        let path = self.dir.join(format!("{name}.pack"));
        let tmp = self.dir.join(format!("{name}.tmp"));
        let written = (|| {
            let mut out = BufWriter::new(std::fs::File::create_new(&tmp)?);
            let mut offset = 0u64;
            let mut index = Vec::new();
            for (key, code) in &pending {
                out.write_all(code)?;
                out.write_all(&self.tag(key, code).finalize().into_bytes())?;
                index.extend_from_slice(&u32::try_from(key.len()).map_err(std::io::Error::other)?.to_le_bytes());
                index.extend_from_slice(key);
                index.extend_from_slice(&offset.to_le_bytes());
                index.extend_from_slice(&u32::try_from(code.len()).map_err(std::io::Error::other)?.to_le_bytes());
                offset += (code.len() + TAG_LEN) as u64;
            }
            out.write_all(&index)?;
            out.write_all(&(index.len() as u64).to_le_bytes())?;
            out.write_all(MAGIC)?;
            out.into_inner().map_err(std::io::IntoInnerError::into_error)?;
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        self.bytes.fetch_add(std::fs::metadata(&path).map_or(0, |m| m.len()), Ordering::Relaxed);
        // Later compiles of this engine find them too.
        if self.index.get().is_some() {
            read_pack_index(&path, &mut self.index())?;
        }
        self.bound();
        Ok(())
    }
}

impl Drop for FunctionCache {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!(error = %e, "could not write compiled functions to the function cache");
        }
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let (path, at) = {
            let index = self.index();
            let at = *index.entries.get(key)?;
            (index.packs[at.pack].clone(), at)
        };
        let mut bytes = vec![0u8; at.len + TAG_LEN];
        std::fs::File::open(path).ok()?.read_exact_at(&mut bytes, at.offset).ok()?;
        let (code, trailer) = bytes.split_at(at.len);
        if self.tag(key, code).verify_slice(trailer).is_err() {
            tracing::warn!(dir = %self.dir.display(), "ignoring a cached function that fails authentication");
            return None;
        }
        bytes.truncate(at.len);
        Some(Cow::Owned(bytes))
    }

    fn insert(&self, key: &[u8], code: Vec<u8>) -> bool {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).push((key.to_vec(), code));
        true
    }
}

/// The owner of packs written by no tenant's compile (and of packs from before owners).
const HOST_OWNER: &str = "host";

/// A pack, whose it is, its size and age.
#[derive(Debug)]
struct OwnedPack {
    path: PathBuf,
    owner: String,
    bytes: u64,
    modified: std::time::SystemTime,
}

/// The packs in `dir`, with their owners (the name before its `-`).
fn owned_packs(dir: &Path) -> Vec<OwnedPack> {
    pack_files(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|path| {
            let meta = std::fs::metadata(&path).ok()?;
            let stem = path.file_stem()?.to_str()?;
            let owner = stem.split_once('-').map_or(HOST_OWNER, |(owner, _)| owner).to_owned();
            Some(OwnedPack { owner, bytes: meta.len(), modified: meta.modified().ok()?, path })
        })
        .collect()
}

/// The pack files in `dir` (not those still being written).
fn pack_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut packs: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    packs.sort();
    Ok(packs)
}

/// Adds the pack at `path` to `index`: its entries' keys and where their code is. The
/// index is only where to look; each entry's code is authenticated when it is read.
fn read_pack_index(path: &Path, index: &mut Index) -> std::io::Result<()> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {what}", path.display()));
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut trailer = [0u8; 16];
    if size < 16 {
        return Err(bad("too short"));
    }
    file.seek(SeekFrom::Start(size - 16))?;
    file.read_exact(&mut trailer)?;
    let (len, magic) = trailer.split_at(8);
    if magic != MAGIC {
        return Err(bad("not a function pack"));
    }
    let len = u64::from_le_bytes(len.try_into().map_err(|_| bad("index length"))?);
    let start = (size - 16).checked_sub(len).ok_or_else(|| bad("index length"))?;
    let mut raw = vec![0u8; usize::try_from(len).map_err(|_| bad("index length"))?];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut raw)?;
    let pack = index.packs.len();
    let mut entries = Vec::new();
    let mut rest = raw.as_slice();
    while !rest.is_empty() {
        let take = |rest: &mut &[u8], n: usize| -> std::io::Result<Vec<u8>> {
            if rest.len() < n {
                return Err(bad("truncated index"));
            }
            let (head, tail) = rest.split_at(n);
            *rest = tail;
            Ok(head.to_vec())
        };
        let key_len = u32::from_le_bytes(take(&mut rest, 4)?.try_into().map_err(|_| bad("key length"))?) as usize;
        let key = take(&mut rest, key_len)?;
        let offset = u64::from_le_bytes(take(&mut rest, 8)?.try_into().map_err(|_| bad("offset"))?);
        let code_len = u32::from_le_bytes(take(&mut rest, 4)?.try_into().map_err(|_| bad("code length"))?) as usize;
        if code_len > MAX_CODE_LEN || offset.saturating_add((code_len + TAG_LEN) as u64) > start {
            return Err(bad("an entry outside the pack"));
        }
        entries.push((key, Location { pack, offset, len: code_len }));
    }
    index.packs.push(path.to_owned());
    index.entries.extend(entries);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::FunctionCache;
    use wasmtime::CacheStore;

    fn scratch(label: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("spindle-{label}-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir.join("artifacts")
    }

    fn only_pack(artifacts: &std::path::Path) -> std::path::PathBuf {
        let mut packs = super::pack_files(&artifacts.join("functions")).expect("the cache");
        assert_eq!(packs.len(), 1, "{packs:?}");
        packs.remove(0)
    }

    /// What one engine compiled is found by the next, once flushed as a pack.
    #[test]
    fn a_flushed_function_is_found_by_the_next_engine() {
        let dir = scratch("functions-found");
        let cache = FunctionCache::open(&dir).expect("a cache");
        assert!(cache.insert(b"key", b"code".to_vec()));
        assert!(cache.insert(b"other", b"more code".to_vec()));
        drop(cache); // flushes
        let cache = FunctionCache::open(&dir).expect("reopened");
        assert_eq!(cache.get(b"key").as_deref(), Some(&b"code"[..]));
        assert_eq!(cache.get(b"other").as_deref(), Some(&b"more code"[..]));
        assert_eq!(cache.get(b"missing"), None);
        // And a later flush of the same engine is found by it too.
        assert!(cache.insert(b"third", b"3".to_vec()));
        cache.flush().expect("a flush");
        assert_eq!(cache.get(b"third").as_deref(), Some(&b"3"[..]));
        let _ = std::fs::remove_dir_all(dir.parent().expect("the scratch directory"));
    }

    /// A cached function is native code: it is used only when it carries this host's tag
    /// over its key and its code. A flipped byte, or another host's valid pack in this
    /// cache, is a miss (compiled again), not a load.
    #[test]
    fn a_cached_function_is_used_only_as_this_host_stored_it() {
        let (ours, theirs) = (scratch("functions-ours"), scratch("functions-theirs"));
        let cache = FunctionCache::open(&ours).expect("a cache");
        assert!(cache.insert(b"key", b"code".to_vec()));
        drop(cache);
        let pack = only_pack(&ours);
        let mut bytes = std::fs::read(&pack).expect("the pack");
        bytes[1] ^= 0x01;
        std::fs::write(&pack, &bytes).expect("tampering");
        assert_eq!(FunctionCache::open(&ours).expect("reopened").get(b"key"), None, "a tampered entry is not used");

        let other = FunctionCache::open(&theirs).expect("another host's cache");
        assert!(other.insert(b"key", b"evil".to_vec()));
        drop(other);
        std::fs::copy(only_pack(&theirs), &pack).expect("planting");
        assert_eq!(FunctionCache::open(&ours).expect("reopened").get(b"key"), None, "another host's entry is not used");

        std::fs::write(&pack, b"not a pack").expect("garbage");
        assert_eq!(FunctionCache::open(&ours).expect("reopened").get(b"key"), None, "garbage is ignored");
        for dir in [&ours, &theirs] {
            let _ = std::fs::remove_dir_all(dir.parent().expect("the scratch directory"));
        }
    }

    /// Writes one pack of `owner` holding `key`, dated `at` seconds after the epoch.
    fn write(dir: &std::path::Path, max: u64, owner: &str, key: &[u8], at: u64) {
        let cache = FunctionCache::open_bounded(dir, max).expect("a cache");
        cache.set_owner(owner);
        assert!(cache.insert(key, vec![0; 40]));
        cache.flush().expect("a flush");
        for pack in super::owned_packs(&dir.join("functions")) {
            if pack.modified > std::time::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30) {
                let file = std::fs::File::options().write(true).open(&pack.path).expect("the pack");
                file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(at)).expect("dated");
            }
        }
    }

    fn found(dir: &std::path::Path, max: u64, keys: &[&[u8]]) -> Vec<bool> {
        let cache = FunctionCache::open_bounded(dir, max).expect("a cache");
        keys.iter().map(|key| cache.get(key).is_some()).collect()
    }

    /// The cache is shared: one tenant's compiles filled it and emptying it cost every
    /// tenant its entries. An owner past its share (a quarter of the bound) loses its own
    /// oldest packs, never its newest; another owner's stay. Past the bound, the owner
    /// holding the most (of two alike, the older) loses its oldest first.
    #[test]
    fn an_owner_past_its_share_loses_its_own_oldest_packs_not_anothers() {
        let dir = scratch("functions-share");
        // Each pack is some 105 bytes: with a bound of 1,000, a share is 250.
        write(&dir, 1_000, "bb", b"b1", 1);
        write(&dir, 1_000, "aa", b"a1", 2);
        write(&dir, 1_000, "aa", b"a2", 3);
        write(&dir, 1_000, "aa", b"a3", 4);
        assert_eq!(found(&dir, 1_000, &[b"b1", b"a1", b"a2", b"a3"]), [true, false, true, true]);
        // A bound of 300 (a share of 75, under one pack): each owner keeps its newest.
        assert_eq!(found(&dir, 300, &[b"b1", b"a2", b"a3"]), [true, false, true]);
        // A third owner takes it past 300: the older of two alike goes.
        write(&dir, 300, "cc", b"c1", 5);
        assert_eq!(found(&dir, 300, &[b"b1", b"a3", b"c1"]), [false, true, true]);
        // A pack from before owners is the host's.
        let packs = super::owned_packs(&dir.join("functions"));
        assert!(packs.iter().all(|p| p.owner == "aa" || p.owner == "cc"), "{packs:?}");
        let _ = std::fs::remove_dir_all(dir.parent().expect("the scratch directory"));
    }

    /// A label that is not hex digits is no owner's name in a file name: the host's.
    #[test]
    fn an_owner_is_a_label_of_hex_digits() {
        let dir = scratch("functions-owner");
        write(&dir, 1 << 20, "../../etc", b"k", 1);
        let packs = super::owned_packs(&dir.join("functions"));
        assert_eq!(packs.iter().map(|p| p.owner.as_str()).collect::<Vec<_>>(), ["host"]);
        let _ = std::fs::remove_dir_all(dir.parent().expect("the scratch directory"));
    }

    #[test]
    fn a_stale_unfinished_pack_is_deleted_when_opened() {
        let dir = scratch("functions-stale");
        drop(FunctionCache::open(&dir).expect("a cache"));
        let (old, young) = (dir.join("functions/old.tmp"), dir.join("functions/young.tmp"));
        std::fs::write(&old, b"half").expect("a stale file");
        std::fs::write(&young, b"half").expect("a fresh file");
        let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .expect("the stale file")
            .set_modified(two_hours_ago)
            .expect("aged");
        drop(FunctionCache::open(&dir).expect("reopened"));
        assert!(!old.exists(), "the stale one is deleted");
        assert!(young.exists(), "the young one is left to its compile");
        let _ = std::fs::remove_dir_all(dir.parent().expect("the scratch directory"));
    }
}
