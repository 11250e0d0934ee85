//! `node_process`: JavaScript run by a fixed Node.js, bounded, in the workspace (`docs/TOOLS.md`).
//!
//! Arguments are exactly `{ "source": string, "arguments"?: string[] }`. A missing `arguments`
//! means none; `"arguments": null` is refused (`INVALID_NODE_PROCESS_INPUT`), as for any other
//! value that is not an array of strings. Limits, all checked before any effect: the source at
//! most [`MAX_SOURCE_BYTES`]; at most [`MAX_ARGUMENTS`] arguments, each at most
//! [`MAX_ARGUMENT_BYTES`], together at most [`MAX_ARGUMENTS_TOTAL_BYTES`], none holding NUL;
//! the Windows command line `"<node>" "<root>/.pify-node-<owner>-<uuid>.cjs" -- <arguments…>`, quoted
//! as `CommandLineToArgvW` parses it, at most [`MAX_WINDOWS_COMMAND_LINE_UNITS`] UTF-16 units
//! (computed on every OS; with the byte limits above it cannot be reached by the arguments
//! alone, a quoted byte costing at most two units, and is kept as the reference's ceiling).
//!
//! # How the script runs
//!
//! The source goes to `.pify-node-<owner>-<uuid>.cjs` (`<owner>` is `<pid>-<start time>` of
//! the embedding process, so scripts left by a killed embedder are removed when a later tool is
//! built, and those of a live one never are), created exclusively (`O_CREAT|O_EXCL`, no
//! symlink followed) with mode 0600 beneath the root's handle, written and fsynced. It is then
//! reopened read-only by name and that descriptor must be a regular file
//! (`NODE_SCRIPT_NOT_REGULAR`) with the identity of the file just written
//! (`NODE_SCRIPT_IDENTITY_CHANGED`). Node.js gets that very descriptor as fd 3, so what runs is
//! what was checked, whatever happens to the name afterwards.
//!
//! Node.js is started as `node --eval <loader> -- <arguments…>` (the loader is `loader.js`): that is what makes
//! `process.argv` exactly `[process.execPath, ...arguments]`, as `node -e` shows them (a
//! script path would be `argv[1]`). The loader, a fixed few lines, reads fd 3, closes it,
//! removes the globals `-e` defines (`require`, `module`, `exports`, `__filename`,
//! `__dirname`), empties `process.execArgv` (so `child_process.fork` starts a plain Node.js),
//! and compiles the source as the CommonJS main module of `<root>/.pify-node-<owner>-<uuid>.cjs`
//! (`require.main === module`, `__filename`, relative `require` and a leading `#!` line work
//! as for a file run directly).
//!
//! The child runs through [`nodeexec`](confine_nodeexec): no shell, the canonical root as working directory,
//! stdin on the null device, an allowlisted environment (PATH, LANG, LC_*, TZ, plus the
//! embedder's [`NodeProcessOptions::env`]; never `NODE_OPTIONS`), each stream capped at 32,768
//! bytes, the time bound (500 ms unless the embedder sets another), its own session, cgroup
//! and PID namespace where the system allows them, so the pids a script sees are the
//! namespace's (see the `nodeexec` docs for the fallbacks). The script is removed on every
//! path: after the run, and by a guard when the future is dropped. It is removed only while
//! its name still names the file this call created; a removal that fails after a successful
//! run is `NODE_SCRIPT_CLEANUP_FAILED`.

mod limits;
mod loader;
mod script;
mod winquote;

use cap_std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use confine_rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::child::{Children, RunErrors, node_executable};
use crate::error::{CallError, ErrorKind, ToolError};
use crate::tool::{ToolHints, TypedTool};
pub use limits::{
    MAX_ARGUMENT_BYTES, MAX_ARGUMENTS, MAX_ARGUMENTS_TOTAL_BYTES, MAX_SOURCE_BYTES,
    MAX_WINDOWS_COMMAND_LINE_UNITS,
};
use loader::loader;
use script::{Script, remove_stale_scripts};

/// The default time bound.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// What each of stdout and stderr keeps.
pub const OUTPUT_CAP: usize = 32_768;

