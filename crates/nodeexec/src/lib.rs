//! Bounded child processes that never outlive the call that started them.
//!
//! [`Command`] describes one run (program, arguments, directory, environment, bounds) and
//! [`Command::run`] performs it: the child is spawned through process-wrap (the waiter in a
//! new process group, the program in a session of its own) with no shell, a fixed working directory, stdin on the null device (or a pipe or a terminal: *Interactive runs*) and an environment
//! built from an allowlist (PATH, LANG, LC_* and TZ by default; never the host's
//! `NODE_OPTIONS`; the embedder may add). stdout and stderr are read concurrently, each capped
//! independently ([`Captured`]: at most 32,768 bytes of text by default, cut on a character
//! boundary, non-UTF-8 bytes as U+FFFD, with its own truncation flag) and drained to the end
//! after the cap so the child never blocks; [`Command::output_tail`] keeps the end of each
//! stream as well, with a marker naming the bytes left out between, and a [`Progress`] handle
//! watches the output while the run goes. One time bound (500 ms by default, counted from
//! the program's `exec`) covers the program. **A run ends when its program exits**, not when
//! every holder of its output pipes has closed them: whatever the program left running (a
//! watcher, `(server &)`, a `setsid` child holding stdout) is killed at that moment, what was
//! written is drained for at most 100 ms more, and the outcome carries the program's own exit
//! code or signal. A [`CancellationToken`] cancels. The result is an
//! [`Outcome`] (exit code or signal, both streams, the [`Containment`] used) or an [`Error`]
//! whose [`ErrorKind`] says why.
//!
//! The crate knows nothing of tools or JSON; `confine_tools::node_process` builds on it.
//!
//! ```
//! use confine_nodeexec::{Command, Containment};
//! use tokio_util::sync::CancellationToken;
//!
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let mut cmd = Command::new("/bin/echo");
//! cmd.arg("hello").current_dir("/").output_cap(3);
//! let outcome = rt.block_on(cmd.run(&CancellationToken::new()))?;
//! assert_eq!(outcome.exit_code, Some(0));
//! assert_eq!(outcome.stdout.text, "hel");
//! assert!(outcome.stdout.truncated);
//! assert!(matches!(
//!     outcome.containment,
//!     Containment::Cgroup | Containment::PidNamespace | Containment::Subreaper
//! ));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # No process outlives a run
//!
//! At every end of a run (exit, timeout, cancellation, an error, a dropped future, and the
//! death of the embedding process by any signal, SIGKILL included) every process it started is
//! killed before `run` returns or the drop completes (within a second of the embedder's
//! death), and the run's own child is reaped. Process groups alone cannot promise that: a
//! descendant may call `setsid` (Node.js `detached: true`), double-fork or leave the group.
//! So each run is contained by the first of these the system allows ([`Containment`], in
//! this order of preference; [`Command::containment`] caps it, so tests can exercise each):
//!
//! ```text
//! embedding process ── waiter (subreaper) ┬─ init: PID 1 of a namespace ── program ── …
//!                                         │      (cgroup, PID namespace: where one can be made)
//!                                         └─ program ── …
//!                                                (subreaper; cgroup where no namespace can be made)
//! ```
//!
//! In every mode but the last, the embedding process forks a **waiter** that stays outside
//! whatever contains the program. It is the **child subreaper** of the run
//! (`PR_SET_CHILD_SUBREAPER`): an orphan of the run, whatever session, group or cgroup it moved
//! to, is re-parented to the waiter rather than to the system's init, so it stays a
//! descendant. At the end the waiter kills its child and **sweeps**: it SIGKILLs every
//! descendant it finds in `/proc` (each one before looking for its children, so a fork that
//! races the sweep is found by a later pass or never completes), reaps, and repeats until it
//! has no child left; only then does it exit. Its `PR_SET_PDEATHSIG` is SIGTERM, a signal it
//! keeps blocked and takes with `sigwaitinfo`, so the embedder's death (SIGKILL included) is
//! the same request as the embedder's own SIGTERM at the end of a run: the waiter performs the
//! whole end, and in cgroup mode removes the run's cgroup too.
//!
//! 1. **A cgroup v2 of its own** ([`Containment::Cgroup`]). Once per process the crate finds
//!    a writable `cgroup2` mount (`/proc/self/mountinfo`) and its own cgroup there
//!    (`/proc/self/cgroup`: the host's hierarchy as root, or a user's delegated subtree, as a
//!    systemd user service with `Delegate=yes` has), and checks that a child cgroup can be
//!    made, has `cgroup.kill` and can have a process created in it. Each run then gets
//!    `<mount><own cgroup>/confine-<pid>-<start time>-<n>`; the program's process is created
//!    in it with `clone3(CLONE_INTO_CGROUP)` (by the namespace's init, or by the waiter where
//!    there is none), so the program and every descendant are born inside, and nothing of the
//!    crate's is. At the end the run writes `1` to `cgroup.kill` (the kernel kills every
//!    member at once, forks in flight included), the waiter sweeps what left the cgroup, the
//!    run reaps the waiter and removes the directory (retrying while the kernel refuses
//!    because the last members are still leaving). Inside the cgroup the waiter also makes a
//!    **PID namespace** where one can be made, as in mode 2 (with a user namespace where a
//!    bare one is refused): the program then cannot see or signal the waiter or any process
//!    outside the run, and the namespace's end kills a descendant that moved itself to
//!    another cgroup, whatever the sweep does. Where no namespace can be made, the cgroup runs without one (host pids,
//!    [`Outcome::pid_namespace`] says which). [`Command::pid_namespace`]`(false)` opts out:
//!    then every pid the program sees is a host pid, so an observer outside can check
//!    `kill(pid, 0)` or `/proc/<pid>` for a pid a script printed (with the namespace, the
//!    script finds its own host pid as `/proc/self`, `/proc` being the host's, and a
//!    descendant's as the entry of its namespace whose `NSpid` ends with the namespace pid). Cgroups left by an embedder killed together with its waiter (named for an owner,
//!    pid *and* start time, [`Owner`], that no longer exists) are killed and removed at the
//!    first run of a later embedder, or by [`remove_stale_cgroups`]. (The program could
//!    instead join by writing `0` to `cgroup.procs` before `exec`, with no waiter; but that
//!    migration waits for an RCU grace period in the kernel, about 10 ms a run, where creating
//!    the process inside costs nothing measurable; the thread-only move that skips the wait,
//!    which the v1 `pids` bound below uses, is refused between v2 domain cgroups: see
//!    `docs/PERFORMANCE.md`.)
//! 2. **A PID namespace of its own** ([`Containment::PidNamespace`]), where no writable
//!    cgroup2 hierarchy exists (an ordinary user without delegation, a container whose cgroup
//!    file system is read-only, cgroup v1, Linux before 5.14). The waiter calls
//!    `unshare(CLONE_NEWPID)`, or where that is refused (no `CAP_SYS_ADMIN`)
//!    `unshare(CLONE_NEWUSER | CLONE_NEWPID)`, mapping its own user and group ids to
//!    themselves ([`Outcome::user_namespace`]), and starts the namespace's init, which starts
//!    the program (the init is a clone that runs on the waiter's memory, not a copy of it).
//!    When the init dies, the kernel kills every process in the namespace and the dying init
//!    reaps them. The program is not PID 1 itself: PID 1 ignores signals it has no
//!    handler for (a script could not even kill itself), and its death would end the
//!    namespace at once, before the output written just before the program's exit is read.
//!    The script sees **namespace pids** (`process.pid` is 2), which mean nothing
//!    to an observer outside; in exchange it cannot see or signal the waiter.
//! 3. **The subreaper alone** ([`Containment::Subreaper`]), where namespaces are refused too
//!    (user namespaces disabled, a seccomp policy): no privilege at all is needed. Host pids.
//!
//! [`Containment::ProcessGroup`], the process group alone, is never chosen unless asked for:
//! it is the weak twin the tests compare with (a descendant that leaves the group escapes).
//! [`Outcome::containment`] says which mode was used; `confine doctor` names the default.
//!
//! Why this order: a cgroup's kill is one atomic kernel operation over the whole tree (and
//! bounds its processes and memory where the controllers are enabled); a namespace is as
//! complete and hides the waiter, but renumbers pids, hence both together by default; the
//! subreaper's sweep is complete as long as the waiter lives, and the waiter is visible to
//! the program (its parent) as a process of the same user. The namespace inside the cgroup
//! costs about 0.1 to 0.3 ms a run (`docs/PERFORMANCE.md`).
//!
//! # Bounds
//!
//! Each run's processes (threads included, 256 by default) and memory (1 GiB) are bounded,
//! each by the strongest mechanism the system offers ([`Command::max_processes`],
//! [`Command::max_memory`]): the run's cgroup v2 `pids.max` and `memory.max` where those
//! controllers can be enabled; for processes, else a cgroup of the run's own in a writable
//! cgroup v1 `pids` hierarchy (root on a cgroup v1 or hybrid host, where the v2 hierarchy
//! has no `pids` controller), else `RLIMIT_NPROC`; for memory, `RLIMIT_DATA` of each process
//! always. [`Outcome::process_bound`] says which bounded the processes. The kernel exempts
//! root from `RLIMIT_NPROC`, so where neither cgroup can be had a root embedder's runs have
//! no process bound ([`ProcessBound::Unbounded`]): a fork bomb then takes what the machine
//! lets it until the time bound, when the kill ends it with everything it started.
//!
//! **A root program cannot lift its bound.** A root embedder's program is uid 0 (without
//! capabilities), and uid 0 owns the cgroup files: it could write its pid to the root
//! cgroup's `cgroup.procs` or `max` to its own `pids.max`. So where it runs unsandboxed in a
//! cgroup of the run's, its process first gets a mount namespace of its own (private, so
//! nothing reaches the embedder's) in which every writable `cgroup`/`cgroup2` mount is
//! remounted read-only (`EROFS` for every write, reads unchanged), and last a seccomp filter
//! refusing a new cgroup namespace, `setns` and `clone3` (`ENOSYS`; the C library falls back
//! to `clone`), without which it could mount a cgroup file system of its own inside a user
//! namespace and raise the bound there. Where no mount namespace can be made and a writable
//! cgroup mount is left, the start fails ([`ErrorKind::StartFailed`]); containers mount it
//! read-only, and then nothing is needed. Under the [sandbox](#sandbox) Landlock refuses
//! those writes and its filter every namespace. `/proc/<pid>/root` of a process outside the
//! run leads to the embedder's mounts only where the program may read-trace it, which needs
//! the target's capabilities to be none (the program has none): the embedder and the
//! host's daemons hold theirs, the waiter and init are not dumpable. An ordinary user's
//! delegated cgroup is the user's to write, and is not covered. The crate's
//! `contain/cgroupfs.rs` and the repository's `docs/SECURITY.md` say more.
//!
//! # Less privilege than the embedder
//!
//! Sandbox or not, the program runs in a session of its own (`setsid`: no controlling
//! terminal, so no `TIOCSTI` into the embedder's terminal; a terminal run's only controlling
//! terminal is the one made for it, see *Interactive runs*), with `PR_SET_NO_NEW_PRIVS`, an
//! empty capability bounding set where the embedder may empty it, and no capabilities (a
//! root embedder's child keeps none through `exec`: with no new privileges the kernel clamps
//! what `exec` would grant to the empty permitted set). [`Command::new_session`] and
//! [`Command::drop_privileges`] opt out. The waiter, a fork of the embedder that never
//! execs, is made not dumpable (no other process of the user may read its
//! `/proc/<pid>/environ` or attach to it) and overwrites the embedder's environment strings
//! in its copy of the memory with zeros; the namespace's init runs on that same memory, so
//! the program can read nothing of the embedder's environment through its parent.
//!
//! **Nothing inherited.** The program holds its stdin (the null device, or the pipe or
//! terminal made for the run), stdout, stderr and
//! the descriptors passed with [`Command::pass_fd`], nothing else: not what the embedder's
//! launcher left open without close-on-exec (a shell's `exec 7>>file`), not the embedder's own
//! handles, whatever their flags. Just before `exec`, after the pre-exec steps, the program's
//! process marks every other descriptor close-on-exec: `close_range(CLOSE_RANGE_CLOEXEC)`
//! (Linux 5.11), else each entry of `/proc/self/fd`, else every number up to the larger of
//! the soft descriptor limit and 65,536 (at most 2^20). This holds in every containment mode,
//! with and without the sandbox: a Landlock sandbox confines paths, and an inherited
//! descriptor needs none (`tests/run.rs`, `run_inherits_no_descriptor_*`, beside a plain
//! child that writes and reads through the same descriptors).
//!
//! # Interactive runs
//!
//! [`Command::stdin`] gives the program something to read: [`Stdin::Pipe`], a pipe made for
//! the run whose write end the embedder holds, or [`Stdin::Terminal`], a pseudo-terminal made
//! for the run (opened by the embedder's process with `O_NOCTTY`, so it never becomes the
//! embedder's own, close-on-exec, the slave taken from the master with `TIOCGPTPEER` where the
//! kernel has it). The program gets the slave as stdin, stdout and stderr; it leads a session
//! of its own and takes the slave as that session's controlling terminal (`setsid`, then
//! `TIOCSCTTY`, the last steps before `exec`, after the sandbox's: the filter allows both, and
//! Landlock checks a device's rights when it is opened, which the slave was before). The
//! master stays with the embedder: its output is read as the run's stdout (one stream: the
//! terminal merges stdout and stderr; stderr stays empty), and [`Started::input`] gives an
//! [`Input`] that writes (non-blocking, bounded by a deadline, serialized), closes (the pipe's
//! end; on a terminal the end-of-file key, since closing the master would hang the session
//! up) and resizes (`TIOCSWINSZ`). Control bytes written to a terminal act as keys: the line
//! discipline turns `^C` into SIGINT for the terminal's foreground process group, which is the
//! program's session's, never the waiter's or the embedder's.
//!
//! Containment is unchanged: the waiter and the namespace's init close their copies of the
//! program's stdio once it is started, so only the run's own processes hold the pipe's read end
//! or the slave, and the end of a run (cgroup kill, namespace, sweep) ends every one of them;
//! the master then reads end of file (`EIO`, taken as the end). The embedder's end is shut when
//! the run ends, however it ends. Ordinary runs keep the null device and no controlling
//! terminal.
//!
//! # Pre-exec steps
//!
//! [`Command::pre_exec`] adds a step (async-signal-safe only) that runs in the process that is
//! about to become the program, after the group, the cgroup or namespace and the passed
//! descriptors are in place, and before the privileges are dropped and `exec`; a sandbox
//! (Landlock, `setrlimit`) plugs in there (the process is already in its cgroup by then:
//! nothing has to be written to the cgroup file system past Landlock).
//!
//! # Sandbox
//!
//! Opt-in, Linux Landlock and seccomp: [`Sandbox`] is the policy, [`Sandbox::build`] opens
//! and checks its paths in the calling process with the write root, and
//! [`Command::sandbox`] adds the pre-exec step that applies it (only raw system calls after
//! `fork`: `PR_SET_NO_NEW_PRIVS`, the capabilities dropped, a Landlock ruleset made and
//! enforced, `setrlimit`, a seccomp filter). The program and every descendant then:
//!
//! * may read only the write root, the system's programs and libraries (`/usr`, `/bin`,
//!   `/sbin`, `/lib*`), the installation of its interpreter where the embedder names it
//!   ([`Sandbox::allow_installation`]), all of `/etc` but its secrets where the run gets its
//!   read-only view (else named non-secret files of it: the loader cache, `passwd`, `group`,
//!   name resolution, the time zone, public certificates), `/dev/null`,
//!   `/dev/zero`, `/dev/random`, `/dev/urandom`, a few system-wide `/proc` files, the
//!   program's own `/proc/<pid>`, and what [`Sandbox::allow_read`] adds: not the home
//!   directory, `/root`, `/tmp`, `/etc/shadow` or other processes' `/proc` entries, as root
//!   too (the capabilities that would bypass file permissions are gone, and Landlock does
//!   not care about them anyway);
//! * may write, create, rename, remove and link only beneath the write root (no device
//!   nodes there), plus `/dev/null` and what [`Sandbox::allow_write`] adds: anything else
//!   fails with `EACCES`, `/tmp` included;
//! * may not change the mode, owner, times or extended attributes of any file (`EPERM`; the
//!   seccomp filter sees system calls, not paths, so this holds inside the write root too:
//!   `chmod` and `fs.copyFile`, which copies the mode, fail there);
//! * may not create a socket of any family, Unix included (`EACCES`; so no pathname Unix
//!   socket anywhere is reachable), only a connected Unix stream or sequenced-packet pair (`socketpair`, which
//!   child stdio and Node.js's IPC use); may not `bind` or `connect` TCP (Landlock, ABI 4);
//!   from ABI 6, may not signal a process outside the sandbox;
//! * may make no namespace (`unshare`, `clone` with a namespace flag and `setns` fail with
//!   `EPERM`, `clone3` with `ENOSYS` so that the C library falls back to `clone`): inside a
//!   user namespace it would hold every capability again; threads and forks work;
//! * runs with [`DEFAULT_ADDRESS_SPACE`] (4 GiB) of address space and
//!   [`DEFAULT_OPEN_FILES`] (1024) descriptors, no capabilities and no way to gain any;
//! * finds the paths beneath the write root that [`Sandbox::read_only`] names (git's hooks
//!   and configuration, for the tools) read-only (`EROFS`), in a mount namespace of its own;
//! * finds the paths that [`Sandbox::hide`] names (the tools' denied entries) covered in that
//!   namespace: a file by `/dev/null`, a directory by an empty mode-0 tmpfs.
//!
//! Nothing here but the last two needs a namespace or a privilege: the same policy holds as
//! root, as an ordinary user and in a container that refuses namespaces. Read-only and hidden
//! paths need a mount namespace (root, or the user namespace the containment makes for an
//! ordinary user); where none can be made, a start with such paths fails with
//! [`ErrorKind::SandboxUnavailable`] and nothing runs. It does **not** hide that a
//! path exists (`stat` is not governed), nor stop exhausting the CPU, the disk beneath the
//! root or the number of processes within the time bound. `docs/SECURITY.md` says more,
//! and compares it with other agents' sandboxes.
//!
//! Enforcement is all or nothing: where the kernel lacks Landlock, or has an ABI older than
//! [`Sandbox::min_abi`] (default 4), [`Sandbox::build`] fails with
//! [`ErrorKind::SandboxUnavailable`] and nothing runs. [`LandlockSupport::probe`] says what
//! the kernel offers.
//!
//! ```
//! use confine_nodeexec::{Command, ErrorKind, LandlockSupport, Sandbox};
//! use tokio_util::sync::CancellationToken;
//!
//! let workspace = tempfile::tempdir()?;
//! let mut sandbox = Sandbox::new();
//! sandbox.open_files(Some(256));
//! let rules = match sandbox.build(std::fs::File::open(workspace.path())?) {
//!     Ok(rules) => rules,
//!     // An old kernel: refuse to run rather than run unconfined.
//!     Err(e) if e.kind() == ErrorKind::SandboxUnavailable => return Ok(()),
//!     Err(e) => return Err(e.into()),
//! };
//! assert!(LandlockSupport::probe().abi().is_some_and(|abi| abi >= rules.abi()));
//!
//! let mut cmd = Command::new("/bin/sh");
//! cmd.arg("-c")
//!     .arg("echo inside > inside.txt && echo outside > /tmp/outside.txt")
//!     .current_dir(workspace.path())
//!     .sandbox(&rules);
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let outcome = rt.block_on(cmd.run(&CancellationToken::new()))?;
//! assert_ne!(outcome.exit_code, Some(0)); // the write to /tmp was refused
//! assert!(workspace.path().join("inside.txt").exists());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Network policy
//!
//! Opt-in, usable with or without the sandbox: [`Network::new`] makes, once per embedder, a
//! network whose only way out is a proxy the embedder serves on the listener it returns (a
//! network namespace of the embedder's own, else one in a user namespace made for it, else
//! Landlock TCP rules allowing the proxy's port alone; [`NetworkMechanism`] says which), and
//! [`Command::network`] runs a program in it: its waiter joins the namespace before anything
//! of the run exists, and a seccomp rule refuses every socket but TCP (and UDP on the run's
//! own loopback). Every run of one [`Network`] shares one loopback. Where no mechanism works
//! the error is [`ErrorKind::NetworkPolicyUnavailable`] and nothing runs. The proxy itself
//! (which hosts, which addresses) is the `confine-netpolicy` crate's; the embedder passes the
//! proxy's variables to the program. What the Landlock mode cannot block: a connection to
//! the proxy's port on another host, and it gives no loopback of the run's own (no listening
//! at all); `docs/SECURITY.md` of the repository has the whole threat model.
//!
//! # Threat model
//!
//! The program and everything it starts are the adversary: they may fork, set up their own
//! sessions, double-fork, move to another cgroup where the user may, fill their pipes, hold a
//! pipe open after exiting, spin forever or ignore signals. None of that makes a run outlast
//! its bound (plus the kill) or leave a process behind, in any mode but the process-group
//! twin. Without the opt-in [sandbox](#sandbox) the crate does **not** isolate the program
//! from the system: it runs with the embedder's user (without capabilities) and can read and
//! write what that user can, and use the network; its memory and process count are bounded
//! only as [`Command::max_memory`] and [`Command::max_processes`] say, its CPU only by the
//! time limit. Where the program sees host pids (subreaper mode, and cgroup mode where no
//! namespace can be made or the embedder opted out) it can name,
//! and as the same user signal, processes outside the run, its waiter included: a program
//! that SIGKILLs its waiter and has, in cgroup mode, also moved a descendant out of the run's
//! cgroup (root, or the owner of a delegated subtree), or in subreaper mode has any descendant
//! left, frees that descendant from the sweep. The sandbox refuses such signals from Landlock
//! ABI 6 (and the cgroup write always), and the PID namespace, made by default wherever it
//! can be, hides the waiter.
//!
//! # Platform support
//!
//! Linux only (`PR_SET_CHILD_SUBREAPER`, `PR_SET_PDEATHSIG`, `/proc`, `close_range`, with a
//! close loop before Linux 5.9). The cgroup mode needs Linux 5.14 (`cgroup.kill`; `clone3`
//! with `CLONE_INTO_CGROUP` is 5.7) and a cgroup2 hierarchy (unified, or the `unified` mount
//! of hybrid mode) where the embedder may create a child of its own cgroup and move a process
//! into it. The PID namespace needs `CAP_SYS_ADMIN`, or unprivileged user namespaces. The
//! subreaper needs nothing. [`Outcome::containment`] always reports what was used.
//! Embedders that share one cgroup are assumed to share one PID namespace (the stale sweep
//! judges owners by `/proc/<pid>`). The embedding thread that starts a run must outlive it
//! (`PR_SET_PDEATHSIG` follows the thread that forked); tokio runtime threads do.
//!
//!
//! # Unsafe code
//!
//! This is the workspace's only crate with `unsafe` code, all of it for what happens between
//! `fork` and `exec` (a child of a multi-threaded process may only make async-signal-safe
//! calls, so no allocation and no lock) and for the few system calls no safe wrapper offers.
//! Each item that holds any says why in `#[expect(unsafe_code, reason = ...)]`, each unsafe
//! function has a `# Safety` section, and each block (one call where that can be) a
//! `// SAFETY:` comment (`clippy::undocumented_unsafe_blocks` is denied here). rustix's
//! safe wrappers are used wherever rustix has one (`PR_SET_PDEATHSIG`, `PR_SET_NO_NEW_PRIVS`,
//! `PR_SET_CHILD_SUBREAPER`, `PR_SET_DUMPABLE`, capabilities, `setrlimit`, `kill`, `waitpid`,
//! `getppid`, `setsid`, `getdents64`): on Linux rustix makes the system call itself, without
//! the C library or an allocation, so they are fine after `fork` too. What is left on `libc`:
//! `fork` and `clone3(CLONE_INTO_CGROUP)`, the vfork-style `clone(CLONE_VM | CLONE_VFORK)`
//! that starts the program's process on a stack of its own (so it copies nothing of the
//! embedder; it then runs `execve` itself), `_exit`, signal masks and dispositions,
//! `sigwaitinfo`, `close_range`, `dup2` onto chosen numbers, the Landlock and seccomp calls,
//! and one write of zeros over the waiter's copy of the environment.
//!
//! [`CancellationToken`]: tokio_util::sync::CancellationToken

