//! The walk that `list_directory`, `find_files` and `grep` share: a directory opened beneath
//! the root, entries read from its descriptor, children opened with `O_NOFOLLOW` relative to
//! it (the descriptor layer's [`confine_beneath::WalkDir`]), never through a symlink.
//!
//! Rules every walking tool keeps:
//! - a name the path grammar would refuse (not UTF-8, a control character, …) is left out: no
//!   tool could be given it back;
//! - the project's own temporaries (`.<name>.pify-tmp-…`, `.pify-node-…`, `.pify-run-…`) are
//!   left out, and `.git` is never entered;
//! - `.gitignore` files are obeyed (the root's, those of the directories above the start, and
//!   nested ones), through the `ignore` crate's matcher, unless the caller includes ignored
//!   entries;
//! - entries are visited depth first, each directory's entries sorted by name (byte order), so
//!   the results come out sorted component by component (as `rg --sort path` sorts);
//! - after a directory's entries (and, for `grep`, its files) have been read, the directory
//!   must still lie beneath the root, checked by climbing `..` on descriptors; what a
//!   directory moved (or exchanged) out of the root gave is dropped, its subdirectories' too;
//! - cancellation is checked every few entries ([`CANCEL_EVERY`]), also while a directory's
//!   entries are read;
//! - what is left out because no tool could be given its path back (a name the grammar
//!   refuses, a path over 4,096 bytes) is counted in `skipped` (a directory once: its
//!   contents are not read), and so is a directory listed that could not be entered (no
//!   longer the directory listed when it was opened): a walk never answers fewer paths
//!   without saying so; the temporaries, `.git` and ignored entries are not counted;
//! - a denied entry ([`crate::deny`]), judged by its real path beneath the root, is left out
//!   and counted in `denied` (a directory once: it is not entered);
//! - memory is bounded whatever a directory holds: a directory's entries are read in
//!   *windows* ([`read_window`]): the smallest names (after the last window's) that fit in the
//!   window's byte size, kept in a bounded heap while the descriptor is read once more from its
//!   start. A directory that fits (nearly every one) is read once; a larger one is read once
//!   per window, so time grows with its size squared over the window while memory stays put.
//!   The directories open on the walk's stack share [`WALK_ENTRIES_BUDGET`]: each new one gets
//!   half of what is left (never less than [`MIN_WINDOW_BYTES`]). Files are handed to the tool
//!   [`FILES_PER_BATCH`] at a time.
//!
//! # Subtrees walked ahead
//!
//! The walk itself goes in order on the calling thread; the rayon pool walks subtrees ahead of
//! it, so that a tree is read on every core, as ripgrep reads it. When the walk stands on an
//! entry of a directory, it offers the pool the subdirectories after it in that window
//! (opened there, as the walk would open them, `O_NOFOLLOW` and checked against the listing),
//! while fewer than [`MAX_AHEAD`] are out. A walker ahead walks its subtree by exactly the
//! rules above, from the `.gitignore` matchers in force where it stands, and keeps what it
//! found. When the walk reaches that subdirectory it takes the subtree back: not yet begun,
//! it walks it itself; walked, it adds the subtree's items and counts where they stand in the
//! order, as if it had walked it, unless the subtree would not fit there.
//!
//! The answer is the sequential walk's, item for item, count for count, error for error:
//! - a walker ahead gives up (and the walk walks that subtree itself, in order, offering
//!   nothing beneath it) when the subtree produced more than the walk's limit, failed, was
//!   cancelled, or its items passed [`AHEAD_ITEM_BYTES`] or what the tool lets a walker
//!   ahead hold ([`Visitor::full`]);
//! - a walked subtree whose items would pass the limit where it stands, or whose tally the
//!   tool cannot add there ([`Visitor::absorb`]: `grep`'s 4 MiB of matches), is walked again
//!   by the walk, in order, so the result ends exactly where the sequential walk ends it;
//! - an error in a subtree walked ahead is never the answer by itself: the walk meets it (or
//!   its limit first) when it walks that subtree again;
//! - a directory is kept only if it lies beneath the root once its entries were read, by
//!   whichever walker read it (the same climb as above).
//!
//! Memory stays bounded whatever the tree: at most [`MAX_AHEAD`] subtrees are out at once
//! (each an open descriptor until walked), each walker ahead has [`AHEAD_ENTRIES_BUDGET`] of
//! entry windows (together half of [`WALK_ENTRIES_BUDGET`], the walk's own stack the other
//! half) and holds at most [`AHEAD_ITEM_BYTES`] of items and at most the limit's number of
//! them; what a subtree walked ahead holds is given to the walk or dropped when the walk
//! reaches it. When the walk ends, the walkers still ahead are cancelled, and the walk
//! returns once they stopped. With one thread in the pool, or `WalkSpec::parallel` false,
//! nothing goes ahead.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::ffi::OsStr;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use confine_beneath::{Entry, EntryKind, FileId, FsErrorKind, Symlinks, WalkDir};
use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::OFlags;
use tokio_util::sync::CancellationToken;

