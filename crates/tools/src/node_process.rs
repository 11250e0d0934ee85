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
//! Node.js is started as `node --eval <loader> -- <arguments…>`: that is what makes
//! `process.argv` exactly `[process.execPath, ...arguments]`, as `node -e` shows them (a
//! script path would be `argv[1]`). The loader, a fixed few lines, reads fd 3, closes it,
//! removes the globals `-e` defines (`require`, `module`, `exports`, `__filename`,
//! `__dirname`), empties `process.execArgv` (so `child_process.fork` starts a plain Node.js),
//! and compiles the source as the CommonJS main module of `<root>/.pify-node-<owner>-<uuid>.cjs`
//! (`require.main === module`, `__filename`, relative `require` and a leading `#!` line work
//! as for a file run directly).
//!
//! The child runs through [`nodeexec`]: no shell, the canonical root as working directory,
//! stdin on the null device, an allowlisted environment (PATH, LANG, LC_*, TZ, plus the
//! embedder's [`NodeProcessOptions::env`]; never `NODE_OPTIONS`), each stream capped at 32,768
//! bytes, the time bound (500 ms unless the embedder sets another), its own session, cgroup
//! and PID namespace where the system allows them, so the pids a script sees are the
//! namespace's (see the `nodeexec` docs for the fallbacks). The script is removed on every
//! path: after the run, and by a guard when the future is dropped. It is removed only while
//! its name still names the file this call created; a removal that fails after a successful
//! run is `NODE_SCRIPT_CLEANUP_FAILED`.

mod winquote;

use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use beneath::{FsErrorKind, Temporary};
use cap_std::fs::{Dir, File, OpenOptions, OpenOptionsExt};
use nodeexec::ErrorKind as ExecErrorKind;
use rootid::{FileIdentity, WorkspaceRoot};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::error::{CallError, Cancelled, ErrorKind, ToolError};
use crate::tool::{ToolHints, TypedTool};
use winquote::windows_command_line_units;

/// The most UTF-8 bytes of source.
pub const MAX_SOURCE_BYTES: usize = 32_768;
/// The most arguments.
pub const MAX_ARGUMENTS: usize = 32;
/// The most UTF-8 bytes of one argument.
pub const MAX_ARGUMENT_BYTES: usize = 2_048;
/// The most UTF-8 bytes of all arguments together.
pub const MAX_ARGUMENTS_TOTAL_BYTES: usize = 8_192;
/// The most UTF-16 units of the Windows command line.
pub const MAX_WINDOWS_COMMAND_LINE_UNITS: usize = 30_000;
/// The default time bound.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
/// What each of stdout and stderr keeps.
pub const OUTPUT_CAP: usize = 32_768;

/// The descriptor number the script is passed on.
const SCRIPT_FD: i32 = 3;
/// Variables an embedder cannot pass either.
const REFUSED_ENV: &[&str] = &["NODE_OPTIONS"];

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
    /// [`nodeexec::Sandbox`]), with the workspace root as the writable tree; the tool adds
    /// the Node.js installation to what it may read. More places to read or write are added
    /// on the policy itself (`Sandbox::allow_read`, `Sandbox::allow_write`). `None` runs
    /// Node.js unconfined. Where the kernel cannot enforce it a call fails with
    /// `NODE_SANDBOX_UNAVAILABLE` and nothing runs.
    pub sandbox: Option<nodeexec::Sandbox>,
    /// The bound on concurrent runs this tool counts against: share one `Arc` between every
    /// tool of an embedder that starts processes, so the bound is the embedder's. `None`: a
    /// bound of the tool's own, one run per CPU. A call waits (in order, cancellably) for a
    /// slot before anything of it exists; the wait is not part of its time bound.
    pub slots: Option<Arc<nodeexec::RunSlots>>,
    /// Keep the embedder's session and privileges in the child (by default it gets a session
    /// of its own, no new privileges and no capabilities, sandbox or not).
    pub keep_privileges: bool,
    /// Offer `run_command` too (in the workspace tool set), bounded so; `None` (the default)
    /// never offers it. It shares `env` and `sandbox` with `node_process`.
    pub commands: Option<crate::run_command::RunCommandOptions>,
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
    root: Arc<WorkspaceRoot>,
    node: PathBuf,
    timeout: Duration,
    env: Vec<(String, String)>,
    sandbox: Option<nodeexec::Sandbox>,
    slots: Arc<nodeexec::RunSlots>,
    keep_privileges: bool,
}

