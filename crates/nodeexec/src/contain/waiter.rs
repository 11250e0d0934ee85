//! C's side of the run once N started: the waiter that reaps, reports N's status, and at the
//! end kills and sweeps everything of the run, then exits mirroring N's status.
//!
//! Invariants: C reaps every child it has (it is the run's child subreaper) and exits only
//! when it has none left, so once P has reaped C nothing the run started is alive; the end
//! (P's SIGTERM or P's death, the same request through PDEATHSIG) is taken whenever it
//! comes, and is idempotent; async-signal-safe throughout.

use std::ffi::CStr;
use std::os::fd::BorrowedFd;

use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions};

use crate::sweep::kill_descendants;

use super::*;

/// C after creating its child (G or N).
pub(super) struct Waiter<'a> {
    /// G or N.
    pub(super) child: Pid,
    /// `MODE_*` flags.
    pub(super) mode: u8,
    /// Where to report N's status (without a namespace).
    pub(super) report: Option<BorrowedFd<'a>>,
    /// `cgroup.kill` of the run's cgroup.
    pub(super) cgroup_kill: Option<BorrowedFd<'a>>,
    /// The cgroup's parent directory and its name there.
    pub(super) cgroup_removal: Option<(BorrowedFd<'a>, &'a CStr)>,
    /// The v1 `pids` cgroup's parent directory and its name there.
    pub(super) pids_removal: Option<(BorrowedFd<'a>, &'a CStr)>,
    /// P's pid: when C's parent is no longer P, P died and C cleans up for it.
    pub(super) embedder: libc::pid_t,
    /// The child's wait status, once reaped.
    pub(super) status: Option<libc::c_int>,
}

impl Waiter<'_> {
    /// Wait for SIGCHLD (reap; exit once no child is left) or SIGTERM (the end: P asked, or
    /// P died).
    pub(super) fn wait(mut self) -> ! {
        let waited = signal_set(&[libc::SIGTERM, libc::SIGCHLD]);
        loop {
            if wait_signal(&waited, None) == libc::SIGTERM {
                self.end();
            }
            if !self.reap(false) {
                // No child left: N is reaped and no orphan of the run is alive.
                self.exit();
            }
        }
    }

    /// Reap what has exited (`block`: wait for one child); false once no child is left.
    pub(super) fn reap(&mut self, block: bool) -> bool {
        let options = if block {
            wait_all()
        } else {
            wait_all() | WaitOptions::NOHANG
        };
        loop {
            match rustix::process::wait(options) {
                Ok(Some((pid, status))) => {
                    if pid == self.child {
                        self.status = Some(status.as_raw());
                        if self.mode & MODE_PID_NAMESPACE == 0 {
                            send_value(self.report, MSG_STATUS, status.as_raw());
                        }
                    }
                    if block {
                        return true;
                    }
                }
                // Children, none of them ended yet.
                Ok(None) => return true,
                Err(Errno::INTR) => {}
                // ECHILD: no child left.
                Err(_) => return false,
            }
        }
    }

    /// Kill everything the run started, reap it all, exit. Every pid signalled is an
    /// unreaped child of C (or, in the sweep, an unreaped descendant), so it cannot have
    /// been reused.
    pub(super) fn end(&mut self) -> ! {
        if let Some(kill) = self.cgroup_kill {
            rustix::io::write(kill, b"1").ok();
        }
        if self.status.is_none() {
            if self.mode & (MODE_SUBREAPER | MODE_PID_NAMESPACE) == 0 {
                // The process-group twin: N's own group (N left C's by `setsid`).
                rustix::process::kill_process_group(self.child, Signal::KILL).ok();
            }
            rustix::process::kill_process(self.child, Signal::KILL).ok();
        }
        if self.mode & MODE_SUBREAPER == 0 {
            while self.status.is_none() && self.reap(true) {}
            self.exit();
        }
        // A cgroup's kill or a namespace's end takes everything inside with it: give it a
        // moment before paying for a scan of `/proc` (which is for what escaped).
        if self.mode & (MODE_CGROUP | MODE_PID_NAMESPACE) != 0 {
            let chld = signal_set(&[libc::SIGCHLD]);
            for _ in 0..5 {
                if !self.reap(false) {
                    break;
                }
                wait_signal(&chld, Some(20_000_000));
            }
        }
        // Until no child is left: reap what is dead, sweep what is not, wait.
        while self.reap(false) {
            kill_descendants(rustix::process::getpid());
            if !self.reap(true) {
                break;
            }
        }
        if Pid::as_raw(rustix::process::getppid()) != self.embedder {
            self.remove_cgroups();
        }
        self.exit()
    }

    /// P died: remove the run's cgroup and its v1 `pids` cgroup in its place, once they
    /// are empty (a second at most each; what is left is for the next embedder's sweep).
    pub(super) fn remove_cgroups(&self) {
        if let Some((parent, name)) = self.cgroup_removal {
            remove_when_empty(parent, name, self.cgroup_kill);
        }
        if let Some((parent, name)) = self.pids_removal {
            remove_when_empty(parent, name, None);
        }
    }

    /// Exit as the child did (or as killed, when it was never seen to end).
    pub(super) fn exit(&self) -> ! {
        mirror(self.status.unwrap_or(libc::SIGKILL))
    }
}

/// Remove the cgroup `name` of the directory `parent`, retrying every millisecond for a
/// second while it is not yet empty, and repeating the kill (`1` to `kill`) meanwhile.
pub(super) fn remove_when_empty(parent: BorrowedFd<'_>, name: &CStr, kill: Option<BorrowedFd<'_>>) {
    let pause = rustix::thread::Timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    for _ in 0..1000 {
        match rustix::fs::unlinkat(parent, name, rustix::fs::AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => return,
            Err(_) => {}
        }
        if let Some(kill) = kill {
            rustix::io::write(kill, b"1").ok();
        }
        let _ = rustix::thread::nanosleep(&pause);
    }
}

/// `waitpid` options for any child, clones included (`__WALL`).
pub(super) fn wait_all() -> WaitOptions {
    WaitOptions::from_bits_retain(libc::__WALL as u32)
}

/// End this process the way `status` says its child ended.
#[expect(
    unsafe_code,
    reason = "kill(2) with a signal number rustix cannot name"
)]
pub(super) fn mirror(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // No core file of the waiter, whatever the signal.
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).ok();
        set_disposition(signal, libc::SIG_DFL);
        set_signal_mask(libc::SIG_SETMASK, &signal_set(&[]));
        // SAFETY: signals this process itself; the signal may be a real-time one, which
        // rustix's `Signal` does not name.
        unsafe { libc::kill(rustix::process::getpid().as_raw_pid(), signal) };
        exit_now(128 + signal);
    }
    exit_now(libc::WEXITSTATUS(status))
}

/// `_exit`: end this process now, running no destructor, `atexit` handler or stdio flush
/// (what a fork of the embedder must do: those belong to the embedder).
#[expect(unsafe_code, reason = "_exit")]
pub(super) fn exit_now(code: libc::c_int) -> ! {
    // SAFETY: `_exit` is async-signal-safe and only ends the process.
    unsafe { libc::_exit(code) }
}
