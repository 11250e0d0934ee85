//! `move_file`: rename one entry beneath the workspace to a new name beneath it, never over
//! anything that exists.
//!
//! The source's parent is opened beneath the root (nothing created); the destination's parent
//! is opened beneath the root with its missing directories created one checked step at a time
//! (as `write_file` does). Both are held as descriptors and checked to lie beneath the root
//! (climbing `..` to the root's identity) just before the single
//! `renameat2(RENAME_NOREPLACE)` between them: the kernel refuses an existing destination
//! (`MOVE_DESTINATION_EXISTS`) in the same step that renames, so nothing is ever replaced.
//! The source entry is never followed: a symlink moves as itself. The root cannot be named
//! (the path grammar leaves no empty path), and an entry with the root's identity is refused.
//! A directory moved into itself is refused by the kernel (`WRITE_FAILED`).

use confine_pathgrammar::RelPath;
use confine_rootid::{FileId, WorkspaceRoot};
use rustix::fs::RenameFlags;
use rustix::io::Errno;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::deny::DeniedPaths;
use crate::entry::{check_beneath, lstat_at, normalize, run_writing};
use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::fsmap::FsTokens;
use crate::parent::{Missing, open_parent};
use crate::protect::ProtectedPaths;
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::Workspace;

/// The arguments of `move_file`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveInput {
    /// Relative path of the entry to move (a file, a directory or a symlink, which moves as
    /// itself).
    pub source: String,
    /// Its new relative path; must not exist. Missing parent directories are created.
    pub destination: String,
}

/// The record `move_file` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MoveOutput {
    /// The normalized source path.
    pub source: String,
    /// The normalized destination path.
    pub destination: String,
}

/// Arguments that passed validation.
#[derive(Clone, Debug)]
pub struct ValidMove {
    source: RelPath,
    destination: RelPath,
}

/// The `move_file` tool over one workspace.
#[derive(Debug, Clone)]
pub struct MoveFileTool {
    ws: Workspace,
}

impl MoveFileTool {
    /// A move_file tool over an already captured root, refusing the default protected paths.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

fn rename(
    root: &WorkspaceRoot,
    protected: &ProtectedPaths,
    denied: &DeniedPaths,
    valid: &ValidMove,
    cancel: &CancellationToken,
) -> Result<MoveOutput, CallError> {
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    // Either end protected, or a directory that may hold protected paths (`.git`): refused.
    protected.check_moved(&valid.source)?;
    protected.check_moved(&valid.destination)?;
    root.verify()?;
    // Either end denied, or a directory that may hold denied paths: refused.
    denied.check_moved(root, &valid.source)?;
    denied.check_moved(root, &valid.destination)?;
    let (from, from_name) =
        open_parent(root, &valid.source, Missing::Refuse(ErrorKind::WriteFailed))?;
    protected.check_in(root, &from.dir, from_name, true)?;
    denied.check_in(root, &from.dir, from_name, true)?;
    let st = match lstat_at(&from.dir, from_name) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Err(failed(ErrorKind::FileNotFound)),
        Err(_) => return Err(failed(ErrorKind::WriteFailed)),
    };
    if FileId::of(&st) == root.identity() {
        return Err(failed(ErrorKind::PathOutsideWorkspace));
    }
    let (to, to_name) = open_parent(
        root,
        &valid.destination,
        Missing::Create { protected, cancel },
    )
    .map_err(|e| match e {
        CallError::Failed(f) if f.kind() == Some(ErrorKind::WriteParentNotDirectory) => {
            failed(ErrorKind::NotADirectory)
        }
        other => other,
    })?;
    protected.check_in(root, &to.dir, to_name, true)?;
    denied.check_in(root, &to.dir, to_name, true)?;
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    root.verify()?;
    check_beneath(root, &from)?;
    check_beneath(root, &to)?;
    match rustix::fs::renameat_with(
        &from.dir,
        from_name,
        &to.dir,
        to_name,
        RenameFlags::NOREPLACE,
    ) {
        Ok(()) => {}
        Err(e) => {
            const TOKENS: FsTokens = FsTokens::at_name(ErrorKind::WriteFailed)
                .exists(ErrorKind::MoveDestinationExists)
                .not_found(ErrorKind::FileNotFound);
            return Err(TOKENS.of(e.into()));
        }
    }
    // A directory renamed into a protected place after the checks: moved back, refused.
    if let Err(refused) = protected.check_in(root, &to.dir, to_name, true) {
        let _ = rustix::fs::renameat_with(
            &to.dir,
            to_name,
            &from.dir,
            from_name,
            RenameFlags::NOREPLACE,
        );
        return Err(refused);
    }
    // Durable once both directories are.
    let _ = confine_atomicwrite::sync_dir(&to.dir);
    if from.id != to.id {
        let _ = confine_atomicwrite::sync_dir(&from.dir);
    }
    Ok(MoveOutput {
        source: valid.source.as_str().to_owned(),
        destination: valid.destination.as_str().to_owned(),
    })
}

impl TypedTool for MoveFileTool {
    type Input = MoveInput;
    type Valid = ValidMove;
    type Output = MoveOutput;
    const NAME: &'static str = "move_file";
    const DESCRIPTION: &'static str = "Move or rename a file, directory or symlink inside the \
        workspace. `source` and `destination` are relative to the workspace root; missing \
        parent directories of the destination are created. An existing destination is never \
        replaced (MOVE_DESTINATION_EXISTS); a symlink moves as itself. Returns {source, \
        destination}.";
    const HINTS: ToolHints = ToolHints::writes("Move a workspace entry", false, false);
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidMoveInput;
    const FAILED: ErrorKind = ErrorKind::WriteFailed;

    fn check(&self, input: MoveInput) -> Result<ValidMove, ToolError> {
        Ok(ValidMove {
            source: normalize(&input.source)?,
            destination: normalize(&input.destination)?,
        })
    }

    async fn run(
        &self,
        valid: ValidMove,
        cancel: &CancellationToken,
    ) -> Result<MoveOutput, CallError> {
        run_writing(
            &self.ws.root,
            &self.ws.protected,
            &self.ws.denied,
            valid,
            cancel,
            rename,
        )
        .await
    }
}
