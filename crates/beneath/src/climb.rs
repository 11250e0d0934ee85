//! The climb by `..` from a directory descriptor to a known identity: where a directory stands
//! *now*, whatever path once led to it.

use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, OwnedFd};

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

#[cfg(test)]
mod tests {
    use super::*;

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