/// The descriptor number the script is passed on.
pub(crate) const SCRIPT_FD: i32 = 3;
/// How a failed run is reported.
const RUN_ERRORS: RunErrors = RunErrors {
    start: ErrorKind::NodeProcessStartFailed,
    output: ErrorKind::NodeProcessOutputFailed,
    timeout: ErrorKind::NodeProcessTimeout,
    other: ErrorKind::NodeProcessFailed,
};

/// How the node_process tool is built (by the embedder; the model cannot change it).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct NodeProcessOptions {
    /// The Node.js executable; `None` finds `node` on PATH once, when the tool is built.
    /// Either way it is canonicalized then.
    pub node: Option<PathBuf>,
    /// The time bound, covering exit and both pipes closing; `None` is 500 ms.
    pub timeout: Option<Duration>,
    /// Variables to set in the child, beside PATH, LANG, LC_* and TZ taken from the host.
    /// `NODE_OPTIONS` is dropped.
    pub env: Vec<(String, String)>,
    /// The opt-in kernel sandbox (Linux Landlock, seccomp and resource limits, see
    /// [`confine_nodeexec::Sandbox`]), with the workspace root as the writable tree; the tool adds
    /// the Node.js installation to what it may read. More places to read or write are added
    /// on the policy itself (`Sandbox::allow_read`, `Sandbox::allow_write`). `None` runs
    /// Node.js unconfined. Where the kernel cannot enforce it a call fails with
    /// `NODE_SANDBOX_UNAVAILABLE` and nothing runs.
    pub sandbox: Option<confine_nodeexec::Sandbox>,
    /// The bound on concurrent runs this tool counts against: share one `Arc` between every
    /// tool of an embedder that starts processes, so the bound is the embedder's. `None`: a
    /// bound of the tool's own, one run per CPU. A call waits (in order, cancellably) for a
    /// slot before anything of it exists; the wait is not part of its time bound.
    pub slots: Option<Arc<confine_nodeexec::RunSlots>>,
    /// Keep the embedder's session and privileges in the children of `node_process` and
    /// `run_command` (by default each gets a session of its own, no new privileges and no
    /// capabilities, sandbox or not).
    pub keep_privileges: bool,
    /// Offer `run_command` too (in the workspace tool set), bounded so; `None` (the default)
    /// never offers it. It shares `env` and `sandbox` with `node_process`.
    pub commands: Option<crate::run_command::RunCommandOptions>,
    /// The protected paths (default: [`crate::DEFAULT_PROTECTED`]): the write tools of a set
    /// built with these options refuse them (`PATH_PROTECTED`), and under
    /// [`sandbox`](Self::sandbox) the children of `node_process` and `run_command` find those
    /// that exist read-only (see `docs/SECURITY.md`).
    pub protected: Arc<crate::ProtectedPaths>,
    /// The denied paths (default: none): every file tool of a set built with these options
    /// refuses them (`PATH_DENIED`), the walking tools leave them out, and under
    /// [`sandbox`](Self::sandbox) the children of `node_process` and `run_command` find those
    /// that exist at a run's start covered (see `docs/SECURITY.md`).
    pub denied: Arc<crate::DeniedPaths>,
    /// The network policy (default: none, the children keep the host's network): while
    /// set, the children of `node_process` and `run_command` reach the network only through
    /// its proxy, and their records gain `network` (see [`crate::NetworkPolicy`]). Where it
    /// is unavailable a call fails with `NETWORK_POLICY_UNAVAILABLE` and nothing runs.
    pub network: Option<Arc<crate::NetworkPolicy>>,
    /// Checkpoints (default: none): a set that changes the workspace records it before each
    /// changing call and offers checkpoint_list, checkpoint_diff and checkpoint_restore (see
    /// [`crate::checkpoint`]).
    pub checkpoints: Option<crate::checkpoint::CheckpointOptions>,
}

