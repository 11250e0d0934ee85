//! Options shared by the subcommands that serve tools.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tools::{BuildError, NodeProcessOptions, SelectError, ToolRegistry};

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
    /// Confine node_process children with the Linux kernel sandbox (Landlock and seccomp):
    /// read only the root, Node.js's installation and the system's non-secret files; write
    /// only beneath the root; no change of mode, owner, times or extended attributes; no
    /// socket (Unix ones included); 4 GiB of address space, 1024 open files. A call fails
    /// with NODE_SANDBOX_UNAVAILABLE where the kernel cannot enforce it.
    #[arg(long)]
    pub sandbox: bool,
    /// With --sandbox: the oldest Landlock ABI accepted (default 4; 6 also insists on the
    /// signal and abstract-socket scopes).
    #[arg(long, value_name = "N", requires = "sandbox", value_parser = clap::value_parser!(u32).range(4..))]
    pub sandbox_min_abi: Option<u32>,
    /// With --sandbox: also let the child read (and execute) beneath PATH, a directory or a
    /// file that must exist. Repeatable.
    #[arg(long, value_name = "PATH", requires = "sandbox", value_parser = existing_path)]
    pub sandbox_read: Vec<PathBuf>,
    /// With --sandbox: also let the child write beneath PATH, a directory or a file that must
    /// exist. Repeatable.
    #[arg(long, value_name = "PATH", requires = "sandbox", value_parser = existing_path)]
    pub sandbox_write: Vec<PathBuf>,
    /// Offer only the tools that change nothing: read_file, read_lines, list_directory,
    /// find_files, grep and file_info.
    #[arg(long)]
    pub read_only: bool,
    /// Offer only these tools (comma-separated names, for example `read_file,grep`); with
    /// --read-only each must be read-only.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
}

/// A path that exists, canonicalized now (the sandbox opens it at each call).
fn existing_path(path: &str) -> Result<PathBuf, String> {
    std::fs::canonicalize(path).map_err(|e| format!("{path}: {e}"))
}

impl ToolArgs {
    /// The node_process options these flags ask for.
    pub fn node_options(&self) -> NodeProcessOptions {
        let mut options = NodeProcessOptions::default();
        options.node = self.node.clone();
        options.timeout = self.timeout_ms.map(Duration::from_millis);
        options.sandbox = self.sandbox.then(|| {
            let mut sandbox = nodeexec::Sandbox::new();
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
        options
    }
}

impl ToolArgs {
    /// The registry these flags ask for: the whole workspace tool set by default. A bad
    /// `--tools` list is a usage error and an unusable root the factory's token (both exit 2).
    pub fn registry(&self) -> Result<ToolRegistry, ExitCode> {
        let names: Vec<String> = match (&self.tools, self.read_only) {
            (None, false) => tools::WORKSPACE_TOOLS.iter().map(|&n| n.into()).collect(),
            (None, true) => tools::READ_ONLY_TOOLS.iter().map(|&n| n.into()).collect(),
            (Some(names), read_only) => {
                if names.iter().all(|n| n.trim().is_empty()) {
                    return Err(usage("--tools needs at least one tool name"));
                }
                let mut chosen = Vec::new();
                for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
                    if !tools::WORKSPACE_TOOLS.contains(&name) {
                        return Err(usage(&format!(
                            "unknown tool {name:?} in --tools (known: {})",
                            tools::WORKSPACE_TOOLS.join(", ")
                        )));
                    }
                    if read_only && !tools::READ_ONLY_TOOLS.contains(&name) {
                        return Err(usage(&format!(
                            "{name} changes the workspace and --read-only was given"
                        )));
                    }
                    chosen.push(name.to_owned());
                }
                chosen
            }
        };
        tools::create_selected_tools(&self.root, self.node_options(), &names).map_err(|e| match e {
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
