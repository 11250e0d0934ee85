//! Capture a workspace root once and re-verify it before every operation.
//!
//! [`WorkspaceRoot::capture`] canonicalizes the given directory (`realpath`), requires a
//! directory, records the entry as given (made absolute), the canonical path and the
//! `(device, inode)` identity, and keeps an open cap-std [`Dir`] handle on it. Everything the
//! tools do is done beneath that handle. [`WorkspaceRoot::verify`] is called before every
//! operation: the original entry must still canonicalize to the same canonical path, and that
//! path's identity must equal the recorded one and the held handle's. A directory deleted and
//! recreated, a root symlink repointed elsewhere, or a deleted root all fail with
//! [`RootErrorKind::Changed`] (`WORKSPACE_ROOT_CHANGED`); a replacement is never adopted.
//!
//! ```
//! let tmp = tempfile::tempdir()?;
//! let root = confine_rootid::WorkspaceRoot::capture(tmp.path())?;
//! root.verify()?;
//! assert_eq!(root.canonical(), tmp.path().canonicalize()?);
//! root.dir().write("hello.txt", "hi")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Threat model
//!
//! Defends against the root being swapped for another directory between calls (deleted and
//! recreated, renamed away, a symlink repointed) by a concurrent local process: such a call
//! does nothing and reports `WORKSPACE_ROOT_CHANGED`. It does not defend against a swap that
//! happens *during* one operation after `verify` returned; the tools built on it stay safe in
//! that window because they only ever resolve beneath the held handle, which keeps naming the
//! original directory. Error messages never carry the host path.
//!
//! # Platform support
//!
//! Linux is tested. The identity is `(st_dev, st_ino)` on Unix; other platforms are not
//! supported by this crate yet.

#![deny(missing_docs)]

use std::io;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

mod error;
pub use error::{RootError, RootErrorKind};

/// A file's identity: `(st_dev, st_ino)` (the descriptor layer's type, under the name this
/// crate has always given it).
pub use confine_beneath::FileId;

/// A captured workspace root: the original entry, its canonical path, its identity and an open
/// directory handle.
#[derive(Debug)]
pub struct WorkspaceRoot {
    original: PathBuf,
    canonical: PathBuf,
    identity: FileId,
    dir: Dir,
}

impl WorkspaceRoot {
    /// Capture `path` as a workspace root. A root given through a symlink is accepted and
    /// canonicalized; the symlink itself is remembered so a later repointing is detected.
    pub fn capture(path: impl AsRef<Path>) -> Result<Self, RootError> {
        let path = path.as_ref();
        let text = path.as_os_str().as_encoded_bytes();
        if text.is_empty() || text.contains(&0) {
            return Err(RootError::new(RootErrorKind::Invalid, None));
        }
        let original = std::path::absolute(path)
            .map_err(|e| RootError::new(RootErrorKind::Invalid, Some(e)))?;
        let canonical = std::fs::canonicalize(&original).map_err(classify)?;
        let meta = std::fs::metadata(&canonical).map_err(classify)?;
        if !meta.is_dir() {
            return Err(RootError::new(RootErrorKind::NotDirectory, None));
        }
        let dir = Dir::open_ambient_dir(&canonical, ambient_authority()).map_err(classify)?;
        let identity = FileId::of_std(&meta);
        let held = FileId::of_fd(&dir).map_err(classify)?;
        if held != identity {
            // Swapped between the stat and the open: refuse rather than adopt either.
            return Err(RootError::new(RootErrorKind::Changed, None));
        }
        Ok(Self {
            original,
            canonical,
            identity,
            dir,
        })
    }

    /// Re-verify that the root is still the captured directory.
    pub fn verify(&self) -> Result<(), RootError> {
        if self.original == self.canonical {
            return self.verify_plain();
        }
        self.verify_canonicalized()
    }

