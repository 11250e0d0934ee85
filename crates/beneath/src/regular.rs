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

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use cap_std::fs::Dir;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat};
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
    reopen_regular(dir, rel, located)
}

/// [`open_regular_beneath`] only where the kernel resolves `rel` from its caches alone:
/// `openat2` with `RESOLVE_CACHED` (Linux 5.12), so no directory is read from a disk and no
/// server is asked on the way. Fails with `EAGAIN` where a component is not in the kernel's
/// caches. It is an attempt, not an answer: it fails, too, where the kernel cannot tell (no
/// `openat2`, an older kernel, a path too long for one call) and on every refusal, and the
/// caller then opens with [`open_regular_beneath`], whose result (success or error) is the
/// one to give. What it opens is checked and reopened exactly as there.
pub fn open_regular_beneath_cached(dir: &Dir, rel: &Path) -> io::Result<(File, Stat)> {
    // Where the kernel has no openat2 (gVisor, an old kernel), known from an earlier open,
    // no attempt is made.
    if crate::open::NO_OPENAT2.load(Ordering::Relaxed) {
        return Err(Errno::AGAIN.into());
    }
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::CACHED;
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let located =
        rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve).inspect_err(|e| {
            if *e == Errno::NOSYS {
                crate::open::NO_OPENAT2.store(true, Ordering::Relaxed);
            }
        })?;
    reopen_regular(dir, rel, located)
}

/// The common end of both opens: `located` (an `O_PATH` descriptor of `rel`) checked to be a
/// regular file, then opened for reading through its own `/proc/self/fd` entry.
fn reopen_regular(dir: &Dir, rel: &Path, located: OwnedFd) -> io::Result<(File, Stat)> {
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

/// The `(dev, ino)` of the directory at the absolute `path`, provided that no component of
/// it is a symlink: the question "does this canonical path still name the same directory?".
/// A symlink anywhere on the way fails with `ELOOP`, a component that is not a directory with
/// `ENOTDIR`, a missing one with `ENOENT`.
///
/// The kernel answers it in one path walk where it can: `openat2` with
/// `RESOLVE_NO_SYMLINKS` and `O_DIRECTORY`, as an `O_PATH` handle that opens nothing. Where
/// `openat2` is missing or filtered, the path is longer than one call or a rename raced the
/// walk, one `lstat` per component decides the same.
pub fn directory_identity_without_symlinks(path: &Path) -> io::Result<FileId> {
    if !crate::open::NO_OPENAT2.load(Ordering::Relaxed) {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        match rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            flags,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS,
        ) {
            Ok(fd) => return FileId::of_fd(&fd),
            Err(Errno::NOSYS) => crate::open::NO_OPENAT2.store(true, Ordering::Relaxed),
            Err(Errno::PERM | Errno::NAMETOOLONG | Errno::AGAIN) => {}
            Err(e) => return Err(e.into()),
        }
    }
    directory_identity_walked(path)
}

/// [`directory_identity_without_symlinks`] with one `lstat` per component.
fn directory_identity_walked(path: &Path) -> io::Result<FileId> {
    if !path.is_absolute() {
        return Err(Errno::INVAL.into());
    }
    let mut own = None;
    // Ancestors run from the path itself up to `/`, which cannot be a symlink.
    for prefix in path.ancestors().filter(|p| p.parent().is_some()) {
        let meta = std::fs::symlink_metadata(prefix)?;
        if meta.file_type().is_symlink() {
            return Err(Errno::LOOP.into());
        }
        if !meta.is_dir() {
            return Err(Errno::NOTDIR.into());
        }
        own.get_or_insert(meta);
    }
    match own {
        Some(meta) => Ok(FileId::of_std(&meta)),
        None => Ok(FileId::of_std(&std::fs::metadata(path)?)),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use cap_std::ambient_authority;

    use super::*;

    /// What the cached open opens is what the ordinary one opens, and it fails where the
    /// ordinary open refuses. (That a name the kernel let go of is not opened needs the
    /// dentries dropped, root only: `confine-tools`' `read_file` tests hold it, where a test
    /// that cannot run is recorded.)
    #[test]
    fn a_cached_open_opens_what_the_ordinary_open_opens() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/a.txt"), "cached").unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), ambient_authority()).unwrap();
        let rel = Path::new("sub/a.txt");
        let (mut file, st) = open_regular_beneath_cached(&dir, rel).unwrap();
        let (_, ordinary) = open_regular_beneath(&dir, rel).unwrap();
        assert_eq!(FileId::of(&st), FileId::of(&ordinary));
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        assert_eq!(text, "cached");
        drop(file);
        // Refusals are the ordinary open's to give; the attempt fails on them too.
        assert!(open_regular_beneath_cached(&dir, Path::new("../x")).is_err());
        assert!(open_regular_beneath_cached(&dir, Path::new("sub")).is_err());
    }

    /// The one-walk answer and the per-component walk agree: intact, a symlink on the way
    /// (the last component or one above it), a file where a directory was, a missing path.
    #[test]
    fn the_kernel_walk_and_the_lstat_walk_agree() {
        let decide = |path: &Path| {
            let one = directory_identity_without_symlinks(path).map_err(|e| e.raw_os_error());
            let walk = directory_identity_walked(path).map_err(|e| e.raw_os_error());
            assert_eq!(one, walk, "{}", path.display());
            one
        };
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::os::unix::fs::symlink(base.join("a"), base.join("link")).unwrap();
        std::os::unix::fs::symlink(base.join("a/b"), base.join("leaf")).unwrap();
        std::fs::write(base.join("file"), "").unwrap();
        let id = FileId::of_std(&std::fs::metadata(base.join("a/b")).unwrap());
        assert_eq!(decide(&base.join("a/b")), Ok(id));
        assert_eq!(
            decide(&base.join("link/b")),
            Err(Some(Errno::LOOP.raw_os_error()))
        );
        assert_eq!(
            decide(&base.join("leaf")),
            Err(Some(Errno::LOOP.raw_os_error()))
        );
        assert_eq!(
            decide(&base.join("file")),
            Err(Some(Errno::NOTDIR.raw_os_error()))
        );
        assert_eq!(
            decide(&base.join("missing")),
            Err(Some(Errno::NOENT.raw_os_error()))
        );
        assert_eq!(
            decide(Path::new("/")),
            Ok(FileId::of_std(&std::fs::metadata("/").unwrap()))
        );
    }
}
