//! The child side of containment: what runs between `fork` and `exec`.
//!
//! std forks the child **C** (after `setpgid`, `chdir`, the stdio `dup2`s and the signal mask
//! reset, which std performs before any `pre_exec` closure), then calls [`ChildPlan::run`]:
//!
//! ```text
//! embedding process P
//!   └─ C  waiter, new process group leader, PDEATHSIG=SIGKILL, no file descriptors
//!       └─ G  PID 1 of a new PID namespace ("init"), PDEATHSIG=SIGKILL, reaps everything
//!           └─ N  runs the pre-exec hooks, then std execs the program
//! ```
//!
//! * C calls `unshare(CLONE_NEWPID)`, so its next child G is PID 1 of a new namespace. When G
//!   dies, the kernel kills every process of the namespace, including those that called
//!   `setsid` or left the process group, and G (while exiting) reaps them all.
//! * The program runs in N, not in G: PID 1 ignores every signal it has no handler for, even
//!   one it sends itself (`process.kill(process.pid, "SIGKILL")` would do nothing), and its
//!   death would end the namespace at once, while the contract wants a descendant that keeps
//!   the output pipes open to be waited for (and then timed out).
//! * G reaps every process of the namespace. When it reaps N it reports N's wait status to P
//!   on the report pipe. When nothing is left it exits; C then exits with the same status.
//! * P ends a run by sending SIGTERM to C (blocked in C, taken by `sigwaitinfo`): C sends
//!   SIGKILL to G and waits for it. G's exit completes only once every process of the
//!   namespace is gone, so when P has reaped C, nothing the run started is left.
//! * Where `unshare` fails (no `CAP_SYS_ADMIN`, a seccomp filter), C forks N directly: the run
//!   is contained by the process group only, and C reports that (`MSG_GROUP`).
//!
//! In cgroup mode (the preferred one, see `cgroup.rs`) C makes no namespace: it creates N
//! with `clone3(CLONE_INTO_CGROUP)`, so N is born in the run's cgroup (and with it everything
//! N will start), and waits for N as in the group fallback (`MSG_CGROUP`). C itself stays
//! outside: the parent's `cgroup.kill` kills N and every descendant, C reports N's status and
//! exits. No pid is renumbered. (Writing `0` to `cgroup.procs` before `exec` would also put N
//! in the cgroup, without C; but every such migration takes the kernel's
//! `cgroup_threadgroup_rwsem` for writing, which waits for an RCU grace period, about 10 ms
//! per run on an idle rwsem, where `CLONE_INTO_CGROUP` only reads it: see
//! `docs/PERFORMANCE.md`.) N arms `PDEATHSIG` as well, so it dies with C.
//!
//! Every step here is a raw system call or a pure function: the child of a multi-threaded
//! process may only call async-signal-safe functions (no allocation, no locks).

// Every unsafe block here is a system call between fork and exec; see the SAFETY notes.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

/// C: the PID namespace was made; G and N follow.
pub(crate) const MSG_NAMESPACE: u8 = b'N';
/// C: `unshare` failed; containment is the process group alone.
pub(crate) const MSG_GROUP: u8 = b'F';
/// C: N is being created in the run's cgroup.
pub(crate) const MSG_CGROUP: u8 = b'C';
/// G (or C in group mode): N was reaped; four bytes of wait status follow (native endian).
pub(crate) const MSG_STATUS: u8 = b'S';
/// G: forking N failed; four bytes of errno follow.
pub(crate) const MSG_FORK_FAILED: u8 = b'E';

/// A step run in the child just before `exec`.
pub(crate) type Hook = Box<dyn FnMut() -> io::Result<()> + Send + Sync>;

/// What the child needs, prepared in the parent (the child must not allocate).
pub(crate) struct ChildPlan {
    /// P's process id, to detect a parent that died before PDEATHSIG was armed.
    pub parent: libc::pid_t,
    /// The write end of the report pipe (at least 3, close-on-exec).
    pub report: RawFd,
    /// Try a PID namespace first.
    pub namespace: bool,
    /// cgroup mode: a descriptor of the run's cgroup directory (close-on-exec), to create N
    /// in; no namespace then.
    pub cgroup: Option<RawFd>,
    /// Descriptors to place in the program: (source, at least 3 and close-on-exec; target).
    pub fds: Vec<(RawFd, RawFd)>,
    /// The embedder's pre-exec steps, in order, run in N.
    pub hooks: Vec<Hook>,
}

