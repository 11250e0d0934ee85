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

use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags, StatVfsMountFlags};
use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};

/// The most covers and rehomed paths a run's view takes (each a descriptor held on the
/// child's stack while the mounts move).
const MAX_CLONES: usize = 16;

/// What a cover shows at its target ([`Mounts::isolate`]).
#[derive(Debug)]
pub(super) struct Cover {
    pub(super) source: CoverSource,
    /// The identity (device, inode) of the source's directory, checked at the target once
    /// the cover is there.
    pub(super) identity: (u64, u64),
    pub(super) target: PathBuf,
}

/// Where a cover's tree comes from.
#[derive(Debug)]
pub(super) enum CoverSource {
    /// A directory of the server's namespace, cloned by path in the child.
    Dir(PathBuf),
    /// A directory of a detached tmpfs (`tmpfs.rs`), opened `O_PATH`, cloned by descriptor.
    Tmpfs(OwnedFd),
}

/// A cover's source as the child clones it.
#[derive(Debug)]
enum ViewSource {
    Path(CString),
    Fd(OwnedFd),
}

/// The error number a start fails with when a read-only path is named and no mount namespace
/// can be made (`ENOTRECOVERABLE`: no system call of a start returns it otherwise).
pub(crate) const UNAVAILABLE_ERRNO: i32 = libc::ENOTRECOVERABLE;

/// The prepared mounts: paths as C strings and the remount flags, made in the parent.
#[derive(Debug, Default)]
pub(super) struct Mounts {
    /// Whether the run gets the read-only view of everything outside its writable places
    /// (see [`Mounts::isolate`]); empty otherwise.
    view: Option<View>,
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
    /// For reports: the secrets of `/etc` the view covers.
    pub(super) shown_secrets: Vec<PathBuf>,
    /// The embedder's PID namespace (device and inode of `/proc/self/ns/pid`), read when the
    /// view is prepared: a run in another one gets a `/proc` of its own namespace.
    server_pid_ns: Option<(u64, u64)>,
}

