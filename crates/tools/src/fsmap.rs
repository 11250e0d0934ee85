//! Mapping filesystem errors met beneath the root to stable tokens.

use std::io;

use crate::error::{CallError, ErrorKind, ToolError};

/// True when cap-std refused to follow a path out of the root (`..`, an absolute path, or a
/// symlink leaving it, an absolute symlink included). cap-std reports that as a
/// `PermissionDenied` error carrying no OS errno (the kernel's `EXDEV` from openat2
/// `RESOLVE_BENEATH` is translated to the same error).
pub fn is_escape(e: &io::Error) -> bool {
    (e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none())
        || e.raw_os_error() == Some(libc::EXDEV)
}

/// The token for an error met while opening or resolving beneath the root.
pub fn open_error(e: &io::Error, other: ErrorKind) -> CallError {
    let kind = if is_escape(e) {
        ErrorKind::PathOutsideWorkspace
    } else {
        match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => ErrorKind::FileNotFound,
            // A socket cannot be opened; a FIFO opened O_NONBLOCK for writing has no reader.
            Some(libc::ENXIO) | Some(libc::ENODEV) => ErrorKind::FileNotRegular,
            _ => other,
        }
    };
    CallError::Failed(ToolError::failed(kind))
}
