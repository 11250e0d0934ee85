//! Background jobs: a dev server, a watcher or a long build that an agent starts with
//! `run_command {…, background: true}` and comes back to with `job_output`, `job_stop` and
//! `job_list`.
//!
//! A job runs exactly as a `run_command` run does (`/bin/sh -c` through [`nodeexec`](confine_nodeexec), the same
//! containment, environment allowlist, `TMPDIR` beneath the root and opt-in sandbox); only its
//! output is kept differently and it is not waited for. Each stream keeps at most
//! [`UNREAD_BYTES`] bytes not yet read ([`confine_nodeexec::Unread`]: the oldest bytes go first, never
//! splitting a UTF-8 character), and `job_output` hands over what was written since the
//! previous `job_output` of that job with the exact count of bytes that went unread
//! (`stdoutDropped`, `stderrDropped`, counted since the previous `job_output`).
//!
//! # Interactive jobs
//!
//! `run_command {…, background: true, stdin: true}` gives the job a pipe as stdin, `{…, tty:
//! {cols, rows}}` a pseudo-terminal of its own ([`confine_nodeexec::Stdin`]: the job's stdin,
//! stdout, stderr and controlling terminal; its output is one stream, handed over as
//! `stdout`). [`JobInputTool`] (`job_input`) writes to it and answers like `job_output`;
//! [`JobResizeTool`] (`job_resize`) sets a terminal's size. The choices:
//!
//! * **A bounded write.** At most [`MAX_INPUT_BYTES`] a call (text then base64 bytes,
//!   decoded). The write waits for the job to take the bytes at most `waitMs`, and at least
//!   [`MIN_WRITE_WAIT`]; what it has not taken by then is not written, and the record's
//!   `written` says how much was: a job that never reads costs a call a second at most, never
//!   the server. Writes to one job are serialized ([`confine_nodeexec::Input`]).
//! * **One call, one turn.** With `waitMs`, `job_input` answers once the output has been quiet
//!   for [`SETTLE`] after some came (a REPL printed its answer and its next prompt), once the
//!   job ends, or at `waitMs`. On a terminal that echoes and edits lines itself, the echo of the
//!   typed bytes comes at once and is not the answer: the quiet period counts only once stdout
//!   has grown past the echo's expected length ([`confine_nodeexec::Input::echo_len`]).
//! * **Closing.** `closeStdin` acts after the text is written. A pipe is closed; a terminal
//!   cannot be (the master's close hangs the session up and loses its output), so its
//!   end-of-file key is typed (twice after an unfinished line). Either way later input is
//!   `JOB_INPUT_CLOSED`, as is input to a job that has ended (its output stays readable).
//! * **`TERM`.** A terminal job gets `TERM=dumb` unless the embedder passes one (`--env`): the
//!   model reads raw bytes, and colours and cursor movements are noise to it.
//!
//! # Bounds
//!
//! * At most [`RunCommandOptions::max_jobs`](crate::RunCommandOptions::max_jobs) jobs running
//!   at once (default [`DEFAULT_MAX_JOBS`]) in all the tables that share one [`JobSlots`];
//!   one more is `JOB_LIMIT_REACHED`, at once (a job is not queued). Jobs do not take the run
//!   slots that bound `node_process` and `run_command` runs: a running dev server never holds
//!   a test run back. A job holds its slot until its processes are reaped: the slot is free
//!   again when `job_stop` answers.
//!
//! # One bound per embedder, one table per client
//!
//! A table belongs to one tool set (one MCP session, say): only its own tools see its jobs,
//! and dropping it kills them. The bound on running jobs is a separate, shared piece,
//! [`JobSlots`]: a counter of running jobs (and the sequence their ids are drawn from) that
//! every table of an embedder counts against when the embedder hands the same `Arc` to each
//! set ([`RunCommandOptions::job_slots`](crate::RunCommandOptions::job_slots)). So a server
//! with many sessions keeps one bound (`--max-jobs` is per server), while a session still
//! cannot read, list or stop another session's jobs: the ids are unique in the server, and
//! an id another table started is `JOB_NOT_FOUND`, as an unknown one. Without a shared
//! `JobSlots` each set gets one of its own, of `max_jobs`.
//! * A job's time bound is the call's `timeoutMs` (1 to the command maximum), else
//!   [`RunCommandOptions::job_timeout`](crate::RunCommandOptions::job_timeout) (default one
//!   hour), lowered to the command maximum (`--command-max-timeout-ms`, 600 s unless raised):
//!   an embedder that wants hour-long dev servers raises both.
//! * At most [`KEPT_ENDED_JOBS`] ended jobs are kept for reading, oldest ended first out; an
//!   id forgotten that way, or never given, is `JOB_NOT_FOUND`.
//!
//! # Lifetime
//!
//! A job dies with `job_stop`, with its time bound, and with its table: dropping the
//! [`JobTable`] (the server's end: end of input, exit) stops every job it holds, and the
//! server's death by any signal, SIGKILL included, ends every job by the mechanisms that end a
//! run (the waiter's parent-death signal, the cgroup, the PID namespace). When its program
//! exits, whatever it left running is killed as for a run.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use confine_nodeexec::ErrorKind as ExecErrorKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::JobSlots;

