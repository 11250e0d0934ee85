//! The error of an installation: an opaque [`Error`] and its stable [`ErrorKind`].

use std::fmt;
use std::io;

use crate::hooks::Step;

/// Why an installation failed. The string of [`ErrorKind::code`] is the stable contract;
/// branch on the variant, never on message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The name is not one plain file name (empty, `.`, `..`, holds `/` or NUL, or is over 255
    /// bytes).
    InvalidName,
    /// The target is a symbolic link; it is never followed nor replaced.
    TargetSymlink,
    /// The target is a directory, FIFO, socket or device.
    TargetNotRegular,
    /// The temporary that was opened is not a regular file.
    TempNotRegular,
    /// The temporary's name no longer names the file this operation created.
    TempIdentityChanged,
    /// After the commit the target's name holds something else than this operation's file:
    /// another writer replaced it in between (or an attacker substituted the temporary just
    /// before the rename). Nothing is removed.
    TargetReplaced,
    /// This operation's own temporary could not be removed.
    TempCleanupFailed,
    /// Any other failure (I/O error, full disk, a hook's refusal).
    Failed,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [ErrorKind] = &[
        Self::InvalidName,
        Self::TargetSymlink,
        Self::TargetNotRegular,
        Self::TempNotRegular,
        Self::TempIdentityChanged,
        Self::TargetReplaced,
        Self::TempCleanupFailed,
        Self::Failed,
    ];

    /// The stable token a tool result carries; never renamed once released.
    pub const fn code(self) -> &'static str {
        match self {
            Self::InvalidName => "INVALID_RELATIVE_PATH",
            Self::TargetSymlink => "WRITE_TARGET_SYMLINK",
            Self::TargetNotRegular => "WRITE_TARGET_NOT_REGULAR",
            Self::TempNotRegular => "WRITE_TEMP_NOT_REGULAR",
            Self::TempIdentityChanged => "WRITE_TEMP_IDENTITY_CHANGED",
            Self::TargetReplaced => "WRITE_TARGET_REPLACED",
            Self::TempCleanupFailed => "WRITE_TEMP_CLEANUP_FAILED",
            Self::Failed => "WRITE_FAILED",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// An installation error: a kind, the step it happened at, and the underlying I/O error (the
/// [`source`](std::error::Error::source)) when there is one. Its message is the token and the
/// step, never a path.
pub struct Error(Box<Repr>);

struct Repr {
    kind: ErrorKind,
    step: Step,
    source: Option<io::Error>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, step: Step, source: Option<io::Error>) -> Self {
        Self(Box::new(Repr { kind, step, source }))
    }

    /// The kind, to branch on.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The stable token of the kind.
    pub fn code(&self) -> &'static str {
        self.0.kind.code()
    }

    /// The step that failed.
    pub fn step(&self) -> Step {
        self.0.step
    }

    /// The underlying I/O error, if any (a hook's error is returned here unchanged).
    pub fn io_error(&self) -> Option<&io::Error> {
        self.0.source.as_ref()
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.0.kind)
            .field("step", &self.0.step)
            .field("source", &self.0.source)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at step {:?}", self.0.kind.code(), self.0.step)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_pinned() {
        let got: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(
            got,
            [
                "INVALID_RELATIVE_PATH",
                "WRITE_TARGET_SYMLINK",
                "WRITE_TARGET_NOT_REGULAR",
                "WRITE_TEMP_NOT_REGULAR",
                "WRITE_TEMP_IDENTITY_CHANGED",
                "WRITE_TARGET_REPLACED",
                "WRITE_TEMP_CLEANUP_FAILED",
                "WRITE_FAILED",
            ]
        );
    }

    #[test]
    fn message_is_token_and_step_only() {
        let e = Error::new(
            ErrorKind::Failed,
            Step::Rename,
            Some(io::Error::other("/secret/host/path")),
        );
        assert_eq!(e.to_string(), "WRITE_FAILED at step Rename");
        assert!(std::error::Error::source(&e).is_some());
    }
}
