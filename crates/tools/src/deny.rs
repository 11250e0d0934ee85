//! Denied paths: what the embedder keeps from the model altogether (`--deny`: `**/.env`,
//! `*.pem`, `secrets/**`). Every file tool refuses a denied path before any effect
//! (`PATH_DENIED`), the walking tools leave denied entries out and count them in `denied`,
//! and under the sandbox the children find the denied entries that exist at a run's start
//! covered (see `docs/SECURITY.md`).
//!
//! The patterns are those of the protected paths ([`crate::protect`]): both lists stand on one
//! pattern type ([`crate::patterns`]), compiled by the same glob engine as `find_files`
//! (globset): gitignore-style and relative to the root; a pattern
//! holding a `/` (other than a trailing one) is anchored at the root, one without matches a
//! name at any depth; `*` and `?` stop at `/`, `**` crosses it. A pattern denies what it
//! matches **and everything beneath it**, and `dir/**` denies `dir` itself too: a listing of
//! `secrets` would show the names of what it holds, and a move of `secrets` would carry its
//! contents to an allowed name. Negation (`!`) is not offered.
//!
//! # What is checked, and on what
//!
//! A path is judged by name, three ways, before anything is opened for reading or changed:
//!
//! 1. the path as the model wrote it;
//! 2. the path it resolves to beneath the root, symlinks followed (a relative symlink that
//!    stays inside is what the tools follow), the leaf's own link included: `link -> .env` is
//!    refused as `.env` is;
//! 3. the path of the entry itself, the parents' symlinks followed but not the leaf's.
//!
//! Then, on what was opened:
//!
//! * a read (`read_file`, `read_lines`, `read_media`, `grep` of one file) resolves the path
//!   again after the read, refuses a denied result, and insists that the resolved name still
//!   leads (without following a symlink) to the very file that was read
//!   (`PATH_CHANGED_DURING_READ` otherwise): a symlink swapped to a denied file between the
//!   check and the open is caught, nothing of it returned;
//! * a walk's start directory is judged where the opened directory really stands beneath the
//!   root ([`confine_beneath::path_beneath`] on its descriptor), and the entries beneath it by that
//!   real path;
//! * a write tool judges the held parent directory's real place joined with the leaf name,
//!   as the protected paths are judged.
//!
//! What a name check cannot see: a hard link to a denied file under an allowed name (the
//! model cannot make one; a process that can could read the file itself), a copy, and a file
//! that another process renames from a denied name to an allowed one: while it bears the
//! allowed name it is readable under it. The deny list names paths, not contents.
//!
//! A directory move could carry denied entries to an allowed name: either end of a
//! `move_file` that may hold a denied path beneath it is refused ([`DeniedPaths::may_hold`]).
//! A pattern that matches one name at any depth (`**/.env`, `*.pem`, `**/secrets/**`) keeps
//! matching wherever its entry is moved, so it holds nothing; an anchored pattern
//! (`config/*.pem`) is held by the directories of its literal part (`config`); a pattern
//! with `**` between components (`**/a/b`) by every directory.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use confine_beneath::{EntryKind, Symlinks, resolve_beneath as resolve};
use confine_pathgrammar::RelPath;
use confine_rootid::{FileId, WorkspaceRoot};
use rustix::fs::OFlags;

use crate::error::{CallError, ErrorKind, failed};
use crate::patterns::{PathPatterns, PatternError, literal_part};

/// The most patterns a deny list holds.
pub const MAX_DENIED_PATTERNS: usize = crate::patterns::MAX_PATTERNS;

/// The most entries the walk for the sandbox's covers looks at
/// ([`DeniedPaths::existing_beneath`]); beyond it a sandboxed run is refused.
pub const MAX_COVER_SCAN: usize = 100_000;

/// The most denied entries the sandbox covers for one run (one mount each); beyond it a
/// sandboxed run is refused.
pub const MAX_COVERED: usize = 1024;

/// A list of denied paths (see the module docs), compiled. The default denies nothing.
#[derive(Debug, Clone)]
pub struct DeniedPaths {
    list: PathPatterns,
}

impl Default for DeniedPaths {
    fn default() -> Self {
        Self::none()
    }
}

