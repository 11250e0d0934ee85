//! The parent side of a run: spawn through process-wrap, capture, bound, end, reap.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use crate::capture::{Capture, Captured, Progress};
use crate::cgroup::RunCgroup;
use crate::command::Command;
use crate::contain::{
    ChildPlan, Exec, MODE_CGROUP, MODE_PID_NAMESPACE, MODE_SUBREAPER, MODE_USER_NAMESPACE, Message,
    parse_messages,
};
use crate::error::{Error, ErrorKind};
use crate::pids_v1::RunPids;
use crate::signal::signal_name;

/// How long the end of a run may take before the last resort (SIGKILL to the whole group).
const GRACE: Duration = Duration::from_secs(2);

/// How long the output is still read once the program has exited, for what it wrote just
/// before (a descendant that keeps the pipes open is killed after that).
pub(crate) const DRAIN: Duration = Duration::from_millis(100);

/// How a run kept its processes from outliving it, strongest first (the crate docs, *No
/// process outlives a run*, say why in this order). Every mode but the last also makes the
/// waiter the run's child subreaper, which sweeps every remaining descendant at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Containment {
    /// A cgroup v2 of the run's own, in which the program was created (`clone3` with
    /// `CLONE_INTO_CGROUP`), with a PID namespace inside it where one could be made
    /// ([`Outcome::pid_namespace`]): at the end the kernel kills the whole cgroup at once
    /// (`cgroup.kill`, forks in flight included), the namespace's end kills whatever moved
    /// itself to another cgroup, and the waiter sweeps what is left.
    Cgroup,
    /// A PID namespace of the run's own (owned by a user namespace of its own where the
    /// embedder is unprivileged, [`Outcome::user_namespace`]): at the end its init is killed,
    /// and with it every process of the namespace, whatever its session or group.
    PidNamespace,
    /// No privilege needed: the waiter is the child subreaper of the run (every orphan of the
    /// run is re-parented to it), and at every end it SIGKILLs every descendant it finds in
    /// `/proc`, killing each before looking for its children, until none is left.
    Subreaper,
    /// The process group alone, never chosen unless asked for (it is the weak twin the tests
    /// compare with): at the end the program's process group is killed; a descendant that
    /// left the group (`setsid`, `detached: true`) is **not** reached.
    ProcessGroup,
}

impl Containment {
    /// The mode's stable name: `"cgroup"`, `"pid-namespace"`, `"subreaper"`,
    /// `"process-group"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Cgroup => "cgroup",
            Self::PidNamespace => "pid-namespace",
            Self::Subreaper => "subreaper",
            Self::ProcessGroup => "process-group",
        }
    }
}

/// What bounds a run's process count ([`Command::max_processes`]), strongest first;
/// [`Outcome::process_bound`] says which one a run got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProcessBound {
    /// `pids.max` of the run's cgroup v2 (its `pids` controller enabled): the whole run.
    Cgroup,
    /// `pids.max` of a cgroup v1 `pids` hierarchy's cgroup of the run's own, where the v2
    /// hierarchy has no `pids` controller: the program and everything it starts.
    CgroupV1,
    /// `RLIMIT_NPROC`, counted per user (within a user namespace of the run's own, the run's
    /// processes; otherwise the user's count at the start plus the bound).
    Rlimit,
    /// No bound of ours: none was asked for, or only `RLIMIT_NPROC` was left and the
    /// embedder is root, whom the kernel exempts from it (a fork bomb then runs until the time
    /// bound, and the kill ends it).
    Unbounded,
}

impl ProcessBound {
    /// The bound's stable name: `"cgroup"`, `"cgroup-v1"`, `"rlimit"`, `"none"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Cgroup => "cgroup",
            Self::CgroupV1 => "cgroup-v1",
            Self::Rlimit => "rlimit",
            Self::Unbounded => "none",
        }
    }
}

/// What a finished run produced: the program exited (or died by a signal) within the bound;
/// what it left running was killed then, after the output was drained for at most 100 ms.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// The exit code, when the program exited.
    pub exit_code: Option<i32>,
    /// The signal number, when the program was killed by a signal.
    pub signal: Option<i32>,
    /// The captured stdout.
    pub stdout: Captured,
    /// The captured stderr.
    pub stderr: Captured,
    /// How the run was contained.
    pub containment: Containment,
    /// Whether the program ran in a PID namespace of its own (then every pid it saw is the
    /// namespace's, not the host's).
    pub pid_namespace: bool,
    /// Whether that namespace is owned by a user namespace of its own (an unprivileged
    /// embedder, or one without `CAP_SYS_ADMIN`).
    pub user_namespace: bool,
    /// What bounded the run's process count.
    pub process_bound: ProcessBound,
    /// From the start to the end of the run, reaping included.
    pub elapsed: Duration,
}

