//! `write_file`: replace one file beneath the workspace atomically, through an
//! identity-checked temporary.
//!
//! Validation, pure and before any effect, in this order: the shape (exactly
//! `{"path": string, "content": string}`, else `INVALID_WRITE_INPUT`), the path grammar
//! (`INVALID_RELATIVE_PATH`), the content's UTF-8 size (at most [`MAX_WRITE_BYTES`], else
//! `FILE_TOO_LARGE`). A `content` holding NUL is text like any other and is written.
//!
//! Execution: verify the root; open the parent beneath it, creating missing directories one
//! checked step at a time (see the `parent` module: a symlinked parent that stays inside the root is
//! followed, one that leaves it is `PATH_OUTSIDE_WORKSPACE`, a non-directory in the way is
//! `WRITE_PARENT_NOT_DIRECTORY`); take the process-wide lock of the target (its parent's
//! identity and its name, shared by every tool instance); then [`atomicwrite::install_with`],
//! whose hooks re-check cancellation before each effect, and before the rename also the root,
//! the parent's identity at its path, and (after the rename) that the parent is still beneath
//! the root. Cancellation is never honoured after the rename: the call then reports what
//! happened.

use std::ffi::OsStr;
use std::io;
use std::sync::Arc;

use atomicwrite::{Hooks, Step};
use pathgrammar::RelPath;
use rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, Cancelled, ErrorKind, ToolError};
use crate::tool::{ToolHints, TypedTool};

pub(crate) mod lock;
pub(crate) mod parent;

use lock::{TargetKey, lock_target};
use parent::{Parent, open_parent, symlink_target_kind};

/// The most UTF-8 bytes `write_file` accepts as content.
pub const MAX_WRITE_BYTES: usize = 65_536;

/// The arguments of `write_file`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    /// Relative path of the file inside the workspace, with `/` separators (for example
    /// `src/main.js`). Missing parent directories are created. No `..`, no absolute path, no
    /// drive letter.
    pub path: String,
    /// The complete new text of the file (UTF-8, at most 65,536 bytes). It replaces the old
    /// content entirely.
    pub content: String,
}

/// The record `write_file` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WriteOutput {
    /// The normalized relative path.
    pub path: String,
    /// Bytes written.
    pub bytes: usize,
}

/// Arguments that passed validation. The only way to make one is [`WriteTool::check_input`],
/// so [`WriteTool::write`] never sees an unchecked path or an oversized content.
#[derive(Clone, Debug)]
pub struct ValidWrite {
    path: RelPath,
    content: String,
}

impl ValidWrite {
    /// The normalized path.
    pub fn path(&self) -> &RelPath {
        &self.path
    }

    /// The content, at most [`MAX_WRITE_BYTES`].
    pub fn content(&self) -> &str {
        &self.content
    }
}

/// The `write_file` tool over one workspace.
#[derive(Debug, Clone)]
pub struct WriteTool {
    root: Arc<WorkspaceRoot>,
}

impl WriteTool {
    /// A write tool over an already captured root.
    pub fn new(root: Arc<WorkspaceRoot>) -> Self {
        Self { root }
    }

    /// Validate arguments: the grammar, then the size. Pure.
    pub fn check_input(input: WriteInput) -> Result<ValidWrite, ToolError> {
        let path = pathgrammar::normalize(&input.path)
            .map_err(|e| ToolError::invalid(ErrorKind::InvalidRelativePath).with_source(e))?;
        if input.content.len() > MAX_WRITE_BYTES {
            return Err(ToolError::invalid(ErrorKind::FileTooLarge));
        }
        Ok(ValidWrite {
            path,
            content: input.content,
        })
    }

    /// Write validated arguments.
    pub async fn write(
        &self,
        valid: &ValidWrite,
        cancel: &CancellationToken,
    ) -> Result<WriteOutput, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        self.root.verify()?;
        let (parent, name) = open_parent(&self.root, &valid.path, cancel)?;
        let key = TargetKey {
            dir: parent.id,
            name: name.to_owned(),
        };
        let _held = lock_target(key, cancel).await?;

        let installed = install_checked(
            &self.root,
            &parent,
            name,
            valid.content.as_bytes(),
            cancel,
            &|| Ok(()),
            &|e| self.token(e, &parent, name),
        )?;
        Ok(WriteOutput {
            path: valid.path.as_str().to_owned(),
            bytes: installed.len,
        })
    }

    fn token(&self, e: &atomicwrite::Error, parent: &Parent, name: &str) -> ErrorKind {
        use atomicwrite::ErrorKind as K;
        match e.kind() {
            K::TargetSymlink => symlink_target_kind(&self.root, parent, name),
            K::TargetNotRegular => ErrorKind::WriteTargetNotRegular,
            K::TempNotRegular => ErrorKind::WriteTempNotRegular,
            K::TempIdentityChanged => ErrorKind::WriteTempIdentityChanged,
            K::TempCleanupFailed => ErrorKind::WriteTempCleanupFailed,
            _ => ErrorKind::WriteFailed,
        }
    }
}

