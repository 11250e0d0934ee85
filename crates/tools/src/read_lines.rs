//! `read_lines`: a window of lines of a UTF-8 text file of any size beneath the workspace,
//! streamed.
//!
//! The file is opened as `read_file` opens it (beneath the root, non-blocking, a regular file
//! only) and read through a buffer, one line at a time, so its size does not matter: lines
//! before `offset` are skipped without being kept, and at most [`MAX_LINE_CHARS`] characters
//! of a line are ever kept (the rest of a longer line is skipped up to its end). A line ends
//! at `\n`; the text returned keeps each line's own ending (`\n` or `\r\n`; a cut line ends in
//! `\n`; the file's last line may have none). Lines are numbered from 1.
//!
//! Strict UTF-8: every byte returned must be UTF-8 (`FILE_NOT_UTF8`), and a line is cut
//! before the character that would pass the limit. Skipped lines and the part of a line past
//! the cut are not decoded. At most [`MAX_READ_LINES`] lines and [`MAX_LINES_BYTES`] bytes of
//! text are returned; `truncated` says that more lines follow. An `offset` past the end gives
//! no text, `endLine` one less than `startLine`. After reading, the name must still lead to
//! the file that was read (`PATH_CHANGED_DURING_READ`).
//!
//! Bounded in time whatever the file does (`crate::scan`): at most the size the file had when
//! the call began is read, so a file that keeps growing cannot hold the call; holes are
//! skipped, not read (an `offset` past the end of a 100 GiB sparse file answers at once), each
//! read as one NUL byte: a hole holds no line end, so line numbers are those of the file as
//! written, and the line a hole lies in shows one U+0000 where the hole was. Cancellation is
//! checked before every read of at most 64 KiB, also inside one long line.

use std::io::{self, BufRead, BufReader};
use std::path::Path;

use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::deny::DeniedPaths;
use crate::entry::{normalize, run_on_root};
use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::fsmap::open_error;
use crate::scan::{ScanReader, is_cancelled};
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::Workspace;
use confine_beneath::{identity_beneath, open_regular_beneath};

/// The most lines one call returns (and the default `limit`).
pub const MAX_READ_LINES: u32 = 2_000;
/// The most characters of one line returned; the rest of the line is cut.
pub const MAX_LINE_CHARS: usize = 2_000;
/// The most bytes of text one call returns.
pub const MAX_LINES_BYTES: usize = 65_536;

/// The bytes kept of one line: enough for [`MAX_LINE_CHARS`] characters of up to 4 bytes.
const KEEP_BYTES: usize = MAX_LINE_CHARS * 4;

/// The arguments of `read_lines`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadLinesInput {
    /// Relative path of the file inside the workspace, with `/` separators.
    pub path: String,
    /// The first line to return, counting from 1 (default 1).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// How many lines to return, 1 to 2,000 (default 2,000).
    #[serde(default)]
    #[schemars(range(min = 1, max = 2000))]
    pub limit: Option<u32>,
}

/// The record `read_lines` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadLinesOutput {
    /// The normalized relative path.
    pub path: String,
    /// The number of the first line asked for.
    pub start_line: u64,
    /// The number of the last line returned (`start_line - 1` when none).
    pub end_line: u64,
    /// The lines, each with its own line ending.
    pub text: String,
    /// More lines follow.
    pub truncated: bool,
}

/// Arguments that passed validation.
#[derive(Clone, Debug)]
pub struct ValidReadLines {
    path: RelPath,
    offset: u64,
    limit: u32,
}

/// The `read_lines` tool over one workspace.
#[derive(Debug, Clone)]
pub struct ReadLinesTool {
    ws: Workspace,
}

impl ReadLinesTool {
    /// A read_lines tool over an already captured root.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

/// One line read from `reader`: its first `cap` bytes in `keep` (without the `\n`), whether
/// more was cut, and whether it ended with `\n`. `None` at end of file.
fn next_line(
    reader: &mut impl BufRead,
    keep: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<(bool, bool)>> {
    keep.clear();
    let mut any = false;
    let mut cut = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(any.then_some((cut, false)));
        }
        any = true;
        let newline = buf.iter().position(|&b| b == b'\n');
        let content = &buf[..newline.unwrap_or(buf.len())];
        let room = cap.saturating_sub(keep.len());
        if content.len() > room {
            cut = true;
        }
        keep.extend_from_slice(&content[..content.len().min(room)]);
        let used = newline.map_or(buf.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(Some((cut, true)));
        }
    }
}

/// The returned form of a kept line: strict UTF-8, at most [`MAX_LINE_CHARS`] characters,
/// with its line ending.
fn render(keep: &[u8], cut: bool, newline: bool) -> Result<String, CallError> {
    let mut cut = cut;
    let mut bytes = keep;
    let mut crlf = false;
    if newline && !cut && bytes.last() == Some(&b'\r') {
        bytes = &bytes[..bytes.len() - 1];
        crlf = true;
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        // A character split by the byte cap: the cut falls before it.
        Err(e) if cut && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).expect("a valid prefix")
        }
        Err(_) => return Err(failed(ErrorKind::FileNotUtf8)),
    };
    let mut out = match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => {
            cut = true;
            text[..at].to_owned()
        }
        None => text.to_owned(),
    };
    if crlf && !cut {
        out.push_str("\r\n");
    } else if newline || cut {
        out.push('\n');
    }
    Ok(out)
}