use crate::deny::DeniedPaths;
use crate::error::{CallError, Cancelled, ErrorKind, failed};
use crate::fsmap::FsTokens;
use crate::temp_names::is_temporary;

/// The largest `.gitignore` read; a larger one is used up to this size.
const MAX_GITIGNORE_BYTES: u64 = 1 << 20;

/// The bytes of entries all the directories open on one walk's stack may hold together.
pub(crate) const WALK_ENTRIES_BUDGET: usize = 16 << 20;
/// The smallest window a directory is read in: small, since the deepest path (4,096 bytes)
/// may open some 2,000 directories at once, 8 MiB of windows at most beyond the shared budget.
pub(crate) const MIN_WINDOW_BYTES: usize = 4 << 10;
/// The most files of one directory handed to the tool at once.
pub(crate) const FILES_PER_BATCH: usize = 1024;

/// The longest path a result may hold (the grammar's limit: a longer one could not be given
/// back to any tool).
const MAX_PATH_BYTES: usize = confine_pathgrammar::MAX_PATH_BYTES;

/// Whether a count is zero (a record leaves a zero `denied` out).
pub(crate) fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The entry's name when the grammar accepts it as one segment, as it stands.
pub(crate) fn plain_name(name: &OsStr) -> Option<&str> {
    let s = name.to_str()?;
    confine_pathgrammar::is_normal(s).then_some(s)
}

/// `prefix/name`, or `name` at the root.
pub(crate) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        let mut s = String::with_capacity(prefix.len() + 1 + name.len());
        s.push_str(prefix);
        s.push('/');
        s.push_str(name);
        s
    }
}

/// `buf` set to the parts that are not empty, joined by `/` (as [`join`] joins two): the
/// walk's paths built in one buffer instead of a string each.
pub(crate) fn join_into<'b>(buf: &'b mut String, parts: &[&str]) -> &'b str {
    buf.clear();
    for part in parts.iter().filter(|p| !p.is_empty()) {
        if !buf.is_empty() {
            buf.push('/');
        }
        buf.push_str(part);
    }
    buf
}

/// Open the directory a walking tool starts from: the root when `path` is absent, else `path`
/// beneath it, resolved as `read_file` resolves (a relative symlink staying inside is
/// followed). Tokens: `PATH_OUTSIDE_WORKSPACE`, `FILE_NOT_FOUND`, `NOT_A_DIRECTORY`.
pub(crate) fn open_start(
    root: &WorkspaceRoot,
    path: Option<&RelPath>,
    other: ErrorKind,
) -> Result<WalkDir, CallError> {
    let rel = Path::new(path.map_or("", RelPath::as_str));
    match WalkDir::open_beneath(root.dir(), rel, Symlinks::FollowInside) {
        Ok(dir) => Ok(dir),
        Err(e) => Err(start_error(root, rel, &e, other)),
    }
}

/// The token for a start path that could not be opened as a directory.
pub(crate) fn start_error(
    root: &WorkspaceRoot,
    rel: &Path,
    e: &std::io::Error,
    other: ErrorKind,
) -> CallError {
    match FsErrorKind::of(e) {
        FsErrorKind::NotDirectory => {
            // The path itself is something else, or a component above it is.
            let flags = OFlags::PATH;
            match confine_beneath::open_beneath(root.dir(), rel, flags, Symlinks::FollowInside) {
                Ok(_) => failed(ErrorKind::NotADirectory),
                Err(e) => {
                    failed(FsTokens::resolving(ErrorKind::FileNotFound).token(FsErrorKind::of(&e)))
                }
            }
        }
        kind => failed(
            FsTokens::resolving(other)
                .not_found(ErrorKind::FileNotFound)
                .token(kind),
        ),
    }
}

/// The `.gitignore` matchers in force, the deepest last.
#[derive(Clone, Default)]
pub(crate) struct Ignores {
    levels: Vec<Arc<Gitignore>>,
}

impl Ignores {
    /// The `.gitignore` files of the root and of every directory above `start` (not `start`
    /// itself: the walk reads that one when it lists it).
    pub(crate) fn above(root: &WorkspaceRoot, start: Option<&RelPath>) -> Self {
        let mut out = Self::default();
        let Some(start) = start else {
            return out;
        };
        let mut prefix = String::new();
        let segments: Vec<&str> = start.segments().collect();
        for (i, seg) in std::iter::once("")
            .chain(segments.iter().copied())
            .enumerate()
        {
            if i == segments.len() {
                break;
            }
            if !seg.is_empty() {
                prefix = join(&prefix, seg);
            }
            let file = join(&prefix, ".gitignore");
            let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
            let Ok(fd) = confine_beneath::open_beneath(root.dir(), &file, flags, Symlinks::Refuse)
            else {
                continue;
            };
            let file = std::fs::File::from(fd);
            if file.metadata().is_ok_and(|m| m.is_file()) {
                out.push_from(&prefix, file);
            }
        }
        out
    }

