//! The child side of containment: what runs between `fork` and `exec`.
//!
//! std forks the child **C** (after `setpgid`, `chdir`, the stdio `dup2`s and the signal mask
//! reset, which std performs before any `pre_exec` closure), then calls [`ChildPlan::run`]:
//!
//! ```text
//! embedding process P
//!   └─ C  waiter: group leader, child subreaper, PDEATHSIG=SIGTERM (handled), not dumpable
//!       └─ G  PID 1 of a new PID namespace ("init"), PDEATHSIG=SIGKILL, reaps everything
//!           └─ N  own session, no new privileges, no capabilities, hooks; std execs
//! ```
//!
//! * C first arms `PR_SET_PDEATHSIG` with SIGTERM, which it keeps blocked and takes with
//!   `sigwaitinfo`: the death of the embedding process (SIGKILL included) is then the same
//!   request as P's own SIGTERM at the end of a run, and C performs the whole end before it
//!   exits. C makes itself not dumpable and zeros the embedder's environment strings in its
//!   memory (`privilege.rs`), and becomes the run's child subreaper: every orphan of the run
//!   is re-parented to C, whatever session, group or cgroup it moved to.
//! * Where allowed, C calls `unshare(CLONE_NEWPID)`, or where that is refused (no
//!   `CAP_SYS_ADMIN`: an ordinary user, a container) `unshare(CLONE_NEWUSER | CLONE_NEWPID)`
//!   and maps its own user and group ids to themselves, so its next child G is PID 1 of a new
//!   namespace. When G dies, the kernel kills every process of the namespace and G (while
//!   exiting) reaps them all. In cgroup mode G (or N, without a namespace) is created with
//!   `clone3(CLONE_INTO_CGROUP)`, so it and everything it starts are born in the run's
//!   cgroup. (Writing `0` to `cgroup.procs` before `exec` would also move N, without C; but
//!   every such migration waits for an RCU grace period, about 10 ms a run, where
//!   `CLONE_INTO_CGROUP` costs nothing measurable: see `docs/PERFORMANCE.md`.)
//! * The program runs in N, not in G: PID 1 ignores every signal it has no handler for, even
//!   one it sends itself, and its death would end the namespace at once, while the contract
//!   wants a descendant that keeps the output pipes open to be waited for (and timed out).
//! * Whoever reaps N (G in a namespace, else C) reports N's wait status to P on the report
//!   pipe. C exits, mirroring that status, once it has no child left; while an orphan of the
//!   run is alive, it waits for the end.
//! * The end (P's SIGTERM, or P's death): C writes `1` to the cgroup's `cgroup.kill` (cgroup
//!   mode, through a descriptor P opened for it), SIGKILLs G or N, and then, until it has no
//!   child left, sweeps: SIGKILLs every descendant it finds in `/proc` (`sweep.rs`) and reaps.
//!   When P has reaped C, nothing the run started is alive.
//! * In the process-group mode (only when asked for: it is the known-weak twin) C is no
//!   subreaper and makes no namespace: the end SIGKILLs N and N's process group, and a
//!   descendant that left the group survives.
//!
//! Every step here is a raw system call or a pure function: the child of a multi-threaded
//! process may only call async-signal-safe functions (no allocation, no locks).

// Every unsafe block here is a system call between fork and exec; see the SAFETY notes.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

use crate::privilege::{Privileges, hide_waiter};
use crate::sweep::kill_descendants;

/// C: which containment it set up; one byte of [`MODE_CGROUP`]... flags follows.
pub(crate) const MSG_MODE: u8 = b'M';
/// G (or C without a namespace): N was reaped; four bytes of wait status follow (native endian).
pub(crate) const MSG_STATUS: u8 = b'S';
/// G: forking N failed; four bytes of errno follow.
pub(crate) const MSG_FORK_FAILED: u8 = b'E';

/// Mode flag: N is in the run's cgroup.
pub(crate) const MODE_CGROUP: u8 = 1;
/// Mode flag: N is in a PID namespace of its own.
pub(crate) const MODE_PID_NAMESPACE: u8 = 2;
/// Mode flag: that namespace is owned by a user namespace of its own.
pub(crate) const MODE_USER_NAMESPACE: u8 = 4;
/// Mode flag: C is the child subreaper of the run and sweeps its descendants at the end.
pub(crate) const MODE_SUBREAPER: u8 = 8;

