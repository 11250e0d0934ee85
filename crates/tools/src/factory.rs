//! Tool factories: capture the root once, build the tools over it.

use std::path::Path;
use std::sync::Arc;

use rootid::{RootError, WorkspaceRoot};

use crate::node_process::{NodeProcessOptions, NodeProcessTool};
use crate::read_file::ReadTool;
use crate::tool::{Tool, ToolRegistry};
use crate::write_file::WriteTool;

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
}

impl BuildError {
    /// The stable token.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Root(e) => e.code(),
            Self::NodeNotFound => "NODE_EXECUTABLE_NOT_FOUND",
        }
    }
}

/// Capture `root` for tools (shared by all tools built from it).
pub fn capture_root(root: impl AsRef<Path>) -> Result<Arc<WorkspaceRoot>, BuildError> {
    Ok(Arc::new(WorkspaceRoot::capture(root)?))
}

/// The `read_file` tool over `root`.
pub fn create_read_tool(root: impl AsRef<Path>) -> Result<ReadTool, BuildError> {
    Ok(ReadTool::new(capture_root(root)?))
}

/// The `write_file` tool over `root`.
pub fn create_write_tool(root: impl AsRef<Path>) -> Result<WriteTool, BuildError> {
    Ok(WriteTool::new(capture_root(root)?))
}

/// The `node_process` tool over `root`.
pub fn create_node_process_tool(
    root: impl AsRef<Path>,
    options: NodeProcessOptions,
) -> Result<NodeProcessTool, BuildError> {
    NodeProcessTool::new(capture_root(root)?, options)
}

/// The three tools over one captured root, as a registry.
pub fn create_coding_tools(
    root: impl AsRef<Path>,
    options: NodeProcessOptions,
) -> Result<ToolRegistry, BuildError> {
    let root = capture_root(root)?;
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(ReadTool::new(root.clone())),
        Arc::new(WriteTool::new(root.clone())),
        Arc::new(NodeProcessTool::new(root, options)?),
    ];
    Ok(ToolRegistry::new(tools).expect("the three tool names are distinct"))
}

/// `read_file` alone, as a registry (`--read-only`).
pub fn create_read_only_tools(root: impl AsRef<Path>) -> Result<ToolRegistry, BuildError> {
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(create_read_tool(root)?)];
    Ok(ToolRegistry::new(tools).expect("one tool"))
}