/// The default time bound of a job.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(3600);
/// How many ended jobs are kept for reading.
pub const KEPT_ENDED_JOBS: usize = 16;
/// The most unread bytes kept per stream of a job.
pub const UNREAD_BYTES: usize = 64 * 1024;
/// The longest `waitMs` of `job_output` and `job_input`.
pub const MAX_WAIT_MS: u64 = 30_000;
/// The most bytes one `job_input` writes (after decoding).
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// The least time a `job_input` write waits for the job to take its bytes, whatever `waitMs`.
pub const MIN_WRITE_WAIT: Duration = Duration::from_secs(1);
/// How long output must have been quiet, once some came, for `job_input` to answer before
/// `waitMs` is up (the program wrote its answer and waits again).
pub const SETTLE: Duration = Duration::from_millis(300);
/// The terminal sizes accepted, in columns and in rows alike.
pub const TERMINAL_CELLS: std::ops::RangeInclusive<u16> = 1..=1000;

/// What a job's stdin is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobInputKind {
    /// The null device: `job_input` is `JOB_NOT_INTERACTIVE`.
    None,
    /// A pipe (`stdin: true`).
    Pipe,
    /// A terminal (`tty: {cols, rows}`).
    Terminal,
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum JobStatus {
    /// Its program runs.
    Running,
    /// Its program exited or died by a signal of its own accord.
    Exited,
    /// `job_stop`, or its server's end, killed it.
    Killed,
    /// Its time bound killed it.
    TimedOut,
}

/// How a job ended.
#[derive(Clone, Debug)]
struct Ended {
    status: JobStatus,
    exit_code: Option<i32>,
    signal: Option<String>,
    duration: Duration,
}

/// One job.
#[derive(Debug)]
struct Job {
    id: String,
    command: String,
    started: Instant,
    unread: confine_nodeexec::Unread,
    /// Cancelled by `job_stop` and by the table's drop.
    stop: CancellationToken,
    /// `None` while running.
    end: watch::Sender<Option<Ended>>,
    /// Its share of the network policy, while the policy is on (set once, at its start).
    network: std::sync::OnceLock<crate::network::RunNetwork>,
    /// What its stdin is.
    input_kind: JobInputKind,
    /// Its input, once started (a pipe or a terminal only).
    input: std::sync::OnceLock<confine_nodeexec::Input>,
}

impl Job {
    fn ended(&self) -> Option<Ended> {
        self.end.borrow().clone()
    }

    fn status(&self) -> (JobStatus, Duration) {
        match self.ended() {
            Some(e) => (e.status, e.duration),
            None => (JobStatus::Running, self.started.elapsed()),
        }
    }

    /// The `job_output` record: what was written since the previous one.
    fn output(&self) -> JobOutput {
        // Looked at before the output is taken: once ended, everything the job wrote is in.
        let ended = self.ended();
        let taken = self.unread.take(ended.is_some());
        let (status, exit_code, signal, duration) = match ended {
            Some(e) => (e.status, e.exit_code, e.signal, e.duration),
            None => (JobStatus::Running, None, None, self.started.elapsed()),
        };
        JobOutput {
            job_id: self.id.clone(),
            status,
            exit_code,
            signal,
            stdout: taken.stdout,
            stderr: taken.stderr,
            stdout_dropped: taken.stdout_dropped,
            stderr_dropped: taken.stderr_dropped,
            duration_ms: millis(duration),
            network: self
                .network
                .get()
                .map(crate::network::RunNetwork::decisions),
        }
    }
}

