//! Checkpoints of a confined workspace: every change an agent makes, by a file tool or by a
//! command it runs, recorded before it happens, listed, diffed and undone.
//!
//! # What a checkpoint holds
//!
//! The state of the workspace as the walking tools see it: regular files (content and
//! permission bits), symlinks (as links: their target text, never followed) and directories
//! (empty ones included). Left out, never read nor written: every `.git` (git's own history),
//! the project's temporaries, what the embedder excludes ([`Exclude`]: the denied and the
//! protected paths) and, unless [`Config::include_ignored`], what `.gitignore` files ignore
//! (`node_modules/`, `target/`). A file over [`MAX_FILE_BYTES`] is not stored: it is listed
//! in that checkpoint's `skipped`.
//!
//! # The store
//!
//! A directory of its own outside the workspace ([`default_dir`]: under the user's state
//! directory, keyed by the root's path and identity; [`check_dir`] refuses one beneath the
//! root). Content is stored once, named by its SHA-256 (`blobs/ab/cdef…`); each checkpoint
//! has a manifest (path → kind, mode, size, times, inode, hash or link target), whole for the
//! oldest kept and otherwise only what differs from the one before; `index.json` lists the
//! checkpoints newest first. That is the store's regular form, and every file of it is
//! written whole under a temporary name beneath the store and renamed over its final name: a
//! kill leaves the old file or the new one, never a torn one.
//!
//! A checkpoint does not write those files. It appends one record to `journal` with one
//! `write` (the store's lock held): the index entry, the manifest delta and the content it
//! read (blobs and manifests over 64 KiB are installed as files first, and named by the
//! record). A call's end appends a smaller one (what the call changed, the content it left).
//! Each record is length-prefixed and carries a CRC-32 of its bytes; a reader stops at the
//! first record that is short or fails its checksum, so what a kill (or a full disk) cut
//! short is discarded, not an error, and the next fold empties the journal behind it. The
//! journal is folded into the regular form (the files written, the index rewritten once, the
//! journal emptied) when it passes 4 MiB (less under a small byte bound) or holds eight times
//! [`Config::max_checkpoints`] checkpoints, as soon as the store passes
//! [`Config::max_bytes`], before a list, a diff or a restore, when a server
//! finds another server's records in it, and at a server's clean end (when [`Checkpoints`] is
//! dropped). A record the index already holds (a kill between the index's rename and the
//! journal's truncation) is recognised by its sequence number and skipped.
//!
//! Nothing is `fsync`ed (a checkpoint is taken before every changing call and must cost
//! little beside it): a killed server loses nothing, since what it wrote, the journal
//! included, stands in the page cache; a power loss or a kernel crash may lose the newest
//! checkpoints. A lock file serializes the servers of one root, the journal included (one
//! journal per store, appended and folded only under the lock); a server reads the index
//! again only when `index.json` is no longer the file it last read or wrote, or the journal
//! is not the length it left (another server's checkpoint in between). Bounds: at most
//! [`Config::max_checkpoints`] and [`Config::max_bytes`] (the store's blobs and manifests),
//! the oldest dropped first (the newest is always kept), applied when the journal is folded
//! (so a list never shows more than the bounds). The checkpoints past the count bound are
//! dropped at once: the new oldest written whole, what the journal held for the dropped ones
//! never written, and a blob no kept checkpoint names removed (found from the dropped
//! manifests and the hashes each kept checkpoint's index entry lists, without reading every
//! manifest). Content a call left that no checkpoint names yet is listed in the index
//! until the next checkpoint, which names it without reading it again, so no fold removes
//! it meanwhile. A whole sweep (every manifest read, every blob listed) runs only when the
//! byte bound is exceeded and once every eight times [`Config::max_checkpoints`] dropped
//! checkpoints (a large blob stored after a call and replaced before the next checkpoint is
//! named by none and found only then).
//!
//! # Incremental
//!
//! A file tool's checkpoint looks only at the paths the call will change
//! ([`Scope::Paths`]); a run's ([`Scope::All`]) walks the tree with `lstat` and reads only the
//! files whose size, times, inode or mode differ from what was known. After each call
//! [`Checkpoints::after`] looks again at what it may have changed, so the next file tool's
//! checkpoint starts from the truth; whenever that truth is not known (the first checkpoint
//! of a server, another server's checkpoint in between, a restore, a job running) the next
//! checkpoint walks the whole tree.
//!
//! # Restore
//!
//! [`Checkpoints::restore`] first takes a checkpoint of the workspace as it stands (so a
//! restore can be undone), then, beneath the root's descriptor with every symlink refused on
//! the way, removes what was created since (deepest first), recreates directories, installs
//! each file through `confine-atomicwrite` and sets its mode, and recreates symlinks as links.
//! Before each change it looks at the path again: one that no longer is what the walk just
//! saw (another process changed it) is left alone and reported in `skipped` with
//! `changed during restore`. While a job runs (the caller says so) nothing is restored: every
//! path is reported skipped with `a job is running`.

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use confine_rootid::WorkspaceRoot;
use serde::{Deserialize, Serialize};

