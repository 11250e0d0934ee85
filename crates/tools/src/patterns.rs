//! The one pattern type under the deny list ([`crate::deny`]) and the protected list
//! ([`crate::protect`]), as ripgrep's `Override` stands on its `Gitignore`: gitignore-style
//! globs relative to the root, compiled once by globset, and the judgement of a held
//! directory's entry where that directory really stands.
//!
//! A pattern holding a `/` (other than a trailing one) is anchored at the root, one without
//! matches a name at any depth; `*` and `?` stop at `/`, `**` crosses it; a leading `/`
//! anchors, a trailing `/` is dropped. A pattern matches what it names **and everything
//! beneath it**, and `dir/**` matches `dir` itself too. Negation (`!`) is not offered. The
//! directories above what a pattern names (its leading components; after a `**`, anything)
//! are its *holders*: a directory that may hold a matched path by where it stands.

use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use confine_rootid::WorkspaceRoot;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::{CallError, ErrorKind, ToolError, failed};

/// The most patterns a list holds.
pub const MAX_PATTERNS: usize = 256;

/// The longest pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;

/// A pattern a list refused: empty, too long, holding NUL, a negation, a glob that does not
/// compile, or one pattern too many.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {pattern:?}")]
pub struct PatternError {
    pattern: String,
    reason: &'static str,
}

/// A list of patterns, compiled: what they match, and what may hold a match.
#[derive(Debug, Clone)]
pub(crate) struct PathPatterns {
    patterns: Vec<String>,
    matches: GlobSet,
    holders: GlobSet,
}

impl PathPatterns {
    /// The list of `patterns`, in order: at most [`MAX_PATTERNS`] (`too_many` the reason
    /// beyond), each within [`MAX_PATTERN_BYTES`]. Only the patterns for which `holds` (given
    /// the anchored pattern) is true have holders.
    pub(crate) fn new(
        patterns: Vec<String>,
        too_many: &'static str,
        holds: fn(&str) -> bool,
    ) -> Result<Self, PatternError> {
        let mut matches = GlobSetBuilder::new();
        let mut holders = GlobSetBuilder::new();
        for (i, pattern) in patterns.iter().enumerate() {
            let refuse = |reason| PatternError {
                pattern: pattern.clone(),
                reason,
            };
            if i >= MAX_PATTERNS {
                return Err(refuse(too_many));
            }
            let anchored = anchored(pattern).map_err(refuse)?;
            for glob in expansions(&anchored) {
                matches.add(compile(&glob).map_err(|_| refuse("not a valid glob"))?);
            }
            if holds(&anchored) {
                for glob in ancestors(&anchored) {
                    holders.add(compile(&glob).map_err(|_| refuse("not a valid glob"))?);
                }
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build().map_err(|_| PatternError {
                pattern: String::new(),
                reason: "the patterns do not compile together",
            })
        };
        Ok(Self {
            matches: build(matches)?,
            holders: build(holders)?,
            patterns,
        })
    }

    /// No pattern.
    pub(crate) fn empty() -> Self {
        Self {
            patterns: Vec::new(),
            matches: GlobSet::empty(),
            holders: GlobSet::empty(),
        }
    }

    /// The patterns as given.
    pub(crate) fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether there is no pattern.
    pub(crate) fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `rel` (relative to the root, plain names) or a directory above it matches.
    pub(crate) fn matches(&self, rel: &Path) -> bool {
        if self.patterns.is_empty() || rel.as_os_str().is_empty() {
            return false;
        }
        rel.ancestors()
            .filter(|p| !p.as_os_str().is_empty())
            .any(|p| self.matches.is_match(p))
    }

    /// Whether `rel` is a holder of a pattern (see the module docs).
    pub(crate) fn holds(&self, rel: &Path) -> bool {
        !rel.as_os_str().is_empty() && self.holders.is_match(rel)
    }

    /// The patterns anchored at the root (every one compiled in [`new`](Self::new)).
    pub(crate) fn anchored(&self) -> impl Iterator<Item = String> + '_ {
        self.patterns.iter().filter_map(|p| anchored(p).ok())
    }
}

