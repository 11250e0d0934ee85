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

/// Remove the entry `name` of `dir` whatever it is: a file or a symlink (the link itself) is
/// unlinked, a directory is emptied depth first and removed. Nothing is followed: each
/// directory is opened `O_NOFOLLOW | O_DIRECTORY` beneath the one holding it, so a symlink
/// swapped in on the way is unlinked as a link and the removal never leaves `dir`. At most
/// `max_entries` entries are removed in all (beyond that `EFBIG`: a caller decides what a tree
/// it cannot remove means); a directory another process keeps filling is retried a few times,
/// then `ENOTEMPTY`. A name already gone is success.
pub fn remove_entry_tree(
    dir: impl AsFd,
    name: impl AsRef<OsStr>,
    max_entries: usize,
) -> io::Result<()> {
    let mut budget = max_entries;
    remove_entry_at(dir.as_fd(), name.as_ref(), &mut budget, 0)
}

/// How deep [`remove_entry_tree`] descends before giving up (`ELOOP`).
const MAX_DEPTH: usize = 256;

/// How often a directory that another process refilled is emptied again.
const REFILLS: usize = 8;

fn remove_entry_at(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &OsStr,
    budget: &mut usize,
    depth: usize,
) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    if *budget == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    }
    *budget -= 1;
    for _ in 0..REFILLS {
        let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => Ok(()),
                // Replaced by a directory meanwhile: look again.
                Err(Errno::ISDIR) => continue,
                Err(e) => Err(e.into()),
            };
        }
        if depth >= MAX_DEPTH {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let sub = match rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(()),
            // Swapped for a symlink or a file: look again.
            Err(Errno::NOTDIR | Errno::LOOP) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut names = Vec::new();
        for entry in rustix::fs::Dir::read_from(&sub)? {
            let entry = entry?;
            let n = entry.file_name().to_bytes();
            if n != b"." && n != b".." {
                names.push(std::ffi::OsString::from(
                    <OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(n),
                ));
            }
        }
        for n in &names {
            remove_entry_at(sub.as_fd(), n, budget, depth + 1)?;
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => return Ok(()),
            // Refilled, or swapped for something else: empty it again.
            Err(Errno::NOTEMPTY | Errno::EXIST | Errno::NOTDIR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::from_raw_os_error(libc::ENOTEMPTY))
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

    #[test]
    fn remove_entry_tree_removes_trees_links_and_never_follows() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        let dir =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        std::fs::create_dir_all(t.path().join("d/e/f")).unwrap();
        std::fs::write(t.path().join("d/e/f/g"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("d/link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("top")).unwrap();
        remove_entry_tree(&dir, "d", 100).unwrap();
        remove_entry_tree(&dir, "top", 100).unwrap();
        assert!(!t.path().join("d").exists());
        assert!(std::fs::symlink_metadata(t.path().join("top")).is_err());
        assert!(outside.path().join("keep").exists());
        // Gone already: success.
        remove_entry_tree(&dir, "d", 100).unwrap();
        // The bound at N and N+1 entries (the directory itself counts).
        std::fs::create_dir(t.path().join("n")).unwrap();
        for i in 0..3 {
            std::fs::write(t.path().join(format!("n/{i}")), "").unwrap();
        }
        let e = remove_entry_tree(&dir, "n", 3).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFBIG));
        for i in 0..3 {
            std::fs::write(t.path().join(format!("n/{i}")), "").unwrap();
        }
        remove_entry_tree(&dir, "n", 4).unwrap();
        assert!(!t.path().join("n").exists());
    }
}