#![deny(
    missing_docs,
    clippy::undocumented_unsafe_blocks,
    clippy::multiple_unsafe_ops_per_block
)]

mod capture;
mod cgroup;
mod command;
mod contain;
mod error;
mod fdpass;
mod input;
mod limits;
mod network;
mod owner;
mod pids_v1;
mod privilege;
mod run;
mod sandbox;
mod signal;
mod slots;
mod sweep;

pub use capture::{
    Captured, DEFAULT_OUTPUT_CAP, PROGRESS_LINE_BYTES, Progress, Unread, UnreadOutput,
    omitted_marker,
};
pub use command::{
    Command, DEFAULT_INHERITED_ENV, DEFAULT_MAX_MEMORY, DEFAULT_MAX_PROCESSES, DEFAULT_TIMEOUT,
};
pub use error::{Error, ErrorKind};
pub use input::{Input, Stdin, WindowSize};
pub use network::{Network, NetworkMechanism};
pub use owner::Owner;
pub use run::{Containment, Outcome, ProcessBound, Started, find_on_path};
pub use sandbox::{
    DEFAULT_ADDRESS_SPACE, DEFAULT_MIN_ABI, DEFAULT_OPEN_FILES, DEFAULT_TMP_INODES, GIT_IDENTITY,
    HomeTools, LandlockSupport, MAX_TESTED_ABI, PrivateDirs, SECRET_PLACES, Sandbox, SandboxRules,
    default_tmp_bytes,
};
pub use signal::signal_name;
pub use slots::{RunSlot, RunSlots};

/// Make the embedding process not dumpable, so that no other process of its user (a program
/// a run started, with host pids, included) may read its `/proc/<pid>/environ` or memory, or
/// attach to it; core dumps are off as a consequence. For a server whose environment holds
/// secrets; best effort.
pub fn hide_embedder_environment() {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).ok();
}

/// Kill and remove the cgroups that embedders which died without cleaning up left where this
/// process's runs get theirs (only names this crate makes, judged by their owner's identity:
/// [`Owner`]). Cheap; call it when a tool is built. The first run of a process does it too.
pub fn remove_stale_cgroups() {
    cgroup::remove_stale();
    pids_v1::remove_stale();
}
