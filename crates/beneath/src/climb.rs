//! The climb by `..` from a directory descriptor to a known identity: where a directory stands
//! *now*, whatever path once led to it.

use std::ffi::OsString;
use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{Mode, OFlags};

use crate::FileId;

/// The most directory levels a climb takes before it gives up (and answers
/// [`Climb::NotBeneath`]).
pub const MAX_CLIMB: usize = 4096;

/// How a climb ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Climb {
    /// The directory with the awaited identity was met: the start lies beneath it (or is it).
    Reached,
    /// The filesystem's root (its own parent) or [`MAX_CLIMB`] levels were reached first: the
    /// start does not lie beneath the awaited directory (it was moved out, or never was in).
    NotBeneath,
    /// The visitor stopped the climb at this identity.
    Stopped(FileId),
}

/// Climb from the directory `start` through `..` until the directory whose identity is `stop`.
/// `visit` sees every identity on the way, `start`'s and `stop`'s included, and may stop the
/// climb ([`Climb::Stopped`]). Only descriptors are used (`openat(.., O_PATH)` and `fstat`),
/// so the answer is where the directory stands now.
pub fn climb_to(
    start: impl AsFd,
    stop: FileId,
    mut visit: impl FnMut(FileId) -> ControlFlow<()>,
) -> io::Result<Climb> {
    let start = start.as_fd();
    let mut held: Option<OwnedFd> = None;
    let mut id = FileId::of_fd(start)?;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    for _ in 0..MAX_CLIMB {
        if visit(id).is_break() {
            return Ok(Climb::Stopped(id));
        }
        if id == stop {
            return Ok(Climb::Reached);
        }
        let cur = held.as_ref().map_or(start, |f| f.as_fd());
        let up = rustix::fs::openat(cur, "..", flags, Mode::empty())?;
        let up_id = FileId::of_fd(&up)?;
        if up_id == id {
            return Ok(Climb::NotBeneath);
        }
        id = up_id;
        held = Some(up);
    }
    Ok(Climb::NotBeneath)
}

/// True when the directory `dir` lies now beneath (or is) the directory whose identity is
/// `root`.
pub fn is_beneath(dir: impl AsFd, root: FileId) -> io::Result<bool> {
    Ok(climb_to(dir, root, |_| ControlFlow::Continue(()))? == Climb::Reached)
}

/// Where the directory `dir` stands now beneath the directory `root`, as a path relative to
/// it made of plain names only (no symlink, no `..`; empty for `root` itself), or `None` when
/// `dir` does not lie beneath `root`. This is the name a policy on paths must judge: however
/// the directory was reached (through a symlink inside the root, say), this is where it is.
///
/// The kernel's own name for the descriptor (`/proc/self/fd`) is tried first and accepted
/// only when opening it beneath `root` with no symlink followed gives `dir`'s identity; else
/// (no `/proc`, a name the kernel gives differently) the climb by `..` names each level by
/// finding the child's identity among its parent's entries. A directory renamed while this
/// runs can make it fail (`ESTALE`); the caller decides again on a later look.
pub fn path_beneath(dir: impl AsFd, root: impl AsFd) -> io::Result<Option<PathBuf>> {
    let (dir, root) = (dir.as_fd(), root.as_fd());
    let (id, root_id) = (FileId::of_fd(dir)?, FileId::of_fd(root)?);
    if id == root_id {
        return Ok(Some(PathBuf::new()));
    }
    let own = |fd: std::os::fd::BorrowedFd<'_>| {
        std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
    };
    if let (Ok(at), Ok(root_at)) = (own(dir), own(root))
        && let Ok(rel) = at.strip_prefix(&root_at)
        && !rel.as_os_str().is_empty()
    {
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        if let Ok(fd) = crate::open_beneath(root, rel, flags, crate::Symlinks::Refuse)
            && FileId::of_fd(&fd)? == id
        {
            return Ok(Some(rel.to_owned()));
        }
    }
    climb_naming(dir, id, root_id)
}

