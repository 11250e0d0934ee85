//! The description of one bounded run: program, arguments, directory, environment, bounds.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::capture::{DEFAULT_OUTPUT_CAP, Progress};
use crate::contain::Hook;
use crate::privilege::Privileges;
use crate::run::Containment;
use crate::slots::RunSlots;

/// The default time bound: 500 ms.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);

/// The default bound on a run's processes (threads count too, as the kernel counts them):
/// 256.
pub const DEFAULT_MAX_PROCESSES: u64 = 256;

/// The default bound on memory: 1 GiB, for the whole run (`memory.max`) where its cgroup has
/// the memory controller, and for each of its processes' data (`RLIMIT_DATA`: heap and
/// private writable mappings; reservations that are never written, as V8 makes, do not count)
/// always.
pub const DEFAULT_MAX_MEMORY: u64 = 1 << 30;

/// Host variables passed by default: these names exactly, and every name starting with `LC_`.
pub const DEFAULT_INHERITED_ENV: &[&str] = &["PATH", "LANG", "TZ"];

/// A variable never taken from the host, whatever the allowlist says.
const NEVER_INHERITED: &[&str] = &["NODE_OPTIONS"];

/// One bounded child process, not yet started: build it, then [`Command::run`] it.
///
/// The child runs with no shell (the program is executed directly), in `current_dir`, with
/// stdin on the null device (or a pipe or a terminal: [`Command::stdin`]), stdout and stderr piped and capped, in its own process group and
/// (where the kernel allows) a cgroup of its own, else a PID namespace of its own (see
/// [`Containment`]), with an environment built from an allowlist rather than inherited.
pub struct Command {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<OsString>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) inherit: Vec<OsString>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) stdout_cap: usize,
    pub(crate) stderr_cap: usize,
    pub(crate) timeout: Duration,
    pub(crate) containment: Containment,
    pub(crate) tail: usize,
    pub(crate) progress: Option<Progress>,
    pub(crate) unread: Option<crate::capture::Unread>,
    pub(crate) namespace: Option<bool>,
    pub(crate) privileges: Privileges,
    pub(crate) slots: Option<Arc<RunSlots>>,
    pub(crate) max_processes: Option<u64>,
    pub(crate) max_memory: Option<u64>,
    pub(crate) fds: Vec<(OwnedFd, i32)>,
    pub(crate) hooks: Vec<Hook>,
    /// The network policy's network, joined by the run's waiter ([`Command::network`]).
    pub(crate) network: Option<crate::Network>,
    /// Whether [`Command::sandbox`] was called (its rules confine the cgroup file systems
    /// already; see `contain/cgroupfs.rs`).
    pub(crate) sandboxed: bool,
    /// What the program's stdin is ([`Command::stdin`]).
    pub(crate) stdin: crate::input::Stdin,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("inherit", &self.inherit)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("stdout_cap", &self.stdout_cap)
            .field("stderr_cap", &self.stderr_cap)
            .field("timeout", &self.timeout)
            .field("containment", &self.containment)
            .field("tail", &self.tail)
            .field("progress", &self.progress.is_some())
            .field("namespace", &self.namespace)
            .field("privileges", &self.privileges)
            .field("fds", &self.fds.len())
            .field("slots", &self.slots.as_ref().map(|s| s.size()))
            .field("max_processes", &self.max_processes)
            .field("max_memory", &self.max_memory)
            .field("hooks", &self.hooks.len())
            .field(
                "network",
                &self.network.as_ref().map(crate::Network::mechanism),
            )
            .field("sandboxed", &self.sandboxed)
            .field("stdin", &self.stdin)
            .finish()
    }
}

impl Command {
    /// A run of `program` (a path; no PATH search is wanted, give it absolute), with the
    /// defaults: no arguments, the embedding process's directory, PATH/LANG/LC_*/TZ from the
    /// host, 32,768 bytes per stream, 500 ms, the strongest containment the system allows
    /// (a cgroup with a PID namespace inside, else a PID namespace, else the subreaper).
    pub fn new(program: impl AsRef<Path>) -> Self {
        Self {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            inherit: DEFAULT_INHERITED_ENV.iter().map(OsString::from).collect(),
            env: Vec::new(),
            stdout_cap: DEFAULT_OUTPUT_CAP,
            stderr_cap: DEFAULT_OUTPUT_CAP,
            timeout: DEFAULT_TIMEOUT,
            containment: Containment::Cgroup,
            tail: 0,
            progress: None,
            unread: None,
            namespace: None,
            privileges: Privileges {
                new_session: true,
                drop: true,
                terminal: false,
            },
            slots: None,
            max_processes: Some(DEFAULT_MAX_PROCESSES),
            max_memory: Some(DEFAULT_MAX_MEMORY),
            fds: Vec::new(),
            hooks: Vec::new(),
            network: None,
            sandboxed: false,
            stdin: crate::input::Stdin::Null,
        }
    }