/// The jobs of one tool set (one registry; over MCP, one session or the stateless requests):
/// shared by `run_command` and the three job tools, counted against a [`JobSlots`] that may
/// be shared with other tables. Dropping it stops every job it holds.
pub struct JobTable {
    slots: Arc<JobSlots>,
    state: Mutex<TableState>,
    /// Run once a job's processes are reaped, before its end is seen (set by the checkpoint
    /// hook: the checkpoint of a job's end).
    on_end: std::sync::OnceLock<JobEndHook>,
}

/// What runs at a job's end, with its id and command, on a blocking thread; the job is seen
/// ended once it returns.
pub(crate) type JobEndHook = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The hook is not shown.
struct HookSet(bool);

impl std::fmt::Debug for HookSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0 { "set" } else { "none" })
    }
}

#[derive(Debug, Default)]
struct TableState {
    /// In the order started.
    jobs: Vec<Arc<Job>>,
    /// Ended jobs' ids, oldest ended first.
    ended: VecDeque<String>,
}

impl std::fmt::Debug for JobTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobTable")
            .field("slots", &self.slots)
            .field("state", &self.state)
            .field("on_end", &HookSet(self.on_end.get().is_some()))
            .finish()
    }
}

impl JobTable {
    /// A table whose running jobs count against `slots`.
    pub(crate) fn new(slots: Arc<JobSlots>) -> Self {
        Self {
            slots,
            state: Mutex::default(),
            on_end: std::sync::OnceLock::new(),
        }
    }

    /// Run `hook` at the end of every job of this table (once set, it stays).
    pub(crate) fn on_end(&self, hook: JobEndHook) {
        let _ = self.on_end.set(hook);
    }

    /// The most jobs running at once (in every table sharing this one's [`JobSlots`]).
    pub fn max_jobs(&self) -> usize {
        self.slots.max_jobs()
    }