/// The entry `name` in the held directory `dir`, judged where `dir` really stands beneath the
/// root now: `Err` of `refused` when `hit` says so of that place. A directory no longer
/// beneath the root is `PATH_OUTSIDE_WORKSPACE`.
pub(crate) fn check_in(
    root: &WorkspaceRoot,
    dir: &Dir,
    name: &str,
    refused: ErrorKind,
    hit: impl FnOnce(&Path) -> bool,
) -> Result<(), CallError> {
    let place = match place_of(root, dir)? {
        Some(place) => place.join(name),
        None => {
            return Err(CallError::Failed(ToolError::failed(
                ErrorKind::PathOutsideWorkspace,
            )));
        }
    };
    match hit(&place) {
        true => Err(failed(refused)),
        false => Ok(()),
    }
}

/// How often [`place_of`] looks again at a directory another process keeps moving.
const PLACE_TRIES: usize = 4;

/// Where the held directory `dir` stands beneath the root (`None`: not beneath it). A
/// directory renamed while it is named can make a look fail (`ESTALE`, `ENOENT`): looked at
/// again, at most [`PLACE_TRIES`] times, then `PATH_CHANGED_DURING_READ` (it kept moving:
/// nothing was done); any other failure is `WRITE_FAILED`.
pub(crate) fn place_of(root: &WorkspaceRoot, dir: &Dir) -> Result<Option<PathBuf>, CallError> {
    let mut last = None;
    for _ in 0..PLACE_TRIES {
        match confine_beneath::path_beneath(dir.as_fd(), root.dir()) {
            Ok(place) => return Ok(place),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESTALE | libc::ENOENT)) => {
                last = Some(e);
            }
            Err(e) => {
                return Err(failed(ErrorKind::WriteFailed).with_source(e));
            }
        }
    }
    let moved = failed(ErrorKind::PathChangedDuringRead);
    Err(match last {
        Some(e) => moved.with_source(e),
        None => moved,
    })
}

/// A pattern made relative to the root: `/x` and `x/` lose the slash, a pattern without a
/// `/` gets `**/` in front (it matches at any depth).
pub(crate) fn anchored(pattern: &str) -> Result<String, &'static str> {
    if pattern.is_empty() || pattern.trim().is_empty() {
        return Err("an empty pattern");
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err("a pattern over 1024 bytes");
    }
    if pattern.contains('\0') {
        return Err("a pattern holding NUL");
    }
    if pattern.starts_with('!') {
        return Err("negation (!) is not offered");
    }
    let trimmed = pattern.strip_suffix('/').unwrap_or(pattern);
    let (body, rooted) = match trimmed.strip_prefix('/') {
        Some(rest) => (rest, true),
        None => (trimmed, false),
    };
    if body.is_empty()
        || body
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("a pattern must name paths beneath the root");
    }
    Ok(if rooted || body.contains('/') {
        body.to_owned()
    } else {
        format!("**/{body}")
    })
}

/// The leading components of an anchored pattern that hold no wildcard (`a/b` for
/// `a/b/*.pem`; the whole stem for `a/b/c` and `a/b/c/**`), and whether that is all of it.
/// [`anchored`] refuses empty, `.` and `..` components, so the counts compare alike.
pub(crate) fn literal_part(anchored: &str) -> (PathBuf, bool) {
    let stem = anchored.strip_suffix("/**").unwrap_or(anchored);
    let literal: Vec<&str> = stem
        .split('/')
        .take_while(|c| !c.contains(['*', '?', '[', '{', '\\']))
        .collect();
    let all = literal.len() == stem.split('/').count();
    (literal.iter().collect(), all)
}

/// The globs that match what an anchored pattern names (itself; `x/**` also `x`).
fn expansions(anchored: &str) -> Vec<String> {
    let mut out = vec![anchored.to_owned()];
    if let Some(stem) = anchored.strip_suffix("/**") {
        out.push(stem.to_owned());
    }
    out
}

/// The globs matching the directories above what an anchored pattern names: its leading
/// components (`.git` for `.git/hooks/**`); after a `**` component, anything beneath.
fn ancestors(anchored: &str) -> Vec<String> {
    let stem = anchored.strip_suffix("/**").unwrap_or(anchored);
    let parts: Vec<&str> = stem.split('/').collect();
    let mut out = Vec::new();
    for n in 1..parts.len() {
        let prefix = parts[..n].join("/");
        if parts[n - 1] == "**" {
            out.push(prefix);
            break;
        }
        out.push(prefix);
    }
    out
}

fn compile(glob: &str) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}