impl ChildPlan {
    /// Runs in C. Returns (`Ok`, so std goes on to `exec`) only in the process that is to
    /// become the program; every other process of the chain ends in `_exit`.
    ///
    /// # Safety
    ///
    /// Call only in a freshly forked child, from std's `pre_exec`.
    pub(crate) unsafe fn run(&mut self) -> io::Result<()> {
        // SAFETY (whole function): raw system calls on our own process, descriptors and
        // stack memory; no allocation. `sigset_t` values are plain data on the stack.
        unsafe {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != self.parent {
                // P died between fork and prctl: PDEATHSIG would never fire.
                libc::_exit(127);
            }
            reset_signal_handlers();
            let waited = waiter_signals();
            libc::sigprocmask(libc::SIG_BLOCK, &waited, std::ptr::null_mut());

            let namespace =
                self.cgroup.is_none() && self.namespace && libc::unshare(libc::CLONE_NEWPID) == 0;
            let message = match (self.cgroup, namespace) {
                (Some(_), _) => MSG_CGROUP,
                (None, true) => MSG_NAMESPACE,
                (None, false) => MSG_GROUP,
            };
            report(self.report, &[message]);
            let waiter_pid = libc::getpid();
            let child = match self.cgroup {
                Some(cgroup) => clone_into_cgroup(cgroup),
                None => libc::fork(),
            };
            if child < 0 {
                return Err(io::Error::last_os_error());
            }
            if child == 0 {
                if namespace {
                    return self.init();
                }
                if self.cgroup.is_some() {
                    libc::prctl(
                        libc::PR_SET_PDEATHSIG,
                        libc::SIGKILL as libc::c_ulong,
                        0,
                        0,
                        0,
                    );
                    if libc::getppid() != waiter_pid {
                        libc::_exit(127);
                    }
                }
                return self.program();
            }
            waiter(child, namespace, self.report)
        }
    }

    /// G: PID 1 of the namespace. Returns only in N.
    unsafe fn init(&mut self) -> io::Result<()> {
        // SAFETY: as in `run`.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            let program = libc::fork();
            if program == 0 {
                return self.program();
            }
            if program < 0 {
                let errno = last_errno();
                report_with(self.report, MSG_FORK_FAILED, errno);
                libc::_exit(127);
            }
            // N has its copies; G needs nothing but the report pipe (and must not keep std's
            // error pipe or the output pipes open).
            close_all_except(self.report);
            let mut report_fd = self.report;
            loop {
                let mut status = 0;
                let pid = libc::waitpid(-1, &mut status, libc::__WALL);
                if pid == program {
                    report_with(report_fd, MSG_STATUS, status);
                    libc::close(report_fd);
                    report_fd = -1;
                } else if pid < 0 && last_errno() != libc::EINTR {
                    // ECHILD: the namespace is empty.
                    break;
                }
            }
            libc::_exit(0)
        }
    }

    /// N (or C's child in group mode): place descriptors, run the hooks, unblock signals, and
    /// let std exec.
    unsafe fn program(&mut self) -> io::Result<()> {
        // SAFETY: as in `run`.
        unsafe {
            let empty = empty_set();
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // Two passes, so a source that happens to sit on another pair's target survives:
            // first move every source above all targets, then place each.
            let high = self.fds.iter().map(|&(_, t)| t).max().unwrap_or(2) + 1;
            for pair in &mut self.fds {
                let moved = libc::fcntl(pair.0, libc::F_DUPFD_CLOEXEC, high);
                if moved < 0 {
                    return Err(io::Error::last_os_error());
                }
                pair.0 = moved;
            }
            for &(source, target) in &self.fds {
                // dup2 clears close-on-exec on the target.
                if libc::dup2(source, target) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            for hook in &mut self.hooks {
                hook()?;
            }
            Ok(())
        }
    }
}

/// `CLONE_INTO_CGROUP` (Linux 5.7): the child starts in the cgroup given by descriptor.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The kernel's `struct clone_args` (version 2, with `cgroup`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `fork`, but the child is born in the cgroup whose directory `cgroup` names: returns as
/// `fork` does (0 in the child, the child's pid in the parent, -1 with errno set).
///
/// # Safety
///
/// As for `fork` in a multi-threaded process: the child may only make async-signal-safe
/// calls until it execs or exits (it has no `atfork` handlers run for it, like `_Fork`).
pub(crate) unsafe fn clone_into_cgroup(cgroup: RawFd) -> libc::pid_t {
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM and with no stack duplicates this process as fork does;
    // the arguments live on the stack for the call's duration.
    unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        ) as libc::pid_t
    }
}

