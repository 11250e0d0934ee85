//! What every tool of one set shares, and how the set is built.
//!
//! A [`Workspace`] is the captured root with the set's deny and protected lists: every tool
//! of a set holds the same one (the factories make it once, [`crate::factory`]), so no tool
//! carries the lists as fields of its own or can be built without them. The set's options,
//! [`ToolSetOptions`], hold what the embedder decides for the whole set (the lists, the
//! children's environment, sandbox, run slots and network, the command tools), with what
//! only `node_process` needs nested ([`NodeOptions`]) and what only the command tools need
//! in [`RunCommandOptions`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use confine_rootid::{RootError, WorkspaceRoot};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{CallError, ErrorKind, failed};

use crate::deny::DeniedPaths;
use crate::protect::ProtectedPaths;

/// The captured root and the set's lists, shared by every tool of one set.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    /// The root, captured once for the set.
    pub(crate) root: Arc<WorkspaceRoot>,
    /// What no tool of the set reads, lists or changes (`PATH_DENIED`).
    pub(crate) denied: Arc<DeniedPaths>,
    /// What no tool of the set changes (`PATH_PROTECTED`).
    pub(crate) protected: Arc<ProtectedPaths>,
    /// Whether the root is on a file system of this machine's own, where brief work runs
    /// inline (see [`crate::blocking::brief`]); judged once, when the set is built.
    pub(crate) local: bool,
}

impl Workspace {
    /// `root` with the lists of `options`.
    pub(crate) fn new(root: Arc<WorkspaceRoot>, options: &ToolSetOptions) -> Self {
        let local = crate::blocking::local_filesystem(root.dir());
        Self {
            root,
            denied: options.denied.clone(),
            protected: options.protected.clone(),
            local,
        }
    }

    /// `root` with the default lists: nothing denied, [`crate::DEFAULT_PROTECTED`] protected.
    #[cfg(test)]
    pub(crate) fn with_defaults(root: Arc<WorkspaceRoot>) -> Self {
        Self::new(root, &ToolSetOptions::default())
    }
}

/// How a tool set is built (by the embedder; the model cannot change it): the options every
/// factory takes, for the whole set.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ToolSetOptions {
    /// What only `node_process` needs: its executable and its time bound.
    pub node: NodeOptions,
    /// Variables to set in the children of `node_process` and `run_command`, beside PATH,
    /// LANG, LC_* and TZ taken from the host. `NODE_OPTIONS` is dropped.
    pub env: Vec<(String, String)>,
    /// The opt-in kernel sandbox of the children (Linux Landlock, seccomp and resource
    /// limits, see [`confine_nodeexec::Sandbox`]), with the workspace root as the writable
    /// tree; the tools add the Node.js installation to what it may read. More places to read
    /// or write are added on the policy itself (`Sandbox::allow_read`,
    /// `Sandbox::allow_write`). `None` runs the children unconfined. Where the kernel cannot
    /// enforce it a call fails with `NODE_SANDBOX_UNAVAILABLE` and nothing runs.
    pub sandbox: Option<confine_nodeexec::Sandbox>,
    /// The bound on concurrent runs the set's process tools count against: share one `Arc`
    /// between every set of an embedder that starts processes, so the bound is the
    /// embedder's. `None`: a bound of the set's own, one run per CPU. A call waits (in order,
    /// cancellably) for a slot before anything of it exists; the wait is not part of its time
    /// bound.
    pub slots: Option<Arc<confine_nodeexec::RunSlots>>,
    /// Keep the embedder's session and privileges in the children of `node_process` and
    /// `run_command` (by default each gets a session of its own, no new privileges and no
    /// capabilities, sandbox or not).
    pub keep_privileges: bool,
    /// Offer `run_command` and the job tools too (in the workspace tool set), bounded so;
    /// `None` (the default) never offers them. They share `env` and `sandbox` with
    /// `node_process`.
    pub commands: Option<RunCommandOptions>,
    /// The protected paths (default: [`crate::DEFAULT_PROTECTED`]): the write tools of the
    /// set refuse them (`PATH_PROTECTED`), and under [`sandbox`](Self::sandbox) the children
    /// of `node_process` and `run_command` find those that exist read-only (see
    /// `docs/SECURITY.md`).
    pub protected: Arc<ProtectedPaths>,
    /// The denied paths (default: none): every file tool of the set refuses them
    /// (`PATH_DENIED`), the walking tools leave them out, and under
    /// [`sandbox`](Self::sandbox) the children of `node_process` and `run_command` find those
    /// that exist at a run's start covered (see `docs/SECURITY.md`).
    pub denied: Arc<DeniedPaths>,
    /// The network policy (default: none, the children keep the host's network): while
    /// set, the children of `node_process` and `run_command` reach the network only through
    /// its proxy, and their records gain `network` (see [`crate::NetworkPolicy`]). Where it
    /// is unavailable a call fails with `NETWORK_POLICY_UNAVAILABLE` and nothing runs.
    pub network: Option<Arc<crate::NetworkPolicy>>,
    /// Checkpoints (default: none): a set that changes the workspace records it before each
    /// changing call and offers checkpoint_list, checkpoint_diff and checkpoint_restore (see
    /// [`crate::CheckpointOptions`]).
    pub checkpoints: Option<CheckpointOptions>,
}

