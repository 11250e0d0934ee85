//! The plan and the chain: what P prepares for the child ([`ChildPlan`], [`Exec`]), and the
//! steps C, G and N take with it (`ChildPlan::run`, `start_init`, `init`, `start_program`,
//! `program`).
//!
//! Invariants: everything here after the fork runs in a child of a multi-threaded process,
//! so it calls only async-signal-safe functions: raw system calls, no allocation, no lock.
//! The plan is complete before the fork (P allocates every string and vector it needs); C
//! reads what it needs of it before G starts and touches it no more; N executes the program
//! or exits, never returns into std.

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use rustix::io::Errno;
use rustix::process::{Pid, Signal};

use crate::limits::{self, Resource};
use crate::privilege::{Privileges, hide_waiter};

use super::*;

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
    /// The network policy's namespaces to join first (close-on-exec): the network namespace,
    /// and the user namespace owning it where it has one of its own.
    pub network: Option<(RawFd, Option<RawFd>)>,
    /// Become the child subreaper and sweep at the end (false only in process-group mode).
    pub subreaper: bool,
    /// Where the embedder's environment strings lie in its memory (and so in C's copy), for
    /// C to overwrite them ([`hide_waiter`]).
    pub environment: Option<(usize, usize)>,
    /// cgroup mode: a descriptor of the run's cgroup directory (close-on-exec), to create N
    /// in, and one of its `cgroup.kill` open for writing.
    pub cgroup: Option<(RawFd, RawFd)>,
    /// cgroup mode: the cgroup's parent directory (close-on-exec) and its name there, for C
    /// to remove the cgroup when P died first.
    pub cgroup_removal: Option<(RawFd, std::ffi::CString)>,
    /// A v1 `pids` cgroup's `tasks` (close-on-exec), for N to move itself into first.
    pub pids_v1: Option<RawFd>,
    /// That cgroup's parent directory (close-on-exec) and its name there, for C to remove it
    /// when P died first.
    pub pids_v1_removal: Option<(RawFd, std::ffi::CString)>,
    /// A root program's cgroup file systems made read-only and the filter that keeps them so
    /// (`cgroupfs.rs`), applied in N.
    pub cgroup_cover: Option<CgroupCover>,
    /// What N gives up before `exec`.
    pub privileges: Privileges,
    /// Resource limits set in N: (resource, soft and hard value).
    pub limits: Vec<(Resource, u64)>,
    /// The process bound to turn into `RLIMIT_NPROC` for N (within a user namespace of the
    /// run's own the bound itself, outside one the real user's count plus the bound).
    pub nproc: Option<u64>,
    /// Set in the child once the mode is known: the `RLIMIT_NPROC` to apply (`u64::MAX`:
    /// none).
    pub nproc_chosen: u64,
    /// Descriptors to place in the program: (source, at least 3 and close-on-exec; target).
    pub fds: Vec<(RawFd, RawFd)>,
    /// The embedder's pre-exec steps, in order, run in N.
    pub hooks: Vec<Hook>,
    /// Whether `close_range(CLOSE_RANGE_CLOEXEC)` works ([`cloexec_range_works`], found in P):
    /// how N seals every descriptor it was not meant to pass.
    pub cloexec_range: bool,
    /// What N executes.
    pub exec: Exec,
}

/// What N executes, prepared in P (N may not allocate): the program's path and its argument
/// and environment vectors, null-terminated arrays of pointers into strings this value owns.
pub(crate) struct Exec {
    path: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// What `argv` and `envp` point into (a `CString`'s bytes stay where they are when the
    /// value moves).
    _strings: Vec<CString>,
}

// SAFETY: the pointers point into the `CString`s this value owns, which nothing mutates;
// they are only read (by `execve`), so sharing or moving the value between threads is as safe
// as sharing the strings.
#[expect(unsafe_code, reason = "pointers into owned, immutable strings")]
unsafe impl Send for Exec {}
// SAFETY: as for `Send`.
#[expect(unsafe_code, reason = "pointers into owned, immutable strings")]
unsafe impl Sync for Exec {}