/// The arguments of `node_process`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeInput {
    /// JavaScript source, run as a CommonJS module by Node.js with the workspace root as the
    /// working directory. At most 32,768 UTF-8 bytes. Write results to stdout
    /// (`console.log` / `process.stdout.write`).
    pub source: String,
    /// Strings passed to the script: `process.argv` is `[process.execPath, ...arguments]`.
    /// At most 32, each at most 2,048 bytes, 8,192 bytes in all, no NUL.
    #[serde(default)]
    pub arguments: Vec<String>,
}

/// The success record, in this key order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOutput {
    /// The exit code, or `null` when a signal ended the process.
    pub exit_code: Option<i32>,
    /// The signal (`"SIGKILL"`) that ended the process, or `null`.
    pub signal: Option<String>,
    /// stdout, at most 32,768 bytes, never splitting a character.
    pub stdout: String,
    /// stderr, likewise.
    pub stderr: String,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Whether stderr was cut.
    pub stderr_truncated: bool,
    /// Always false: a timeout is the error `NODE_PROCESS_TIMEOUT`.
    pub timed_out: bool,
    /// While the network policy is on: the proxy's decisions about this run's requests, one
    /// per distinct host and port in the order first asked (at most 100); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<confine_netpolicy::Decision>>,
}

/// Validated arguments.
#[derive(Clone, Debug)]
pub struct NodeRun {
    source: String,
    arguments: Vec<String>,
}

/// The `node_process` tool.
#[derive(Debug, Clone)]
pub struct NodeProcessTool {
    children: Children,
    node: PathBuf,
    timeout: Duration,
}

impl NodeProcessTool {
    /// A node tool over an already captured root; fixes the Node.js executable now.
    pub(crate) fn new(
        root: Arc<WorkspaceRoot>,
        options: NodeProcessOptions,
    ) -> Result<Self, crate::BuildError> {
        let node = node_executable(&options).ok_or(crate::BuildError::NodeNotFound)?;
        // What embedders that died (SIGKILL) left: only names of ours whose owner is gone.
        confine_nodeexec::remove_stale_cgroups();
        remove_stale_scripts(root.dir());
        // Node.js must read its own installation, wherever it lives.
        Ok(Self {
            children: Children::new(root, &options, Some(&node)),
            node,
            timeout: options.timeout.unwrap_or(DEFAULT_TIMEOUT),
        })
    }

    /// The Node.js executable this tool runs (canonical).
    pub fn node(&self) -> &Path {
        &self.node
    }

    /// The process to start for `script` (already checked) and `arguments`. A sandbox adds its
    /// pre-exec steps here.
    fn command(
        &self,
        script: &Script<'_>,
        readable: &File,
        arguments: &[String],
    ) -> Result<(confine_nodeexec::Command, crate::child::Confined), CallError> {
        let mut cmd = self.children.command(&self.node);
        cmd.arg("--eval")
            .arg(loader(script.name()))
            .arg("--")
            .args(arguments)
            .timeout(self.timeout)
            .output_cap(OUTPUT_CAP);
        cmd.pass_fd(readable, SCRIPT_FD)
            .map_err(|e| failed(ErrorKind::NodeProcessStartFailed).with_source(e))?;
        let confined = self
            .children
            .confine(&mut cmd, ErrorKind::NodeProcessStartFailed)?;
        Ok((cmd, confined))
    }

    /// Run validated arguments.
    pub async fn execute_run(
        &self,
        run: NodeRun,
        cancel: &CancellationToken,
    ) -> Result<NodeOutput, CallError> {
        // Held until the run's processes are reaped and its script is removed.
        let _slot = self.children.admit(cancel).await?;
        let root = self.children.root();
        let (mut script, file) = Script::create(root.dir(), &run.source)?;
        // The script's fsync blocks: off the async workers (see the `blocking` module).
        off_reactor(move || {
            file.sync_all()
                .map_err(|_| failed(ErrorKind::NodeProcessFailed))
        })
        .await?;
        let readable = script.open_checked()?;
        root.verify()?;
        let (cmd, confined) = self.command(&script, &readable, &run.arguments)?;
        drop(readable);

        let result = cmd.run(cancel).await;
        let network = confined.network;
        // The run's processes are reaped: the last look at the protected paths.
        drop(confined.watch);
        let cleanup = script.remove();
        let outcome = result.map_err(|e| RUN_ERRORS.of(e))?;
        cleanup?;
        Ok(NodeOutput {
            exit_code: outcome.exit_code,
            signal: outcome.signal_name(),
            stdout: outcome.stdout.text,
            stderr: outcome.stderr.text,
            stdout_truncated: outcome.stdout.truncated,
            stderr_truncated: outcome.stderr.truncated,
            timed_out: false,
            network: network.as_ref().map(crate::network::RunNetwork::decisions),
        })
    }
}