    /// Read a `.gitignore` from `file` for the directory `dir_path` (relative to the root).
    pub(crate) fn push_from(&mut self, dir_path: &str, file: std::fs::File) {
        let mut text = String::new();
        if file
            .take(MAX_GITIGNORE_BYTES)
            .read_to_string(&mut text)
            .is_err()
        {
            return;
        }
        let mut builder = GitignoreBuilder::new(dir_path);
        for line in text.lines() {
            // A line the matcher cannot parse is skipped, as git skips it.
            let _ = builder.add_line(None, line);
        }
        if let Ok(gi) = builder.build()
            && !gi.is_empty()
        {
            self.levels.push(Arc::new(gi));
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.levels.len()
    }

    pub(crate) fn truncate(&mut self, len: usize) {
        self.levels.truncate(len);
    }

    /// Whether `path` (relative to the root) is ignored: the deepest file that has a say
    /// decides, a `!` line re-including.
    pub(crate) fn is_ignored(&self, path: &str, is_dir: bool) -> bool {
        for gi in self.levels.iter().rev() {
            match gi.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }
}

/// What one entry held in a window costs, in bytes (its name and its bookkeeping).
fn entry_bytes(e: &Entry) -> usize {
    e.name().len() + 64
}

/// An entry ordered by its name's bytes.
struct ByName(Entry);

impl ByName {
    fn key(&self) -> &[u8] {
        use std::os::unix::ffi::OsStrExt;
        self.0.name().as_bytes()
    }
}

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for ByName {}
impl PartialOrd for ByName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(other.key())
    }
}

/// One window of a directory's entries (see the module docs).
pub(crate) struct Window {
    /// The entries, sorted by name.
    pub(crate) entries: Vec<Entry>,
    /// Entries after these were left for a later window.
    pub(crate) more: bool,
}

/// How often (in entries) a directory's read checks for cancellation: a token's check takes a
/// lock, too dear for every entry of a large tree.
const CANCEL_EVERY: usize = 64;

/// The entries of a window being read: kept as they come while they fit its bounds (nearly
/// every directory), sorted once at the end; in a heap by name, the largest on top, from the
/// first entry that passes them.
enum Held {
    Fits(Vec<Entry>),
    Heap(BinaryHeap<ByName>),
}

/// The entries of `dir` that `keep` accepts and whose names sort after `after`: the smallest
/// ones, at most `max_entries` of them and (but at least one) within `max_bytes`. The
/// descriptor is read from its start; cancellation is checked every [`CANCEL_EVERY`] entries.
///
/// `keep` is asked of every entry whose name sorts after `after`, also of those past the
/// window's end (a caller counts what it refuses there). "The smallest" holds however the
/// names' sizes differ: once an entry was left out (`more`),
/// no entry whose name sorts after it is taken, even one small enough to fit, so the window
/// holds every kept name between `after` and the first one left out, and the next window
/// (after this one's last name) misses none.
pub(crate) fn read_window(
    dir: &mut WalkDir,
    after: Option<&[u8]>,
    max_entries: usize,
    max_bytes: usize,
    cancel: &CancellationToken,
    mut keep: impl FnMut(&Entry) -> bool,
) -> Result<Window, CallError> {
    use std::os::unix::ffi::OsStrExt;
    let mut held = Held::Fits(Vec::new());
    let mut bytes = 0usize;
    // The smallest name left out so far: no name after it is taken.
    let mut cutoff: Option<Entry> = None;
    let mut seen = 0usize;
    let over = |len: usize, bytes: usize| len > 1 && (len > max_entries || bytes > max_bytes);
    let leave_out = |cutoff: &mut Option<Entry>, e: Entry| {
        if cutoff
            .as_ref()
            .is_none_or(|c| e.name().as_bytes() < c.name().as_bytes())
        {
            *cutoff = Some(e);
        }
    };
    let flow = dir
        .for_each_entry(|entry| {
            seen += 1;
            if seen.is_multiple_of(CANCEL_EVERY) && cancel.is_cancelled() {
                return ControlFlow::Break(());
            }
            let name = entry.name().as_bytes();
            // `keep` sees every entry after `after`, those past the cutoff too: it counts
            // what it refuses and notes the `.gitignore` wherever they sort.
            if after.is_some_and(|a| name <= a)
                || !keep(&entry)
                || cutoff.as_ref().is_some_and(|c| name > c.name().as_bytes())
            {
                return ControlFlow::Continue(());
            }
            let heap = match &mut held {
                Held::Fits(entries) => {
                    bytes += entry_bytes(&entry);
                    entries.push(entry);
                    if !over(entries.len(), bytes) {
                        return ControlFlow::Continue(());
                    }
                    let heap = std::mem::take(entries).into_iter().map(ByName).collect();
                    held = Held::Heap(heap);
                    let Held::Heap(heap) = &mut held else {
                        unreachable!("just made")
                    };
                    heap
                }
                Held::Heap(heap) => {
                    let full = heap.len() >= max_entries || bytes >= max_bytes;
                    if full && heap.peek().is_some_and(|top| top.key() < name) {
                        leave_out(&mut cutoff, entry);
                        return ControlFlow::Continue(());
                    }
                    bytes += entry_bytes(&entry);
                    heap.push(ByName(entry));
                    heap
                }
            };
            while over(heap.len(), bytes) {
                let out = heap.pop().expect("not empty").0;
                bytes -= entry_bytes(&out);
                leave_out(&mut cutoff, out);
            }
            ControlFlow::Continue(())
        })
        .map_err(|_| failed(ErrorKind::ReadFailed))?;
    if flow.is_break() || cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    let entries = match held {
        Held::Fits(mut entries) => {
            entries.sort_unstable_by(|a, b| a.name().as_bytes().cmp(b.name().as_bytes()));
            entries
        }
        Held::Heap(heap) => heap.into_sorted_vec().into_iter().map(|e| e.0).collect(),
    };
    Ok(Window {
        entries,
        more: cutoff.is_some(),
    })
}

