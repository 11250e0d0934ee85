//! Opening a file beneath the root handle with one syscall where the kernel allows it.
//!
//! cap-std already resolves beneath a `Dir` (with openat2 `RESOLVE_BENEATH` on Linux), but its
//! general open path adds bookkeeping syscalls that showed up as a third of read_file's cost.
//! Here the common case is a single `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` through
//! rustix; the kernel refuses `..`, absolute paths and any symlink that leaves the directory,
//! absolute symlinks included (`EXDEV`), which is exactly cap-std's rule. Where openat2 is
//! missing (`ENOSYS`) or keeps reporting a concurrent rename (`EAGAIN`), cap-std's own
//! user-space resolver is used, so behaviour is the same on every kernel.

use std::fs::File;
use std::io;
use std::path::Path;

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use rustix::fs::{Mode, OFlags, ResolveFlags};

/// Open `rel` beneath `dir` read-only, non-blocking (a FIFO opens at once) and without
/// acquiring a controlling terminal. Escapes fail with an error [`crate::fsmap::is_escape`]
/// recognizes.
pub(crate) fn open_read_beneath(dir: &Dir, rel: &Path) -> io::Result<File> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    for _ in 0..4 {
        match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
            Ok(fd) => return Ok(File::from(fd)),
            Err(rustix::io::Errno::AGAIN) => continue,
            Err(rustix::io::Errno::NAMETOOLONG) => {
                let (parent, leaf) = split_long(dir, rel)?;
                return open_read_beneath(&parent, leaf);
            }
            Err(rustix::io::Errno::NOSYS) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    dir.open_with(rel, &options).map(|f| f.into_std())
}

/// The `(dev, ino)` that `rel` names beneath `dir` now, following symlinks. Used only to
/// compare with an object already opened beneath the root: the result is never returned to
/// anyone, so a path that now leads elsewhere simply compares unequal.
pub(crate) fn identity_now(dir: &Dir, rel: &Path) -> io::Result<rootid::FileIdentity> {
    match rustix::fs::statat(dir, rel, rustix::fs::AtFlags::empty()) {
        Ok(st) => Ok(rootid::FileIdentity {
            dev: st.st_dev,
            ino: st.st_ino,
        }),
        Err(rustix::io::Errno::NAMETOOLONG) => {
            let (parent, leaf) = split_long(dir, rel)?;
            identity_now(&parent, leaf)
        }
        Err(e) => Err(e.into()),
    }
}

/// A path one syscall cannot take (4,096 bytes with its NUL; the grammar accepts 4,096): open
/// its parent beneath `dir` (cap-std, so still never leaving it) and resolve the leaf beneath
/// that. At this one length a leaf symlink that climbs above its own directory is refused.
fn split_long<'a>(dir: &Dir, rel: &'a Path) -> io::Result<(Dir, &'a Path)> {
    let too_long = || io::Error::from_raw_os_error(libc::ENAMETOOLONG);
    let parent = rel
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(too_long)?;
    let leaf = rel.file_name().map(Path::new).ok_or_else(too_long)?;
    Ok((dir.open_dir(parent)?, leaf))
}