impl NodeProcessTool {
    /// A node tool over an already captured root; fixes the Node.js executable now.
    pub fn new(
        root: Arc<WorkspaceRoot>,
        options: NodeProcessOptions,
    ) -> Result<Self, crate::BuildError> {
        let node = match options.node {
            Some(path) => canonical_executable(&path),
            None => find_on_path("node"),
        }
        .ok_or(crate::BuildError::NodeNotFound)?;
        let env = passed_env(&options.env);
        // What embedders that died (SIGKILL) left: only names of ours whose owner is gone.
        nodeexec::remove_stale_cgroups();
        remove_stale_scripts(root.dir());
        // Node.js must read its own installation, wherever it lives.
        let sandbox = options.sandbox.map(|mut sandbox| {
            sandbox.allow_installation(&node);
            sandbox
        });
        Ok(Self {
            root,
            node,
            timeout: options.timeout.unwrap_or(DEFAULT_TIMEOUT),
            env,
            sandbox,
            slots: options.slots.unwrap_or_default(),
            keep_privileges: options.keep_privileges,
        })
    }

    /// The Node.js executable this tool runs (canonical).
    pub fn node(&self) -> &Path {
        &self.node
    }

    /// The argument limits, in order: source, count, NUL, each size, total, Windows.
    fn check_limits(&self, input: &NodeInput) -> Result<(), ToolError> {
        let invalid = |k| Err(ToolError::invalid(k));
        if input.source.len() > MAX_SOURCE_BYTES {
            return invalid(ErrorKind::NodeSourceTooLarge);
        }
        if input.arguments.len() > MAX_ARGUMENTS {
            return invalid(ErrorKind::TooManyNodeArguments);
        }
        if input.arguments.iter().any(|a| a.contains('\0')) {
            return invalid(ErrorKind::InvalidNodeProcessInput);
        }
        if input.arguments.iter().any(|a| a.len() > MAX_ARGUMENT_BYTES) {
            return invalid(ErrorKind::NodeArgumentTooLarge);
        }
        if input.arguments.iter().map(String::len).sum::<usize>() > MAX_ARGUMENTS_TOTAL_BYTES {
            return invalid(ErrorKind::NodeArgumentsTooLarge);
        }
        if self.command_line_units(&input.arguments) > MAX_WINDOWS_COMMAND_LINE_UNITS {
            return invalid(ErrorKind::NodeArgumentsTooLarge);
        }
        Ok(())
    }

    /// The UTF-16 length of `"<node>" "<root>/.pify-node-<owner>-<uuid>.cjs" -- <arguments…>`.
    fn command_line_units(&self, arguments: &[String]) -> usize {
        let node = self.node.to_string_lossy();
        let script = self
            .root
            .canonical()
            .join(script_name(uuid::Uuid::nil()))
            .to_string_lossy()
            .into_owned();
        let head = [node.as_ref(), script.as_str(), "--"];
        windows_command_line_units(head.into_iter().chain(arguments.iter().map(String::as_str)))
    }

    /// The process to start for `script` (already checked) and `arguments`. A sandbox adds its
    /// pre-exec steps here.
    fn command(
        &self,
        script: &Script<'_>,
        readable: &File,
        arguments: &[String],
    ) -> Result<nodeexec::Command, CallError> {
        let mut cmd = nodeexec::Command::new(&self.node);
        cmd.arg("--eval")
            .arg(loader(&script.name))
            .arg("--")
            .args(arguments)
            .current_dir(self.root.canonical())
            .timeout(self.timeout)
            .output_cap(OUTPUT_CAP);
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        if self.keep_privileges {
            cmd.new_session(false).drop_privileges(false);
        }
        cmd.pass_fd(readable, SCRIPT_FD)
            .map_err(|e| failed(ErrorKind::NodeProcessStartFailed).with_source(e))?;
        if let Some(sandbox) = &self.sandbox {
            let rules = sandbox_rules(sandbox, &self.root, ErrorKind::NodeProcessStartFailed)
                .map_err(failed)?;
            cmd.sandbox(&rules);
        }
        Ok(cmd)
    }