/// C: wait for its one child; SIGTERM from P means "kill it now". Mirrors the child's status.
unsafe fn waiter(child: libc::pid_t, namespace: bool, report_fd: RawFd) -> ! {
    // SAFETY: as in `ChildPlan::run`.
    unsafe {
        if namespace {
            // G reports N's status; C keeps no descriptor at all.
            close_all_except(-1);
        } else {
            close_all_except(report_fd);
        }
        let waited = waiter_signals();
        loop {
            let signal = libc::sigwaitinfo(&waited, std::ptr::null_mut());
            if signal == libc::SIGTERM {
                libc::kill(child, libc::SIGKILL);
            }
            let mut status = 0;
            let pid = libc::waitpid(child, &mut status, libc::WNOHANG | libc::__WALL);
            if pid == child {
                if !namespace {
                    report_with(report_fd, MSG_STATUS, status);
                }
                mirror(status);
            }
            if pid < 0 && last_errno() != libc::EINTR {
                libc::_exit(127);
            }
        }
    }
}

/// End this process the way `status` says its child ended.
unsafe fn mirror(status: libc::c_int) -> ! {
    // SAFETY: as in `ChildPlan::run`.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            // No core file of the waiter, whatever the signal.
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            libc::signal(signal, libc::SIG_DFL);
            let empty = empty_set();
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// SIGTERM and SIGCHLD: what the waiter takes with `sigwaitinfo`.
fn waiter_signals() -> libc::sigset_t {
    let mut set = empty_set();
    // SAFETY: initialises a stack value.
    unsafe {
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGCHLD);
    }
    set
}

fn empty_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    }
}

/// The embedding process's handlers (tokio's SIGCHLD, an embedder's SIGINT) mean nothing in a
/// process that will not exec: back to the defaults (exec would do this for N anyway).
unsafe fn reset_signal_handlers() {
    for signal in 1..32 {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            // SAFETY: sigaction-based, async-signal-safe.
            unsafe { libc::signal(signal, libc::SIG_DFL) };
        }
    }
}

/// Close every descriptor but `keep` (or all when `keep` is negative).
unsafe fn close_all_except(keep: RawFd) {
    // SAFETY: closing our own descriptors.
    unsafe {
        if keep < 0 {
            close_range(0, u32::MAX);
        } else {
            if keep > 0 {
                close_range(0, keep as u32 - 1);
            }
            close_range(keep as u32 + 1, u32::MAX);
        }
    }
}

unsafe fn close_range(first: u32, last: u32) {
    // SAFETY: close_range(2) on our own descriptor table.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, last, 0) != 0 {
            // Before Linux 5.9: close one by one, as far as descriptors usually go.
            for fd in first..=last.min(65_535) {
                libc::close(fd as RawFd);
            }
        }
    }
}

fn report(fd: RawFd, bytes: &[u8]) {
    if fd < 0 {
        return;
    }
    loop {
        // SAFETY: writes from a stack buffer to our own descriptor; a message of at most
        // five bytes is atomic on a pipe.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n >= 0 || last_errno() != libc::EINTR {
            return;
        }
    }
}

fn report_with(fd: RawFd, tag: u8, value: i32) {
    let v = value.to_ne_bytes();
    report(fd, &[tag, v[0], v[1], v[2], v[3]]);
}

fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A message of the report pipe, parsed in the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Message {
    Cgroup,
    Namespace,
    Group,
    Status(i32),
    ForkFailed(i32),
}

/// Parse as many whole messages as `bytes` holds; returns them and the bytes consumed.
pub(crate) fn parse_messages(bytes: &[u8]) -> (Vec<Message>, usize) {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let tag = bytes[i];
        let value = || -> Option<i32> {
            let b = bytes.get(i + 1..i + 5)?;
            Some(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (message, len) = match tag {
            MSG_NAMESPACE => (Message::Namespace, 1),
            MSG_GROUP => (Message::Group, 1),
            MSG_CGROUP => (Message::Cgroup, 1),
            MSG_STATUS | MSG_FORK_FAILED => match value() {
                None => break,
                Some(v) if tag == MSG_STATUS => (Message::Status(v), 5),
                Some(v) => (Message::ForkFailed(v), 5),
            },
            // Unknown byte: nothing of ours writes it; skip.
            _ => {
                i += 1;
                continue;
            }
        };
        out.push(message);
        i += len;
    }
    (out, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_messages_handles_partial_tail() {
        let mut bytes = vec![MSG_NAMESPACE, MSG_STATUS];
        bytes.extend_from_slice(&7i32.to_ne_bytes());
        bytes.push(MSG_STATUS);
        bytes.push(1);
        let (messages, used) = parse_messages(&bytes);
        assert_eq!(messages, vec![Message::Namespace, Message::Status(7)]);
        assert_eq!(used, 6);
        let (messages, _) = parse_messages(&[MSG_GROUP]);
        assert_eq!(messages, vec![Message::Group]);
    }
}