mod apply;
mod journal;
mod scan;
mod store;

pub use apply::{Restored, Skip};

/// The largest file a checkpoint stores (64 MiB); a larger one is listed in `skipped`.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// The most checkpoints kept by default.
pub const DEFAULT_MAX_CHECKPOINTS: usize = 100;
/// The most bytes the store keeps by default (1 GiB).
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// The largest text file a diff shows line by line (64 KiB, on each side).
pub const MAX_DIFF_TEXT: u64 = 64 << 10;

/// What a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A regular file.
    #[serde(rename = "f")]
    File,
    /// A symbolic link.
    #[serde(rename = "l")]
    Symlink,
    /// A directory.
    #[serde(rename = "d")]
    Dir,
}

/// One path of a manifest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// What it is.
    #[serde(rename = "k")]
    pub kind: Kind,
    /// Its permission bits (`0o7777`).
    #[serde(rename = "m")]
    pub mode: u32,
    /// A file's or link's size in bytes.
    #[serde(rename = "s")]
    pub size: u64,
    /// Modification time (seconds, nanoseconds).
    #[serde(rename = "t")]
    pub mtime: (i64, i64),
    /// Status change time (seconds, nanoseconds).
    #[serde(rename = "c")]
    pub ctime: (i64, i64),
    /// Inode number.
    #[serde(rename = "i")]
    pub ino: u64,
    /// A file's content hash; `None` for a file not stored (too large).
    #[serde(rename = "h", default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// A symlink's target.
    #[serde(rename = "l", default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl Node {
    /// The same object, unchanged as far as `lstat` tells.
    pub fn same_stat(&self, other: &Node) -> bool {
        self.kind == other.kind
            && self.size == other.size
            && self.mtime == other.mtime
            && self.ctime == other.ctime
            && self.ino == other.ino
            && self.mode == other.mode
    }

    /// The same content and mode (what a restore brings back).
    pub fn same_content(&self, other: &Node) -> bool {
        self.kind == other.kind
            && self.mode == other.mode
            && match self.kind {
                Kind::File => self.hash.is_some() && self.hash == other.hash,
                Kind::Symlink => self.target == other.target,
                Kind::Dir => true,
            }
    }
}

/// Every path of a checkpoint, by its path relative to the root.
pub type Manifest = BTreeMap<String, Node>;

/// The call a checkpoint was taken before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallInfo {
    /// The tool's name.
    pub name: String,
    /// One line: the path or paths, or a command's first 80 characters.
    pub summary: String,
}

/// Paths the embedder keeps out of every checkpoint (denied and protected paths).
pub trait Exclude: Send + Sync {
    /// Whether `path` (relative to the root, `/`-separated) is never read nor written.
    fn excluded(&self, path: &str) -> bool;
}

/// Nothing excluded (beyond `.git` and the temporaries, always left out).
#[derive(Clone, Copy, Debug, Default)]
pub struct ExcludeNothing;

impl Exclude for ExcludeNothing {
    fn excluded(&self, _path: &str) -> bool {
        false
    }
}

/// Where and how much the store keeps.
#[derive(Clone, Debug)]
pub struct Config {
    /// The store's directory (made, mode 0700, if missing).
    pub dir: PathBuf,
    /// The most checkpoints kept.
    pub max_checkpoints: usize,
    /// The most bytes the store keeps.
    pub max_bytes: u64,
    /// Record what `.gitignore` files ignore too.
    pub include_ignored: bool,
}

