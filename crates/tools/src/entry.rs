//! What the file tools share: an entry named beneath the root (its parent directory opened on
//! descriptors beneath the root's handle by [`crate::parent::open_parent`], and its leaf name,
//! never followed), the kind of an entry, and running filesystem work off the async reactor.
//!
//! The parent is opened as `read_file` opens a file: beneath the root handle (openat2
//! `RESOLVE_BENEATH` through cap-std), so a `..`, an absolute symlink or a symlink leaving the
//! root in a parent component is refused (`PATH_OUTSIDE_WORKSPACE`), and a relative symlink
//! that stays inside is followed. Everything afterwards happens relative to that descriptor:
//! a concurrent process that swaps a parent directory for a symlink to outside changes what
//! the *name* leads to, never the directory the call already holds. A directory moved out of
//! the root while held is caught by climbing `..` from the descriptor to the root's identity
//! before each effect.

use std::path::Path;

use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;
use rustix::fs::{FileType, Stat};

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::deny::DeniedPaths;
use crate::error::{CallError, ErrorKind, ToolError, failed};
use crate::parent::Parent;
use crate::protect::ProtectedPaths;
use crate::workspace::Workspace;

/// The held parent must still lie beneath the root before an effect in it.
pub(crate) fn check_beneath(root: &WorkspaceRoot, parent: &Parent) -> Result<(), CallError> {
    match confine_beneath::is_beneath(&parent.dir, root.identity()) {
        Ok(true) => Ok(()),
        Ok(false) => Err(failed(ErrorKind::PathOutsideWorkspace)),
        Err(_) => Err(failed(ErrorKind::WriteFailed)),
    }
}

/// `lstat` of `name` directly in `dir`: never follows a symlink at the leaf.
pub(crate) fn lstat_at(dir: &cap_std::fs::Dir, name: &str) -> rustix::io::Result<Stat> {
    rustix::fs::statat(dir, Path::new(name), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
}

/// What an entry is, as the tools report it.
pub(crate) fn kind_of(st: &Stat) -> &'static str {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        _ => "other",
    }
}

/// A path argument through the grammar (`INVALID_RELATIVE_PATH`).
pub(crate) fn normalize(path: &str) -> Result<RelPath, ToolError> {
    confine_pathgrammar::normalize(path)
        .map_err(|e| ToolError::invalid(ErrorKind::InvalidRelativePath).with_source(e))
}

/// Run a tool's blocking body over its root off the async workers ([`off_reactor`]).
pub(crate) async fn run_on_root<V: Send + 'static, T: Send + 'static>(
    root: &Arc<WorkspaceRoot>,
    denied: &Arc<DeniedPaths>,
    valid: V,
    cancel: &CancellationToken,
    body: fn(&WorkspaceRoot, &DeniedPaths, &V, &CancellationToken) -> Result<T, CallError>,
) -> Result<T, CallError> {
    let root = root.clone();
    let denied = denied.clone();
    let cancel = cancel.clone();
    off_reactor(move || body(&root, &denied, &valid, &cancel)).await
}

/// [`run_on_root`] for a body brief by nature (a stat, a bounded read): inline where the
/// workspace is on a local file system ([`crate::blocking::brief`]).
pub(crate) async fn brief_on_root<V: Send + 'static, T: Send + 'static>(
    ws: &Workspace,
    valid: V,
    cancel: &CancellationToken,
    body: fn(&WorkspaceRoot, &DeniedPaths, &V, &CancellationToken) -> Result<T, CallError>,
) -> Result<T, CallError> {
    let root = ws.root.clone();
    let denied = ws.denied.clone();
    let cancel = cancel.clone();
    crate::blocking::brief(ws.local, move || body(&root, &denied, &valid, &cancel)).await
}

/// A write tool's blocking body: the root, the protected and the denied paths, the validated
/// arguments.
pub(crate) type WritingBody<V, T> = fn(
    &WorkspaceRoot,
    &ProtectedPaths,
    &DeniedPaths,
    &V,
    &CancellationToken,
) -> Result<T, CallError>;

/// [`run_on_root`] for a tool that changes the workspace, given the protected paths.
pub(crate) async fn run_writing<V: Send + 'static, T: Send + 'static>(
    root: &Arc<WorkspaceRoot>,
    protected: &Arc<ProtectedPaths>,
    denied: &Arc<DeniedPaths>,
    valid: V,
    cancel: &CancellationToken,
    body: WritingBody<V, T>,
) -> Result<T, CallError> {
    let root = root.clone();
    let protected = protected.clone();
    let denied = denied.clone();
    let cancel = cancel.clone();
    off_reactor(move || body(&root, &protected, &denied, &valid, &cancel)).await
}
