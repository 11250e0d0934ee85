//! Mapping filesystem errors met beneath the root to stable tokens.

use std::io;

use confine_beneath::FsErrorKind;

use crate::error::{CallError, ErrorKind, ToolError};

/// True when a resolution beneath the root refused to leave it (`..`, an absolute path, or a
/// symlink leaving it, an absolute symlink included): the kernel's `EXDEV` from openat2
/// `RESOLVE_BENEATH`, or cap-std's refusal.
pub fn is_escape(e: &io::Error) -> bool {
    FsErrorKind::of(e) == FsErrorKind::Escape
}

/// The token for an error met while opening or resolving beneath the root.
pub fn open_error(e: &io::Error, other: ErrorKind) -> CallError {
    let kind = match FsErrorKind::of(e) {
        FsErrorKind::Escape => ErrorKind::PathOutsideWorkspace,
        FsErrorKind::NotFound | FsErrorKind::NotDirectory => ErrorKind::FileNotFound,
        // A socket cannot be opened; a FIFO opened O_NONBLOCK for writing has no reader.
        FsErrorKind::NotRegular => ErrorKind::FileNotRegular,
        _ => other,
    };
    CallError::Failed(ToolError::failed(kind))
}