/// What [`Mounts::apply`] made.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Applied {
    /// The read-only view of everything outside the writable places.
    pub(super) viewed: bool,
    /// A `/proc` of the run's own PID namespace over the host's: it shows the run's
    /// processes and nothing else, so the whole of it may be read.
    pub(super) own_proc: bool,
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

    /// Give the run a mount namespace whose view of everything is read-only but `writable`
    /// (each with its identity: the write root first, then the embedder's), with each cover
    /// (the server's private `/tmp` and `/dev/shm`, [`Cover`]) shown at its target.
    /// `readable` are the other paths the program may read: one beneath a cover's target is
    /// shown again at its own path inside the cover, as is a writable one, so that covering
    /// `/tmp` hides no workspace or installation that lives in it. The mount points this
    /// needs are made now inside the cover's source (which only this server's runs write),
    /// beneath its descriptor, no symbolic link followed.
    pub(super) fn isolate(
        &mut self,
        writable: &[(PathBuf, (u64, u64))],
        readable: &[PathBuf],
        covers: Vec<Cover>,
    ) -> io::Result<()> {
        self.server_pid_ns = rustix::fs::stat("/proc/self/ns/pid")
            .ok()
            .map(|st| (st.st_dev, st.st_ino));
        let mut view = View::default();
        // Covers whose target exists, by canonical target, each with a descriptor of its
        // source for the mount points.
        let mut kept = Vec::new();
        for cover in covers {
            let Ok(target) = std::fs::canonicalize(&cover.target) else {
                continue;
            };
            let dir = match &cover.source {
                CoverSource::Dir(path) => rustix::fs::open(
                    path,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )?,
                CoverSource::Tmpfs(fd) => rustix::io::fcntl_dupfd_cloexec(fd, 3)?,
            };
            kept.push((cover, target, dir));
        }
        let beneath = |path: &Path| {
            kept.iter()
                .find(|(_, target, _)| path != target && path.starts_with(target))
        };
        let writable: Vec<(PathBuf, (u64, u64))> = writable
            .iter()
            .map(|(path, identity)| Ok((std::fs::canonicalize(path)?, *identity)))
            .collect::<io::Result<_>>()?;
        let mut all: Vec<(PathBuf, bool)> =
            writable.iter().map(|(p, _)| (p.clone(), true)).collect();
        for path in readable {
            if let Ok(path) = std::fs::canonicalize(path) {
                all.push((path, false));
            }
        }
        all.sort_by_key(|(p, _)| p.components().count());
        let mut rehomed: Vec<PathBuf> = Vec::new();
        for (path, write) in &all {
            let own_source = |(cover, _, _): &(Cover, PathBuf, OwnedFd)| match &cover.source {
                CoverSource::Dir(source) => path.starts_with(source),
                CoverSource::Tmpfs(_) => false,
            };
            if kept.iter().any(own_source) {
                // The covers' own sources: shown at their targets.
                continue;
            }
            match beneath(path) {
                Some((_, target, dir)) => {
                    let rel = path.strip_prefix(target).expect("beneath the target");
                    mount_point(path, dir, rel)?;
                    if !rehomed.contains(path) {
                        rehomed.push(path.clone());
                    }
                }
                None if *write => view.selves.push(c_path(path)?),
                None => {}
            }
        }
        if kept.len() + rehomed.len() > MAX_CLONES {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        view.rehomed = rehomed
            .iter()
            .map(|p| c_path(p))
            .collect::<io::Result<_>>()?;
        for (cover, target, _) in kept {
            view.writable.push((c_path(&target)?, cover.identity));
            let source = match cover.source {
                CoverSource::Dir(path) => ViewSource::Path(c_path(&path)?),
                CoverSource::Tmpfs(fd) => ViewSource::Fd(fd),
            };
            view.covers.push((source, c_path(&target)?));
        }
        for (path, identity) in &writable {
            view.writable.push((c_path(path)?, *identity));
        }
        self.view = Some(view);
        Ok(())
    }

    /// With the view (after [`Mounts::isolate`]): cover each of `secrets` (paths outside the
    /// writable places, each with whether it is a directory) like a hidden path, once
    /// everything is read-only: a directory by an empty read-only tmpfs of mode 0, anything
    /// else by `/dev/null`.
    pub(super) fn cover_secrets(&mut self, secrets: Vec<(PathBuf, bool)>) -> io::Result<()> {
        let Some(view) = self.view.as_mut() else {
            return Ok(());
        };
        for (path, dir) in secrets {
            view.secrets.push((c_path(&path)?, dir));
            self.shown_secrets.push(path);
        }
        Ok(())
    }

    /// Whether the run gets a mount namespace of its own at all.
    pub(super) fn isolates(&self) -> bool {
        self.view.is_some() || !self.is_empty()
    }

    /// Whether there is anything to mount.
    pub(super) fn is_empty(&self) -> bool {
        self.read_only.is_empty() && self.hidden.is_empty()
    }

    /// In the child, before Landlock: a mount namespace of its own, then the mounts. Only
    /// raw system calls on prepared data (rustix's, which allocate nothing for a `&CStr`).
    /// Returns whether the read-only view was made (where no namespace can be made and none
    /// is required (no read-only or hidden path), not, and the caller falls back to the
    /// seccomp rule that refuses metadata changes everywhere), and whether the run got a
    /// `/proc` of its own ([`Applied`]).
    #[expect(unsafe_code, reason = "unshare in a forked child")]
    pub(super) fn apply(&self) -> io::Result<Applied> {
        if !self.isolates() {
            return Ok(Applied::default());
        }
        use rustix::thread::UnshareFlags;
        // SAFETY: no `CLONE_FILES` (the call's only hazard, a descriptor table other threads
        // stop sharing); the child is single-threaded.
        if unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS) }.is_err() {
            if self.is_empty() {
                return Ok(Applied::default());
            }
            return Err(io::Error::from_raw_os_error(UNAVAILABLE_ERRNO));
        }
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )?;
        let viewed = match &self.view {
            Some(view) => {
                view.apply()?;
                true
            }
            None => false,
        };
        let own_proc = viewed && self.mount_own_proc();
        for pin in &self.pins {
            rustix::mount::mount_bind(pin.as_c_str(), pin.as_c_str())?;
        }
        for (path, flags) in &self.read_only {
            rustix::mount::mount_bind(path.as_c_str(), path.as_c_str())?;
            rustix::mount::mount_remount(path.as_c_str(), *flags, c"")?;
        }
        for (path, is_dir) in &self.hidden {
            cover(path, *is_dir)?;
        }
        Ok(Applied { viewed, own_proc })
    }

    /// In the child, in its mount namespace: where the run is in a PID namespace other than
    /// the embedder's (the containment made one), a fresh `/proc` of that namespace over the
    /// host's, so `ps` and `/proc/<pid>` show the run's processes and nothing of the host's.
    /// The kernel refuses it where the host's `/proc` is partly masked (a container's
    /// runtime covers some of its files) or the namespace's owner lacks the right: the run
    /// then keeps the host's `/proc`, of which only its program's own entry is readable.
    fn mount_own_proc(&self) -> bool {
        let Some(server) = self.server_pid_ns else {
            return false;
        };
        let Ok(ours) = rustix::fs::stat(c"/proc/self/ns/pid") else {
            return false;
        };
        if (ours.st_dev, ours.st_ino) == server {
            return false;
        }
        rustix::mount::mount(
            c"proc",
            c"/proc",
            c"proc",
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            c"",
        )
        .is_ok()
    }
}

