//! Opening a relative path beneath a directory descriptor: one `openat2` where the kernel has
//! it, the same rule in user space where it does not.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Set once `openat2` has been found missing (`ENOSYS`), so later calls go straight to the
/// fallback.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// How often a lookup that the kernel reports as raced by a rename (`EAGAIN`) is retried.
const RETRIES: usize = 16;

/// What a resolution beneath a directory does with a symlink on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Symlinks {
    /// Follow a relative symlink whose target stays beneath the directory; refuse one that
    /// leaves it and every absolute symlink, even one pointing inside (its meaning depends on
    /// where the directory is mounted). cap-std's rule.
    FollowInside,
    /// Refuse every symlink, at any component (`ELOOP` or `ENOTDIR`).
    Refuse,
}

/// Open `rel` beneath `dir` with `flags` (an access mode and flags such as `O_NONBLOCK`,
/// `O_DIRECTORY` or `O_PATH`; never `O_CREAT`: this opens what exists). `O_CLOEXEC` is always
/// added. An empty `rel` (or `.`) opens `dir` itself again.
///
/// The resolution never leaves `dir`, whatever a concurrent process renames meanwhile: `..`
/// above it, an absolute path or a symlink leading out fail with `EXDEV` (or, in the cap-std
/// fallback, a `PermissionDenied` error without an OS number); both classify as
/// [`FsErrorKind::Escape`](crate::FsErrorKind::Escape).
///
/// With the kernel's `openat2` (Linux 5.6) this is one system call,
/// `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (and `RESOLVE_NO_SYMLINKS` for
/// [`Symlinks::Refuse`]). Where it is missing (`ENOSYS`) or filtered (`EPERM` from a seccomp
/// policy), the same rule is kept in user space: one `openat(O_NOFOLLOW)` per plain name for
/// [`Symlinks::Refuse`], cap-std's resolver for [`Symlinks::FollowInside`]. A path too long
/// for one system call (`ENAMETOOLONG`) is opened in two steps, its parent first.
pub fn open_beneath(
    dir: impl AsFd,
    rel: impl AsRef<Path>,
    flags: OFlags,
    symlinks: Symlinks,
) -> io::Result<OwnedFd> {
    open_beneath_fd(dir.as_fd(), rel.as_ref(), flags | OFlags::CLOEXEC, symlinks)
}

fn open_beneath_fd(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    symlinks: Symlinks,
) -> io::Result<OwnedFd> {
    // The directory itself (an empty path) is reopened by the fallback: openat2 refuses "".
    if !rel.as_os_str().is_empty() && !NO_OPENAT2.load(Ordering::Relaxed) {
        let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        if symlinks == Symlinks::Refuse {
            resolve |= ResolveFlags::NO_SYMLINKS;
        }
        for _ in 0..RETRIES {
            match rustix::fs::openat2(dir, rel, flags, Mode::empty(), resolve) {
                Ok(fd) => return Ok(fd),
                // A rename raced the lookup; the kernel asks for a retry.
                Err(Errno::AGAIN) => continue,
                Err(Errno::NAMETOOLONG) => {
                    let (parent, leaf) = open_parent_beneath(dir, rel, symlinks)?;
                    return open_beneath_fd(parent.as_fd(), leaf, flags, symlinks);
                }
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                // Filtered by a seccomp policy: use the fallback, but try again next time.
                Err(Errno::PERM) => break,
                Err(e) => return Err(e.into()),
            }
        }
    }
    open_fallback(dir, rel, flags, symlinks)
}

/// Open the parent directory of `rel` beneath `dir` (as an `O_PATH` handle) and return it
/// with the last component. For a path one system call cannot take (4,096 bytes with its NUL).
pub fn open_parent_beneath(
    dir: impl AsFd,
    rel: &Path,
    symlinks: Symlinks,
) -> io::Result<(OwnedFd, &Path)> {
    let too_long = || io::Error::from_raw_os_error(libc::ENAMETOOLONG);
    let parent = rel
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(too_long)?;
    let leaf = rel.file_name().map(Path::new).ok_or_else(too_long)?;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok((open_beneath_fd(dir.as_fd(), parent, flags, symlinks)?, leaf))
}

/// The user-space twin of the `openat2` call.
fn open_fallback(
    dir: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    symlinks: Symlinks,
) -> io::Result<OwnedFd> {
    if rel.as_os_str().is_empty() {
        return Ok(rustix::fs::openat(dir, ".", flags, Mode::empty())?);
    }
    match symlinks {
        Symlinks::Refuse => open_walk(dir, rel, flags),
        Symlinks::FollowInside => open_cap_std(dir, rel, flags),
    }
}

