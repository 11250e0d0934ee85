//! The crate's error: an opaque type with a stable kind.

use std::io;

/// Why a run did not produce an [`Outcome`](crate::Outcome).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Error(Box<Repr>);

#[derive(Debug, thiserror::Error)]
#[error("{}", .kind.code())]
struct Repr {
    kind: ErrorKind,
    #[source]
    source: Option<io::Error>,
    /// For a timeout: what the run had written until its bound.
    partial: Option<crate::Outcome>,
}

/// What went wrong; callers branch on this, never on message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The child could not be started (no such program, a pre-exec step refused, a pipe
    /// could not be made). Nothing is left running.
    StartFailed,
    /// Reading the child's output failed. The child was killed and reaped.
    OutputFailed,
    /// The child did not exit and close both pipes within the time bound. Everything it
    /// started was killed and reaped before this was returned;
    /// [`Error::partial_outcome`] holds the output read until then.
    TimedOut,
    /// The cancellation token fired. Everything the child started was killed and reaped
    /// before this was returned.
    Cancelled,
    /// A [`Sandbox`](crate::Sandbox) was requested and this kernel cannot enforce it in full
    /// (no Landlock, a Landlock ABI older than the sandbox requires, or read-only paths named
    /// where no mount namespace can be made). Nothing was started:
    /// the program never runs unconfined in its place.
    SandboxUnavailable,
    /// The network policy was asked for and no mechanism of this system can enforce it (no
    /// network namespace can be made, and no Landlock with TCP rules): see
    /// [`Network`](crate::Network). Nothing was started.
    NetworkPolicyUnavailable,
}

impl ErrorKind {
    /// The stable token of this kind; never renamed once released.
    pub const fn code(self) -> &'static str {
        match self {
            Self::StartFailed => "PROCESS_START_FAILED",
            Self::OutputFailed => "PROCESS_OUTPUT_FAILED",
            Self::TimedOut => "PROCESS_TIMEOUT",
            Self::Cancelled => "PROCESS_CANCELLED",
            Self::SandboxUnavailable => "SANDBOX_UNAVAILABLE",
            Self::NetworkPolicyUnavailable => "NETWORK_POLICY_UNAVAILABLE",
        }
    }
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, source: Option<io::Error>) -> Self {
        // A sandbox step that found no mount namespace for its read-only paths: the policy
        // cannot be enforced here, which is not a start failure of the program.
        let unavailable = source.as_ref().and_then(io::Error::raw_os_error)
            == Some(crate::sandbox::UNAVAILABLE_ERRNO);
        let kind = match kind {
            ErrorKind::StartFailed if unavailable => ErrorKind::SandboxUnavailable,
            kind => kind,
        };
        Self(Box::new(Repr {
            kind,
            source,
            partial: None,
        }))
    }

    /// A timeout, with the output read until the bound.
    pub(crate) fn timed_out(partial: crate::Outcome) -> Self {
        Self(Box::new(Repr {
            kind: ErrorKind::TimedOut,
            source: None,
            partial: Some(partial),
        }))
    }

    /// For [`ErrorKind::TimedOut`]: the output each stream had written until the bound
    /// (captured as the run's caps say), with `exit_code` `None` and `signal` SIGKILL (the
    /// run was killed). `None` for every other kind.
    pub fn partial_outcome(&self) -> Option<&crate::Outcome> {
        self.0.partial.as_ref()
    }

    /// For [`ErrorKind::TimedOut`]: the output read until the bound, taken out.
    pub fn into_partial_outcome(self) -> Option<crate::Outcome> {
        self.0.partial
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The underlying OS error, when there is one.
    pub fn io_error(&self) -> Option<&io::Error> {
        self.0.source.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_pinned() {
        let got = [
            ErrorKind::StartFailed,
            ErrorKind::OutputFailed,
            ErrorKind::TimedOut,
            ErrorKind::Cancelled,
            ErrorKind::SandboxUnavailable,
        ]
        .map(ErrorKind::code);
        assert_eq!(
            got,
            [
                "PROCESS_START_FAILED",
                "PROCESS_OUTPUT_FAILED",
                "PROCESS_TIMEOUT",
                "PROCESS_CANCELLED",
                "SANDBOX_UNAVAILABLE",
            ]
        );
        let e = Error::new(ErrorKind::TimedOut, None);
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert_eq!(e.to_string(), "PROCESS_TIMEOUT");
    }
}
