//! A restore's plan and its application beneath the root's descriptor.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use cap_std::fs::Dir;
use confine_beneath::{FileId, Symlinks};
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde::Serialize;

use crate::scan::node_of;
use crate::store::Locked;
use crate::{Kind, Manifest, Node};

/// A path a restore left alone, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skip {
    /// The path.
    pub path: String,
    /// Why: `changed during restore`, `a job is running`, `not stored`, `not empty`, or
    /// `failed`.
    pub reason: String,
}

/// What a restore did (or, in a dry run, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Restored {
    /// Paths written back (content, link, directory or mode).
    pub restored: Vec<String>,
    /// Paths created since the checkpoint, removed.
    pub removed: Vec<String>,
    /// Paths left alone.
    pub skipped: Vec<Skip>,
}

/// What a restore does, path by path.
pub(crate) struct Plan<'a> {
    /// Created since (or of another kind now): removed, deepest first.
    remove: Vec<(&'a str, &'a Node)>,
    /// To bring back: shallowest first.
    put: Vec<(&'a str, &'a Node, Option<&'a Node>)>,
}

fn depth(p: &str) -> usize {
    p.bytes().filter(|&b| b == b'/').count()
}

impl<'a> Plan<'a> {
    pub(crate) fn new(
        then: &'a Manifest,
        now: &'a Manifest,
        selected: &dyn Fn(&str) -> bool,
    ) -> Self {
        let mut remove = Vec::new();
        let mut put = Vec::new();
        for (p, n) in now {
            if !selected(p) {
                continue;
            }
            match then.get(p) {
                None => remove.push((p.as_str(), n)),
                Some(t) if t.kind != n.kind => remove.push((p.as_str(), n)),
                _ => {}
            }
        }
        for (p, t) in then {
            if !selected(p) {
                continue;
            }
            match now.get(p) {
                Some(n) if n.same_content(t) => {}
                Some(n) if n.kind == t.kind => put.push((p.as_str(), t, Some(n))),
                _ => put.push((p.as_str(), t, None)),
            }
        }
        remove.sort_by(|a, b| depth(b.0).cmp(&depth(a.0)).then(b.0.cmp(a.0)));
        put.sort_by(|a, b| depth(a.0).cmp(&depth(b.0)).then(a.0.cmp(b.0)));
        Self { remove, put }
    }

    pub(crate) fn all_skipped(&self, reason: &str) -> Restored {
        let mut out = Restored::default();
        for p in self
            .remove
            .iter()
            .map(|r| r.0)
            .chain(self.put.iter().map(|p| p.0))
        {
            out.skipped.push(Skip {
                path: p.to_owned(),
                reason: reason.to_owned(),
            });
        }
        out
    }

    pub(crate) fn dry(&self) -> Restored {
        let mut out = Restored {
            removed: self.remove.iter().map(|r| r.0.to_owned()).collect(),
            ..Restored::default()
        };
        for (p, t, _) in &self.put {
            if t.kind == Kind::File && t.hash.is_none() {
                out.skipped.push(skip(p, "not stored"));
            } else {
                out.restored.push((*p).to_owned());
            }
        }
        out
    }

    pub(crate) fn apply(&self, root: &Dir, store: &Locked<'_>) -> Restored {
        let mut out = Restored::default();
        let root = root.as_fd();
        for (p, n) in &self.remove {
            match remove(root, p, n) {
                Ok(()) => out.removed.push((*p).to_owned()),
                Err(reason) => out.skipped.push(skip(p, reason)),
            }
        }
        for (p, t, n) in &self.put {
            // A path beneath one skipped above cannot be put back either.
            match put(root, store, p, t, *n) {
                Ok(()) => out.restored.push((*p).to_owned()),
                Err(reason) => out.skipped.push(skip(p, reason)),
            }
        }
        out
    }
}

fn skip(p: &str, reason: &str) -> Skip {
    Skip {
        path: p.to_owned(),
        reason: reason.to_owned(),
    }
}

const CHANGED: &str = "changed during restore";