impl Outcome {
    /// The signal's name (`"SIGKILL"`), when the program was killed by a signal.
    pub fn signal_name(&self) -> Option<String> {
        self.signal.and_then(signal_name)
    }
}

impl Command {
    /// Start the child and wait until the program has exited (or, where its status cannot be
    /// known, until both output pipes have closed), within the time bound; the output is then
    /// drained for at most 100 ms and whatever the program left is killed. At every end (exit, timeout, cancellation, error, and a dropped future)
    /// every process the run started is killed and reaped before this returns (or the drop
    /// completes).
    pub async fn run(self, cancel: &CancellationToken) -> Result<Outcome, Error> {
        self.start(cancel).await?.wait(cancel).await
    }

    /// [`Command::run`] from synchronous code, inside a tokio runtime or outside any: on a
    /// thread of its own with a current-thread runtime of its own, never cancelled. `None`
    /// where that thread or runtime cannot be made (or the thread panicked).
    pub fn run_blocking(self) -> Option<Result<Outcome, Error>> {
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()?;
                Some(rt.block_on(self.run(&CancellationToken::new())))
            })
            .join()
            .ok()
            .flatten()
        })
    }

    /// Start the child (after waiting for a slot of [`Command::slots`], if any) and answer once
    /// the program exists, or with the error that kept it from starting
    /// ([`ErrorKind::StartFailed`]); [`Started::wait`] then follows it to its end. Dropping
    /// the [`Started`] ends the run as dropping [`Command::run`]'s future does: every process
    /// it started is killed and reaped before the drop completes.
    pub async fn start(self, cancel: &CancellationToken) -> Result<Started, Error> {
        if cancel.is_cancelled() {
            return Err(Error::new(ErrorKind::Cancelled, None));
        }
        // Held to the end of the run and its reaping.
        let slot = match &self.slots {
            Some(slots) => Some(slots.acquire(cancel).await?),
            None => None,
        };
        let start = Instant::now();
        let unread = self.unread.clone();
        let mut running = self.spawn()?;
        let input = running.input.take();
        // The program's time starts once it exists: the setup before its `exec` (the
        // containment, joining a v1 `pids` cgroup, which waits for the kernel under load) is
        // ours, not the program's.
        let deadline = tokio::time::Instant::now() + running.timeout;
        Ok(Started {
            running,
            _slot: slot,
            start,
            deadline,
            unread,
            input,
        })
    }
}

/// A run whose program has started ([`Command::start`]); [`wait`](Started::wait) follows it to
/// its end. Dropping it kills and reaps every process of the run.
#[must_use = "dropping a started run kills it"]
pub struct Started {
    running: Running,
    _slot: Option<crate::slots::RunSlot>,
    start: Instant,
    deadline: tokio::time::Instant,
    unread: Option<crate::capture::Unread>,
    input: Option<crate::input::Input>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("pid", &self.running.pid)
            .field("containment", &self.running.containment)
            .finish_non_exhaustive()
    }
}

impl Started {
    /// How the run is contained.
    pub fn containment(&self) -> Containment {
        self.running.containment
    }

    /// The embedder's end of the program's input, where [`Command::stdin`] asked for a pipe or
    /// a terminal (`None` for the null device). It stays usable while [`Started::wait`] runs,
    /// and is shut ([`Input::shut`](crate::Input::shut)) when the run ends.
    pub fn input(&self) -> Option<crate::input::Input> {
        self.input.clone()
    }