fn read_lines(
    root: &WorkspaceRoot,
    denied: &DeniedPaths,
    valid: &ValidReadLines,
    cancel: &CancellationToken,
) -> Result<ReadLinesOutput, CallError> {
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    root.verify()?;
    denied.check_path(root, &valid.path)?;
    let rel = Path::new(valid.path.as_str());
    let (file, st) =
        open_regular_beneath(root.dir(), rel).map_err(|e| open_error(&e, ErrorKind::ReadFailed))?;
    // A regular file (checked before it was opened) of this identity.
    let opened = confine_beneath::FileId::of(&st);
    let mut reader = BufReader::with_capacity(64 * 1024, ScanReader::new(file, &st, cancel));
    let mut keep = Vec::with_capacity(KEEP_BYTES);
    let mut text = String::new();
    let mut line: u64 = 0;
    let mut end_line = valid.offset - 1;
    let mut returned: u32 = 0;
    let mut truncated = false;
    loop {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let skipping = line + 1 < valid.offset;
        let cap = if skipping { 0 } else { KEEP_BYTES };
        let Some((cut, newline)) = next_line(&mut reader, &mut keep, cap).map_err(|e| {
            if is_cancelled(&e) {
                CallError::from(Cancelled)
            } else {
                failed(ErrorKind::ReadFailed).with_source(e)
            }
        })?
        else {
            break;
        };
        line += 1;
        if skipping {
            continue;
        }
        if returned == valid.limit {
            truncated = true;
            break;
        }
        let piece = render(&keep, cut, newline)?;
        if text.len() + piece.len() > MAX_LINES_BYTES {
            truncated = true;
            break;
        }
        text.push_str(&piece);
        returned += 1;
        end_line = line;
    }
    let now = identity_beneath(root.dir(), rel)
        .map_err(|e| failed(ErrorKind::PathChangedDuringRead).with_source(e))?;
    if now != opened {
        return Err(failed(ErrorKind::PathChangedDuringRead));
    }
    denied.check_read(root, rel, opened)?;
    Ok(ReadLinesOutput {
        path: valid.path.as_str().to_owned(),
        start_line: valid.offset,
        end_line,
        text,
        truncated,
    })
}

impl TypedTool for ReadLinesTool {
    type Input = ReadLinesInput;
    type Valid = ValidReadLines;
    type Output = ReadLinesOutput;
    const NAME: &'static str = "read_lines";
    const DESCRIPTION: &'static str = "Read a window of lines of a UTF-8 text file of any size \
        inside the workspace. `path` is relative to the workspace root; `offset` is the first \
        line (from 1, default 1), `limit` how many lines (1 to 2,000, default 2,000). Returns \
        {path, startLine, endLine, text, truncated}: text holds the lines with their line \
        endings (at most 65,536 bytes; a line over 2,000 characters is cut), and truncated \
        says more lines follow (read on from endLine + 1).";
    const HINTS: ToolHints = ToolHints::read_only("Read lines of a workspace file");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidReadLinesInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, input: ReadLinesInput) -> Result<ValidReadLines, ToolError> {
        let path = normalize(&input.path)?;
        let offset = input.offset.unwrap_or(1);
        let limit = input.limit.unwrap_or(MAX_READ_LINES);
        if offset == 0 || limit == 0 || limit > MAX_READ_LINES {
            return Err(ToolError::invalid(ErrorKind::InvalidReadLinesInput));
        }
        Ok(ValidReadLines {
            path,
            offset,
            limit,
        })
    }

    async fn run(
        &self,
        valid: ValidReadLines,
        cancel: &CancellationToken,
    ) -> Result<ReadLinesOutput, CallError> {
        run_on_root(&self.ws.root, &self.ws.denied, valid, cancel, read_lines).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(data: &[u8], cap: usize) -> Vec<(Vec<u8>, bool, bool)> {
        let mut reader = BufReader::with_capacity(7, data);
        let mut keep = Vec::new();
        let mut out = Vec::new();
        while let Some((cut, nl)) = next_line(&mut reader, &mut keep, cap).unwrap() {
            out.push((keep.clone(), cut, nl));
        }
        out
    }

    #[test]
    fn lines_are_split_at_newlines_across_buffer_refills() {
        let got = lines(b"alpha\r\nbeta gamma delta\n\nlast", 100);
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], (b"alpha\r".to_vec(), false, true));
        assert_eq!(got[1], (b"beta gamma delta".to_vec(), false, true));
        assert_eq!(got[2], (b"".to_vec(), false, true));
        assert_eq!(got[3], (b"last".to_vec(), false, false));
        assert!(lines(b"", 100).is_empty());
        assert_eq!(lines(b"x\n", 100).len(), 1);
    }

    #[test]
    fn a_long_line_keeps_its_cap_and_skips_the_rest() {
        let got = lines(b"0123456789abcdef\nnext\n", 10);
        assert_eq!(got[0], (b"0123456789".to_vec(), true, true));
        assert_eq!(got[1], (b"next".to_vec(), false, true));
    }

    #[test]
    fn render_cuts_at_n_chars_and_keeps_crlf() {
        let n = "é".repeat(MAX_LINE_CHARS);
        assert_eq!(render(n.as_bytes(), false, true).unwrap(), format!("{n}\n"));
        let n1 = "é".repeat(MAX_LINE_CHARS + 1);
        assert_eq!(
            render(n1.as_bytes(), false, false).unwrap(),
            format!("{n}\n")
        );
        assert_eq!(render(b"a\r", false, true).unwrap(), "a\r\n");
        assert_eq!(render(b"a", false, false).unwrap(), "a");
        // A 4-byte character split by the byte cap.
        let split = "😀".as_bytes();
        assert_eq!(render(&split[..2], true, true).unwrap(), "\n");
        assert!(render(b"\xff", false, true).is_err());
    }
}
