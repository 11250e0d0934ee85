//! Reaching a write target's parent directory beneath the root: missing
//! directories are created one checked step at a time, and nothing is ever created or followed
//! outside the root.
//!
//! Every prefix of the path is opened from the root's handle (cap-std, openat2
//! `RESOLVE_BENEATH` on Linux), so a `..`, an absolute symlink or a symlink that leaves the
//! root is refused (`PATH_OUTSIDE_WORKSPACE`) whatever a concurrent process swaps. A missing
//! component is created with `mkdirat` in the already opened directory above it (which never
//! follows a symlink at the new name) and then opened again from the root.
//!
//! A symlinked parent whose target stays inside the root is followed, as `read_file` follows
//! it: the file is written in the directory the link leads to. (A relative symlink only; an
//! absolute one is refused even when it points inside, cap-std's rule.) A dangling symlink in
//! the way is not created through: `WRITE_PARENT_NOT_DIRECTORY`.

use std::io;
use std::path::{Component, PathBuf};

use cap_std::fs::Dir;
use confine_beneath::{FsErrorKind, Symlinks};
use confine_pathgrammar::RelPath;
use confine_rootid::{FileId, WorkspaceRoot};
use rustix::fs::Mode;
use rustix::io::Errno;
use tokio_util::sync::CancellationToken;

use crate::error::{CallError, Cancelled, ErrorKind, failed};
use crate::fsmap::{FsTokens, is_escape, open_dir_beneath};
use crate::protect::ProtectedPaths;

/// The opened parent directory of a write target.
#[derive(Debug)]
pub(crate) struct Parent {
    /// The directory, beneath the root.
    pub(crate) dir: Dir,
    /// Its identity when it was opened.
    pub(crate) id: FileId,
    /// Its path relative to the root, as the model wrote it (empty for the root itself).
    pub(crate) prefix: PathBuf,
}

/// The token for a failure to open a parent prefix beneath the root.
fn parent_error(e: &io::Error) -> CallError {
    const TOKENS: FsTokens = FsTokens::resolving(ErrorKind::WriteFailed)
        .not_found(ErrorKind::WriteParentNotDirectory)
        .not_directory(ErrorKind::WriteParentNotDirectory);
    failed(TOKENS.token(FsErrorKind::of(e)))
}

fn identity(dir: &Dir) -> Result<FileId, CallError> {
    FileId::of_fd(dir).map_err(|e| failed(ErrorKind::WriteFailed).with_source(e))
}

/// What [`open_parent`] does with a directory missing on the way.
#[derive(Clone, Copy)]
pub(crate) enum Missing<'a> {
    /// Nothing is created: a missing component is `FILE_NOT_FOUND`, a component that is not
    /// a directory `NOT_A_DIRECTORY`, anything else but an escape or a loop this token.
    Refuse(ErrorKind),
    /// Each missing directory is created (see [`open_dirs`]), none where `protected`
    /// forbids it.
    Create {
        /// What no directory is created in place of.
        protected: &'a ProtectedPaths,
        /// Checked before each creation.
        cancel: &'a CancellationToken,
    },
}

/// The one parent-plus-leaf open: the parent directory of `path` opened beneath `root` (a
/// symlink in it followed while it stays inside), with the leaf name, never followed. Every
/// tool that acts on an entry by name stands on it; the leaf is the caller's to check.
pub(crate) fn open_parent<'p>(
    root: &WorkspaceRoot,
    path: &'p RelPath,
    missing: Missing<'_>,
) -> Result<(Parent, &'p str), CallError> {
    let segments: Vec<&str> = path.segments().collect();
    let other = match missing {
        Missing::Refuse(other) => other,
        Missing::Create { .. } => ErrorKind::WriteFailed,
    };
    let (name, parents) = segments.split_last().ok_or_else(|| failed(other))?;
    match missing {
        Missing::Create { protected, cancel } => {
            let (parent, _) = open_dirs(root, parents, protected, cancel)?;
            Ok((parent, name))
        }
        Missing::Refuse(other) => {
            let prefix: PathBuf = parents.iter().collect();
            let dir = if prefix.as_os_str().is_empty() {
                root.dir()
                    .try_clone()
                    .map_err(|e| failed(other).with_source(e))?
            } else {
                open_dir_beneath(root.dir(), &prefix).map_err(|e| dir_error(&e, other))?
            };
            let id = FileId::of_fd(&dir).map_err(|e| failed(other).with_source(e))?;
            Ok((Parent { dir, id, prefix }, name))
        }
    }
}

