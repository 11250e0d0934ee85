//! `read_file`: a regular UTF-8 file beneath the workspace, at most 65,536 bytes.

use confine_pathgrammar::RelPath;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::error::{CallError, ErrorKind, ToolError, failed};
use crate::read::{read_whole, read_whole_cached};
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
        Self::output(path, buf)
    }

    /// [`ReadFileTool::read`] where the kernel answers from its caches alone (see
    /// [`read_whole_cached`]); `None` where it would wait, or on any failure, for `read` to
    /// give the answer.
    fn read_cached(&self, path: &RelPath, cancel: &CancellationToken) -> Option<ReadOutput> {
        let buf = read_whole_cached(&self.ws.root, &self.ws.denied, path, MAX_READ_BYTES, cancel)?;
        Self::output(path, buf).ok()
    }

    /// The record of the bytes read at `path` (`FILE_NOT_UTF8` unless they are UTF-8).
    fn output(path: &RelPath, buf: Vec<u8>) -> Result<ReadOutput, CallError> {
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
        // At most 64 KiB and a dozen system calls: on a local file system, read on the async
        // worker when the kernel has the name and the bytes in its caches; otherwise (and
        // for every failure's answer) off the async workers (see the `blocking` module).
        if self.ws.local
            && let Some(out) = self.read_cached(&valid, cancel)
        {
            return Ok(out);
        }
        let tool = self.clone();
        let cancel = cancel.clone();
        off_reactor(move || tool.read(&valid, &cancel)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name the kernel let go of (its dentries dropped) is not opened by the cached open,
    /// and once the ordinary open has looked it up, it is. Dropping the dentries
    /// (`/proc/sys/vm/drop_caches`) needs root with `CAP_SYS_ADMIN` and a file system that
    /// lets them go (not tmpfs); elsewhere the test is recorded as not run.
    #[test]
    fn a_cached_open_opens_only_what_the_kernel_holds() {
        use confine_beneath::{open_regular_beneath, open_regular_beneath_cached};
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/a.txt"), "cached").unwrap();
        let dir =
            cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let rel = std::path::Path::new("sub/a.txt");
        open_regular_beneath_cached(&dir, rel).expect("just made: held");
        let tmpfs = rustix::fs::fstatfs(&dir).is_ok_and(|s| s.f_type == 0x0102_1994);
        rustix::fs::sync();
        if tmpfs || std::fs::write("/proc/sys/vm/drop_caches", "2").is_err() {
            testkit::skip::not_run(
                "a_cached_open_opens_only_what_the_kernel_holds",
                "the dentries cannot be dropped here (root with CAP_SYS_ADMIN, not on tmpfs)",
            );
            return;
        }
        let err = open_regular_beneath_cached(&dir, rel).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EAGAIN), "{err}");
        open_regular_beneath(&dir, rel).unwrap();
        open_regular_beneath_cached(&dir, rel).unwrap();
    }

    /// A file whose bytes are in the page cache is read on the worker, with the answer the
    /// ordinary read gives; one whose bytes the kernel let go of (`posix_fadvise(DONTNEED)`
    /// after a sync) is not: the attempt gives up and the ordinary read answers. On tmpfs,
    /// whose pages are the file itself, the second half cannot run and says so.
    #[test]
    fn only_what_the_kernel_holds_is_read_on_the_worker() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "held").unwrap();
        let root = crate::factory::capture_root(tmp.path()).unwrap();
        let tool = ReadFileTool::new(Workspace::with_defaults(root));
        let path = confine_pathgrammar::normalize("a.txt").unwrap();
        let cancel = CancellationToken::new();
        let cached = tool
            .read_cached(&path, &cancel)
            .expect("just written: held");
        assert_eq!(cached, tool.read(&path, &cancel).unwrap());
        // A failure is never answered by the attempt: the ordinary read gives its token.
        let missing = confine_pathgrammar::normalize("missing.txt").unwrap();
        assert!(tool.read_cached(&missing, &cancel).is_none());

        let file = std::fs::File::open(tmp.path().join("a.txt")).unwrap();
        let tmpfs = rustix::fs::fstatfs(&file).is_ok_and(|s| s.f_type == 0x0102_1994);
        if tmpfs {
            testkit::skip::not_run(
                "only_what_the_kernel_holds_is_read_on_the_worker",
                "its second half (bytes the kernel let go of) cannot run on tmpfs; the first \
                 half ran",
            );
            return;
        }
        file.sync_all().unwrap();
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        assert!(
            tool.read_cached(&path, &cancel).is_none(),
            "its bytes are not in the page cache: not read on the worker"
        );
        assert_eq!(tool.read(&path, &cancel).unwrap().content, "held");
        assert!(
            tool.read_cached(&path, &cancel).is_some(),
            "read once, held again"
        );
    }
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
