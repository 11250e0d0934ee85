//! Less privilege than the embedder, between `fork` and `exec`, sandbox or not.
//!
//! * The program ([`Privileges::apply`], in the process about to exec): its own session
//!   (`setsid`: no controlling terminal, so no `TIOCSTI` into the embedder's terminal, and no
//!   terminal signals), `PR_SET_NO_NEW_PRIVS` (no set-user-id or file capability gains at
//!   `exec`), an empty capability bounding set where we may empty it, no ambient capabilities
//!   and empty effective, permitted and inheritable sets. With no new privileges, a root
//!   embedder's child keeps no capability through `exec` either: the kernel clamps what
//!   `exec` would grant to the (empty) permitted set.
//! * The waiter and the namespace init, forks of the embedder that never exec
//!   ([`hide_waiter`]): not dumpable (so no other process of the user, the program included,
//!   may read their `/proc/<pid>/environ` or `mem`, or attach to them), and the embedder's
//!   environment strings, which `/proc/<pid>/environ` shows, overwritten with zeros in their
//!   copy of the memory.
//!
//! Everything here is a raw system call on stack data: these processes are forks of a
//! multi-threaded process and may not allocate.

// Raw system calls between fork and exec; see the SAFETY notes.
#![allow(unsafe_code)]

use std::io;

/// What the program gives up before `exec` (both on by default; the embedder may opt out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Privileges {
    /// `setsid`: a session of its own, no controlling terminal.
    pub new_session: bool,
    /// No new privileges, no capabilities.
    pub drop: bool,
}

impl Privileges {
    /// Apply in the process about to exec.
    ///
    /// # Safety
    ///
    /// Async-signal-safe; for a child between fork and exec.
    pub(crate) unsafe fn apply(self) -> io::Result<()> {
        // SAFETY: raw system calls on this process with stack values.
        unsafe {
            if self.new_session && libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if self.drop {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                drop_capabilities()?;
            }
        }
        Ok(())
    }
}

/// The highest capability number tried when emptying the bounding set (the kernel refuses
/// numbers above its last with `EINVAL`, which ends the loop).
const LAST_CAPABILITY: libc::c_ulong = 63;

/// Empty the bounding set where permitted (`CAP_SETPCAP`), clear the ambient set, then set the
/// effective, permitted and inheritable sets to nothing (lowering is always permitted).
///
/// # Safety
///
/// Async-signal-safe; for the child between fork and exec.
unsafe fn drop_capabilities() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset on this process with stack values of the kernel's layout.
    unsafe {
        for cap in 0..=LAST_CAPABILITY {
            // EPERM (no CAP_SETPCAP) and EINVAL (past the kernel's last) are both fine.
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && last_errno() == libc::EINVAL
            {
                break;
            }
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let none = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, none.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Make this process (a fork of the embedder that will not exec) not dumpable and overwrite
/// the embedder's environment strings in its memory with zeros. Best effort: a kernel that
/// does not show the environment's bounds in `/proc/self/stat` (before Linux 3.5) keeps only
/// the first protection.
///
/// # Safety
///
/// Async-signal-safe; for a child between fork and exec that never reads its environment
/// again (`getenv` would find empty strings).
pub(crate) unsafe fn hide_waiter() {
    // SAFETY: prctl on this process; the environment block lies in this process's own
    // (copy-on-write) stack mapping, between the bounds the kernel reports for it.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        if let Some((start, end)) = env_bounds()
            && start < end
        {
            std::ptr::write_bytes(start as *mut u8, 0, end - start);
        }
    }
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

/// Read up to `buf.len()` bytes of a file with raw system calls.
pub(crate) fn read_file(path: &std::ffi::CStr, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: open/read/close with a NUL-terminated path and our own stack buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let mut total = 0;
        while total < buf.len() {
            let n = libc::read(fd, buf[total..].as_mut_ptr().cast(), buf.len() - total);
            if n < 0 && last_errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            total += n as usize;
        }
        libc::close(fd);
        Some(total)
    }
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

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
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