/// What only `node_process` needs of a set's options.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct NodeOptions {
    /// The Node.js executable; `None` finds `node` on PATH once, when the tool is built.
    /// Either way it is canonicalized then.
    pub executable: Option<PathBuf>,
    /// The time bound, covering exit and both pipes closing; `None` is 500 ms.
    pub timeout: Option<Duration>,
}

/// How `run_command` is bounded (by the embedder; the model can only ask for less time, or
/// more up to `max_timeout`). The environment and the sandbox are those of the set
/// ([`ToolSetOptions`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RunCommandOptions {
    /// The time bound when a call names none; `None` is 120 s.
    pub timeout: Option<Duration>,
    /// The most a call may ask for; `None` is 600 s. A default above it is lowered to it.
    pub max_timeout: Option<Duration>,
    /// The most background jobs running at once (see [`crate::JobTable`]); `None` is 4. Unused when
    /// [`job_slots`](Self::job_slots) is given (its bound is the one counted).
    pub max_jobs: Option<usize>,
    /// The bound on running jobs this set counts against: give every set of one embedder
    /// (each session of a server, say) the same `Arc` so the bound is the embedder's, not
    /// each set's. `None`: a bound of the set's own, of `max_jobs`. Each set still sees only
    /// its own jobs ([`crate::JobTable`]).
    pub job_slots: Option<Arc<JobSlots>>,
    /// A job's time bound when the call names none; `None` is one hour. Lowered to
    /// `max_timeout` where above it.
    pub job_timeout: Option<Duration>,
}

/// Where the checkpoints of a set go and how many are kept.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct CheckpointOptions {
    /// The store's directory; `None`: under the user's state directory, keyed by the root
    /// (see [`confine_checkpoint::default_dir`]). Never beneath the root.
    pub dir: Option<PathBuf>,
    /// The most checkpoints kept (default 100).
    pub max_checkpoints: Option<usize>,
    /// The most bytes the store keeps (default 1 GiB).
    pub max_bytes: Option<u64>,
    /// Record what `.gitignore` files ignore too.
    pub include_ignored: bool,
}

impl CheckpointOptions {
    /// The defaults: the user's state directory, 100 checkpoints, 1 GiB.
    pub fn new() -> Self {
        Self::default()
    }
}

/// The default most jobs running at once per server.
pub const DEFAULT_MAX_JOBS: usize = 4;

/// The bound on background jobs running at once, shared by every [`JobTable`](crate::JobTable)
/// built with the same `Arc` ([`RunCommandOptions::job_slots`]): one
/// per embedder (an MCP server and all its sessions), so the bound is the embedder's, not a
/// client's. It also numbers the jobs, so that no two tables sharing it hand out the same id.
/// It holds no job: which jobs a client may see stays with its own table.
#[derive(Debug)]
pub struct JobSlots {
    max_jobs: usize,
    running: Arc<Semaphore>,
    next: AtomicU64,
}

impl JobSlots {
    /// A bound of `max_jobs` jobs running at once (at least one).
    pub fn new(max_jobs: usize) -> Self {
        let max_jobs = max_jobs.clamp(1, Semaphore::MAX_PERMITS);
        Self {
            max_jobs,
            running: Arc::new(Semaphore::new(max_jobs)),
            next: AtomicU64::new(0),
        }
    }

    /// The most jobs running at once.
    pub fn max_jobs(&self) -> usize {
        self.max_jobs
    }

    /// How many jobs hold a slot now (running, or ended and not yet reaped).
    pub fn running(&self) -> usize {
        self.max_jobs - self.running.available_permits()
    }

    /// A slot for one more job, or `JOB_LIMIT_REACHED`; and the job's id.
    pub(crate) fn take(&self) -> Result<(OwnedSemaphorePermit, String), CallError> {
        let slot = self
            .running
            .clone()
            .try_acquire_owned()
            .map_err(|_| failed(ErrorKind::JobLimitReached))?;
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        Ok((slot, format!("job-{n}")))
    }
}

impl Default for JobSlots {
    /// [`DEFAULT_MAX_JOBS`].
    fn default() -> Self {
        Self::new(DEFAULT_MAX_JOBS)
    }
}

/// Why a tool could not be built. A Rust error, never a tool record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The root cannot be used: `INVALID_WORKSPACE_ROOT`, `WORKSPACE_ROOT_NOT_FOUND` or
    /// `WORKSPACE_ROOT_NOT_DIRECTORY`.
    #[error(transparent)]
    Root(#[from] RootError),
    /// The Node.js executable could not be found or canonicalized.
    #[error("NODE_EXECUTABLE_NOT_FOUND")]
    NodeNotFound,
    /// The checkpoint store cannot be used (it lies beneath the root, or cannot be made).
    #[error("CHECKPOINT_STORE_UNUSABLE")]
    Checkpoints(#[source] confine_checkpoint::Error),
}

impl BuildError {
    /// The stable token.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Root(e) => e.code(),
            Self::NodeNotFound => "NODE_EXECUTABLE_NOT_FOUND",
            Self::Checkpoints(_) => "CHECKPOINT_STORE_UNUSABLE",
        }
    }
}
