//! Bounded child processes that never outlive the call that started them.
//!
//! [`Command`] describes one run (program, arguments, directory, environment, bounds) and
//! [`Command::run`] performs it: the child is spawned through process-wrap in a new process
//! group with no shell, a fixed working directory, stdin on the null device and an environment
//! built from an allowlist (PATH, LANG, LC_* and TZ by default; never the host's
//! `NODE_OPTIONS`; the embedder may add). stdout and stderr are read concurrently, each capped
//! independently ([`Captured`]: at most 32,768 bytes of text by default, cut on a character
//! boundary, non-UTF-8 bytes as U+FFFD, with its own truncation flag) and drained to the end
//! after the cap so the child never blocks. One time bound (500 ms by default) covers the
//! child's exit *and* both pipes closing. A [`CancellationToken`] cancels. The result is an
//! [`Outcome`] (exit code or signal, both streams, the [`Containment`] used) or an [`Error`]
//! whose [`ErrorKind`] says why.
//!
//! The crate knows nothing of tools or JSON; `tools::node_process` builds on it.
//!
//! ```
//! use nodeexec::{Command, Containment};
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
//!     Containment::Cgroup | Containment::PidNamespace | Containment::ProcessGroup
//! ));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # No process outlives a run
//!
//! At every end of a run (exit, timeout, cancellation, an error, a dropped future) every
//! process it started is killed before `run` returns or the drop completes, and the run's own
//! child is reaped. Process groups alone cannot promise that: a descendant may call `setsid`
//! (Node.js `detached: true`) or `setpgid` and leave the group. So each run is contained by
//! the first of these the system allows ([`Containment`], in this order of preference;
//! [`Command::containment`] caps it, so tests can exercise each):
//!
//! 1. **A cgroup v2 of its own** ([`Containment::Cgroup`]). Once per process the crate finds
//!    a writable `cgroup2` mount (`/proc/self/mountinfo`) and its own cgroup there
//!    (`/proc/self/cgroup`), and checks that a child cgroup can be made, has `cgroup.kill`
//!    and can have a process created in it. Each run then gets
//!    `<mount><own cgroup>/confine-<pid>-<n>`:
//!
//!    ```text
//!    embedding process ── waiter (group leader) ╶╶ cgroup confine-<pid>-<n>: program ── …
//!    ```
//!
//!    The waiter (forked by std, outside the cgroup) creates the program's process with
//!    `clone3(CLONE_INTO_CGROUP)`, so the program and every descendant, `setsid` or not, are
//!    born inside. At the end the run writes `1` to `cgroup.kill` (the kernel kills every
//!    member at once, forks in flight included), the waiter reports the program's death and
//!    exits, the run reaps it, waits until `cgroup.events` says `populated 0` and removes the
//!    directory. No pid is renumbered: **every pid the program sees is a host pid**, so a
//!    judge outside can check `kill(pid, 0)` or `/proc/<pid>` for a pid the script printed.
//!    The embedding process never joins the cgroup and gets no subreaper. Cgroups left by an
//!    embedder that was killed before it could clean up (`confine-<pid>-*` whose pid no
//!    longer exists) are killed and removed at discovery. (The program could also join by
//!    writing `0` to `cgroup.procs` before `exec`, with no waiter; but that migration waits
//!    for an RCU grace period in the kernel, about 10 ms a run here, where creating the
//!    process inside costs nothing measurable: see `docs/PERFORMANCE.md`.)
//! 2. **A PID namespace of its own** ([`Containment::PidNamespace`]), where no writable
//!    cgroup2 hierarchy exists (no delegation, cgroup v1 only, Linux before 5.14):
//!
//!    ```text
//!    embedding process ── waiter (group leader) ── init: PID 1 of a new namespace ── program
//!    ```
//!
//!    The waiter calls `unshare(CLONE_NEWPID)` after `fork` and forks the init, which forks
//!    the program. When the init dies, the kernel kills every process in the namespace,
//!    whatever its session or group, and the dying init reaps them. The program is not PID 1
//!    itself: PID 1 ignores signals it has no handler for (a script could not even kill
//!    itself), and its death would end the namespace at once, while a descendant that keeps a
//!    pipe open must be waited for until the bound. The run ends by sending SIGTERM to the
//!    waiter, which SIGKILLs the init and exits once the namespace is empty; the waiter and
//!    init both have `PR_SET_PDEATHSIG = SIGKILL`, so the whole chain also dies with the
//!    embedding process. The caveat: the script sees **namespace pids** (`process.pid` is 2,
//!    its children's pids are small numbers that name other processes outside, kernel
//!    threads even), so a pid it prints means nothing to an observer outside.
//! 3. **The process group** ([`Containment::ProcessGroup`]), where `unshare` fails too (no
//!    `CAP_SYS_ADMIN` in the user namespace, a seccomp policy): at every end the group gets
//!    SIGKILL, but a descendant that left the group is **not** reached.
//!
//! [`Outcome::containment`] says which was used. Why this order: a cgroup keeps host pids and
//! its kill is one atomic kernel operation over the whole tree; a namespace is as complete but
//! renumbers pids; the group has a known gap.
//!
//! Differences at the end: in cgroup mode the descendants are dead (exited) when `run`
//! returns, but those orphaned by the program's exit are reaped by the host's init (or the
//! nearest subreaper), usually within milliseconds, so `kill(pid, 0)` may still find such a
//! zombie for that moment; in a namespace its init has reaped them all. If the embedding
//! process itself is SIGKILLed mid-run, in cgroup mode the waiter and the program die with it
//! (`PR_SET_PDEATHSIG`) but the program's descendants live on in the cgroup until the next
//! discovery (of a later embedder in the same cgroup) kills them; in a namespace they die at
//! once.
//!
//! # Pre-exec steps
//!
//! [`Command::pre_exec`] adds a step (async-signal-safe only) that runs in the process that is
//! about to become the program, after the group, the cgroup or namespace and the passed
//! descriptors are in place and just before `exec`; a sandbox (Landlock, `setrlimit`) plugs
//! in there (the process is already in its cgroup by then: nothing has to be written to the
//! cgroup file system past Landlock).
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
//!   ([`Sandbox::allow_installation`]), named non-secret files of `/etc` (the loader cache,
//!   `passwd`, `group`, name resolution, the time zone, public certificates), `/dev/null`,
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
//!   socket anywhere is reachable), only a connected Unix stream pair (`socketpair`, which
//!   child stdio and Node.js's IPC use); may not `bind` or `connect` TCP (Landlock, ABI 4);
//!   from ABI 6, may not signal a process outside the sandbox;
//! * runs with [`DEFAULT_ADDRESS_SPACE`] (4 GiB) of address space and
//!   [`DEFAULT_OPEN_FILES`] (1024) descriptors, no capabilities and no way to gain any.
//!
//! Nothing here needs a namespace or a privilege: the same policy holds as root, as an
//! ordinary user and in a container that refuses namespaces. It does **not** hide that a
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
//! use nodeexec::{Command, ErrorKind, LandlockSupport, Sandbox};
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
//! # Threat model
//!
//! The program and everything it starts are the adversary: they may fork, set up their own
//! sessions, fill their pipes, hold a pipe open after exiting, spin forever or ignore signals.
//! None of that makes a run outlast its bound (plus the kill) or leave a process behind, in a
//! cgroup or a namespace. Without the opt-in [sandbox](#sandbox) the crate does **not**
//! isolate the program from the system: it runs with the embedder's user and can read and
//! write what that user can, and use the network; nothing bounds its memory, or its CPU beyond
//! the time limit. In particular, in cgroup mode a program with the right to write another
//! cgroup's `cgroup.procs` (root, or the owner of a delegated subtree) can move itself out of
//! the run's cgroup and escape the kill, as it could do anything else unconfined; with the
//! sandbox, Landlock refuses that write (the cgroup file system lies outside the write root)
//! and the capabilities are gone. Host pids cut both ways: in cgroup mode the program can name,
//! and as the same user signal, processes outside the run (a PID namespace hid them); the
//! sandbox refuses such signals from Landlock ABI 6, and an embedder that needs that on an
//! older kernel can cap containment at [`Containment::PidNamespace`]. In the process-group
//! fallback, a descendant that leaves the group escapes the kill.
//!
//! # Platform support
//!
//! Linux only (cgroup v2, PID namespaces, `PR_SET_PDEATHSIG`, `close_range`, with a close loop
//! before Linux 5.9). The cgroup mode needs Linux 5.14 (`cgroup.kill`; `clone3` with
//! `CLONE_INTO_CGROUP` is 5.7) and a cgroup2
//! hierarchy (unified, or the `unified` mount of hybrid mode) where the embedder may create a
//! child of its own cgroup and move a process into it: root, or a delegated subtree (a systemd
//! user service with `Delegate=yes`). The PID namespace needs `CAP_SYS_ADMIN` (root, or a
//! container that grants it). Where neither is possible the group fallback applies;
//! [`Outcome::containment`] always reports what was used. Embedders that share one cgroup are
//! assumed to share one PID namespace (the stale sweep judges owners by `/proc/<pid>`). The
//! embedding thread that starts a run must outlive it (`PR_SET_PDEATHSIG` follows the thread
//! that forked); tokio runtime threads do.
//!
//! [`CancellationToken`]: tokio_util::sync::CancellationToken

mod capture;
mod cgroup;
mod command;
mod contain;
mod error;
mod run;
mod sandbox;
mod signal;

pub use capture::{Captured, DEFAULT_OUTPUT_CAP};
pub use command::{Command, DEFAULT_INHERITED_ENV, DEFAULT_TIMEOUT};
pub use error::{Error, ErrorKind};
pub use run::{Containment, Outcome};
pub use sandbox::{
    DEFAULT_ADDRESS_SPACE, DEFAULT_MIN_ABI, DEFAULT_OPEN_FILES, LandlockSupport, MAX_TESTED_ABI,
    Sandbox, SandboxRules,
};
pub use signal::signal_name;
