//! The Landlock ruleset: paths opened in the parent, the ruleset made in the child.
//!
//! The program must be able to read its own `/proc/<pid>` (the C library reads
//! `/proc/self/maps` to find the main thread's stack; Node.js reads `/proc/self/cgroup`), and
//! no other process's. A Landlock rule names an inode, and `/proc/<pid>` does not exist
//! before the fork; a ruleset is also shared by every process holding its descriptor, so a
//! rule added to one built in the parent would reach every later child of it. So the parent
//! only opens the paths (`O_PATH`, close-on-exec, inherited by the fork) and checks, by
//! building a throw-away ruleset from them, that the kernel accepts every rule; the child
//! then makes its own ruleset with raw system calls: the same rules, plus `/proc/self`
//! opened there (which names the program's own `/proc/<pid>`), then
//! `landlock_restrict_self`.
//!
//! Hand-written rather than through the `landlock` crate (which the parent still uses for the
//! access-right sets of each ABI): the crate's ruleset allocates, which the child may not.
//! The structures are the kernel's UAPI (`linux/landlock.h`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
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

/// Create a ruleset.
///
/// # Safety
///
/// Async-signal-safe (one system call on stack data).
#[expect(
    unsafe_code,
    reason = "a raw system call, also used between fork and exec"
)]
unsafe fn create(attr: &RulesetAttr) -> io::Result<RawFd> {
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
    Ok(fd as RawFd)
}

/// Add a path-beneath rule to `ruleset`.
///
/// # Safety
///
/// Async-signal-safe (one system call on stack data).
#[expect(
    unsafe_code,
    reason = "a raw system call, also used between fork and exec"
)]
unsafe fn add(ruleset: RawFd, parent: RawFd, access: u64) -> io::Result<()> {
    let rule = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent,
    };
    // SAFETY: the kernel reads the packed attribute from a live stack value.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
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
#[expect(
    unsafe_code,
    reason = "calls the raw Landlock wrappers on owned descriptors"
)]
pub(super) fn check(
    attr: &RulesetAttr,
    rules: &[PathRule],
    own_proc: u64,
) -> Result<(), CheckError> {
    // SAFETY: one system call; the descriptor returned is owned at once.
    let ruleset = unsafe { OwnedFd::from_raw_fd(create(attr).map_err(CheckError::Create)?) };
    for rule in rules {
        // SAFETY: both descriptors are live for the call.
        unsafe { add(ruleset.as_raw_fd(), rule.fd.as_raw_fd(), rule.access) }
            .map_err(CheckError::Rule)?;
    }
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if own_proc != 0
        && let Ok(proc_self) = rustix::fs::open("/proc/self", flags, Mode::empty())
    {
        // SAFETY: both descriptors are live for the call.
        unsafe { add(ruleset.as_raw_fd(), proc_self.as_raw_fd(), own_proc) }
            .map_err(CheckError::Rule)?;
    }
    Ok(())
}

/// In the child: make the ruleset from `rules` plus the program's own `/proc/<pid>`, and
/// enforce it on this process (and everything it starts).
///
/// # Safety
///
/// Async-signal-safe: only system calls, on data prepared by the parent; for the child
/// between fork and exec.
#[expect(unsafe_code, reason = "raw system calls between fork and exec")]
pub(super) unsafe fn restrict_self(
    attr: &RulesetAttr,
    rules: &[PathRule],
    own_proc: u64,
) -> io::Result<()> {
    // SAFETY: raw system calls on descriptors this process holds and stack values; every
    // descriptor opened here is closed on every path.
    unsafe {
        let ruleset = create(attr)?;
        let result = fill_and_enforce(ruleset, rules, own_proc);
        libc::close(ruleset);
        result
    }
}

/// The body of [`restrict_self`], with the ruleset made.
///
/// # Safety
///
/// As for [`restrict_self`].
#[expect(unsafe_code, reason = "raw system calls between fork and exec")]
unsafe fn fill_and_enforce(ruleset: RawFd, rules: &[PathRule], own_proc: u64) -> io::Result<()> {
    // SAFETY: as in `restrict_self`.
    unsafe {
        for rule in rules {
            let fd = rule.fd.as_raw_fd();
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstat(fd, &mut stat) != 0
                || (stat.st_dev, stat.st_ino) != (rule.identity.0, rule.identity.1)
            {
                // The number no longer names the path the parent opened.
                return Err(io::Error::from_raw_os_error(libc::EBADF));
            }
            add(ruleset, fd, rule.access)?;
        }
        if own_proc != 0 {
            let proc_self = libc::open(
                c"/proc/self".as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            // No /proc mounted: nothing to allow.
            if proc_self >= 0 {
                let added = add(ruleset, proc_self, own_proc);
                libc::close(proc_self);
                added?;
            }
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
