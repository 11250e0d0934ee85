//! What `node_process` and `run_command` share of how a tool's child starts and ends: the
//! embedder's variables it gets, the sandbox's rules built beneath the root, the shared bound
//! on concurrent runs, the working directory, and how a failed run becomes a tool error.
//! (Each tool keeps its own arguments, program and success record.)

use std::path::{Path, PathBuf};
use std::sync::Arc;

use confine_nodeexec::ErrorKind as ExecErrorKind;
use confine_rootid::WorkspaceRoot;
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::workspace::{NodeOptions, ToolSetOptions, Workspace};

/// Variables an embedder cannot pass either.
const REFUSED_ENV: &[&str] = &["NODE_OPTIONS"];

/// How a tool's children start: in the workspace root, with the embedder's variables and the
/// opt-in sandbox, each run holding one of the embedder's run slots.
#[derive(Debug, Clone)]
pub(crate) struct Children {
    root: Arc<WorkspaceRoot>,
    env: Vec<(String, String)>,
    sandbox: Option<confine_nodeexec::Sandbox>,
    /// What the sandbox keeps read-only beneath the root (those that exist at each run).
    protected: Arc<crate::ProtectedPaths>,
    /// What the sandbox covers beneath the root (those that exist at each run).
    denied: Arc<crate::DeniedPaths>,
    /// Whether the root held a `.git` when these children's tool was built: the user's
    /// repository, whose protected paths bind children (see
    /// [`ProtectedPaths::sandbox_plan`](crate::ProtectedPaths)).
    repository: bool,
    slots: Arc<confine_nodeexec::RunSlots>,
    /// Keep the embedder's session and privileges (the embedder's opt-out).
    keep_privileges: bool,
    /// The network policy, while it is on.
    network: Option<Arc<crate::NetworkPolicy>>,
}

/// The tool's error token for each way a run can fail (a cancellation is never a token).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunErrors {
    /// The program could not be started (or the sandbox's rules could not be built).
    pub start: ErrorKind,
    /// Its output could not be read.
    pub output: ErrorKind,
    /// It ran out of time (for a tool where that is an error).
    pub timeout: ErrorKind,
    /// Anything else.
    pub other: ErrorKind,
}

impl Children {
    /// The children of a tool over `root` built with `options`; `node`, the Node.js executable
    /// when known, is what the sandbox must let them read (its whole installation).
    pub(crate) fn new(ws: &Workspace, options: &ToolSetOptions, node: Option<&Path>) -> Self {
        let sandbox = options.sandbox.clone().map(|mut sandbox| {
            if let Some(node) = node {
                sandbox.allow_installation(node);
            }
            sandbox
        });
        let repository =
            confine_beneath::FileId::at(ws.root.dir(), crate::protect::REPOSITORY_ENTRY).is_ok();
        Self {
            root: ws.root.clone(),
            repository,
            env: passed_env(&options.env),
            sandbox,
            protected: ws.protected.clone(),
            denied: ws.denied.clone(),
            slots: options.slots.clone().unwrap_or_default(),
            keep_privileges: options.keep_privileges,
            network: options.network.clone(),
        }
    }

    /// The workspace root.
    pub(crate) fn root(&self) -> &WorkspaceRoot {
        &self.root
    }

    /// The workspace root, shared.
    pub(crate) fn root_arc(&self) -> &Arc<WorkspaceRoot> {
        &self.root
    }

