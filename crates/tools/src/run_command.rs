//! `run_command`: a shell command run in the workspace, bounded, so that an agent can run a
//! project's tests and builds (`npm test`, `cargo test`, `make`).
//!
//! Arguments are exactly `{ "command": string, "timeoutMs"?: integer, "background"?: bool,
//! "stdin"?: bool, "tty"?: {cols, rows} }` (the last three start a job, see [`crate::jobs`];
//! `stdin` and `tty` only with `background`, sizes 1 to 1000). Checked before any
//! effect: the command is not empty, holds no NUL (`INVALID_RUN_COMMAND_INPUT`) and is at most
//! [`MAX_COMMAND_BYTES`] UTF-8 bytes (`RUN_COMMAND_TOO_LARGE`); `timeoutMs` is from 1 to the
//! embedder's maximum (`RUN_COMMAND_TIMEOUT_OUT_OF_RANGE`). The command limit is 32,768 bytes,
//! the same as a `node_process` source: far above any command line a person or a model types
//! (a longer program belongs in a file the command runs), and a quarter of the 131,072 bytes
//! Linux accepts for one `exec` argument, so the limit is ours and never the kernel's.
//!
//! # How the command runs
//!
//! `/bin/sh -c <command>` through [`nodeexec`](confine_nodeexec), exactly as `node_process` runs Node.js: the
//! canonical root as working directory, stdin on the null device, the same containment (no
//! process the command starts outlives the call, whether it ends by exit, timeout or
//! cancellation), the same opt-in sandbox policy ([`ToolSetOptions::sandbox`], built by the
//! same code, with the same token `NODE_SANDBOX_UNAVAILABLE` where the kernel cannot enforce
//! it). The environment is the `node_process` allowlist (PATH, LANG, LC_*, TZ and the
//! embedder's [`ToolSetOptions::env`]) plus the host's `HOME` and `USER` (git, cargo and npm
//! look for them) and `TMPDIR`, a directory `.pify-run-<uuid>/` made for the call beneath the
//! root (mode 0700) and removed with its contents when the call ends, on every path (a guard
//! removes it when the future is dropped).
//!
//! Each stream keeps its first [`HEAD_BYTES`] and its last [`TAIL_BYTES`], with a line between
//! naming the bytes left out ([`confine_nodeexec::omitted_marker`]), so the start of a test run and its
//! summary both survive; memory stays bounded whatever the command prints. The time bound is
//! the embedder's default (120 s unless configured) or the call's `timeoutMs`, at most the
//! embedder's maximum (600 s unless configured). A timeout is a result, not an error:
//! `timedOut: true` with the output read until the bound, `exitCode: null` and
//! `signal: "SIGKILL"` (everything was killed). A nonzero exit or a death by signal is data.
//! A cancellation kills everything before the call returns `Err(Cancelled)`.
//!
//! While the command runs, an embedder that installed a sink ([`crate::with_progress`]) gets a
//! report about once a second: elapsed time, bytes of output so far, the last line.

mod tmpdir;

use std::sync::Arc;
use std::time::{Duration, Instant};

use confine_nodeexec::ErrorKind as ExecErrorKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::child::{Children, RunErrors, node_executable};
use crate::error::{CallError, ErrorKind, ToolError, failed};
use crate::jobs::{DEFAULT_JOB_TIMEOUT, JobInputKind, JobStarted, JobTable, TERMINAL_CELLS};
use crate::progress::{ProgressReport, current_sink};
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::{RunCommandOptions, ToolSetOptions, Workspace};
use tmpdir::RunTmp;

/// The most UTF-8 bytes of a command.
pub const MAX_COMMAND_BYTES: usize = 32_768;
/// The default time bound of a command.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// The default most time a call may ask for.
pub const DEFAULT_COMMAND_MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// What each stream keeps of its start.
pub const HEAD_BYTES: usize = 16 * 1024;
/// What each stream keeps of its end.
pub const TAIL_BYTES: usize = 16 * 1024;
/// How often progress is reported while a command runs.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// The shell.
const SHELL: &str = "/bin/sh";
/// `TERM` of a terminal job, unless the embedder passes one.
pub const TERMINAL_TYPE: &str = "dumb";
/// How a failed run is reported (a timeout is a result, never this error).
const RUN_ERRORS: RunErrors = RunErrors {
    start: ErrorKind::RunCommandStartFailed,
    output: ErrorKind::RunCommandOutputFailed,
    timeout: ErrorKind::RunCommandFailed,
    other: ErrorKind::RunCommandFailed,
};
/// Host variables passed beside the `node_process` allowlist.
const EXTRA_INHERITED_ENV: &[&str] = &["HOME", "USER"];