impl Exec {
    /// `path` executed with `args` (`args[0]` included) and exactly the environment `env`.
    /// Fails with `InvalidInput` where a string holds a NUL byte (as std's `Command` does).
    pub(crate) fn new(
        path: &std::path::Path,
        args: impl IntoIterator<Item = impl AsRef<std::ffi::OsStr>>,
        env: &[(std::ffi::OsString, std::ffi::OsString)],
    ) -> io::Result<Exec> {
        use std::os::unix::ffi::OsStrExt;
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a NUL byte in the program's data",
                )
            })
        };
        let path = c(path.as_os_str().as_bytes())?;
        let mut strings = Vec::new();
        for arg in args {
            strings.push(c(arg.as_ref().as_bytes())?);
        }
        let argc = strings.len();
        for (name, value) in env {
            let mut pair = name.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            strings.push(c(&pair)?);
        }
        let pointers = |s: &[CString]| {
            let mut v: Vec<*const libc::c_char> = s.iter().map(|s| s.as_ptr()).collect();
            v.push(std::ptr::null());
            v
        };
        Ok(Exec {
            argv: pointers(&strings[..argc]),
            envp: pointers(&strings[argc..]),
            path,
            _strings: strings,
        })
    }

    /// `execve`; returns only on failure, with its error. Async-signal-safe.
    #[expect(unsafe_code, reason = "execve")]
    pub(super) fn exec(&self) -> io::Error {
        // SAFETY: the path and both vectors are NUL-terminated strings and null-terminated
        // pointer arrays that this value owns and keeps alive for the call.
        unsafe { libc::execve(self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr()) };
        io::Error::last_os_error()
    }
}

impl ChildPlan {
    /// Runs in C. Returns only with an error (before anything was started), which std
    /// reports as the spawn's; otherwise every process of the chain ends in `_exit`, or (N)
    /// executes the program.
    ///
    /// # Safety
    ///
    /// Call only in a freshly forked child, from std's `pre_exec`: the process is a
    /// single-threaded copy of a multi-threaded one, so it (and every process it forks) may
    /// make only async-signal-safe calls, and it may close or replace any descriptor it
    /// inherited.
    #[expect(unsafe_code, reason = "forks and closes descriptors in a forked child")]
    pub(crate) unsafe fn run(&mut self) -> io::Result<()> {
        // Blocked before PDEATHSIG is armed, so the signal cannot kill C by default.
        set_signal_mask(
            libc::SIG_BLOCK,
            &signal_set(&[libc::SIGTERM, libc::SIGCHLD]),
        );
        let deathsig = if self.subreaper {
            Signal::TERM
        } else {
            Signal::KILL
        };
        rustix::process::set_parent_process_death_signal(Some(deathsig))?;
        if Pid::as_raw(rustix::process::getppid()) != self.parent {
            // P died between fork and prctl: PDEATHSIG would never fire.
            exit_now(127);
        }
        reset_signal_handlers();
        // The report pipe's reader may be gone (a cancelled run): a write must fail with
        // EPIPE, not kill the waiter before it has swept. N restores the default.
        set_disposition(libc::SIGPIPE, libc::SIG_IGN);

        let mut mode = 0u8;
        if self.cgroup.is_some() {
            mode |= MODE_CGROUP;
        }
        // The call takes a flag; rustix spells "on" as a pid (any pid).
        let on = Some(rustix::process::getpid());
        if self.subreaper && rustix::process::set_child_subreaper(on).is_ok() {
            mode |= MODE_SUBREAPER;
        }
        // The network first: a PID namespace made below is then owned by (a user namespace
        // nested in) the network's user namespace, where it has one.
        let joined_user = match self.network {
            Some((net, user)) => join_network(net, user)?,
            None => false,
        };
        if self.namespace {
            mode |= unshare_pid_namespace(joined_user)?;
        }
        // After the namespaces: a process that is not dumpable may not open its own
        // `/proc/self/uid_map` (root owns its `/proc` files then).
        // SAFETY: C never execs nor reads its environment again, and is single-threaded.
        unsafe { hide_waiter(self.environment) };
        // SAFETY: P made the report pipe for C and keeps its copy open until the spawn
        // returns; C's copy stays open (it is closed by nothing in C before `_exit`).
        let report = unsafe { BorrowedFd::borrow_raw(self.report) };
        send(Some(report), &[MSG_MODE, mode]);
        let namespace = mode & MODE_PID_NAMESPACE != 0;
        if let Some(bound) = self.nproc {
            // Counted per user namespace: within the run's own, only its processes; outside
            // one, every process of the real user, so the limit is what it has now plus the
            // bound (counted here, only when needed: the count reads all of `/proc`). Root
            // is never held to the limit.
            self.nproc_chosen = if mode & MODE_USER_NAMESPACE != 0 {
                bound
            } else if rustix::process::getuid().is_root() {
                u64::MAX
            } else {
                count_processes_of(rustix::process::getuid()).saturating_add(bound)
            };
        }
        // What C keeps of the plan, taken out of it before another process may run on this
        // memory (G shares it, below): from here on C reads only these locals.
        let cgroup_dir = self.cgroup.map(|(dir, _)| dir);
        let kill_fd = self.cgroup.map(|(_, kill)| kill);
        let removal = self.cgroup_removal.take();
        let pids_removal = self.pids_v1_removal.take();
        let report_fd = (!namespace).then_some(self.report);
        let embedder = self.parent;
        // Found out before another process shares this memory: the probe's failure, where
        // `close_range` is missing or refused, sets errno, which G and N share with C.
        let range_works = close_range_works();
        let child = if namespace {
            // G, sharing C's memory; N is born from G (in the cgroup, if any).
            // SAFETY: C is single-threaded and makes only async-signal-safe calls; C no
            // longer touches the plan, which G uses from now on.
            unsafe { self.start_init() }?
        } else {
            // N, sharing C's memory until it executes the program (born in the cgroup, if
            // any).
            // SAFETY: C is single-threaded and makes only async-signal-safe calls.
            unsafe { self.start_program(cgroup_dir) }?
        };
        let keep = [
            report_fd.unwrap_or(-1),
            kill_fd.unwrap_or(-1),
            removal.as_ref().map_or(-1, |(fd, _)| *fd),
            pids_removal.as_ref().map_or(-1, |(fd, _)| *fd),
        ];
        // SAFETY: C uses no descriptor but these from here on, and never returns to code
        // that would (it ends in `_exit`). G's and N's descriptor tables are their own.
        unsafe { close_all_except(&keep, range_works) };
        // SAFETY: each descriptor was opened by P for C and is kept open just above; C
        // closes none of them before `_exit`, and `Waiter::wait` never returns.
        let borrow = |fd: RawFd| unsafe { BorrowedFd::borrow_raw(fd) };
        Waiter {
            child,
            mode,
            report: report_fd.map(borrow),
            cgroup_kill: kill_fd.map(borrow),
            cgroup_removal: removal
                .as_ref()
                .map(|(fd, name)| (borrow(*fd), name.as_c_str())),
            pids_removal: pids_removal
                .as_ref()
                .map(|(fd, name)| (borrow(*fd), name.as_c_str())),
            embedder,
            status: None,
        }
        .wait()
    }