    /// Run validated arguments.
    pub async fn execute_run(
        &self,
        run: NodeRun,
        cancel: &CancellationToken,
    ) -> Result<NodeOutput, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        // Queued before anything of the call exists; held until its processes are reaped
        // and its script is removed.
        let _slot = self
            .slots
            .acquire(cancel)
            .await
            .map_err(|_| CallError::Cancelled(Cancelled))?;
        self.root.verify()?;
        let (mut script, file) = Script::create(self.root.dir(), &run.source)?;
        // The script's fsync blocks: off the async workers (see the `blocking` module).
        off_reactor(move || {
            file.sync_all()
                .map_err(|_| failed(ErrorKind::NodeProcessFailed))
        })
        .await?;
        let readable = script.open_checked()?;
        self.root.verify()?;
        let cmd = self.command(&script, &readable, &run.arguments)?;
        drop(readable);

        let result = cmd.run(cancel).await;
        let cleanup = script.remove();
        let outcome = result.map_err(|e| match e.kind() {
            ExecErrorKind::Cancelled => CallError::Cancelled(Cancelled),
            ExecErrorKind::TimedOut => failed(ErrorKind::NodeProcessTimeout),
            ExecErrorKind::StartFailed => failed(ErrorKind::NodeProcessStartFailed),
            ExecErrorKind::OutputFailed => failed(ErrorKind::NodeProcessOutputFailed),
            _ => failed(ErrorKind::NodeProcessFailed),
        })?;
        cleanup?;
        Ok(NodeOutput {
            exit_code: outcome.exit_code,
            signal: outcome.signal_name(),
            stdout: outcome.stdout.text,
            stderr: outcome.stderr.text,
            stdout_truncated: outcome.stdout.truncated,
            stderr_truncated: outcome.stderr.truncated,
            timed_out: false,
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

/// The embedder's variables a child gets (`NODE_OPTIONS` never); `run_command` shares this.
pub(crate) fn passed_env(env: &[(String, String)]) -> Vec<(String, String)> {
    env.iter()
        .filter(|(k, _)| !REFUSED_ENV.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// The sandbox's rules for one call, built beneath the root's handle (so they follow the
/// directory the tool captured, whatever its path names now); `run_command` shares this.
/// `NODE_SANDBOX_UNAVAILABLE` where the kernel cannot enforce them, else `other`.
pub(crate) fn sandbox_rules(
    sandbox: &nodeexec::Sandbox,
    root: &WorkspaceRoot,
    other: ErrorKind,
) -> Result<nodeexec::SandboxRules, ErrorKind> {
    sandbox.build(root.dir()).map_err(|e| match e.kind() {
        ExecErrorKind::SandboxUnavailable => ErrorKind::NodeSandboxUnavailable,
        _ => other,
    })
}

/// The `--eval` program: run the source on fd 3 as the CommonJS main module `name`.
fn loader(name: &str) -> String {
    format!(
        "(() => {{\
         const fs = require('fs'), path = require('path'), Module = require('module');\
         let source;\
         try {{ source = fs.readFileSync({SCRIPT_FD}, 'utf8'); }} finally {{ fs.closeSync({SCRIPT_FD}); }}\
         if (source.charCodeAt(0) === 0xFEFF) source = source.slice(1);\
         for (const g of ['require', 'module', 'exports', '__filename', '__dirname']) delete globalThis[g];\
         process.execArgv.length = 0;\
         const filename = path.join(process.cwd(), '{name}');\
         const m = new Module(filename, null);\
         m.filename = filename; m.id = '.';\
         m.paths = Module._nodeModulePaths(path.dirname(filename));\
         process.mainModule = m; Module._cache[filename] = m;\
         m._compile(source, filename);\
         m.loaded = true;\
         }})()"
    )
}

/// An explicit Node.js path, canonicalized, if it is an executable regular file.
pub(crate) fn canonical_executable(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let canonical = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&canonical).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(canonical)
}

/// The first executable `name` on PATH, canonicalized.
pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .find_map(|dir| canonical_executable(&dir.join(name)))
}

/// The name of a call's script: `.pify-node-<pid>-<start time>-<uuid>.cjs`, the owner being
/// this process ([`nodeexec::Owner`]), so that one left by an embedder that was killed can be
/// told from one of a live embedder sharing the workspace.
fn script_name(random: uuid::Uuid) -> String {
    format!(".pify-node-{}-{random}.cjs", nodeexec::Owner::current())
}

/// Remove the scripts, in the workspace root, of embedders that no longer exist: only names
/// this tool makes, only regular files, only when the owner their name holds (pid and start
/// time) is gone. Best effort (nothing to report: it runs when the tool is built).
fn remove_stale_scripts(dir: &Dir) {
    let Ok(entries) = dir.entries() else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some(owner) = stale_script_owner(name) else {
            continue;
        };
        if owner.is_alive() {
            continue;
        }
        if dir.symlink_metadata(name).is_ok_and(|m| m.is_file()) {
            dir.remove_file(name).ok();
        }
    }
}

/// The owner in a script name `.pify-node-<pid>-<start>-<uuid>.cjs`.
fn stale_script_owner(name: &str) -> Option<nodeexec::Owner> {
    let rest = name.strip_prefix(".pify-node-")?.strip_suffix(".cjs")?;
    let mut parts = rest.splitn(3, '-');
    let (pid, start, random) = (parts.next()?, parts.next()?, parts.next()?);
    uuid::Uuid::parse_str(random).ok()?;
    nodeexec::Owner::parse(&format!("{pid}-{start}"))
}

/// The temporary script of one call; removed (by identity) when dropped, unless already
/// removed.
struct Script<'a> {
    dir: &'a Dir,
    name: String,
    temp: Option<Temporary<'a>>,
}

/// How many fresh names are tried for the script (a taken name is never written through).
const SCRIPT_ATTEMPTS: usize = 4;

impl<'a> Script<'a> {
    /// Create `.pify-node-<owner>-<uuid>.cjs` exclusively, mode 0600, write `source`.
    /// The fsync is the caller's (it blocks: the tool runs it off the async workers), on the
    /// file returned beside the script.
    fn create(dir: &'a Dir, source: &str) -> Result<(Self, std::fs::File), CallError> {
        let fresh = || script_name(uuid::Uuid::new_v4()).into();
        let (temp, mut file) = Temporary::create(dir.as_fd(), fresh, SCRIPT_ATTEMPTS)
            .map_err(|e| failed(ErrorKind::NodeProcessFailed).with_source(e))?;
        // From here on the guard removes the script on every path.
        let script = Script {
            dir,
            name: temp.name().to_string_lossy().into_owned(),
            temp: Some(temp),
        };
        file.write_all(source.as_bytes())
            .map_err(|e| failed(ErrorKind::NodeProcessFailed).with_source(e))?;
        Ok((script, file))
    }