/// Cover `path`: a directory by a fresh tmpfs mounted read-only, empty, mode 0,
/// `nosuid,nodev,noexec`; anything else by a bind of `/dev/null`.
fn cover(path: &CString, is_dir: bool) -> io::Result<()> {
    match is_dir {
        true => rustix::mount::mount(
            c"tmpfs",
            path.as_c_str(),
            c"tmpfs",
            MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            c"mode=000,size=4k,nr_inodes=4",
        )?,
        false => rustix::mount::mount_bind(c"/dev/null", path.as_c_str())?,
    }
    Ok(())
}

/// The read-only view of a run (see [`Mounts::isolate`]).
#[derive(Debug, Default)]
struct View {
    /// Paths beneath a cover's target (outermost first): each cloned before the covers are
    /// moved over their targets, then moved back onto its own path, its mount point inside
    /// the cover.
    rehomed: Vec<CString>,
    /// (source, target): the server's private `/tmp` and `/dev/shm` (its tmpfs's
    /// directories, or plain directories) shown over `/tmp`, `/dev/shm`.
    covers: Vec<(ViewSource, CString)>,
    /// Writable paths outside every cover, bound onto themselves (so that each is a mount
    /// of its own, which can be made writable again alone).
    selves: Vec<CString>,
    /// The paths made writable again after everything was made read-only, each with the
    /// identity the mount found there must have.
    writable: Vec<(CString, (u64, u64))>,
    /// Secrets outside the writable places (`/etc/shadow`), each with whether it is a
    /// directory, covered last.
    secrets: Vec<(CString, bool)>,
}