/// The arguments of `run_command`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunCommandInput {
    /// A shell command line, run with `/bin/sh -c` in the workspace root (for example
    /// `npm test` or `cargo test 2>&1 | tail -n 50`). At most 32,768 bytes.
    pub command: String,
    /// The time bound in milliseconds (default and maximum set by the server).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Start the command as a background job and answer at once with its `jobId` (read it
    /// with job_output, stop it with job_stop): for a dev server, a watcher or a long build.
    #[serde(default)]
    pub background: bool,
    /// With background: give the job a stdin the agent writes with job_input (a pipe; the job
    /// sees no terminal).
    #[serde(default)]
    pub stdin: bool,
    /// With background: run the job on a terminal of its own of this size (its stdin, stdout
    /// and stderr; output is one stream, returned as stdout); write to it with job_input,
    /// resize it with job_resize. For REPLs, prompts, programs that want a terminal, and a
    /// persistent shell (command "bash").
    #[serde(default)]
    pub tty: Option<TerminalSize>,
}

/// A terminal's size in character cells (each 1 to 1000).
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

/// What `run_command` answers: the run's record, or a started job's id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum RunCommandAnswer {
    /// The command ran to its end.
    Ran(RunCommandOutput),
    /// The command runs as a background job.
    Started(JobStarted),
}

/// The success record, in this key order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCommandOutput {
    /// The exit code, or `null` when a signal ended the shell (or the bound was reached).
    pub exit_code: Option<i32>,
    /// The signal (`"SIGKILL"`) that ended the shell, or `null`.
    pub signal: Option<String>,
    /// stdout: its first and last 16 KiB, with a marker line naming the bytes left out.
    pub stdout: String,
    /// stderr, likewise.
    pub stderr: String,
    /// Whether bytes of stdout were left out.
    pub stdout_truncated: bool,
    /// Whether bytes of stderr were left out.
    pub stderr_truncated: bool,
    /// Whether the bound was reached (then the output is what came before it).
    pub timed_out: bool,
    /// Milliseconds from the start to the end of the run.
    pub duration_ms: u64,
    /// While the network policy is on: the proxy's decisions about this run's requests, one
    /// per distinct host and port in the order first asked (at most 100); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<confine_netpolicy::Decision>>,
}

/// Validated arguments.
#[derive(Clone, Debug)]
pub struct CommandRun {
    command: String,
    timeout: Duration,
    background: bool,
    stdin: confine_nodeexec::Stdin,
}

/// The `run_command` tool.
#[derive(Debug, Clone)]
pub struct RunCommandTool {
    children: Children,
    timeout: Duration,
    max_timeout: Duration,
    job_timeout: Duration,
    jobs: Arc<JobTable>,
    /// Whether `background: true` is accepted (false where no tool reads the jobs).
    offers_jobs: bool,
}

impl RunCommandTool {
    /// A command tool whose background jobs go to `jobs` (shared with the job tools).
    pub(crate) fn with_jobs(
        ws: &Workspace,
        set: &ToolSetOptions,
        options: &RunCommandOptions,
        jobs: Arc<JobTable>,
    ) -> Self {
        let max_timeout = options
            .max_timeout
            .unwrap_or(DEFAULT_COMMAND_MAX_TIMEOUT)
            .max(Duration::from_millis(1));
        let timeout = options
            .timeout
            .unwrap_or(DEFAULT_COMMAND_TIMEOUT)
            .min(max_timeout);
        // As for node_process, Node.js must read its own installation, wherever it lives, so
        // that a command can run it; the shell and the system's tools are readable already.
        let executable = node_executable(&set.node);
        let job_timeout = options
            .job_timeout
            .unwrap_or(DEFAULT_JOB_TIMEOUT)
            .min(max_timeout);
        Self {
            children: Children::new(ws, set, executable.as_deref()),
            timeout,
            max_timeout,
            job_timeout,
            jobs,
            offers_jobs: true,
        }
    }

    /// Refuse `background: true` (`INVALID_RUN_COMMAND_INPUT`): for a tool set that serves
    /// `run_command` without `job_output`, where a job's output could never be read.
    pub(crate) fn without_jobs(mut self) -> Self {
        self.offers_jobs = false;
        self
    }