impl Config {
    /// The default bounds over `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_checkpoints: DEFAULT_MAX_CHECKPOINTS,
            max_bytes: DEFAULT_MAX_BYTES,
            include_ignored: false,
        }
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No checkpoint has that id (or it was dropped by the bounds).
    #[error("CHECKPOINT_NOT_FOUND")]
    NotFound,
    /// The store directory lies beneath the workspace root.
    #[error("the checkpoint directory lies inside the workspace")]
    InsideRoot,
    /// The store could not be read or written.
    #[error("checkpoint store: {0}")]
    Store(io::Error),
    /// The workspace could not be read or written.
    #[error("workspace: {0}")]
    Io(io::Error),
}

/// What `checkpoint_list` shows of one checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Checkpoint {
    /// Opaque id.
    pub id: String,
    /// When it was taken, RFC 3339 UTC.
    pub at: String,
    /// The call it was taken before.
    pub call: CallInfo,
    /// The files (not directories) that call changed.
    pub changed: usize,
    /// The paths it could not store.
    pub skipped: Vec<String>,
}

/// What differs between a checkpoint and the workspace now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Diff {
    /// Paths there now and not in the checkpoint.
    pub added: Vec<String>,
    /// Paths in both that differ (content, kind, link target or mode).
    pub modified: Vec<String>,
    /// Paths in the checkpoint and not there now.
    pub deleted: Vec<String>,
    /// Unified diffs (checkpoint to now) of the text files of at most 64 KiB among them.
    pub diffs: Vec<TextDiff>,
}

/// One text file's unified diff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TextDiff {
    /// The path.
    pub path: String,
    /// The unified diff, checkpoint to now.
    pub diff: String,
}

/// What the walk of a checkpoint looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// These paths (and what lies beneath each).
    Paths(Vec<String>),
    /// The whole tree.
    All,
}

/// The default store of a root: `$XDG_STATE_HOME/confine/checkpoints/<key>` (else
/// `$HOME/.local/state/…`), the key a hash of the root's canonical path and identity. `None`
/// without a usable state or home directory.
pub fn default_dir(root: &WorkspaceRoot) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            // A home that does not exist is not made (nobody's `/nonexistent`): no store.
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute() && p.is_dir())
                .map(|h| h.join(".local/state"))
        })?;
    let id = root.identity();
    let key = store::hash_of(
        format!("{}\0{}\0{}", root.canonical().display(), id.dev, id.ino).as_bytes(),
    );
    Some(base.join("confine/checkpoints").join(&key[..24]))
}

/// Refuse a store directory that lies beneath the root (or is it).
pub fn check_dir(root: &WorkspaceRoot, dir: &Path) -> Result<(), Error> {
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map_err(Error::Store)?.join(dir)
    };
    // The nearest existing ancestor, canonicalized, then what is yet to be made.
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    let canonical = loop {
        match existing.canonicalize() {
            Ok(c) => break c,
            Err(_) => match (existing.parent(), existing.file_name()) {
                (Some(p), Some(n)) => {
                    rest.push(n.to_owned());
                    existing = p;
                }
                _ => return Err(Error::Store(io::Error::other("no such directory"))),
            },
        }
    };
    let full: PathBuf = rest.iter().rev().fold(canonical, |p, n| p.join(n));
    if full.starts_with(root.canonical()) {
        return Err(Error::InsideRoot);
    }
    Ok(())
}

/// What this server knows of the workspace between calls.
#[derive(Default)]
struct State {
    /// The newest checkpoint's id and whole manifest, as this server wrote it.
    newest: Option<(String, Arc<Manifest>)>,
    /// The workspace as it stood after the last call, when known (shared with `newest`
    /// until a call changed something).
    known: Option<Arc<Manifest>>,
}

/// The checkpoints of one workspace root.
pub struct Checkpoints {
    root: Arc<WorkspaceRoot>,
    store: store::Store,
    config: Config,
    exclude: Arc<dyn Exclude>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints").finish_non_exhaustive()
    }
}

