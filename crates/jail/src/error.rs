//! The crate's error: an opaque [`Error`] and its stable [`ErrorKind`].

use std::fmt;
use std::io;

/// Why a path was refused. The string of [`ErrorKind::code`] is the stable contract; callers
/// branch on the kind, never on message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`resolve_in_sandbox`](crate::resolve_in_sandbox): the path lands outside the sandbox root.
    OutsideSandbox,
    /// [`resolve_in_sandbox`](crate::resolve_in_sandbox): the task directory cannot be
    /// canonicalized or is not a directory.
    InvalidRoot,
    /// [`FileJail`](crate::FileJail): the path lands outside every read bound.
    OutsideReadBounds,
    /// [`FileJail`](crate::FileJail): the path lands outside every write bound.
    OutsideWriteBounds,
    /// [`FileJail`](crate::FileJail): the path lands within a deny bound (deny beats allow).
    Denied,
    /// A read target does not exist (a dangling symlink counts as missing).
    NotFound,
    /// A write target's parent directory does not exist.
    ParentNotFound,
    /// A write target's parent exists but is not a directory.
    ParentNotDirectory,
    /// Resolving the path followed more than 40 symlinks (a loop, or a chain too long).
    SymlinkLoop,
    /// The path cannot name a file at all (it holds a NUL byte).
    InvalidPath,
    /// [`FileJail::new`](crate::FileJail::new): a bound or the cwd cannot be resolved or opened.
    InvalidBound,
    /// `open_for_read` / `open_for_write`: the object is not a regular file (a directory, FIFO,
    /// socket or device), refused without blocking.
    NotRegular,
    /// `open_for_read` / `open_for_write`: the tree changed between the decision and the open
    /// (a symlink or a moved directory appeared on the resolved path); nothing was returned.
    Changed,
    /// Any other operating-system failure while resolving or opening.
    Io,
}

impl ErrorKind {
    /// Every kind, in declaration order (for tables and tests).
    pub const ALL: [ErrorKind; 14] = [
        Self::OutsideSandbox,
        Self::InvalidRoot,
        Self::OutsideReadBounds,
        Self::OutsideWriteBounds,
        Self::Denied,
        Self::NotFound,
        Self::ParentNotFound,
        Self::ParentNotDirectory,
        Self::SymlinkLoop,
        Self::InvalidPath,
        Self::InvalidBound,
        Self::NotRegular,
        Self::Changed,
        Self::Io,
    ];

    /// The stable token; never renamed once released.
    pub const fn code(self) -> &'static str {
        match self {
            Self::OutsideSandbox => "PATH_OUTSIDE_SANDBOX",
            Self::InvalidRoot => "SANDBOX_ROOT_INVALID",
            Self::OutsideReadBounds => "PATH_OUTSIDE_READ_BOUNDS",
            Self::OutsideWriteBounds => "PATH_OUTSIDE_WRITE_BOUNDS",
            Self::Denied => "PATH_DENIED",
            Self::NotFound => "PATH_NOT_FOUND",
            Self::ParentNotFound => "PARENT_NOT_FOUND",
            Self::ParentNotDirectory => "PARENT_NOT_DIRECTORY",
            Self::SymlinkLoop => "SYMLINK_LOOP",
            Self::InvalidPath => "INVALID_PATH",
            Self::InvalidBound => "INVALID_BOUND",
            Self::NotRegular => "NOT_REGULAR_FILE",
            Self::Changed => "PATH_CHANGED",
            Self::Io => "IO_FAILED",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The error of every fallible operation in this crate. Its message is the kind's token
/// (never a host path); the operating-system error, when there is one, is the `source`.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error(Box<Repr>);

#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
struct Repr {
    kind: ErrorKind,
    #[source]
    source: Option<io::Error>,
}

impl Error {
    /// The stable kind of this error.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// Shorthand for `self.kind().code()`.
    pub fn code(&self) -> &'static str {
        self.0.kind.code()
    }

    pub(crate) fn new(kind: ErrorKind) -> Self {
        Self(Box::new(Repr { kind, source: None }))
    }

    pub(crate) fn with_source(kind: ErrorKind, source: impl Into<io::Error>) -> Self {
        Self(Box::new(Repr {
            kind,
            source: Some(source.into()),
        }))
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Self::new(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_pinned() {
        let codes: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(
            codes,
            [
                "PATH_OUTSIDE_SANDBOX",
                "SANDBOX_ROOT_INVALID",
                "PATH_OUTSIDE_READ_BOUNDS",
                "PATH_OUTSIDE_WRITE_BOUNDS",
                "PATH_DENIED",
                "PATH_NOT_FOUND",
                "PARENT_NOT_FOUND",
                "PARENT_NOT_DIRECTORY",
                "SYMLINK_LOOP",
                "INVALID_PATH",
                "INVALID_BOUND",
                "NOT_REGULAR_FILE",
                "PATH_CHANGED",
                "IO_FAILED",
            ]
        );
    }

    #[test]
    fn message_is_the_code_and_source_is_kept() {
        let e = Error::with_source(ErrorKind::Io, io::Error::other("boom"));
        assert_eq!(e.to_string(), "IO_FAILED");
        assert_eq!(e.code(), "IO_FAILED");
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(Error::from(ErrorKind::Denied).kind(), ErrorKind::Denied);
    }
}