/// Why the sandbox cannot cover the denied entries of a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoverError {
    /// More than [`MAX_COVER_SCAN`] entries would have to be looked at.
    TooManyEntries,
    /// More than [`MAX_COVERED`] entries are denied.
    TooManyDenied,
}

impl DeniedPaths {
    /// The list of `patterns`, in order.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, PatternError> {
        let patterns = patterns.iter().map(|p| p.as_ref().to_owned()).collect();
        let list = PathPatterns::new(patterns, "more than 256 denied patterns", |anchored| {
            !moves_with_its_name(anchored)
        })?;
        Ok(Self { list })
    }

    /// Nothing denied.
    pub fn none() -> Self {
        Self {
            list: PathPatterns::empty(),
        }
    }

    /// The patterns as given.
    pub fn patterns(&self) -> &[String] {
        self.list.patterns()
    }

    /// Whether the list is empty (nothing is denied).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether `rel` (relative to the root, plain names) is denied: it or a directory above it
    /// matches a pattern.
    pub fn is_denied(&self, rel: &Path) -> bool {
        self.list.matches(rel)
    }

    /// Whether a directory at `rel` could hold a denied path whose status depends on where the
    /// directory stands (see the module docs), or is denied itself: never moved away, nor
    /// anything moved there.
    pub fn may_hold(&self, rel: &Path) -> bool {
        self.list.holds(rel) || self.is_denied(rel)
    }

    /// The denied entries that exist beneath `root` (a descriptor of the workspace root, walked
    /// with `confine_beneath::walk_tree`), outermost first: what the sandbox covers for a child. The walk starts at each
    /// pattern's literal part (the whole root for a pattern that matches at any depth), does
    /// not follow symlinks, does not descend into a denied directory (it is covered whole) and
    /// looks at most at [`MAX_COVER_SCAN`] entries; at most [`MAX_COVERED`] are found. Beyond
    /// either bound, `Err`: a caller must not run a child with a denied entry uncovered. A
    /// symlink is never listed (a mount on it would land on its target): what it leads to is
    /// covered where that is denied.
    pub fn existing_beneath(&self, root: impl AsFd) -> Result<Vec<PathBuf>, CoverError> {
        self.existing_bounded(root, MAX_COVER_SCAN, MAX_COVERED)
    }

    fn existing_bounded(
        &self,
        root: impl AsFd,
        max_scan: usize,
        max_found: usize,
    ) -> Result<Vec<PathBuf>, CoverError> {
        let mut starts: Vec<PathBuf> = Vec::new();
        for anchored in self.list.anchored() {
            let (literal, all_literal) = literal_part(&anchored);
            // The directory the walk starts in: above a literal leaf, the literal part else.
            let start = match all_literal {
                true => literal.parent().map(Path::to_path_buf).unwrap_or_default(),
                false => literal,
            };
            starts.push(start);
        }
        starts.sort_by_key(|p| p.components().count());
        let mut walked: Vec<PathBuf> = Vec::new();
        for s in starts {
            if !walked.iter().any(|w| s.starts_with(w)) {
                walked.push(s);
            }
        }
        let mut found: Vec<PathBuf> = Vec::new();
        // One bound across every start: what the walks look at in all.
        let mut left = max_scan;
        for start in walked {
            let mut seen = 0usize;
            let walked = confine_beneath::walk_tree(&root, &start, left, |rel, kind| {
                seen += 1;
                if self.is_denied(rel) {
                    if kind != EntryKind::Symlink {
                        if found.len() == max_found {
                            return Err(CoverError::TooManyDenied);
                        }
                        found.push(rel.to_path_buf());
                    }
                    return Ok(false);
                }
                Ok(kind == EntryKind::Directory)
            });
            match walked {
                Ok(()) => left -= seen,
                Err(confine_beneath::TreeWalkError::Visitor(e)) => return Err(e),
                Err(_) => return Err(CoverError::TooManyEntries),
            }
        }
        found.sort_by_key(|p| p.components().count());
        Ok(found)
    }
}