fn now_id_and_time() -> (String, String) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let id = format!(
        "{:x}{:05x}{:04x}",
        now.as_nanos(),
        std::process::id(),
        n & 0xffff
    );
    let at =
        chrono::DateTime::<chrono::Utc>::from_timestamp(now.as_secs() as i64, now.subsec_nanos())
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default();
    (id, at)
}

/// What differs from `prev` to `now`: each path added or changed with its node, each removed
/// path as `None`. One pass over both (each sorted by path).
fn delta(prev: &Manifest, now: &Manifest) -> BTreeMap<String, Option<Node>> {
    let mut out = Vec::new();
    let mut a = prev.iter().peekable();
    let mut b = now.iter().peekable();
    loop {
        match (a.peek(), b.peek()) {
            (Some((pa, na)), Some((pb, nb))) => match pa.cmp(pb) {
                std::cmp::Ordering::Less => {
                    out.push(((*pa).clone(), None));
                    a.next();
                }
                std::cmp::Ordering::Greater => {
                    out.push(((*pb).clone(), Some((*nb).clone())));
                    b.next();
                }
                std::cmp::Ordering::Equal => {
                    if na != nb {
                        out.push(((*pb).clone(), Some((*nb).clone())));
                    }
                    a.next();
                    b.next();
                }
            },
            (Some((pa, _)), None) => {
                out.push(((*pa).clone(), None));
                a.next();
            }
            (None, Some((pb, nb))) => {
                out.push(((*pb).clone(), Some((*nb).clone())));
                b.next();
            }
            (None, None) => break,
        }
    }
    // In order: built in one pass.
    out.into_iter().collect()
}

/// Paths of `a` and `b` that differ, files only, counted.
fn files_changed(a: &Manifest, b: &Manifest) -> usize {
    // One pass over both (each sorted by path).
    let mut n = 0;
    let mut xs = a.iter().peekable();
    let mut ys = b.iter().peekable();
    loop {
        match (xs.peek(), ys.peek()) {
            (Some((pa, x)), Some((pb, y))) => match pa.cmp(pb) {
                std::cmp::Ordering::Less => {
                    n += usize::from(x.kind == Kind::File);
                    xs.next();
                }
                std::cmp::Ordering::Greater => {
                    n += usize::from(y.kind == Kind::File);
                    ys.next();
                }
                std::cmp::Ordering::Equal => {
                    if !x.same_content(y) && (x.kind == Kind::File || y.kind == Kind::File) {
                        n += 1;
                    }
                    xs.next();
                    ys.next();
                }
            },
            (Some((_, x)), None) => {
                n += usize::from(x.kind == Kind::File);
                xs.next();
            }
            (None, Some((_, y))) => {
                n += usize::from(y.kind == Kind::File);
                ys.next();
            }
            (None, None) => return n,
        }
    }
}

/// Whether `path` is `scope` or lies beneath it.
fn within(path: &str, scope: &str) -> bool {
    scope.is_empty()
        || path == scope
        || (path.len() > scope.len()
            && path.starts_with(scope)
            && path.as_bytes()[scope.len()] == b'/')
}

