//! The child side of containment: what runs between `fork` and `exec`.
//!
//! std forks the child **C** (after `setpgid`, `chdir`, the stdio `dup2`s and the signal mask
//! reset, which std performs before any `pre_exec` closure), then calls [`ChildPlan::run`]:
//!
//! ```text
//! embedding process P
//!   └─ C  waiter: group leader, child subreaper, PDEATHSIG=SIGTERM (handled), not dumpable
//!       └─ G  PID 1 of a new PID namespace ("init"), PDEATHSIG=SIGKILL, reaps everything
//!           └─ N  own session, no new privileges, no capabilities, hooks; execve
//! ```
//!
//! C is a copy of P (std's `fork`). G and N are started with clones that share their
//! parent's memory instead of copying it, each on a stack of its own: nothing of the
//! embedder's page tables is copied for them, faulted back in, or torn down when they end.
//!
//! * G (`clone(CLONE_VM)`, [`ChildPlan::start_init`]) runs beside C for the whole run, on
//!   C's memory; C takes what it needs of the plan before and touches it no more, and
//!   neither allocates nor takes a lock (the rules are listed there). G is outside the run's
//!   cgroups.
//! * N (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does: its parent sleeps until N has
//!   executed the program or exited) executes the program itself (`execve` of a path,
//!   argument and environment vectors P prepared). In cgroup mode N is born in the run's
//!   cgroup: `clone3` with `CLONE_INTO_CGROUP`, whose child's first instructions (it must
//!   start on its own stack) are a few lines of assembly ([`clone3_vfork`], x86-64; on other
//!   targets N is a `clone3` copy of its parent there).
//!
//! std's `Command` only forks C; C never returns to it.
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
//!   exiting) reaps them all. In cgroup mode N is created with
//!   `clone3(CLONE_INTO_CGROUP)`, so it and everything it starts are born in the run's
//!   cgroup. (Writing `0` to `cgroup.procs` before `exec` would also move N, without C; but
//!   that migration waits for an RCU grace period, about 10 ms a run, where
//!   `CLONE_INTO_CGROUP` costs nothing measurable, and the v2 `cgroup.threads` move that
//!   would not wait is refused between domain cgroups: see `docs/PERFORMANCE.md`.) In a v1
//!   `pids` cgroup (`pids_v1.rs`) N writes `0` to `tasks`: a thread moving itself skips the
//!   wait, and N is single-threaded then.
//! * The program runs in N, not in G: PID 1 ignores every signal it has no handler for, even
//!   one it sends itself, and its death would end the namespace at once; N's own exit is
//!   reported (below), and P ends the run then, after a short drain of the output.
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
//!
//! rustix's wrappers are used wherever it has one (`PR_SET_PDEATHSIG`,
//! `PR_SET_CHILD_SUBREAPER`, `PR_SET_DUMPABLE`, `getppid`, `getpid`, `kill`, `waitpid`,
//! `unshare`, `open`, `write`, `unlinkat`, `nanosleep`, `fcntl`): on Linux rustix makes the
//! system call itself, with no C library call and no allocation, so its wrappers are
//! async-signal-safe. What it lacks (signal masks and dispositions, `sigwaitinfo`, `clone`,
//! `clone3`, `_exit`, `close_range`, `dup2` onto a chosen number) goes through `libc`, each
//! call in an `unsafe` block of its own that says why it holds; `clone3` with a stack of the
//! child's own, which no C library exports, is [`clone3_vfork`].

use std::ffi::{CStr, CString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions};

use crate::limits::{self, Resource};
use crate::privilege::{Privileges, hide_waiter};
use crate::sweep::kill_descendants;

