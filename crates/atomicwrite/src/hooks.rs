//! The steps of an installation and the seam that observes (and can fail) each of them.

use std::ffi::OsStr;
use std::io;

/// One step of [`install_with`](crate::install_with), in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Step {
    /// `lstat` the target: a symlink or a non-regular file is refused, a regular file's
    /// permission bits are kept for the new file.
    InspectTarget,
    /// Create the temporary `.<name>.pify-tmp-<random>` (`O_CREAT|O_EXCL|O_NOFOLLOW`, 0600).
    CreateTemp,
    /// Write every byte to the temporary.
    WriteTemp,
    /// `fsync` the temporary.
    SyncTemp,
    /// Check that the temporary's name still names the opened file, then `lstat` the target
    /// again.
    CheckTemp,
    /// `fchmod` the temporary to its final mode.
    SetMode,
    /// `renameat` the temporary over the target: the commit point.
    Rename,
    /// The caller's check after the commit (refused, the commit is undone), then the check that
    /// the installed entry is the temporary's file.
    CheckInstalled,
    /// `fsync` the directory.
    SyncDir,
}

impl Step {
    /// Every step, in the order they run.
    pub const ALL: &'static [Step] = &[
        Self::InspectTarget,
        Self::CreateTemp,
        Self::WriteTemp,
        Self::SyncTemp,
        Self::CheckTemp,
        Self::SetMode,
        Self::Rename,
        Self::CheckInstalled,
        Self::SyncDir,
    ];

    /// True for the steps that run after the rename, once the new content is visible.
    pub const fn is_after_commit(self) -> bool {
        matches!(self, Self::CheckInstalled | Self::SyncDir)
    }
}

/// Called before every [`Step`]: the caller's re-verification point and the tests'
/// fault-injection seam.
///
/// Returning an error fails the installation at that step as if the step itself had failed
/// ([`ErrorKind::Failed`](crate::ErrorKind::Failed), the hook's error as the source):
///
/// - up to and including [`Step::Rename`] nothing is committed: the old target stays and the
///   temporary, if one exists, is removed when its name still names this operation's file;
/// - at [`Step::CheckInstalled`] the installation is rejected: the installed entry is removed
///   when it still is this operation's file (no rollback of the old content is promised);
/// - at [`Step::SyncDir`] the new content stays installed and the error reports that its
///   durability is not confirmed.
///
/// A hook may also *do* things between steps (tests substitute the temporary, or replace the
/// target, there). `temp_name` is the temporary's name once it exists, and at
/// [`Step::CheckInstalled`] the name where the entry the commit displaced waits (the old
/// target, exchanged aside; `None` when the commit displaced nothing), so that a caller can
/// check it replaced what it meant to replace.
///
/// Closures `FnMut(Step, Option<&OsStr>) -> io::Result<()>` are hooks.
pub trait Hooks {
    /// Runs before `step`.
    fn before(&mut self, step: Step, temp_name: Option<&OsStr>) -> io::Result<()>;
}

impl<F> Hooks for F
where
    F: FnMut(Step, Option<&OsStr>) -> io::Result<()>,
{
    fn before(&mut self, step: Step, temp_name: Option<&OsStr>) -> io::Result<()> {
        self(step, temp_name)
    }
}

/// Hooks that do nothing: what [`install`](crate::install) uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {
    fn before(&mut self, _: Step, _: Option<&OsStr>) -> io::Result<()> {
        Ok(())
    }
}
