//! Options shared by the subcommands that serve tools.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use confine_tools::{BuildError, SelectError, ToolRegistry, ToolSetOptions};

/// Where the tools work and how node_process is bounded.
#[derive(Debug, Clone, clap::Args)]
pub struct ToolArgs {
    /// The workspace root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
    /// The Node.js executable (default: `node` found on PATH, canonicalized once).
    #[arg(long, value_name = "PATH")]
    pub node: Option<PathBuf>,
    /// The node_process time bound in milliseconds (default 500).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub timeout_ms: Option<u64>,
    /// At most N node_process runs at once (default: the number of CPUs); later calls wait
    /// in order, and can be cancelled while they wait.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_processes: Option<u64>,
    /// Accepted for compatibility: node_process, run_command and jobs run sandboxed unless
    /// --no-sandbox is given.
    #[arg(long, conflicts_with = "no_sandbox")]
    pub sandbox: bool,
    /// Run node_process, run_command and jobs without the kernel sandbox, with the server's
    /// whole access to files (the default confines them: a mount namespace, Landlock and
    /// seccomp; read only the root, the toolchains they run, Node.js's installation and the
    /// system's non-secret files; write only beneath the root and a private /tmp, /dev/shm
    /// and HOME of the server's; change modes and times only there; no set-user-ID or
    /// set-group-ID bit anywhere; no Unix, raw or netlink socket, and TCP only to the network
    /// policy's proxy or the run's own loopback, see --allow-net; 4 GiB of address space, 1024
    /// open files). Where this machine cannot sandbox, a server offering those tools refuses
    /// to start without this flag.
    #[arg(long)]
    pub no_sandbox: bool,
    /// The sandbox's oldest Landlock ABI accepted (default 4; 6 also insists on the signal
    /// and abstract-socket scopes).
    #[arg(long, value_name = "N", conflicts_with = "no_sandbox", value_parser = clap::value_parser!(u32).range(4..))]
    pub sandbox_min_abi: Option<u32>,
    /// Also let sandboxed children read (and execute) beneath PATH, a directory or a file
    /// that must exist. Repeatable.
    #[arg(long, value_name = "PATH", conflicts_with = "no_sandbox", value_parser = existing_path)]
    pub sandbox_read: Vec<PathBuf>,
    /// Also let sandboxed children write beneath PATH, a directory or a file that must
    /// exist. Repeatable.
    #[arg(long, value_name = "PATH", conflicts_with = "no_sandbox", value_parser = existing_path)]
    pub sandbox_write: Vec<PathBuf>,
    /// The sandboxed children's HOME, an existing directory kept after the server ends (its
    /// .gitconfig is written with the user's git identity if it has none). Default: a
    /// private directory of the server's, removed with it.
    #[arg(long, value_name = "DIR", conflicts_with = "no_sandbox", value_parser = existing_path)]
    pub sandbox_home: Option<PathBuf>,
    /// The bound of the sandboxed children's private /tmp and /dev/shm together (one tmpfs
    /// of the server's, shared by its runs and jobs, gone with it): bytes, or a number with
    /// K, M or G (1024-based). A write past it fails with "No space left on device". Default:
    /// a quarter of the machine's memory, at most 2G and at least 64M.
    #[arg(long, value_name = "SIZE", conflicts_with = "no_sandbox", value_parser = size)]
    pub sandbox_tmp_size: Option<u64>,
    /// Offer only the tools that change nothing: read_file, read_lines, read_media,
    /// list_directory, find_files, grep and file_info.
    #[arg(long)]
    pub read_only: bool,
    /// Offer only these tools (comma-separated names, for example `read_file,grep`); with
    /// --read-only each must be read-only.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// Also offer run_command: shell commands (/bin/sh -c) in the root, for a project's tests
    /// and builds, under the same containment, environment and sandbox as node_process.
    /// Never with --read-only.
    #[arg(long, conflicts_with = "read_only")]
    pub allow_commands: bool,
    /// run_command's time bound in milliseconds when a call names none (default 120000).
    #[arg(long, value_name = "N", requires = "allow_commands", value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub command_timeout_ms: Option<u64>,
    /// The most milliseconds a run_command call may ask for (default 600000); also the most
    /// a background job may run.
    #[arg(long, value_name = "N", requires = "allow_commands", value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub command_max_timeout_ms: Option<u64>,
    /// At most N background jobs (run_command with background: true) running at once
    /// (default 4); one more fails with JOB_LIMIT_REACHED. Jobs do not take the slots of
    /// --max-processes.
    #[arg(long, value_name = "N", requires = "allow_commands", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub max_jobs: Option<u64>,
    /// A background job's time bound in milliseconds when the call names none (default
    /// 3600000, lowered to --command-max-timeout-ms).
    #[arg(long, value_name = "N", requires = "allow_commands", value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub job_timeout_ms: Option<u64>,
    /// Pass one more variable to node_process and run_command children: `NAME` takes this
    /// process's value (if it has one), `NAME=VALUE` sets it. Repeatable. NODE_OPTIONS is
    /// never passed.
    #[arg(long = "env", value_name = "NAME[=VALUE]", value_parser = env_entry)]
    pub env: Vec<EnvEntry>,
    /// Also protect paths matching GLOB (gitignore-style, relative to the root; repeatable):
    /// the write tools refuse them with PATH_PROTECTED, and sandboxed children find
    /// those that exist read-only (and cannot create those that do not). The defaults are
    /// what the user's git runs or obeys outside any sandbox (.git/config, config.worktree,
    /// commondir, hooks, info, modules' config, hooks and commondir, worktrees, the .git
    /// entry itself, the root's HEAD; for the tools, every .git below the root and what lies
    /// beneath it) and what editors run (.vscode, .idea, .claude, .mcp.json, .gitmodules,
    /// .envrc).
    #[arg(long = "protect", value_name = "GLOB", value_parser = protect_pattern)]
    pub protect: Vec<String>,
    /// Drop the default protected paths (see --protect); --protect patterns still
    /// apply.
    #[arg(long)]
    pub unprotect_defaults: bool,
    /// Deny paths matching GLOB (gitignore-style, relative to the root; repeatable, at most
    /// 256): every file tool refuses them with PATH_DENIED, list_directory, find_files and
    /// grep leave them out (counted in `denied`), and sandboxed children find those
    /// that exist covered (unreadable).
    #[arg(long = "deny", value_name = "GLOB", value_parser = deny_pattern)]
    pub deny: Vec<String>,
    /// Let the children of node_process and run_command reach ENTRY, and nothing else,
    /// through the server's own proxy (repeatable): HOST, HOST:PORT, *.DOMAIN,
    /// *.DOMAIN:PORT, an IP literal with or without a port, or a preset (@npm, @crates,
    /// @pypi, @github: the hosts that client is configured to use). No port means 443 and
    /// 80. The policy is on by default (the sandbox) and with --allow-net; with --no-sandbox
    /// and no --allow-net, children keep the host's network.
    #[arg(long = "allow-net", value_name = "ENTRY")]
    pub allow_net: Vec<String>,
    /// Keep this server dumpable: debuggers, core dumps and other processes of the same user
    /// may then read its memory, environment and `/proc/<pid>/fd` (children started with
    /// --no-sandbox included). Off by default; for debugging and for tests that inspect the
    /// server from outside.
    #[arg(long)]
    pub keep_dumpable: bool,
    /// Turn checkpoints off: no checkpoint is taken and checkpoint_list, checkpoint_diff and
    /// checkpoint_restore are not offered.
    #[arg(long)]
    pub no_checkpoints: bool,
    /// Keep at most N checkpoints (default 100), the oldest dropped first.
    #[arg(long, value_name = "N", conflicts_with = "no_checkpoints", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub checkpoints: Option<u64>,
    /// Keep at most N bytes of checkpoints (default 1073741824), the oldest dropped first.
    #[arg(long, value_name = "N", conflicts_with = "no_checkpoints", value_parser = clap::value_parser!(u64).range(1..))]
    pub checkpoint_bytes: Option<u64>,
    /// The checkpoint store (default: $XDG_STATE_HOME/confine/checkpoints/<root key>, else
    /// under $HOME/.local/state); never beneath the root. Sandboxed children cannot
    /// reach it.
    #[arg(long, value_name = "DIR", conflicts_with = "no_checkpoints")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Record gitignored trees (node_modules/, target/, …) in checkpoints too.
    #[arg(long, conflicts_with = "no_checkpoints")]
    pub checkpoint_ignored: bool,
}