/// A step run in the child just before `exec`.
pub(crate) type Hook = Box<dyn FnMut() -> io::Result<()> + Send + Sync>;

/// What the child needs, prepared in the parent (the child must not allocate).
pub(crate) struct ChildPlan {
    /// P's process id, to detect a parent that died before PDEATHSIG was armed.
    pub parent: libc::pid_t,
    /// The write end of the report pipe (at least 3, close-on-exec).
    pub report: RawFd,
    /// Try a PID namespace (with a user namespace where a bare one is refused).
    pub namespace: bool,
    /// Become the child subreaper and sweep at the end (false only in process-group mode).
    pub subreaper: bool,
    /// cgroup mode: a descriptor of the run's cgroup directory (close-on-exec), to create G
    /// or N in, and one of its `cgroup.kill` open for writing.
    pub cgroup: Option<(RawFd, RawFd)>,
    /// cgroup mode: the cgroup's parent directory (close-on-exec) and its name there, for C
    /// to remove the cgroup when P died first.
    pub cgroup_removal: Option<(RawFd, std::ffi::CString)>,
    /// What N gives up before `exec`.
    pub privileges: Privileges,
    /// Resource limits set in N: (resource, soft and hard value).
    pub limits: Vec<(libc::__rlimit_resource_t, u64)>,
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
            // Blocked before PDEATHSIG is armed, so the signal cannot kill C by default.
            let waited = waiter_signals();
            libc::sigprocmask(libc::SIG_BLOCK, &waited, std::ptr::null_mut());
            let deathsig = if self.subreaper {
                libc::SIGTERM
            } else {
                libc::SIGKILL
            };
            if libc::prctl(libc::PR_SET_PDEATHSIG, deathsig as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != self.parent {
                // P died between fork and prctl: PDEATHSIG would never fire.
                libc::_exit(127);
            }
            reset_signal_handlers();
            // The report pipe's reader may be gone (a cancelled run): a write must fail with
            // EPIPE, not kill the waiter before it has swept. N restores the default.
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);

            let mut mode = 0u8;
            if self.cgroup.is_some() {
                mode |= MODE_CGROUP;
            }
            if self.subreaper && libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 {
                mode |= MODE_SUBREAPER;
            }
            if self.namespace {
                let (uid, gid) = (libc::geteuid(), libc::getegid());
                if libc::unshare(libc::CLONE_NEWPID) == 0 {
                    mode |= MODE_PID_NAMESPACE;
                } else if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) == 0 {
                    // Now in a user namespace with no mapping: map our ids to themselves, or
                    // nothing we create would have an owner.
                    map_own_ids(uid, gid)?;
                    mode |= MODE_PID_NAMESPACE | MODE_USER_NAMESPACE;
                }
            }
            // After the namespaces: a process that is not dumpable may not open its own
            // `/proc/self/uid_map` (root owns its `/proc` files then).
            hide_waiter();
            report(self.report, &[MSG_MODE, mode]);
            let namespace = mode & MODE_PID_NAMESPACE != 0;
            let waiter_pid = libc::getpid();
            let child = match self.cgroup {
                Some((dir, _)) => clone_into_cgroup(dir),
                None => libc::fork(),
            };
            if child < 0 {
                return Err(io::Error::last_os_error());
            }
            if child == 0 {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                if namespace {
                    return self.init();
                }
                if libc::getppid() != waiter_pid {
                    libc::_exit(127);
                }
                return self.program();
            }
            let kill_fd = self.cgroup.map_or(-1, |(_, kill)| kill);
            let (parent_fd, name) = self
                .cgroup_removal
                .as_ref()
                .map_or((-1, std::ptr::null()), |(fd, name)| (*fd, name.as_ptr()));
            let report_fd = if namespace { -1 } else { self.report };
            close_all_except(&[report_fd, kill_fd, parent_fd]);
            Waiter {
                child,
                mode,
                report: report_fd,
                cgroup_kill: kill_fd,
                cgroup_removal: (parent_fd, name),
                embedder: self.parent,
                status: None,
            }
            .wait()
        }
    }

    /// G: PID 1 of the namespace. Returns only in N.
    unsafe fn init(&mut self) -> io::Result<()> {
        // SAFETY: as in `run`.
        unsafe {
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
            close_all_except(&[self.report]);
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

    /// N: place descriptors, unblock signals, run the hooks, give up privileges, and let std
    /// exec.
    unsafe fn program(&mut self) -> io::Result<()> {
        // SAFETY: as in `run`.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
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
            for &(resource, value) in &self.limits {
                lower_limit(resource, value)?;
            }
            for hook in &mut self.hooks {
                hook()?;
            }
            // Last, so the embedder's steps ran with what the embedder has.
            self.privileges.apply()
        }
    }
}