impl View {
    /// In the child, in its new mount namespace: the binds, everything read-only, the
    /// writable places writable again, each checked, and the working directory entered again
    /// through the new mounts (the one inherited names the read-only copy).
    fn apply(&self) -> io::Result<()> {
        let mut cwd = [0u8; 4096];
        let have_cwd = getcwd(&mut cwd);
        // Every clone first, while each source can still be named at its path (a private
        // directory in `/tmp`, a workspace in `/tmp`), then the covers over their targets,
        // then the rehomed paths back at theirs, inside the covers. No allocation: a fixed
        // array of descriptors (`isolate` bounds their number).
        let mut clones: [Option<OwnedFd>; MAX_CLONES] = [const { None }; MAX_CLONES];
        let clone = OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE;
        for (slot, (source, _)) in clones.iter_mut().zip(&self.covers) {
            *slot = Some(match source {
                ViewSource::Path(path) => {
                    rustix::mount::open_tree(rustix::fs::CWD, path.as_c_str(), clone)?
                }
                ViewSource::Fd(fd) => {
                    rustix::mount::open_tree(fd, c"", clone | OpenTreeFlags::AT_EMPTY_PATH)?
                }
            });
        }
        let rest = clones.iter_mut().skip(self.covers.len());
        for (slot, path) in rest.zip(&self.rehomed) {
            *slot = Some(rustix::mount::open_tree(
                rustix::fs::CWD,
                path.as_c_str(),
                clone,
            )?);
        }
        let targets = self.covers.iter().map(|(_, target)| target);
        for (slot, target) in clones.iter_mut().zip(targets.chain(&self.rehomed)) {
            let Some(tree) = slot.take() else { break };
            rustix::mount::move_mount(
                &tree,
                c"",
                rustix::fs::CWD,
                target.as_c_str(),
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
            )?;
        }
        for path in &self.selves {
            rustix::mount::mount_bind_recursive(path.as_c_str(), path.as_c_str())?;
        }
        mount_setattr(c"/", true, MOUNT_ATTR_RDONLY, 0)?;
        for (path, identity) in &self.writable {
            mount_setattr(path.as_c_str(), false, 0, MOUNT_ATTR_RDONLY)?;
            let stat = rustix::fs::stat(path.as_c_str())?;
            if (stat.st_dev, stat.st_ino) != *identity {
                // The path named something else in the child than in the parent.
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
        }
        for (path, is_dir) in &self.secrets {
            match cover(path, *is_dir) {
                // Gone since the walk: nothing left to hide.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                other => other?,
            }
        }
        if let Some(cwd) = have_cwd
            .then(|| std::ffi::CStr::from_bytes_until_nul(&cwd).ok())
            .flatten()
        {
            rustix::process::chdir(cwd)?;
        }
        Ok(())
    }
}

/// The working directory's path into `buf` (NUL-terminated), with the raw system call (no
/// allocation); `false` where it has none reachable.
#[expect(unsafe_code, reason = "the getcwd system call on a stack buffer")]
fn getcwd(buf: &mut [u8; 4096]) -> bool {
    // SAFETY: the kernel writes at most `buf.len()` bytes into the live buffer.
    let r = unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) };
    r > 0 && buf[0] == b'/'
}

/// `MOUNT_ATTR_RDONLY` and `AT_RECURSIVE` (`linux/mount.h`, `fcntl.h`).
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)` (Linux 5.12; every kernel with the Landlock ABI the sandbox requires
/// has it) on the mount at `path`, and every mount beneath it where `recursive`.
#[expect(unsafe_code, reason = "the mount_setattr system call")]
fn mount_setattr(path: &std::ffi::CStr, recursive: bool, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: the kernel reads a NUL-terminated path and `size_of::<MountAttr>()` bytes of a
    // live stack value.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            std::ptr::from_ref(&attr),
            size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Make `rel` beneath `dir` (a cover's source) a mount point for `path`: a directory for a
/// directory, an empty file for anything else; each step opened beneath the one above with
/// no symbolic link followed, so that one a child left there is refused (`ELOOP`), never
/// followed out.
fn mount_point(path: &Path, dir: &OwnedFd, rel: &Path) -> io::Result<()> {
    let is_dir = std::fs::metadata(path)?.is_dir();
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let Some((last, above)) = parts.split_last() else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let step = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mkdir = |at: &OwnedFd, name: &std::ffi::OsStr| match rustix::fs::mkdirat(
        at,
        name,
        Mode::from_raw_mode(0o755),
    ) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    };
    let mut at = rustix::io::fcntl_dupfd_cloexec(dir, 3)?;
    for name in above {
        mkdir(&at, name)?;
        at = rustix::fs::openat(&at, *name, step, Mode::empty())?;
    }
    let made = match is_dir {
        true => {
            mkdir(&at, last)?;
            rustix::fs::openat(&at, *last, step, Mode::empty())?
        }
        false => rustix::fs::openat(
            &at,
            *last,
            OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?,
    };
    let kind = rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(&made)?.st_mode);
    if kind.is_dir() != is_dir {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    Ok(())
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