    /// `verify` through `realpath`: the entry as given must still canonicalize to the
    /// captured path, and that path must name the captured directory.
    fn verify_canonicalized(&self) -> Result<(), RootError> {
        let changed = |e: Option<io::Error>| RootError::new(RootErrorKind::Changed, e);
        let now = std::fs::canonicalize(&self.original).map_err(|e| changed(Some(e)))?;
        if now != self.canonical {
            return Err(changed(None));
        }
        let meta = std::fs::metadata(&self.canonical).map_err(|e| changed(Some(e)))?;
        if !meta.is_dir() || FileId::of_std(&meta) != self.identity {
            return Err(changed(None));
        }
        // The held handle needs no re-stat: an open directory descriptor keeps naming the
        // inode it was opened on (checked equal to `identity` at capture), whatever happens to
        // paths. So equality with `identity` above is equality with the handle.
        Ok(())
    }

    /// `verify` when the root was given by its canonical path (the common case), without
    /// `realpath`. It decides exactly the same: a canonical path (absolute, no `.` or `..`)
    /// still canonicalizes to itself if and only if every component exists and none is a
    /// symlink, which `beneath`'s [`confine_beneath::directory_identity_without_symlinks`]
    /// asks the kernel in one path walk (or one `lstat` per component where it cannot).
    fn verify_plain(&self) -> Result<(), RootError> {
        let changed = |e: Option<io::Error>| RootError::new(RootErrorKind::Changed, e);
        match confine_beneath::directory_identity_without_symlinks(&self.canonical) {
            Ok(now) if now == self.identity => Ok(()),
            Ok(_) => Err(changed(None)),
            Err(e) => Err(changed(Some(e))),
        }
    }

    /// The open handle on the root; resolve everything beneath it.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The canonical path captured at construction.
    pub fn canonical(&self) -> &Path {
        &self.canonical
    }

    /// The entry as given, made absolute (not symlink-resolved).
    pub fn original(&self) -> &Path {
        &self.original
    }

    /// The recorded `(device, inode)` identity.
    pub fn identity(&self) -> FileId {
        self.identity
    }
}

fn classify(e: io::Error) -> RootError {
    let kind = match e.kind() {
        io::ErrorKind::NotFound => RootErrorKind::NotFound,
        io::ErrorKind::NotADirectory => RootErrorKind::NotDirectory,
        _ => RootErrorKind::Invalid,
    };
    RootError::new(kind, Some(e))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// The check without `realpath` decides as the one through it, intact or replaced in each
    /// way the integration tests try.
    #[test]
    fn without_realpath_decides_as_through_it() {
        let decide = |root: &WorkspaceRoot| {
            let one = root.verify_plain().map_err(|e| e.kind());
            let through = root.verify_canonicalized().map_err(|e| e.kind());
            assert_eq!(one, through);
            one
        };
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let parent = base.join("parent");
        std::fs::create_dir_all(parent.join("ws")).unwrap();
        let root = WorkspaceRoot::capture(parent.join("ws")).unwrap();
        assert_eq!(decide(&root), Ok(()));
        // An ancestor replaced by a symlink to the same directory.
        std::fs::rename(&parent, base.join("moved")).unwrap();
        symlink(base.join("moved"), &parent).unwrap();
        assert_eq!(decide(&root), Err(RootErrorKind::Changed));
        std::fs::remove_file(&parent).unwrap();
        std::fs::rename(base.join("moved"), &parent).unwrap();
        assert_eq!(decide(&root), Ok(()));
        // The root itself replaced by a symlink to it.
        std::fs::rename(parent.join("ws"), parent.join("real")).unwrap();
        symlink(parent.join("real"), parent.join("ws")).unwrap();
        assert_eq!(decide(&root), Err(RootErrorKind::Changed));
        std::fs::remove_file(parent.join("ws")).unwrap();
        // Gone, then another directory in its place.
        assert_eq!(decide(&root), Err(RootErrorKind::Changed));
        std::fs::create_dir(parent.join("ws")).unwrap();
        assert_eq!(decide(&root), Err(RootErrorKind::Changed));
        // A file where it was.
        std::fs::remove_dir(parent.join("ws")).unwrap();
        std::fs::write(parent.join("ws"), "").unwrap();
        assert_eq!(decide(&root), Err(RootErrorKind::Changed));
    }
}