    /// Wait until the program has exited (or, where its status cannot be known, until both
    /// output pipes have closed), within the time bound; as [`Command::run`] does once the
    /// program started.
    pub async fn wait(self, cancel: &CancellationToken) -> Result<Outcome, Error> {
        let Started {
            mut running,
            _slot,
            start,
            deadline,
            unread,
            input,
        } = self;
        // Whatever way the run ends, the embedder's end of its input goes with it.
        let _shut = input.map(ShutOnDrop);
        let running = &mut running;
        // A terminal's output is its master, one stream captured as stdout.
        let stdout: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>> =
            match running.terminal.take() {
                Some(master) => Some(Box::new(master)),
                None => running
                    .child
                    .stdout()
                    .take()
                    .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            };
        let stderr = running.child.stderr().take();
        let progress = running.progress.take();
        let mut out = Capture::new(
            running.stdout_cap,
            running.tail,
            progress.clone().map(|p| (p, 0)),
        )
        .with_unread(unread.clone().map(|u| (u, 0)));
        let mut err = Capture::new(running.stderr_cap, running.tail, progress.map(|p| (p, 1)))
            .with_unread(unread.map(|u| (u, 1)));
        let report = running.report.take();
        let early = std::mem::take(&mut running.early);
        // The captures outlive this future: on a timeout they keep what was read until then.
        let (out_ref, err_ref) = (&mut out, &mut err);
        // The run ends when the program does, not when the last holder of its output pipes
        // closes them: once its status is in, the output is drained for at most `DRAIN`
        // (whatever it left holding the pipes is killed at the end just below). Without a
        // status (the init was killed from outside) the pipes' end is the run's.
        let collect = async move {
            let output = async {
                tokio::try_join!(read_pipe(stdout, out_ref), read_pipe(stderr, err_ref)).map(|_| ())
            };
            tokio::pin!(output);
            let status = read_status(report, early);
            tokio::pin!(status);
            let status = tokio::select! {
                r = &mut output => {
                    r?;
                    return Ok(((), (), status.await?));
                }
                s = &mut status => s?,
            };
            match status {
                Some(_) => {
                    if let Ok(r) = tokio::time::timeout(DRAIN, &mut output).await {
                        r?;
                    }
                }
                None => output.await?,
            }
            io::Result::Ok(((), (), status))
        };

        let ended = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ErrorKind::Cancelled),
            r = tokio::time::timeout_at(deadline, collect) => match r {
                Err(_) => Err(ErrorKind::TimedOut),
                Ok(Err(_)) => Err(ErrorKind::OutputFailed),
                Ok(Ok(done)) => Ok(done),
            },
        };
        let waiter_status = running.end().await;
        let (status, timed_out) = match ended {
            // No report (the init was killed from outside): the waiter mirrors what it saw.
            Ok(((), (), status)) => (status.unwrap_or(waiter_status), false),
            // Killed at the bound, whatever the program had done by then.
            Err(ErrorKind::TimedOut) => (ExitStatus::from_raw(libc::SIGKILL), true),
            Err(kind) => return Err(Error::new(kind, None)),
        };
        let outcome = Outcome {
            exit_code: status.code(),
            signal: status.signal(),
            stdout: out.finish(),
            stderr: err.finish(),
            containment: running.containment,
            pid_namespace: running.mode & MODE_PID_NAMESPACE != 0,
            user_namespace: running.mode & MODE_USER_NAMESPACE != 0,
            process_bound: running.process_bound,
            elapsed: start.elapsed(),
        };
        if timed_out {
            return Err(Error::timed_out(outcome));
        }
        Ok(outcome)
    }
}