    /// The variables the embedder passes (never `NODE_OPTIONS`).
    #[cfg(test)]
    pub(crate) fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Wait for a run slot (in order, cancellably) before anything of the call exists, then
    /// check the root is still the directory captured. The slot is held until the run's
    /// processes are reaped and its temporaries removed.
    pub(crate) async fn admit(
        &self,
        cancel: &CancellationToken,
    ) -> Result<confine_nodeexec::RunSlot, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let slot = self
            .slots
            .acquire(cancel)
            .await
            .map_err(|_| CallError::Cancelled(Cancelled))?;
        self.root.verify()?;
        Ok(slot)
    }

    /// `program` in the canonical root with the embedder's variables (and, where the embedder
    /// opted out, its session and privileges); the caller adds its arguments and bounds, then
    /// [`Children::confine`] last.
    pub(crate) fn command(&self, program: &Path) -> confine_nodeexec::Command {
        let mut cmd = confine_nodeexec::Command::new(program);
        cmd.current_dir(self.root.canonical());
        if self.keep_privileges {
            cmd.new_session(false).drop_privileges(false);
        }
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        cmd
    }

    /// Add the network policy and the sandbox's rules to `cmd` where the embedder asked for
    /// them: `NETWORK_POLICY_UNAVAILABLE` where no mechanism enforces the policy,
    /// `NODE_SANDBOX_UNAVAILABLE` where the kernel cannot enforce the sandbox, else
    /// `start_failed` when its rules cannot be built. Returns the run's share of the network
    /// policy (its decisions go into the record) and the watch on protected paths that do not
    /// exist yet, both to be kept until the run's processes are reaped.
    pub(crate) fn confine(
        &self,
        cmd: &mut confine_nodeexec::Command,
        start_failed: ErrorKind,
    ) -> Result<Confined, CallError> {
        let network = match &self.network {
            None => None,
            Some(policy) => match policy.run() {
                Some(run) => Some(run),
                None => {
                    return Err(CallError::Failed(ToolError::failed(
                        ErrorKind::NetworkPolicyUnavailable,
                    )));
                }
            },
        };
        if let Some(run) = &network {
            for (name, value) in run.ticket.env() {
                cmd.env(name, value);
            }
            if self.sandbox.is_none() {
                cmd.network(&run.network);
            }
        }
        let mut watch = None;
        if let Some(sandbox) = &self.sandbox {
            // The protected paths that exist now, read-only for the child (a mount namespace
            // of its own; where none can be made the start is NODE_SANDBOX_UNAVAILABLE), and
            // those that do not, watched for the run's life.
            let plan = self
                .protected
                .sandbox_plan(self.root.dir(), self.repository)
                .map_err(|_| failed(ErrorKind::NodeSandboxUnavailable))?;
            // The denied entries that exist now, covered for the child (the same namespace;
            // beyond the walk's bounds the start is NODE_SANDBOX_UNAVAILABLE: never a child
            // with a denied entry left readable).
            let hidden = self
                .denied
                .existing_beneath(self.root.dir())
                .map_err(|_| failed(ErrorKind::NodeSandboxUnavailable))?;
            // Mounts name their targets by path: the root's canonical path joined with what the
            // walks found beneath its descriptor.
            let root = self.root.canonical();
            let mut sandbox = sandbox.clone();
            if let Some(dirs) = sandbox.private() {
                // The server's private home, not the user's (unreadable under the sandbox).
                cmd.env("HOME", dirs.home());
                // The toolchains of the user's home where they are; the private cargo home.
                for (name, value) in &dirs.tools().env {
                    if !self.env.iter().any(|(n, _)| n == name) {
                        cmd.env(name, value);
                    }
                }
            }
            if let Some(run) = &network {
                // The sandbox then adds the network to the command itself.
                sandbox.network(&run.network);
            }
            for rel in plan.read_only {
                sandbox.read_only(root.join(rel));
            }
            for rel in hidden {
                sandbox.hide(root.join(rel));
            }
            // Built beneath the root's handle, so they follow the directory the tool
            // captured, whatever its path names now.
            let rules = sandbox.build(self.root.dir()).map_err(|e| {
                let kind = match e.kind() {
                    ExecErrorKind::SandboxUnavailable => ErrorKind::NodeSandboxUnavailable,
                    _ => start_failed,
                };
                CallError::Failed(ToolError::failed(kind).with_source(e))
            })?;
            cmd.sandbox(&rules);
            // Watched before the child exists; without a watch, no child.
            if !plan.watched.is_empty() {
                watch = Some(
                    crate::protect_watch::ProtectWatch::start(self.root.clone(), plan.watched)
                        .map_err(|e| {
                            CallError::Failed(
                                ToolError::failed(ErrorKind::NodeSandboxUnavailable).with_source(e),
                            )
                        })?,
                );
            }
        }
        Ok(Confined { network, watch })
    }
}

/// What a confined run keeps until its processes are reaped.
#[derive(Debug, Default)]
pub(crate) struct Confined {
    /// The run's share of the network policy, while it is on.
    pub network: Option<crate::network::RunNetwork>,
    /// The watch on protected paths that did not exist at the start (sandboxed runs);
    /// dropping it sweeps them once more.
    pub watch: Option<crate::protect_watch::ProtectWatch>,
}

impl RunErrors {
    /// A failed run as this tool's error.
    pub(crate) fn of(&self, e: confine_nodeexec::Error) -> CallError {
        let kind = match e.kind() {
            ExecErrorKind::Cancelled => return CallError::Cancelled(Cancelled),
            ExecErrorKind::TimedOut => self.timeout,
            ExecErrorKind::StartFailed => self.start,
            // Found only at the start (read-only paths and no mount namespace to be had).
            ExecErrorKind::SandboxUnavailable => ErrorKind::NodeSandboxUnavailable,
            ExecErrorKind::NetworkPolicyUnavailable => ErrorKind::NetworkPolicyUnavailable,
            ExecErrorKind::OutputFailed => self.output,
            _ => self.other,
        };
        CallError::Failed(ToolError::failed(kind).with_source(e))
    }
}

/// The embedder's variables a child gets (`NODE_OPTIONS` never).
fn passed_env(env: &[(String, String)]) -> Vec<(String, String)> {
    env.iter()
        .filter(|(k, _)| !REFUSED_ENV.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// The Node.js executable of `options`: the one given, canonicalized, if it is an executable
/// regular file; else the first `node` on PATH.
pub(crate) fn node_executable(options: &NodeOptions) -> Option<PathBuf> {
    match &options.executable {
        Some(path) => canonical_executable(path),
        None => confine_nodeexec::find_on_path("node", std::env::var_os("PATH")?)
            .and_then(|found| canonical_executable(&found)),
    }
}

/// `path`, canonicalized, if it is an executable regular file.
fn canonical_executable(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let canonical = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&canonical).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(canonical)
}
