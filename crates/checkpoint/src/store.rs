//! The store: blobs named by the SHA-256 of their content, one manifest per checkpoint, and an
//! index of the checkpoints, newest first.
//!
//! Every file it writes is written whole under a temporary name beside its final one, then
//! renamed over it: a reader, and a later server after a kill, sees the old file or the new
//! one, never a torn one. Nothing is `fsync`ed: a checkpoint taken before each call must cost
//! little beside the call, and a killed server loses nothing (what it wrote stands in the
//! page cache). Only a power loss or a kernel crash may lose the newest checkpoints (see
//! docs/DECISIONS.md). The order of the writes keeps every state a kill can leave readable:
//! a manifest before the index that names it, and what a dropped checkpoint held removed
//! only after the index no longer names it.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{CallInfo, Error, Manifest, Node};

/// One checkpoint as the index keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) at: String,
    pub(crate) call: CallInfo,
    pub(crate) changed: usize,
    pub(crate) skipped: Vec<String>,
    /// The manifest holds every path (else only what differs from `parent`).
    pub(crate) full: bool,
    pub(crate) parent: Option<String>,
    /// The manifest file's size.
    pub(crate) manifest_bytes: u64,
    /// The blob hashes a delta's manifest names (`None`: unknown or too many; then the
    /// manifest is read when a dropped checkpoint's blobs are weighed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) hashes: Option<Vec<String>>,
}

/// The most hashes an index entry lists; a delta naming more is read when needed.
pub(crate) const MAX_ENTRY_HASHES: usize = 64;

/// The index file: the checkpoints newest first, and the bytes the blobs hold.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Index {
    pub(crate) checkpoints: Vec<Entry>,
    pub(crate) blob_bytes: u64,
    /// Checkpoints dropped since the last whole sweep of the blobs.
    #[serde(default)]
    pub(crate) drops_since_sweep: usize,
}

impl Index {
    pub(crate) fn total_bytes(&self) -> u64 {
        self.blob_bytes
            + self
                .checkpoints
                .iter()
                .map(|e| e.manifest_bytes)
                .sum::<u64>()
    }
}

/// A manifest file: every path (`full`) or what changed since the parent (a removed path as
/// `null`).
#[derive(Debug, Serialize, Deserialize)]
struct ManifestFile {
    entries: BTreeMap<String, Option<Node>>,
}

/// The store's directory, held open.
pub(crate) struct Store {
    dir: Dir,
    /// `manifests/`, held open.
    manifests: Dir,
    lock: File,
    /// The index as this process last read or wrote it (see [`Cached`]).
    cache: Mutex<Option<Cached>>,
}

/// What `index.json` was when this process last read or wrote it, and the index it held.
///
/// The index is used again without being read only while `index.json` is still that file:
/// the same device and inode, size, modification and change times. Every writer replaces
/// the file by a rename, so another server's index is always another inode; and the cache
/// holds the file open, so its inode number cannot be given to a new file meanwhile.
struct Cached {
    stamp: Stamp,
    /// The file the stamp is of, held open.
    _file: File,
    /// `None` while a caller holds the index (taken, not copied).
    index: Option<Index>,
}

/// A file's identity and the times any change to it moves.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    fn of(st: &rustix::fs::Stat) -> Self {
        Self {
            dev: st.st_dev as u64,
            ino: u64::from(st.st_ino),
            size: st.st_size as i64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }
}

const INDEX: &str = "index.json";

fn io_err(e: impl Into<io::Error>) -> Error {
    Error::Store(e.into())
}

/// Write `bytes` as `name` in `dir`: whole under a fresh temporary name (created exclusively,
/// mode 0600), then renamed over `name`. No `fsync` (see the module docs). A temporary left by
/// a kill starts with `.` and holds `.tmp-`; the sweep removes it.
fn install(dir: &Dir, name: &str, bytes: &[u8]) -> Result<File, Error> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut options = cap_std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    cap_std::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = dir.open_with(&tmp, &options).and_then(|f| {
        let mut f = f.into_std();
        f.write_all(bytes).map(|()| f)
    });
    match written.and_then(|f| dir.rename(&tmp, dir, name).map(|()| f)) {
        Ok(f) => Ok(f),
        Err(e) => {
            let _ = dir.remove_file(&tmp);
            Err(io_err(e))
        }
    }
}

/// Whether a file name is one of our temporaries.
fn is_temp(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp-")
}

/// A manifest's file name: a whole one under a name of its own, so that rewriting a delta
/// whole never replaces the file the index still names.
fn manifest_name(id: &str, full: bool) -> String {
    if full {
        format!("{id}.full.json")
    } else {
        format!("{id}.json")
    }
}