    /// The bound this table counts against.
    pub fn slots(&self) -> &Arc<JobSlots> {
        &self.slots
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TableState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a new running job holding one slot, or `JOB_LIMIT_REACHED`.
    fn admit(
        &self,
        command: &str,
        input_kind: JobInputKind,
    ) -> Result<(Arc<Job>, OwnedSemaphorePermit), CallError> {
        let (slot, id) = self.slots.take()?;
        let mut state = self.lock();
        let job = Arc::new(Job {
            id,
            command: command.to_owned(),
            started: Instant::now(),
            unread: confine_nodeexec::Unread::new(UNREAD_BYTES),
            stop: CancellationToken::new(),
            end: watch::Sender::new(None),
            network: std::sync::OnceLock::new(),
            input_kind,
            input: std::sync::OnceLock::new(),
        });
        state.jobs.push(job.clone());
        Ok((job, slot))
    }

    /// Forget a job that never started.
    fn forget(&self, job: &Job) {
        self.lock().jobs.retain(|j| j.id != job.id);
    }

    /// Record a job's end and forget the oldest ended ones beyond [`KEPT_ENDED_JOBS`].
    fn finish(&self, job: &Job, ended: Ended) {
        job.end.send_replace(Some(ended));
        let mut state = self.lock();
        state.ended.push_back(job.id.clone());
        while state.ended.len() > KEPT_ENDED_JOBS {
            if let Some(old) = state.ended.pop_front() {
                state.jobs.retain(|j| j.id != old);
            }
        }
    }

    fn find(&self, id: &str) -> Result<Arc<Job>, CallError> {
        self.lock()
            .jobs
            .iter()
            .find(|j| j.id == id)
            .cloned()
            .ok_or_else(|| failed(ErrorKind::JobNotFound))
    }

    /// Start `cmd` (built by `run_command`, with `tmp`, its `TMPDIR`, kept until it ends) as a
    /// job: answers once its program exists, or with the error that kept it from starting.
    pub(crate) async fn start<T: Send + 'static>(
        self: &Arc<Self>,
        command: &str,
        input_kind: JobInputKind,
        build: impl FnOnce(
            &confine_nodeexec::Unread,
        ) -> Result<
            (
                confine_nodeexec::Command,
                T,
                Option<crate::network::RunNetwork>,
            ),
            CallError,
        >,
        start_errors: impl Fn(confine_nodeexec::Error) -> CallError + Send + 'static,
        cancel: &CancellationToken,
    ) -> Result<JobStarted, CallError> {
        // The slot goes with the job's task and is given back when its processes are reaped
        // (or with this call, when it never starts).
        let (job, slot) = self.admit(command, input_kind)?;
        let (cmd, keep) = match build(&job.unread) {
            Ok((cmd, keep, network)) => {
                if let Some(network) = network {
                    let _ = job.network.set(network);
                }
                (cmd, keep)
            }
            Err(e) => {
                self.forget(&job);
                return Err(e);
            }
        };
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let table = Arc::downgrade(self);
        let task_job = job.clone();
        tokio::spawn(async move {
            let job = task_job;
            let started = match cmd.start(&job.stop).await {
                Ok(started) => started,
                Err(e) => {
                    let _ = started_tx.send(Err(start_errors(e)));
                    return;
                }
            };
            let _ = started_tx.send(Ok(started.input()));
            let result = started.wait(&job.stop).await;
            // The job's temporaries go once its processes are reaped; its slot is free before
            // its end is seen, so a start after `job_stop` answered finds it free.
            drop(keep);
            drop(slot);
            let duration = job.started.elapsed();
            let ended = match result {
                Ok(outcome) => Ended {
                    status: JobStatus::Exited,
                    exit_code: outcome.exit_code,
                    signal: outcome.signal_name(),
                    duration,
                },
                Err(e) => Ended {
                    status: match e.kind() {
                        ExecErrorKind::TimedOut => JobStatus::TimedOut,
                        _ => JobStatus::Killed,
                    },
                    exit_code: None,
                    signal: Some("SIGKILL".to_owned()),
                    duration,
                },
            };
            let hook = table.upgrade().and_then(|t| t.on_end.get().cloned());
            if let Some(hook) = hook {
                let (id, command) = (job.id.clone(), job.command.clone());
                let _ = tokio::task::spawn_blocking(move || hook(&id, &command)).await;
            }
            match table.upgrade() {
                Some(table) => table.finish(&job, ended),
                None => {
                    job.end.send_replace(Some(ended));
                }
            }
        });
        let answer = tokio::select! {
            answer = started_rx => answer,
            () = cancel.cancelled() => {
                job.stop.cancel();
                self.forget(&job);
                return Err(Cancelled.into());
            }
        };
        match answer {
            Ok(Ok(input)) => {
                if let Some(input) = input {
                    let _ = job.input.set(input);
                }
                Ok(JobStarted {
                    job_id: job.id.clone(),
                    command: job.command.clone(),
                })
            }
            Ok(Err(e)) => {
                self.forget(&job);
                Err(e)
            }
            Err(_) => {
                self.forget(&job);
                Err(CallError::Failed(ToolError::failed(
                    ErrorKind::RunCommandStartFailed,
                )))
            }
        }
    }
}

impl Drop for JobTable {
    fn drop(&mut self) {
        for job in &self.lock().jobs {
            job.stop.cancel();
        }
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

/// What `run_command {…, background: true}` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStarted {
    /// The job's id, for `job_output`, `job_stop` (an opaque string).
    pub job_id: String,
    /// The command, as given.
    pub command: String,
}

/// The `job_output` record, in this key order. `job_stop` answers with the same record on
/// purpose (its contract is "the job's final `job_output` record": the status after the stop,
/// the output not yet read), so one type serves both and the two cannot drift apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobOutput {
    /// The job's id.
    pub job_id: String,
    /// `running`, `exited`, `killed` or `timedOut`.
    pub status: JobStatus,
    /// The exit code once it exited (`null` while running or when a signal ended it).
    pub exit_code: Option<i32>,
    /// The signal that ended it (`"SIGKILL"` when killed or timed out), or `null`.
    pub signal: Option<String>,
    /// stdout written since the previous `job_output` (at most 64 KiB: the newest).
    pub stdout: String,
    /// stderr likewise.
    pub stderr: String,
    /// Bytes of stdout written since the previous `job_output` that went unread.
    pub stdout_dropped: u64,
    /// Bytes of stderr likewise.
    pub stderr_dropped: u64,
    /// Milliseconds since it started (to its end, once ended).
    pub duration_ms: u64,
    /// While the network policy is on: the proxy's decisions about this job's requests so
    /// far, one per distinct host and port in the order first asked (at most 100); absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<confine_netpolicy::Decision>>,
}

