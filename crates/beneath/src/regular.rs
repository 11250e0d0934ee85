//! Opening a regular file for reading beneath a directory, with one system call to locate it
//! where the kernel allows, and nothing else opened on the way.
//!
//! cap-std already resolves beneath a `Dir` (with openat2 `RESOLVE_BENEATH` on Linux), but its
//! general open path adds bookkeeping syscalls that showed up as a third of `read_file`'s
//! cost. Here the common case is a single `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//! ([`open_beneath`]); the kernel refuses `..`, absolute paths and any symlink that leaves the
//! directory, absolute symlinks included (`EXDEV`), which is exactly cap-std's rule; without
//! openat2, [`open_beneath`]'s own user-space resolution gives the same answers.

use std::fs::File;
use std::io;
use std::path::Path;

use std::os::fd::AsRawFd;

use cap_std::fs::Dir;

use rustix::fs::{FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::{FileId, FsErrorKind, Symlinks, open_beneath, open_parent_beneath};

/// Open `rel` beneath `dir` read-only, non-blocking and without acquiring a controlling
/// terminal, but only if it is a regular file. Escapes fail as [`open_beneath`] fails (see
/// [`FsErrorKind`]); an object that is not a regular file fails with `ENXIO` (as a socket
/// does) without ever being opened for reading.
///
/// The object is first resolved to an `O_PATH` descriptor, which opens nothing: no driver is
/// called for a device, no FIFO peer is woken, no open event is reported. Its type is checked
/// on that descriptor; only a regular file is then opened for reading, through the
/// descriptor's own `/proc/self/fd` entry, so that exactly the checked inode is opened,
/// whatever a concurrent process renames meanwhile. Without `/proc` the path is opened a
/// second time and the result must be the same inode (else `ESTALE`: the path changed while
/// it was opened).
///
/// Returned with the file: its `fstat` (taken on the `O_PATH` descriptor, which names the same
/// inode as the opened file), so the caller needs no second one for its size and identity.
pub fn open_regular_beneath(dir: &Dir, rel: &Path) -> io::Result<(File, Stat)> {
    let located = open_beneath(dir, rel, OFlags::PATH, Symlinks::FollowInside)?;
    let st = rustix::fs::fstat(&located)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Errno::NXIO.into());
    }
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let own = format!("/proc/self/fd/{}", located.as_raw_fd());
    match rustix::fs::open(&own, flags, Mode::empty()) {
        Ok(fd) => Ok((File::from(fd), st)),
        Err(Errno::NOENT | Errno::ACCESS | Errno::PERM) => {
            let file = File::from(open_beneath(dir, rel, flags, Symlinks::FollowInside)?);
            let again = rustix::fs::fstat(&file)?;
            if FileId::of(&again) != FileId::of(&st) {
                return Err(Errno::STALE.into());
            }
            Ok((file, again))
        }
        Err(e) => Err(e.into()),
    }
}

/// The `(dev, ino)` that `rel` names beneath `dir` now, following symlinks (`fstatat`, with a
/// two-step form for paths longer than one system call takes). Meant for comparing with an
/// object already opened beneath `dir`: a path that now leads elsewhere simply compares
/// unequal. Unlike [`open_beneath`], the kernel's `fstatat` does not refuse a symlink that
/// leaves `dir`, so the identity must never be taken for an object beneath it.
pub fn identity_beneath(dir: &Dir, rel: &Path) -> io::Result<FileId> {
    match rustix::fs::statat(dir, rel, rustix::fs::AtFlags::empty()) {
        Ok(st) => Ok(FileId::of(&st)),
        Err(e) if FsErrorKind::of_errno(e) == FsErrorKind::NameTooLong => {
            let (parent, leaf) = open_parent_beneath(dir, rel, Symlinks::FollowInside)?;
            Ok(FileId::of(&rustix::fs::statat(
                &parent,
                leaf,
                rustix::fs::AtFlags::empty(),
            )?))
        }
        Err(e) => Err(e.into()),
    }
}
