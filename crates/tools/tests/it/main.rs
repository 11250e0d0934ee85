//! Integration tests of the tool layer and the tools, one binary.

mod file_attacks;
mod file_tools;
mod read_file;
mod registry;
mod walk_race;
mod walking;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tools::{ToolCall, ToolRegistry, ToolResult, execute_tool_call};

/// A fresh parent holding the workspace `ws` and its prefix-sharing sibling `ws-outside`.
pub(crate) struct Sandbox {
    pub(crate) tmp: tempfile::TempDir,
    pub(crate) root: std::path::PathBuf,
    pub(crate) outside: std::path::PathBuf,
}

impl Sandbox {
    pub(crate) fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let root = base.join("ws");
        let outside = base.join("ws-outside");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "TOP SECRET").unwrap();
        Self { tmp, root, outside }
    }

    /// No `.pify-` temporary anywhere under the parent.
    pub(crate) fn assert_no_leftovers(&self) {
        fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.contains(".pify-") {
                    found.push(name);
                }
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&e.path(), found);
                }
            }
        }
        let mut found = Vec::new();
        walk(self.tmp.path(), &mut found);
        assert!(found.is_empty(), "leftovers: {found:?}");
    }
}

pub(crate) fn call(registry: &ToolRegistry, name: &str, args: Value) -> ToolResult {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(execute_tool_call(
        registry,
        &ToolCall::new("t", name, &args),
        &CancellationToken::new(),
    ))
    .expect("not cancelled")
}

/// The error token of a result, or panic.
pub(crate) fn token(result: &ToolResult) -> String {
    assert!(result.is_error, "expected an error, got {}", result.content);
    result.record()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned()
}