    /// Append one argument (passed verbatim: no shell, no splitting).
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Append arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The working directory of the child.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Also pass the host's value of `name`, if it has one. `NODE_OPTIONS` is never passed
    /// from the host (set it explicitly with [`Command::env`] if you really mean it).
    pub fn inherit_env(&mut self, name: impl AsRef<OsStr>) -> &mut Self {
        self.inherit.push(name.as_ref().to_owned());
        self
    }

    /// Pass no host variable at all (not even PATH, LANG, LC_* or TZ).
    pub fn inherit_no_env(&mut self) -> &mut Self {
        self.inherit.clear();
        self
    }

    /// Set a variable in the child (after the inherited ones, so it wins).
    pub fn env(&mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.env
            .push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Cap stdout and stderr, each, at `bytes` of text.
    pub fn output_cap(&mut self, bytes: usize) -> &mut Self {
        self.stdout_cap = bytes;
        self.stderr_cap = bytes;
        self
    }

    /// Cap stdout at `bytes` of text.
    pub fn stdout_cap(&mut self, bytes: usize) -> &mut Self {
        self.stdout_cap = bytes;
        self
    }

    /// Cap stderr at `bytes` of text.
    pub fn stderr_cap(&mut self, bytes: usize) -> &mut Self {
        self.stderr_cap = bytes;
        self
    }

    /// Also keep the last `bytes` of each stream (0, the default, keeps the head alone): the
    /// text is then the head (the first stdout or stderr cap bytes), a marker naming the
    /// bytes left out, and the tail; memory stays bounded by head and tail whatever the
    /// child writes. See [`Captured`](crate::Captured).
    pub fn output_tail(&mut self, bytes: usize) -> &mut Self {
        self.tail = bytes;
        self
    }

    /// Hand the output, as it is read, to `unread` as well (for a reader that comes back to
    /// it while the run goes: a background job). The captured [`Outcome`](crate::Outcome)
    /// streams are kept as usual.
    pub fn unread(&mut self, unread: &crate::capture::Unread) -> &mut Self {
        self.unread = Some(unread.clone());
        self
    }

    /// What the program's stdin is (default [`Stdin::Null`](crate::Stdin::Null), the null
    /// device). [`Stdin::Pipe`](crate::Stdin::Pipe): a pipe the embedder writes through
    /// [`Started::input`](crate::Started::input). [`Stdin::Terminal`](crate::Stdin::Terminal):
    /// a pseudo-terminal of the run's own as stdin, stdout and stderr and as the controlling
    /// terminal of the program's session (so the program always gets a session of its own,
    /// whatever [`Command::new_session`] says, except in the process-group mode, where it
    /// keeps the waiter's group and has no controlling terminal); its output is one stream,
    /// captured as stdout (stderr stays empty). See the crate docs, *Interactive runs*.
    pub fn stdin(&mut self, stdin: crate::input::Stdin) -> &mut Self {
        self.stdin = stdin;
        self
    }

    /// Report the output as it is read (bytes so far, the last line) to `progress`, which
    /// another task may read while the run goes.
    pub fn progress(&mut self, progress: &Progress) -> &mut Self {
        self.progress = Some(progress.clone());
        self
    }

    /// The time bound, from the program's start (its `exec`: the crate's own setup before
    /// it, the cgroup, the namespace, joining a v1 `pids` cgroup, is not charged to it) to its
    /// exit and both pipes closed.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = timeout;
        self
    }

    /// The strongest containment to try (default [`Containment::Cgroup`]): the run uses the
    /// first of cgroup, PID namespace, subreaper, in that order, that is no stronger than
    /// `strongest` and that the system allows (the subreaper needs nothing, so it is always
    /// reached). [`Outcome::containment`] says which it got. `Containment::PidNamespace`
    /// skips the cgroup, `Containment::Subreaper` the namespace too, and
    /// `Containment::ProcessGroup` (never chosen otherwise) is the process group alone; tests
    /// use this to exercise every mode.
    ///
    /// [`Outcome::containment`]: crate::Outcome::containment
    pub fn containment(&mut self, strongest: Containment) -> &mut Self {
        self.containment = strongest;
        self
    }

