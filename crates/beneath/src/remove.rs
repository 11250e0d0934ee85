//! Removing an entry only while it still is the object a caller created.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use crate::FileId;

/// Unlink `name` in `dir` if it still names the object `id`; true when it was removed (or had
/// just gone). Never removes a directory (no `AT_REMOVEDIR`), so a directory an attacker put at
/// the name is never removed, recursively or at all. A name that now names another object is
/// left alone. Between the check and the unlink a racing process could swap the entry once
/// more; what would then be unlinked is one non-directory entry, never followed.
pub fn remove_if_same(dir: impl AsFd, name: impl AsRef<OsStr>, id: FileId) -> io::Result<bool> {
    let dir = dir.as_fd();
    let name = name.as_ref();
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileId::of(&st) == id => {
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                return Ok(false);
            }
            match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => Ok(true),
                Err(e) => Err(e.into()),
            }
        }
        Ok(_) | Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{Mode, OFlags};

    #[test]
    fn remove_if_same_removes_only_the_same_object() {
        let t = tempfile::tempdir().unwrap();
        let dir =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        std::fs::write(t.path().join("f"), "x").unwrap();
        let id = FileId::at(&dir, "f").unwrap();
        // Replaced by another file: left alone.
        std::fs::remove_file(t.path().join("f")).unwrap();
        std::fs::write(t.path().join("g"), "y").unwrap();
        std::fs::rename(t.path().join("g"), t.path().join("f")).unwrap();
        let other = FileId::at(&dir, "f").unwrap();
        if other != id {
            assert!(!remove_if_same(&dir, "f", id).unwrap());
            assert!(t.path().join("f").exists());
        }
        assert!(remove_if_same(&dir, "f", other).unwrap());
        assert!(!t.path().join("f").exists());
        // Gone: nothing to do.
        assert!(!remove_if_same(&dir, "f", other).unwrap());
        // A directory is never removed, even with its own identity.
        std::fs::create_dir(t.path().join("d")).unwrap();
        let d = FileId::at(&dir, "d").unwrap();
        assert!(!remove_if_same(&dir, "d", d).unwrap());
        assert!(t.path().join("d").is_dir());
    }
}
