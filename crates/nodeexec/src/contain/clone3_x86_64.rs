//! x86-64 only: `clone3(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP)` with the child's first
//! instructions written by hand, since no C library exports a `clone3` that starts a child
//! on a stack of its own.
//!
//! Invariants: the child touches no memory of its parent's stack frame; it moves to the stack
//! it was given before calling anything, calls `entry(arg)`, and exits with its result
//! without ever returning; the parent resumes only once the child executed or exited.

use std::io;
use std::os::fd::RawFd;

use super::*;

/// `clone3(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP)`: a vfork-style child born in the
/// cgroup whose directory `cgroup` names, running `entry(arg)` on `stack`. Returns in the
/// parent only, once the child has executed a program or exited: the child's pid, or the
/// system call's error.
///
/// Written by hand because no C library exports a `clone3` that takes a function to run:
/// a child that shares the parent's memory must start on its own stack, so its first
/// instructions cannot be compiled Rust (which would return into the parent's frames). The
/// kernel starts the child with the stack pointer at the stack's top and every register as
/// the parent had it, except `rax` (0); the child calls `entry` with `arg`, and exits with
/// its result should it ever return (`entry` executes a program or exits). This is the
/// sequence the C library's own `clone` wrapper runs.
///
/// # Safety
///
/// `entry` must never return into this function's caller (it executes or exits), and may make
/// only async-signal-safe calls; `stack` must stay mapped until the child has executed or
/// exited (this call returns after that); what `arg` points to must stay valid as long.
#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "clone3 with a stack of our own: the child's start in assembly"
)]
pub(super) unsafe fn clone3_vfork(
    cgroup: RawFd,
    stack: &Stack,
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> io::Result<libc::pid_t> {
    let args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        // The usable part, above the guard page; the kernel starts the child at its top.
        stack: stack.base.cast::<u8>().wrapping_add(Stack::GUARD) as u64,
        stack_size: Stack::SIZE as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    let result: libc::c_long;
    // SAFETY: the system call reads `args` (on this stack for the call's duration). In the
    // parent it returns like any system call (`rcx` and `r11` clobbered, result in `rax`),
    // after the child has executed or exited (`CLONE_VFORK`). The child starts at the next
    // instruction on the top of `stack` (page-aligned, so 16-byte aligned as the call below
    // requires), clears the frame pointer, calls `entry(arg)` from `r13` and `r12` (kept
    // from the parent), and never reaches this function's code again: should `entry` return,
    // `exit_group` with its result. The caller's promise covers `entry`, `stack` and `arg`.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, {exit_group}",
            "syscall",
            "ud2",
            "2:",
            exit_group = const libc::SYS_exit_group,
            inlateout("rax") libc::SYS_clone3 => result,
            in("rdi") &args as *const CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") entry,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if result < 0 {
        return Err(io::Error::from_raw_os_error(-result as i32));
    }
    Ok(result as libc::pid_t)
}