/// The parent of `p` opened beneath the root, every symlink refused, and the leaf name.
fn parent(root: BorrowedFd<'_>, p: &str) -> Result<(OwnedFd, String), &'static str> {
    let (dir, leaf) = p.rsplit_once('/').unwrap_or(("", p));
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOCTTY;
    match confine_beneath::open_beneath(root, Path::new(dir), flags, Symlinks::Refuse) {
        Ok(fd) => Ok((fd, leaf.to_owned())),
        Err(_) => Err(CHANGED),
    }
}

/// The path is still what the walk saw (`expected`; `None`: absent).
fn still(dir: BorrowedFd<'_>, leaf: &str, expected: Option<&Node>) -> Result<(), &'static str> {
    match rustix::fs::statat(dir, leaf, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => match (node_of(&st), expected) {
            (Some(now), Some(e)) if now.same_stat(e) => Ok(()),
            _ => Err(CHANGED),
        },
        Err(Errno::NOENT) if expected.is_none() => Ok(()),
        Err(_) => Err(CHANGED),
    }
}

fn remove(root: BorrowedFd<'_>, p: &str, n: &Node) -> Result<(), &'static str> {
    let (dir, leaf) = parent(root, p)?;
    if n.kind == Kind::Dir {
        // Only an empty directory goes: what it still holds (paths no checkpoint covers)
        // stays.
        match rustix::fs::statat(&dir, leaf.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if node_of(&st).is_some_and(|x| x.kind == Kind::Dir && x.ino == n.ino) => {}
            _ => return Err(CHANGED),
        }
        return match rustix::fs::unlinkat(&dir, leaf.as_str(), AtFlags::REMOVEDIR) {
            Ok(()) => Ok(()),
            Err(Errno::NOTEMPTY | Errno::EXIST) => Err("not empty"),
            Err(_) => Err(CHANGED),
        };
    }
    still(dir.as_fd(), &leaf, Some(n))?;
    rustix::fs::unlinkat(&dir, leaf.as_str(), AtFlags::empty()).map_err(|_| CHANGED)
}

fn put(
    root: BorrowedFd<'_>,
    store: &Locked<'_>,
    p: &str,
    t: &Node,
    n: Option<&Node>,
) -> Result<(), &'static str> {
    let (dir, leaf) = parent(root, p)?;
    still(dir.as_fd(), &leaf, n)?;
    let mode = Mode::from_raw_mode(t.mode);
    match t.kind {
        Kind::Dir => {
            if n.is_none() {
                rustix::fs::mkdirat(&dir, leaf.as_str(), Mode::from_raw_mode(0o700))
                    .map_err(|_| CHANGED)?;
            }
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(&dir, leaf.as_str(), flags, Mode::empty())
                .map_err(|_| CHANGED)?;
            rustix::fs::fchmod(&fd, mode).map_err(|_| "failed")
        }
        Kind::Symlink => {
            let target = t.target.as_deref().ok_or("not stored")?;
            if n.is_some() {
                rustix::fs::unlinkat(&dir, leaf.as_str(), AtFlags::empty()).map_err(|_| CHANGED)?;
            }
            rustix::fs::symlinkat(target, &dir, leaf.as_str()).map_err(|_| CHANGED)
        }
        Kind::File => {
            if let Some(now) = n
                && now.hash == t.hash
            {
                // The content is there: the mode alone.
                return chmod_file(dir.as_fd(), &leaf, None, mode);
            }
            let hash = t.hash.as_deref().ok_or("not stored")?;
            let bytes = store.blob(hash).map_err(|_| "not stored")?;
            let cap =
                Dir::from_std_file(std::fs::File::from(dir.try_clone().map_err(|_| "failed")?));
            let installed = match confine_atomicwrite::install(&cap, &leaf, &bytes) {
                Ok(i) => i,
                Err(_) => return Err(CHANGED),
            };
            chmod_file(dir.as_fd(), &leaf, Some(installed.id), mode)
        }
    }
}

/// Set the mode of the regular file `leaf`, opened without following a symlink (and only if
/// it is the file just installed, when `id` is given).
fn chmod_file(
    dir: BorrowedFd<'_>,
    leaf: &str,
    id: Option<FileId>,
    mode: Mode,
) -> Result<(), &'static str> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd =
        rustix::fs::openat(dir, OsStr::new(leaf), flags, Mode::empty()).map_err(|_| CHANGED)?;
    if let Some(id) = id
        && FileId::of_fd(&fd).map_err(|_: io::Error| CHANGED)? != id
    {
        return Err(CHANGED);
    }
    rustix::fs::fchmod(&fd, mode).map_err(|_| "failed")
}