/// The arguments of `job_output`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobOutputInput {
    /// The id `run_command` answered.
    pub job_id: String,
    /// Wait up to this many milliseconds (0 to 30,000; default 0) for new output or the job's
    /// end, whichever comes first.
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// Validated `job_output` arguments.
#[derive(Clone, Debug)]
pub struct JobOutputRequest {
    job_id: String,
    wait: Duration,
}

/// The `job_output` tool.
#[derive(Debug, Clone)]
pub struct JobOutputTool {
    jobs: Arc<JobTable>,
}

impl JobOutputTool {
    /// The tool over `jobs`.
    pub(crate) fn new(jobs: Arc<JobTable>) -> Self {
        Self { jobs }
    }
}

impl TypedTool for JobOutputTool {
    type Input = JobOutputInput;
    type Valid = JobOutputRequest;
    type Output = JobOutput;
    const NAME: &'static str = "job_output";
    const DESCRIPTION: &'static str = "Read what a background job (run_command with \
        background: true) wrote since the previous job_output, and its status (running, \
        exited, killed, timedOut). `waitMs` (0 to 30000, default 0) waits for new output or \
        the job's end. Each stream keeps at most 64 KiB unread; stdoutDropped/stderrDropped \
        count the bytes that went unread. Returns {jobId, status, exitCode, signal, stdout, \
        stderr, stdoutDropped, stderrDropped, durationMs}.";
    const HINTS: ToolHints = ToolHints::read_only("Read a background job's output");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidJobInput;
    const FAILED: ErrorKind = ErrorKind::RunCommandFailed;

    fn check(&self, input: JobOutputInput) -> Result<JobOutputRequest, ToolError> {
        let wait_ms = input.wait_ms.unwrap_or(0);
        if input.job_id.is_empty() || wait_ms > MAX_WAIT_MS {
            return Err(ToolError::invalid(ErrorKind::InvalidJobInput));
        }
        Ok(JobOutputRequest {
            job_id: input.job_id,
            wait: Duration::from_millis(wait_ms),
        })
    }

    async fn run(
        &self,
        valid: JobOutputRequest,
        cancel: &CancellationToken,
    ) -> Result<JobOutput, CallError> {
        let job = self.jobs.find(&valid.job_id)?;
        if !valid.wait.is_zero() {
            let deadline = tokio::time::Instant::now() + valid.wait;
            wait_for_output(&job, deadline, Until::News, cancel).await?;
        }
        Ok(job.output())
    }
}

/// How [`wait_for_output`] decides that the answer is in.
#[derive(Clone, Copy, Debug)]
enum Until {
    /// Any news.
    News,
    /// News, then this long without more, counted only once stdout has taken in more than
    /// `beyond` bytes since the job started (a terminal's own echo of the input is not an
    /// answer).
    Settled { quiet: Duration, beyond: u64 },
}

/// Wait until `deadline` for the job's end or for its answer in the output (`until`).
async fn wait_for_output(
    job: &Job,
    deadline: tokio::time::Instant,
    until: Until,
    cancel: &CancellationToken,
) -> Result<(), CallError> {
    // Subscribed before looking, so nothing that comes in between is missed.
    let mut output = job.unread.subscribe();
    let mut end = job.end.subscribe();
    loop {
        if job.ended().is_some() {
            return Ok(());
        }
        // A chunk that ends mid-character is not news yet.
        let until = match (job.unread.has_news(), until) {
            (false, _) => deadline,
            (true, Until::News) => return Ok(()),
            (true, Until::Settled { quiet, beyond }) if job.unread.total(0) > beyond => {
                deadline.min(tokio::time::Instant::now() + quiet)
            }
            (true, Until::Settled { .. }) => deadline,
        };
        tokio::select! {
            () = cancel.cancelled() => return Err(Cancelled.into()),
            () = tokio::time::sleep_until(until) => return Ok(()),
            _ = end.changed() => return Ok(()),
            changed = output.changed() => if changed.is_err() {
                return Ok(());
            },
        }
    }
}