impl Command {
    #[expect(unsafe_code, reason = "the pre-exec step that sets up containment")]
    fn spawn(self) -> Result<Running, Error> {
        let env = self.child_env();
        let start_failed = |e: io::Error| Error::new(ErrorKind::StartFailed, Some(e));
        // N executes the program itself (std's `Command` only forks C): the path, argv and
        // environment are made here, where allocating is allowed.
        let path = program_path(&self.program, &env).map_err(start_failed)?;
        let argv = std::iter::once(self.program.as_os_str())
            .chain(self.args.iter().map(|a| a.as_os_str()));
        let exec = Exec::new(&path, argv, &env).map_err(start_failed)?;
        // The strongest containment allowed and available: a cgroup, else (in the child) a
        // PID namespace, else the group.
        let cgroup = match self.containment {
            Containment::Cgroup => RunCgroup::create(),
            _ => None,
        };
        let cgroup_bounds_processes = match &cgroup {
            Some(cgroup) => cgroup.bound(self.max_processes, self.max_memory),
            None => false,
        };
        // Where the v2 cgroup cannot bound the processes, a v1 `pids` cgroup of the run's
        // own (root ignores `RLIMIT_NPROC`); not for the process-group twin, which must stay
        // the weak mode it is.
        let pids_v1 = match self.max_processes {
            Some(count)
                if !cgroup_bounds_processes && self.containment != Containment::ProcessGroup =>
            {
                RunPids::create(count)
            }
            _ => None,
        };
        let process_bound = if self.max_processes.is_none() {
            ProcessBound::Unbounded
        } else if cgroup_bounds_processes {
            ProcessBound::Cgroup
        } else if pids_v1.is_some() {
            ProcessBound::CgroupV1
        } else if rustix::process::getuid().is_root() {
            ProcessBound::Unbounded
        } else {
            ProcessBound::Rlimit
        };
        // A root program without capabilities could still write the cgroup file systems
        // (uid 0 owns them): where it runs in a cgroup of the run's, unsandboxed, they are
        // made read-only for it (`contain/cgroupfs.rs`).
        let cgroup_cover = match rustix::process::geteuid().is_root()
            && self.privileges.drop
            && !self.sandboxed
            && (cgroup.is_some() || pids_v1.is_some())
        {
            true => Some(crate::contain::CgroupCover::prepare().map_err(start_failed)?),
            false => None,
        };
        let (limits, nproc) = self.rlimits(cgroup_bounds_processes || pids_v1.is_some());
        // The pipe or the terminal of the program's input, made before the fork.
        let prepared = self.stdin.prepare().map_err(start_failed)?;
        let (report_r, report_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| start_failed(e.into()))?;
        // At least 3, so std's stdio setup in the child cannot clobber it.
        let report_w =
            rustix::io::fcntl_dupfd_cloexec(&report_w, 3).map_err(|e| start_failed(e.into()))?;

        // The process-group twin keeps the program in the waiter's group, which the end
        // kills whole: a session of its own would take the program out of it.
        let mut privileges = self.privileges;
        let terminal = matches!(self.stdin, crate::input::Stdin::Terminal(_));
        // A terminal is the controlling terminal of the program's own session.
        privileges.new_session |= terminal;
        privileges.new_session &= self.containment != Containment::ProcessGroup;
        privileges.terminal = terminal && privileges.new_session;
        let plan = ChildPlan {
            parent: std::process::id() as libc::pid_t,
            report: report_w.as_raw_fd(),
            namespace: match self.containment {
                Containment::Cgroup | Containment::PidNamespace => self.namespace.unwrap_or(true),
                _ => false,
            },
            // Kept open by `self.network` until the spawn returns (below).
            network: self.network.as_ref().and_then(crate::Network::namespaces),
            subreaper: self.containment != Containment::ProcessGroup,
            environment: crate::privilege::environment_bounds(),
            cgroup: cgroup.as_ref().map(|c| (c.raw_fd(), c.kill_fd())),
            cgroup_removal: cgroup
                .as_ref()
                .and_then(RunCgroup::removal)
                .map(|(fd, name)| (fd, name.to_owned())),
            pids_v1: pids_v1.as_ref().map(RunPids::tasks_fd),
            pids_v1_removal: pids_v1
                .as_ref()
                .and_then(RunPids::removal)
                .map(|(fd, name)| (fd, name.to_owned())),
            cgroup_cover,
            privileges,
            limits,
            nproc,
            nproc_chosen: u64::MAX,
            fds: self
                .fds
                .iter()
                .map(|(fd, t)| (fd.as_raw_fd(), *t))
                .collect(),
            hooks: self.hooks,
            cloexec_range: crate::contain::cloexec_range_works(),
            exec,
        };
        // std's part: fork C with the program's directory and standard streams set up;
        // C never returns to std (it ends in `_exit`), so std executes nothing.
        let (child_stdio, input, terminal) = match prepared {
            Some(p) => (p.child, Some(p.input), p.output),
            None => ([None, None, None], None, None),
        };
        let [stdin_fd, stdout_fd, stderr_fd] = child_stdio;
        let stdio = |fd: Option<OwnedFd>, or: fn() -> Stdio| fd.map_or_else(or, Stdio::from);
        let mut wrap = CommandWrap::with_new(&path, |c| {
            c.env_clear()
                .stdin(stdio(stdin_fd, Stdio::null))
                .stdout(stdio(stdout_fd, Stdio::piped))
                .stderr(stdio(stderr_fd, Stdio::piped));
            if let Some(dir) = &self.cwd {
                c.current_dir(dir);
            }
            let mut plan = plan;
            let step = move || {
                // SAFETY: std runs the step in the child it has just forked, before `exec`:
                // what `ChildPlan::run` requires.
                unsafe { plan.run() }
            };
            // SAFETY: `ChildPlan::run` performs only async-signal-safe system calls (and the
            // embedder's steps, whose safety `Command::pre_exec` made the embedder promise).
            // std runs it after `setpgid` (process-wrap's ProcessGroup), `chdir` and the stdio
            // setup, as checked by `tests::std_sets_the_group_before_pre_exec`.
            unsafe { c.pre_exec(step) };
        });
        wrap.wrap(ProcessGroup::leader());
        // On failure the cgroup (empty: nothing joined it, or what did is dead) is removed
        // as it drops.
        let child = wrap.spawn().map_err(start_failed)?;
        // Our copies of the child's ends of the pipe or terminal: the program holds its own.
        drop(wrap);
        // Our copies: the child has its own; the passed descriptors were duplicated into it.
        drop(report_w);
        drop(self.fds);
        drop(self.network);

        let pid = child.id().unwrap_or(0) as libc::pid_t;
        let mut running = Running {
            child,
            pid,
            containment: Containment::ProcessGroup,
            mode: 0,
            cgroup,
            pids_v1,
            process_bound,
            report: None,
            early: Vec::new(),
            stdout_cap: self.stdout_cap,
            stderr_cap: self.stderr_cap,
            tail: self.tail,
            progress: self.progress,
            timeout: self.timeout,
            reaped: false,
            input,
            terminal,
        };
        // std's spawn returned only once every holder of its error pipe closed it: the waiter
        // had written which containment it made before that, so the first bytes are there.
        let mut first = [0u8; 64];
        let n = rustix::io::read(&report_r, &mut first).unwrap_or(0);
        let (messages, _) = parse_messages(&first[..n]);
        for m in &messages {
            match m {
                Message::Mode(mode) => {
                    running.mode = *mode;
                    running.containment = if mode & MODE_CGROUP != 0 {
                        Containment::Cgroup
                    } else if mode & MODE_PID_NAMESPACE != 0 {
                        Containment::PidNamespace
                    } else if mode & MODE_SUBREAPER != 0 {
                        Containment::Subreaper
                    } else {
                        Containment::ProcessGroup
                    };
                }
                Message::StartFailed(errno) => {
                    let e = io::Error::from_raw_os_error(*errno);
                    running.kill_now();
                    return Err(start_failed(e));
                }
                Message::Status(_) => {}
            }
        }
        running.early = first[..n].to_vec();
        running.report = Some(report_r);
        Ok(running)
    }
}

