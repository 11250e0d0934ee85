//! Mapping filesystem errors met beneath the root to stable tokens: one table
//! ([`FsTokens`]) whose columns each context fills (what a missing entry means to a read, to
//! a write's parent, to a rename), every tool reading its token from it.

use std::io;
use std::path::Path;

use confine_beneath::{FsErrorKind, Symlinks};
use rustix::fs::OFlags;

use crate::error::{CallError, ErrorKind, failed};

/// The token of each kind of filesystem failure ([`FsErrorKind`]) in one context. A
/// resolution beneath the root ([`FsTokens::resolving`]) refuses an escape as
/// `PATH_OUTSIDE_WORKSPACE` and a symlink loop as `SYMLINK_LOOP` in every tool; an operation
/// on one name in a held directory ([`FsTokens::at_name`]) resolves nothing, so what it
/// meets is its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FsTokens {
    escape: ErrorKind,
    not_found: ErrorKind,
    not_directory: ErrorKind,
    symlink: ErrorKind,
    not_regular: ErrorKind,
    exists: ErrorKind,
    other: ErrorKind,
}

impl FsTokens {
    /// A resolution beneath the root: an escape and a loop as every tool reports them, the
    /// rest `other` until set.
    pub(crate) const fn resolving(other: ErrorKind) -> Self {
        Self {
            escape: ErrorKind::PathOutsideWorkspace,
            symlink: ErrorKind::SymlinkLoop,
            ..Self::at_name(other)
        }
    }

    /// An operation on one name in a held directory: everything `other` until set.
    pub(crate) const fn at_name(other: ErrorKind) -> Self {
        Self {
            escape: other,
            not_found: other,
            not_directory: other,
            symlink: other,
            not_regular: other,
            exists: other,
            other,
        }
    }

    /// With `ENOENT` as `kind`.
    pub(crate) const fn not_found(self, kind: ErrorKind) -> Self {
        Self {
            not_found: kind,
            ..self
        }
    }

    /// With `ENOTDIR` as `kind`.
    pub(crate) const fn not_directory(self, kind: ErrorKind) -> Self {
        Self {
            not_directory: kind,
            ..self
        }
    }

    /// With an object of the wrong type (`EISDIR`, `ENXIO`, `ENODEV`) as `kind`.
    pub(crate) const fn not_regular(self, kind: ErrorKind) -> Self {
        Self {
            not_regular: kind,
            ..self
        }
    }

    /// With `EEXIST` / `ENOTEMPTY` as `kind`.
    pub(crate) const fn exists(self, kind: ErrorKind) -> Self {
        Self {
            exists: kind,
            ..self
        }
    }

    /// The token of `kind`.
    pub(crate) fn token(&self, kind: FsErrorKind) -> ErrorKind {
        match kind {
            FsErrorKind::Escape => self.escape,
            FsErrorKind::NotFound => self.not_found,
            FsErrorKind::NotDirectory => self.not_directory,
            FsErrorKind::Symlink => self.symlink,
            FsErrorKind::NotRegular => self.not_regular,
            FsErrorKind::Exists => self.exists,
            _ => self.other,
        }
    }

    /// The failure for `e`, keeping it as the source.
    pub(crate) fn of(&self, e: io::Error) -> CallError {
        failed(self.token(FsErrorKind::of(&e))).with_source(e)
    }
}

/// Opening a file to read it: a missing entry or a component that is not a directory is
/// `FILE_NOT_FOUND`; a socket or a FIFO without a peer `FILE_NOT_REGULAR`.
const fn open_file(other: ErrorKind) -> FsTokens {
    FsTokens::resolving(other)
        .not_found(ErrorKind::FileNotFound)
        .not_directory(ErrorKind::FileNotFound)
        .not_regular(ErrorKind::FileNotRegular)
}

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
    failed(open_file(other).token(FsErrorKind::of(e)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolution_refuses_escapes_and_loops_alike_and_a_name_keeps_its_own_tokens() {
        let kinds = [
            FsErrorKind::Escape,
            FsErrorKind::NotFound,
            FsErrorKind::NotDirectory,
            FsErrorKind::Symlink,
            FsErrorKind::NotRegular,
            FsErrorKind::Exists,
            FsErrorKind::NameTooLong,
            FsErrorKind::Other,
        ];
        let resolving = FsTokens::resolving(ErrorKind::ReadFailed);
        let tokens: Vec<ErrorKind> = kinds.iter().map(|&k| resolving.token(k)).collect();
        assert_eq!(
            tokens,
            [
                ErrorKind::PathOutsideWorkspace,
                ErrorKind::ReadFailed,
                ErrorKind::ReadFailed,
                ErrorKind::SymlinkLoop,
                ErrorKind::ReadFailed,
                ErrorKind::ReadFailed,
                ErrorKind::ReadFailed,
                ErrorKind::ReadFailed,
            ]
        );
        // A rename's EXDEV (another mount beneath the root) is its own failure, no escape.
        let at_name =
            FsTokens::at_name(ErrorKind::WriteFailed).exists(ErrorKind::MoveDestinationExists);
        assert_eq!(at_name.token(FsErrorKind::Escape), ErrorKind::WriteFailed);
        assert_eq!(at_name.token(FsErrorKind::Symlink), ErrorKind::WriteFailed);
        assert_eq!(
            at_name.token(FsErrorKind::Exists),
            ErrorKind::MoveDestinationExists
        );
        let open = open_file(ErrorKind::ReadFailed);
        assert_eq!(
            open.token(FsErrorKind::NotDirectory),
            ErrorKind::FileNotFound
        );
        assert_eq!(
            open.token(FsErrorKind::NotRegular),
            ErrorKind::FileNotRegular
        );
    }
}
