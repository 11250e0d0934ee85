//! `create_directory`: a directory beneath the workspace, with its missing parents.
//!
//! Each component is opened beneath the root and a missing one is made with `mkdirat` in the
//! directory above it, already held and checked to lie beneath the root (the same checked
//! steps `write_file` uses for its parents). `created` is true when this call made the last
//! component, false when a directory (or a symlink to a directory inside the workspace) was
//! already there. A file or another non-directory in the way is `NOT_A_DIRECTORY`.

use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::deny::DeniedPaths;
use crate::entry::{normalize, run_writing};
use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::parent::open_dirs;
use crate::protect::ProtectedPaths;
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::Workspace;

/// The arguments of `create_directory`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MkdirInput {
    /// Relative path of the directory inside the workspace, with `/` separators; missing
    /// parents are created too.
    pub path: String,
}

/// The record `create_directory` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MkdirOutput {
    /// The normalized relative path.
    pub path: String,
    /// False when the directory already existed.
    pub created: bool,
}

/// The `create_directory` tool over one workspace.
#[derive(Debug, Clone)]
pub struct CreateDirectoryTool {
    ws: Workspace,
}

impl CreateDirectoryTool {
    /// A create_directory tool over an already captured root, refusing the default protected paths.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

fn mkdir(
    root: &WorkspaceRoot,
    protected: &ProtectedPaths,
    denied: &DeniedPaths,
    path: &RelPath,
    cancel: &CancellationToken,
) -> Result<MkdirOutput, CallError> {
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    protected.check_written(path)?;
    root.verify()?;
    denied.check_path(root, path)?;
    let segments: Vec<&str> = path.segments().collect();
    let (_dir, created) = open_dirs(root, &segments, protected, cancel).map_err(|e| match e {
        CallError::Failed(f) if f.kind() == Some(ErrorKind::WriteParentNotDirectory) => {
            failed(ErrorKind::NotADirectory)
        }
        other => other,
    })?;
    Ok(MkdirOutput {
        path: path.as_str().to_owned(),
        created,
    })
}

impl TypedTool for CreateDirectoryTool {
    type Input = MkdirInput;
    type Valid = RelPath;
    type Output = MkdirOutput;
    const NAME: &'static str = "create_directory";
    const DESCRIPTION: &'static str = "Create a directory inside the workspace, with any \
        missing parent directories. `path` is relative to the workspace root. Returns {path, \
        created}; created is false when the directory already existed. A file in the way is \
        refused with NOT_A_DIRECTORY.";
    const HINTS: ToolHints = ToolHints::writes("Create a workspace directory", false, true);
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidMkdirInput;
    const FAILED: ErrorKind = ErrorKind::WriteFailed;

    fn check(&self, input: MkdirInput) -> Result<RelPath, ToolError> {
        normalize(&input.path)
    }

    async fn run(
        &self,
        valid: RelPath,
        cancel: &CancellationToken,
    ) -> Result<MkdirOutput, CallError> {
        run_writing(
            &self.ws.root,
            &self.ws.protected,
            &self.ws.denied,
            valid,
            cancel,
            mkdir,
        )
        .await
    }
}
