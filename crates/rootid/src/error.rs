//! The error of root capture and verification.

use std::io;

/// What went wrong with a workspace root. The string of [`RootErrorKind::code`] is the stable
/// contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RootErrorKind {
    /// The path given cannot name a root (empty, NUL, unreadable).
    Invalid,
    /// Nothing exists at the path given.
    NotFound,
    /// The path exists but is not a directory.
    NotDirectory,
    /// The root no longer is the directory that was captured.
    Changed,
}

impl RootErrorKind {
    /// The stable token; never renamed once released.
    pub const fn code(self) -> &'static str {
        match self {
            Self::Invalid => "INVALID_WORKSPACE_ROOT",
            Self::NotFound => "WORKSPACE_ROOT_NOT_FOUND",
            Self::NotDirectory => "WORKSPACE_ROOT_NOT_DIRECTORY",
            Self::Changed => "WORKSPACE_ROOT_CHANGED",
        }
    }
}

/// An error capturing or verifying a root. Its message is the token alone, so it never carries a
/// host path; the underlying I/O error, if any, is the source.
#[derive(Debug, thiserror::Error)]
#[error("{}", .kind.code())]
pub struct RootError {
    kind: RootErrorKind,
    #[source]
    source: Option<io::Error>,
}

impl RootError {
    pub(crate) fn new(kind: RootErrorKind, source: Option<io::Error>) -> Self {
        Self { kind, source }
    }

    /// The kind, to branch on.
    pub fn kind(&self) -> RootErrorKind {
        self.kind
    }

    /// The stable token.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

#[cfg(test)]
mod tests {
    use super::RootErrorKind::*;

    #[test]
    fn codes_are_pinned() {
        assert_eq!(Invalid.code(), "INVALID_WORKSPACE_ROOT");
        assert_eq!(NotFound.code(), "WORKSPACE_ROOT_NOT_FOUND");
        assert_eq!(NotDirectory.code(), "WORKSPACE_ROOT_NOT_DIRECTORY");
        assert_eq!(Changed.code(), "WORKSPACE_ROOT_CHANGED");
    }
}
