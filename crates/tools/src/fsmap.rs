//! Mapping filesystem errors met beneath the root to stable tokens.

use std::io;
use std::path::Path;

use confine_beneath::{FsErrorKind, Symlinks};
use rustix::fs::OFlags;

use crate::error::{CallError, ErrorKind, ToolError};

/// True when a resolution beneath the root refused to leave it (`..`, an absolute path, or a
/// symlink leaving it, an absolute symlink included): the kernel's `EXDEV` from openat2
/// `RESOLVE_BENEATH`, or cap-std's refusal.
pub fn is_escape(e: &io::Error) -> bool {
    FsErrorKind::of(e) == FsErrorKind::Escape
}

/// The token for an error met while opening or resolving beneath the root, symlinks followed
/// where they stay inside (so `ELOOP` is a loop or a chain past the kernel's 40 links:
/// `SYMLINK_LOOP`, in every tool).
pub fn open_error(e: &io::Error, other: ErrorKind) -> CallError {
    let kind = match FsErrorKind::of(e) {
        FsErrorKind::Escape => ErrorKind::PathOutsideWorkspace,
        FsErrorKind::NotFound | FsErrorKind::NotDirectory => ErrorKind::FileNotFound,
        // A socket cannot be opened; a FIFO opened O_NONBLOCK for writing has no reader.
        FsErrorKind::NotRegular => ErrorKind::FileNotRegular,
        FsErrorKind::Symlink => ErrorKind::SymlinkLoop,
        _ => other,
    };
    CallError::Failed(ToolError::failed(kind))
}

/// Open the directory `rel` beneath the root's handle `dir`, symlinks followed while they stay
/// inside, through the descriptor layer's one resolution (`openat2`, or its user-space twin
/// where `openat2` is missing or filtered, which answers as the kernel does), never cap-std's
/// own fallback, so every tool meets the same answers in every mode. The handle is `O_PATH`
/// (what cap-std gave before): a parent is only ever a place to open, create, rename or
/// unlink in, which needs search permission alone, so a write-only drop box (mode 0300) is
/// written as the kernel allows.
pub(crate) fn open_dir_beneath(dir: &cap_std::fs::Dir, rel: &Path) -> io::Result<cap_std::fs::Dir> {
    let flags = OFlags::PATH | OFlags::DIRECTORY;
    let fd = confine_beneath::open_beneath(dir, rel, flags, Symlinks::FollowInside)?;
    Ok(cap_std::fs::Dir::from_std_file(std::fs::File::from(fd)))
}
