//! Less privilege than the embedder, between `fork` and `exec`, sandbox or not.
//!
//! * The program ([`Privileges::apply`], in the process about to exec): its own session
//!   (`setsid`: no controlling terminal, so no `TIOCSTI` into the embedder's terminal, and no
//!   terminal signals), `PR_SET_NO_NEW_PRIVS` (no set-user-id or file capability gains at
//!   `exec`), an empty capability bounding set where we may empty it, no ambient capabilities
//!   and empty effective, permitted and inheritable sets. With no new privileges, a root
//!   embedder's child keeps no capability through `exec` either: the kernel clamps what
//!   `exec` would grant to the (empty) permitted set.
//! * The waiter, a fork of the embedder that never execs ([`hide_waiter`]): not dumpable (so
//!   no other process of the user, the program included, may read its `/proc/<pid>/environ`
//!   or `mem`, or attach to it), and the embedder's environment strings, which
//!   `/proc/<pid>/environ` shows, overwritten with zeros in its copy of the memory. The
//!   namespace's init shares that memory (and with it both: dumpability belongs to the
//!   memory, and so does the environment block).
//!
//! These processes are forks of a multi-threaded process and may not allocate or lock:
//! everything here is a system call on stack data. rustix's wrappers (`setsid`,
//! `PR_SET_NO_NEW_PRIVS`, `PR_CAPBSET_DROP`, `PR_CAP_AMBIENT`, `capset`, `PR_SET_DUMPABLE`,
//! `open`, `read`) are the raw system calls on Linux, without allocation, so they are safe
//! here; the one `unsafe` block left writes zeros over the environment strings.
//!
//! This is the only place capabilities are dropped: the sandbox's pre-exec step calls
//! [`drop_capabilities`] too.

use std::io;

use rustix::thread::{CapabilitySet, CapabilitySets};

/// What the program gives up before `exec` (both on by default; the embedder may opt out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Privileges {
    /// `setsid`: a session of its own, no controlling terminal.
    pub new_session: bool,
    /// No new privileges, no capabilities.
    pub drop: bool,
    /// Make stdin (a terminal of the run's own) the new session's controlling terminal
    /// (`TIOCSCTTY`, right after `setsid`; only with `new_session`).
    pub terminal: bool,
}

impl Privileges {
    /// Apply in the process about to exec (async-signal-safe).
    pub(crate) fn apply(self) -> io::Result<()> {
        if self.new_session {
            new_session()?;
            if self.terminal {
                // The slave of a pseudo-terminal made for this run: no other session has it,
                // so no privilege is needed to take it.
                rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
            }
        }
        if self.drop {
            rustix::thread::set_no_new_privs(true)?;
            drop_capabilities()?;
        }
        Ok(())
    }
}

