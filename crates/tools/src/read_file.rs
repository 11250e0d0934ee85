//! `read_file`: a regular UTF-8 file beneath the workspace, at most 65,536 bytes.

use confine_pathgrammar::RelPath;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::brief;
use crate::error::{CallError, ErrorKind, ToolError, failed};
use crate::read::read_whole;
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::Workspace;

pub use crate::read::MAX_READ_BYTES;

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
    ws: Workspace,
}

impl ReadFileTool {
    /// A read tool over an already captured root.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }

    /// Read `path` (already normalized) beneath the root.
    pub fn read(
        &self,
        path: &RelPath,
        cancel: &CancellationToken,
    ) -> Result<ReadOutput, CallError> {
        let buf = read_whole(&self.ws.root, &self.ws.denied, path, MAX_READ_BYTES, cancel)?;
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
        // At most 64 KiB and a dozen system calls: inline on a local file system, off the
        // async workers elsewhere (see the `blocking` module).
        let tool = self.clone();
        let cancel = cancel.clone();
        brief(self.ws.local, move || tool.read(&valid, &cancel)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::read_bounded;

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
