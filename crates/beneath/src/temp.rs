//! An exclusive 0600 temporary file, removed by identity unless kept.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::{FileId, remove_if_same};

/// A file this process created exclusively in a directory: removed (by identity, never by name
/// alone) when dropped, unless [`Temporary::keep`] was called.
#[derive(Debug)]
pub struct Temporary<'d> {
    dir: BorrowedFd<'d>,
    name: OsString,
    id: FileId,
    regular: bool,
    armed: bool,
}

impl<'d> Temporary<'d> {
    /// Create a fresh file in `dir` with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, write-only,
    /// named by `name()`; a name already taken (a planted file or symlink) is not written
    /// through: a fresh name is tried, `attempts` times in all. If the new file's identity
    /// cannot be read, the error is returned and the name is left alone (nothing proves it is
    /// ours).
    pub fn create(
        dir: BorrowedFd<'d>,
        mut name: impl FnMut() -> OsString,
        attempts: usize,
    ) -> io::Result<(Self, File)> {
        let flags = OFlags::WRONLY
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NOCTTY;
        let mut last = Errno::EXIST;
        for _ in 0..attempts.max(1) {
            let candidate = name();
            match rustix::fs::openat(dir, &candidate, flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => {
                    let st = rustix::fs::fstat(&fd)?;
                    let temp = Temporary {
                        dir,
                        name: candidate,
                        id: FileId::of(&st),
                        regular: FileType::from_raw_mode(st.st_mode) == FileType::RegularFile,
                        armed: true,
                    };
                    return Ok((temp, File::from(fd)));
                }
                Err(Errno::EXIST) => last = Errno::EXIST,
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.into())
    }

    /// Its name in the directory.
    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// The identity of the file created.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// The directory it was created in.
    pub fn dir(&self) -> BorrowedFd<'d> {
        self.dir
    }

    /// Whether the created object is a regular file (it always should be; a caller that
    /// distrusts the filesystem checks).
    pub fn is_regular(&self) -> bool {
        self.regular
    }

    /// Its name still names the created file (checked with `lstat`).
    pub fn still_ours(&self) -> io::Result<bool> {
        match FileId::at(self.dir, &self.name) {
            Ok(id) => Ok(id == self.id),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Keep the file (it was renamed into place, or is handed over): nothing is removed on
    /// drop. Returns its identity.
    pub fn keep(mut self) -> FileId {
        self.armed = false;
        self.id
    }

    /// Remove it now if its name still names the created file; true when removed. Never
    /// removes anything else (see [`remove_if_same`]).
    pub fn remove(mut self) -> io::Result<bool> {
        self.armed = false;
        remove_if_same(self.dir, &self.name, self.id)
    }
}

impl Drop for Temporary<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = remove_if_same(self.dir, &self.name, self.id);
        }
    }
}

impl AsFd for Temporary<'_> {
    /// The directory's descriptor.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn temporary_is_exclusive_0600_and_removed_unless_kept() {
        let t = tempfile::tempdir().unwrap();
        let dir =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        // A planted symlink at the first name is not written through.
        std::os::unix::fs::symlink("/etc/passwd", t.path().join("t0")).unwrap();
        let mut n = 0;
        let (temp, mut file) = Temporary::create(
            dir.as_fd(),
            || {
                n += 1;
                OsString::from(format!("t{}", n - 1))
            },
            4,
        )
        .unwrap();
        assert_eq!(temp.name(), "t1");
        assert!(temp.is_regular() && temp.still_ours().unwrap());
        file.write_all(b"x").unwrap();
        let mode = std::fs::metadata(t.path().join("t1"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(temp);
        assert!(!t.path().join("t1").exists());

        let (temp, _) = Temporary::create(dir.as_fd(), || OsString::from("kept"), 1).unwrap();
        let id = temp.keep();
        assert_eq!(FileId::at(&dir, "kept").unwrap(), id);

        // Every name taken: EEXIST.
        let e = Temporary::create(dir.as_fd(), || OsString::from("kept"), 3).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
    }

    #[test]
    fn temporary_replaced_is_left_alone() {
        let t = tempfile::tempdir().unwrap();
        let dir =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        // The file stays open, so its inode number cannot be reused by the directory.
        let (temp, _file) = Temporary::create(dir.as_fd(), || OsString::from("t"), 1).unwrap();
        std::fs::remove_file(t.path().join("t")).unwrap();
        std::fs::create_dir(t.path().join("t")).unwrap();
        assert!(!temp.still_ours().unwrap());
        assert!(!temp.remove().unwrap());
        assert!(t.path().join("t").is_dir());
    }
}