impl Checkpoints {
    /// Open the store of `config` for `root`; `exclude` names the paths never read nor
    /// written. Refuses a store beneath the root.
    pub fn open(
        root: Arc<WorkspaceRoot>,
        config: Config,
        exclude: Arc<dyn Exclude>,
    ) -> Result<Self, Error> {
        check_dir(&root, &config.dir)?;
        let store = store::Store::open(&config.dir, config.max_checkpoints, config.max_bytes)?;
        Ok(Self {
            root,
            store,
            config,
            exclude,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn scan<'a>(
        &'a self,
        known: &'a Manifest,
        store: Option<&'a store::Locked<'a>>,
    ) -> scan::Scan<'a> {
        scan::Scan {
            root: self.root.dir().as_fd(),
            exclude: &*self.exclude,
            include_ignored: self.config.include_ignored,
            known,
            store,
        }
    }

    /// Take a checkpoint before `call`, looking at `scope`; its id.
    pub fn take(&self, call: CallInfo, scope: &Scope) -> Result<String, Error> {
        let locked = self.store.lock()?;
        let mut index = locked.index()?;
        let mut state = self.state();
        let (taken, op) = self.take_locked(&locked, &mut index, &mut state, call, scope)?;
        locked.append(index, op)?;
        Ok(taken)
    }

    fn take_locked(
        &self,
        locked: &store::Locked<'_>,
        index: &mut store::Index,
        state: &mut State,
        call: CallInfo,
        scope: &Scope,
    ) -> Result<(String, journal::Op), Error> {
        let newest_id = index.checkpoints.front().map(|e| e.id.clone());
        let ours = matches!((&state.newest, &newest_id), (Some((a, _)), Some(b)) if a == b);
        // Taken, not copied (a whole tree's manifest is large): it is replaced below, and
        // should this checkpoint fail the next one reads the newest from the store.
        let newest = state.newest.take();
        let prev: Arc<Manifest> = match (newest, &newest_id) {
            (Some((_, m)), Some(_)) if ours => m,
            (_, Some(id)) => {
                // Another server's checkpoint (or none of this one's known): read from the
                // store's files, the journal folded first.
                locked.keep(std::mem::take(index));
                *index = locked.settled()?;
                Arc::new(locked.manifest(index, id)?)
            }
            _ => Arc::new(Manifest::new()),
        };
        let known = if ours { state.known.take() } else { None };
        let (nodes, skipped, added) = match (scope, known) {
            (Scope::Paths(paths), Some(base)) if !self.through_symlink(paths) => {
                let mut base = Arc::unwrap_or_clone(base);
                let mut skipped = Vec::new();
                let mut added = 0;
                // Looked at against what is known (what the last call left, its content
                // stored by `after`): a file unchanged since is not read again.
                let mut founds = Vec::with_capacity(paths.len());
                for p in paths {
                    founds.push(self.scan(&base, Some(locked)).at(p)?);
                }
                for p in paths {
                    base.retain(|k, _| !within(k, p));
                }
                for found in founds {
                    base.extend(found.nodes);
                    skipped.extend(found.skipped);
                    added += found.added_bytes;
                }
                // Files too large to store stay listed in each checkpoint that holds them.
                for (p, n) in &base {
                    if n.kind == Kind::File && n.hash.is_none() && !skipped.contains(p) {
                        skipped.push(p.clone());
                    }
                }
                (base, skipped, added)
            }
            (_, known) => {
                let basis = known.unwrap_or_else(|| prev.clone());
                let found = self.scan(&basis, Some(locked)).all()?;
                drop(basis);
                (found.nodes, found.skipped, found.added_bytes)
            }
        };
        let mut skipped = skipped;
        skipped.sort();
        skipped.dedup();
        let (id, at) = now_id_and_time();
        let (full, parent, entries) = match &newest_id {
            Some(parent) => (false, Some(parent.clone()), delta(&prev, &nodes)),
            None => (
                true,
                None,
                nodes
                    .iter()
                    .map(|(p, n)| (p.clone(), Some(n.clone())))
                    .collect(),
            ),
        };
        let hashes = (!full).then(|| {
            let hs: Vec<String> = store::hashes_of(entries.values()).cloned().collect();
            hs
        });
        let hashes = hashes.filter(|hs| hs.len() <= store::MAX_ENTRY_HASHES);
        let manifest_bytes = locked.stage_manifest(&id, full, entries)?;
        let op = journal::Op::Push {
            prev: index
                .checkpoints
                .front()
                .map(|e| (e.id.clone(), files_changed(&prev, &nodes))),
            added,
            entry: store::Entry {
                id: id.clone(),
                at,
                call,
                changed: 0,
                skipped,
                full,
                parent,
                manifest_bytes,
                hashes,
            },
        };
        let nodes = Arc::new(nodes);
        state.known = Some(nodes.clone());
        state.newest = Some((id.clone(), nodes));
        Ok((id, op))
    }

    /// Whether a path's parent lies through a symlink (or is not there to say): its call may
    /// change what another path names, so only a whole walk finds it.
    fn through_symlink(&self, paths: &[String]) -> bool {
        paths.iter().any(|p| {
            let (parent, _) = p.rsplit_once('/').unwrap_or(("", p));
            if parent.is_empty() {
                return false;
            }
            let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY;
            match confine_beneath::open_beneath(
                self.root.dir(),
                parent,
                flags,
                confine_beneath::Symlinks::Refuse,
            ) {
                Ok(_) => false,
                Err(e) => !matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)),
            }
        })
    }

    /// After a call: look again at what it may have changed (`scope`), so the next
    /// checkpoint starts from the truth and the newest checkpoint's `changed` counts what the
    /// call changed. `None` forgets what is known (the next checkpoint walks the whole tree).
    pub fn after(&self, scope: Option<&Scope>) -> Result<(), Error> {
        let Some(scope) = scope else {
            self.state().known = None;
            return Ok(());
        };
        let locked = self.store.lock()?;
        let index = locked.index()?;
        let mut state = self.state();
        let newest_id = index.checkpoints.front().map(|e| e.id.clone());
        let ours = matches!((&state.newest, &newest_id), (Some((a, _)), Some(b)) if a == b);
        let (Some(known), true) = (state.known.take(), ours) else {
            locked.keep(index);
            return Ok(());
        };
        let mut added = 0;
        let newest = &state.newest.as_ref().expect("ours").1;
        // The content the call left that no checkpoint names yet: kept for the next one.
        let mut hashes = Vec::new();
        let mut seen: std::collections::HashSet<String> =
            index.after_hashes.iter().cloned().collect();
        let mut fresh = |nodes: &Manifest| {
            for (p, n) in nodes {
                if let Some(h) = &n.hash
                    && newest.get(p).and_then(|m| m.hash.as_ref()) != Some(h)
                    && seen.insert(h.clone())
                {
                    hashes.push(h.clone());
                }
            }
        };
        let known = match scope {
            Scope::Paths(paths) if !self.through_symlink(paths) => {
                let mut known = Arc::unwrap_or_clone(known);
                for p in paths {
                    known.retain(|k, _| !within(k, p));
                }
                for p in paths {
                    let found = self.scan(&known, Some(&locked)).at(p)?;
                    added += found.added_bytes;
                    fresh(&found.nodes);
                    known.extend(found.nodes);
                }
                known
            }
            _ => {
                // A whole walk replaces what is known: compared with, not copied.
                let found = self.scan(&known, Some(&locked)).all()?;
                drop(known);
                added += found.added_bytes;
                fresh(&found.nodes);
                found.nodes
            }
        };
        let changed = files_changed(newest, &known);
        if let Some(e) = index.checkpoints.front()
            && (added > 0 || e.changed != changed || !hashes.is_empty())
        {
            let op = journal::Op::After {
                id: e.id.clone(),
                changed,
                added,
                hashes,
            };
            locked.append(index, op)?;
        } else {
            locked.keep(index);
        }
        state.known = Some(Arc::new(known));
        Ok(())
    }

    /// The checkpoints, newest first.
    pub fn list(&self) -> Result<Vec<Checkpoint>, Error> {
        let locked = self.store.lock()?;
        let index = locked.settled()?;
        let list = index
            .checkpoints
            .iter()
            .map(|e| Checkpoint {
                id: e.id.clone(),
                at: e.at.clone(),
                call: e.call.clone(),
                changed: e.changed,
                skipped: e.skipped.clone(),
            })
            .collect();
        locked.keep(index);
        Ok(list)
    }

    /// What differs between the checkpoint `id` and the workspace now (beneath `path` when
    /// given).
    pub fn diff(&self, id: &str, path: Option<&str>) -> Result<Diff, Error> {
        let locked = self.store.lock()?;
        let index = locked.settled()?;
        let then = locked.manifest(&index, id)?;
        let basis = self.basis(&locked, &index)?;
        locked.keep(index);
        let now = self.scan(&basis, None).all()?.nodes;
        let scope = path.unwrap_or("");
        let mut diff = Diff::default();
        let mut text = Vec::new();
        for (p, n) in &now {
            if !within(p, scope) {
                continue;
            }
            match then.get(p) {
                None => {
                    diff.added.push(p.clone());
                    text.push((p, None, Some(n)));
                }
                Some(t) if !t.same_content(n) => {
                    diff.modified.push(p.clone());
                    text.push((p, Some(t), Some(n)));
                }
                Some(_) => {}
            }
        }
        for (p, t) in &then {
            if within(p, scope) && !now.contains_key(p) {
                diff.deleted.push(p.clone());
                text.push((p, Some(t), None));
            }
        }
        for (p, t, n) in text {
            let small_file = |x: Option<&Node>| {
                x.is_none_or(|x| x.kind == Kind::File && x.size <= MAX_DIFF_TEXT)
            };
            if !small_file(t) || !small_file(n) {
                continue;
            }
            let old = match t {
                Some(t) => match &t.hash {
                    Some(h) => locked.blob(h)?,
                    None => continue,
                },
                None => Vec::new(),
            };
            let new = match n {
                Some(_) => match scan::read_now(self.root.dir().as_fd(), p, MAX_DIFF_TEXT) {
                    Some(b) => b,
                    None => continue,
                },
                None => Vec::new(),
            };
            let (Ok(old), Ok(new)) = (String::from_utf8(old), String::from_utf8(new)) else {
                continue;
            };
            if old == new {
                continue;
            }
            let d = similar::TextDiff::from_lines(&old, &new)
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{p}"), &format!("b/{p}"))
                .to_string();
            diff.diffs.push(TextDiff {
                path: p.clone(),
                diff: d,
            });
        }
        diff.added.sort();
        diff.modified.sort();
        diff.deleted.sort();
        Ok(diff)
    }

    /// The manifest a walk compares with: the newest checkpoint's.
    fn basis(
        &self,
        locked: &store::Locked<'_>,
        index: &store::Index,
    ) -> Result<Arc<Manifest>, Error> {
        let state = self.state();
        if let (Some((id, m)), Some(e)) = (&state.newest, index.checkpoints.front())
            && *id == e.id
        {
            return Ok(state.known.clone().unwrap_or_else(|| m.clone()));
        }
        drop(state);
        match index.checkpoints.front() {
            Some(e) => Ok(Arc::new(locked.manifest(index, &e.id)?)),
            None => Ok(Arc::new(Manifest::new())),
        }
    }

    /// Bring the workspace (or `paths`, each with what lies beneath it) back to the
    /// checkpoint `id`. Unless `dry_run`, the workspace as it stands is checkpointed first.
    /// With `job_running`, nothing changes and every path is reported skipped.
    pub fn restore(
        &self,
        id: &str,
        paths: Option<&[String]>,
        dry_run: bool,
        job_running: bool,
    ) -> Result<Restored, Error> {
        let locked = self.store.lock()?;
        let mut index = locked.settled()?;
        let then = locked.manifest(&index, id)?;
        let now = if dry_run {
            let basis = self.basis(&locked, &index)?;
            locked.keep(std::mem::take(&mut index));
            Arc::new(self.scan(&basis, None).all()?.nodes)
        } else {
            let mut state = self.state();
            let call = CallInfo {
                name: "checkpoint_restore".into(),
                summary: format!("restore {id}"),
            };
            let (_, op) = self.take_locked(&locked, &mut index, &mut state, call, &Scope::All)?;
            // Taken out of what is known: what the restore changes is looked at again by the
            // next checkpoint.
            let now = state.known.take().unwrap_or_default();
            // Recorded before anything changes, so a kill mid-restore leaves it to undo with.
            locked.append(index, op)?;
            now
        };
        let selected = |p: &str| paths.is_none_or(|ps| ps.iter().any(|s| within(p, s)));
        let plan = apply::Plan::new(&then, &now, &selected);
        if dry_run {
            return Ok(if job_running {
                plan.all_skipped("a job is running")
            } else {
                plan.dry()
            });
        }
        let done = if job_running {
            plan.all_skipped("a job is running")
        } else {
            plan.apply(self.root.dir(), &locked)
        };
        // The bounds apply once the content restored from was read.
        locked.fold_pending()?;
        Ok(done)
    }
}

impl Drop for Checkpoints {
    /// A clean end: the journal folded into the store's files.
    fn drop(&mut self) {
        let folded = self.store.lock().and_then(|l| l.fold_pending());
        if let Err(e) = folded {
            tracing::warn!(error = %e, "checkpoint journal not folded");
        }
    }
}
