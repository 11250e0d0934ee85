//! The store: blobs named by the SHA-256 of their content, one manifest per checkpoint, and an
//! index of the checkpoints, newest first (the regular form), and the journal each checkpoint
//! is appended to before it is folded into that form (see the crate docs and the `journal`
//! module).
//!
//! Every file of the regular form is written whole under a temporary name beside its final
//! one, then renamed over it: a reader, and a later server after a kill, sees the old file or
//! the new one, never a torn one. Nothing is `fsync`ed: a checkpoint taken before each call
//! must cost little beside the call, and a killed server loses nothing (what it wrote stands
//! in the page cache). Only a power loss or a kernel crash may lose the newest checkpoints
//! (see docs/DECISIONS.md). The order of the writes keeps every state a kill can leave
//! readable: a journal record only once the large files it names are installed; in a fold,
//! the blobs and manifests before the index that names them, the journal emptied after the
//! index is written, and what a dropped checkpoint held removed only after the index no
//! longer names it.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fs::File;
use std::io::Write;
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::journal::{self, Op};
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
    pub(crate) checkpoints: VecDeque<Entry>,
    pub(crate) blob_bytes: u64,
    /// Checkpoints dropped since the last whole sweep of the blobs.
    #[serde(default)]
    pub(crate) drops_since_sweep: usize,
    /// The sequence number of the last journal record applied (a record at or below it,
    /// left by a kill between the index's write and the journal's truncation, is skipped).
    #[serde(default)]
    pub(crate) seq: u64,
    /// Blobs stored after the newest checkpoint was taken (what a call wrote), named by no
    /// checkpoint yet: the next one names them without reading them again, so no prune nor
    /// sweep removes them meanwhile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) after_hashes: Vec<String>,
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
    /// `journal`, held open for appending (see the `journal` module).
    journal: File,
    /// The most checkpoints kept (at least 1) and the most bytes.
    max: usize,
    max_bytes: u64,
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
    /// The journal's length as this process last read or wrote it: another server's record
    /// makes it longer, a fold by another server rewrites the index (another inode).
    journal_len: u64,
    /// Checkpoints the journal holds.
    pushes: usize,
    /// Blobs the journal holds (stored once: a later checkpoint naming one adds nothing).
    blobs: HashSet<String>,
    /// The index with the journal's records applied; `None` while a caller holds it (taken,
    /// not copied).
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
const JOURNAL: &str = "journal";

/// The largest blob or manifest a journal record carries; a larger one is installed as a file
/// of its own before the record that names it.
const INLINE_MAX: usize = 64 << 10;
/// The most blob bytes, and the most blobs, one record carries (a run that changed more
/// installs the rest as files: a fold would write them anyway).
const STAGE_MAX: u64 = 1 << 20;
const STAGE_MAX_BLOBS: usize = 1024;
/// The journal is folded once longer than this (or a quarter of the byte bound, at least
/// 64 KiB)…
const JOURNAL_MAX: u64 = 4 << 20;
/// …or once it holds more checkpoints than this many times the count bound (at least 16).
const JOURNAL_ROUNDS: usize = 8;
/// A whole sweep of the blobs runs once this many times the count bound were dropped since
/// the last (a fold drops what passed the bound at once, and what the journal held that no
/// kept checkpoint names is never written: the sweep finds only large blobs installed and
/// named by none, and temporaries a kill left).
const SWEEP_ROUNDS: usize = 8;

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
    pub(crate) fn open(path: &Path, max: usize, max_bytes: u64) -> Result<Self, Error> {
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
        let mut options = cap_std::fs::OpenOptions::new();
        options.read(true).append(true).create(true);
        cap_std::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let journal = dir.open_with(JOURNAL, &options).map_err(io_err)?.into_std();
        Ok(Self {
            dir,
            manifests,
            lock,
            journal,
            max: max.max(1),
            max_bytes,
            cache: Mutex::new(None),
        })
    }

    fn journal_max(&self) -> (u64, usize) {
        (
            (self.max_bytes / 4).clamp(64 << 10, JOURNAL_MAX),
            JOURNAL_ROUNDS * self.max.max(16),
        )
    }

    /// Hold the store for one operation (other servers over the same root wait).
    pub(crate) fn lock(&self) -> Result<Locked<'_>, Error> {
        rustix::fs::flock(&self.lock, rustix::fs::FlockOperation::LockExclusive).map_err(io_err)?;
        Ok(Locked {
            store: self,
            staged: Mutex::new(Staged::default()),
        })
    }
}

