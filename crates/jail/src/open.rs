//! `open_for_read` / `open_for_write`: the jail's decisions made on descriptors, so that no
//! swap between the check and the use can win.
//!
//! 1. The path is decided exactly as `resolve_for_*` decides it: resolved to a canonical path
//!    `R` within an allow bound `B` and within no deny bound.
//! 2. `R` is opened relative to `B`'s anchor directory (held open since construction), with
//!    `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` for the parent and `O_NOFOLLOW` for the
//!    leaf. `R` had no symlink when it was decided, so any symlink met now is a swap and the
//!    call fails with `PATH_CHANGED`; nothing can be reached outside the anchor, whatever is
//!    renamed meanwhile. Kernels without `openat2` get the same rule by walking one
//!    `openat(O_PATH | O_DIRECTORY | O_NOFOLLOW)` per component (plain names only, never `..`).
//! 3. The opened object is checked, not the path: its `(dev, ino)` must not be a deny bound's;
//!    the directory it was opened in, and every ancestor up to the anchor (walked through `..`
//!    on descriptors), must not be a deny bound by identity; and where it stands now, read
//!    back from `/proc/self/fd/N`, must lie within `B` and within no deny bound by path.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::bound::{AllowBound, Id};
use crate::error::{Error, ErrorKind};
use crate::filejail::FileJail;
use crate::walk::{leaf, within};

/// The most directory levels the upward identity walk climbs before it gives up.
const MAX_CLIMB: usize = 4096;

/// Set once `openat2` has been found missing (ENOSYS), so later calls go straight to the walk.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