/// The token for a failure to open an existing directory beneath the root.
fn dir_error(e: &io::Error, other: ErrorKind) -> CallError {
    let tokens = FsTokens::resolving(other)
        .not_found(ErrorKind::FileNotFound)
        .not_directory(ErrorKind::NotADirectory);
    failed(tokens.token(FsErrorKind::of(e)))
}

/// Open the directory `segments` names beneath `root`, creating each missing component with
/// `mkdirat` in the held directory above it; true when this call created the last one. A
/// missing component whose real place beneath the root (the held directory above it, where
/// it really stands, and its name) is protected is `PATH_PROTECTED`, before its `mkdirat`.
pub(crate) fn open_dirs(
    root: &WorkspaceRoot,
    segments: &[&str],
    protected: &ProtectedPaths,
    cancel: &CancellationToken,
) -> Result<(Parent, bool), CallError> {
    let mut dir = root
        .dir()
        .try_clone()
        .map_err(|e| failed(ErrorKind::WriteFailed).with_source(e))?;
    let mut prefix = PathBuf::new();
    let mut created = false;
    for segment in segments {
        prefix.push(segment);
        created = false;
        dir = match open_dir_beneath(root.dir(), &prefix) {
            Ok(next) => next,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if cancel.is_cancelled() {
                    return Err(Cancelled.into());
                }
                // The directory above must still be beneath the root before we create in it.
                if !is_beneath(&dir, root.identity())? {
                    return Err(failed(ErrorKind::PathOutsideWorkspace));
                }
                protected.check_in(root, &dir, segment, false)?;
                match rustix::fs::mkdirat(&dir, *segment, Mode::from_raw_mode(0o777)) {
                    Ok(()) => created = true,
                    // EEXIST: a racing writer made it, or a dangling symlink is there.
                    Err(Errno::EXIST) => {}
                    Err(Errno::NOTDIR) | Err(Errno::NOENT) => {
                        return Err(failed(ErrorKind::WriteParentNotDirectory));
                    }
                    Err(e) => {
                        return Err(failed(ErrorKind::WriteFailed).with_source(io::Error::from(e)));
                    }
                }
                open_dir_beneath(root.dir(), &prefix).map_err(|e| parent_error(&e))?
            }
            Err(e) => return Err(parent_error(&e)),
        };
    }
    let id = identity(&dir)?;
    Ok((Parent { dir, id, prefix }, created))
}

impl Parent {
    /// The parent path still leads, beneath the root, to the directory that was opened.
    pub(crate) fn recheck(&self, root: &WorkspaceRoot) -> Result<(), CallError> {
        if self.prefix.as_os_str().is_empty() {
            return Ok(()); // the root itself, verified by `WorkspaceRoot::verify`
        }
        let now = open_dir_beneath(root.dir(), &self.prefix).map_err(|e| parent_error(&e))?;
        if identity(&now)? != self.id {
            return Err(failed(ErrorKind::WriteFailed)
                .with_source("the parent's path names another directory now"));
        }
        Ok(())
    }

    /// The opened directory still lies beneath the root (it was not moved out).
    pub(crate) fn still_beneath(&self, root: &WorkspaceRoot) -> Result<bool, CallError> {
        is_beneath(&self.dir, root.identity())
    }
}

/// The directory lies now beneath the root (the climb by `..` on descriptors sees where it is
/// now, whatever path led to it).
pub(crate) fn is_beneath(dir: &Dir, root: FileId) -> Result<bool, CallError> {
    confine_beneath::is_beneath(dir, root)
        .map_err(|e| failed(ErrorKind::WriteFailed).with_source(e))
}