/// The arguments of `job_stop`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobStopInput {
    /// The id `run_command` answered.
    pub job_id: String,
}

/// The `job_stop` tool.
#[derive(Debug, Clone)]
pub struct JobStopTool {
    jobs: Arc<JobTable>,
}

impl JobStopTool {
    /// The tool over `jobs`.
    pub(crate) fn new(jobs: Arc<JobTable>) -> Self {
        Self { jobs }
    }
}

impl TypedTool for JobStopTool {
    type Input = JobStopInput;
    type Valid = String;
    type Output = JobOutput;
    const NAME: &'static str = "job_stop";
    const DESCRIPTION: &'static str = "Stop a background job: kill it and every process it \
        started, then return its final job_output record (status killed, or how it had \
        ended already).";
    const HINTS: ToolHints = ToolHints {
        title: Some("Stop a background job"),
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    };
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidJobInput;
    const FAILED: ErrorKind = ErrorKind::RunCommandFailed;

    fn check(&self, input: JobStopInput) -> Result<String, ToolError> {
        if input.job_id.is_empty() {
            return Err(ToolError::invalid(ErrorKind::InvalidJobInput));
        }
        Ok(input.job_id)
    }

    async fn run(&self, id: String, cancel: &CancellationToken) -> Result<JobOutput, CallError> {
        let job = self.jobs.find(&id)?;
        job.stop.cancel();
        let mut end = job.end.subscribe();
        tokio::select! {
            () = cancel.cancelled() => return Err(Cancelled.into()),
            r = end.wait_for(Option::is_some) => { r.ok(); }
        }
        Ok(job.output())
    }
}

/// The arguments of `job_list`: none.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobListInput {}

/// One line of `job_list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    /// The job's id.
    pub job_id: String,
    /// The command, as given.
    pub command: String,
    /// Where it is.
    pub status: JobStatus,
    /// Milliseconds since it started (to its end, once ended).
    pub duration_ms: u64,
}

/// The `job_list` record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobList {
    /// The running jobs and the ended ones still kept, in the order started.
    pub jobs: Vec<JobSummary>,
}

/// The `job_list` tool.
#[derive(Debug, Clone)]
pub struct JobListTool {
    jobs: Arc<JobTable>,
}

impl JobListTool {
    /// The tool over `jobs`.
    pub(crate) fn new(jobs: Arc<JobTable>) -> Self {
        Self { jobs }
    }
}

impl TypedTool for JobListTool {
    type Input = JobListInput;
    type Valid = ();
    type Output = JobList;
    const NAME: &'static str = "job_list";
    const DESCRIPTION: &'static str = "List the background jobs: the running ones and the \
        last 16 ended. Returns {jobs: [{jobId, command, status, durationMs}]}.";
    const HINTS: ToolHints = ToolHints::read_only("List background jobs");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidJobInput;
    const FAILED: ErrorKind = ErrorKind::RunCommandFailed;

    fn check(&self, _: JobListInput) -> Result<(), ToolError> {
        Ok(())
    }

    async fn run(&self, (): (), _: &CancellationToken) -> Result<JobList, CallError> {
        let jobs = self.jobs.lock().jobs.clone();
        Ok(JobList {
            jobs: jobs
                .iter()
                .map(|j| {
                    let (status, duration) = j.status();
                    JobSummary {
                        job_id: j.id.clone(),
                        command: j.command.clone(),
                        status,
                        duration_ms: millis(duration),
                    }
                })
                .collect(),
        })
    }
}

/// The arguments of `job_input`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobInputInput {
    /// The id `run_command` answered (a job started with `stdin: true` or `tty`).
    pub job_id: String,
    /// UTF-8 text to write (a line usually ends with "\n").
    #[serde(default)]
    pub text: Option<String>,
    /// Bytes to write, in base64, after `text`: control bytes such as "Aw==" (\u0003, which on
    /// a terminal interrupts the foreground program as Ctrl-C does).
    #[serde(default)]
    pub bytes_base64: Option<String>,
    /// After writing, end the job's input: a pipe is closed; on a terminal, the end-of-file key
    /// (Ctrl-D) is typed. Later job_input calls are JOB_INPUT_CLOSED.
    #[serde(default)]
    pub close_stdin: bool,
    /// Wait up to this many milliseconds (0 to 30,000; default 0) for the job's answer: the
    /// call returns once output came and then stayed quiet for 300 ms, or the job ended.
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// Validated `job_input` arguments.
#[derive(Clone, Debug)]
pub struct JobInputRequest {
    job_id: String,
    bytes: Vec<u8>,
    close: bool,
    wait: Duration,
}

