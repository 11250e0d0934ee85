//! The readers the reading tools share: a whole regular file beneath the root, bounded
//! (`read_file`, `read_media`), and a bounded read of an open file (`edit_file`).

use std::io::{self, Read};
use std::path::Path;

use confine_beneath::{identity_beneath, open_regular_beneath, open_regular_beneath_cached};
use confine_pathgrammar::RelPath;
use confine_rootid::{FileId, WorkspaceRoot};
use tokio_util::sync::CancellationToken;

use crate::deny::DeniedPaths;
use crate::error::{CallError, Cancelled, ErrorKind, failed};
use crate::fsmap::open_error;

/// The most bytes `read_file` returns; one more is read to detect an oversized file.
pub const MAX_READ_BYTES: usize = 65_536;

/// Bytes read between two cancellation checks.
const CHUNK: usize = 16 * 1024;

/// The smallest read asked for, when the size hint says little is left.
const MIN_READ: usize = 512;

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
    read_whole_as(root, denied, path, limit, cancel, Waiting::Allowed)
}

/// [`read_whole`] done only where the kernel answers from its caches: the name resolved with
/// `RESOLVE_CACHED` ([`open_regular_beneath_cached`]) and the bytes read with `RWF_NOWAIT`,
/// so that nothing waits for a disk or a server. `None` where the kernel would have to wait
/// (a name or data not in its caches, a file system that cannot tell) and on every failure:
/// the caller then reads with [`read_whole`], off the async worker, and gives its answer.
/// Every check of [`read_whole`] is made here too.
pub(crate) fn read_whole_cached(
    root: &WorkspaceRoot,
    denied: &DeniedPaths,
    path: &RelPath,
    limit: usize,
    cancel: &CancellationToken,
) -> Option<Vec<u8>> {
    read_whole_as(root, denied, path, limit, cancel, Waiting::Never).ok()
}

/// Whether a read may wait for a disk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Waiting {
    Allowed,
    Never,
}

fn read_whole_as(
    root: &WorkspaceRoot,
    denied: &DeniedPaths,
    path: &RelPath,
    limit: usize,
    cancel: &CancellationToken,
    waiting: Waiting,
) -> Result<Vec<u8>, CallError> {
    if cancel.is_cancelled() {
        return Err(Cancelled.into());
    }
    root.verify()?;
    denied.check_path(root, path)?;
    let rel = Path::new(path.as_str());
    let dir = root.dir();
    let open = match waiting {
        Waiting::Allowed => open_regular_beneath,
        Waiting::Never => open_regular_beneath_cached,
    };
    let (mut file, st) = open(dir, rel).map_err(|e| match e.raw_os_error() {
        Some(libc::ESTALE) => failed(ErrorKind::PathChangedDuringRead),
        _ => open_error(&e, ErrorKind::ReadFailed),
    })?;
    // A regular file (checked before it was opened), of this identity and size hint.
    let opened = FileId::of(&st);
    let size = u64::try_from(st.st_size).unwrap_or(0);

    let buf = match waiting {
        Waiting::Allowed => read_bounded_to(&mut file, size, limit, cancel, || {})?,
        Waiting::Never => {
            let mut cached = NoWait { file: &file, at: 0 };
            read_bounded_to(&mut cached, size, limit, cancel, || {})?
        }
    };

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

/// A file read from the page cache only (`preadv2` with `RWF_NOWAIT`, from its own offset):
/// data the kernel would have to fetch is `EAGAIN`, as is a file system that cannot tell.
struct NoWait<'a> {
    file: &'a std::fs::File,
    at: u64,
}

impl Read for NoWait<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = rustix::io::preadv2(
            self.file,
            &mut [io::IoSliceMut::new(buf)],
            self.at,
            rustix::io::ReadWriteFlags::NOWAIT,
        )?;
        self.at += n as u64;
        Ok(n)
    }
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
pub(crate) fn regular_file(file: &std::fs::File) -> Result<(std::fs::Metadata, FileId), CallError> {
    let meta = file
        .metadata()
        .map_err(|e| failed(ErrorKind::ReadFailed).with_source(e))?;
    if !meta.is_file() {
        return Err(failed(ErrorKind::FileNotRegular));
    }
    let opened = FileId::of_std(&meta);
    Ok((meta, opened))
}