/// The token for a target that is a symlink: `PATH_OUTSIDE_WORKSPACE` when it leads outside
/// the root (or is absolute and not within it), `WRITE_TARGET_SYMLINK` otherwise. Either way
/// nothing was written.
pub(crate) fn symlink_target_kind(root: &WorkspaceRoot, parent: &Parent, name: &str) -> ErrorKind {
    let Ok(link) = rustix::fs::readlinkat(&parent.dir, name, Vec::new()) else {
        return ErrorKind::WriteTargetSymlink;
    };
    let link = PathBuf::from(std::ffi::OsString::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(link.as_bytes()),
    ));
    let beneath = if link.is_absolute() {
        match link.strip_prefix(root.canonical()) {
            Ok(rest) => rest.to_path_buf(),
            Err(_) => return ErrorKind::PathOutsideWorkspace,
        }
    } else {
        parent.prefix.join(&link)
    };
    if beneath.components().all(|c| matches!(c, Component::CurDir)) {
        return ErrorKind::WriteTargetSymlink; // the root itself
    }
    // Resolved as every tool resolves (openat2, or its twin that answers as the kernel does),
    // not by cap-std's own fallback, which answers otherwise where openat2 is missing (a long
    // chain ending in `..`: a loop to the kernel, an escape to cap-std).
    let flags = rustix::fs::OFlags::PATH;
    match confine_beneath::open_beneath(root.dir(), &beneath, flags, Symlinks::FollowInside) {
        Err(e) if is_escape(&e) => ErrorKind::PathOutsideWorkspace,
        _ => ErrorKind::WriteTargetSymlink,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, std::path::PathBuf, WorkspaceRoot) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        let root = WorkspaceRoot::capture(&ws).unwrap();
        (tmp, ws, root)
    }

    #[test]
    fn parent_moved_out_of_the_root_is_detected() {
        let (tmp, ws, root) = setup();
        let path = confine_pathgrammar::normalize("a/b/f.txt").unwrap();
        let (parent, name) = open_parent(
            &root,
            &path,
            Missing::Create {
                protected: &ProtectedPaths::none(),
                cancel: &CancellationToken::new(),
            },
        )
        .unwrap();
        assert_eq!(name, "f.txt");
        assert!(parent.still_beneath(&root).unwrap());
        parent.recheck(&root).unwrap();
        // A concurrent process moves the opened directory out of the workspace.
        std::fs::rename(ws.join("a"), tmp.path().join("elsewhere")).unwrap();
        assert!(!parent.still_beneath(&root).unwrap());
        assert!(parent.recheck(&root).is_err());
    }

    #[test]
    fn parent_replaced_at_its_path_fails_recheck() {
        let (tmp, ws, root) = setup();
        let path = confine_pathgrammar::normalize("a/b/f.txt").unwrap();
        let (parent, _) = open_parent(
            &root,
            &path,
            Missing::Create {
                protected: &ProtectedPaths::none(),
                cancel: &CancellationToken::new(),
            },
        )
        .unwrap();
        std::fs::rename(ws.join("a/b"), tmp.path().join("old-b")).unwrap();
        std::fs::create_dir(ws.join("a/b")).unwrap();
        assert_eq!(
            parent.recheck(&root).unwrap_err(),
            failed(ErrorKind::WriteFailed)
        );
    }

    #[test]
    fn cancelled_before_creating_a_directory() {
        let (_tmp, ws, root) = setup();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let path = confine_pathgrammar::normalize("new/f.txt").unwrap();
        let err = open_parent(
            &root,
            &path,
            Missing::Create {
                protected: &ProtectedPaths::none(),
                cancel: &cancel,
            },
        )
        .unwrap_err();
        assert_eq!(err, CallError::Cancelled(Cancelled));
        assert!(!ws.join("new").exists());
    }
}
