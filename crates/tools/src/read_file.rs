//! `read_file`: a regular UTF-8 file beneath the workspace, at most 65,536 bytes.

use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use confine_pathgrammar::RelPath;
use confine_rootid::{FileIdentity, WorkspaceRoot};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::deny::DeniedPaths;
use crate::error::{CallError, Cancelled, ErrorKind, ToolError};
use crate::fsmap::open_error;
use crate::tool::{ToolHints, TypedTool};
use confine_beneath::{identity_beneath, open_regular_beneath};

/// The most bytes `read_file` returns; one more is read to detect an oversized file.
pub const MAX_READ_BYTES: usize = 65_536;

/// Bytes read between two cancellation checks.
const CHUNK: usize = 16 * 1024;

/// The smallest read asked for, when the size hint says little is left.
const MIN_READ: usize = 512;

/// The arguments of `read_file`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// Relative path of the file inside the workspace, with `/` separators (for example
    /// `src/main.js`). No `..`, no absolute path, no drive letter.
    pub path: String,
}

/// The record `read_file` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReadOutput {
    /// The normalized relative path.
    pub path: String,
    /// The file's text.
    pub content: String,
    /// Its size in bytes.
    pub bytes: usize,
}

/// The `read_file` tool over one workspace.
#[derive(Debug, Clone)]
pub struct ReadFileTool {
    root: Arc<WorkspaceRoot>,
    denied: Arc<DeniedPaths>,
}

impl ReadFileTool {
    /// A read tool over an already captured root.
    pub(crate) fn new(root: Arc<WorkspaceRoot>) -> Self {
        Self {
            root,
            denied: Arc::default(),
        }
    }

    /// Refuse the paths of `denied` (`PATH_DENIED`; default: none).
    pub(crate) fn deny(mut self, denied: Arc<DeniedPaths>) -> Self {
        self.denied = denied;
        self
    }

    /// Read `path` (already normalized) beneath the root.
    pub fn read(
        &self,
        path: &RelPath,
        cancel: &CancellationToken,
    ) -> Result<ReadOutput, CallError> {
        let buf = read_whole(&self.root, &self.denied, path, MAX_READ_BYTES, cancel)?;
        let bytes = buf.len();
        let content =
            String::from_utf8(buf).map_err(|e| failed(ErrorKind::FileNotUtf8).with_source(e))?;
        Ok(ReadOutput {
            path: path.as_str().to_owned(),
            content,
            bytes,
        })
    }
}

/// The bytes of the regular file at `path` beneath `root`, at most `limit` of them
/// (`FILE_TOO_LARGE` past it; never more than `limit + 1` bytes read).
///
/// The root is verified first; the file is located with `O_PATH` and checked to be a regular
/// file before it is opened (a device or a FIFO is never opened; non-blocking all the same);
/// after the read the name must still lead, beneath the root, to the object that was read
/// (`PATH_CHANGED_DURING_READ`). A denied path is refused before the open and judged again
/// after the read (`PATH_DENIED`, see [`crate::deny`]). Cancellation is checked before, during and after the read.
/// `read_file` and `read_media` both read this way.
pub(crate) fn read_whole(
    root: &WorkspaceRoot,
    denied: &DeniedPaths,
    path: &RelPath,
    limit: usize,
    cancel: &CancellationToken,
) -> Result<Vec<u8>, CallError> {
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    root.verify()?;
    denied.check_path(root, path)?;
    let rel = Path::new(path.as_str());
    let dir = root.dir();
    let (mut file, st) = open_regular_beneath(dir, rel).map_err(|e| match e.raw_os_error() {
        Some(libc::ESTALE) => failed(ErrorKind::PathChangedDuringRead),
        _ => open_error(&e, ErrorKind::ReadFailed),
    })?;
    // A regular file (checked before it was opened), of this identity and size hint.
    let opened = FileIdentity::of(&st);
    let size = u64::try_from(st.st_size).unwrap_or(0);

    let buf = read_bounded_to(&mut file, size, limit, cancel, || {})?;

    let now = identity_beneath(dir, rel)
        .map_err(|e| failed(ErrorKind::PathChangedDuringRead).with_source(e))?;
    if now != opened {
        return Err(failed(ErrorKind::PathChangedDuringRead));
    }
    denied.check_read(root, rel, opened)?;
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    Ok(buf)
}

/// Read at most `MAX_READ_BYTES + 1` bytes, checking `cancel` before every read; `after_read`
/// runs after each (a seam for tests).
///
/// `size` is a hint, never trusted: reading goes on until end of file or one byte past the
/// limit. It only lets a file of the size it claims be read in one `read`: a short read that
/// ends exactly at the reported size is end of file for a regular file.
pub(crate) fn read_bounded(
    file: &mut impl Read,
    size: u64,
    cancel: &CancellationToken,
    after_read: impl FnMut(),
) -> Result<Vec<u8>, CallError> {
    read_bounded_to(file, size, MAX_READ_BYTES, cancel, after_read)
}

