//! The walk that `list_directory`, `find_files` and `grep` share: a directory opened beneath
//! the root, entries read from its descriptor, children opened with `O_NOFOLLOW` relative to
//! it (the descriptor layer's [`beneath::WalkDir`]), never through a symlink.
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
//! - cancellation is checked between entries.

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;

use beneath::{Entry, EntryKind, FileId, FsErrorKind, Symlinks, WalkDir};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use pathgrammar::RelPath;
use rootid::WorkspaceRoot;
use rustix::fs::OFlags;
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, Cancelled, ErrorKind, ToolError};

/// The largest `.gitignore` read; a larger one is used up to this size.
const MAX_GITIGNORE_BYTES: u64 = 1 << 20;

/// The longest path a result may hold (the grammar's limit: a longer one could not be given
/// back to any tool).
const MAX_PATH_BYTES: usize = pathgrammar::MAX_PATH_BYTES;

pub(crate) fn failed(kind: ErrorKind) -> CallError {
    CallError::Failed(ToolError::failed(kind))
}

/// True for the project's own temporaries, which no walk shows.
pub(crate) fn is_temporary(name: &str) -> bool {
    name.starts_with(".pify-node-")
        || name.starts_with(".pify-run-")
        || (name.starts_with('.') && name.contains(".pify-tmp-"))
}

/// The entry's name when the grammar accepts it as one segment, as it stands.
pub(crate) fn plain_name(name: &OsStr) -> Option<&str> {
    let s = name.to_str()?;
    match pathgrammar::normalize(s) {
        Ok(p) if p.as_str() == s => Some(s),
        _ => None,
    }
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
        FsErrorKind::Escape => failed(ErrorKind::PathOutsideWorkspace),
        FsErrorKind::NotFound => failed(ErrorKind::FileNotFound),
        FsErrorKind::NotDirectory => {
            // The path itself is something else, or a component above it is.
            let flags = OFlags::PATH;
            match beneath::open_beneath(root.dir(), rel, flags, Symlinks::FollowInside) {
                Ok(_) => failed(ErrorKind::NotADirectory),
                Err(e) if FsErrorKind::of(&e) == FsErrorKind::Escape => {
                    failed(ErrorKind::PathOutsideWorkspace)
                }
                Err(_) => failed(ErrorKind::FileNotFound),
            }
        }
        _ => failed(other),
    }
}

