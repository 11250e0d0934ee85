//! Opening a file beneath the root handle with one syscall where the kernel allows it.
//!
//! cap-std already resolves beneath a `Dir` (with openat2 `RESOLVE_BENEATH` on Linux), but its
//! general open path adds bookkeeping syscalls that showed up as a third of read_file's cost.
//! Here the common case is a single `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (the
//! descriptor layer's [`beneath::open_beneath`]); the kernel refuses `..`, absolute paths and
//! any symlink that leaves the directory, absolute symlinks included (`EXDEV`), which is
//! exactly cap-std's rule; kernels without openat2 get cap-std's resolver.

use std::fs::File;
use std::io;
use std::path::Path;

use beneath::{FsErrorKind, Symlinks, open_beneath, open_parent_beneath};
use cap_std::fs::Dir;
use rootid::FileIdentity;
use rustix::fs::OFlags;

/// Open `rel` beneath `dir` read-only, non-blocking (a FIFO opens at once) and without
/// acquiring a controlling terminal. Escapes fail with an error [`crate::fsmap::is_escape`]
/// recognizes.
pub(crate) fn open_read_beneath(dir: &Dir, rel: &Path) -> io::Result<File> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    open_beneath(dir, rel, flags, Symlinks::FollowInside).map(File::from)
}

/// The `(dev, ino)` that `rel` names beneath `dir` now, following symlinks. Used only to
/// compare with an object already opened beneath the root: the result is never returned to
/// anyone, so a path that now leads elsewhere simply compares unequal.
pub(crate) fn identity_now(dir: &Dir, rel: &Path) -> io::Result<FileIdentity> {
    match rustix::fs::statat(dir, rel, rustix::fs::AtFlags::empty()) {
        Ok(st) => Ok(FileIdentity::of(&st)),
        Err(e) if FsErrorKind::of_errno(e) == FsErrorKind::NameTooLong => {
            let (parent, leaf) = open_parent_beneath(dir, rel, Symlinks::FollowInside)?;
            Ok(FileIdentity::of(&rustix::fs::statat(
                &parent,
                leaf,
                rustix::fs::AtFlags::empty(),
            )?))
        }
        Err(e) => Err(e.into()),
    }
}
