//! The server's private `/tmp` and `/dev/shm`: one bounded tmpfs of its own, detached (in no
//! mount namespace: nothing of the host's file system names it), held by a descriptor, cloned
//! into each sandboxed run's mount namespace, freed by the kernel when the server's
//! descriptor and the last run holding a clone are gone (a server killed by `SIGKILL`
//! included).
//!
//! Made with the mount API (`fsopen("tmpfs")`, `fsconfig` `size`, `nr_inodes` and `mode`,
//! `fsmount` with `nosuid,nodev`): two directories of mode 01777 in it, `tmp` and `shm`, which
//! each run's mount namespace shows at `/tmp` and `/dev/shm` (`open_tree(OPEN_TREE_CLONE)` of
//! the directory, then `move_mount`, in `mounts.rs`). Both share the one bound: what a run
//! writes to either counts against it, and a write past it fails with `ENOSPC`.
//!
//! `fsopen` needs `CAP_SYS_ADMIN` in the caller's user namespace, which an ordinary user's
//! server, and root in a container that dropped it, lack. So the tmpfs is always made by a
//! short-lived helper, forked: it enters a mount namespace of its own (root with the
//! capability) or a user and mount namespace of its own (mapping the server's own uid and gid
//! to themselves, no other id, `setgroups` denied), makes the tmpfs there, checks that the
//! kernel lets a detached tree be cloned (Linux 6.15 and later; earlier kernels refuse with
//! `EINVAL`), and passes the mount's descriptor back over a Unix socket pair
//! (`SCM_RIGHTS`). Where any step fails (user namespaces disabled, a seccomp profile that
//! refuses them, an older kernel), [`Tmpfs::make`] fails with the step's error and
//! [`PrivateDirs`](super::PrivateDirs) keeps plain directories instead (bounded only by the
//! file system they live on); `confine doctor` says which.
//!
//! Written by hand: no crate makes a detached mount in a helper namespace; the system calls
//! are rustix's.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::mount::{FsMountFlags, FsOpenFlags, MountAttrFlags, OpenTreeFlags};

/// The directories of the tmpfs, shown at `/tmp` and `/dev/shm`.
pub(super) const TMP: &std::ffi::CStr = c"tmp";
/// See [`TMP`].
pub(super) const SHM: &std::ffi::CStr = c"shm";

/// The default bound of the private `/tmp` and `/dev/shm` together: a quarter of the
/// machine's memory, at most 2 GiB, at least 64 MiB.
pub fn default_bytes() -> u64 {
    const MIB: u64 = 1 << 20;
    (physical_memory() / 4).clamp(64 * MIB, 2048 * MIB)
}

/// The default bound on their files and directories together.
pub const DEFAULT_INODES: u64 = 262_144;

/// A bounded tmpfs of the server's own (see the module docs).
#[derive(Debug)]
pub(super) struct Tmpfs {
    /// The detached mount's root (mode 0700): its directories `tmp` and `shm` are shown.
    root: OwnedFd,
    bytes: u64,
    inodes: u64,
}

impl Tmpfs {
    /// Make one of `bytes` (rounded up to whole pages by the kernel) and `inodes` entries,
    /// in a forked helper (see the module docs).
    pub(super) fn make(bytes: u64, inodes: u64) -> io::Result<Self> {
        let plan = Plan::new(bytes, inodes)?;
        let root = plan.in_helper()?;
        // Above the low numbers, which a run's passed descriptors may take in the child.
        let root = rustix::io::fcntl_dupfd_cloexec(&root, 10)?;
        Ok(Self {
            root,
            bytes,
            inodes,
        })
    }

    /// The bound in bytes.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The bound on entries.
    pub(super) fn inodes(&self) -> u64 {
        self.inodes
    }

    /// One of its directories ([`TMP`], [`SHM`]), opened `O_PATH` (for a Landlock rule, a
    /// clone and the mount points made inside it).
    pub(super) fn open(&self, dir: &std::ffi::CStr) -> io::Result<OwnedFd> {
        let fd = rustix::fs::openat(
            &self.root,
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 10)?)
    }
}