    /// Reopen the script read-only by name and check it is the file this call wrote.
    fn open_checked(&self) -> Result<File, CallError> {
        let identity = self
            .temp
            .as_ref()
            .map(Temporary::id)
            .ok_or_else(|| failed(ErrorKind::NodeScriptIdentityChanged))?;
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY);
        let meta = self
            .dir
            .symlink_metadata(&self.name)
            .map_err(|e| failed(ErrorKind::NodeScriptIdentityChanged).with_source(e))?;
        if !meta.is_file() {
            return Err(failed(ErrorKind::NodeScriptNotRegular));
        }
        let file = self.dir.open_with(&self.name, &options).map_err(|e| {
            if FsErrorKind::of(&e) == FsErrorKind::Symlink {
                failed(ErrorKind::NodeScriptNotRegular)
            } else {
                failed(ErrorKind::NodeScriptIdentityChanged)
            }
        })?;
        let opened = file
            .metadata()
            .map_err(|e| failed(ErrorKind::NodeScriptIdentityChanged).with_source(e))?;
        if !opened.is_file() {
            return Err(failed(ErrorKind::NodeScriptNotRegular));
        }
        let named = FileIdentity::at(self.dir, &self.name);
        if FileIdentity::of_fd(&file).ok() != Some(identity) || named.ok() != Some(identity) {
            return Err(failed(ErrorKind::NodeScriptIdentityChanged));
        }
        Ok(file)
    }

