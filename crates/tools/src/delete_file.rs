//! `delete_file`: remove one file, one symlink (the link itself) or one empty directory
//! beneath the workspace; never recursive.
//!
//! The parent is opened beneath the root and held (see the `entry` module); the leaf is
//! examined with `lstat` in it, the parent is checked to lie beneath the root still, and the
//! entry is removed in the held parent only if it is still the entry examined (same
//! `(dev, ino)`; `confine_beneath::remove_if_same` for a file or a symlink). A directory is removed
//! with `unlinkat(AT_REMOVEDIR)`, which the kernel refuses for a non-empty one
//! (`DELETE_DIRECTORY_NOT_EMPTY`). The root cannot be named (the path
//! grammar leaves no empty path), and an entry with the root's identity is refused all the
//! same. Between the identity check and the unlink no Linux call can make the two one step:
//! a process racing inside that window can only make this call remove the one entry it put
//! there, inside the held parent, never anything outside it.

use confine_beneath::{FsErrorKind, remove_if_same};
use confine_pathgrammar::RelPath;
use confine_rootid::{FileId, WorkspaceRoot};
use rustix::fs::{AtFlags, FileType};
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

/// The arguments of `delete_file`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteInput {
    /// Relative path of the file, symlink or empty directory to remove, with `/` separators.
    pub path: String,
}

/// The record `delete_file` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeleteOutput {
    /// The normalized relative path that was removed.
    pub path: String,
}

/// The `delete_file` tool over one workspace.
#[derive(Debug, Clone)]
pub struct DeleteFileTool {
    ws: Workspace,
}

impl DeleteFileTool {
    /// A delete_file tool over an already captured root, refusing the default protected paths.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

fn delete(
    root: &WorkspaceRoot,
    protected: &ProtectedPaths,
    denied: &DeniedPaths,
    path: &RelPath,
    cancel: &CancellationToken,
) -> Result<DeleteOutput, CallError> {
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    protected.check_written(path)?;
    root.verify()?;
    denied.check_path(root, path)?;
    let (parent, name) = open_parent(root, path, Missing::Refuse(ErrorKind::WriteFailed))?;
    protected.check_in(root, &parent.dir, name, false)?;
    denied.check_in(root, &parent.dir, name, false)?;
    let st = match lstat_at(&parent.dir, name) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Err(failed(ErrorKind::FileNotFound)),
        Err(_) => return Err(failed(ErrorKind::WriteFailed)),
    };
    let id = FileId::of(&st);
    if id == root.identity() {
        return Err(failed(ErrorKind::PathOutsideWorkspace));
    }
    let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    root.verify()?;
    check_beneath(root, &parent)?;
    let done = || {
        Ok(DeleteOutput {
            path: path.as_str().to_owned(),
        })
    };
    if !is_dir {
        // The descriptor layer's remove-if-same: unlinked only while it is still the entry
        // examined, and never a directory.
        return match remove_if_same(&parent.dir, name, id) {
            Ok(true) => done(),
            Ok(false) => Err(failed(ErrorKind::PathChangedDuringRead)),
            Err(e) if FsErrorKind::of(&e) == FsErrorKind::NotFound => {
                Err(failed(ErrorKind::FileNotFound))
            }
            Err(e) => Err(failed(ErrorKind::WriteFailed).with_source(e)),
        };
    }
    // A directory: still the one examined? `rmdir` then removes it only if it is empty.
    match lstat_at(&parent.dir, name) {
        Ok(now) if FileId::of(&now) == id => {}
        Ok(_) | Err(Errno::NOENT) => return Err(failed(ErrorKind::PathChangedDuringRead)),
        Err(_) => return Err(failed(ErrorKind::WriteFailed)),
    }
    match rustix::fs::unlinkat(&parent.dir, name, AtFlags::REMOVEDIR) {
        Ok(()) => done(),
        Err(e) => {
            const TOKENS: FsTokens = FsTokens::at_name(ErrorKind::WriteFailed)
                .exists(ErrorKind::DeleteDirectoryNotEmpty)
                .not_found(ErrorKind::FileNotFound)
                // It stopped being a directory in between.
                .not_directory(ErrorKind::PathChangedDuringRead);
            Err(TOKENS.of(e.into()))
        }
    }
}

impl TypedTool for DeleteFileTool {
    type Input = DeleteInput;
    type Valid = RelPath;
    type Output = DeleteOutput;
    const NAME: &'static str = "delete_file";
    const DESCRIPTION: &'static str = "Delete one file, one symlink (the link itself, never \
        what it points to) or one empty directory inside the workspace. `path` is relative to \
        the workspace root. Never recursive: a directory that is not empty is refused with \
        DELETE_DIRECTORY_NOT_EMPTY. Returns {path}.";
    const HINTS: ToolHints = ToolHints::writes("Delete a workspace entry", true, false);
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidDeleteInput;
    const FAILED: ErrorKind = ErrorKind::WriteFailed;

    fn check(&self, input: DeleteInput) -> Result<RelPath, ToolError> {
        normalize(&input.path)
    }

    async fn run(
        &self,
        valid: RelPath,
        cancel: &CancellationToken,
    ) -> Result<DeleteOutput, CallError> {
        run_writing(
            &self.ws.root,
            &self.ws.protected,
            &self.ws.denied,
            valid,
            cancel,
            delete,
        )
        .await
    }
}
