//! The clones: N born in the run's cgroup (`clone3` with `CLONE_INTO_CGROUP`), the probe that
//! a cgroup accepts a process, and the stacks G and N run on.
//!
//! Invariants: a clone that shares its parent's memory (`CLONE_VM`) starts on a stack of its
//! own ([`Stack`], with a guard page below it) and never returns into the code that cloned it;
//! N's stack is unmapped only once N has executed the program or exited (`CLONE_VFORK`); G's
//! is never unmapped. The architecture-specific entry of a vfork-style `clone3` child, a few
//! lines of assembly, is in `clone3_x86_64.rs`; elsewhere N is a plain `clone3` copy.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;

use rustix::process::Pid;

use super::*;

/// `CLONE_INTO_CGROUP` (Linux 5.7): the child starts in the cgroup given by descriptor.
pub(super) const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The kernel's `struct clone_args` (version 2, with `cgroup`).
#[repr(C)]
#[derive(Default)]
pub(super) struct CloneArgs {
    pub(super) flags: u64,
    pub(super) pidfd: u64,
    pub(super) child_tid: u64,
    pub(super) parent_tid: u64,
    pub(super) exit_signal: u64,
    pub(super) stack: u64,
    pub(super) stack_size: u64,
    pub(super) tls: u64,
    pub(super) set_tid: u64,
    pub(super) set_tid_size: u64,
    pub(super) cgroup: u64,
}

/// `fork`, but the child is born in the cgroup whose directory `cgroup` names: returns as
/// `fork` does (0 in the child, the child's pid in the parent, -1 with errno set).
///
/// # Safety
///
/// As for `fork` in a multi-threaded process: the child may only make async-signal-safe
/// calls until it execs or exits (it has no `atfork` handlers run for it, like `_Fork`).
#[cfg(any(test, not(target_arch = "x86_64")))]
#[expect(unsafe_code, reason = "clone3, which forks")]
pub(crate) unsafe fn clone_into_cgroup(cgroup: RawFd) -> libc::pid_t {
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM and with no stack duplicates this process as fork does
    // (the caller's promise covers the child); the arguments live on the stack for the
    // call's duration.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    pid as libc::pid_t
}

/// A child born in the cgroup whose directory `cgroup` names, created the way a run's program
/// is ([`ChildPlan::start_program`]), that exits at once with 0; returns its pid for the
/// caller to reap. Discovery creates one before trusting a hierarchy, so that a kernel or a
/// policy that refuses this way of creating a process (`clone3` filtered, say) is found out
/// there and the run falls back to the next containment mode, not at a run's start. Signals
/// are blocked around the clone (the child, which shares this process's memory until it
/// exits, must run none of this process's handlers).
#[expect(unsafe_code, reason = "creates a child that only calls _exit")]
pub(crate) fn spawn_exiting_in(cgroup: RawFd) -> io::Result<Pid> {
    extern "C" fn entry(_: *mut libc::c_void) -> libc::c_int {
        exit_now(0)
    }
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    let mut all = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigfillset initialises the set it is given.
    unsafe { libc::sigfillset(all.as_mut_ptr()) };
    // SAFETY: reads the set filled above; writes the calling thread's previous mask to `old`.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old.as_mut_ptr()) };
    #[cfg(target_arch = "x86_64")]
    let pid = Stack::new().and_then(|stack| {
        // SAFETY: `entry` only exits; `stack` outlives the child (this call returns after
        // the child has exited: `CLONE_VFORK`).
        unsafe { clone3_vfork(cgroup, &stack, entry, std::ptr::null_mut()) }.and_then(positive)
    });
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the child makes one async-signal-safe call, `_exit`.
    let pid = match unsafe { clone_into_cgroup(cgroup) } {
        0 => exit_now(entry(std::ptr::null_mut())),
        pid if pid < 0 => Err(io::Error::last_os_error()),
        pid => positive(pid),
    };
    // SAFETY: restores the mask read above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut()) };
    pid
}

/// A new child's pid as its parent got it (positive: `clone` returns 0 only in the child).
pub(super) fn positive(pid: libc::pid_t) -> io::Result<Pid> {
    Pid::from_raw(pid).ok_or_else(|| io::ErrorKind::InvalidData.into())
}

/// A stack for a process cloned onto this memory: an anonymous private mapping with a guard
/// page below it, unmapped on drop. N runs on one until it executes the program (it is gone
/// from it when the stack is dropped: see [`ChildPlan::start_program`]); G runs on one for
/// its whole life, which is forgotten, never unmapped ([`ChildPlan::start_init`]). Made in C
/// or G with raw system calls (no allocation).
pub(super) struct Stack {
    pub(super) base: *mut libc::c_void,
}

impl Stack {
    /// Usable bytes above the guard page: more than the setup before `exec` needs (the
    /// sandbox's steps included); the embedder's hooks get what a thread of 256 KiB would.
    pub(super) const SIZE: usize = 256 * 1024;
    pub(super) const GUARD: usize = 4096;

    #[expect(unsafe_code, reason = "mmap and mprotect of a fresh mapping")]
    pub(super) fn new() -> io::Result<Stack> {
        use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};
        // SAFETY: a new anonymous mapping at an address the kernel picks: nothing else is
        // affected.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                Self::GUARD + Self::SIZE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::STACK,
            )
        }?;
        let stack = Stack { base };
        // SAFETY: the lowest page of the mapping just made, which nothing uses.
        unsafe { rustix::mm::mprotect(base, Self::GUARD, MprotectFlags::empty()) }?;
        Ok(stack)
    }

    /// The highest address, where a stack that grows down starts (16-byte aligned).
    pub(super) fn top(&self) -> *mut libc::c_void {
        self.base
            .cast::<u8>()
            .wrapping_add(Self::GUARD + Self::SIZE)
            .cast()
    }
}

impl Drop for Stack {
    #[expect(unsafe_code, reason = "munmap of our own mapping")]
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made; no one runs on it any more.
        unsafe { rustix::mm::munmap(self.base, Self::GUARD + Self::SIZE) }.ok();
    }
}