/// Whether an anchored pattern matches one name at any depth (`**/x`, `**/x/**`): it keeps
/// matching an entry wherever the entry is moved, so no directory holds it.
fn moves_with_its_name(anchored: &str) -> bool {
    let stem = anchored.strip_suffix("/**").unwrap_or(anchored);
    stem.strip_prefix("**/")
        .is_some_and(|rest| !rest.contains('/') && rest != "**")
}

fn refused() -> CallError {
    failed(ErrorKind::PathDenied)
}

impl DeniedPaths {
    /// A path a tool was given, before anything is opened: `PATH_DENIED` when it is denied as
    /// written, as it resolves beneath the root (the leaf's symlink followed), or as the entry
    /// itself (the parents' symlinks followed). See the module docs.
    pub(crate) fn check_path(&self, root: &WorkspaceRoot, path: &RelPath) -> Result<(), CallError> {
        if self.is_empty() {
            return Ok(());
        }
        let rel = Path::new(path.as_str());
        if self.is_denied(rel) {
            return Err(refused());
        }
        for follow_leaf in [false, true] {
            if let Some(real) = resolve(root.dir(), rel, follow_leaf)
                && self.is_denied(&real)
            {
                return Err(refused());
            }
        }
        Ok(())
    }

    /// Either end of a move, before anything is opened: [`check_path`](Self::check_path), and
    /// `PATH_DENIED` when it may hold a denied path (as written or as the entry resolves).
    pub(crate) fn check_moved(
        &self,
        root: &WorkspaceRoot,
        path: &RelPath,
    ) -> Result<(), CallError> {
        if self.is_empty() {
            return Ok(());
        }
        self.check_path(root, path)?;
        let rel = Path::new(path.as_str());
        let real = resolve(root.dir(), rel, false);
        match self.may_hold(rel) || real.is_some_and(|r| self.may_hold(&r)) {
            true => Err(refused()),
            false => Ok(()),
        }
    }

    /// After a read of `path`: its resolution now must not be denied, and must name (without
    /// following a symlink) the file that was read, of identity `opened`
    /// (`PATH_CHANGED_DURING_READ` otherwise).
    pub(crate) fn check_read(
        &self,
        root: &WorkspaceRoot,
        path: &Path,
        opened: FileId,
    ) -> Result<(), CallError> {
        if self.is_empty() {
            return Ok(());
        }
        let changed = || failed(ErrorKind::PathChangedDuringRead);
        let real = resolve(root.dir(), path, true).ok_or_else(changed)?;
        if self.is_denied(&real) {
            return Err(refused());
        }
        let flags = OFlags::PATH | OFlags::NOFOLLOW;
        let fd = confine_beneath::open_beneath(root.dir(), &real, flags, Symlinks::Refuse)
            .map_err(|_| changed())?;
        let now = rustix::fs::fstat(&fd).map_err(|_| changed())?;
        match FileId::of(&now) == opened {
            true => Ok(()),
            false => Err(changed()),
        }
    }

    /// The entry `name` in the held directory `dir`, judged where `dir` really stands beneath
    /// the root now: `PATH_DENIED` when it is denied (or, with `holders`, may hold a denied
    /// path). A directory no longer beneath the root is `PATH_OUTSIDE_WORKSPACE`.
    pub(crate) fn check_in(
        &self,
        root: &WorkspaceRoot,
        dir: &Dir,
        name: &str,
        holders: bool,
    ) -> Result<(), CallError> {
        if self.is_empty() {
            return Ok(());
        }
        crate::patterns::check_in(
            root,
            dir,
            name,
            ErrorKind::PathDenied,
            |place| match holders {
                true => self.may_hold(place),
                false => self.is_denied(place),
            },
        )
    }