impl FileJail {
    /// Open `requested` for reading, with the decision of [`FileJail::resolve_for_read`] made
    /// on the descriptor itself (see the [crate docs](crate#threat-model)). The object must be
    /// a regular file: a directory, FIFO, socket or device is refused with
    /// [`ErrorKind::NotRegular`] without blocking (the open uses `O_NONBLOCK`, cleared before
    /// the file is returned). A swap detected between decision and open is
    /// [`ErrorKind::Changed`].
    pub fn open_for_read(&self, requested: impl AsRef<Path>) -> Result<File, Error> {
        let (w, bound) = self.decide_read(requested.as_ref())?;
        let (parent_rel, name) = split(&w.path, bound)?;
        let parent = open_dir_beneath(bound.anchor.as_fd(), parent_rel).map_err(|e| match e {
            Errno::NOENT => Error::new(ErrorKind::NotFound),
            e => open_error(e),
        })?;
        let parent_fd = parent.as_ref().map_or(bound.anchor.as_fd(), |p| p.as_fd());
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd =
            rustix::fs::openat(parent_fd, name, flags, Mode::empty()).map_err(|e| match e {
                Errno::NOENT => Error::new(ErrorKind::NotFound),
                e => open_error(e),
            })?;
        let st = rustix::fs::fstat(&fd).map_err(io)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Error::new(ErrorKind::NotRegular));
        }
        self.check_opened(parent_fd, &fd, Id::of(&st), bound)?;
        rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(io)?;
        Ok(File::from(fd))
    }

    /// Open `requested` for writing, with the decision of [`FileJail::resolve_for_write`]
    /// made on descriptors (see the [crate docs](crate#threat-model)).
    ///
    /// Semantics: the file is created if missing (mode `0o666` less the umask, as
    /// [`File::create`]), opened write-only, never through a symlink leaf (`O_NOFOLLOW`: a leaf
    /// symlink that was resolved by the decision is not reopened; one that appears afterwards is
    /// [`ErrorKind::Changed`]). An existing file is truncated to length zero only after every
    /// check passed, so a refused call never alters a file. A non-regular target (directory,
    /// FIFO, socket, device) is [`ErrorKind::NotRegular`], without blocking. If the checks
    /// after a create fail, the file this call created is removed again (when its name still
    /// holds the same identity).
    pub fn open_for_write(&self, requested: impl AsRef<Path>) -> Result<File, Error> {
        let (w, bound) = self.decide_write(requested.as_ref())?;
        let (parent_rel, name) = split(&w.path, bound)?;
        let parent = open_dir_beneath(bound.anchor.as_fd(), parent_rel).map_err(|e| match e {
            Errno::NOENT => Error::new(ErrorKind::ParentNotFound),
            e => open_error(e),
        })?;
        let parent_fd = parent.as_ref().map_or(bound.anchor.as_fd(), |p| p.as_fd());
        // Before anything is created: the parent must not be (or lie in) a deny bound.
        self.check_chain(parent_fd, bound.anchor_id)?;
        self.check_fd_path(parent_fd, &bound.anchor_path)?;

        let base = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
        let mode = Mode::from_raw_mode(0o666);
        let mut opened = None;
        for _ in 0..8 {
            match rustix::fs::openat(parent_fd, name, base | OFlags::CREATE | OFlags::EXCL, mode) {
                Ok(fd) => {
                    opened = Some((fd, true));
                    break;
                }
                Err(Errno::EXIST) => {}
                Err(e) => return Err(open_error(e)),
            }
            match rustix::fs::openat(parent_fd, name, base | OFlags::NONBLOCK, Mode::empty()) {
                Ok(fd) => {
                    opened = Some((fd, false));
                    break;
                }
                // Removed between the two opens: try creating again.
                Err(Errno::NOENT) => {}
                Err(e) => return Err(open_error(e)),
            }
        }
        let (fd, created) = opened.ok_or_else(|| Error::new(ErrorKind::Changed))?;
        let st = rustix::fs::fstat(&fd).map_err(io)?;
        let id = Id::of(&st);
        let checked = if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            Err(Error::new(ErrorKind::NotRegular))
        } else {
            self.check_opened(parent_fd, &fd, id, bound)
        };
        if let Err(e) = checked {
            if created {
                remove_if_same(parent_fd, name, id);
            }
            return Err(e);
        }
        if !created {
            rustix::fs::ftruncate(&fd, 0).map_err(io)?;
            rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(io)?;
        }
        Ok(File::from(fd))
    }

    /// The checks on an opened object: its identity, its directory chain by identity up to the
    /// anchor, and its present location by path.
    fn check_opened(
        &self,
        parent: BorrowedFd<'_>,
        fd: &OwnedFd,
        id: Id,
        bound: &AllowBound,
    ) -> Result<(), Error> {
        if self.deny_ids.contains(&id) {
            return Err(Error::new(ErrorKind::Denied));
        }
        self.check_chain(parent, bound.anchor_id)?;
        self.check_fd_path(fd.as_fd(), &bound.path)
    }

    /// Climb from `start` through `..` until the directory whose identity is `stop`; refuse if
    /// any directory on the way (`start` and `stop` included) is a deny bound, and report a
    /// change if `/` is reached without meeting `stop` (the object was moved out).
    pub(crate) fn check_chain(&self, start: BorrowedFd<'_>, stop: Id) -> Result<(), Error> {
        let mut held: Option<OwnedFd> = None;
        let mut id = Id::of(&rustix::fs::fstat(start).map_err(io)?);
        for _ in 0..MAX_CLIMB {
            if self.deny_ids.contains(&id) {
                return Err(Error::new(ErrorKind::Denied));
            }
            if id == stop {
                return Ok(());
            }
            let cur = held.as_ref().map_or(start, |f| f.as_fd());
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let up = rustix::fs::openat(cur, "..", flags, Mode::empty()).map_err(io)?;
            let up_id = Id::of(&rustix::fs::fstat(&up).map_err(io)?);
            if up_id == id {
                return Err(Error::new(ErrorKind::Changed));
            }
            id = up_id;
            held = Some(up);
        }
        Err(Error::new(ErrorKind::Changed))
    }

    /// Where the descriptor stands now, read back from procfs, must lie `within` and in no deny
    /// bound. Without procfs mounted this check is skipped; the identity checks remain.
    fn check_fd_path(&self, fd: BorrowedFd<'_>, within_path: &Path) -> Result<(), Error> {
        let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let now = match rustix::fs::readlink(link.as_str(), Vec::new()) {
            Ok(p) => PathBuf::from(std::ffi::OsString::from_vec(p.into_bytes())),
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(io(e)),
        };
        if !now.is_absolute() || !within(&now, within_path) {
            return Err(Error::new(ErrorKind::Changed));
        }
        if self.is_denied_path(&now) {
            return Err(Error::new(ErrorKind::Denied));
        }
        Ok(())
    }
}