/// One `openat(O_NOFOLLOW)` per component. Each step opens a plain name in the directory held,
/// so the walk cannot leave `dir`; a symlink on the way fails with `ENOTDIR` or `ELOOP`, a
/// `..` or an absolute path with `EXDEV`.
pub(crate) fn open_walk(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    let names = rel
        .components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::from_raw_os_error(libc::EXDEV)),
        })
        .collect::<io::Result<Vec<&OsStr>>>()?;
    let Some((last, parents)) = names.split_last() else {
        return Ok(rustix::fs::openat(dir, ".", flags, Mode::empty())?);
    };
    let step = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut held: Option<OwnedFd> = None;
    for name in parents {
        let cur = held.as_ref().map_or(dir, |f| f.as_fd());
        held = Some(rustix::fs::openat(cur, *name, step, Mode::empty())?);
    }
    let cur = held.as_ref().map_or(dir, |f| f.as_fd());
    Ok(rustix::fs::openat(
        cur,
        *last,
        flags | OFlags::NOFOLLOW,
        Mode::empty(),
    )?)
}

/// cap-std's resolver, which follows symlinks only while they stay beneath the directory.
fn open_cap_std(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
    let dir = Dir::from_std_file(std::fs::File::from(dir.try_clone_to_owned()?));
    if flags.contains(OFlags::DIRECTORY) {
        return Ok(dir.open_dir(rel)?.into_std_file().into());
    }
    let access = OFlags::RWMODE;
    let mut options = OpenOptions::new();
    let mode = flags & access;
    options
        .read(mode == OFlags::RDONLY || mode == OFlags::RDWR)
        .write(mode == OFlags::WRONLY || mode == OFlags::RDWR)
        .custom_flags((flags - access - OFlags::CLOEXEC).bits() as i32);
    Ok(dir.open_with(rel, &options)?.into_std().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FsErrorKind;

    fn tree() -> (tempfile::TempDir, OwnedFd) {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f.txt"), "hi").unwrap();
        std::os::unix::fs::symlink("a", root.join("link")).unwrap();
        std::os::unix::fs::symlink("../..", root.join("a/up")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("abs")).unwrap();
        let fd = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        (t, fd)
    }

    fn kind(r: io::Result<OwnedFd>) -> FsErrorKind {
        FsErrorKind::of(&r.unwrap_err())
    }

    /// Every resolver (kernel and user space) decides the same table.
    #[test]
    fn open_beneath_table_for_every_resolver() {
        let (_t, dir) = tree();
        let d = dir.as_fd();
        let f = OFlags::RDONLY;
        type Resolver = fn(BorrowedFd<'_>, &Path, OFlags, Symlinks) -> io::Result<OwnedFd>;
        let resolvers: [Resolver; 2] = [open_beneath_fd, open_fallback];
        for open in resolvers {
            for s in [Symlinks::Refuse, Symlinks::FollowInside] {
                assert!(open(d, Path::new("a/b/f.txt"), f, s).is_ok());
                assert!(open(d, Path::new(""), f, s).is_ok());
                assert_eq!(
                    kind(open(d, Path::new("a/../.."), f, s)),
                    FsErrorKind::Escape
                );
                assert_eq!(kind(open(d, Path::new("/etc"), f, s)), FsErrorKind::Escape);
                assert_eq!(
                    kind(open(d, Path::new("missing"), f, s)),
                    FsErrorKind::NotFound
                );
            }
            // A symlink staying inside: followed, or refused.
            assert!(open(d, Path::new("link/b/f.txt"), f, Symlinks::FollowInside).is_ok());
            let k = kind(open(d, Path::new("link/b/f.txt"), f, Symlinks::Refuse));
            assert!(
                matches!(k, FsErrorKind::Symlink | FsErrorKind::NotDirectory),
                "{k:?}"
            );
            // Symlinks leading out, or absolute: refused either way.
            for s in [Symlinks::Refuse, Symlinks::FollowInside] {
                for p in ["a/up/x", "abs/passwd"] {
                    let k = kind(open(d, Path::new(p), f, s));
                    assert!(
                        matches!(
                            k,
                            FsErrorKind::Escape | FsErrorKind::Symlink | FsErrorKind::NotDirectory
                        ),
                        "{p} {s:?} {k:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn open_beneath_takes_a_path_longer_than_one_system_call() {
        let t = tempfile::tempdir().unwrap();
        // 17 levels of 240 bytes: over 4,096 bytes in all.
        let seg = "d".repeat(240);
        let mut rel = std::path::PathBuf::new();
        let dir =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        // Built one level at a time: the host path is too long for one system call too.
        let mut cur =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..17 {
            rel.push(&seg);
            rustix::fs::mkdirat(&cur, seg.as_str(), Mode::from_raw_mode(0o755)).unwrap();
            cur = rustix::fs::openat(
                &cur,
                seg.as_str(),
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
        }
        rustix::fs::openat(
            &cur,
            "f",
            OFlags::WRONLY | OFlags::CREATE,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rel.push("f");
        assert!(rel.as_os_str().len() > 4096);
        open_beneath(&dir, &rel, OFlags::RDONLY, Symlinks::Refuse).unwrap();
    }
}