    /// Where a held directory a walk starts in really stands beneath the root: its path, or
    /// `PATH_DENIED` when that is denied (`PATH_OUTSIDE_WORKSPACE` when it is not beneath the
    /// root). `None` when nothing is denied (nothing to judge).
    pub(crate) fn walk_start(
        &self,
        root: &WorkspaceRoot,
        dir: impl std::os::fd::AsFd,
    ) -> Result<Option<String>, CallError> {
        if self.is_empty() {
            return Ok(None);
        }
        let outside = || failed(ErrorKind::PathOutsideWorkspace);
        let place = confine_beneath::path_beneath(dir, root.dir())
            .map_err(|_| failed(ErrorKind::PathChangedDuringRead))?
            .ok_or_else(outside)?;
        if self.is_denied(&place) {
            return Err(refused());
        }
        Ok(Some(place.to_str().ok_or_else(refused)?.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    #[test]
    fn patterns_deny_what_they_match_and_everything_beneath() {
        let list =
            DeniedPaths::new(&["**/.env", "*.pem", "secrets/**", "/config/db.json"]).unwrap();
        for yes in [
            ".env",
            "a/b/.env",
            "key.pem",
            "deep/key.pem",
            "secrets",
            "secrets/x",
            "secrets/a/b",
            "config/db.json",
            "key.pem/inside",
        ] {
            assert!(list.is_denied(p(yes)), "{yes}");
        }
        for no in [
            ".envrc",
            "env",
            "key.pem.txt",
            "sub/secrets/x",
            "config/other.json",
            "sub/config/db.json",
            "",
        ] {
            assert!(!list.is_denied(p(no)), "{no}");
        }
        assert!(DeniedPaths::none().is_empty());
        assert!(!DeniedPaths::default().is_denied(p(".env")));
    }

    #[test]
    fn only_anchored_patterns_hold_directories() {
        let list = DeniedPaths::new(&["**/.env", "*.pem", "**/secrets/**"]).unwrap();
        assert!(!list.may_hold(p("src")));
        assert!(!list.may_hold(p("a/b")));
        assert!(list.may_hold(p("secrets")));
        let anchored = DeniedPaths::new(&["config/*.pem"]).unwrap();
        assert!(anchored.may_hold(p("config")));
        assert!(!anchored.may_hold(p("src")));
        let deep = DeniedPaths::new(&["**/a/b"]).unwrap();
        assert!(deep.may_hold(p("x")));
    }

    #[test]
    fn bad_patterns_are_refused_and_the_count_is_bounded() {
        for bad in ["", " ", "!x", "../x", "a//b", "/", "a\0b", "[", "a/{b"] {
            assert!(DeniedPaths::new(&[bad]).is_err(), "{bad:?}");
        }
        let names: Vec<String> = (0..MAX_DENIED_PATTERNS).map(|i| format!("f{i}")).collect();
        assert!(DeniedPaths::new(&names).is_ok());
        let mut more = names.clone();
        more.push("one-more".into());
        let long = "a".repeat(1024);
        assert!(DeniedPaths::new(&[long.as_str()]).is_ok());
        let longer = "a".repeat(1025);
        assert!(DeniedPaths::new(&[longer.as_str()]).is_err());
        let e = DeniedPaths::new(&more).unwrap_err();
        assert!(e.to_string().contains("more than 256"), "{e}");
    }

    #[test]
    fn existing_beneath_finds_the_outermost_entries_and_skips_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("secrets/inner")).unwrap();
        std::fs::write(root.join("secrets/inner/x"), "").unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/.env"), "").unwrap();
        std::fs::write(root.join("k.pem"), "").unwrap();
        std::fs::write(root.join("ok.txt"), "").unwrap();
        std::os::unix::fs::symlink("k.pem", root.join("link.pem")).unwrap();
        let list = DeniedPaths::new(&["**/.env", "*.pem", "secrets/**", "missing/x"]).unwrap();
        let mut got = list
            .existing_beneath(std::fs::File::open(root).unwrap())
            .unwrap();
        got.sort();
        let want: Vec<PathBuf> = ["a/b/.env", "k.pem", "secrets"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_cover_walk_is_bounded_at_n_and_n_plus_one() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        for i in 0..10 {
            std::fs::write(root.join(format!("f{i}.pem")), "").unwrap();
        }
        let list = DeniedPaths::new(&["*.pem"]).unwrap();
        let root = &std::fs::File::open(root).unwrap();
        // Ten entries looked at, ten found.
        assert_eq!(list.existing_bounded(root, 10, 10).unwrap().len(), 10);
        assert_eq!(
            list.existing_bounded(root, 9, 10),
            Err(CoverError::TooManyEntries)
        );
        assert_eq!(
            list.existing_bounded(root, 10, 9),
            Err(CoverError::TooManyDenied)
        );
    }
}