/// C: which containment it set up; one byte of [`MODE_CGROUP`]... flags follows.
pub(crate) const MSG_MODE: u8 = b'M';
/// G (or C without a namespace): N was reaped; four bytes of wait status follow (native endian).
pub(crate) const MSG_STATUS: u8 = b'S';
/// G or N: N could not be started (creating it, its setup or its `exec` failed); four bytes
/// of errno follow.
pub(crate) const MSG_START_FAILED: u8 = b'E';

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
    fn exec(&self) -> io::Error {
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
        if self.namespace {
            mode |= unshare_pid_namespace()?;
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
    unsafe fn start_init(&mut self) -> io::Result<Pid> {
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
    unsafe fn init(&mut self) -> ! {
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
    unsafe fn start_program(&mut self, cgroup: Option<RawFd>) -> io::Result<Pid> {
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
    unsafe fn become_program(&mut self, parent: Pid) -> ! {
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
    unsafe fn program(&mut self) -> io::Result<()> {
        // First: a descriptor placed below could take its number.
        if let Some(procs) = self.pids_v1 {
            // SAFETY: a descriptor P opened for the run, open in N until `exec`.
            crate::pids_v1::join(unsafe { BorrowedFd::borrow_raw(procs) })?;
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
        self.privileges.apply()
    }
}

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
fn seal_descriptors(targets: &[(RawFd, RawFd)], range_works: bool) -> io::Result<()> {
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
        all &= close_range_cloexec(first, u32::MAX);
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
fn close_range_cloexec(first: u32, last: u32) -> bool {
    // SAFETY: changes no descriptor's number, only its close-on-exec flag, in N alone.
    unsafe { libc::syscall(libc::SYS_close_range, first, last, CLOSE_RANGE_CLOEXEC) == 0 }
}

/// `CLOSE_RANGE_CLOEXEC` (Linux 5.11), which the libc crate does not name on every target.
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Whether `close_range` with `CLOSE_RANGE_CLOEXEC` works here (Linux 5.11 or later, not
/// refused by a seccomp policy), tried in P on a range that holds no descriptor at each spawn
/// (one system call): a filter may refuse it on one thread and not on another.
pub(crate) fn cloexec_range_works() -> bool {
    close_range_cloexec(u32::MAX, u32::MAX)
}

/// A descriptor number spelled in decimal (a `/proc/self/fd` entry), or `None` (`.`, `..`).
fn parse_decimal(name: &[u8]) -> Option<RawFd> {
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

/// C, where asked for a PID namespace: `unshare(CLONE_NEWPID)`, or where that is refused
/// (no `CAP_SYS_ADMIN`) `unshare(CLONE_NEWUSER | CLONE_NEWPID)` with our own ids mapped to
/// themselves. Returns the `MODE_*` flags gained (none where both are refused).
#[expect(unsafe_code, reason = "unshare in a forked child")]
fn unshare_pid_namespace() -> io::Result<u8> {
    use rustix::thread::UnshareFlags;
    let (uid, gid) = (rustix::process::geteuid(), rustix::process::getegid());
    // SAFETY: no `CLONE_FILES` (the call's only hazard, a descriptor table other threads
    // stop sharing); C is single-threaded anyway.
    if unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWPID) }.is_ok() {
        return Ok(MODE_PID_NAMESPACE);
    }
    // A process that is not dumpable (an embedder that hid its environment) may not open
    // its own `/proc/self/uid_map`: dumpable until the maps are written (nothing of the run
    // exists yet), hidden again by the caller.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable).ok();
    let both = UnshareFlags::NEWUSER | UnshareFlags::NEWPID;
    // SAFETY: as above.
    if unsafe { rustix::thread::unshare_unsafe(both) }.is_err() {
        return Ok(0);
    }
    // Now in a user namespace with no mapping: map our ids to themselves, or nothing we
    // create would have an owner.
    map_own_ids(uid.as_raw(), gid.as_raw())?;
    Ok(MODE_PID_NAMESPACE | MODE_USER_NAMESPACE)
}

/// After `unshare(CLONE_NEWUSER)`: map our own user and group ids (of the parent namespace)
/// to themselves, which an unprivileged process may do for itself. `setgroups` must be denied
/// first for the group map. Async-signal-safe.
fn map_own_ids(uid: u32, gid: u32) -> io::Result<()> {
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

/// Write `bytes` to the file at `path` in one `write` (async-signal-safe).
fn write_file(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    if rustix::io::write(&fd, bytes)? != bytes.len() {
        return Err(io::ErrorKind::WriteZero.into());
    }
    Ok(())
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
unsafe fn clone3_vfork(
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
fn positive(pid: libc::pid_t) -> io::Result<Pid> {
    Pid::from_raw(pid).ok_or_else(|| io::ErrorKind::InvalidData.into())
}

/// C after creating its child (G or N).
struct Waiter<'a> {
    /// G or N.
    child: Pid,
    /// `MODE_*` flags.
    mode: u8,
    /// Where to report N's status (without a namespace).
    report: Option<BorrowedFd<'a>>,
    /// `cgroup.kill` of the run's cgroup.
    cgroup_kill: Option<BorrowedFd<'a>>,
    /// The cgroup's parent directory and its name there.
    cgroup_removal: Option<(BorrowedFd<'a>, &'a CStr)>,
    /// The v1 `pids` cgroup's parent directory and its name there.
    pids_removal: Option<(BorrowedFd<'a>, &'a CStr)>,
    /// P's pid: when C's parent is no longer P, P died and C cleans up for it.
    embedder: libc::pid_t,
    /// The child's wait status, once reaped.
    status: Option<libc::c_int>,
}

impl Waiter<'_> {
    /// Wait for SIGCHLD (reap; exit once no child is left) or SIGTERM (the end: P asked, or
    /// P died).
    fn wait(mut self) -> ! {
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
    fn reap(&mut self, block: bool) -> bool {
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
    fn end(&mut self) -> ! {
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
    fn remove_cgroups(&self) {
        if let Some((parent, name)) = self.cgroup_removal {
            remove_when_empty(parent, name, self.cgroup_kill);
        }
        if let Some((parent, name)) = self.pids_removal {
            remove_when_empty(parent, name, None);
        }
    }

    /// Exit as the child did (or as killed, when it was never seen to end).
    fn exit(&self) -> ! {
        mirror(self.status.unwrap_or(libc::SIGKILL))
    }
}

/// Remove the cgroup `name` of the directory `parent`, retrying every millisecond for a
/// second while it is not yet empty, and repeating the kill (`1` to `kill`) meanwhile.
fn remove_when_empty(parent: BorrowedFd<'_>, name: &CStr, kill: Option<BorrowedFd<'_>>) {
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

/// The error number to report for `e` (`EINVAL` where it has none, as std's `Command`
/// reports a pre-exec step's error).
fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EINVAL)
}

/// A stack for a process cloned onto this memory: an anonymous private mapping with a guard
/// page below it, unmapped on drop. N runs on one until it executes the program (it is gone
/// from it when the stack is dropped: see [`ChildPlan::start_program`]); G runs on one for
/// its whole life, which is forgotten, never unmapped ([`ChildPlan::start_init`]). Made in C
/// or G with raw system calls (no allocation).
struct Stack {
    base: *mut libc::c_void,
}

impl Stack {
    /// Usable bytes above the guard page: more than the setup before `exec` needs (the
    /// sandbox's steps included); the embedder's hooks get what a thread of 256 KiB would.
    const SIZE: usize = 256 * 1024;
    const GUARD: usize = 4096;

    #[expect(unsafe_code, reason = "mmap and mprotect of a fresh mapping")]
    fn new() -> io::Result<Stack> {
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
    fn top(&self) -> *mut libc::c_void {
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

/// How many processes (threads included, as `RLIMIT_NPROC` counts) the real user `uid` has,
/// from `/proc/<pid>/status` (`Uid:` and `Threads:`). Async-signal-safe: raw system calls and
/// buffers on the stack. Processes that end meanwhile may be counted or not.
fn count_processes_of(uid: rustix::process::Uid) -> u64 {
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
fn status_field(text: &[u8], name: &[u8]) -> Option<u64> {
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

/// `waitpid` options for any child, clones included (`__WALL`).
fn wait_all() -> WaitOptions {
    WaitOptions::from_bits_retain(libc::__WALL as u32)
}

/// End this process the way `status` says its child ended.
#[expect(
    unsafe_code,
    reason = "kill(2) with a signal number rustix cannot name"
)]
fn mirror(status: libc::c_int) -> ! {
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
fn exit_now(code: libc::c_int) -> ! {
    // SAFETY: `_exit` is async-signal-safe and only ends the process.
    unsafe { libc::_exit(code) }
}

/// A signal set holding `signals` (none: the empty set).
#[expect(unsafe_code, reason = "sigemptyset and sigaddset")]
fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
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
fn set_signal_mask(how: libc::c_int, set: &libc::sigset_t) {
    // SAFETY: reads an initialised set; no old set is asked for.
    unsafe { libc::sigprocmask(how, set, std::ptr::null_mut()) };
}

/// Take one of the blocked signals in `set` (`sigwaitinfo`), or give up after `nanos`
/// nanoseconds (`sigtimedwait`); the signal number, or -1.
#[expect(unsafe_code, reason = "sigwaitinfo and sigtimedwait")]
fn wait_signal(set: &libc::sigset_t, nanos: Option<i64>) -> libc::c_int {
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
fn set_disposition(signal: libc::c_int, disposition: libc::sighandler_t) {
    debug_assert!(disposition == libc::SIG_DFL || disposition == libc::SIG_IGN);
    // SAFETY: installs no handler of ours, only the default or ignoring, which any code
    // may do for any signal (SIGKILL and SIGSTOP refuse with EINVAL).
    unsafe { libc::signal(signal, disposition) };
}

/// The embedding process's handlers (tokio's SIGCHLD, an embedder's SIGINT, a real-time
/// signal's) mean nothing in a process that will not exec: back to the defaults (exec would
/// do this for N anyway, and N, on this memory until it executes, must run none of them).
/// The signals the C library keeps for itself (32 and 33 with glibc) refuse, harmlessly.
fn reset_signal_handlers() {
    // Linux's signals are numbered 1 to 64.
    for signal in 1..=64 {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            set_disposition(signal, libc::SIG_DFL);
        }
    }
}

/// Close every descriptor but those in `keep` (negative entries are ignored).
///
/// # Safety
///
/// Closes descriptors other code may own: only in a forked child that never returns to such
/// code.
#[expect(unsafe_code, reason = "closes descriptors it does not own")]
unsafe fn close_all_except(keep: &[RawFd], range_works: bool) {
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
    unsafe { close_range(first, u32::MAX, range_works) };
}

/// Whether `close_range` works here (Linux 5.9 or later, not refused by a seccomp policy),
/// tried on a range that closes nothing (every descriptor number is below `u32::MAX`).
#[expect(unsafe_code, reason = "close_range(2) on an empty range")]
fn close_range_works() -> bool {
    // SAFETY: closes nothing: no descriptor has the number `u32::MAX`.
    unsafe { libc::syscall(libc::SYS_close_range, u32::MAX, u32::MAX, 0) == 0 }
}

/// `close_range(first, last)` where it works ([`close_range_works`]), else a close loop as
/// far as descriptors usually go. Neither writes errno when `range_works` is right:
/// `close_range` then succeeds, and rustix's `try_close` is a raw system call.
///
/// # Safety
///
/// As for [`close_all_except`].
#[expect(unsafe_code, reason = "closes descriptors it does not own")]
unsafe fn close_range(first: u32, last: u32, range_works: bool) {
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

/// Write one message to the report pipe, if there is one (a message of at most five bytes is
/// atomic on a pipe).
fn send(fd: Option<BorrowedFd<'_>>, bytes: &[u8]) {
    let Some(fd) = fd else { return };
    while rustix::io::write(fd, bytes) == Err(Errno::INTR) {}
}

/// A message of a tag and a 32-bit value.
fn send_value(fd: Option<BorrowedFd<'_>>, tag: u8, value: i32) {
    let v = value.to_ne_bytes();
    send(fd, &[tag, v[0], v[1], v[2], v[3]]);
}

/// A message of the report pipe, parsed in the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Message {
    /// `MODE_*` flags.
    Mode(u8),
    Status(i32),
    StartFailed(i32),
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
            MSG_STATUS | MSG_START_FAILED => match value() {
                None => break,
                Some(v) if tag == MSG_STATUS => (Message::Status(v), 5),
                Some(v) => (Message::StartFailed(v), 5),
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
    fn status_fields_are_read_and_the_count_sees_this_process() {
        let text = b"Name:\tx\nUid:\t1000\t1000\t1000\t1000\nThreads:\t12\n";
        assert_eq!(status_field(text, b"Uid:"), Some(1000));
        assert_eq!(status_field(text, b"Threads:"), Some(12));
        assert_eq!(status_field(text, b"Gid:"), None);
        // This test process (its threads at least) belongs to our real user.
        assert!(count_processes_of(rustix::process::getuid()) >= 1);
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