/// One file the walk offers to a tool: its paths are built when the tool asks for them.
pub(crate) struct FileAt<'a> {
    /// The entry in its directory.
    pub(crate) entry: &'a Entry,
    /// Its name (UTF-8, accepted by the grammar).
    pub(crate) name: &'a str,
    /// Its directory's path relative to the root.
    dir_path: &'a str,
    /// Its directory's path relative to the start of the walk.
    dir_rel: &'a str,
}

impl FileAt<'_> {
    /// Its path relative to the root.
    pub(crate) fn path(&self) -> String {
        join(self.dir_path, self.name)
    }

    /// Its path relative to the start of the walk, built in `buf`.
    pub(crate) fn rel<'b>(&self, buf: &'b mut String) -> &'b str {
        join_into(buf, &[self.dir_rel, self.name])
    }
}

/// What a walk is asked to do.
pub(crate) struct WalkSpec<'a> {
    pub(crate) root_id: FileId,
    /// The start's path relative to the root ("" for the root).
    pub(crate) prefix: String,
    pub(crate) include_ignored: bool,
    pub(crate) cancel: &'a CancellationToken,
    /// Stop once more than this many items were produced (`truncated`).
    pub(crate) limit: usize,
    /// The denied paths, judged by an entry's real path: `real_start` (where the start
    /// directory really stands beneath the root, [`DeniedPaths::walk_start`]) joined with its
    /// path relative to the start. `None` when nothing is denied.
    pub(crate) denied: Option<(&'a DeniedPaths, String)>,
    /// Subtrees may be walked ahead on the thread pool (see the module docs); false walks
    /// on the calling thread alone. The answer is the same.
    pub(crate) parallel: bool,
}