    /// Whether to make a PID namespace for the run (default `true`): in cgroup mode inside the
    /// run's cgroup, else as the [`Containment::PidNamespace`] mode, in either case only where
    /// one can be made (with a user namespace where a bare one is refused). Then nothing the
    /// script starts can see or signal the waiter or any process outside the run, and pids it
    /// prints are the namespace's. `false` never makes one: in a cgroup the pids a script
    /// prints are then host pids an observer outside can check (the waiter, child subreaper
    /// of the run, still kills what leaves the cgroup), and where no cgroup can be had the
    /// subreaper contains the run. [`Outcome::pid_namespace`] says whether one was made.
    ///
    /// [`Outcome::pid_namespace`]: crate::Outcome::pid_namespace
    pub fn pid_namespace(&mut self, enabled: bool) -> &mut Self {
        self.namespace = Some(enabled);
        self
    }

    /// Whether the program gets a session of its own (`setsid`: no controlling terminal) (default
    /// `true`).
    pub fn new_session(&mut self, enabled: bool) -> &mut Self {
        self.privileges.new_session = enabled;
        self
    }

    /// Whether the program runs with no new privileges (`PR_SET_NO_NEW_PRIVS`: set-user-id
    /// bits and file capabilities grant nothing at `exec`) and no capabilities (default
    /// `true`). Applied after the [`pre_exec`](Command::pre_exec) steps, so those still run
    /// with the embedder's.
    pub fn drop_privileges(&mut self, enabled: bool) -> &mut Self {
        self.privileges.drop = enabled;
        self
    }

    /// Count this run against `slots`: [`Command::run`] first waits, in order and
    /// cancellably, for one of its slots, and holds it until everything the run started is
    /// dead and reaped. The wait is not part of the time bound.
    pub fn slots(&mut self, slots: Arc<RunSlots>) -> &mut Self {
        self.slots = Some(slots);
        self
    }

    /// Bound the run's processes, threads included (default [`DEFAULT_MAX_PROCESSES`];
    /// `None`: no bound of ours). The first of these that the system offers
    /// ([`Outcome::process_bound`] says which):
    ///
    /// 1. `pids.max` of the run's cgroup v2, where it has the `pids` controller: the whole run;
    /// 2. else, where a writable cgroup v1 `pids` hierarchy exists (root on a cgroup v1 or
    ///    hybrid host), `pids.max` of a cgroup of the run's own there, which the program's
    ///    process joins before `exec`: the program and everything it starts (not in the
    ///    process-group test twin);
    /// 3. else `RLIMIT_NPROC`, which the kernel counts per user: in a user namespace of the
    ///    run's own that is the run's processes; otherwise the limit is set to the user's
    ///    process count at the start plus this bound.
    ///
    /// The kernel never applies `RLIMIT_NPROC` to root, so a root embedder with neither
    /// cgroup gets no process bound ([`ProcessBound::Unbounded`]): a fork bomb then runs
    /// until the time bound, and the kill ends it with everything it started. A `fork` past
    /// the bound fails with `EAGAIN`.
    ///
    /// [`Outcome::process_bound`]: crate::Outcome::process_bound
    /// [`ProcessBound::Unbounded`]: crate::ProcessBound::Unbounded
    pub fn max_processes(&mut self, count: Option<u64>) -> &mut Self {
        self.max_processes = count;
        self
    }

    /// Bound the run's memory (default [`DEFAULT_MAX_MEMORY`]; `None`: no bound of ours):
    /// `memory.max` of its cgroup where it has the memory controller (the kernel kills the
    /// run's processes past it), and `RLIMIT_DATA` of each process always (an allocation past
    /// it fails: Node.js throws `RangeError`, or ends with a fatal out-of-memory error).
    pub fn max_memory(&mut self, bytes: Option<u64>) -> &mut Self {
        self.max_memory = bytes;
        self
    }