    /// Start G with a clone that shares C's memory (`CLONE_VM`, without `CLONE_VFORK`: G
    /// runs beside C for the whole run) on a stack of its own, outside the run's cgroup. G
    /// is PID 1 of the namespace C made; it starts N (born in the run's cgroup, if any) and
    /// reaps. Unlike `fork`, nothing of C (a copy of the embedder, with its page tables) is
    /// copied for G, faulted back in, or torn down when G exits.
    ///
    /// Two processes run on one address space from here on; what keeps that sound:
    ///
    /// * C took what it needs of the plan into its own locals before this call and touches
    ///   the plan no more; G (and N, while G sleeps in its vfork-style clone) is the plan's
    ///   only user. The pointer G gets is passed in a register, not in C's stack frame, which
    ///   C goes on to reuse.
    /// * Each has its own stack: G's mapping is never unmapped (C never returns, and the
    ///   memory ends with the last of the processes that share it).
    /// * Each has its own descriptor table, signal handlers and mask (no `CLONE_FILES`, no
    ///   `CLONE_SIGHAND`), credentials and namespaces.
    /// * Neither allocates, takes a lock or runs a destructor (both end in `_exit`). They
    ///   share the C library's thread block, errno included: G and N read errno right after
    ///   a failed call of their own (`execve`, `dup2`, the clone), and C, from here on,
    ///   neither reads nor writes it: its descriptors are closed by `close_range`, found to
    ///   work before G was started, or by rustix's `try_close`; its reaping, kills and sweep are
    ///   rustix calls too, raw system calls that leave errno alone. What is left: its signal
    ///   waits write errno when they fail (`sigwaitinfo` with `EINTR` after C is stopped
    ///   and continued; `sigtimedwait` timing out, only after the run's kill), and rustix
    ///   built on the C library (its `use-libc` feature, which another crate could turn on)
    ///   would write it from every call. The worst a collision could do is put a wrong
    ///   number in a start failure's report; it touches no memory.
    ///
    /// G is outside the run's cgroup: the cgroup's `pids.max` counts the program's
    /// processes only, and a cgroup's out-of-memory kill, which also kills every process
    /// sharing its victim's memory, never chooses G (whose memory is C's).
    ///
    /// # Safety
    ///
    /// Only in C, single-threaded, async-signal-safe calls only; after this returns C must
    /// not touch `self` (G uses it).
    #[expect(unsafe_code, reason = "clone(CLONE_VM) on a stack of our own")]
    pub(super) unsafe fn start_init(&mut self) -> io::Result<Pid> {
        extern "C" fn entry(plan: *mut libc::c_void) -> libc::c_int {
            // SAFETY: the plan C passed, which C no longer touches and which outlives G
            // (neither process frees it: both end in `_exit`).
            let plan = unsafe { &mut *plan.cast::<ChildPlan>() };
            // SAFETY: this is G, just created by `clone`, single-threaded, on its own stack.
            unsafe { plan.init() }
        }
        let stack = Stack::new()?;
        // SAFETY: `entry` runs in G on `stack`, which stays mapped for as long as G may run
        // (it is forgotten below, never unmapped) and which nothing else uses; `self` is
        // handed to G, the caller's promise keeps C away from it.
        let pid = unsafe {
            libc::clone(
                entry,
                stack.top(),
                libc::CLONE_VM | libc::SIGCHLD,
                (self as *mut ChildPlan).cast(),
            )
        };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        std::mem::forget(stack);
        positive(pid)
    }