/// Split the decided path into its parent relative to the bound's anchor and its leaf name.
fn split<'a>(path: &'a Path, bound: &AllowBound) -> Result<(&'a Path, &'a OsStr), Error> {
    let rel = path
        .strip_prefix(&bound.anchor_path)
        .map_err(|_| Error::new(ErrorKind::Changed))?;
    match leaf(rel) {
        Some(name) => Ok((rel.parent().unwrap_or(Path::new("")), name)),
        // The anchor itself: a directory.
        None => Err(Error::new(ErrorKind::NotRegular)),
    }
}

/// Open the directory `rel` (plain names only) beneath `anchor`, following no symlink and
/// leaving the anchor never. `None` stands for the anchor itself.
pub(crate) fn open_dir_beneath(
    anchor: BorrowedFd<'_>,
    rel: &Path,
) -> Result<Option<OwnedFd>, Errno> {
    if rel.as_os_str().is_empty() {
        return Ok(None);
    }
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        for _ in 0..16 {
            match rustix::fs::openat2(anchor, rel, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(Some(fd)),
                // A rename raced the lookup; the kernel asks for a retry.
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                // Filtered by a seccomp policy: use the walk, but try again next time.
                Err(Errno::PERM) => break,
                Err(e) => return Err(e),
            }
        }
    }
    open_dir_walk(anchor, rel)
}

/// The fallback of [`open_dir_beneath`]: one `openat(O_PATH | O_DIRECTORY | O_NOFOLLOW)` per
/// component. Each step opens a plain name in the directory held, so the walk cannot leave the
/// anchor; a symlink on the way fails with `ENOTDIR` (or `ELOOP`).
pub(crate) fn open_dir_walk(anchor: BorrowedFd<'_>, rel: &Path) -> Result<Option<OwnedFd>, Errno> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut held: Option<OwnedFd> = None;
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(Errno::XDEV);
        };
        let cur = held.as_ref().map_or(anchor, |f| f.as_fd());
        held = Some(rustix::fs::openat(cur, name, flags, Mode::empty())?);
    }
    Ok(held)
}

/// Remove `name` in `dir` only while it still names the file `id` (the one this call created).
fn remove_if_same(dir: BorrowedFd<'_>, name: &OsStr, id: Id) {
    if let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        && Id::of(&st) == id
    {
        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
    }
}

/// Map an open failure: a symlink met, an escape attempt or a component that is no longer a
/// directory all mean the tree changed since the decision.
fn open_error(e: Errno) -> Error {
    match e {
        Errno::LOOP | Errno::XDEV | Errno::NOTDIR => Error::with_source(ErrorKind::Changed, e),
        Errno::ISDIR | Errno::NXIO => Error::with_source(ErrorKind::NotRegular, e),
        e => Error::with_source(ErrorKind::Io, e),
    }
}

fn io(e: Errno) -> Error {
    Error::with_source(ErrorKind::Io, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;
    use cap_std::fs::Dir;

    #[test]
    fn open_dir_walk_refuses_symlinks_and_parent_steps() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink("a", root.join("link")).unwrap();
        let dir = Dir::open_ambient_dir(root, ambient_authority()).unwrap();
        for resolver in [open_dir_walk, open_dir_beneath] {
            assert!(resolver(dir.as_fd(), Path::new("a/b")).unwrap().is_some());
            assert!(resolver(dir.as_fd(), Path::new("")).unwrap().is_none());
            let e = resolver(dir.as_fd(), Path::new("link/b")).unwrap_err();
            assert!(matches!(e, Errno::NOTDIR | Errno::LOOP), "{e:?}");
            let e = resolver(dir.as_fd(), Path::new("a/../..")).unwrap_err();
            assert_eq!(e, Errno::XDEV);
            let e = resolver(dir.as_fd(), Path::new("missing")).unwrap_err();
            assert_eq!(e, Errno::NOENT);
        }
    }
}