/// What `job_input` answers: the `job_output` record, then how many bytes were written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobInputOutput {
    /// What the job wrote since the previous look, and its status.
    #[serde(flatten)]
    pub output: JobOutput,
    /// How many of the bytes given the job took (fewer only when it did not read them in
    /// time: see the [module docs](self)).
    pub written: u64,
}

/// The `job_input` tool.
#[derive(Debug, Clone)]
pub struct JobInputTool {
    jobs: Arc<JobTable>,
}

impl JobInputTool {
    /// The tool over `jobs`.
    pub(crate) fn new(jobs: Arc<JobTable>) -> Self {
        Self { jobs }
    }
}

fn invalid_job_input() -> ToolError {
    ToolError::invalid(ErrorKind::InvalidJobInput)
}

impl TypedTool for JobInputTool {
    type Input = JobInputInput;
    type Valid = JobInputRequest;
    type Output = JobInputOutput;
    const NAME: &'static str = "job_input";
    const DESCRIPTION: &'static str = "Write to the stdin or terminal of a background job \
        started with run_command {background: true, stdin: true} or {background: true, tty: \
        {cols, rows}}, then answer like job_output. `text` is UTF-8 (end a line with \\n); \
        `bytesBase64` carries control bytes (\"Aw==\" is Ctrl-C: on a terminal it interrupts \
        the foreground program, not the job); at most 65536 bytes a call. `closeStdin: true` \
        ends the input after writing (Ctrl-D on a terminal). `waitMs` (0 to 30000) waits for \
        the answer: the call returns once output came and stayed quiet for 300 ms, or the job \
        ended, so one call is one turn of a REPL; call job_output for more. Returns the \
        job_output record plus `written` (bytes the job took). JOB_NOT_INTERACTIVE for a job \
        without stdin or tty, JOB_INPUT_CLOSED after closeStdin or once the job ended.";
    const HINTS: ToolHints = ToolHints {
        title: Some("Type into a background job"),
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidJobInput;
    const FAILED: ErrorKind = ErrorKind::RunCommandFailed;

    fn check(&self, input: JobInputInput) -> Result<JobInputRequest, ToolError> {
        use base64::Engine as _;
        let wait_ms = input.wait_ms.unwrap_or(0);
        if input.job_id.is_empty() || wait_ms > MAX_WAIT_MS {
            return Err(invalid_job_input());
        }
        let text = input.text.unwrap_or_default().into_bytes();
        // Only what could fit is decoded (base64 takes 4 characters for 3 bytes).
        let encoded = input.bytes_base64.unwrap_or_default();
        if text.len() > MAX_INPUT_BYTES || encoded.len() / 4 * 3 > MAX_INPUT_BYTES + 3 {
            return Err(invalid_job_input());
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_bytes())
            .map_err(|_| invalid_job_input())?;
        if text.len() + decoded.len() > MAX_INPUT_BYTES {
            return Err(invalid_job_input());
        }
        let mut bytes = text;
        bytes.extend_from_slice(&decoded);
        Ok(JobInputRequest {
            job_id: input.job_id,
            bytes,
            close: input.close_stdin,
            wait: Duration::from_millis(wait_ms),
        })
    }

    async fn run(
        &self,
        valid: JobInputRequest,
        cancel: &CancellationToken,
    ) -> Result<JobInputOutput, CallError> {
        let job = self.jobs.find(&valid.job_id)?;
        if job.input_kind == JobInputKind::None {
            return Err(failed(ErrorKind::JobNotInteractive));
        }
        let input = match job.input.get() {
            Some(input) if job.ended().is_none() && !input.is_closed() => input,
            _ => return Err(failed(ErrorKind::JobInputClosed)),
        };
        let start = tokio::time::Instant::now();
        let deadline = start + valid.wait;
        // The write is bounded: what the job has not taken by then stays unwritten.
        let write_deadline = start + valid.wait.max(MIN_WRITE_WAIT);
        // What the terminal will echo by itself is not the answer: the wait settles only on
        // output beyond it.
        let beyond = job.unread.total(0) + input.echo_len(&valid.bytes) as u64;
        let written = if valid.bytes.is_empty() {
            0
        } else {
            tokio::select! {
                () = cancel.cancelled() => return Err(Cancelled.into()),
                r = input.write(&valid.bytes, write_deadline) => match r {
                    Ok(n) => n,
                    Err(e) if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotConnected | std::io::ErrorKind::BrokenPipe
                    ) => return Err(failed(ErrorKind::JobInputClosed)),
                    Err(e) => return Err(failed(ErrorKind::RunCommandFailed).with_source(e)),
                },
            }
        };
        if valid.close {
            tokio::select! {
                () = cancel.cancelled() => return Err(Cancelled.into()),
                // A job that is gone has no input left to close.
                _ = input.close(write_deadline) => {}
            }
        }
        if !valid.wait.is_zero() {
            let until = Until::Settled {
                quiet: SETTLE,
                beyond,
            };
            wait_for_output(&job, deadline, until, cancel).await?;
        }
        Ok(JobInputOutput {
            output: job.output(),
            written: written as u64,
        })
    }
}