/// The blob hashes a manifest names.
pub(crate) fn hashes_of<'a>(
    nodes: impl IntoIterator<Item = &'a Option<Node>>,
) -> impl Iterator<Item = &'a String> {
    nodes
        .into_iter()
        .filter_map(|n| n.as_ref().and_then(|n| n.hash.as_ref()))
}

impl Store {
    /// Open (creating, mode 0700) the store at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(io_err)?;
        let dir = Dir::open_ambient_dir(path, cap_std::ambient_authority()).map_err(io_err)?;
        for sub in ["blobs", "manifests"] {
            match dir.create_dir(sub) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        let manifests = dir.open_dir("manifests").map_err(io_err)?;
        let lock = dir
            .open_with(
                "lock",
                cap_std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true),
            )
            .map_err(io_err)?
            .into_std();
        Ok(Self {
            dir,
            manifests,
            lock,
            cache: Mutex::new(None),
        })
    }

    /// Hold the store for one operation (other servers over the same root wait).
    pub(crate) fn lock(&self) -> Result<Locked<'_>, Error> {
        rustix::fs::flock(&self.lock, rustix::fs::FlockOperation::LockExclusive).map_err(io_err)?;
        Ok(Locked { store: self })
    }
}

/// The store, held.
pub(crate) struct Locked<'s> {
    store: &'s Store,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.store.lock, rustix::fs::FlockOperation::Unlock);
    }
}

fn blob_path(hash: &str) -> PathBuf {
    Path::new("blobs").join(&hash[..2]).join(&hash[2..])
}