    /// G: PID 1 of the namespace; starts N, reaps everything, exits.
    ///
    /// # Safety
    ///
    /// Only in G, just created by C ([`ChildPlan::start_init`]): single-threaded,
    /// async-signal-safe calls only.
    #[expect(unsafe_code, reason = "closes descriptors in a cloned child")]
    pub(super) unsafe fn init(&mut self) -> ! {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).ok();
        let cgroup = self.cgroup.map(|(dir, _)| dir);
        // SAFETY: G is single-threaded and makes only async-signal-safe calls.
        let program = match unsafe { self.start_program(cgroup) } {
            Ok(program) => program,
            Err(e) => {
                // SAFETY: G's copy of the report pipe, open until G exits.
                let report = unsafe { BorrowedFd::borrow_raw(self.report) };
                send_value(Some(report), MSG_START_FAILED, errno_of(&e));
                exit_now(127);
            }
        };
        // N has its copies; G needs nothing but the report pipe (and must not keep std's
        // error pipe or the output pipes open).
        // SAFETY: G uses no other descriptor and ends in `_exit` below.
        unsafe { close_all_except(&[self.report], close_range_works()) };
        // SAFETY: G's own copy of the report pipe, kept open just above; only G uses it,
        // through this value, which closes it once N's status is sent.
        let mut report = Some(unsafe { OwnedFd::from_raw_fd(self.report) });
        loop {
            match rustix::process::wait(wait_all()) {
                Ok(Some((pid, status))) if pid == program => {
                    let fd = report.as_ref().map(AsFd::as_fd);
                    send_value(fd, MSG_STATUS, status.as_raw());
                    report = None;
                }
                Ok(_) | Err(Errno::INTR) => {}
                // ECHILD: the namespace is empty.
                Err(_) => break,
            }
        }
        exit_now(0)
    }

    /// Start N with a vfork-style clone (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does): N
    /// runs on a stack of its own in this process's memory, and this process sleeps until N
    /// has executed the program or exited. Unlike `fork`, nothing of this process (a copy of
    /// the embedder, with its page tables) is copied for N, and N faults none of it back in.
    /// Where `cgroup` names the run's cgroup directory, N is born in it: `clone3` with
    /// `CLONE_INTO_CGROUP` ([`clone3_vfork`]; on targets without it, a `clone3` copy of this
    /// process).
    ///
    /// # Safety
    ///
    /// Only in C or G: single-threaded, async-signal-safe calls only.
    #[expect(
        unsafe_code,
        reason = "clone(CLONE_VM | CLONE_VFORK) on a stack of our own"
    )]
    pub(super) unsafe fn start_program(&mut self, cgroup: Option<RawFd>) -> io::Result<Pid> {
        /// What N needs, on this process's stack (which N does not use).
        struct Start<'a> {
            plan: &'a mut ChildPlan,
            parent: Pid,
        }
        extern "C" fn entry(start: *mut libc::c_void) -> libc::c_int {
            // SAFETY: `start` is the `Start` below, alive until `clone` returns, which is
            // after N has executed the program or exited; this process sleeps meanwhile, so
            // N is the only user of it.
            let start = unsafe { &mut *start.cast::<Start<'_>>() };
            // SAFETY: this is N, just created by `clone`, single-threaded, running on its
            // own stack until it executes the program.
            unsafe { start.plan.become_program(start.parent) }
        }
        let parent = rustix::process::getpid();
        #[cfg(not(target_arch = "x86_64"))]
        if let Some(dir) = cgroup {
            // No `clone3` entry of ours here: N is a copy of this process.
            // SAFETY: the caller's promise.
            return match unsafe { clone_into_cgroup(dir) } {
                // SAFETY: this is N, just forked.
                0 => unsafe { self.become_program(parent) },
                pid if pid < 0 => Err(io::Error::last_os_error()),
                pid => positive(pid),
            };
        }
        let stack = Stack::new()?;
        let mut start = Start { parent, plan: self };
        let arg = (&mut start as *mut Start<'_>).cast();
        // What both clones below rely on: `entry` runs in N on `stack` (mapped, writable,
        // ours until N is gone from it) and never returns (it executes or exits); with
        // `CLONE_VFORK` the call returns only once N has executed or exited, so `start` and
        // `stack` outlive N's use of them.
        #[cfg_attr(not(target_arch = "x86_64"), allow(clippy::match_single_binding))]
        let pid = match cgroup {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as said above; `dir` is the run's cgroup directory, open.
            Some(dir) => unsafe { clone3_vfork(dir, &stack, entry, arg) },
            // SAFETY: as said above.
            _ => match unsafe {
                libc::clone(
                    entry,
                    stack.top(),
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                    arg,
                )
            } {
                pid if pid < 0 => Err(io::Error::last_os_error()),
                pid => Ok(pid),
            },
        };
        drop(stack);
        positive(pid?)
    }

    /// N: the program's process, up to `exec`. `parent` is the process that created N, as
    /// N sees it. Executes the program; on any failure reports it (`MSG_START_FAILED` with
    /// the error number) and exits with 127.
    ///
    /// # Safety
    ///
    /// Only in N, just created: single-threaded, async-signal-safe calls only.
    #[expect(unsafe_code, reason = "borrows the report pipe in a forked child")]
    pub(super) unsafe fn become_program(&mut self, parent: Pid) -> ! {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).ok();
        if rustix::process::getppid() != Some(parent) {
            // The parent died before PDEATHSIG was armed.
            exit_now(127);
        }
        // Above every number a descriptor is placed on, so the report pipe survives the
        // placing (and, close-on-exec, is gone once the program runs).
        let high = self.fds.iter().map(|&(_, t)| t).max().unwrap_or(2) + 1;
        // SAFETY: the report pipe's write end, open in N (C or G keeps it open).
        let report = unsafe { BorrowedFd::borrow_raw(self.report) };
        let report = rustix::io::fcntl_dupfd_cloexec(report, high).ok();
        // SAFETY: this is N, just created.
        let error = match unsafe { self.program() } {
            Ok(()) => self.exec.exec(),
            Err(e) => e,
        };
        send_value(
            report.as_ref().map(AsFd::as_fd),
            MSG_START_FAILED,
            errno_of(&error),
        );
        exit_now(127)
    }

    /// N: place descriptors, unblock signals, lower the limits, run the hooks, give up
    /// privileges; the caller executes the program.
    ///
    /// # Safety
    ///
    /// Only in N, just forked: single-threaded, async-signal-safe calls only; the passed
    /// descriptors' sources are open and their targets free to replace.
    #[expect(unsafe_code, reason = "places descriptors on chosen numbers with dup2")]
    pub(super) unsafe fn program(&mut self) -> io::Result<()> {
        // First: a descriptor placed below could take its number.
        if let Some(procs) = self.pids_v1 {
            // SAFETY: a descriptor P opened for the run, open in N until `exec`.
            crate::pids_v1::join(unsafe { BorrowedFd::borrow_raw(procs) })?;
        }
        // Once N is in its cgroups (the join above wrote through a descriptor of the
        // embedder's mount), and before the embedder's steps.
        if let Some(cover) = &self.cgroup_cover {
            cover.mount()?;
        }
        set_disposition(libc::SIGPIPE, libc::SIG_DFL);
        set_signal_mask(libc::SIG_SETMASK, &signal_set(&[]));
        // Two passes, so a source that happens to sit on another pair's target survives:
        // first move every source above all targets, then place each.
        let high = self.fds.iter().map(|&(_, t)| t).max().unwrap_or(2) + 1;
        for pair in &mut self.fds {
            // SAFETY: a descriptor P duplicated for the run, open in N until `exec`.
            let source = unsafe { BorrowedFd::borrow_raw(pair.0) };
            // Close-on-exec: `exec` closes the moved copy; only the target below survives.
            pair.0 = rustix::io::fcntl_dupfd_cloexec(source, high)?.into_raw_fd();
        }
        for &(source, target) in &self.fds {
            // SAFETY: `target` is a number the embedder chose for this descriptor (3 or
            // more, distinct: `Command::pass_fd`); whatever N held there is replaced, which
            // is the point. dup2 clears close-on-exec on the target.
            if unsafe { libc::dup2(source, target) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        for &(resource, value) in &self.limits {
            limits::lower(resource, value)?;
        }
        if self.nproc_chosen != u64::MAX {
            limits::lower(Resource::Nproc, self.nproc_chosen)?;
        }
        for hook in &mut self.hooks {
            hook()?;
        }
        // After the hooks, so a descriptor one of them left open is sealed too: the program
        // inherits its stdio and the passed descriptors, nothing else.
        self.fds.sort_unstable_by_key(|&(_, target)| target);
        seal_descriptors(&self.fds, self.cloexec_range)?;
        // Last, so the embedder's steps ran with what the embedder has.
        self.privileges.apply()?;
        if let Some(cover) = &self.cgroup_cover {
            cover.filter()?;
        }
        Ok(())
    }
}

/// How many processes (threads included, as `RLIMIT_NPROC` counts) the real user `uid` has,
/// from `/proc/<pid>/status` (`Uid:` and `Threads:`). Async-signal-safe: raw system calls and
/// buffers on the stack. Processes that end meanwhile may be counted or not.
pub(super) fn count_processes_of(uid: rustix::process::Uid) -> u64 {
    use rustix::fs::{Mode, OFlags, RawDir};
    let Ok(proc) = rustix::fs::open(
        c"/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return 0;
    };
    let mut entries = [MaybeUninit::<u8>::uninit(); 4096];
    let mut dir = RawDir::new(&proc, &mut entries);
    let mut status = [0u8; 4096];
    let mut count = 0u64;
    while let Some(Ok(entry)) = dir.next() {
        let name = entry.file_name().to_bytes();
        if name.is_empty() || !name.iter().all(u8::is_ascii_digit) || name.len() > 10 {
            continue;
        }
        let mut path = [0u8; 24];
        path[..name.len()].copy_from_slice(name);
        path[name.len()..name.len() + 7].copy_from_slice(b"/status");
        let Ok(path) = CStr::from_bytes_until_nul(&path) else {
            continue;
        };
        let Ok(file) =
            rustix::fs::openat(&proc, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        else {
            continue;
        };
        let Ok(n) = rustix::io::read(&file, &mut status) else {
            continue;
        };
        let text = &status[..n];
        if status_field(text, b"Uid:") == Some(u64::from(uid.as_raw())) {
            count += status_field(text, b"Threads:").unwrap_or(1);
        }
    }
    count
}

/// The first number after `name` at the start of a line of `text` (a `/proc` status file).
pub(super) fn status_field(text: &[u8], name: &[u8]) -> Option<u64> {
    let line = text
        .split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(name))?;
    let digits = line.iter().skip_while(|b| b.is_ascii_whitespace());
    let mut value = None::<u64>;
    for &b in digits {
        if !b.is_ascii_digit() {
            break;
        }
        value = Some(
            value
                .unwrap_or(0)
                .checked_mul(10)?
                .checked_add(u64::from(b - b'0'))?,
        );
    }
    value
}
