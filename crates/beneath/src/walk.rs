//! A directory walk on descriptors: a directory opened beneath a root, its entries read from
//! the descriptor (`getdents64`), children opened relative to it with `O_NOFOLLOW`, never
//! through a symlink, and checked against the identity the listing gave.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::{FileId, Symlinks, is_beneath, open_beneath};

/// What an entry is, as the walk sees it: a symlink is a symlink, never what it points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (never followed by the walk).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl EntryKind {
    /// The kind of a file type.
    pub fn of(t: FileType) -> Self {
        match t {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Directory,
            FileType::Symlink => Self::Symlink,
            _ => Self::Other,
        }
    }

    /// `file`, `directory`, `symlink` or `other`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Directory => "directory",
            Self::Symlink => "symlink",
            Self::Other => "other",
        }
    }
}

/// One entry of a directory, as `getdents64` gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    name: CString,
    kind: EntryKind,
    ino: u64,
}

impl Entry {
    /// The entry's name: one plain name, never `.` or `..`, not necessarily UTF-8.
    pub fn name(&self) -> &OsStr {
        OsStr::from_bytes(self.name.to_bytes())
    }

    /// The entry's name as UTF-8, when it is.
    pub fn name_str(&self) -> Option<&str> {
        self.name.to_str().ok()
    }

    /// What the entry was when listed.
    pub fn kind(&self) -> EntryKind {
        self.kind
    }

    /// The inode number the listing gave.
    pub fn ino(&self) -> u64 {
        self.ino
    }
}

/// An open directory being walked: read its entries, open its children beneath it.
#[derive(Debug)]
pub struct WalkDir {
    dir: rustix::fs::Dir,
    id: FileId,
}

