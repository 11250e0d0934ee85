//! `write_file` (SPEC section 5). Placeholder until issue 3 lands: every call fails.

use std::sync::Arc;

use rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, ErrorKind, ToolError};
use crate::tool::TypedTool;

/// The arguments of `write_file`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    /// Relative path inside the workspace.
    pub path: String,
    /// The UTF-8 text to write.
    pub content: String,
}

/// The record `write_file` returns.
#[derive(Clone, Debug, Serialize)]
pub struct WriteOutput {
    /// The normalized relative path.
    pub path: String,
    /// Bytes written.
    pub bytes: usize,
}

/// The `write_file` tool.
#[derive(Debug, Clone)]
pub struct WriteTool {
    #[allow(dead_code)]
    root: Arc<WorkspaceRoot>,
}

impl WriteTool {
    /// A write tool over an already captured root.
    pub fn new(root: Arc<WorkspaceRoot>) -> Self {
        Self { root }
    }
}

impl TypedTool for WriteTool {
    type Input = WriteInput;
    type Valid = WriteInput;
    type Output = WriteOutput;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Write a UTF-8 text file inside the workspace.";
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidWriteInput;

    fn check(&self, input: WriteInput) -> Result<WriteInput, ToolError> {
        Ok(input)
    }

    async fn run(&self, _valid: WriteInput, _cancel: &CancellationToken) -> Result<WriteOutput, CallError> {
        Err(ToolError::failed(ErrorKind::WriteFailed).into())
    }
}
