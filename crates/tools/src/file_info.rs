//! `file_info`: what one entry beneath the workspace is, with `lstat` semantics.
//!
//! The parent is opened beneath the root (see the `entry` module) and the leaf is examined
//! with `fstatat(AT_SYMLINK_NOFOLLOW)`: a symlink is reported as a symlink, never followed.
//! `bytes` is the entry's `st_size` (a symlink's is the length of its target text),
//! `modified` its modification time in RFC 3339 UTC to the second (`2026-11-30T14:54:45Z`),
//! `mode` its permission bits as an octal string (`"644"`; setuid, setgid and sticky bits
//! included when set, as `"4755"`).

use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::deny::DeniedPaths;
use crate::entry::{brief_on_root, kind_of, lstat_at, normalize};
use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::parent::{Missing, open_parent};
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::Workspace;

/// The arguments of `file_info`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InfoInput {
    /// Relative path of the entry inside the workspace, with `/` separators.
    pub path: String,
}

/// The record `file_info` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InfoOutput {
    /// The normalized relative path.
    pub path: String,
    /// `file`, `directory`, `symlink` or `other`.
    pub kind: &'static str,
    /// The size in bytes (`st_size`).
    pub bytes: u64,
    /// The modification time, RFC 3339 UTC.
    pub modified: String,
    /// The permission bits in octal, for example `"644"`.
    pub mode: String,
}

/// The `file_info` tool over one workspace.
#[derive(Debug, Clone)]
pub struct FileInfoTool {
    ws: Workspace,
}

impl FileInfoTool {
    /// A file_info tool over an already captured root.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

fn info(
    root: &WorkspaceRoot,
    denied: &DeniedPaths,
    path: &RelPath,
    cancel: &CancellationToken,
) -> Result<InfoOutput, CallError> {
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    root.verify()?;
    denied.check_path(root, path)?;
    let (parent, name) = open_parent(root, path, Missing::Refuse(ErrorKind::ReadFailed))?;
    denied.check_in(root, &parent.dir, name, false)?;
    let st = match lstat_at(&parent.dir, name) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Err(failed(ErrorKind::FileNotFound)),
        Err(_) => return Err(failed(ErrorKind::ReadFailed)),
    };
    Ok(InfoOutput {
        path: path.as_str().to_owned(),
        kind: kind_of(&st),
        bytes: st.st_size.max(0) as u64,
        modified: rfc3339(st.st_mtime, st.st_mtime_nsec),
        mode: format!("{:o}", st.st_mode & 0o7777),
    })
}

/// Seconds since the epoch as RFC 3339 UTC, to the second.
fn rfc3339(secs: i64, _nanos: impl Sized) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
}

impl TypedTool for FileInfoTool {
    type Input = InfoInput;
    type Valid = RelPath;
    type Output = InfoOutput;
    const NAME: &'static str = "file_info";
    const DESCRIPTION: &'static str = "Describe one entry inside the workspace without \
        following a symlink at it. `path` is relative to the workspace root. Returns {path, \
        kind, bytes, modified, mode}: kind is file, directory, symlink or other; modified is \
        RFC 3339 UTC; mode the permission bits in octal such as \"644\".";
    const HINTS: ToolHints = ToolHints::read_only("Describe a workspace entry");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidInfoInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, input: InfoInput) -> Result<RelPath, ToolError> {
        normalize(&input.path)
    }

    async fn run(
        &self,
        valid: RelPath,
        cancel: &CancellationToken,
    ) -> Result<InfoOutput, CallError> {
        brief_on_root(&self.ws, valid, cancel, info).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_utc_to_the_second() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_050_485, 0), "2026-11-30T14:54:45Z");
    }
}