impl WalkDir {
    /// Open the directory `rel` beneath `root` for walking (see [`open_beneath`]; an empty
    /// `rel` is `root` itself). Not a directory: `ENOTDIR`.
    pub fn open_beneath(
        root: impl AsFd,
        rel: impl AsRef<Path>,
        symlinks: Symlinks,
    ) -> io::Result<Self> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOCTTY;
        Self::from_fd(open_beneath(root, rel, flags, symlinks)?)
    }

    /// Walk a directory already opened for reading (`O_RDONLY | O_DIRECTORY`).
    pub fn from_fd(fd: OwnedFd) -> io::Result<Self> {
        let id = FileId::of_fd(&fd)?;
        Ok(Self {
            dir: rustix::fs::Dir::new(fd)?,
            id,
        })
    }

    /// The directory's identity.
    pub fn id(&self) -> FileId {
        self.id
    }

    /// A second handle on the same directory (a duplicated descriptor, its own entry buffer),
    /// for a walker that reads it after another one is done with it: the two share the
    /// descriptor's position, and every read starts from the directory's start.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            dir: rustix::fs::Dir::new(self.fd().try_clone_to_owned()?)?,
            id: self.id,
        })
    }

    /// Every entry but `.` and `..`, read from the descriptor (from the start each time). An
    /// entry whose type the filesystem does not report is `lstat`ed; one that vanished
    /// meanwhile is left out.
    pub fn read_entries(&mut self) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        let _ = self.for_each_entry(|e| {
            out.push(e);
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// Every entry but `.` and `..`, handed to `each` one at a time as the descriptor gives
    /// them (from the start each time), so that a caller keeps only what it needs and may stop
    /// (a cancelled call) between any two: `Break` when `each` stopped. Entries as
    /// [`WalkDir::read_entries`] gives them.
    pub fn for_each_entry(
        &mut self,
        mut each: impl FnMut(Entry) -> ControlFlow<()>,
    ) -> io::Result<ControlFlow<()>> {
        self.dir.rewind();
        // The descriptor for an entry whose type the listing leaves out (duplicated, as the
        // reader holds the directory): made only when one is met.
        let mut stat_fd: Option<OwnedFd> = None;
        while let Some(entry) = self.dir.read() {
            let entry = entry?;
            let name = entry.file_name();
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    let fd = match &stat_fd {
                        Some(fd) => fd,
                        None => stat_fd.insert(self.dir.fd()?.try_clone_to_owned()?),
                    };
                    match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => EntryKind::of(FileType::from_raw_mode(st.st_mode)),
                        Err(Errno::NOENT) => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
                t => EntryKind::of(t),
            };
            let entry = Entry {
                name: name.to_owned(),
                kind,
                ino: entry.ino(),
            };
            if each(entry).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// `lstat` of the entry `name`: a symlink is described, not followed.
    pub fn stat_at(&self, name: impl AsRef<OsStr>) -> io::Result<Stat> {
        Ok(rustix::fs::statat(
            self.fd(),
            name.as_ref(),
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// Open the child directory `entry` listed, relative to this descriptor, with
    /// `O_NOFOLLOW`. `None` when the name no longer names that directory: it became a
    /// symlink, a file, another object (its inode differs from the listing's on the same
    /// device) or is gone. A symlink is never followed.
    pub fn open_dir(&self, entry: &Entry) -> io::Result<Option<WalkDir>> {
        let flags = OFlags::RDONLY
            | OFlags::DIRECTORY
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NOCTTY;
        let Some(fd) = self.open_child(entry, flags)? else {
            return Ok(None);
        };
        Ok(Some(Self::from_fd(fd)?))
    }

    /// Open the regular file `entry` listed, read-only, relative to this descriptor, with
    /// `O_NOFOLLOW | O_NONBLOCK` (a FIFO never blocks). `None` when the name no longer names
    /// that regular file (see [`WalkDir::open_dir`]).
    pub fn open_file(&self, entry: &Entry) -> io::Result<Option<(File, Stat)>> {
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let Some(fd) = self.open_child(entry, flags)? else {
            return Ok(None);
        };
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Ok(None);
        }
        Ok(Some((File::from(fd), st)))
    }

    fn open_child(&self, entry: &Entry, flags: OFlags) -> io::Result<Option<OwnedFd>> {
        let fd = match rustix::fs::openat(self.fd(), entry.name.as_c_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::LOOP | Errno::NOTDIR | Errno::NOENT | Errno::NXIO | Errno::NODEV) => {
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        };
        let id = FileId::of_fd(&fd)?;
        // A mount point lists the inode beneath it; only compare on the same device.
        if id.dev == self.id.dev && id.ino != entry.ino {
            if entry.kind != EntryKind::Directory {
                return Ok(None);
            }
            // gVisor lists a directory under another inode number than `stat` gives it (its
            // files, `.` and `..` agree), so for a directory the listing's number cannot be
            // the only judge: the name's own `lstat` now, equal to what was opened, says it
            // is the object there. On Linux this is reached only when another directory was
            // renamed onto the name since the listing; the walk then enters that one, which
            // stands beneath the directory held all the same.
            return match rustix::fs::statat(
                self.fd(),
                entry.name.as_c_str(),
                AtFlags::SYMLINK_NOFOLLOW,
            ) {
                Ok(st) if FileId::of(&st) == id && entry_kind_matches(entry, &st) => Ok(Some(fd)),
                Ok(_) | Err(Errno::NOENT) => Ok(None),
                Err(e) => Err(e.into()),
            };
        }
        Ok(Some(fd))
    }

    /// This directory lies now beneath (or is) the directory whose identity is `root` (see
    /// [`is_beneath`]).
    pub fn is_beneath(&self, root: FileId) -> io::Result<bool> {
        is_beneath(self.fd(), root)
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.dir.fd().expect("rustix returns the owned descriptor")
    }
}

/// Whether the object `st` is of the kind the listing gave `entry`.
fn entry_kind_matches(entry: &Entry, st: &Stat) -> bool {
    entry.kind() == EntryKind::of(FileType::from_raw_mode(st.st_mode))
}

impl AsFd for WalkDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}

/// Why [`walk_tree`] stopped before the end.
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TreeWalkError<E> {
    /// More entries than the walk's bound were looked at.
    TooManyEntries,
    /// The visitor stopped the walk with its own error.
    Visitor(E),
}

/// Every entry beneath the directory `start` (relative to `root`, reached as [`open_beneath`]
/// with [`Symlinks::FollowInside`] reaches it; an empty `start` is `root`), depth first, each
/// handed to `visit` with its path relative to `root` and its kind; a directory is entered
/// when `visit` returns `Ok(true)`. Nothing below `start` is followed through a symlink
/// (children are opened `O_NOFOLLOW` and checked against the listing, as [`WalkDir::open_dir`]
/// does); a `start` that is missing or not a directory, and a directory that is gone or was
/// swapped by the time it is opened, are passed over. At most `max_entries` entries are
/// looked at, then [`TreeWalkError::TooManyEntries`].
pub fn walk_tree<E>(
    root: impl AsFd,
    start: &Path,
    max_entries: usize,
    mut visit: impl FnMut(&Path, EntryKind) -> Result<bool, E>,
) -> Result<(), TreeWalkError<E>> {
    let Ok(first) = WalkDir::open_beneath(&root, start, Symlinks::FollowInside) else {
        return Ok(());
    };
    let mut stack = vec![(first, start.to_path_buf())];
    let mut seen = 0usize;
    while let Some((mut dir, path)) = stack.pop() {
        let Ok(entries) = dir.read_entries() else {
            continue;
        };
        for entry in entries {
            seen += 1;
            if seen > max_entries {
                return Err(TreeWalkError::TooManyEntries);
            }
            let rel = path.join(entry.name());
            let enter = visit(&rel, entry.kind()).map_err(TreeWalkError::Visitor)?;
            if enter
                && entry.kind() == EntryKind::Directory
                && let Ok(Some(child)) = dir.open_dir(&entry)
            {
                stack.push((child, rel));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn walk_lists_kinds_and_never_follows_a_symlink() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::fs::write(root.join("d/f.txt"), "hi").unwrap();
        std::os::unix::fs::symlink("e", root.join("d/link")).unwrap();
        let rootfd =
            rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let mut d = WalkDir::open_beneath(&rootfd, "d", Symlinks::Refuse).unwrap();
        let mut entries = d.read_entries().unwrap();
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        let seen: Vec<_> = entries
            .iter()
            .map(|e| (e.name().to_str().unwrap(), e.kind()))
            .collect();
        assert_eq!(
            seen,
            [
                ("e", EntryKind::Directory),
                ("f.txt", EntryKind::File),
                ("link", EntryKind::Symlink)
            ]
        );
        assert!(d.open_dir(&entries[0]).unwrap().is_some());
        let (mut f, st) = d.open_file(&entries[1]).unwrap().unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!((s.as_str(), st.st_size), ("hi", 2));
        // The symlink is neither a directory nor a file to the walk.
        let link = &entries[2];
        let as_dir = Entry {
            kind: EntryKind::Directory,
            ..link.clone()
        };
        assert!(d.open_dir(&as_dir).unwrap().is_none());
        assert!(d.open_file(link).unwrap().is_none());
        // A file where the listing saw a directory, or another object: not opened.
        assert!(d.open_dir(&entries[1]).unwrap().is_none());
        let renamed = Entry {
            ino: entries[1].ino + 1_000_000,
            ..entries[1].clone()
        };
        assert!(d.open_file(&renamed).unwrap().is_none());
        let root_id = FileId::of_fd(&rootfd).unwrap();
        assert!(d.is_beneath(root_id).unwrap());
        // Not a directory.
        let e = WalkDir::open_beneath(&rootfd, "d/f.txt", Symlinks::Refuse).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR));
        // Read twice: the same entries.
        assert_eq!(d.read_entries().unwrap().len(), 3);
    }
}