    /// The table this tool's background jobs go to.
    pub fn jobs(&self) -> &Arc<JobTable> {
        &self.jobs
    }

    /// Start validated arguments as a background job.
    async fn start_job(
        &self,
        run: CommandRun,
        cancel: &CancellationToken,
    ) -> Result<JobStarted, CallError> {
        self.children.root().verify()?;
        let build = |unread: &confine_nodeexec::Unread| {
            let tmp = RunTmp::create(self.children.root_arc())
                .map_err(|e| failed(ErrorKind::RunCommandFailed).with_source(e))?;
            let (mut cmd, confined) = self.command(&run, &tmp)?;
            // The outcome's own capture is not read for a job: only the unread rings are.
            cmd.output_cap(0)
                .output_tail(0)
                .unread(unread)
                .stdin(run.stdin);
            if matches!(run.stdin, confine_nodeexec::Stdin::Terminal(_))
                && !cmd.child_env().iter().any(|(name, _)| name == "TERM")
            {
                // A terminal that asks for no escape sequences, unless the embedder set one:
                // the model reads the bytes as they are (see the module docs).
                cmd.env("TERM", TERMINAL_TYPE);
            }
            Ok((cmd, (tmp, confined.watch), confined.network))
        };
        let kind = match run.stdin {
            confine_nodeexec::Stdin::Pipe => JobInputKind::Pipe,
            confine_nodeexec::Stdin::Terminal(_) => JobInputKind::Terminal,
            _ => JobInputKind::None,
        };
        self.jobs
            .start(&run.command, kind, build, |e| RUN_ERRORS.of(e), cancel)
            .await
    }

    /// The most milliseconds a call may ask for.
    pub fn max_timeout_ms(&self) -> u64 {
        self.max_timeout.as_millis().try_into().unwrap_or(u64::MAX)
    }

    fn command(
        &self,
        run: &CommandRun,
        tmp: &RunTmp,
    ) -> Result<(confine_nodeexec::Command, crate::child::Confined), CallError> {
        let mut cmd = self.children.command(SHELL.as_ref());
        cmd.arg("-c")
            .arg(&run.command)
            .timeout(run.timeout)
            .output_cap(HEAD_BYTES)
            .output_tail(TAIL_BYTES);
        for name in EXTRA_INHERITED_ENV {
            cmd.inherit_env(name);
        }
        cmd.env("TMPDIR", self.children.root().canonical().join(tmp.name()));
        let confined = self
            .children
            .confine(&mut cmd, ErrorKind::RunCommandStartFailed)?;
        Ok((cmd, confined))
    }

    /// Run validated arguments.
    pub async fn execute_run(
        &self,
        run: CommandRun,
        cancel: &CancellationToken,
    ) -> Result<RunCommandOutput, CallError> {
        // The same bound as node_process's (one `RunSlots` per registry), held until the
        // run's processes are reaped.
        let _slot = self.children.admit(cancel).await?;
        let tmp = RunTmp::create(self.children.root_arc())
            .map_err(|e| failed(ErrorKind::RunCommandFailed).with_source(e))?;
        let (mut cmd, confined) = self.command(&run, &tmp)?;
        let start = Instant::now();
        let result = match current_sink() {
            None => cmd.run(cancel).await,
            Some(sink) => {
                let progress = confine_nodeexec::Progress::new();
                cmd.progress(&progress);
                let run = cmd.run(cancel);
                tokio::pin!(run);
                let first = tokio::time::Instant::now() + PROGRESS_INTERVAL;
                let mut tick = tokio::time::interval_at(first, PROGRESS_INTERVAL);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        biased;
                        result = &mut run => break result,
                        _ = tick.tick() => sink(ProgressReport {
                            elapsed: start.elapsed(),
                            output_bytes: progress.bytes(),
                            last_line: progress.last_line(),
                        }),
                    }
                }
            }
        };
        drop(tmp);
        let network = confined.network;
        // The run's processes are reaped: the last look at the protected paths.
        drop(confined.watch);
        let (outcome, timed_out) = match result {
            Ok(outcome) => (outcome, false),
            Err(e) if e.kind() == ExecErrorKind::TimedOut => match e.into_partial_outcome() {
                Some(outcome) => (outcome, true),
                None => return Err(failed(ErrorKind::RunCommandFailed)),
            },
            Err(e) => return Err(RUN_ERRORS.of(e)),
        };
        Ok(RunCommandOutput {
            exit_code: outcome.exit_code,
            signal: outcome.signal_name(),
            duration_ms: outcome.elapsed.as_millis().try_into().unwrap_or(u64::MAX),
            stdout: outcome.stdout.text,
            stderr: outcome.stderr.text,
            stdout_truncated: outcome.stdout.truncated,
            stderr_truncated: outcome.stderr.truncated,
            timed_out,
            network: network.as_ref().map(crate::network::RunNetwork::decisions),
        })
    }
}