    /// Remove the script if its name still names this call's file. A name that is gone (the
    /// script removed itself) or names something else (not ours to remove) is fine.
    fn remove(&mut self) -> Result<(), CallError> {
        match self.temp.take().map(Temporary::remove) {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(_)) => Err(failed(ErrorKind::NodeScriptCleanupFailed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::parse_arguments;

    fn tool() -> (tempfile::TempDir, NodeProcessTool) {
        let tmp = tempfile::tempdir().unwrap();
        let root = Arc::new(WorkspaceRoot::capture(tmp.path()).unwrap());
        (
            tmp,
            NodeProcessTool::new(root, NodeProcessOptions::default()).unwrap(),
        )
    }

    fn check(tool: &NodeProcessTool, json: serde_json::Value) -> Result<NodeRun, ToolError> {
        let raw = serde_json::value::to_raw_value(&json).unwrap();
        let input = parse_arguments::<NodeInput>(&raw, ErrorKind::InvalidNodeProcessInput)?;
        tool.check(input)
    }

    fn token(r: Result<NodeRun, ToolError>) -> &'static str {
        match r {
            Ok(_) => "OK",
            Err(e) => e.kind().map_or("?", ErrorKind::code),
        }
    }

    #[test]
    fn check_shapes() {
        let (_t, tool) = tool();
        let cases = [
            (serde_json::json!({"source": ""}), "OK"),
            (serde_json::json!({"source": "", "arguments": []}), "OK"),
            (
                serde_json::json!({"source": "", "arguments": null}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (
                serde_json::json!({"source": null}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (serde_json::json!({}), "INVALID_NODE_PROCESS_INPUT"),
            (
                serde_json::json!({"source": "", "extra": 1}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (
                serde_json::json!({"source": "", "arguments": [1]}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (
                serde_json::json!({"source": "", "arguments": "a"}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (
                serde_json::json!({"source": "", "arguments": ["a\u{0}b"]}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (serde_json::json!(["source"]), "INVALID_NODE_PROCESS_INPUT"),
        ];
        for (json, want) in cases {
            assert_eq!(token(check(&tool, json.clone())), want, "{json}");
        }
        let raw = serde_json::value::RawValue::from_string(r#"{"source":"","source":""}"#.into())
            .unwrap();
        assert!(parse_arguments::<NodeInput>(&raw, ErrorKind::InvalidNodeProcessInput).is_err());
    }

    #[test]
    fn check_limits_at_n_and_n_plus_one() {
        let (_t, tool) = tool();
        let src = |n: usize| serde_json::json!({"source": "x".repeat(n)});
        assert_eq!(token(check(&tool, src(MAX_SOURCE_BYTES))), "OK");
        assert_eq!(
            token(check(&tool, src(MAX_SOURCE_BYTES + 1))),
            "NODE_SOURCE_TOO_LARGE"
        );
        let args = |v: Vec<String>| serde_json::json!({"source": "", "arguments": v});
        assert_eq!(token(check(&tool, args(vec!["a".into(); 32]))), "OK");
        assert_eq!(
            token(check(&tool, args(vec!["a".into(); 33]))),
            "TOO_MANY_NODE_ARGUMENTS"
        );
        assert_eq!(token(check(&tool, args(vec!["\\\"".repeat(1024)]))), "OK");
        assert_eq!(token(check(&tool, args(vec!["é".repeat(1024)]))), "OK");
        assert_eq!(
            token(check(&tool, args(vec!["a".repeat(2049)]))),
            "NODE_ARGUMENT_TOO_LARGE"
        );
        assert_eq!(token(check(&tool, args(vec!["a".repeat(2048); 4]))), "OK");
        let mut over = vec!["a".repeat(2048); 4];
        over.push("b".into());
        assert_eq!(token(check(&tool, args(over))), "NODE_ARGUMENTS_TOO_LARGE");
    }

    #[test]
    fn command_line_ceiling_is_unreachable_within_byte_limits() {
        let (_t, tool) = tool();
        // The costliest arguments the byte limits allow: backslash-quote pairs.
        let worst = vec!["\\\"".repeat(1024); 4];
        let units = tool.command_line_units(&worst);
        assert!(units < MAX_WINDOWS_COMMAND_LINE_UNITS, "{units}");
        // The count itself: 4 quoted arguments of 1024 pairs, each pair `\\\"` (4 units).
        let head = tool.command_line_units(&[]);
        assert_eq!(units, head + 4 * (1 + 2 + 4 * 1024));
    }

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
        assert_eq!(tool.env, vec![("A".to_owned(), "1".to_owned())]);
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

    fn script_in(tmp: &tempfile::TempDir) -> (Dir, PathBuf) {
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        (dir, tmp.path().to_owned())
    }

    #[test]
    fn script_is_exclusive_private_and_checked() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let (dir, path) = script_in(&tmp);
        let (mut script, _) = Script::create(&dir, "console.log(1)").unwrap();
        assert!(script.name.starts_with(".pify-node-") && script.name.ends_with(".cjs"));
        let meta = std::fs::metadata(path.join(&script.name)).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(path.join(&script.name)).unwrap(),
            "console.log(1)"
        );
        script.open_checked().unwrap();
        script.remove().unwrap();
        assert_eq!(std::fs::read_dir(&path).unwrap().count(), 0);
    }

    #[test]
    fn script_replaced_by_file_is_identity_changed_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, path) = script_in(&tmp);
        let (script, _) = Script::create(&dir, "1").unwrap();
        let name = script.name.clone();
        std::fs::write(path.join("other"), "evil").unwrap();
        std::fs::rename(path.join("other"), path.join(&name)).unwrap();
        let err = script.open_checked().unwrap_err();
        assert_eq!(err, failed(ErrorKind::NodeScriptIdentityChanged));
        drop(script);
        // Not ours: the guard leaves the replacement alone.
        assert_eq!(std::fs::read_to_string(path.join(&name)).unwrap(), "evil");
    }

    #[test]
    fn script_replaced_by_symlink_or_directory_is_not_regular() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, path) = script_in(&tmp);
        let (script, _) = Script::create(&dir, "1").unwrap();
        std::fs::write(path.join("target"), "x").unwrap();
        std::fs::remove_file(path.join(&script.name)).unwrap();
        std::os::unix::fs::symlink(path.join("target"), path.join(&script.name)).unwrap();
        assert_eq!(
            script.open_checked().unwrap_err(),
            failed(ErrorKind::NodeScriptNotRegular)
        );
        std::fs::remove_file(path.join(&script.name)).unwrap();
        std::fs::create_dir(path.join(&script.name)).unwrap();
        assert_eq!(
            script.open_checked().unwrap_err(),
            failed(ErrorKind::NodeScriptNotRegular)
        );
        let name = script.name.clone();
        drop(script);
        assert!(
            path.join(&name).is_dir(),
            "an attacker's directory is never removed"
        );
    }

    #[test]
    fn stale_scripts_of_dead_owners_only_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let me = script_name(uuid::Uuid::new_v4());
        let dead = format!(".pify-node-4194305-1-{}.cjs", uuid::Uuid::new_v4());
        let reused = format!(
            ".pify-node-{}-1-{}.cjs",
            std::process::id(),
            uuid::Uuid::new_v4()
        );
        let old = format!(".pify-node-{}.cjs", uuid::Uuid::new_v4());
        let not_uuid = ".pify-node-4194305-1-x.cjs";
        for name in [&me, &dead, &reused, &old, &not_uuid.to_owned()] {
            std::fs::write(tmp.path().join(name), "x").unwrap();
        }
        let dead_dir = format!(".pify-node-4194305-1-{}.cjs", uuid::Uuid::new_v4());
        std::fs::create_dir(tmp.path().join(&dead_dir)).unwrap();
        remove_stale_scripts(&dir);
        let left = |n: &str| tmp.path().join(n).exists();
        assert!(left(&me), "a live owner's script is kept");
        assert!(!left(&dead), "a dead owner's script is removed");
        assert!(
            !left(&reused),
            "our pid with another start time is another, dead, owner"
        );
        assert!(
            left(&old) && left(not_uuid),
            "names without an owner are not ours to judge"
        );
        assert!(left(&dead_dir), "only regular files");
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
        };
        assert_eq!(
            serde_json::to_value(&out).unwrap().to_string(),
            r#"{"exitCode":0,"signal":null,"stdout":"o","stderr":"e","stdoutTruncated":false,"stderrTruncated":true,"timedOut":false}"#
        );
    }
}