/// What the helper writes and makes, prepared before the fork (the child allocates nothing).
struct Plan {
    size: CString,
    inodes: CString,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl Plan {
    fn new(bytes: u64, inodes: u64) -> io::Result<Self> {
        if bytes == 0 || inodes == 0 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let number = |n: u64| CString::new(n.to_string()).expect("digits");
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        Ok(Self {
            size: number(bytes),
            inodes: number(inodes),
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        })
    }

    /// Fork the helper, take the mount's descriptor it sends, reap it.
    #[expect(unsafe_code, reason = "fork of a helper that makes only system calls")]
    fn in_helper(&self) -> io::Result<OwnedFd> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )?;
        // SAFETY: the child runs only `Plan::helper`, raw system calls on data prepared
        // above (no allocation, no lock), and leaves by `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            drop(ours);
            let code = match self.helper(&theirs) {
                Ok(()) => 0,
                Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
            };
            // SAFETY: leaves the forked child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        drop(theirs);
        let received = crate::fdpass::receive(ours.as_fd())
            .ok()
            .and_then(|(_, fds)| fds.into_iter().next());
        drop(ours);
        let mut status = 0;
        // SAFETY: reaps the child forked above; `status` is a live stack value.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        match received {
            Some(fd) => Ok(fd),
            None if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) != 0 => {
                Err(io::Error::from_raw_os_error(libc::WEXITSTATUS(status)))
            }
            None => Err(io::Error::from_raw_os_error(libc::EIO)),
        }
    }

    /// In the forked helper: a namespace of its own, the tmpfs, the check, the descriptor
    /// sent.
    #[expect(unsafe_code, reason = "unshare in a forked child")]
    fn helper(&self, socket: &OwnedFd) -> io::Result<()> {
        use rustix::thread::UnshareFlags;
        // SAFETY: no `CLONE_FILES`; the forked child is single-threaded.
        let alone = unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS) };
        if alone.is_err() {
            // A process that is not dumpable (an embedder that hid its environment) may not
            // open its own `/proc/self/uid_map`: dumpable until the maps are written, hidden
            // again after (as the containment does for a run's user namespace).
            use rustix::process::{DumpableBehavior, set_dumpable_behavior};
            let hidden = rustix::process::dumpable_behavior()
                .is_ok_and(|d| d == DumpableBehavior::NotDumpable);
            set_dumpable_behavior(DumpableBehavior::Dumpable).ok();
            // SAFETY: as above.
            unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNS) }?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
            if hidden {
                set_dumpable_behavior(DumpableBehavior::NotDumpable)?;
            }
        }
        let fs = rustix::mount::fsopen(c"tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
        rustix::mount::fsconfig_set_string(&fs, c"size", self.size.as_c_str())?;
        rustix::mount::fsconfig_set_string(&fs, c"nr_inodes", self.inodes.as_c_str())?;
        rustix::mount::fsconfig_set_string(&fs, c"mode", c"0700")?;
        rustix::mount::fsconfig_create(&fs)?;
        let root = rustix::mount::fsmount(
            &fs,
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
        )?;
        for dir in [TMP, SHM] {
            rustix::fs::mkdirat(&root, dir, Mode::from_raw_mode(0o1777))?;
            // The mode as asked, whatever the umask.
            rustix::fs::chmodat(&root, dir, Mode::from_raw_mode(0o1777), AtFlags::empty())?;
        }
        // What each run does: a clone of a directory of the detached tree.
        let probe = rustix::mount::open_tree(
            &root,
            TMP,
            OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
        )?;
        drop(probe);
        crate::fdpass::send(socket.as_fd(), 1, [root.as_fd()])
    }
}

/// Write `data` to `path` in one call (a `/proc` map file).
fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let n = rustix::io::write(&fd, data)?;
    if n != data.len() {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

/// The machine's memory in bytes (0 where unknown).
#[expect(unsafe_code, reason = "sysconf")]
fn physical_memory() -> u64 {
    // SAFETY: sysconf reads no memory of ours.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    // SAFETY: as above.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if pages <= 0 || size <= 0 {
        return 0;
    }
    (pages as u64).saturating_mul(size as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_bound_is_a_quarter_of_memory_within_its_limits() {
        let bytes = default_bytes();
        assert!((64 << 20..=2048 << 20).contains(&bytes), "{bytes}");
        let quarter = physical_memory() / 4;
        if (64 << 20..=2048 << 20).contains(&quarter) {
            assert_eq!(bytes, quarter);
        }
    }

    #[test]
    fn a_zero_bound_is_refused() {
        assert!(Plan::new(0, 1).is_err());
        assert!(Plan::new(1 << 20, 0).is_err());
    }

    // The tmpfs itself (made, bounded at N and N + 1, shared by runs, private) is tested
    // through runs in `tests/sandbox.rs`, where a run's mount namespace shows it.
}
