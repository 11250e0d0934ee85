//! [`FileJail`]: allow/deny read and write bounds (deny beats allow), path-based
//! decisions, and descriptor-based opens that decide on the opened object.

use std::path::{Path, PathBuf};

use confine_beneath::FileId;
use rustix::fs::FileType;

use crate::bound::{AllowBound, DenyBound};
use crate::error::{Error, ErrorKind};
use confine_beneath::Resolved as Walked;

use crate::lexical::{check_path_text, lexical_absolute, resolve, within};

/// The bounds of a [`FileJail`]. Relative entries resolve against the jail's cwd. An empty
/// allow list allows nothing (the jail fails closed); reads need a read bound and writes a
/// write bound, neither implying the other.
#[derive(Clone, Debug, Default)]
pub struct JailPolicy {
    /// Directories (or single files) beneath which reads are allowed.
    pub allow_read: Vec<PathBuf>,
    /// Directories (or single files) beneath which writes are allowed.
    pub allow_write: Vec<PathBuf>,
    /// Directories (or single files) beneath which nothing is allowed; deny beats allow.
    pub deny: Vec<PathBuf>,
}

/// Confines file access to allow/deny bounds; see the [crate docs](crate) for the semantics
/// and the threat model.
#[derive(Debug)]
pub struct FileJail {
    cwd: PathBuf,
    pub(crate) read: Vec<AllowBound>,
    pub(crate) write: Vec<AllowBound>,
    pub(crate) deny: Vec<DenyBound>,
    pub(crate) deny_ids: Vec<FileId>,
}

/// Which allow list a decision uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

impl FileJail {
    /// Build a jail. `cwd` is made absolute against the process's current directory and
    /// normalized lexically (not symlink-resolved: that happens on every call). Each bound is
    /// resolved now, as the guard resolves a path (existing prefix canonicalized, dangling
    /// symlinks followed, a missing tail kept literally), and each allow bound's deepest
    /// existing directory is opened and held.
    ///
    /// A bound that does not exist yet stays a path: it allows (or denies) whatever later
    /// appears at exactly that location as real directories, never through a symlink planted
    /// there. A bound that is a file allows (or denies) that file alone. A bound that cannot be
    /// resolved (a symlink loop, a NUL byte, an unreadable ancestor) fails with
    /// [`ErrorKind::InvalidBound`].
    pub fn new(cwd: impl AsRef<Path>, policy: JailPolicy) -> Result<Self, Error> {
        let cwd = cwd.as_ref();
        check_path_text(cwd).map_err(|_| Error::new(ErrorKind::InvalidBound))?;
        let base = if cwd.is_absolute() {
            PathBuf::from("/")
        } else {
            std::env::current_dir().map_err(|e| Error::with_source(ErrorKind::InvalidBound, e))?
        };
        let cwd = lexical_absolute(&base, cwd);
        let allow = |list: &[PathBuf]| -> Result<Vec<AllowBound>, Error> {
            list.iter().map(|b| AllowBound::new(&cwd, b)).collect()
        };
        let read = allow(&policy.allow_read)?;
        let write = allow(&policy.allow_write)?;
        let deny: Vec<DenyBound> = policy
            .deny
            .iter()
            .map(|b| DenyBound::new(&cwd, b))
            .collect::<Result<_, _>>()?;
        let deny_ids = deny.iter().filter_map(|d| d.id).collect();
        Ok(Self {
            cwd,
            read,
            write,
            deny,
            deny_ids,
        })
    }

    /// The base of relative paths: absolute, lexically normalized, not symlink-resolved.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Resolve `requested` for a read: the absolute, symlink-resolved path of an existing
    /// object within a read bound and within no deny bound.
    ///
    /// Errors: [`ErrorKind::Denied`], [`ErrorKind::OutsideReadBounds`] (judged before
    /// existence, so nothing is learned about paths outside), [`ErrorKind::NotFound`] (a
    /// dangling symlink too), [`ErrorKind::SymlinkLoop`], [`ErrorKind::InvalidPath`],
    /// [`ErrorKind::Io`].
    pub fn resolve_for_read(&self, requested: impl AsRef<Path>) -> Result<PathBuf, Error> {
        let (w, _) = self.decide_read(requested.as_ref())?;
        Ok(w.path)
    }

    /// Resolve `requested` for a write: the absolute path to write, within a write bound and
    /// within no deny bound, whose parent directory exists. An existing leaf is symlink-resolved
    /// too (a leaf symlink cannot smuggle the write out), and so is a dangling leaf symlink:
    /// the write is judged at the place the link points to, whose parent must exist. A missing
    /// leaf stays literal. An existing directory as the leaf is returned as it is (writing to it
    /// fails later); [`FileJail::open_for_write`] refuses it.
    ///
    /// Errors: [`ErrorKind::Denied`], [`ErrorKind::OutsideWriteBounds`],
    /// [`ErrorKind::ParentNotFound`], [`ErrorKind::ParentNotDirectory`],
    /// [`ErrorKind::SymlinkLoop`], [`ErrorKind::InvalidPath`], [`ErrorKind::Io`].
    pub fn resolve_for_write(&self, requested: impl AsRef<Path>) -> Result<PathBuf, Error> {
        let (w, _) = self.decide_write(requested.as_ref())?;
        Ok(w.path)
    }

    pub(crate) fn decide_read(&self, p: &Path) -> Result<(Walked, &AllowBound), Error> {
        let (w, b) = self.decide(p, Access::Read)?;
        if !w.exists() {
            return Err(Error::new(ErrorKind::NotFound));
        }
        Ok((w, b))
    }

    pub(crate) fn decide_write(&self, p: &Path) -> Result<(Walked, &AllowBound), Error> {
        let (w, b) = self.decide(p, Access::Write)?;
        if !w.parent_exists() {
            return Err(Error::new(ErrorKind::ParentNotFound));
        }
        if let Some(parent) = w.path.parent() {
            match rustix::fs::lstat(parent) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
                Ok(_) => return Err(Error::new(ErrorKind::ParentNotDirectory)),
                Err(rustix::io::Errno::NOENT) => {
                    return Err(Error::new(ErrorKind::ParentNotFound));
                }
                Err(e) => return Err(Error::with_source(ErrorKind::Io, e)),
            }
        }
        Ok((w, b))
    }

    /// Resolve, then judge: denied first (deny beats allow), then the deepest allow bound
    /// holding the path.
    fn decide(&self, p: &Path, access: Access) -> Result<(Walked, &AllowBound), Error> {
        check_path_text(p)?;
        let abs = lexical_absolute(&self.cwd, p);
        let w = resolve(&abs, None)?;
        if self.is_denied_path(&w.path) {
            return Err(Error::new(ErrorKind::Denied));
        }
        let (bounds, outside) = match access {
            Access::Read => (&self.read, ErrorKind::OutsideReadBounds),
            Access::Write => (&self.write, ErrorKind::OutsideWriteBounds),
        };
        let bound = bounds
            .iter()
            .filter(|b| within(&w.path, &b.path))
            .max_by_key(|b| b.path.components().count())
            .ok_or_else(|| Error::new(outside))?;
        Ok((w, bound))
    }

    pub(crate) fn is_denied_path(&self, path: &Path) -> bool {
        self.deny.iter().any(|d| within(path, &d.path))
    }
}
