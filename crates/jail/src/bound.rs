//! A policy bound resolved at construction: its canonical path, and for allow bounds an open
//! directory handle (the anchor) beneath which every open happens.

use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use confine_beneath::FileId;
use rustix::fs::FileType;

use crate::error::{Error, ErrorKind};
use crate::lexical::{lexical_absolute, resolve};

/// An allow bound: the resolved path, and the deepest existing directory at or above it
/// (usually the bound itself), held open.
#[derive(Debug)]
pub(crate) struct AllowBound {
    /// The bound's resolved path; targets are judged against it component-wise.
    pub path: PathBuf,
    /// The directory the handle was opened on (`path`, or an existing ancestor of it when
    /// the bound is a file or does not exist yet).
    pub anchor_path: PathBuf,
    /// The open anchor directory; every descriptor-based open is made beneath it.
    pub anchor: Dir,
    /// The anchor's identity, where the upward identity walk stops.
    pub anchor_id: FileId,
}

/// A deny bound: the resolved path, and the identity of what stood there at construction.
#[derive(Debug)]
pub(crate) struct DenyBound {
    pub path: PathBuf,
    pub id: Option<FileId>,
}

fn resolve_bound(cwd: &Path, bound: &Path) -> Result<confine_beneath::Resolved, Error> {
    crate::lexical::check_path_text(bound).map_err(|_| Error::new(ErrorKind::InvalidBound))?;
    let abs = lexical_absolute(cwd, bound);
    // The underlying kind (a loop, an unreadable directory) travels as the source.
    resolve(&abs, None)
        .map_err(|e| Error::with_source(ErrorKind::InvalidBound, std::io::Error::other(e)))
}

impl AllowBound {
    pub fn new(cwd: &Path, bound: &Path) -> Result<Self, Error> {
        let w = resolve_bound(cwd, bound)?;
        let mut anchor_path = w.existing_prefix();
        loop {
            match rustix::fs::stat(&anchor_path) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => break,
                _ => {
                    if !anchor_path.pop() {
                        return Err(Error::new(ErrorKind::InvalidBound));
                    }
                }
            }
        }
        let anchor = Dir::open_ambient_dir(&anchor_path, ambient_authority())
            .map_err(|e| Error::with_source(ErrorKind::InvalidBound, e))?;
        let anchor_id = rustix::fs::fstat(&anchor)
            .map(|st| FileId::of(&st))
            .map_err(|e| Error::with_source(ErrorKind::InvalidBound, e))?;
        Ok(Self {
            path: w.path,
            anchor_path,
            anchor,
            anchor_id,
        })
    }
}

impl DenyBound {
    pub fn new(cwd: &Path, bound: &Path) -> Result<Self, Error> {
        let w = resolve_bound(cwd, bound)?;
        let id = if w.exists() {
            rustix::fs::lstat(&w.path).ok().map(|st| FileId::of(&st))
        } else {
            None
        };
        Ok(Self { path: w.path, id })
    }
}
