//! Read-only paths beneath the write root: bind mounts in a mount namespace of the program's
//! own, made in the child before Landlock (which forbids mount changes once enforced).
//!
//! The embedder names paths the program must not change although they lie beneath the tree
//! it may write ([`Sandbox::read_only`](super::Sandbox::read_only): git's hooks and
//! configuration, which the user's own `git` runs or obeys outside any sandbox). Landlock
//! cannot carve a hole into a tree it allows (its rules only add rights), so the program gets
//! a mount namespace of its own in which:
//!
//! 1. every mount turns private (`MS_REC | MS_PRIVATE` on `/`), so nothing made here reaches
//!    the embedder's namespace;
//! 2. each directory between the write root and a read-only path (`.git` for `.git/hooks`)
//!    is bound onto itself: a mount point cannot be renamed or removed (`EBUSY`), so the
//!    program cannot move the repository aside and make a new one around a hooks directory
//!    of its own;
//! 3. each read-only path is bound onto itself and remounted read-only (`EROFS` for every
//!    write, create, rename or removal beneath it; the path itself cannot be renamed or
//!    removed either), keeping the flags the kernel locks for an unprivileged namespace
//!    (`nosuid`, `nodev`, `noexec`, the atime mode), read in the parent with `statvfs`.
//!
//! `unshare(CLONE_NEWNS)` needs `CAP_SYS_ADMIN` in the process's user namespace: root has it;
//! an ordinary user has it inside the user namespace the containment makes for its PID
//! namespace. Where neither holds (a container whose seccomp profile refuses namespaces, a
//! host with user namespaces disabled) the start fails with [`UNAVAILABLE_ERRNO`], which the
//! run reports as [`ErrorKind::SandboxUnavailable`](crate::ErrorKind::SandboxUnavailable):
//! the program never runs with a read-only path left writable. No namespace is made when no
//! path is named (no cost for a workspace without a repository).
//!
//! 4. each hidden path ([`Sandbox::hide`](super::Sandbox::hide): the embedder's denied
//!    entries) is covered: a directory by a fresh tmpfs mounted read-only, empty, mode 0,
//!    `nosuid,nodev,noexec` (listing it is `EACCES`, nothing beneath it reachable), anything
//!    else by a bind of `/dev/null` (reading it gives nothing, writing it changes nothing).
//!    A covered path is a mount point: it cannot be renamed, removed or hard-linked
//!    (`EBUSY`, `EXDEV`), and a rename of a directory above it carries the cover along (a
//!    mount follows its dentry). The program has no capability left to unmount it. Hidden
//!    paths are covered after the read-only ones, so a hidden directory above a read-only
//!    path covers it too.
//!
//! What it does not cover: a path that does not exist when the run starts (a repository the
//! same run creates with `git init` has writable hooks until the next run), and mounts are
//! made by path in the child, so a path the embedder names must not be one a concurrent
//! process can swap for a symbolic link (the sandbox then makes that link's target
//! read-only instead: less writable, never more).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::StatVfsMountFlags;
use rustix::mount::{MountFlags, MountPropagationFlags};

/// The error number a start fails with when a read-only path is named and no mount namespace
/// can be made (`ENOTRECOVERABLE`: no system call of a start returns it otherwise).
pub(crate) const UNAVAILABLE_ERRNO: i32 = libc::ENOTRECOVERABLE;

/// The prepared mounts: paths as C strings and the remount flags, made in the parent.
#[derive(Debug, Default)]
pub(super) struct Mounts {
    /// Directories bound onto themselves, outermost first.
    pins: Vec<CString>,
    /// Read-only paths with the flags of their remount, outermost first.
    read_only: Vec<(CString, MountFlags)>,
    /// For reports: the read-only paths.
    pub(super) shown: Vec<PathBuf>,
    /// Hidden paths, outermost first, each with whether it is a directory.
    hidden: Vec<(CString, bool)>,
    /// For reports: the hidden paths.
    pub(super) shown_hidden: Vec<PathBuf>,
}

