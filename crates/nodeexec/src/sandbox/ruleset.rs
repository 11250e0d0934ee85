//! The Landlock ruleset: paths opened in the parent, the ruleset made in the child.
//!
//! The program must be able to read its own `/proc/<pid>` (the C library reads
//! `/proc/self/maps` to find the main thread's stack; Node.js reads `/proc/self/cgroup`), and
//! no other process's. A Landlock rule names an inode, and `/proc/<pid>` does not exist
//! before the fork; a ruleset is also shared by every process holding its descriptor, so a
//! rule added to one built in the parent would reach every later child of it. So the parent
//! only opens the paths (`O_PATH`, close-on-exec, inherited by the fork) and checks, by
//! building a throw-away ruleset from them, that the kernel accepts every rule; the child
//! then makes its own ruleset with system calls alone: the same rules, plus `/proc/self`
//! opened there (which names the program's own `/proc/<pid>`), then
//! `landlock_restrict_self`.
//!
//! Hand-written rather than through the `landlock` crate (which the parent still uses for the
//! access-right sets of each ABI): the crate's ruleset allocates, which the child may not.
//! The structures are the kernel's UAPI (`linux/landlock.h`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// `struct landlock_ruleset_attr` (the `scoped` field is ABI 6; older kernels accept the
/// larger structure when the field is zero).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RulesetAttr {
    pub handled_access_fs: u64,
    pub handled_access_net: u64,
    pub scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed in the UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_uint = 1;

/// One rule: a path opened with `O_PATH`, its identity (to check in the child that the
/// descriptor number still names it), the rights beneath it, and the path for reports.
#[derive(Debug)]
pub(super) struct PathRule {
    pub fd: OwnedFd,
    pub identity: (u64, u64),
    pub access: u64,
    pub path: PathBuf,
    /// Whether the rule gives write rights (for reports).
    pub write: bool,
    /// Whether the rule holds only where the run got its read-only view (`/etc` whole, whose
    /// secrets only that view's mounts cover): left out of the child's ruleset otherwise.
    pub view_only: bool,
}

impl PathRule {
    /// Open `path` (following symbolic links) for a rule. Returns the descriptor, whether it
    /// is a directory, and its identity.
    pub(super) fn open(path: &Path) -> io::Result<(OwnedFd, bool, (u64, u64))> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())?;
        // Above the low numbers, which `Command::pass_fd` targets may overwrite in the child
        // (the identity check below catches it if one still does).
        let fd = rustix::io::fcntl_dupfd_cloexec(&fd, 10)?;
        let stat = rustix::fs::fstat(&fd)?;
        let dir = rustix::fs::FileType::from_raw_mode(stat.st_mode).is_dir();
        Ok((fd, dir, (stat.st_dev, stat.st_ino)))
    }
}

/// Create a ruleset (one system call on stack data: async-signal-safe).
#[expect(unsafe_code, reason = "the landlock_create_ruleset system call")]
fn create(attr: &RulesetAttr) -> io::Result<OwnedFd> {
    // SAFETY: the kernel reads `size_of::<RulesetAttr>()` bytes from a live reference.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::from_ref(attr),
            size_of::<RulesetAttr>(),
            0u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the kernel just returned, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Add a path-beneath rule to `ruleset` (one system call on stack data: async-signal-safe).
#[expect(unsafe_code, reason = "the landlock_add_rule system call")]
fn add(ruleset: BorrowedFd<'_>, parent: BorrowedFd<'_>, access: u64) -> io::Result<()> {
    let rule = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: the kernel reads the packed attribute from a live stack value; both
    // descriptors are borrowed, so open for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            std::ptr::from_ref(&rule),
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Why [`check`] failed: the kernel refused the ruleset itself, or one rule.
pub(super) enum CheckError {
    Create(io::Error),
    Rule(io::Error),
}

/// In the parent: build a ruleset from `rules` (and `/proc/self` if `own_proc` is not empty)
/// and drop it, so that whatever the kernel refuses is found before anything is started.
pub(super) fn check(
    attr: &RulesetAttr,
    rules: &[PathRule],
    own_proc: u64,
) -> Result<(), CheckError> {
    let ruleset = create(attr).map_err(CheckError::Create)?;
    for rule in rules {
        add(ruleset.as_fd(), rule.fd.as_fd(), rule.access).map_err(CheckError::Rule)?;
    }
    if own_proc != 0
        && let Some(proc_self) = open_proc_self()
    {
        add(ruleset.as_fd(), proc_self.as_fd(), own_proc).map_err(CheckError::Rule)?;
    }
    Ok(())
}

/// `/proc/self`, opened `O_PATH` (none where `/proc` is not mounted).
fn open_proc_self() -> Option<OwnedFd> {
    open_proc(c"/proc/self")
}

/// A directory of `/proc`, opened `O_PATH` (none where `/proc` is not mounted).
fn open_proc(path: &std::ffi::CStr) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, Mode::empty()).ok()
}