/// Set both the soft and the hard limit of `resource` to `value`, or to the current hard
/// limit if that is lower (raising a hard limit would need `CAP_SYS_RESOURCE`).
///
/// # Safety
///
/// Async-signal-safe; for the child between fork and exec.
unsafe fn lower_limit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    // SAFETY: getrlimit/setrlimit on this process with a stack value.
    unsafe {
        let mut current: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(resource, &mut current) != 0 {
            return Err(io::Error::last_os_error());
        }
        let value = value.min(current.rlim_max);
        let new = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        if libc::setrlimit(resource, &new) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// After `unshare(CLONE_NEWUSER)`: map our own user and group ids (of the parent namespace)
/// to themselves, which an unprivileged process may do for itself. `setgroups` must be denied
/// first for the group map.
///
/// # Safety
///
/// Async-signal-safe.
unsafe fn map_own_ids(uid: libc::uid_t, gid: libc::gid_t) -> io::Result<()> {
    let mut line = [0u8; 40];
    write_file(c"/proc/self/uid_map", id_map_line(&mut line, uid))?;
    // Older kernels have no setgroups file; the gid map then works without it.
    write_file(c"/proc/self/setgroups", b"deny").ok();
    write_file(c"/proc/self/gid_map", id_map_line(&mut line, gid))
}

/// `"<id> <id> 1"` in `buf`.
fn id_map_line(buf: &mut [u8; 40], id: u32) -> &[u8] {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut v = id;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = 0;
    for _ in 0..2 {
        for i in (0..n).rev() {
            buf[len] = digits[i];
            len += 1;
        }
        buf[len] = b' ';
        len += 1;
    }
    buf[len] = b'1';
    &buf[..len + 1]
}

/// Write `bytes` to the file at `path` in one `write`.
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close with a NUL-terminated path and a stack buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let result = if n == bytes.len() as isize {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        };
        libc::close(fd);
        result
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

/// C after creating its child (G or N).
struct Waiter {
    /// G or N.
    child: libc::pid_t,
    /// `MODE_*` flags.
    mode: u8,
    /// Where to report N's status (without a namespace), or -1.
    report: RawFd,
    /// `cgroup.kill` of the run's cgroup, or -1.
    cgroup_kill: RawFd,
    /// The cgroup's parent directory (or -1) and its name there.
    cgroup_removal: (RawFd, *const libc::c_char),
    /// P's pid: when C's parent is no longer P, P died and C cleans up for it.
    embedder: libc::pid_t,
    /// The child's wait status, once reaped.
    status: Option<libc::c_int>,
}

impl Waiter {
    /// Wait for SIGCHLD (reap; exit once no child is left) or SIGTERM (the end: P asked, or
    /// P died).
    unsafe fn wait(mut self) -> ! {
        // SAFETY: as in `ChildPlan::run`.
        unsafe {
            let waited = waiter_signals();
            loop {
                let signal = libc::sigwaitinfo(&waited, std::ptr::null_mut());
                if signal == libc::SIGTERM {
                    self.end();
                }
                if !self.reap(libc::WNOHANG) {
                    // No child left: N is reaped and no orphan of the run is alive.
                    self.exit();
                }
            }
        }
    }

    /// Reap what has exited; false once no child is left at all.
    unsafe fn reap(&mut self, flags: libc::c_int) -> bool {
        // SAFETY: waitpid on our own children.
        unsafe {
            loop {
                let mut status = 0;
                let pid = libc::waitpid(-1, &mut status, flags | libc::__WALL);
                if pid == self.child {
                    self.status = Some(status);
                    if self.mode & MODE_PID_NAMESPACE == 0 {
                        report_with(self.report, MSG_STATUS, status);
                    }
                }
                if pid > 0 && flags & libc::WNOHANG != 0 {
                    continue;
                }
                if pid < 0 && last_errno() == libc::EINTR {
                    continue;
                }
                return pid >= 0;
            }
        }
    }

    /// Kill everything the run started, reap it all, exit.
    unsafe fn end(&mut self) -> ! {
        // SAFETY: as in `ChildPlan::run`; every pid signalled is an unreaped child of ours
        // (or, in the sweep, an unreaped descendant).
        unsafe {
            if self.cgroup_kill >= 0 {
                libc::write(self.cgroup_kill, b"1".as_ptr().cast(), 1);
            }
            if self.status.is_none() {
                if self.mode & (MODE_SUBREAPER | MODE_PID_NAMESPACE) == 0 {
                    // The process-group twin: N's own group (N left C's by `setsid`).
                    libc::kill(-self.child, libc::SIGKILL);
                }
                libc::kill(self.child, libc::SIGKILL);
            }
            if self.mode & MODE_SUBREAPER == 0 {
                while self.status.is_none() && self.reap(0) {}
                self.exit();
            }
            // Until no child is left: reap what is dead, sweep what is not, wait.
            while self.reap(libc::WNOHANG) {
                kill_descendants(libc::getpid());
                if !self.reap(0) {
                    break;
                }
            }
            if libc::getppid() != self.embedder {
                self.remove_cgroup();
            }
            self.exit()
        }
    }

    /// P died: remove the run's cgroup in its place, once the kill has emptied it (a
    /// second at most; what is left is for the next embedder's sweep).
    unsafe fn remove_cgroup(&self) {
        let (parent, name) = self.cgroup_removal;
        if parent < 0 || name.is_null() {
            return;
        }
        // SAFETY: unlinkat on a descriptor and a NUL-terminated name P prepared (its memory
        // is ours, copied at fork); write and nanosleep with stack values.
        unsafe {
            for _ in 0..1000 {
                if libc::unlinkat(parent, name, libc::AT_REMOVEDIR) == 0
                    || last_errno() == libc::ENOENT
                {
                    return;
                }
                libc::write(self.cgroup_kill, b"1".as_ptr().cast(), 1);
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                };
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }

    /// Exit as the child did (or as killed, when it was never seen to end).
    unsafe fn exit(&self) -> ! {
        // SAFETY: as in `ChildPlan::run`.
        unsafe { mirror(self.status.unwrap_or(libc::SIGKILL)) }
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

/// Close every descriptor but those in `keep` (negative entries are ignored).
unsafe fn close_all_except(keep: &[RawFd]) {
    let mut kept = [0u32; 4];
    let mut n = 0;
    for &fd in keep {
        if fd >= 0 && n < kept.len() && !kept[..n].contains(&(fd as u32)) {
            kept[n] = fd as u32;
            n += 1;
        }
    }
    kept[..n].sort_unstable();
    let mut first = 0u32;
    // SAFETY: closing our own descriptors.
    unsafe {
        for &fd in &kept[..n] {
            if fd > first {
                close_range(first, fd - 1);
            }
            first = fd + 1;
        }
        close_range(first, u32::MAX);
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
    /// `MODE_*` flags.
    Mode(u8),
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
            MSG_MODE => match bytes.get(i + 1) {
                None => break,
                Some(&mode) => (Message::Mode(mode), 2),
            },
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
        let mut bytes = vec![MSG_MODE, MODE_PID_NAMESPACE, MSG_STATUS];
        bytes.extend_from_slice(&7i32.to_ne_bytes());
        bytes.push(MSG_STATUS);
        bytes.push(1);
        let (messages, used) = parse_messages(&bytes);
        assert_eq!(
            messages,
            vec![Message::Mode(MODE_PID_NAMESPACE), Message::Status(7)]
        );
        assert_eq!(used, 7);
        let (messages, used) = parse_messages(&[MSG_MODE]);
        assert_eq!((messages, used), (vec![], 0));
    }

    #[test]
    fn id_map_line_is_decimal() {
        let mut buf = [0u8; 40];
        assert_eq!(id_map_line(&mut buf, 0), b"0 0 1");
        assert_eq!(
            id_map_line(&mut buf, 4_294_967_294),
            b"4294967294 4294967294 1"
        );
    }
}
