//! Signal masks and dispositions in the child, through `libc` (rustix has no wrappers).
//!
//! Invariants: C keeps SIGTERM blocked and takes it only with `sigwaitinfo`, so the request
//! to end is never lost between two checks; N resets every handler and the mask before
//! `exec`, so the program starts with the defaults whatever the embedder set.

use std::mem::MaybeUninit;

/// A signal set holding `signals` (none: the empty set).
#[expect(unsafe_code, reason = "sigemptyset and sigaddset")]
pub(super) fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the whole set it is given.
    unsafe { libc::sigemptyset(set.as_mut_ptr()) };
    // SAFETY: initialised just above.
    let mut set = unsafe { set.assume_init() };
    for &signal in signals {
        // SAFETY: adds a signal number to an initialised set on the stack.
        unsafe { libc::sigaddset(&mut set, signal) };
    }
    set
}

/// `sigprocmask(how, set)`: block, or set the mask to, `set`.
#[expect(unsafe_code, reason = "sigprocmask")]
pub(super) fn set_signal_mask(how: libc::c_int, set: &libc::sigset_t) {
    // SAFETY: reads an initialised set; no old set is asked for.
    unsafe { libc::sigprocmask(how, set, std::ptr::null_mut()) };
}

/// Take one of the blocked signals in `set` (`sigwaitinfo`), or give up after `nanos`
/// nanoseconds (`sigtimedwait`); the signal number, or -1.
#[expect(unsafe_code, reason = "sigwaitinfo and sigtimedwait")]
pub(super) fn wait_signal(set: &libc::sigset_t, nanos: Option<i64>) -> libc::c_int {
    match nanos {
        // SAFETY: reads an initialised set; no information is asked for.
        None => unsafe { libc::sigwaitinfo(set, std::ptr::null_mut()) },
        Some(nanos) => {
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: nanos,
            };
            // SAFETY: reads an initialised set and a timeout on the stack.
            unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &pause) }
        }
    }
}

/// Set `signal`'s disposition to the default (`SIG_DFL`) or to ignored (`SIG_IGN`).
#[expect(unsafe_code, reason = "signal(2)")]
pub(super) fn set_disposition(signal: libc::c_int, disposition: libc::sighandler_t) {
    debug_assert!(disposition == libc::SIG_DFL || disposition == libc::SIG_IGN);
    // SAFETY: installs no handler of ours, only the default or ignoring, which any code
    // may do for any signal (SIGKILL and SIGSTOP refuse with EINVAL).
    unsafe { libc::signal(signal, disposition) };
}

/// The embedding process's handlers (tokio's SIGCHLD, an embedder's SIGINT, a real-time
/// signal's) mean nothing in a process that will not exec: back to the defaults (exec would
/// do this for N anyway, and N, on this memory until it executes, must run none of them).
/// The signals the C library keeps for itself (32 and 33 with glibc) refuse, harmlessly.
pub(super) fn reset_signal_handlers() {
    // Linux's signals are numbered 1 to 64.
    for signal in 1..=64 {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            set_disposition(signal, libc::SIG_DFL);
        }
    }
}