/// The store, held.
pub(crate) struct Locked<'s> {
    store: &'s Store,
    /// Blobs and manifests not in their files yet: this operation's, for its journal record,
    /// or, while the journal is folded, the records'.
    staged: Mutex<Staged>,
}

/// Blobs and manifests held for a journal record or a fold.
#[derive(Default)]
struct Staged {
    /// Manifest file name → bytes.
    manifests: BTreeMap<String, Vec<u8>>,
    /// Blob hash → bytes.
    blobs: BTreeMap<String, Vec<u8>>,
    blob_bytes: u64,
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

    fn staged(&self) -> std::sync::MutexGuard<'_, Staged> {
        self.staged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn journal_len(&self) -> Result<u64, Error> {
        Ok(rustix::fs::fstat(&self.store.journal)
            .map_err(io_err)?
            .st_size as u64)
    }

    /// The index with the journal's records applied: the one this process last read or wrote
    /// while `index.json` is still that file and the journal as long as it left it (one
    /// `lstat`, one `fstat`), else read from the store (another server's records folded
    /// first). Taken out of the cache, not copied: give it back with [`keep`](Self::keep)
    /// when it was not changed, or [`append`](Self::append) what changed.
    pub(crate) fn index(&self) -> Result<Index, Error> {
        {
            let mut cache = self.cache();
            let now = rustix::fs::statat(
                &self.store.dir,
                INDEX,
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .ok()
            .map(|st| Stamp::of(&st));
            let journal = self.journal_len()?;
            if let (Some(c), Some(now)) = (cache.as_mut(), now)
                && c.stamp == now
                && c.journal_len == journal
                && let Some(index) = c.index.take()
            {
                return Ok(index);
            }
        }
        self.fold()?;
        self.cache()
            .as_mut()
            .and_then(|c| c.index.take())
            .ok_or_else(|| io_err(io::Error::other("the index was not read")))
    }

    /// The index with every journal record folded into the store's files and the bounds
    /// applied (what a list, a diff or a restore reads).
    pub(crate) fn settled(&self) -> Result<Index, Error> {
        let index = self.index()?;
        let pending = self.cache().as_ref().is_some_and(|c| c.journal_len > 0);
        if !pending {
            return Ok(index);
        }
        self.fold()?;
        self.index()
    }

    /// Give back, unchanged, the index [`index`](Self::index) gave.
    pub(crate) fn keep(&self, index: Index) {
        if let Some(c) = self.cache().as_mut() {
            c.index = Some(index);
        }
    }

    /// Write the index file (and keep a copy of it for the next [`index`](Self::index)).
    fn write_index(&self, index: &Index) -> Result<(), Error> {
        let mut cache = self.cache();
        *cache = None;
        let bytes = serde_json::to_vec(index).map_err(|e| Error::Store(e.into()))?;
        let file = install(self.dir(), INDEX, &bytes)?;
        // After the rename, which may move the change time.
        if let Ok(st) = rustix::fs::fstat(&file) {
            *cache = Some(Cached {
                stamp: Stamp::of(&st),
                _file: file,
                journal_len: self.journal_len()?,
                pushes: 0,
                blobs: HashSet::new(),
                index: Some(index.clone()),
            });
        }
        Ok(())
    }

    /// Record `op` (then applied to `index`) with what this operation staged: one record
    /// appended to the journal with one `write`. Once the journal is long enough it is
    /// folded.
    pub(crate) fn append(&self, mut index: Index, op: Op) -> Result<(), Error> {
        let staged = std::mem::take(&mut *self.staged());
        index.seq += 1;
        let manifests: Vec<(String, Vec<u8>)> = staged.manifests.into_iter().collect();
        let blobs: Vec<(String, Vec<u8>)> = staged.blobs.into_iter().collect();
        let bytes = journal::encode(index.seq, &op, &manifests, &blobs)
            .map_err(|e| Error::Store(e.into()))?;
        let mut cache = self.cache();
        let Some(c) = cache.as_mut() else {
            return Err(io_err(io::Error::other("the index was not read")));
        };
        if let Err(e) = (&self.store.journal).write_all(&bytes) {
            // Nothing half written stays to hide the next record.
            let _ = self.store.journal.set_len(c.journal_len);
            *cache = None;
            return Err(io_err(e));
        }
        c.journal_len += bytes.len() as u64;
        c.pushes += usize::from(op.is_push());
        op.apply(&mut index);
        c.blobs.extend(blobs.into_iter().map(|(h, _)| h));
        c.index = Some(index);
        let (max_len, max_pushes) = self.store.journal_max();
        // Past the byte bound (large content is installed at once): folded now, so the bound
        // holds on disk too, not only in what a list shows.
        let over = c
            .index
            .as_ref()
            .is_some_and(|i| i.total_bytes() > self.store.max_bytes);
        let full = c.journal_len > max_len || c.pushes > max_pushes || over;
        drop(cache);
        if full {
            self.fold()?;
        }
        Ok(())
    }

    /// Fold the journal into the store's files, when it holds anything (a server's clean
    /// end).
    pub(crate) fn fold_pending(&self) -> Result<(), Error> {
        if self.journal_len()? > 0 {
            self.fold()?;
        }
        Ok(())
    }

    /// Read the index file and the journal; when the journal holds records, fold them: the
    /// blobs and manifests they carry written as files (but those of checkpoints the count
    /// bound drops, which never reach a file), the bounds applied, the index written, the
    /// journal emptied, and what the dropped checkpoints alone held removed. Every state a
    /// kill leaves on the way is readable: the files before the index that names them, the
    /// journal emptied after (a record the index already holds is skipped by its sequence
    /// number), removals last.
    fn fold(&self) -> Result<(), Error> {
        *self.cache() = None;
        let (mut index, file) = match self.dir().open(INDEX) {
            Ok(f) => {
                let f = f.into_std();
                let mut bytes = Vec::new();
                (&f).read_to_end(&mut bytes).map_err(io_err)?;
                let index = serde_json::from_slice(&bytes)
                    .map_err(|e| Error::Store(io::Error::new(io::ErrorKind::InvalidData, e)))?;
                (index, Some(f))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Index::default(), None),
            Err(e) => return Err(io_err(e)),
        };
        let len = self.journal_len()?;
        let mut buf = vec![0; len as usize];
        self.store
            .journal
            .read_exact_at(&mut buf, 0)
            .map_err(io_err)?;
        let (records, _) = journal::decode(&buf);
        drop(buf);
        let mut applied = false;
        {
            let mut staged = self.staged();
            *staged = Staged::default();
            for r in records {
                if r.seq <= index.seq {
                    continue;
                }
                staged.manifests.extend(r.manifests);
                staged.blobs.extend(r.blobs);
                r.op.apply(&mut index);
                index.seq = r.seq;
                applied = true;
            }
        }
        // Nothing to fold: the index as read. (With no index file yet, one is written below,
        // so that its stamp can be kept.)
        if !applied
            && len == 0
            && let Some(f) = file
        {
            let st = rustix::fs::fstat(&f).map_err(io_err)?;
            *self.cache() = Some(Cached {
                stamp: Stamp::of(&st),
                _file: f,
                journal_len: 0,
                pushes: 0,
                blobs: HashSet::new(),
                index: Some(index),
            });
            return Ok(());
        }
        let mut garbage = self.drop_oldest(&mut index)?;
        self.flush()?;
        let more = self.prune(&mut index, self.store.max, self.store.max_bytes)?;
        garbage.files.extend(more.files);
        self.write_index(&index)?;
        if len > 0 {
            self.store.journal.set_len(0).map_err(io_err)?;
        }
        if let Some(c) = self.cache().as_mut() {
            c.journal_len = 0;
        }
        self.remove(garbage);
        if index.drops_since_sweep >= SWEEP_ROUNDS * self.store.max {
            self.sweep(&mut index)?;
            self.write_index(&index)?;
        }
        Ok(())
    }

    /// Write what is staged as files (a blob already there is not written again).
    fn flush(&self) -> Result<(), Error> {
        let staged = std::mem::take(&mut *self.staged());
        for (hash, bytes) in &staged.blobs {
            self.install_blob(hash, bytes)?;
        }
        for (name, bytes) in &staged.manifests {
            install(&self.store.manifests, name, bytes)?;
        }
        Ok(())
    }

    /// Drop the oldest checkpoints past the count bound at once: the new oldest written
    /// whole (staged), the manifests of the dropped ones and the blobs only they named
    /// removed (staged ones never written; files returned, to remove once the index that no
    /// longer names them is written).
    fn drop_oldest(&self, index: &mut Index) -> Result<Garbage, Error> {
        let mut garbage = Garbage::default();
        let max = self.store.max;
        if index.checkpoints.len() <= max {
            return Ok(garbage);
        }
        let base_id = index.checkpoints[max - 1].id.clone();
        let base_full = index.checkpoints[max - 1].full;
        let whole = self.manifest(index, &base_id)?;
        let dropped = index.checkpoints.split_off(max);
        index.drops_since_sweep += dropped.len();
        let mut candidates: HashSet<String> = self.staged().blobs.keys().cloned().collect();
        for e in &dropped {
            match (&e.hashes, e.full) {
                (Some(hs), false) => candidates.extend(hs.iter().cloned()),
                _ => candidates.extend(hashes_of(self.read_manifest(e)?.values()).cloned()),
            }
        }
        for e in &dropped {
            for full in [true, false] {
                self.discard_manifest(&manifest_name(&e.id, full), &mut garbage);
            }
        }
        for h in whole.values().filter_map(|n| n.hash.as_ref()) {
            candidates.remove(h);
        }
        if !base_full {
            let entries: BTreeMap<String, Option<Node>> =
                whole.into_iter().map(|(p, n)| (p, Some(n))).collect();
            let bytes = self.stage_manifest(&base_id, true, entries)?;
            self.discard_manifest(&manifest_name(&base_id, false), &mut garbage);
            let e = index.checkpoints.back_mut().expect("present");
            e.full = true;
            e.parent = None;
            e.manifest_bytes = bytes;
            e.hashes = None;
        }
        for h in &index.after_hashes {
            candidates.remove(h);
        }
        for e in index.checkpoints.range(..max - 1) {
            if candidates.is_empty() {
                break;
            }
            match &e.hashes {
                Some(hs) => hs.iter().for_each(|h| {
                    candidates.remove(h);
                }),
                None => {
                    for h in hashes_of(self.read_manifest(e)?.values()) {
                        candidates.remove(h);
                    }
                }
            }
        }
        let mut staged = self.staged();
        for h in candidates {
            if let Some(bytes) = staged.blobs.remove(&h) {
                index.blob_bytes = index.blob_bytes.saturating_sub(bytes.len() as u64);
                continue;
            }
            let path = blob_path(&h);
            if let Ok(md) = self.dir().symlink_metadata(&path) {
                index.blob_bytes = index.blob_bytes.saturating_sub(md.len());
                garbage.files.push(path);
            }
        }
        Ok(garbage)
    }

    /// A manifest no kept checkpoint names: unstaged, or its file removed later.
    fn discard_manifest(&self, name: &str, garbage: &mut Garbage) {
        if self.staged().manifests.remove(name).is_none() {
            garbage.files.push(Path::new("manifests").join(name));
        }
    }

    /// Store `bytes` under their hash unless there already; the bytes it added to the store.
    /// A small one is staged for this operation's journal record, a large one installed.
    pub(crate) fn put_blob(&self, hash: &str, bytes: &[u8]) -> Result<u64, Error> {
        if self
            .cache()
            .as_ref()
            .is_some_and(|c| c.blobs.contains(hash))
        {
            return Ok(0);
        }
        {
            let mut staged = self.staged();
            if staged.blobs.contains_key(hash) {
                return Ok(0);
            }
            if bytes.len() <= INLINE_MAX
                && staged.blob_bytes + bytes.len() as u64 <= STAGE_MAX
                && staged.blobs.len() < STAGE_MAX_BLOBS
            {
                if self.dir().symlink_metadata(blob_path(hash)).is_ok() {
                    return Ok(0);
                }
                staged.blob_bytes += bytes.len() as u64;
                staged.blobs.insert(hash.to_owned(), bytes.to_vec());
                return Ok(bytes.len() as u64);
            }
        }
        self.install_blob(hash, bytes)
    }

    /// Install a blob's file unless there already; the bytes it added.
    fn install_blob(&self, hash: &str, bytes: &[u8]) -> Result<u64, Error> {
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
        if let Some(b) = self.staged().blobs.get(hash) {
            return Ok(b.clone());
        }
        let mut out = Vec::new();
        self.dir()
            .open(blob_path(hash))
            .map_err(io_err)?
            .into_std()
            .read_to_end(&mut out)
            .map_err(io_err)?;
        Ok(out)
    }

    /// Write the manifest of `id` (`full`: every path, else a delta) as its file; its size.
    fn write_manifest(
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

    /// The manifest of `id` for this operation's journal record (a large one is installed as
    /// its file at once); its size.
    pub(crate) fn stage_manifest(
        &self,
        id: &str,
        full: bool,
        entries: BTreeMap<String, Option<Node>>,
    ) -> Result<u64, Error> {
        let bytes =
            serde_json::to_vec(&ManifestFile { entries }).map_err(|e| Error::Store(e.into()))?;
        let len = bytes.len() as u64;
        if bytes.len() > INLINE_MAX {
            install(&self.store.manifests, &manifest_name(id, full), &bytes)?;
        } else {
            self.staged()
                .manifests
                .insert(manifest_name(id, full), bytes);
        }
        Ok(len)
    }

    fn read_manifest(&self, entry: &Entry) -> Result<BTreeMap<String, Option<Node>>, Error> {
        let staged = |full| {
            self.staged()
                .manifests
                .get(&manifest_name(&entry.id, full))
                .cloned()
        };
        let bytes = match staged(entry.full) {
            Some(b) => b,
            None => {
                let read = |full| self.store.manifests.read(manifest_name(&entry.id, full));
                match read(entry.full) {
                    // A store written before whole manifests had a name of their own.
                    Err(e) if entry.full && e.kind() == io::ErrorKind::NotFound => read(false),
                    r => r,
                }
                .map_err(io_err)?
            }
        };
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
    fn prune(&self, index: &mut Index, max: usize, max_bytes: u64) -> Result<Garbage, Error> {
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
            let oldest = index.checkpoints.pop_back().expect("more than one");
            index.drops_since_sweep += 1;
            let oldest_nodes = if oldest.full {
                Some(self.read_manifest(&oldest)?)
            } else {
                None
            };
            let mut with_oldest = index.clone();
            with_oldest.checkpoints.push_back(oldest.clone());
            let next = index.checkpoints.back().expect("more than one").clone();
            // The next oldest becomes the base of the chain: written whole, under a name of
            // its own (its delta stays until the index names the whole one).
            let next_nodes: BTreeMap<String, Option<Node>> = if next.full {
                self.read_manifest(&next)?
            } else {
                let whole = self.manifest(&with_oldest, &next.id)?;
                let whole: BTreeMap<_, _> = whole.into_iter().map(|(p, n)| (p, Some(n))).collect();
                let bytes = self.write_manifest(&next.id, true, whole.clone())?;
                let e = index.checkpoints.back_mut().expect("present");
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
                .filter(|h| !kept.contains(h) && !index.after_hashes.contains(h))
                .cloned()
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let rest = index.checkpoints.len() - 1;
            for e in index.checkpoints.range(..rest) {
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
    fn remove(&self, garbage: Garbage) {
        for f in garbage.files {
            let _ = self.dir().remove_file(f);
        }
    }

    /// Remove the blobs no kept manifest refers to, the manifests the index does not name
    /// and the temporaries a kill left; recount the blob bytes. Run when the byte bound is
    /// exceeded and once every so many dropped checkpoints (what no dropped checkpoint
    /// named, such as a blob stored after a call and changed again before the next
    /// checkpoint, is found only here).
    fn sweep(&self, index: &mut Index) -> Result<(), Error> {
        let mut live: HashSet<String> = index.after_hashes.iter().cloned().collect();
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