async fn read_pipe<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    capture: &mut Capture,
) -> io::Result<()> {
    match pipe {
        Some(p) => capture.read_from(p).await,
        None => Ok(()),
    }
}

/// Read the report pipe until the program's wait status arrives, or the pipe ends.
async fn read_status(report: Option<OwnedFd>, early: Vec<u8>) -> io::Result<Option<ExitStatus>> {
    let status_in = |buf: &[u8]| {
        parse_messages(buf).0.into_iter().find_map(|m| match m {
            Message::Status(s) => Some(ExitStatus::from_raw(s)),
            _ => None,
        })
    };
    let mut buf = early;
    if let Some(status) = status_in(&buf) {
        return Ok(Some(status));
    }
    let Some(fd) = report else { return Ok(None) };
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
    let mut chunk = [0u8; 64];
    loop {
        let n = pipe.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(status) = status_in(&buf) {
            return Ok(Some(status));
        }
    }
}

/// A started run: ends it on every path, the drop of a future included.
struct Running {
    child: Box<dyn ChildWrapper>,
    /// The waiter's pid, which is also the process group id; valid until we reap it.
    pid: libc::pid_t,
    containment: Containment,
    /// The `MODE_*` flags the waiter reported.
    mode: u8,
    /// The run's cgroup, in cgroup mode.
    cgroup: Option<RunCgroup>,
    /// The run's v1 `pids` cgroup, where that bounds its processes.
    pids_v1: Option<RunPids>,
    process_bound: ProcessBound,
    report: Option<OwnedFd>,
    early: Vec<u8>,
    stdout_cap: usize,
    stderr_cap: usize,
    tail: usize,
    progress: Option<Progress>,
    timeout: Duration,
    reaped: bool,
    /// The embedder's end of the program's input (a pipe or a terminal), until `start` takes it.
    input: Option<crate::input::Input>,
    /// A terminal's master, read for the output, until `wait` takes it.
    terminal: Option<crate::input::MasterReader>,
}

/// Shuts the input when the run ends, however it ends.
struct ShutOnDrop(crate::input::Input);

impl Drop for ShutOnDrop {
    fn drop(&mut self) {
        self.0.shut();
    }
}

