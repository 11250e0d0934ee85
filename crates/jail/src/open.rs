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
use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use confine_beneath::{
    Climb, FileId, FsErrorKind, Symlinks, climb_to, open_beneath, remove_if_same,
};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::bound::AllowBound;
use crate::error::{Error, ErrorKind};
use crate::filejail::FileJail;
use crate::lexical::{leaf, within};

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
        let parent =
            open_dir_beneath(bound.anchor.as_fd(), parent_rel).map_err(
                |e| match FsErrorKind::of(&e) {
                    FsErrorKind::NotFound => Error::new(ErrorKind::NotFound),
                    _ => open_error(e),
                },
            )?;
        let parent_fd = parent.as_ref().map_or(bound.anchor.as_fd(), |p| p.as_fd());
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd =
            rustix::fs::openat(parent_fd, name, flags, Mode::empty()).map_err(|e| match e {
                Errno::NOENT => Error::new(ErrorKind::NotFound),
                e => open_error(e.into()),
            })?;
        let st = rustix::fs::fstat(&fd).map_err(io)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Error::new(ErrorKind::NotRegular));
        }
        self.check_opened(parent_fd, &fd, FileId::of(&st), bound)?;
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
        let parent =
            open_dir_beneath(bound.anchor.as_fd(), parent_rel).map_err(
                |e| match FsErrorKind::of(&e) {
                    FsErrorKind::NotFound => Error::new(ErrorKind::ParentNotFound),
                    _ => open_error(e),
                },
            )?;
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
                Err(e) => return Err(open_error(e.into())),
            }
            match rustix::fs::openat(parent_fd, name, base | OFlags::NONBLOCK, Mode::empty()) {
                Ok(fd) => {
                    opened = Some((fd, false));
                    break;
                }
                // Removed between the two opens: try creating again.
                Err(Errno::NOENT) => {}
                Err(e) => return Err(open_error(e.into())),
            }
        }
        let (fd, created) = opened.ok_or_else(|| Error::new(ErrorKind::Changed))?;
        let st = rustix::fs::fstat(&fd).map_err(io)?;
        let id = FileId::of(&st);
        let checked = if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            Err(Error::new(ErrorKind::NotRegular))
        } else {
            self.check_opened(parent_fd, &fd, id, bound)
        };
        if let Err(e) = checked {
            if created {
                let _ = remove_if_same(parent_fd, name, id);
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
        id: FileId,
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
    pub(crate) fn check_chain(&self, start: BorrowedFd<'_>, stop: FileId) -> Result<(), Error> {
        let deny = |id| {
            if self.deny_ids.contains(&id) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        match climb_to(start, stop, deny).map_err(|e| Error::with_source(ErrorKind::Io, e))? {
            Climb::Reached => Ok(()),
            Climb::Stopped(_) => Err(Error::new(ErrorKind::Denied)),
            Climb::NotBeneath => Err(Error::new(ErrorKind::Changed)),
        }
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
fn open_dir_beneath(anchor: BorrowedFd<'_>, rel: &Path) -> io::Result<Option<OwnedFd>> {
    if rel.as_os_str().is_empty() {
        return Ok(None);
    }
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    open_beneath(anchor, rel, flags, Symlinks::Refuse).map(Some)
}

/// Map an open failure: a symlink met, an escape attempt or a component that is no longer a
/// directory all mean the tree changed since the decision.
fn open_error(e: io::Error) -> Error {
    match FsErrorKind::of(&e) {
        FsErrorKind::Symlink | FsErrorKind::Escape | FsErrorKind::NotDirectory => {
            Error::with_source(ErrorKind::Changed, e)
        }
        FsErrorKind::NotRegular => Error::with_source(ErrorKind::NotRegular, e),
        _ => Error::with_source(ErrorKind::Io, e),
    }
}

fn io(e: Errno) -> Error {
    Error::with_source(ErrorKind::Io, e)
}
