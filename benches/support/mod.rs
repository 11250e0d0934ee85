//! Setup shared by the Node.js benches (`node_process.rs`, `sandbox.rs`); each bench is its
//! own binary and uses `mod support;`.

// Each bench uses a subset of these helpers; the rest would warn as dead code there.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use confine_cli::tools::{ToolCall, ToolSetOptions};

/// The first `node` on `PATH`, canonicalized.
pub fn node() -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    let found = std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .expect("Node.js on PATH");
    std::fs::canonicalize(found).unwrap()
}

/// `node_process` options running `node` with a 10 s timeout.
pub fn node_options(node: &Path) -> ToolSetOptions {
    let mut options = ToolSetOptions::default();
    options.node.executable = Some(node.to_path_buf());
    options.node.timeout = Some(Duration::from_secs(10));
    options
}

/// An empty `node_process` call.
pub fn empty_call() -> ToolCall {
    ToolCall::new("b", "node_process", &serde_json::json!({"source": ""}))
}

/// A current-thread runtime with I/O and time enabled.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The median of `v` (sorted in place; the upper one of an even count).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