/// One `--env` entry: a name and the value to set (`None`: this process's value).
#[derive(Debug, Clone)]
pub struct EnvEntry {
    name: String,
    value: Option<String>,
}

/// Parse `NAME` or `NAME=VALUE`: a non-empty name without NUL.
fn env_entry(text: &str) -> Result<EnvEntry, String> {
    let (name, value) = match text.split_once('=') {
        Some((name, value)) => (name, Some(value.to_owned())),
        None => (text, None),
    };
    if name.is_empty() || text.contains('\0') {
        return Err(format!("{text:?} is not NAME or NAME=VALUE"));
    }
    Ok(EnvEntry {
        name: name.to_owned(),
        value,
    })
}

/// The signals that end `confine mcp` and `confine call` the way SIGTERM does: running calls
/// are cancelled (their processes killed and reaped, their scripts removed) before exit.
/// Every signal whose default action would end the process at once, leaving that undone, and
/// that a person or a supervisor sends: SIGHUP (the terminal went away), SIGINT, SIGQUIT,
/// SIGTERM, SIGUSR1, SIGUSR2 and SIGALRM. (SIGKILL cannot be caught: the waiter of each run
/// ends it then.)
pub async fn ending_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let kinds = [
        SignalKind::hangup(),
        SignalKind::interrupt(),
        SignalKind::quit(),
        SignalKind::terminate(),
        SignalKind::user_defined1(),
        SignalKind::user_defined2(),
        SignalKind::alarm(),
    ];
    // A signal that cannot be watched is never reported.
    let mut watched: Vec<_> = kinds.into_iter().filter_map(|k| signal(k).ok()).collect();
    if watched.is_empty() {
        return std::future::pending().await;
    }
    let any = watched.iter_mut().map(|s| Box::pin(s.recv()));
    futures_lite_select(any).await;
}

