//! `node_process` (SPEC section 6). Placeholder until issue 4 lands: every call fails.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, ErrorKind, ToolError};
use crate::tool::TypedTool;

/// How the node_process tool is built (by the embedder; the model cannot change it).
#[derive(Clone, Debug, Default)]
pub struct NodeProcessOptions {
    /// The Node.js executable; `None` finds `node` on PATH once and canonicalizes it.
    pub node: Option<PathBuf>,
    /// The time bound; `None` is 500 ms.
    pub timeout: Option<Duration>,
}

/// The arguments of `node_process`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeInput {
    /// JavaScript (CommonJS) source.
    pub source: String,
    /// Arguments.
    #[serde(default)]
    pub arguments: Option<Vec<String>>,
}

/// The success record.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOutput {
    /// Exit code.
    pub exit_code: Option<i32>,
}

/// The `node_process` tool.
#[derive(Debug, Clone)]
pub struct NodeProcessTool {
    #[allow(dead_code)]
    root: Arc<WorkspaceRoot>,
}

impl NodeProcessTool {
    /// A node tool over an already captured root.
    pub fn new(root: Arc<WorkspaceRoot>, _options: NodeProcessOptions) -> Result<Self, crate::BuildError> {
        Ok(Self { root })
    }
}

impl TypedTool for NodeProcessTool {
    type Input = NodeInput;
    type Valid = NodeInput;
    type Output = NodeOutput;
    const NAME: &'static str = "node_process";
    const DESCRIPTION: &'static str = "Run JavaScript with Node.js inside the workspace.";
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidNodeProcessInput;

    fn check(&self, input: NodeInput) -> Result<NodeInput, ToolError> {
        Ok(input)
    }

    async fn run(&self, _valid: NodeInput, _cancel: &CancellationToken) -> Result<NodeOutput, CallError> {
        Err(ToolError::failed(ErrorKind::NodeProcessFailed).into())
    }
}
