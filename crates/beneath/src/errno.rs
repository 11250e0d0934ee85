//! What an error met beneath a directory means, so that every caller maps the same system
//! errors to its own tokens in the same way.

use std::io;

/// The meaning of an error from an open, a stat or a rename beneath a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FsErrorKind {
    /// The resolution would have left the directory: a `..` above it, an absolute path, or a
    /// symlink leading outside (`EXDEV` from `openat2(RESOLVE_BENEATH)`, or cap-std's refusal,
    /// a `PermissionDenied` error carrying no OS error number).
    Escape,
    /// Nothing at that name (`ENOENT`).
    NotFound,
    /// A component that had to be a directory is not (`ENOTDIR`).
    NotDirectory,
    /// A symlink met where none may be followed, or too many of them (`ELOOP`).
    Symlink,
    /// An object of the wrong type for the operation: a directory where a file was wanted
    /// (`EISDIR`), a socket or a FIFO without a peer (`ENXIO`), a device (`ENODEV`).
    NotRegular,
    /// Something already stands at the name (`EEXIST`), or a directory that is not empty
    /// (`ENOTEMPTY`).
    Exists,
    /// A name too long for one system call (`ENAMETOOLONG`).
    NameTooLong,
    /// Anything else: an I/O failure, a permission, a resource limit.
    Other,
}

impl FsErrorKind {
    /// Classify a `std::io::Error`.
    pub fn of(e: &io::Error) -> Self {
        match e.raw_os_error() {
            Some(n) => Self::of_errno(rustix::io::Errno::from_raw_os_error(n)),
            None if e.kind() == io::ErrorKind::PermissionDenied => Self::Escape,
            None => Self::Other,
        }
    }

    /// Classify a raw error number.
    pub fn of_errno(e: rustix::io::Errno) -> Self {
        use rustix::io::Errno;
        match e {
            Errno::XDEV => Self::Escape,
            Errno::NOENT => Self::NotFound,
            Errno::NOTDIR => Self::NotDirectory,
            Errno::LOOP => Self::Symlink,
            Errno::ISDIR | Errno::NXIO | Errno::NODEV => Self::NotRegular,
            Errno::EXIST | Errno::NOTEMPTY => Self::Exists,
            Errno::NAMETOOLONG => Self::NameTooLong,
            _ => Self::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_errors() {
        let cases = [
            (libc::EXDEV, FsErrorKind::Escape),
            (libc::ENOENT, FsErrorKind::NotFound),
            (libc::ENOTDIR, FsErrorKind::NotDirectory),
            (libc::ELOOP, FsErrorKind::Symlink),
            (libc::EISDIR, FsErrorKind::NotRegular),
            (libc::ENXIO, FsErrorKind::NotRegular),
            (libc::ENODEV, FsErrorKind::NotRegular),
            (libc::EEXIST, FsErrorKind::Exists),
            (libc::ENOTEMPTY, FsErrorKind::Exists),
            (libc::ENAMETOOLONG, FsErrorKind::NameTooLong),
            (libc::EIO, FsErrorKind::Other),
        ];
        for (n, kind) in cases {
            assert_eq!(
                FsErrorKind::of(&io::Error::from_raw_os_error(n)),
                kind,
                "{n}"
            );
        }
        // cap-std's refusal to leave a directory carries no OS error.
        let refusal = io::Error::new(io::ErrorKind::PermissionDenied, "outside");
        assert_eq!(FsErrorKind::of(&refusal), FsErrorKind::Escape);
        assert_eq!(FsErrorKind::of(&io::Error::other("x")), FsErrorKind::Other);
    }
}