/// The `.gitignore` matchers in force, the deepest last.
#[derive(Default)]
pub(crate) struct Ignores {
    levels: Vec<Gitignore>,
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
            let Ok(fd) = beneath::open_beneath(root.dir(), &file, flags, Symlinks::Refuse) else {
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
            self.levels.push(gi);
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

/// One file the walk offers to a tool.
pub(crate) struct FileAt<'a> {
    /// The entry in its directory.
    pub(crate) entry: &'a Entry,
    /// Its path relative to the root.
    pub(crate) path: String,
    /// Its path relative to the start of the walk.
    pub(crate) rel: &'a str,
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
}

/// What a walk produced.
pub(crate) struct Walked<T> {
    pub(crate) items: Vec<T>,
    pub(crate) truncated: bool,
}

struct Frame<T> {
    dir: WalkDir,
    /// Path relative to the root.
    path: String,
    /// Path relative to the start.
    rel: String,
    entries: Vec<(Entry, String)>,
    /// The tool's items for each file entry, by index (computed when the directory opens).
    found: Vec<Vec<T>>,
    next: usize,
    out: Vec<T>,
    ignores_len: usize,
}

/// Walk from `start`, depth first in name order. `files` gets each directory's files at
/// once (so a tool may search them in parallel) and returns, for each, its items.
pub(crate) fn walk<T: Send>(
    start: WalkDir,
    mut ignores: Ignores,
    spec: &WalkSpec<'_>,
    mut files: impl FnMut(&WalkDir, &[FileAt<'_>]) -> Result<Vec<Vec<T>>, CallError>,
) -> Result<Walked<T>, CallError> {
    let mut stack: Vec<Frame<T>> = Vec::new();
    let mut produced = 0usize;
    let mut truncated = false;
    let first = open_frame(
        start,
        spec.prefix.clone(),
        String::new(),
        &mut ignores,
        spec,
        &mut files,
    )?;
    stack.push(first);
    loop {
        if spec.cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let top = stack.last_mut().expect("the start frame is popped last");
        if truncated || top.next == top.entries.len() {
            let frame = stack.pop().expect("not empty");
            ignores.truncate(frame.ignores_len);
            // Only what a directory gave while it lay beneath the root is kept.
            let beneath = frame
                .dir
                .is_beneath(spec.root_id)
                .map_err(|_| failed(ErrorKind::ReadFailed))?;
            match stack.last_mut() {
                Some(parent) => {
                    if beneath {
                        parent.out.extend(frame.out);
                    }
                }
                None => {
                    if !beneath {
                        return Err(failed(ErrorKind::PathOutsideWorkspace));
                    }
                    return Ok(Walked {
                        items: frame.out,
                        truncated,
                    });
                }
            }
            continue;
        }
        let i = top.next;
        top.next += 1;
        let found = std::mem::take(&mut top.found[i]);
        if top.entries[i].0.kind() != EntryKind::Directory {
            produced += found.len();
            top.out.extend(found);
            if produced > spec.limit {
                truncated = true;
            }
            continue;
        }
        let (entry, name) = &top.entries[i];
        let Some(child) = top
            .dir
            .open_dir(entry)
            .map_err(|_| failed(ErrorKind::ReadFailed))?
        else {
            continue; // no longer that directory: swapped or removed meanwhile
        };
        let path = join(&top.path, name);
        let rel = join(&top.rel, name);
        let frame = open_frame(child, path, rel, &mut ignores, spec, &mut files)?;
        stack.push(frame);
    }
}

/// Read a directory's entries, its `.gitignore`, filter and sort, and hand its files to the
/// tool.
fn open_frame<T>(
    mut dir: WalkDir,
    path: String,
    rel: String,
    ignores: &mut Ignores,
    spec: &WalkSpec<'_>,
    files: &mut impl FnMut(&WalkDir, &[FileAt<'_>]) -> Result<Vec<Vec<T>>, CallError>,
) -> Result<Frame<T>, CallError> {
    let ignores_len = ignores.len();
    let raw = dir
        .read_entries()
        .map_err(|_| failed(ErrorKind::ReadFailed))?;
    let mut entries = Vec::with_capacity(raw.len());
    for entry in raw {
        if spec.cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let Some(name) = plain_name(entry.name()) else {
            continue;
        };
        if is_temporary(name) || path.len() + 1 + name.len() > MAX_PATH_BYTES {
            continue;
        }
        if entry.kind() == EntryKind::Directory && name == ".git" {
            continue;
        }
        if name == ".gitignore"
            && entry.kind() == EntryKind::File
            && !spec.include_ignored
            && let Some((file, _)) = dir
                .open_file(&entry)
                .map_err(|_| failed(ErrorKind::ReadFailed))?
        {
            ignores.push_from(&path, file);
        }
        let name = name.to_owned();
        entries.push((entry, name));
    }
    if !spec.include_ignored && ignores.len() > 0 {
        entries.retain(|(e, name)| {
            !ignores.is_ignored(&join(&path, name), e.kind() == EntryKind::Directory)
        });
    }
    entries.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    let rels: Vec<String> = entries.iter().map(|(_, n)| join(&rel, n)).collect();
    let offered: Vec<(usize, FileAt<'_>)> = entries
        .iter()
        .zip(&rels)
        .enumerate()
        .filter(|(_, ((e, _), _))| e.kind() != EntryKind::Directory)
        .map(|(i, ((e, n), r))| {
            (
                i,
                FileAt {
                    entry: e,
                    path: join(&path, n),
                    rel: r.as_str(),
                },
            )
        })
        .collect();
    let indices: Vec<usize> = offered.iter().map(|(i, _)| *i).collect();
    let batch: Vec<FileAt<'_>> = offered.into_iter().map(|(_, f)| f).collect();
    let results = files(&dir, &batch)?;
    drop(batch);
    let mut found: Vec<Vec<T>> = (0..entries.len()).map(|_| Vec::new()).collect();
    for (i, items) in indices.into_iter().zip(results) {
        found[i] = items;
    }
    Ok(Frame {
        dir,
        path,
        rel,
        entries,
        found,
        next: 0,
        out: Vec::new(),
        ignores_len,
    })
}