/// [`read_bounded`] with another limit: at most `limit + 1` bytes are ever read, and a file
/// over `limit` bytes is `FILE_TOO_LARGE` (`read_media` reads images up to its own limit).
pub(crate) fn read_bounded_to(
    file: &mut impl Read,
    size: u64,
    limit: usize,
    cancel: &CancellationToken,
    mut after_read: impl FnMut(),
) -> Result<Vec<u8>, CallError> {
    if size > limit as u64 {
        return Err(failed(ErrorKind::FileTooLarge));
    }
    let size = size as usize;
    let mut buf = Vec::with_capacity(size + 1);
    loop {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let room = limit + 1 - buf.len();
        let expected = size.saturating_sub(buf.len()) + 1;
        let want = room.min(CHUNK).min(expected.max(MIN_READ));
        let start = buf.len();
        buf.resize(start + want, 0);
        let n = loop {
            match file.read(&mut buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(failed(ErrorKind::ReadFailed)),
            }
        };
        buf.truncate(start + n);
        after_read();
        if buf.len() > limit {
            return Err(failed(ErrorKind::FileTooLarge));
        }
        if n == 0 || (n < want && buf.len() == size) {
            return Ok(buf);
        }
    }
}

/// The opened file's metadata and identity, once it is known to be a regular file
/// (`FILE_NOT_REGULAR` otherwise; `READ_FAILED` when it cannot be read).
pub(crate) fn regular_file(
    file: &std::fs::File,
) -> Result<(std::fs::Metadata, FileIdentity), CallError> {
    let meta = file
        .metadata()
        .map_err(|e| failed(ErrorKind::ReadFailed).with_source(e))?;
    if !meta.is_file() {
        return Err(failed(ErrorKind::FileNotRegular));
    }
    let opened = FileIdentity::of_std(&meta);
    Ok((meta, opened))
}

fn failed(kind: ErrorKind) -> CallError {
    CallError::Failed(ToolError::failed(kind))
}

impl TypedTool for ReadFileTool {
    type Input = ReadInput;
    type Valid = RelPath;
    type Output = ReadOutput;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a UTF-8 text file inside the workspace. `path` is \
        relative to the workspace root (for example `src/index.js`); absolute paths, `..` and \
        symlinks that leave the workspace are refused. Returns {path, content, bytes}. Files \
        over 65,536 bytes, non-UTF-8 files and non-regular files are refused with an error \
        record.";
    const HINTS: ToolHints = ToolHints::read_only("Read a workspace file");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidReadInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, input: ReadInput) -> Result<RelPath, ToolError> {
        confine_pathgrammar::normalize(&input.path)
            .map_err(|e| ToolError::invalid(ErrorKind::InvalidRelativePath).with_source(e))
    }

    async fn run(
        &self,
        valid: RelPath,
        cancel: &CancellationToken,
    ) -> Result<ReadOutput, CallError> {
        // Opening and reading block: off the async workers (see the `blocking` module).
        let tool = self.clone();
        let cancel = cancel.clone();
        off_reactor(move || tool.read(&valid, &cancel)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_cancelled_during_the_read_stops_between_chunks() {
        let data = vec![b'a'; MAX_READ_BYTES];
        let cancel = CancellationToken::new();
        let mut reads = 0;
        let got = read_bounded(&mut &data[..], data.len() as u64, &cancel, || {
            reads += 1;
            cancel.cancel();
        });
        assert!(matches!(got, Err(CallError::Cancelled(_))));
        assert_eq!(reads, 1, "the token is checked before the second chunk");
    }

    #[test]
    fn read_bounded_ignores_a_size_hint_that_lies() {
        let cancel = CancellationToken::new();
        // Claims 0 bytes (as procfs files do) but holds more: all of it is read.
        let data = b"more than claimed".to_vec();
        let got = read_bounded(&mut &data[..], 0, &cancel, || {}).unwrap();
        assert_eq!(got, data);
        // Claims less than the limit but holds one byte more than it: refused.
        let big = vec![b'a'; MAX_READ_BYTES + 1];
        let got = read_bounded(&mut &big[..], 10, &cancel, || {});
        assert!(
            matches!(got, Err(CallError::Failed(e)) if e.kind() == Some(ErrorKind::FileTooLarge))
        );
        // Exactly the limit, with an honest hint and a lying one.
        let full = vec![b'a'; MAX_READ_BYTES];
        assert_eq!(
            read_bounded(&mut &full[..], MAX_READ_BYTES as u64, &cancel, || {})
                .unwrap()
                .len(),
            MAX_READ_BYTES
        );
        assert_eq!(
            read_bounded(&mut &full[..], 1, &cancel, || {})
                .unwrap()
                .len(),
            MAX_READ_BYTES
        );
    }
}