/// In the child: make the ruleset from `rules` (without the view-only ones unless the view
/// was made) plus the program's own `/proc/<pid>` (the whole `/proc` where the run got one of
/// its own PID namespace, which shows nothing but the run's processes), and
/// enforce it on this process (and everything it starts). Only system calls on data the
/// parent prepared (async-signal-safe); meant for the process about to exec (a Landlock
/// domain is permanent). Every descriptor opened here is closed on every path.
#[expect(unsafe_code, reason = "the landlock_restrict_self system call")]
pub(super) fn restrict_self(
    attr: &RulesetAttr,
    rules: &[PathRule],
    own_proc: u64,
    applied: super::mounts::Applied,
) -> io::Result<()> {
    let ruleset = create(attr)?;
    for rule in rules.iter().filter(|r| applied.viewed || !r.view_only) {
        let stat = rustix::fs::fstat(&rule.fd)?;
        if (stat.st_dev, stat.st_ino) != rule.identity {
            // The number no longer names the path the parent opened.
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        add(ruleset.as_fd(), rule.fd.as_fd(), rule.access)?;
    }
    // No /proc mounted: nothing to allow.
    let proc = match applied.own_proc {
        true => open_proc(c"/proc"),
        false => open_proc(c"/proc/self"),
    };
    if own_proc != 0
        && let Some(proc) = proc
    {
        add(ruleset.as_fd(), proc.as_fd(), own_proc)?;
    }
    // SAFETY: the system call reads nothing but a descriptor borrowed for the call.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// `LANDLOCK_RULE_NET_PORT`, `LANDLOCK_ACCESS_NET_BIND_TCP`, `LANDLOCK_ACCESS_NET_CONNECT_TCP`.
const RULE_NET_PORT: libc::c_uint = 2;
const NET_BIND_TCP: u64 = 1;
const NET_CONNECT_TCP: u64 = 2;

/// The network policy's Landlock layer (its Landlock mode): TCP bind refused, TCP connect
/// allowed to `port` alone; nothing of the file system handled. Enforced on this process
/// (async-signal-safe: system calls on stack data).
#[expect(
    unsafe_code,
    reason = "the landlock_add_rule and landlock_restrict_self system calls"
)]
pub(crate) fn restrict_tcp_to(port: u16) -> io::Result<()> {
    let ruleset = create(&RulesetAttr {
        handled_access_fs: 0,
        handled_access_net: NET_BIND_TCP | NET_CONNECT_TCP,
        scoped: 0,
    })?;
    let rule = NetPortAttr {
        allowed_access: NET_CONNECT_TCP,
        port: u64::from(port),
    };
    // SAFETY: the kernel reads the attribute from a live stack value; the ruleset is open.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_NET_PORT,
            std::ptr::from_ref(&rule),
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the system call reads nothing but a descriptor borrowed for the call.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
