//! The cgroup file systems, read-only for a root server's unsandboxed program: so that it
//! cannot leave its run's cgroup, nor lift the run's bounds.
//!
//! A root embedder's program runs as uid 0 without capabilities. cgroup files are owned by
//! root with mode 0644, and moving a process needs no capability, only write permission on
//! the destination's `cgroup.procs` (and, in cgroup v2, on the common ancestor's): so
//! without this step the program could write its pid to the root cgroup's `cgroup.procs`
//! (v1 `pids` hierarchy or v2) and start as many processes as it likes, or simply write
//! `max` to its own cgroup's `pids.max`. Permissions cannot stop uid 0; a read-only mount
//! can. In N, before the embedder's steps and the `exec`:
//!
//! 1. a mount namespace of N's own (`unshare(CLONE_NEWNS)`), every mount made private, so
//!    nothing done here reaches the embedder's namespace;
//! 2. every `cgroup` and `cgroup2` mount that P found writable in `/proc/self/mountinfo`
//!    (each v1 controller of a hybrid host, the `unified` mount, a pure v2 host's
//!    `/sys/fs/cgroup`, wherever else one is mounted) remounted read-only, keeping its other
//!    flags: opening any of their files for writing, and making a cgroup, fails with
//!    `EROFS`; reading them (what runtimes do to size their heaps) still works;
//! 3. last, after the capabilities are dropped, a seccomp filter that refuses a new cgroup
//!    namespace (`CLONE_NEWCGROUP` in `unshare` and `clone`), `setns`, and `clone3`
//!    (`ENOSYS`: its flags cannot be read by a filter; the C library falls back to `clone`).
//!
//! Why the filter: a process without capabilities may still make a user namespace, holds
//! every capability inside it, and there may make a cgroup namespace and mount a fresh cgroup
//! file system: rooted at its own cgroup, whose `pids.max` it could then raise (tested). A
//! cgroup file system can only be mounted by a holder of `CAP_SYS_ADMIN` over the cgroup
//! namespace's owner, so without a cgroup namespace of its own (or one it joins with
//! `setns`) the program's user namespaces give it no cgroup mount. A mount namespace it
//! makes inside a user namespace is a copy of this one whose read-only flags the kernel
//! locks, and the program has no capability left here to remount or unmount anything.
//!
//! Reaching the embedder's mounts through `/proc/<pid>/root` (or `/cwd`, `/fd/<n>`) of a
//! process outside the run needs the kernel's ptrace read check on that process: the same
//! user and groups, the target not marked undumpable, **and** the target's permitted
//! capabilities a subset of the program's, which are empty. A root process holding
//! capabilities (the embedder, the host's daemons) is out of reach; the run's waiter and its
//! namespace's init are not dumpable; every other run's program sits in a namespace like
//! this one. What stays reachable: a root process elsewhere on the host that runs with no
//! capabilities at all and is dumpable, and processes in a user namespace created by root
//! (its owner, uid 0, holds every capability there): through those a program could reach
//! their mount namespace. `docs/SECURITY.md` says so.
//!
//! Where it applies: the program is root (effective uid 0 in the embedder's user
//! namespace), keeps no capability (the default), runs unsandboxed (the sandbox's Landlock
//! rules refuse every write outside its write roots, and its own seccomp filter refuses user
//! namespaces) and in a cgroup of the run's (v2 containment or a v1 `pids` bound). Where no
//! mount namespace can be made (a container without `CAP_SYS_ADMIN`), the step finds out
//! whether a writable cgroup mount is left: none (containers mount the cgroup file system
//! read-only) and the run goes on; one, and the start fails rather than run with a bound the
//! program may lift.
//!
//! Cost: a mount namespace made and torn down per run (the teardown waits for the kernel's
//! RCU grace period): measured at 0.3 to 4 ms a run of `/bin/true` on a loaded machine
//! (`docs/PERFORMANCE.md`). A namespace made once per embedder and joined with `setns` would
//! avoid the teardown; not done yet.
//!
//! Invariants: P reads the mount table and prepares every path and flag; N makes only raw
//! system calls on them (no allocation, no lock).

use std::ffi::CString;
use std::io;

use rustix::mount::{MountFlags, MountPropagationFlags};

use crate::sandbox::seccomp::Program;

/// The error number a start fails with where a writable cgroup mount is left and no mount
/// namespace can be made (`EROFS` is what the program would have met; `ENOTRECOVERABLE` is
/// the sandbox's; this one no step of a start returns otherwise).
const UNCOVERED_ERRNO: i32 = libc::EMEDIUMTYPE;

/// The writable cgroup mounts and how to remount each read-only, and the filter.
pub(crate) struct CgroupCover {
    /// Mount points, with the flags of their read-only remount.
    mounts: Vec<(CString, MountFlags)>,
    program: Program,
}

impl CgroupCover {
    /// Read this process's mount table (in P).
    pub(crate) fn prepare() -> io::Result<CgroupCover> {
        let table = std::fs::read_to_string("/proc/self/mountinfo")?;
        Ok(CgroupCover {
            mounts: writable_cgroup_mounts(&table)?,
            program: Program::cgroup_namespace_refused(),
        })
    }