/// The slow half of [`path_beneath`]: climb by `..`, naming each level from its parent's
/// entries (by inode number, then by `lstat` of each directory entry where a mount point
/// makes the listed number differ).
fn climb_naming(
    dir: std::os::fd::BorrowedFd<'_>,
    start: FileId,
    root: FileId,
) -> io::Result<Option<PathBuf>> {
    let mut names: Vec<OsString> = Vec::new();
    let mut held: Option<OwnedFd> = None;
    let mut id = start;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    for _ in 0..MAX_CLIMB {
        if id == root {
            return Ok(Some(names.iter().rev().collect()));
        }
        let cur = held.as_ref().map_or(dir, |f| f.as_fd());
        let up = rustix::fs::openat(cur, "..", flags, Mode::empty())?;
        let up_id = FileId::of_fd(&up)?;
        if up_id == id {
            return Ok(None);
        }
        let mut listing = crate::WalkDir::from_fd(rustix::io::fcntl_dupfd_cloexec(&up, 0)?)?;
        let entries = listing.read_entries()?;
        let same =
            |name: &std::ffi::OsStr| listing.stat_at(name).is_ok_and(|st| FileId::of(&st) == id);
        let name = entries
            .iter()
            .filter(|e| e.kind() == crate::EntryKind::Directory)
            .find(|e| e.ino() == id.ino && same(e.name()))
            .or_else(|| {
                entries
                    .iter()
                    .filter(|e| e.kind() == crate::EntryKind::Directory)
                    .find(|e| same(e.name()))
            })
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))?;
        names.push(name.name().to_owned());
        id = up_id;
        held = Some(up);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_beneath_names_where_a_directory_is_whatever_led_to_it() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", ws.join("link")).unwrap();
        let root = open(&ws);
        let via_link = open(&ws.join("link"));
        let want = PathBuf::from(".git/hooks");
        assert_eq!(path_beneath(&via_link, &root).unwrap(), Some(want.clone()));
        // Without `/proc`'s name: the climb finds the same.
        let id = FileId::of_fd(&via_link).unwrap();
        let root_id = FileId::of_fd(&root).unwrap();
        assert_eq!(
            climb_naming(via_link.as_fd(), id, root_id).unwrap(),
            Some(want)
        );
        assert_eq!(path_beneath(&root, &root).unwrap(), Some(PathBuf::new()));
        // Moved out: not beneath, by either way.
        std::fs::rename(ws.join(".git"), t.path().join("out")).unwrap();
        assert_eq!(path_beneath(&via_link, &root).unwrap(), None);
        assert_eq!(climb_naming(via_link.as_fd(), id, root_id).unwrap(), None);
    }

    fn open(p: &std::path::Path) -> OwnedFd {
        rustix::fs::open(p, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    #[test]
    fn climb_reaches_the_root_then_misses_it_once_moved_out() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        let root = FileId::of_fd(open(&ws)).unwrap();
        let b = open(&ws.join("a/b"));
        assert!(is_beneath(&b, root).unwrap());
        assert!(is_beneath(open(&ws), root).unwrap());
        let mut seen = 0;
        let r = climb_to(&b, root, |_| {
            seen += 1;
            ControlFlow::Continue(())
        });
        assert_eq!(r.unwrap(), Climb::Reached);
        assert_eq!(seen, 3); // b, a, ws
        std::fs::rename(ws.join("a"), t.path().join("out")).unwrap();
        assert!(!is_beneath(&b, root).unwrap());
    }

    #[test]
    fn climb_stops_where_the_visitor_says() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("a/b")).unwrap();
        let a = FileId::of_fd(open(&t.path().join("a"))).unwrap();
        let root = FileId::of_fd(open(t.path())).unwrap();
        let b = open(&t.path().join("a/b"));
        let r = climb_to(&b, root, |id| {
            if id == a {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(r.unwrap(), Climb::Stopped(a));
    }
}