/// `setsid(2)`, judged by its `-1` alone. gVisor answers the new session's id as 0 in a PID
/// namespace (Linux answers the caller's pid), which rustix's wrapper asserts against in a
/// debug build; the id itself is never needed.
#[expect(
    unsafe_code,
    reason = "setsid, which rustix wraps with an assertion gVisor breaks"
)]
fn new_session() -> io::Result<()> {
    // SAFETY: setsid takes no argument and touches no memory of ours; async-signal-safe.
    match unsafe { libc::setsid() } {
        -1 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// The highest capability number tried when emptying the bounding set (the kernel refuses
/// numbers above its last with `EINVAL`, which ends the loop; 63 is the last a 64-bit set
/// can name).
const LAST_CAPABILITY: u32 = 63;

/// Empty the bounding set where permitted (`CAP_SETPCAP`), clear the ambient set, then set
/// the effective, permitted and inheritable sets to nothing (lowering is always permitted).
/// Async-signal-safe; meant for the process about to exec, which then keeps nothing through
/// `exec` (with no new privileges, `exec` grants nothing beyond the empty permitted set).
pub(crate) fn drop_capabilities() -> io::Result<()> {
    for cap in 0..=LAST_CAPABILITY {
        // EPERM (no CAP_SETPCAP: then we hold nothing to drop from it either) is fine;
        // EINVAL means past the kernel's last capability.
        let one = CapabilitySet::from_bits_retain(1 << cap);
        if rustix::thread::remove_capability_from_bounding_set(one) == Err(rustix::io::Errno::INVAL)
        {
            break;
        }
    }
    // Before Linux 4.3 there is no ambient set; emptying the permitted set below clears it
    // anyway where there is one.
    rustix::thread::clear_ambient_capability_set().ok();
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    rustix::thread::set_capabilities(None, none)?;
    Ok(())
}

/// Make this process (a fork of the embedder that will not exec) not dumpable and overwrite
/// the embedder's environment strings in its memory with zeros. `environment` is where
/// they lie ([`environment_bounds`], read by the embedder: a fork has the same layout). Best
/// effort: a kernel that does not show the environment's bounds in `/proc/self/stat` (before
/// Linux 3.5) keeps only the first protection.
///
/// # Safety
///
/// Only in a child between fork and exec that never reads its environment again (`getenv`
/// would find empty strings), and in which no other thread could be reading it (a fork is
/// single-threaded); `environment` must be what [`environment_bounds`] returned in the
/// process this one is a fork of.
#[expect(
    unsafe_code,
    reason = "writes zeros over the environment block in memory"
)]
pub(crate) unsafe fn hide_waiter(environment: Option<(usize, usize)>) {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).ok();
    if let Some((start, end)) = environment
        && start < end
    {
        // SAFETY: the environment block lies in this process's own (copy-on-write) stack
        // mapping, between the bounds the kernel reported for the embedder's memory, of which
        // this is a copy; nothing else reads it (the caller's promise).
        unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
    }
}

/// Where this process's environment strings lie in its memory, read once per process (the
/// kernel sets the bounds at `exec`): each run's waiter is a fork of this process and
/// overwrites them in its copy ([`hide_waiter`]), without reading `/proc` itself.
pub(crate) fn environment_bounds() -> Option<(usize, usize)> {
    static BOUNDS: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *BOUNDS.get_or_init(env_bounds)
}

/// `env_start` and `env_end` (fields 50 and 51 of `/proc/self/stat`).
fn env_bounds() -> Option<(usize, usize)> {
    let mut buf = [0u8; 2048];
    let n = read_file(c"/proc/self/stat", &mut buf)?;
    let text = &buf[..n];
    // Fields after the command name (which may hold spaces and parentheses) start at 3.
    let close = text.iter().rposition(|&b| b == b')')?;
    let mut fields = text[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let start = parse_usize(fields.nth(50 - 3)?)?;
    let end = parse_usize(fields.next()?)?;
    Some((start, end))
}

/// Read up to `buf.len()` bytes of a file, without allocation (async-signal-safe).
pub(crate) fn read_file(path: &std::ffi::CStr, buf: &mut [u8]) -> Option<usize> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut total = 0;
    while total < buf.len() {
        match rustix::io::read(&fd, &mut buf[total..]) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    Some(total)
}

/// A decimal number, without allocation.
pub(crate) fn parse_usize(digits: &[u8]) -> Option<usize> {
    if digits.is_empty() {
        return None;
    }
    let mut value: usize = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(usize::from(d - b'0'))?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_bounds_frame_this_process_environment() {
        let (start, end) = env_bounds().expect("env_start/env_end in /proc/self/stat");
        assert!(start < end);
        let environ = std::fs::read("/proc/self/environ").unwrap();
        assert_eq!(end - start, environ.len());
    }

    #[test]
    fn parse_usize_refuses_non_digits() {
        assert_eq!(parse_usize(b"1234"), Some(1234));
        assert_eq!(parse_usize(b""), None);
        assert_eq!(parse_usize(b"12a"), None);
        assert_eq!(parse_usize(b"99999999999999999999999"), None);
    }
}