fn failed(kind: ErrorKind) -> CallError {
    CallError::Failed(ToolError::failed(kind))
}

/// Install `bytes` as `name` in the held `parent` through [`atomicwrite::install_with`], with
/// the checks of the module docs between its steps; `before_rename` runs last before the
/// commit (edit_file's conflict check). A refusal by a check is reported as itself, an
/// installation error by the token `token` gives it. The caller holds the target's lock.
pub(crate) fn install_checked(
    root: &WorkspaceRoot,
    parent: &Parent,
    name: &str,
    bytes: &[u8],
    cancel: &CancellationToken,
    before_rename: &dyn Fn() -> Result<(), CallError>,
    token: &dyn Fn(&atomicwrite::Error) -> ErrorKind,
) -> Result<atomicwrite::Installed, CallError> {
    let mut guard = Guard {
        root,
        parent,
        cancel,
        before_rename,
        reason: None,
    };
    atomicwrite::install_with(&parent.dir, name, bytes, &mut guard).map_err(|e| {
        match guard.reason.take() {
            Some(reason) => reason,
            None => failed(token(&e)),
        }
    })
}

/// The tool's checks between the installation's steps.
struct Guard<'a> {
    root: &'a WorkspaceRoot,
    parent: &'a Parent,
    cancel: &'a CancellationToken,
    before_rename: &'a dyn Fn() -> Result<(), CallError>,
    /// Why the guard stopped the installation, reported instead of `WRITE_FAILED`.
    reason: Option<CallError>,
}

impl Guard<'_> {
    fn check(&self, step: Step) -> Result<(), CallError> {
        if !step.is_after_commit() && self.cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        match step {
            Step::Rename => {
                self.root.verify()?;
                self.parent.recheck(self.root)?;
                (self.before_rename)()
            }
            Step::CheckInstalled => match self.parent.still_beneath(self.root)? {
                true => Ok(()),
                // The directory was moved out of the workspace under us: the file must not
                // stay installed out there.
                false => Err(failed(ErrorKind::PathOutsideWorkspace)),
            },
            _ => Ok(()),
        }
    }
}

impl Hooks for Guard<'_> {
    fn before(&mut self, step: Step, _temp: Option<&OsStr>) -> io::Result<()> {
        self.check(step).map_err(|e| {
            self.reason = Some(e);
            io::Error::other("refused by the installation guard")
        })
    }
}

impl TypedTool for WriteTool {
    type Input = WriteInput;
    type Valid = ValidWrite;
    type Output = WriteOutput;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create or replace a UTF-8 text file inside the \
        workspace. `path` is relative to the workspace root (for example `src/index.js`); \
        missing parent directories are created; absolute paths, `..` and symlinks that leave \
        the workspace are refused. `content` is the complete new text (at most 65,536 UTF-8 \
        bytes) and replaces the file atomically. Returns {path, bytes}. A target that is a \
        symlink, a directory or another non-regular file is refused with an error record.";
    const HINTS: ToolHints = ToolHints::writes("Write a workspace file", true, true);
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidWriteInput;
    const FAILED: ErrorKind = ErrorKind::WriteFailed;

    fn check(&self, input: WriteInput) -> Result<ValidWrite, ToolError> {
        Self::check_input(input)
    }

    async fn run(
        &self,
        valid: ValidWrite,
        cancel: &CancellationToken,
    ) -> Result<WriteOutput, CallError> {
        self.write(&valid, cancel).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(path: &str, content: String) -> WriteInput {
        WriteInput {
            path: path.into(),
            content,
        }
    }

    fn refusal(r: Result<ValidWrite, ToolError>) -> ErrorKind {
        r.unwrap_err().kind().unwrap()
    }

    #[test]
    fn check_size_at_n_and_n_plus_one() {
        let ok = WriteTool::check_input(input("a", "a".repeat(MAX_WRITE_BYTES))).unwrap();
        assert_eq!(ok.content.len(), MAX_WRITE_BYTES);
        let over = WriteTool::check_input(input("a", "a".repeat(MAX_WRITE_BYTES + 1)));
        assert_eq!(refusal(over), ErrorKind::FileTooLarge);
    }

    #[test]
    fn check_path_before_size() {
        let both = WriteTool::check_input(input("../a", "a".repeat(MAX_WRITE_BYTES + 1)));
        assert_eq!(refusal(both), ErrorKind::InvalidRelativePath);
    }

    #[test]
    fn check_normalizes() {
        let ok = WriteTool::check_input(input("./a//b\\c.txt", String::new())).unwrap();
        assert_eq!(ok.path.as_str(), "a/b/c.txt");
    }
}