impl TypedTool for RunCommandTool {
    type Input = RunCommandInput;
    type Valid = CommandRun;
    type Output = RunCommandAnswer;
    const NAME: &'static str = "run_command";
    const DESCRIPTION: &'static str = "Run a shell command (/bin/sh -c) with the workspace root \
        as working directory: a project's tests, builds and tools (npm test, cargo test, git \
        status, make). stdin is empty unless a job asks for input (below). `timeoutMs` (optional) bounds the run; the server sets \
        the default and the maximum. The command and every process it starts are killed when \
        it ends. Returns {exitCode, signal, stdout, stderr, stdoutTruncated, stderrTruncated, \
        timedOut, durationMs}; each stream keeps its first and last 16 KiB with a line saying \
        how many bytes were left out between. A nonzero exit is a result, not an error; \
        running out of time is timedOut: true with the output so far. The call ends when the \
        shell exits: what it left running is killed. With background: true the command \
        starts as a job and the answer is {jobId, command} at once: poll it with job_output, \
        stop it with job_stop (a dev server, a watcher, a long build). A job may also take \
        input: stdin: true gives it a stdin pipe, tty: {cols, rows} a terminal of its own \
        (stdout and stderr one stream, returned as stdout; TERM=dumb); write with job_input, \
        resize with job_resize. A terminal job running bash is a persistent shell whose cd and \
        variables last between inputs.";
    const HINTS: ToolHints = ToolHints {
        title: Some("Run a shell command in the workspace"),
        ..ToolHints::UNKNOWN
    };
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidRunCommandInput;
    const FAILED: ErrorKind = ErrorKind::RunCommandFailed;

    fn check(&self, input: RunCommandInput) -> Result<CommandRun, ToolError> {
        if input.command.is_empty() || input.command.contains('\0') {
            return Err(ToolError::invalid(ErrorKind::InvalidRunCommandInput));
        }
        if input.background && !self.offers_jobs {
            return Err(ToolError::invalid(ErrorKind::InvalidRunCommandInput));
        }
        // Input is for jobs: a run that is waited for has no one to type into it.
        let stdin = match (input.tty, input.stdin) {
            (Some(_), _) | (None, true) if !input.background => {
                return Err(ToolError::invalid(ErrorKind::InvalidRunCommandInput));
            }
            (Some(size), _) => {
                if !TERMINAL_CELLS.contains(&size.cols) || !TERMINAL_CELLS.contains(&size.rows) {
                    return Err(ToolError::invalid(ErrorKind::InvalidRunCommandInput));
                }
                confine_nodeexec::Stdin::Terminal(confine_nodeexec::WindowSize::new(
                    size.cols, size.rows,
                ))
            }
            (None, true) => confine_nodeexec::Stdin::Pipe,
            (None, false) => confine_nodeexec::Stdin::Null,
        };
        if input.command.len() > MAX_COMMAND_BYTES {
            return Err(ToolError::invalid(ErrorKind::RunCommandTooLarge));
        }
        let timeout = match input.timeout_ms {
            None if input.background => self.job_timeout,
            None => self.timeout,
            Some(ms) if (1..=self.max_timeout_ms()).contains(&ms) => Duration::from_millis(ms),
            Some(_) => return Err(ToolError::invalid(ErrorKind::RunCommandTimeoutOutOfRange)),
        };
        Ok(CommandRun {
            command: input.command,
            timeout,
            background: input.background,
            stdin,
        })
    }

    async fn run(
        &self,
        valid: CommandRun,
        cancel: &CancellationToken,
    ) -> Result<RunCommandAnswer, CallError> {
        if valid.background {
            return self
                .start_job(valid, cancel)
                .await
                .map(RunCommandAnswer::Started);
        }
        self.execute_run(valid, cancel)
            .await
            .map(RunCommandAnswer::Ran)
    }
}