    /// N, before the embedder's steps: the namespace and the read-only remounts (see the
    /// module docs). Async-signal-safe.
    #[expect(unsafe_code, reason = "unshare in a cloned child")]
    pub(crate) fn mount(&self) -> io::Result<()> {
        if self.mounts.is_empty() {
            return Ok(());
        }
        use rustix::thread::UnshareFlags;
        // SAFETY: no `CLONE_FILES` (the call's only hazard, a descriptor table other threads
        // stop sharing); N is single-threaded.
        if unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS) }.is_err() {
            // P found a writable cgroup mount: the program could lift its bound.
            return Err(io::Error::from_raw_os_error(UNCOVERED_ERRNO));
        }
        rustix::mount::mount_change(
            c"/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )?;
        for (path, flags) in &self.mounts {
            match rustix::mount::mount_remount(path.as_c_str(), *flags, c"") {
                Ok(()) => {}
                // Not a mount point by this path any more (covered by a later mount, or
                // gone): unreachable by its path; checked below.
                Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
            // Whatever the path now leads to, it must not be a writable cgroup file system.
            if let (Ok(fs), Ok(vfs)) = (
                rustix::fs::statfs(path.as_c_str()),
                rustix::fs::statvfs(path.as_c_str()),
            ) && matches!(fs.f_type as u64, CGROUP_SUPER_MAGIC | CGROUP2_SUPER_MAGIC)
                && !vfs.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY)
            {
                return Err(io::Error::from_raw_os_error(UNCOVERED_ERRNO));
            }
        }
        Ok(())
    }

    /// N, last before `exec`: the filter (no cgroup namespace, no `setns`, no `clone3`).
    pub(crate) fn filter(&self) -> io::Result<()> {
        self.program.load()
    }
}

/// `statfs`'s `f_type` of the cgroup file systems (v1, v2); the field's type differs
/// between C libraries, hence `u64` and a cast.
const CGROUP_SUPER_MAGIC: u64 = 0x0027_e0eb;
const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;

/// The mount points of every `cgroup`/`cgroup2` mount of `table` (a `mountinfo`) that is not
/// read-only, with the flags of a read-only bind remount that keeps their other per-mount
/// flags.
fn writable_cgroup_mounts(table: &str) -> io::Result<Vec<(CString, MountFlags)>> {
    let mut mounts = Vec::new();
    for line in table.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(point), Some(options), Some(fstype)) =
            (fields.get(4), fields.get(5), fields.get(dash + 1))
        else {
            continue;
        };
        if !matches!(*fstype, "cgroup" | "cgroup2") {
            continue;
        }
        let mut flags = MountFlags::BIND | MountFlags::RDONLY;
        let mut read_only = false;
        for option in options.split(',') {
            match option {
                "ro" => read_only = true,
                "nosuid" => flags |= MountFlags::NOSUID,
                "nodev" => flags |= MountFlags::NODEV,
                "noexec" => flags |= MountFlags::NOEXEC,
                "noatime" => flags |= MountFlags::NOATIME,
                "nodiratime" => flags |= MountFlags::NODIRATIME,
                "relatime" => flags |= MountFlags::RELATIME,
                _ => {}
            }
        }
        if read_only {
            continue;
        }
        let point = CString::new(unescape(point))
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        mounts.push((point, flags));
    }
    Ok(mounts)
}

/// A `mountinfo` path: space, tab, newline and backslash appear as `\ooo` octal escapes.
fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)) && d[0] <= b'3');
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_cgroup_mounts_are_found_with_their_flags() {
        let table = "\
31 23 0:28 / /sys/fs/cgroup rw,nosuid,nodev,noexec - tmpfs tmpfs rw,mode=755
39 31 0:36 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
42 31 0:39 / /sys/fs/cgroup/ro ro,nosuid - cgroup cgroup rw,memory
43 31 0:40 / /mnt/a\\040b rw - cgroup2 none rw
";
        let found = writable_cgroup_mounts(table).unwrap();
        let paths: Vec<&[u8]> = found.iter().map(|(p, _)| p.as_bytes()).collect();
        assert_eq!(
            paths,
            [
                &b"/sys/fs/cgroup/pids"[..],
                b"/sys/fs/cgroup/unified",
                b"/mnt/a b"
            ]
        );
        let base = MountFlags::BIND | MountFlags::RDONLY;
        assert_eq!(
            found[0].1,
            base | MountFlags::NOSUID
                | MountFlags::NODEV
                | MountFlags::NOEXEC
                | MountFlags::RELATIME
        );
        assert_eq!(found[1].1, base | MountFlags::RELATIME);
        assert_eq!(found[2].1, base);
    }

    #[test]
    fn unescape_reads_octal() {
        assert_eq!(unescape("a\\040b\\134c"), b"a b\\c");
        assert_eq!(unescape("a\\9"), b"a\\9");
        assert_eq!(unescape("end\\"), b"end\\");
    }
}