impl Running {
    /// Ask for the end: in a cgroup, `cgroup.kill` at once (the kernel kills every member);
    /// then SIGTERM to the waiter, which kills its child (the namespace's init, or the
    /// program), sweeps every remaining descendant, reaps them all and exits.
    fn kill_now(&mut self) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.kill().ok();
        }
        if self.reaped {
            return;
        }
        // Our own unreaped child (or its group, whose id is the child's pid), so the id
        // cannot have been reused.
        let Some(pid) = rustix::process::Pid::from_raw(self.pid) else {
            return;
        };
        if self.containment == Containment::ProcessGroup {
            rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).ok();
        } else {
            rustix::process::kill_process(pid, rustix::process::Signal::TERM).ok();
        }
    }

    /// Last resort: SIGKILL to the group (the waiter included).
    fn kill_group(&self) {
        if self.reaped {
            return;
        }
        // As in `kill_now`.
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid) {
            rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).ok();
        }
    }

    /// End the run and reap the waiter (in cgroup mode, then wait for the cgroup to empty and
    /// remove it); returns the waiter's status.
    async fn end(&mut self) -> ExitStatus {
        self.kill_now();
        let status = match reap_within(&mut self.child, GRACE).await {
            Some(status) => status,
            None => {
                self.kill_group();
                self.child
                    .inner_mut()
                    .wait()
                    .await
                    .unwrap_or_else(|_| ExitStatus::from_raw(libc::SIGKILL))
            }
        };
        self.reaped = true;
        if let Some(cgroup) = &mut self.cgroup {
            cgroup.settle().await;
        }
        if let Some(pids) = &mut self.pids_v1 {
            pids.remove().await;
        }
        status
    }

    /// The synchronous end, for a dropped future: signal, then poll for the waiter's exit.
    fn end_blocking(&mut self) {
        self.kill_now();
        let poll = |child: &mut Box<dyn ChildWrapper>, budget: Duration| {
            let until = Instant::now() + budget;
            loop {
                match child.inner_mut().try_wait() {
                    Ok(Some(_)) | Err(_) => return true,
                    Ok(None) if Instant::now() >= until => return false,
                    Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        };
        if !poll(&mut self.child, GRACE) {
            self.kill_group();
            poll(&mut self.child, GRACE);
        }
        self.reaped = true;
        if let Some(cgroup) = &mut self.cgroup {
            cgroup.settle_blocking();
        }
        if let Some(pids) = &mut self.pids_v1 {
            pids.remove_blocking();
        }
    }
}

/// How often [`reap_within`] looks for the waiter's exit itself, at most.
const REAP_POLL: Duration = Duration::from_millis(50);

/// The waiter's exit status once it has exited, within `budget`: tokio's wait (woken by
/// `SIGCHLD`, or a pidfd), and a look of our own (`waitpid(WNOHANG)`) between pauses that
/// grow from 1 ms to [`REAP_POLL`]. gVisor delivers `SIGCHLD` only late and has no pidfd, so
/// the wait alone slept the whole budget there (two seconds added to every run).
async fn reap_within(child: &mut Box<dyn ChildWrapper>, budget: Duration) -> Option<ExitStatus> {
    let until = tokio::time::Instant::now() + budget;
    let mut pause = Duration::from_millis(1);
    loop {
        let now = tokio::time::Instant::now();
        if now >= until {
            return None;
        }
        // tokio's wait is cancel-safe: a pause that ends it loses nothing.
        match tokio::time::timeout(pause.min(until - now), child.inner_mut().wait()).await {
            Ok(Ok(status)) => return Some(status),
            Ok(Err(_)) => return None,
            Err(_) => {}
        }
        match child.inner_mut().try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(_) => return None,
        }
        pause = (pause * 2).min(REAP_POLL);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.reaped {
            self.end_blocking();
        }
    }
}

/// The file to execute for `program`: as given where it names a path (holds a `/`), else the
/// first executable file of that name on the run's `PATH` (the embedder's where the run's
/// environment has none), see [`find_on_path`].
fn program_path(
    program: &std::path::Path,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> io::Result<std::path::PathBuf> {
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        return Ok(program.to_owned());
    }
    let path = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    find_on_path(program, &path).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

/// The one lookup of a program on a `PATH` value: the first executable regular file named
/// `program` in its directories, in order, as `execvp` searches; an empty or relative
/// directory is skipped (it would be looked up from the current directory, which may be a
/// workspace).
pub fn find_on_path(
    program: impl AsRef<std::path::Path>,
    path: impl AsRef<std::ffi::OsStr>,
) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path.as_ref())
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program.as_ref()))
        .find(|file| {
            std::fs::metadata(file)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
