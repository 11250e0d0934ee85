//! A file's identity: its device and inode numbers.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;

use rustix::fs::{AtFlags, Stat};

/// A file's identity: `(st_dev, st_ino)`. Two descriptors or names with equal identities name
/// the same object, whatever path led to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

impl FileId {
    /// The identity recorded in a `stat` result.
    // `st_dev`/`st_ino` are `u64` on Linux but narrower on some other Unix targets.
    #[allow(clippy::useless_conversion)]
    pub fn of(st: &Stat) -> Self {
        Self {
            dev: u64::from(st.st_dev),
            ino: u64::from(st.st_ino),
        }
    }

    /// The identity of std metadata.
    pub fn of_std(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            dev: m.dev(),
            ino: m.ino(),
        }
    }

    /// The identity of the object an open descriptor names (`fstat`).
    pub fn of_fd(fd: impl AsFd) -> io::Result<Self> {
        Ok(Self::of(&rustix::fs::fstat(fd)?))
    }

    /// The identity of the entry `name` in `dir` now, the entry itself if it is a symlink
    /// (`fstatat` with `AT_SYMLINK_NOFOLLOW`).
    pub fn at(dir: impl AsFd, name: impl AsRef<OsStr>) -> io::Result<Self> {
        let st = rustix::fs::statat(dir, name.as_ref(), AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(Self::of(&st))
    }
}