impl Mounts {
    /// The mounts for `read_only` and `hidden` paths beneath `write_root` (all absolute); a
    /// path not beneath it, or missing, is an error (`ENOENT`, `EXDEV`), and so is a hidden
    /// symbolic link (`ELOOP`).
    pub(super) fn prepare(
        write_root: &Path,
        read_only: &[PathBuf],
        hidden: &[PathBuf],
    ) -> io::Result<Self> {
        let mut mounts = Self::default();
        let mut pins: Vec<PathBuf> = Vec::new();
        let mut sorted: Vec<&PathBuf> = read_only.iter().collect();
        sorted.sort_by_key(|p| p.components().count());
        sorted.dedup();
        for path in sorted {
            let rel = path
                .strip_prefix(write_root)
                .map_err(|_| io::Error::from_raw_os_error(libc::EXDEV))?;
            if rel.as_os_str().is_empty() {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
            let vfs = rustix::fs::statvfs(path.as_path())?;
            let mut above = write_root.to_path_buf();
            let parts: Vec<_> = rel.components().collect();
            for part in &parts[..parts.len() - 1] {
                above.push(part);
                if !pins.contains(&above) && !read_only.contains(&above) {
                    pins.push(above.clone());
                }
            }
            mounts
                .read_only
                .push((c_path(path)?, remount_flags(vfs.f_flag)));
            mounts.shown.push(path.clone());
        }
        let mut sorted: Vec<&PathBuf> = hidden.iter().collect();
        sorted.sort_by_key(|p| p.components().count());
        sorted.dedup();
        for path in sorted {
            let rel = path
                .strip_prefix(write_root)
                .map_err(|_| io::Error::from_raw_os_error(libc::EXDEV))?;
            if rel.as_os_str().is_empty() {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
            let meta = std::fs::symlink_metadata(path)?;
            if meta.file_type().is_symlink() {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            mounts.hidden.push((c_path(path)?, meta.is_dir()));
            mounts.shown_hidden.push(path.clone());
        }
        pins.sort_by_key(|p| p.components().count());
        mounts.pins = pins.iter().map(|p| c_path(p)).collect::<io::Result<_>>()?;
        Ok(mounts)
    }

    /// Whether there is anything to mount.
    pub(super) fn is_empty(&self) -> bool {
        self.read_only.is_empty() && self.hidden.is_empty()
    }

    /// In the child, before Landlock: a mount namespace of its own, then the mounts. Only
    /// raw system calls on prepared data (rustix's, which allocate nothing for a `&CStr`).
    #[expect(unsafe_code, reason = "unshare in a forked child")]
    pub(super) fn apply(&self) -> io::Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        use rustix::thread::UnshareFlags;
        // SAFETY: no `CLONE_FILES` (the call's only hazard, a descriptor table other threads
        // stop sharing); the child is single-threaded.
        if unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS) }.is_err() {
            return Err(io::Error::from_raw_os_error(UNAVAILABLE_ERRNO));
        }
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )?;
        for pin in &self.pins {
            rustix::mount::mount_bind(pin.as_c_str(), pin.as_c_str())?;
        }
        for (path, flags) in &self.read_only {
            rustix::mount::mount_bind(path.as_c_str(), path.as_c_str())?;
            rustix::mount::mount_remount(path.as_c_str(), *flags, c"")?;
        }
        for (path, is_dir) in &self.hidden {
            match is_dir {
                true => rustix::mount::mount(
                    c"tmpfs",
                    path.as_c_str(),
                    c"tmpfs",
                    MountFlags::RDONLY
                        | MountFlags::NOSUID
                        | MountFlags::NODEV
                        | MountFlags::NOEXEC,
                    c"mode=000,size=4k,nr_inodes=4",
                )?,
                false => rustix::mount::mount_bind(c"/dev/null", path.as_c_str())?,
            }
        }
        Ok(())
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::ErrorKind::InvalidInput.into())
}

/// The flags of a read-only bind remount that keeps what the mount under it has (an
/// unprivileged namespace may not clear them: `EPERM`).
fn remount_flags(have: StatVfsMountFlags) -> MountFlags {
    let mut flags = MountFlags::BIND | MountFlags::RDONLY;
    let keep = [
        (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
        (StatVfsMountFlags::NODEV, MountFlags::NODEV),
        (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
        (StatVfsMountFlags::NOATIME, MountFlags::NOATIME),
        (StatVfsMountFlags::NODIRATIME, MountFlags::NODIRATIME),
        (StatVfsMountFlags::RELATIME, MountFlags::RELATIME),
    ];
    for (has, set) in keep {
        if have.contains(has) {
            flags |= set;
        }
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directories_above_are_pinned_outermost_first() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("a/b/c")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        let paths = [
            root.join("a/b/c"),
            root.join(".git/hooks"),
            root.join(".git/config"),
        ];
        let m = Mounts::prepare(&root, &paths, &[]).unwrap();
        let shown = |c: &CString| PathBuf::from(std::ffi::OsStr::from_bytes(c.as_bytes()));
        let pins: Vec<PathBuf> = m.pins.iter().map(shown).collect();
        assert_eq!(pins, [root.join(".git"), root.join("a"), root.join("a/b")]);
        assert_eq!(m.read_only.len(), 3);
        assert!(
            m.read_only
                .iter()
                .all(|(_, f)| f.contains(MountFlags::RDONLY | MountFlags::BIND))
        );
        // Outside the write root, the root itself, or missing: refused.
        assert!(Mounts::prepare(&root, &[PathBuf::from("/etc")], &[]).is_err());
        assert!(Mounts::prepare(&root, std::slice::from_ref(&root), &[]).is_err());
        assert!(Mounts::prepare(&root, &[root.join("missing")], &[]).is_err());
        assert!(Mounts::prepare(&root, &[], &[]).unwrap().is_empty());
    }

    #[test]
    fn hidden_paths_are_checked_and_kept_with_their_kind() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("secrets")).unwrap();
        std::fs::write(root.join(".env"), "").unwrap();
        std::os::unix::fs::symlink(".env", root.join("link")).unwrap();
        let m = Mounts::prepare(&root, &[], &[root.join(".env"), root.join("secrets")]).unwrap();
        assert!(!m.is_empty());
        let kinds: Vec<bool> = m.hidden.iter().map(|(_, d)| *d).collect();
        assert_eq!(kinds, [false, true]);
        assert_eq!(m.shown_hidden, [root.join(".env"), root.join("secrets")]);
        // A symlink, outside the write root, the root itself, or missing: refused.
        let refused = |p: PathBuf| Mounts::prepare(&root, &[], &[p]).unwrap_err();
        assert_eq!(refused(root.join("link")).raw_os_error(), Some(libc::ELOOP));
        assert_eq!(
            refused(PathBuf::from("/etc")).raw_os_error(),
            Some(libc::EXDEV)
        );
        assert_eq!(refused(root.clone()).raw_os_error(), Some(libc::EXDEV));
        assert!(Mounts::prepare(&root, &[], &[root.join("missing")]).is_err());
    }
}
