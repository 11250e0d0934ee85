//! What descriptors the program and the waiter hold: N seals every descriptor it was not
//! meant to pass before `exec`; C and G close everything but what they need.
//!
//! Invariants: after `exec` the program holds its stdio and the descriptors the run passed,
//! nothing else, whatever the embedder (or its launcher) left open without close-on-exec;
//! N's copy of the report pipe stays open until `exec`, so a failing `exec` is reported.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, RawFd};

use rustix::io::Errno;

/// The last descriptor number a range names: `INT_MAX`, above any descriptor the kernel hands
/// out (its table stops at `nr_open`, at most 2^30). Not `u32::MAX`: Linux takes it, but
/// gVisor reads the bound as a signed number and answers `EINVAL`, which sent every start
/// there through a loop of 65,536 `close` calls (a second of the run's start).
const LAST_FD: u32 = i32::MAX as u32;

/// N, just before `exec`: marks close-on-exec every descriptor from 3 up that is not the
/// target of a passed descriptor (`targets`, sorted by target), so the program holds its
/// stdio and what the run handed it, and nothing the embedder (or its launcher: a shell's
/// `7>>file`) left open without close-on-exec. Marking instead of closing keeps N's copy of
/// the report pipe until `exec`, so a failing `exec` is still reported.
///
/// `close_range(CLOSE_RANGE_CLOEXEC)` (Linux 5.11) where `range_works` (probed in P); else
/// every descriptor listed in `/proc/self/fd`; where that cannot be read either, every number
/// up to the larger of the soft descriptor limit and 65,536 (at most 2^20): a descriptor above
/// that can only exist where the limit was lowered after it was opened.
///
/// Async-signal-safe: raw system calls and a directory read into a buffer on the stack.
#[expect(
    unsafe_code,
    reason = "sets the close-on-exec flag of descriptors N holds"
)]
pub(super) fn seal_descriptors(targets: &[(RawFd, RawFd)], range_works: bool) -> io::Result<()> {
    let kept = |fd: RawFd| fd <= 2 || targets.iter().any(|&(_, t)| t == fd);
    if range_works {
        let mut first = 3u32;
        let mut all = true;
        for &(_, target) in targets {
            let target = target as u32;
            if target > first {
                all &= close_range_cloexec(first, target - 1);
            }
            first = first.max(target + 1);
        }
        all &= close_range_cloexec(first, LAST_FD);
        if all {
            return Ok(());
        }
    }
    let cloexec = |fd: RawFd| {
        // SAFETY: only the flag of a number N holds changes; an unused number is EBADF.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        match rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC) {
            Ok(()) | Err(Errno::BADF) => Ok(()),
            Err(e) => Err(io::Error::from(e)),
        }
    };
    use rustix::fs::{Mode, OFlags, RawDir};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if let Ok(dir) = rustix::fs::open(c"/proc/self/fd", flags, Mode::empty()) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 2048];
        let mut entries = RawDir::new(&dir, &mut buf);
        let mut complete = true;
        while let Some(entry) = entries.next() {
            let Ok(entry) = entry else {
                complete = false;
                break;
            };
            let Some(fd) = parse_decimal(entry.file_name().to_bytes()) else {
                continue;
            };
            if !kept(fd) && fd != std::os::fd::AsRawFd::as_raw_fd(&dir) {
                cloexec(fd)?;
            }
        }
        if complete {
            return Ok(());
        }
    }
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let last = soft.clamp(65_536, 1 << 20) as RawFd;
    for fd in 3..last {
        if !kept(fd) {
            cloexec(fd)?;
        }
    }
    Ok(())
}

/// `close_range(first, last, CLOSE_RANGE_CLOEXEC)`; whether it succeeded. Only where P found it
/// works ([`cloexec_range_works`]): a failure writes errno, which N shares with its parent.
#[expect(
    unsafe_code,
    reason = "close_range(2) marking descriptors close-on-exec"
)]
pub(super) fn close_range_cloexec(first: u32, last: u32) -> bool {
    // SAFETY: changes no descriptor's number, only its close-on-exec flag, in N alone.
    unsafe { libc::syscall(libc::SYS_close_range, first, last, CLOSE_RANGE_CLOEXEC) == 0 }
}

/// `CLOSE_RANGE_CLOEXEC` (Linux 5.11), which the libc crate does not name on every target.
pub(super) const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Whether `close_range` with `CLOSE_RANGE_CLOEXEC` works here (Linux 5.11 or later, not
/// refused by a seccomp policy), tried in P on a range that holds no descriptor at each spawn
/// (one system call): a filter may refuse it on one thread and not on another.
pub(crate) fn cloexec_range_works() -> bool {
    close_range_cloexec(LAST_FD, LAST_FD)
}

/// A descriptor number spelled in decimal (a `/proc/self/fd` entry), or `None` (`.`, `..`).
pub(super) fn parse_decimal(name: &[u8]) -> Option<RawFd> {
    if name.is_empty() || name.len() > 9 {
        return None;
    }
    let mut n: RawFd = 0;
    for &b in name {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + RawFd::from(b - b'0');
    }
    Some(n)
}

/// Close every descriptor but those in `keep` (negative entries are ignored).
///
/// # Safety
///
/// Closes descriptors other code may own: only in a forked child that never returns to such
/// code.
#[expect(unsafe_code, reason = "closes descriptors it does not own")]
pub(super) unsafe fn close_all_except(keep: &[RawFd], range_works: bool) {
    let mut kept = [0u32; 8];
    let mut n = 0;
    for &fd in keep {
        if fd >= 0 && n < kept.len() && !kept[..n].contains(&(fd as u32)) {
            kept[n] = fd as u32;
            n += 1;
        }
    }
    kept[..n].sort_unstable();
    let mut first = 0u32;
    for &fd in &kept[..n] {
        if fd > first {
            // SAFETY: the caller's promise.
            unsafe { close_range(first, fd - 1, range_works) };
        }
        first = fd + 1;
    }
    // SAFETY: the caller's promise.
    unsafe { close_range(first, LAST_FD, range_works) };
}

/// Whether `close_range` works here (Linux 5.9 or later, not refused by a seccomp policy),
/// tried on a range that closes nothing (every descriptor number is below [`LAST_FD`]).
#[expect(unsafe_code, reason = "close_range(2) on an empty range")]
pub(super) fn close_range_works() -> bool {
    // SAFETY: closes nothing: no descriptor has the number `LAST_FD`.
    unsafe { libc::syscall(libc::SYS_close_range, LAST_FD, LAST_FD, 0) == 0 }
}

/// `close_range(first, last)` where it works ([`close_range_works`]), else a close loop as
/// far as descriptors usually go. Neither writes errno when `range_works` is right:
/// `close_range` then succeeds, and rustix's `try_close` is a raw system call.
///
/// # Safety
///
/// As for [`close_all_except`].
#[expect(unsafe_code, reason = "closes descriptors it does not own")]
pub(super) unsafe fn close_range(first: u32, last: u32, range_works: bool) {
    // SAFETY: the caller's promise.
    if range_works && unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) } == 0 {
        return;
    }
    for fd in first..=last.min(65_535) {
        // SAFETY: the caller's promise. Most of these numbers are not open: `try_close`
        // answers them `EBADF` (rustix's `close` asserts success).
        unsafe { rustix::io::try_close(fd as RawFd) }.ok();
    }
}