    /// Give the child `fd` as descriptor number `target` (3 or more). The descriptor is
    /// duplicated now, so the caller may close its own.
    pub fn pass_fd(&mut self, fd: impl std::os::fd::AsFd, target: i32) -> io::Result<&mut Self> {
        if target < 3 || self.fds.iter().any(|&(_, t)| t == target) {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // At least 3, so std's stdio setup in the child cannot clobber it.
        let dup = rustix::io::fcntl_dupfd_cloexec(fd, 3)?;
        self.fds.push((dup, target));
        Ok(self)
    }

    /// Add a step to run in the child just before `exec`, after containment is set up (the
    /// process group, and the cgroup or the PID namespace) and the
    /// [`pass_fd`](Command::pass_fd) descriptors are in place, in the process that becomes the
    /// program. Steps run in the order added; an
    /// error stops the start and is returned as [`ErrorKind::StartFailed`] with that OS error.
    /// This is where a sandbox (Landlock `restrict_self`, `setrlimit`) plugs in.
    ///
    /// # Safety
    ///
    /// As for [`std::os::unix::process::CommandExt::pre_exec`]: the step runs in a child forked
    /// from a multi-threaded process, so it may only call async-signal-safe functions (no
    /// allocation, no locks); prepare everything beforehand, in the closure's captures. More:
    /// the process usually shares its parent's memory until `exec` (a vfork-style start, on a
    /// stack of 256 KiB), so a step must also not change memory others read (no writes to
    /// statics or to what it captured by reference).
    ///
    /// [`ErrorKind::StartFailed`]: crate::ErrorKind::StartFailed
    #[expect(
        unsafe_code,
        reason = "an unsafe fn, like std's: its callers promise async-signal-safety"
    )]
    pub unsafe fn pre_exec<F>(&mut self, step: F) -> &mut Self
    where
        F: FnMut() -> io::Result<()> + Send + Sync + 'static,
    {
        self.hooks.push(Box::new(step));
        self
    }

    /// Resource limits for the program's process: `RLIMIT_DATA`, and `RLIMIT_NPROC` where no
    /// cgroup bounds the processes (see [`Command::max_processes`]); the second is the bound,
    /// which the waiter turns into the limit once it knows whether the run has a user
    /// namespace of its own (see `ChildPlan::nproc`).
    pub(crate) fn rlimits(&self, cgroup_bounds_processes: bool) -> (Vec<Limit>, Option<u64>) {
        let mut limits = Vec::new();
        if let Some(bytes) = self.max_memory {
            limits.push((crate::limits::Resource::Data, bytes));
        }
        let nproc = match self.max_processes {
            Some(count) if !cgroup_bounds_processes => Some(count),
            _ => None,
        };
        (limits, nproc)
    }

    /// The environment the child gets: allowlisted host variables, then explicit ones.
    pub fn child_env(&self) -> Vec<(OsString, OsString)> {
        let mut out: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(name, _)| self.inherits(name))
            .collect();
        for (name, value) in &self.env {
            out.retain(|(n, _)| n != name);
            out.push((name.clone(), value.clone()));
        }
        out
    }

    fn inherits(&self, name: &OsStr) -> bool {
        if NEVER_INHERITED.iter().any(|n| OsStr::new(n) == name) {
            return false;
        }
        let locale = !self.inherit.is_empty() && name.as_encoded_bytes().starts_with(b"LC_");
        locale || self.inherit.iter().any(|n| n == name)
    }
}

/// A resource limit to set: the resource and its soft and hard value.
pub(crate) type Limit = (crate::limits::Resource, u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inherits_only_the_allowlist() {
        let mut cmd = Command::new("/bin/true");
        assert!(cmd.inherits(OsStr::new("PATH")));
        assert!(cmd.inherits(OsStr::new("LC_ALL")));
        assert!(cmd.inherits(OsStr::new("TZ")));
        assert!(!cmd.inherits(OsStr::new("HOME")));
        assert!(!cmd.inherits(OsStr::new("OPENAI_API_KEY")));
        assert!(!cmd.inherits(OsStr::new("NODE_OPTIONS")));
        assert!(!cmd.inherits(OsStr::new("PATHX")));
        cmd.inherit_env("HOME").inherit_env("NODE_OPTIONS");
        assert!(cmd.inherits(OsStr::new("HOME")));
        assert!(!cmd.inherits(OsStr::new("NODE_OPTIONS")));
        cmd.inherit_no_env();
        assert!(!cmd.inherits(OsStr::new("PATH")));
        assert!(!cmd.inherits(OsStr::new("LC_ALL")));
    }

    #[test]
    fn explicit_env_wins() {
        let mut cmd = Command::new("/bin/true");
        cmd.inherit_no_env().env("A", "1").env("A", "2");
        assert_eq!(cmd.child_env(), vec![("A".into(), "2".into())]);
    }

    #[test]
    fn pass_fd_refuses_stdio_targets() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        let mut cmd = Command::new("/bin/true");
        assert!(cmd.pass_fd(&r, 2).is_err());
        assert!(cmd.pass_fd(&r, 3).is_ok());
        assert!(cmd.pass_fd(&r, 3).is_err());
    }
}
