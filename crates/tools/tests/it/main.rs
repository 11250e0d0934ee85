//! Integration tests of the tool layer and the tools, one binary.

mod args_properties;
mod deny;
mod edit_diagnostics;
mod file_attacks;
mod file_tools;
mod read_file;
mod read_media;
mod registry;
mod scans;
mod walk_race;
mod walking;

use confine_tools::{ToolCall, ToolRegistry, ToolResult, execute_tool_call};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A fresh parent holding the workspace `ws` and its prefix-sharing sibling `ws-outside`
/// (with `secret.txt`): `Sandbox::disk(secret)`.
pub(crate) use testkit::Sibling as Sandbox;

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