/// The first of `futures` to complete.
async fn futures_lite_select<F: std::future::Future + Unpin>(futures: impl Iterator<Item = F>) {
    let mut futures: Vec<F> = futures.collect();
    std::future::poll_fn(move |cx| {
        for f in &mut futures {
            if std::pin::Pin::new(f).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await;
}

/// Make this process not dumpable (see [`confine_nodeexec::hide_embedder_environment`]), unless
/// `--keep-dumpable` asked otherwise.
pub fn hide_environment(args: &ToolArgs) {
    if !args.keep_dumpable {
        confine_nodeexec::hide_embedder_environment();
    }
}

/// One `--protect` pattern, checked alone (the count is checked with the list).
pub fn protect_pattern(text: &str) -> Result<String, String> {
    confine_tools::ProtectedPaths::new(false, &[text])
        .map(|_| text.to_owned())
        .map_err(|e| e.to_string())
}

/// One `--deny` pattern, checked alone (the count is checked with the list).
pub fn deny_pattern(text: &str) -> Result<String, String> {
    confine_tools::DeniedPaths::new(&[text])
        .map(|_| text.to_owned())
        .map_err(|e| e.to_string())
}

/// A path that exists, canonicalized now (the sandbox opens it at each call).
/// A size: bytes, or a number with a K, M or G suffix (1024-based); at least one byte.
fn size(text: &str) -> Result<u64, String> {
    let (digits, shift) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 10),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 20),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let bad = || format!("{text}: not a size (bytes, or a number with K, M or G)");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    match n.checked_mul(1 << shift) {
        Some(0) => Err(format!("{text}: the size must be at least one byte")),
        Some(bytes) => Ok(bytes),
        None => Err(bad()),
    }
}

fn existing_path(path: &str) -> Result<PathBuf, String> {
    std::fs::canonicalize(path).map_err(|e| format!("{path}: {e}"))
}

/// What the registries of one server share: the bound on concurrent runs, the bound on
/// running background jobs (`--max-jobs` is per server; each registry keeps its own job
/// table, so a session sees only its own jobs) and the network policy (one proxy and one
/// children's loopback per server).
#[derive(Clone, Debug)]
pub struct Shared {
    /// The run slots.
    pub slots: std::sync::Arc<confine_nodeexec::RunSlots>,
    /// The job slots.
    pub job_slots: std::sync::Arc<confine_tools::JobSlots>,
    /// The network policy, while it is on.
    pub network: Option<std::sync::Arc<confine_tools::NetworkPolicy>>,
    /// The sandbox's private directories (`/tmp`, `/dev/shm`, `HOME`), while it is on.
    pub private: Option<std::sync::Arc<confine_nodeexec::PrivateDirs>>,
}

/// The variable that makes the network policy use a weaker mechanism than the best this
/// system offers (`user-namespace` or `landlock`; for tests and diagnosis: it can never make
/// the policy stronger than the system allows, nor turn it off).
pub const NETWORK_MECHANISM_VAR: &str = "CONFINE_NETWORK_MECHANISM";

impl ToolArgs {
    /// Whether the tools offered run processes (node_process, run_command, jobs).
    pub fn offers_processes(&self) -> bool {
        match (&self.tools, self.read_only) {
            (None, read_only) => !read_only,
            (Some(names), _) => names.iter().map(|n| n.trim()).any(|n| {
                n == "node_process"
                    || (self.allow_commands && confine_tools::COMMAND_TOOLS.contains(&n))
            }),
        }
    }

    /// Whether processes run sandboxed: unless `--no-sandbox`, where processes run at all.
    pub fn sandboxed(&self) -> bool {
        !self.no_sandbox && self.offers_processes()
    }

    /// Whether the network policy is on (the sandbox, or `--allow-net`).
    pub fn network_policy_on(&self) -> bool {
        self.sandboxed() || !self.allow_net.is_empty()
    }

    /// Where processes run sandboxed, whether this machine can: `Err` with the one line a
    /// server prints before refusing to start.
    pub fn check_sandbox(&self) -> Result<(), ExitCode> {
        if !self.sandboxed() {
            return Ok(());
        }
        let mut sandbox = confine_nodeexec::Sandbox::new();
        if let Some(abi) = self.sandbox_min_abi {
            sandbox.min_abi(abi);
        }
        // Whether the kernel can enforce the policy is decided by the Landlock probe, the
        // seccomp filter's architecture and the ruleset's creation, none of which the
        // read-only view of the rest of the system changes; without it the check skips the
        // walk of `/etc` for its secrets (and the inotify watches kept on it), which the
        // first sandboxed run makes anyway.
        sandbox.read_only_outside(false);
        let root = std::fs::File::open(&self.root).ok();
        match root.map(|dir| sandbox.build(&dir)) {
            Some(Err(e)) if e.kind() == confine_nodeexec::ErrorKind::SandboxUnavailable => {
                use confine_nodeexec::LandlockSupport;
                let need = self
                    .sandbox_min_abi
                    .unwrap_or(confine_nodeexec::DEFAULT_MIN_ABI);
                let missing = match LandlockSupport::probe() {
                    LandlockSupport::Available { abi } if abi < need => {
                        format!("Landlock ABI {need} or newer is needed, this kernel has {abi}")
                    }
                    LandlockSupport::Available { .. } => format!("the sandbox: {e}"),
                    LandlockSupport::NotEnabled => {
                        "Landlock is built in but not enabled at boot (lsm=)".to_owned()
                    }
                    _ => "Landlock is not in this kernel (or a seccomp filter hides it)".to_owned(),
                };
                Err(usage(&format!(
                    "cannot sandbox node_process and run_command here: {missing}; \
                     pass --no-sandbox to run them unconfined"
                )))
            }
            // A root that cannot be opened is the factory's to report.
            _ => Ok(()),
        }
    }

    /// The allow list of `--allow-net` (presets asked of their clients now): a usage error
    /// naming the entry when one is malformed or a preset cannot be read.
    pub fn allow_list(&self) -> Result<confine_netpolicy::AllowList, ExitCode> {
        confine_netpolicy::AllowList::build(&self.allow_net).map_err(|e| usage(&e.to_string()))
    }

    /// The strongest network mechanism allowed ([`NETWORK_MECHANISM_VAR`]).
    pub fn network_mechanism() -> Result<confine_nodeexec::NetworkMechanism, ExitCode> {
        use confine_nodeexec::NetworkMechanism;
        match std::env::var(NETWORK_MECHANISM_VAR).as_deref() {
            Err(_) | Ok("") | Ok("namespace") => Ok(NetworkMechanism::Namespace),
            Ok("user-namespace") => Ok(NetworkMechanism::UserNamespace),
            Ok("landlock") => Ok(NetworkMechanism::Landlock),
            Ok(other) => Err(usage(&format!(
                "{NETWORK_MECHANISM_VAR}={other:?}: not namespace, user-namespace or landlock"
            ))),
        }
    }

    /// The network policy these flags ask for (its network made and its proxy started at the
    /// first run under it), or `None` when it is off.
    pub fn network_policy(
        &self,
    ) -> Result<Option<std::sync::Arc<confine_tools::NetworkPolicy>>, ExitCode> {
        if !self.network_policy_on() {
            return Ok(None);
        }
        let allow = self.allow_list()?;
        let strongest = Self::network_mechanism()?;
        // Made at the first run under it: a session that runs nothing never forks the
        // namespace's maker nor starts the proxy's thread.
        Ok(Some(std::sync::Arc::new(
            confine_tools::NetworkPolicy::deferred(allow, strongest),
        )))
    }

    /// The protected paths these flags ask for: a usage error when there are too many.
    pub fn protected(&self) -> Result<confine_tools::ProtectedPaths, ExitCode> {
        confine_tools::ProtectedPaths::new(!self.unprotect_defaults, &self.protect)
            .map_err(|e| usage(&format!("--protect: {e}")))
    }

    /// The denied paths these flags ask for: a usage error when there are too many.
    pub fn denied(&self) -> Result<confine_tools::DeniedPaths, ExitCode> {
        confine_tools::DeniedPaths::new(&self.deny).map_err(|e| usage(&format!("--deny: {e}")))
    }

    /// The node_process options these flags ask for (the protected paths are the defaults;
    /// [`ToolArgs::registry`] sets those the flags ask for).
    pub fn node_options(&self) -> ToolSetOptions {
        let mut options = ToolSetOptions::default();
        options.node.executable = self.node.clone();
        options.node.timeout = self.timeout_ms.map(Duration::from_millis);
        for entry in &self.env {
            let value = match &entry.value {
                Some(value) => Some(value.clone()),
                None => std::env::var(&entry.name).ok(),
            };
            if let Some(value) = value {
                options.env.push((entry.name.clone(), value));
            }
        }
        if self.allow_commands {
            let mut commands = confine_tools::RunCommandOptions::default();
            commands.timeout = self.command_timeout_ms.map(Duration::from_millis);
            commands.max_timeout = self.command_max_timeout_ms.map(Duration::from_millis);
            commands.max_jobs = self.max_jobs.map(|n| n as usize);
            commands.job_timeout = self.job_timeout_ms.map(Duration::from_millis);
            options.commands = Some(commands);
        }
        options.slots = self
            .max_processes
            .map(|n| std::sync::Arc::new(confine_nodeexec::RunSlots::new(n as usize)));
        options.sandbox = self.sandboxed().then(|| {
            let mut sandbox = confine_nodeexec::Sandbox::new();
            if let Some(abi) = self.sandbox_min_abi {
                sandbox.min_abi(abi);
            }
            for path in &self.sandbox_read {
                sandbox.allow_read(path);
            }
            for path in &self.sandbox_write {
                sandbox.allow_write(path);
            }
            sandbox
        });
        if !self.no_checkpoints && !self.read_only {
            let mut c = confine_tools::CheckpointOptions::new();
            c.dir = self.checkpoint_dir.clone();
            c.max_checkpoints = self.checkpoints.map(|n| n as usize);
            c.max_bytes = self.checkpoint_bytes;
            c.include_ignored = self.checkpoint_ignored;
            options.checkpoints = Some(c);
        }
        options
    }
}

impl ToolArgs {
    /// The registry these flags ask for: the whole workspace tool set by default. A bad
    /// `--tools` list is a usage error and an unusable root the factory's token (both exit 2).
    pub fn registry(&self) -> Result<ToolRegistry, ExitCode> {
        self.registry_sharing(None)
    }

    /// What the registries of one server share, made now: the run slots and the network
    /// policy (started).
    pub fn shared(&self) -> Result<Shared, ExitCode> {
        self.check_sandbox()?;
        Ok(Shared {
            slots: std::sync::Arc::new(match self.max_processes {
                Some(n) => confine_nodeexec::RunSlots::new(n as usize),
                None => confine_nodeexec::RunSlots::default(),
            }),
            job_slots: std::sync::Arc::new(confine_tools::JobSlots::new(
                self.max_jobs
                    .map_or(confine_tools::limits::DEFAULT_MAX_JOBS, |n| n as usize),
            )),
            network: self.network_policy()?,
            private: self.private_dirs()?,
        })
    }

    /// The sandbox's private directories, made now (`None` with `--no-sandbox` or where no
    /// process runs).
    pub fn private_dirs(
        &self,
    ) -> Result<Option<std::sync::Arc<confine_nodeexec::PrivateDirs>>, ExitCode> {
        if !self.sandboxed() {
            return Ok(None);
        }
        confine_nodeexec::PrivateDirs::create(self.sandbox_home.as_deref())
            .and_then(|mut dirs| {
                if let Some(bytes) = self.sandbox_tmp_size {
                    dirs.bound_tmp(bytes, confine_nodeexec::DEFAULT_TMP_INODES)?;
                }
                Ok(dirs)
            })
            .map(|dirs| Some(std::sync::Arc::new(dirs)))
            .map_err(|e| {
                usage(&format!(
                    "the sandbox cannot make its private directories: {e}"
                ))
            })
    }

    /// [`ToolArgs::registry`], whose process tools take their run slots, job slots and
    /// network policy from `shared` when given: the registries of one HTTP server (one per
    /// session) share one bound on concurrent runs, one bound on running jobs, one proxy and
    /// one children's loopback.
    pub fn registry_sharing(&self, shared: Option<&Shared>) -> Result<ToolRegistry, ExitCode> {
        if shared.is_none() {
            self.check_sandbox()?;
        }
        let mut named_checkpoints = false;
        let names: Vec<String> = match (&self.tools, self.read_only) {
            (None, false) => {
                let mut names: Vec<String> = confine_tools::WORKSPACE_TOOLS
                    .iter()
                    .map(|&n| n.into())
                    .collect();
                if self.allow_commands {
                    names.extend(confine_tools::COMMAND_TOOLS.iter().map(|&n| n.into()));
                }
                names
            }
            (None, true) => confine_tools::READ_ONLY_TOOLS
                .iter()
                .map(|&n| n.into())
                .collect(),
            (Some(names), read_only) => {
                if names.iter().all(|n| n.trim().is_empty()) {
                    return Err(usage("--tools needs at least one tool name"));
                }
                let mut chosen = Vec::new();
                for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
                    // Checkpoints are offered with `--tools` only when a checkpoint tool is named.
                    if confine_tools::CHECKPOINT_TOOLS.contains(&name) {
                        if read_only || self.no_checkpoints {
                            return Err(usage(&format!(
                                "{name} is not offered with --read-only or --no-checkpoints"
                            )));
                        }
                        named_checkpoints = true;
                        continue;
                    }
                    let command_tool = confine_tools::COMMAND_TOOLS.contains(&name);
                    if command_tool && !self.allow_commands {
                        return Err(usage(&format!(
                            "{name} is offered only with --allow-commands"
                        )));
                    }
                    if !confine_tools::WORKSPACE_TOOLS.contains(&name) && !command_tool {
                        return Err(usage(&format!(
                            "unknown tool {name:?} in --tools (known: {})",
                            confine_tools::WORKSPACE_TOOLS.join(", ")
                        )));
                    }
                    if read_only && !confine_tools::READ_ONLY_TOOLS.contains(&name) {
                        return Err(usage(&format!(
                            "{name} changes the workspace and --read-only was given"
                        )));
                    }
                    chosen.push(name.to_owned());
                }
                chosen
            }
        };
        // The sandbox lets children read only the root, Node.js and the system's files, and
        // what --sandbox-read/--sandbox-write add: a store beneath one of those is refused.
        if let Some(dir) = &self.checkpoint_dir
            && self.sandboxed()
            && !self.no_checkpoints
        {
            let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            if self
                .sandbox_read
                .iter()
                .chain(&self.sandbox_write)
                .any(|p| {
                    dir.starts_with(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                        || dir.starts_with(p)
                })
            {
                return Err(usage(
                    "--checkpoint-dir lies where --sandbox-read or --sandbox-write lets children reach",
                ));
            }
        }
        let mut options = self.node_options();
        if self.tools.is_some() && !named_checkpoints {
            options.checkpoints = None;
        }
        match shared {
            Some(shared) => {
                options.slots = Some(shared.slots.clone());
                if let Some(commands) = options.commands.as_mut() {
                    commands.job_slots = Some(shared.job_slots.clone());
                }
                options.network = shared.network.clone();
            }
            None => options.network = self.network_policy()?,
        }
        let private = match shared {
            Some(shared) => shared.private.clone(),
            None => self.private_dirs()?,
        };
        if let (Some(sandbox), Some(dirs)) = (options.sandbox.as_mut(), private) {
            sandbox.private_dirs(dirs);
        }
        options.protected = std::sync::Arc::new(self.protected()?);
        options.denied = std::sync::Arc::new(self.denied()?);
        confine_tools::create_selected_tools(&self.root, options, &names).map_err(|e| match e {
            SelectError::Build(e) => unusable(&e),
            other => usage(&other.to_string()),
        })
    }
}

/// Print a factory's token and return exit status 2.
pub fn unusable(e: &BuildError) -> ExitCode {
    eprintln!("confine: {}", e.code());
    ExitCode::from(2)
}

/// Print a one-line usage reason and return exit status 2.
pub fn usage(reason: &str) -> ExitCode {
    eprintln!("confine: {reason}");
    ExitCode::from(2)
}

/// Logs to stderr only, filtered by `CONFINE_LOG` (default `warn`). At `debug`, every failed
/// tool call is logged with the error behind its token (the OS error and the step), which a
/// record never carries.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CONFINE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_are_bytes_or_a_number_with_k_m_or_g() {
        assert_eq!(size("1"), Ok(1));
        assert_eq!(size("4096"), Ok(4096));
        assert_eq!(size("128K"), Ok(128 << 10));
        assert_eq!(size("3m"), Ok(3 << 20));
        assert_eq!(size("2G"), Ok(2 << 30));
        for bad in [
            "0",
            "0K",
            "",
            "K",
            "-1",
            "1.5G",
            "12X",
            "1KB",
            "99999999999999999999G",
        ] {
            assert!(size(bad).is_err(), "{bad}");
        }
    }
}