/// The hex SHA-256 of `bytes`.
pub(crate) fn hash_of(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

impl Locked<'_> {
    fn dir(&self) -> &Dir {
        &self.store.dir
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Option<Cached>> {
        self.store
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The index: the one this process last read or wrote while `index.json` is still that
    /// file (one `lstat`), else read from the store. Taken out of the cache, not copied: give
    /// it back with [`keep`](Self::keep) when it was not changed, or write it.
    pub(crate) fn index(&self) -> Result<Index, Error> {
        let mut cache = self.cache();
        let now = rustix::fs::statat(
            &self.store.dir,
            INDEX,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .ok()
        .map(|st| Stamp::of(&st));
        if let (Some(c), Some(now)) = (cache.as_mut(), now)
            && c.stamp == now
            && let Some(index) = c.index.take()
        {
            return Ok(index);
        }
        *cache = None;
        let file = match self.dir().open(INDEX) {
            Ok(f) => f.into_std(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Index::default()),
            Err(e) => return Err(io_err(e)),
        };
        let stamp = rustix::fs::fstat(&file).map_err(io_err)?;
        let mut bytes = Vec::new();
        (&file).read_to_end(&mut bytes).map_err(io_err)?;
        let index = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Store(io::Error::new(io::ErrorKind::InvalidData, e)))?;
        *cache = Some(Cached {
            stamp: Stamp::of(&stamp),
            _file: file,
            index: None,
        });
        Ok(index)
    }

    /// Give back, unchanged, the index [`index`](Self::index) gave.
    pub(crate) fn keep(&self, index: Index) {
        if let Some(c) = self.cache().as_mut() {
            c.index = Some(index);
        }
    }

    /// Write the index (and keep a copy of it for the next [`index`](Self::index)).
    pub(crate) fn write_index(&self, index: &Index) -> Result<(), Error> {
        let mut cache = self.cache();
        *cache = None;
        let bytes = serde_json::to_vec(index).map_err(|e| Error::Store(e.into()))?;
        let file = install(self.dir(), INDEX, &bytes)?;
        // After the rename, which may move the change time.
        if let Ok(st) = rustix::fs::fstat(&file) {
            *cache = Some(Cached {
                stamp: Stamp::of(&st),
                _file: file,
                index: Some(index.clone()),
            });
        }
        Ok(())
    }

    /// Store `bytes` under their hash unless there already; the bytes it added to the store.
    pub(crate) fn put_blob(&self, hash: &str, bytes: &[u8]) -> Result<u64, Error> {
        let path = blob_path(hash);
        if self.dir().symlink_metadata(&path).is_ok() {
            return Ok(0);
        }
        let sub = Path::new("blobs").join(&hash[..2]);
        let sub = match self.dir().open_dir(&sub) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match self.dir().create_dir(&sub) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io_err(e)),
                }
                self.dir().open_dir(&sub).map_err(io_err)?
            }
            Err(e) => return Err(io_err(e)),
        };
        install(&sub, &hash[2..], bytes)?;
        Ok(bytes.len() as u64)
    }

    pub(crate) fn blob(&self, hash: &str) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        self.dir()
            .open(blob_path(hash))
            .map_err(io_err)?
            .into_std()
            .read_to_end(&mut out)
            .map_err(io_err)?;
        Ok(out)
    }

    /// Write the manifest of `id` (`full`: every path, else a delta); its size.
    pub(crate) fn write_manifest(
        &self,
        id: &str,
        full: bool,
        entries: BTreeMap<String, Option<Node>>,
    ) -> Result<u64, Error> {
        let bytes =
            serde_json::to_vec(&ManifestFile { entries }).map_err(|e| Error::Store(e.into()))?;
        install(&self.store.manifests, &manifest_name(id, full), &bytes)?;
        Ok(bytes.len() as u64)
    }

    fn read_manifest(&self, entry: &Entry) -> Result<BTreeMap<String, Option<Node>>, Error> {
        let read = |full| self.store.manifests.read(manifest_name(&entry.id, full));
        let bytes = match read(entry.full) {
            // A store written before whole manifests had a name of their own.
            Err(e) if entry.full && e.kind() == io::ErrorKind::NotFound => read(false),
            r => r,
        }
        .map_err(io_err)?;
        let file: ManifestFile = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Store(io::Error::new(io::ErrorKind::InvalidData, e)))?;
        Ok(file.entries)
    }

    /// The full manifest of the checkpoint `id` (its parents applied).
    pub(crate) fn manifest(&self, index: &Index, id: &str) -> Result<Manifest, Error> {
        let mut chain = Vec::new();
        let mut at = Some(id.to_owned());
        while let Some(id) = at {
            let entry = index
                .checkpoints
                .iter()
                .find(|e| e.id == id)
                .ok_or(Error::NotFound)?;
            chain.push(entry);
            at = if entry.full {
                None
            } else {
                entry.parent.clone()
            };
            if chain.len() > index.checkpoints.len() {
                return Err(Error::Store(io::Error::other("a manifest chain loops")));
            }
        }
        let mut out = Manifest::new();
        for entry in chain.iter().rev() {
            for (path, node) in self.read_manifest(entry)? {
                match node {
                    Some(node) => {
                        out.insert(path, node);
                    }
                    None => {
                        out.remove(&path);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Drop the oldest checkpoints while more than `max` are kept or the store holds more
    /// than `max_bytes` (the newest is always kept). The blobs only a dropped checkpoint
    /// named are weighed here (subtracted from the blob bytes) and returned with the dropped
    /// manifests: the caller removes them once the index that no longer names them is
    /// written. No whole sweep, except first when the byte bound is exceeded (so that the
    /// bytes counted are exact before anything is dropped for them).
    pub(crate) fn prune(
        &self,
        index: &mut Index,
        max: usize,
        max_bytes: u64,
    ) -> Result<Garbage, Error> {
        let mut garbage = Garbage::default();
        let over = |index: &Index| {
            index.checkpoints.len() > 1
                && (index.checkpoints.len() > max || index.total_bytes() > max_bytes)
        };
        if !over(index) {
            return Ok(garbage);
        }
        if index.total_bytes() > max_bytes {
            self.sweep(index)?;
        }
        while over(index) {
            let oldest = index.checkpoints.pop().expect("more than one");
            index.drops_since_sweep += 1;
            let oldest_nodes = if oldest.full {
                Some(self.read_manifest(&oldest)?)
            } else {
                None
            };
            let mut with_oldest = index.clone();
            with_oldest.checkpoints.push(oldest.clone());
            let next = index.checkpoints.last().expect("more than one").clone();
            // The next oldest becomes the base of the chain: written whole, under a name of
            // its own (its delta stays until the index names the whole one).
            let next_nodes: BTreeMap<String, Option<Node>> = if next.full {
                self.read_manifest(&next)?
            } else {
                let whole = self.manifest(&with_oldest, &next.id)?;
                let whole: BTreeMap<_, _> = whole.into_iter().map(|(p, n)| (p, Some(n))).collect();
                let bytes = self.write_manifest(&next.id, true, whole.clone())?;
                let e = index.checkpoints.last_mut().expect("present");
                e.full = true;
                e.parent = None;
                e.manifest_bytes = bytes;
                e.hashes = None;
                garbage
                    .files
                    .push(Path::new("manifests").join(manifest_name(&next.id, false)));
                whole
            };
            garbage
                .files
                .push(Path::new("manifests").join(manifest_name(&oldest.id, oldest.full)));
            if oldest.full {
                garbage
                    .files
                    .push(Path::new("manifests").join(manifest_name(&oldest.id, false)));
            }
            // The blobs the dropped one named that no kept checkpoint names: those the new
            // base does not hold, nor any later delta.
            let Some(oldest_nodes) = oldest_nodes else {
                // Not a whole manifest (a store left in an unexpected state): sweep later.
                index.drops_since_sweep = usize::MAX / 2;
                continue;
            };
            let kept: HashSet<&String> = hashes_of(next_nodes.values()).collect();
            let mut candidates: HashSet<String> = hashes_of(oldest_nodes.values())
                .filter(|h| !kept.contains(h))
                .cloned()
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let rest = index.checkpoints.len() - 1;
            for e in &index.checkpoints[..rest] {
                match &e.hashes {
                    Some(hs) => {
                        for h in hs {
                            candidates.remove(h);
                        }
                    }
                    None => {
                        for h in hashes_of(self.read_manifest(e)?.values()) {
                            candidates.remove(h);
                        }
                    }
                }
                if candidates.is_empty() {
                    break;
                }
            }
            for h in candidates {
                let path = blob_path(&h);
                if garbage.files.contains(&path) {
                    continue;
                }
                if let Ok(md) = self.dir().symlink_metadata(&path) {
                    index.blob_bytes = index.blob_bytes.saturating_sub(md.len());
                    garbage.files.push(path);
                }
            }
        }
        Ok(garbage)
    }

    /// Remove what [`prune`](Self::prune) left to remove (after the index was written).
    pub(crate) fn remove(&self, garbage: Garbage) {
        for f in garbage.files {
            let _ = self.dir().remove_file(f);
        }
    }

    /// Remove the blobs no kept manifest refers to, the manifests the index does not name
    /// and the temporaries a kill left; recount the blob bytes. Run when the byte bound is
    /// exceeded and once every so many dropped checkpoints (what no dropped checkpoint
    /// named, such as a blob stored after a call and changed again before the next
    /// checkpoint, is found only here).
    pub(crate) fn sweep(&self, index: &mut Index) -> Result<(), Error> {
        let mut live = HashSet::new();
        for entry in &index.checkpoints {
            for node in self.read_manifest(entry)?.into_values().flatten() {
                if let Some(h) = node.hash {
                    live.insert(h);
                }
            }
        }
        let mut bytes = 0;
        let blobs = self.dir().open_dir("blobs").map_err(io_err)?;
        for sub in blobs.entries().map_err(io_err)? {
            let sub = sub.map_err(io_err)?;
            let prefix = sub.file_name().to_string_lossy().into_owned();
            let Ok(dir) = sub.open_dir() else { continue };
            for blob in dir.entries().map_err(io_err)? {
                let blob = blob.map_err(io_err)?;
                let name = blob.file_name().to_string_lossy().into_owned();
                if live.contains(&format!("{prefix}{name}")) {
                    bytes += blob.metadata().map(|m| m.len()).unwrap_or(0);
                } else {
                    let _ = dir.remove_file(blob.file_name());
                }
            }
        }
        index.blob_bytes = bytes;
        index.drops_since_sweep = 0;
        // Manifests: those the index names (a whole one's delta only while no whole one is
        // there); temporaries and the rest go.
        let named: HashSet<String> = index
            .checkpoints
            .iter()
            .flat_map(|e| {
                let mut names = vec![manifest_name(&e.id, e.full)];
                if e.full {
                    names.push(manifest_name(&e.id, false));
                }
                names
            })
            .collect();
        let manifests = self.dir().open_dir("manifests").map_err(io_err)?;
        let mut present = HashSet::new();
        for m in manifests.entries().map_err(io_err)? {
            present.insert(
                m.map_err(io_err)?
                    .file_name()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        for name in &present {
            let stale_delta = index.checkpoints.iter().any(|e| {
                e.full
                    && *name == manifest_name(&e.id, false)
                    && present.contains(&manifest_name(&e.id, true))
            });
            if !named.contains(name) || stale_delta {
                let _ = manifests.remove_file(name);
            }
        }
        for f in self.dir().entries().map_err(io_err)? {
            let name = f
                .map_err(io_err)?
                .file_name()
                .to_string_lossy()
                .into_owned();
            if is_temp(&name) {
                let _ = self.dir().remove_file(&name);
            }
        }
        Ok(())
    }
}

/// What a prune leaves to remove once the index is written.
#[derive(Default)]
pub(crate) struct Garbage {
    files: Vec<PathBuf>,
}
