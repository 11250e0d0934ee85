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
//!
//! # Modules
//!
//! - `plan`: what P prepares ([`ChildPlan`], [`Exec`]) and the steps of C, G and N;
//! - `clone`: N born in the run's cgroup, the stacks of the clones (`clone3_x86_64`: the
//!   architecture-specific entry of a vfork-style `clone3` child);
//! - `waiter`: C's reaping, report of N's status, the end and the sweep;
//! - `signals`: masks, dispositions and `sigwaitinfo`;
//! - `report`: the report pipe's messages;
//! - `descriptors`: sealing and closing descriptors;
//! - `namespace`: the PID (and user) namespace of the run;
//! - `cgroupfs`: a root program's cgroup file systems made read-only in a mount namespace of
//!   its own, and the filter that keeps it from mounting another.
//!
//! Each module states at its top the invariants it keeps.

mod cgroupfs;
mod clone;
#[cfg(target_arch = "x86_64")]
mod clone3_x86_64;
mod descriptors;
mod namespace;
mod plan;
mod report;
mod signals;
mod waiter;

// What the rest of the crate uses.
pub(crate) use self::cgroupfs::CgroupCover;
#[cfg(any(test, not(target_arch = "x86_64")))]
pub(crate) use self::clone::clone_into_cgroup;
pub(crate) use self::clone::spawn_exiting_in;
pub(crate) use self::descriptors::cloexec_range_works;
pub(crate) use self::namespace::map_own_ids;
pub(crate) use self::plan::{ChildPlan, Exec, Hook};
pub(crate) use self::report::{
    MODE_CGROUP, MODE_PID_NAMESPACE, MODE_SUBREAPER, MODE_USER_NAMESPACE, MSG_MODE,
    MSG_START_FAILED, MSG_STATUS, Message, parse_messages,
};

// Each module names its siblings' items through this one scope.
#[cfg(target_arch = "x86_64")]
use self::clone3_x86_64::*;
#[allow(unused_imports)]
use self::{clone::*, descriptors::*, namespace::*, plan::*, report::*, signals::*, waiter::*};

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
