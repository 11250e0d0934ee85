//! Options shared by the subcommands that serve tools.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tools::{BuildError, NodeProcessOptions};

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