/// What a walking tool does with the files a walk finds, and what its searches count.
pub(crate) trait Visitor: Sync {
    /// One result (a path, a matching line).
    type Item: Send;
    /// What one walker's searches count (`grep`: files searched, the bytes its matches hold).
    type Tally: Send;
    /// A fresh tally; `ahead` for a walker that walks one subtree ahead of the walk's order,
    /// whose items are held until the walk reaches that subtree.
    fn tally(&self, ahead: bool) -> Self::Tally;
    /// For each of a batch of one directory's files (in name order), its items; `cancel` is
    /// the walker's (a walker ahead's ends with the walk).
    fn files(
        &self,
        tally: &Self::Tally,
        dir: &WalkDir,
        files: &[FileAt<'_>],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<Self::Item>>, CallError>;
    /// The items filled what the tally may hold: the walk stops (`truncated`) before the next
    /// batch.
    fn full(&self, _tally: &Self::Tally) -> bool {
        false
    }
    /// Add what a subtree's walker counted to `into`, where the walk's order puts the
    /// subtree: false, with `into` unchanged, when its items do not fit there (the walk then
    /// walks that subtree again itself, in order).
    fn absorb(&self, _into: &Self::Tally, _from: &Self::Tally) -> bool {
        true
    }
    /// The bytes one item holds.
    fn cost(&self, item: &Self::Item) -> usize;
}

/// What a walk produced.
pub(crate) struct Walked<T> {
    pub(crate) items: Vec<T>,
    pub(crate) truncated: bool,
    /// Entries left out because no tool could be given their path back.
    pub(crate) skipped: usize,
    /// Entries left out because they are denied (a directory counts once, not entered).
    pub(crate) denied: usize,
}

/// The most subtrees offered to the pool and not yet taken back by the walk.
pub(crate) const MAX_AHEAD: usize = 8;
/// The bytes of entries the directories open on one subtree walked ahead may hold together;
/// the walk's own stack has half of [`WALK_ENTRIES_BUDGET`], the subtrees ahead share the
/// other half.
pub(crate) const AHEAD_ENTRIES_BUDGET: usize = WALK_ENTRIES_BUDGET / 2 / MAX_AHEAD;
/// The bytes of items a subtree walked ahead may hold; past it the walk walks that subtree
/// itself, in order.
pub(crate) const AHEAD_ITEM_BYTES: usize = 512 << 10;

struct Frame<T, L> {
    dir: WalkDir,
    /// Path relative to the root.
    path: String,
    /// Path relative to the start.
    rel: String,
    /// The current window's entries (the ignored ones dropped), sorted by name.
    entries: Vec<Entry>,
    /// The current window was not the directory's last.
    more: bool,
    /// The last name the current window read (before the ignored ones were dropped).
    last: Option<Vec<u8>>,
    /// The window's size in bytes (its share of the walk's budget).
    window: usize,
    /// The tool's items for `entries[batch_from..batch_from + found.len()]`.
    found: Vec<Vec<T>>,
    batch_from: usize,
    next: usize,
    out: Vec<T>,
    skipped: usize,
    denied: usize,
    ignores_len: usize,
    /// Nothing beneath this directory is offered to the pool: the walk walks it again itself.
    alone: bool,
    /// The entries before this index were considered for offering.
    offered: usize,
    /// The subdirectories of the current window offered to the pool, by entry index.
    ahead: VecDeque<(usize, Arc<Slot<T, L>>)>,
}

/// Where a subtree walked ahead starts.
struct Start {
    dir: WalkDir,
    path: String,
    rel: String,
    ignores: Ignores,
}

/// A subtree walked ahead to its end, within the bounds of a walker ahead.
struct Ahead<T> {
    walked: Walked<T>,
    produced: usize,
    /// The subtree's directory lay beneath the root once it was read.
    beneath: bool,
}

/// What a subtree walked ahead gave: its result (none when it went past a walker ahead's
/// bounds, failed or was cancelled) and its start, for the walk to walk it again itself.
struct Ended<T, L> {
    start: Start,
    done: Option<(Ahead<T>, L)>,
}

enum SlotState<T, L> {
    Offered(Start),
    Running,
    Ended(Ended<T, L>),
    Taken,
}

/// One subtree offered to the pool, taken back by the walk when it reaches it.
struct Slot<T, L> {
    state: Mutex<SlotState<T, L>>,
    ended: Condvar,
}

/// How the walk takes a slot back.
enum Taken<T, L> {
    /// No walker had started it: the walk walks it itself.
    Unstarted(Start),
    Ended(Ended<T, L>),
}

impl<T, L> Slot<T, L> {
    fn new(start: Start) -> Self {
        Self {
            state: Mutex::new(SlotState::Offered(start)),
            ended: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState<T, L>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The walker ahead's side: walk the subtree unless the walk took it first.
    fn run(&self, walk: impl FnOnce(&Start) -> Option<(Ahead<T>, L)>) {
        let start = {
            let mut state = self.lock();
            match std::mem::replace(&mut *state, SlotState::Running) {
                SlotState::Offered(start) => start,
                other => {
                    *state = other;
                    return;
                }
            }
        };
        let done = walk(&start);
        *self.lock() = SlotState::Ended(Ended { start, done });
        self.ended.notify_all();
    }

    /// The walk's side: the subtree's start when no walker began it, else its end (waited for).
    fn take(&self) -> Taken<T, L> {
        let mut state = self.lock();
        loop {
            match std::mem::replace(&mut *state, SlotState::Taken) {
                SlotState::Offered(start) => return Taken::Unstarted(start),
                SlotState::Ended(ended) => return Taken::Ended(ended),
                SlotState::Running => {
                    *state = SlotState::Running;
                    state = self
                        .ended
                        .wait(state)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                SlotState::Taken => unreachable!("a slot is taken once"),
            }
        }
    }
}

/// One walker: the walk's own (in order) or one ahead (a subtree, within bounds).
struct Walker<'a, V: Visitor> {
    spec: &'a WalkSpec<'a>,
    visitor: &'a V,
    cancel: &'a CancellationToken,
    /// The bytes of entries its open directories may hold together.
    budget: usize,
    /// A walker ahead: it gives up past the walk's limit or [`AHEAD_ITEM_BYTES`].
    ahead: bool,
}

/// The walk's offers to the rayon pool (a scope's walkers ahead), not the blocking pool.
struct Offers<'p, 's> {
    scope: &'p rayon::Scope<'s>,
    /// Offered and not yet taken back.
    outstanding: usize,
    /// Cancelled when the walk ends: the walkers ahead stop.
    cancel: CancellationToken,
}

/// How a walker's run ended.
struct Ran<T> {
    walked: Walked<T>,
    produced: usize,
    beneath: bool,
}

type Slots<V> = Slot<<V as Visitor>::Item, <V as Visitor>::Tally>;

/// Walk from `start`, depth first in name order. The visitor gets a directory's files a batch
/// at a time (so a tool may search them in parallel) and returns, for each, its items. With
/// `spec.parallel`, subtrees are walked ahead on the thread pool (see the module docs); the
/// answer is the same.
pub(crate) fn walk<V: Visitor>(
    start: WalkDir,
    mut ignores: Ignores,
    spec: &WalkSpec<'_>,
    visitor: &V,
    tally: &V::Tally,
) -> Result<Walked<V::Item>, CallError> {
    let walker = Walker {
        spec,
        visitor,
        cancel: spec.cancel,
        budget: WALK_ENTRIES_BUDGET,
        ahead: false,
    };
    let first = |ignores: &mut Ignores| {
        let budget = if spec.parallel {
            WALK_ENTRIES_BUDGET / 4
        } else {
            WALK_ENTRIES_BUDGET / 2
        };
        open_frame(
            start,
            spec.prefix.clone(),
            String::new(),
            ignores,
            spec,
            budget,
        )
    };
    let ran = if spec.parallel && rayon::current_num_threads() > 1 {
        rayon::in_place_scope(|scope| {
            let mut pool = Offers {
                scope,
                outstanding: 0,
                cancel: spec.cancel.child_token(),
            };
            let walker = Walker {
                budget: WALK_ENTRIES_BUDGET / 2,
                ..walker
            };
            let ran = first(&mut ignores)
                .and_then(|frame| walker.run(frame, &mut ignores, tally, Some(&mut pool)));
            pool.cancel.cancel();
            ran
        })
    } else {
        first(&mut ignores).and_then(|frame| walker.run(frame, &mut ignores, tally, None))
    }?;
    let Some(ran) = ran else {
        unreachable!("only a walker ahead gives up");
    };
    if !ran.beneath {
        return Err(failed(ErrorKind::PathOutsideWorkspace));
    }
    Ok(ran.walked)
}

impl<'a, V: Visitor> Walker<'a, V> {
    /// Walk the subtree of `first`, depth first in name order. `None`: a walker ahead gave up
    /// (went past the limit, its item bytes, or the visitor's bound).
    fn run(
        &self,
        first: Frame<V::Item, V::Tally>,
        ignores: &mut Ignores,
        tally: &V::Tally,
        mut pool: Option<&mut Offers<'_, 'a>>,
    ) -> Result<Option<Ran<V::Item>>, CallError> {
        let spec = self.spec;
        let mut stack: Vec<Frame<V::Item, V::Tally>> = Vec::new();
        let mut produced = 0usize;
        let mut cost = 0usize;
        let mut truncated = false;
        let mut held = first.window;
        let mut steps = 0usize;
        stack.push(first);
        loop {
            steps += 1;
            if steps.is_multiple_of(CANCEL_EVERY) && self.cancel.is_cancelled() {
                return Err(Cancelled.into());
            }
            let top = stack.last_mut().expect("the start frame is popped last");
            if !truncated && top.next == top.entries.len() && top.more {
                next_window(top, ignores, spec)?;
                continue;
            }
            if truncated || top.next == top.entries.len() {
                let frame = stack.pop().expect("not empty");
                held -= frame.window;
                ignores.truncate(frame.ignores_len);
                if let Some(pool) = pool.as_deref_mut() {
                    pool.outstanding -= frame.ahead.len();
                }
                // Only what a directory gave while it lay beneath the root is kept.
                let beneath = frame
                    .dir
                    .is_beneath(spec.root_id)
                    .map_err(|_| failed(ErrorKind::ReadFailed))?;
                match stack.last_mut() {
                    Some(parent) => {
                        if beneath {
                            parent.out.extend(frame.out);
                            parent.skipped += frame.skipped;
                            parent.denied += frame.denied;
                        }
                    }
                    None => {
                        return Ok(Some(Ran {
                            walked: Walked {
                                items: frame.out,
                                truncated,
                                skipped: frame.skipped,
                                denied: frame.denied,
                            },
                            produced,
                            beneath,
                        }));
                    }
                }
                continue;
            }
            let i = top.next;
            // The tool's items are full: what its last batch gave is kept, nothing more is read.
            let beyond_batch = i >= top.batch_from + top.found.len();
            if beyond_batch && self.visitor.full(tally) {
                if self.ahead {
                    return Ok(None);
                }
                truncated = true;
                continue;
            }
            if let Some(pool) = pool.as_deref_mut() {
                self.offer(top, ignores, pool);
            }
            if top.entries[i].kind() != EntryKind::Directory {
                if beyond_batch {
                    offer_batch(top, self.visitor, tally, self.cancel)?;
                }
                top.next += 1;
                let found = std::mem::take(&mut top.found[i - top.batch_from]);
                produced += found.len();
                if self.ahead {
                    cost += found.iter().map(|t| self.visitor.cost(t)).sum::<usize>();
                    if produced > spec.limit || cost > AHEAD_ITEM_BYTES {
                        return Ok(None);
                    }
                }
                top.out.extend(found);
                if produced > spec.limit {
                    truncated = true;
                }
                continue;
            }
            top.next += 1;
            let name = top.entries[i]
                .name_str()
                .expect("only UTF-8 names are kept");
            let path = join(&top.path, name);
            let rel = join(&top.rel, name);
            let alone = top.alone;
            let slot = match top.ahead.front() {
                Some((at, _)) if *at == i => top.ahead.pop_front().map(|(_, s)| s),
                _ => None,
            };
            let child = match slot {
                None => {
                    let entry = &top.entries[i];
                    match top
                        .dir
                        .open_dir(entry)
                        .map_err(|_| failed(ErrorKind::ReadFailed))?
                    {
                        Some(child) => (child, alone),
                        // No longer that directory (swapped or removed meanwhile, or a
                        // filesystem whose listing and `stat` disagree): not entered, and
                        // counted, so a walk that could not enter a directory says so.
                        None => {
                            top.skipped += 1;
                            continue;
                        }
                    }
                }
                Some(slot) => {
                    let pool = pool.as_deref_mut().expect("slots come from the pool");
                    pool.outstanding -= 1;
                    match slot.take() {
                        Taken::Unstarted(start) => (start.dir, alone),
                        Taken::Ended(Ended {
                            start,
                            done: Some((ahead, from)),
                        }) if produced + ahead.produced <= spec.limit
                            && self.visitor.absorb(tally, &from) =>
                        {
                            // What the walk would have found there, in the same order.
                            produced += ahead.produced;
                            drop(start);
                            if ahead.beneath {
                                top.out.extend(ahead.walked.items);
                                top.skipped += ahead.walked.skipped;
                                top.denied += ahead.walked.denied;
                            }
                            continue;
                        }
                        // It went past what it may hold, or past what fits where it stands,
                        // failed or was cancelled: walked again, in order, by this walker.
                        Taken::Ended(Ended { start, .. }) => (start.dir, true),
                    }
                }
            };
            let window = (self.budget.saturating_sub(held) / 2).max(MIN_WINDOW_BYTES);
            let mut frame = open_frame(child.0, path, rel, ignores, spec, window)?;
            frame.alone = child.1;
            held += frame.window;
            stack.push(frame);
        }
    }

    /// Offer the pool the subdirectories of `top`'s window after its next entry, while fewer
    /// than [`MAX_AHEAD`] are out.
    fn offer(
        &self,
        top: &mut Frame<V::Item, V::Tally>,
        ignores: &Ignores,
        pool: &mut Offers<'_, 'a>,
    ) {
        if top.alone {
            return;
        }
        let from = top.offered.max(top.next + 1);
        let mut j = from;
        while j < top.entries.len() && pool.outstanding < MAX_AHEAD {
            let entry = &top.entries[j];
            j += 1;
            if entry.kind() != EntryKind::Directory {
                continue;
            }
            // One that cannot be opened now is opened again when the walk reaches it.
            let Ok(Some(dir)) = top.dir.open_dir(entry) else {
                continue;
            };
            let name = entry.name_str().expect("only UTF-8 names are kept");
            let start = Start {
                dir,
                path: join(&top.path, name),
                rel: join(&top.rel, name),
                ignores: ignores.clone(),
            };
            let slot: Arc<Slots<V>> = Arc::new(Slot::new(start));
            top.ahead.push_back((j - 1, Arc::clone(&slot)));
            pool.outstanding += 1;
            let (spec, visitor, cancel) = (self.spec, self.visitor, pool.cancel.clone());
            pool.scope.spawn(move |_| {
                if cancel.is_cancelled() {
                    return;
                }
                slot.run(|start| walk_ahead(start, spec, visitor, &cancel));
            });
        }
        top.offered = top.offered.max(j);
    }
}

/// Walk one subtree ahead of the walk's order, within a walker ahead's bounds.
fn walk_ahead<V: Visitor>(
    start: &Start,
    spec: &WalkSpec<'_>,
    visitor: &V,
    cancel: &CancellationToken,
) -> Option<(Ahead<V::Item>, V::Tally)> {
    let walker = Walker {
        spec,
        visitor,
        cancel,
        budget: AHEAD_ENTRIES_BUDGET,
        ahead: true,
    };
    let dir = start.dir.try_clone().ok()?;
    let mut ignores = start.ignores.clone();
    let tally = visitor.tally(true);
    let frame = open_frame(
        dir,
        start.path.clone(),
        start.rel.clone(),
        &mut ignores,
        spec,
        AHEAD_ENTRIES_BUDGET / 2,
    )
    .ok()?;
    let ran = walker.run(frame, &mut ignores, &tally, None).ok()??;
    Some((
        Ahead {
            walked: ran.walked,
            produced: ran.produced,
            beneath: ran.beneath,
        },
        tally,
    ))
}

/// Hand the tool the next batch of the frame's files, from `next` on: at most
/// [`FILES_PER_BATCH`] files (and the directories between them, which get no items).
fn offer_batch<V: Visitor>(
    frame: &mut Frame<V::Item, V::Tally>,
    visitor: &V,
    tally: &V::Tally,
    cancel: &CancellationToken,
) -> Result<(), CallError> {
    let from = frame.next;
    let mut batch = Vec::new();
    let mut at = Vec::new();
    let mut to = from;
    while to < frame.entries.len() && batch.len() < FILES_PER_BATCH {
        let e = &frame.entries[to];
        if e.kind() != EntryKind::Directory {
            batch.push(FileAt {
                entry: e,
                name: e.name_str().expect("only UTF-8 names are kept"),
                dir_path: &frame.path,
                dir_rel: &frame.rel,
            });
            at.push(to - from);
        }
        to += 1;
    }
    let results = visitor.files(tally, &frame.dir, &batch, cancel)?;
    drop(batch);
    let mut found: Vec<Vec<V::Item>> = (from..to).map(|_| Vec::new()).collect();
    for (i, items) in at.into_iter().zip(results) {
        found[i] = items;
    }
    frame.found = found;
    frame.batch_from = from;
    Ok(())
}

/// Open a directory's frame: its `.gitignore` and its first window.
fn open_frame<T, L>(
    dir: WalkDir,
    path: String,
    rel: String,
    ignores: &mut Ignores,
    spec: &WalkSpec<'_>,
    window: usize,
) -> Result<Frame<T, L>, CallError> {
    let mut frame = Frame {
        dir,
        path,
        rel,
        entries: Vec::new(),
        more: false,
        last: None,
        window,
        found: Vec::new(),
        batch_from: 0,
        next: 0,
        out: Vec::new(),
        skipped: 0,
        denied: 0,
        ignores_len: ignores.len(),
        alone: false,
        offered: 0,
        ahead: VecDeque::new(),
    };
    next_window(&mut frame, ignores, spec)?;
    Ok(frame)
}

/// Read the frame's next window of entries (its first when none was read): filtered, the
/// ignored ones dropped, sorted. The first window counts what is skipped and reads the
/// directory's `.gitignore`.
fn next_window<T, L>(
    frame: &mut Frame<T, L>,
    ignores: &mut Ignores,
    spec: &WalkSpec<'_>,
) -> Result<(), CallError> {
    let first = frame.last.is_none();
    let mut skipped = 0usize;
    let mut gitignore = None;
    let path = &frame.path;
    let window = read_window(
        &mut frame.dir,
        frame.last.as_deref(),
        usize::MAX,
        frame.window,
        spec.cancel,
        |entry| {
            let Some(name) = plain_name(entry.name()) else {
                skipped += 1;
                return false;
            };
            if is_temporary(name) {
                return false;
            }
            if path.len() + 1 + name.len() > MAX_PATH_BYTES {
                skipped += 1;
                return false;
            }
            if entry.kind() == EntryKind::Directory && name == ".git" {
                return false;
            }
            if first && name == ".gitignore" && entry.kind() == EntryKind::File {
                gitignore = Some(entry.clone());
            }
            true
        },
    )?;
    if first {
        frame.skipped += skipped;
        if let Some(entry) = gitignore
            && !spec.include_ignored
            && let Some((file, _)) = frame
                .dir
                .open_file(&entry)
                .map_err(|_| failed(ErrorKind::ReadFailed))?
        {
            ignores.push_from(&frame.path, file);
        }
    }
    let mut entries = window.entries;
    if let Some(last) = entries.last() {
        use std::os::unix::ffi::OsStrExt;
        frame.last = Some(last.name().as_bytes().to_vec());
    }
    let mut buf = String::new();
    if !spec.include_ignored && ignores.len() > 0 {
        entries.retain(|e| {
            let name = e.name_str().expect("only UTF-8 names are kept");
            let path = join_into(&mut buf, &[&frame.path, name]);
            !ignores.is_ignored(path, e.kind() == EntryKind::Directory)
        });
    }
    if let Some((denied, real_start)) = &spec.denied {
        let before = entries.len();
        entries.retain(|e| {
            let name = e.name_str().expect("only UTF-8 names are kept");
            let real = join_into(&mut buf, &[real_start, &frame.rel, name]);
            !denied.is_denied(Path::new(real))
        });
        frame.denied += before - entries.len();
    }
    frame.entries = entries;
    frame.more = window.more;
    frame.next = 0;
    frame.offered = 0;
    frame.found = Vec::new();
    frame.batch_from = 0;
    Ok(())
}

/// Validate an optional directory path.
pub(crate) fn check_dir_path(
    path: Option<&str>,
) -> Result<Option<RelPath>, crate::error::ToolError> {
    path.map(|p| {
        confine_pathgrammar::normalize(p)
            .map_err(|_| crate::error::ToolError::invalid(ErrorKind::InvalidRelativePath))
    })
    .transpose()
}

#[cfg(test)]
mod tests;