/// The arguments of `job_resize`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobResizeInput {
    /// The id `run_command` answered (a job started with `tty`).
    pub job_id: String,
    /// Columns, 1 to 1000.
    pub cols: u16,
    /// Rows, 1 to 1000.
    pub rows: u16,
}

/// Validated `job_resize` arguments.
#[derive(Clone, Debug)]
pub struct JobResizeRequest {
    job_id: String,
    size: confine_nodeexec::WindowSize,
}

/// What `job_resize` answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobResized {
    /// The job's id.
    pub job_id: String,
    /// The terminal's columns now.
    pub cols: u16,
    /// The terminal's rows now.
    pub rows: u16,
}

/// The `job_resize` tool.
#[derive(Debug, Clone)]
pub struct JobResizeTool {
    jobs: Arc<JobTable>,
}

impl JobResizeTool {
    /// The tool over `jobs`.
    pub(crate) fn new(jobs: Arc<JobTable>) -> Self {
        Self { jobs }
    }
}

impl TypedTool for JobResizeTool {
    type Input = JobResizeInput;
    type Valid = JobResizeRequest;
    type Output = JobResized;
    const NAME: &'static str = "job_resize";
    const DESCRIPTION: &'static str = "Resize the terminal of a background job started with \
        run_command {background: true, tty: {cols, rows}} (cols and rows 1 to 1000); its \
        foreground program gets SIGWINCH. Returns {jobId, cols, rows}. JOB_NOT_INTERACTIVE \
        for a job without a terminal, JOB_INPUT_CLOSED once the job ended.";
    const HINTS: ToolHints = ToolHints {
        title: Some("Resize a background job's terminal"),
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidJobInput;
    const FAILED: ErrorKind = ErrorKind::RunCommandFailed;

    fn check(&self, input: JobResizeInput) -> Result<JobResizeRequest, ToolError> {
        if input.job_id.is_empty()
            || !TERMINAL_CELLS.contains(&input.cols)
            || !TERMINAL_CELLS.contains(&input.rows)
        {
            return Err(invalid_job_input());
        }
        Ok(JobResizeRequest {
            job_id: input.job_id,
            size: confine_nodeexec::WindowSize::new(input.cols, input.rows),
        })
    }

    async fn run(
        &self,
        valid: JobResizeRequest,
        _: &CancellationToken,
    ) -> Result<JobResized, CallError> {
        let job = self.jobs.find(&valid.job_id)?;
        if job.input_kind != JobInputKind::Terminal {
            return Err(failed(ErrorKind::JobNotInteractive));
        }
        let resized = match job.input.get() {
            Some(input) if job.ended().is_none() => input.resize(valid.size),
            _ => return Err(failed(ErrorKind::JobInputClosed)),
        };
        match resized {
            Ok(()) => Ok(JobResized {
                job_id: job.id.clone(),
                cols: valid.size.cols,
                rows: valid.size.rows,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {
                Err(failed(ErrorKind::JobInputClosed))
            }
            Err(e) => Err(failed(ErrorKind::RunCommandFailed).with_source(e)),
        }
    }
}