impl TypedTool for NodeProcessTool {
    type Input = NodeInput;
    type Valid = NodeRun;
    type Output = NodeOutput;
    const NAME: &'static str = "node_process";
    const DESCRIPTION: &'static str = "Run JavaScript (CommonJS) with Node.js, with the workspace \
        root as working directory. `source` is the script (at most 32,768 bytes); `arguments` \
        (optional, at most 32 strings) appear as process.argv.slice(1). stdin is empty. The run \
        has a short time limit (500 ms by default); it and every process it starts are killed \
        when it ends. Returns {exitCode, signal, stdout, stderr, stdoutTruncated, \
        stderrTruncated, timedOut}; each stream keeps at most 32,768 bytes. A nonzero exit is \
        a result, not an error; running out of time is the error NODE_PROCESS_TIMEOUT.";
    const HINTS: ToolHints = ToolHints {
        title: Some("Run JavaScript in the workspace"),
        ..ToolHints::UNKNOWN
    };
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidNodeProcessInput;
    const FAILED: ErrorKind = ErrorKind::NodeProcessFailed;

    fn check(&self, input: NodeInput) -> Result<NodeRun, ToolError> {
        self.check_limits(&input)?;
        Ok(NodeRun {
            source: input.source,
            arguments: input.arguments,
        })
    }

    async fn run(
        &self,
        valid: NodeRun,
        cancel: &CancellationToken,
    ) -> Result<NodeOutput, CallError> {
        self.execute_run(valid, cancel).await
    }
}

fn failed(kind: ErrorKind) -> CallError {
    CallError::Failed(ToolError::failed(kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_refuse_node_options_and_missing_node() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Arc::new(WorkspaceRoot::capture(tmp.path()).unwrap());
        let options = NodeProcessOptions {
            env: vec![
                ("NODE_OPTIONS".into(), "--require x".into()),
                ("A".into(), "1".into()),
            ],
            ..NodeProcessOptions::default()
        };
        let tool = NodeProcessTool::new(root.clone(), options).unwrap();
        assert_eq!(tool.children.env(), [("A".to_owned(), "1".to_owned())]);
        assert!(tool.node().is_absolute());
        let options = NodeProcessOptions {
            node: Some(tmp.path().join("no-node")),
            ..NodeProcessOptions::default()
        };
        assert!(matches!(
            NodeProcessTool::new(root, options),
            Err(crate::BuildError::NodeNotFound)
        ));
    }

    #[test]
    fn output_record_keys_in_contract_order() {
        let out = NodeOutput {
            exit_code: Some(0),
            signal: None,
            stdout: "o".into(),
            stderr: "e".into(),
            stdout_truncated: false,
            stderr_truncated: true,
            timed_out: false,
            network: None,
        };
        assert_eq!(
            serde_json::to_value(&out).unwrap().to_string(),
            r#"{"exitCode":0,"signal":null,"stdout":"o","stderr":"e","stdoutTruncated":false,"stderrTruncated":true,"timedOut":false}"#
        );
        // While the network policy is on, the decisions come last.
        let mut out = out;
        out.network = Some(vec![confine_netpolicy::Decision {
            host: "h.example".into(),
            port: 443,
            allowed: false,
            reason: Some("not on the allow list".into()),
        }]);
        let text = serde_json::to_value(&out).unwrap().to_string();
        assert!(
            text.ends_with(r#""timedOut":false,"network":[{"host":"h.example","port":443,"allowed":false,"reason":"not on the allow list"}]}"#),
            "{text}"
        );
    }
}
