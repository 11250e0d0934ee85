//! Path resolution shared by the guard and the jail: lexical `..` collapse (node's
//! `path.resolve`), then a symlink walk that tolerates a missing tail.
//!
//! The walk is `realpath(3)` done one component at a time with `lstat`, with two differences:
//! a component that does not exist does not stop it (the rest is appended literally, since
//! nothing can exist beneath a missing entry), and a symlink is followed whether or not its
//! target exists. So a dangling symlink is judged by where it points, and a later create
//! through it cannot land anywhere the judgement did not see. More than [`MAX_SYMLINKS`]
//! follows is a loop.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::FileType;
use rustix::io::Errno;

use crate::error::{Error, ErrorKind};

/// The most symlinks one resolution follows before it is called a loop (Linux `MAXSYMLINKS`).
pub const MAX_SYMLINKS: usize = 40;

/// `p` made absolute against `base` and `.`/`..` collapsed lexically, as node's
/// `path.resolve(base, p)` does: an absolute `p` ignores `base`; `..` at `/` stays at `/`.
pub(crate) fn lexical_absolute(base: &Path, p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let parts = if p.is_absolute() {
        None
    } else {
        Some(base.components())
    };
    for c in parts.into_iter().flatten().chain(p.components()) {
        match c {
            Component::Prefix(_) | Component::RootDir => {}
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Reject what cannot name a file at all.
pub(crate) fn check_path_text(p: &Path) -> Result<(), Error> {
    if p.as_os_str().as_bytes().contains(&0) {
        return Err(Error::new(ErrorKind::InvalidPath));
    }
    Ok(())
}

/// The outcome of [`walk`].
#[derive(Debug)]
pub(crate) struct Walked {
    /// The resolved absolute path: no `.` or `..`, no symlink in its existing part.
    pub path: PathBuf,
    /// Number of components (below `/`) of `path`.
    depth: usize,
    /// The 1-based index of the first component that did not exist, if any.
    missing_from: Option<usize>,
}

impl Walked {
    /// Whether the whole path existed when it was walked.
    pub fn exists(&self) -> bool {
        self.missing_from.is_none()
    }

    /// Whether everything but the last component existed.
    pub fn parent_exists(&self) -> bool {
        match self.missing_from {
            None => true,
            Some(i) => i == self.depth,
        }
    }

    /// The existing prefix of the path (the whole path when it exists).
    pub fn existing_prefix(&self) -> PathBuf {
        match self.missing_from {
            None => self.path.clone(),
            Some(i) => self.path.components().take(i).collect(),
        }
    }
}

enum Step {
    Parent,
    Name(OsString),
}

fn push_components(stack: &mut Vec<Step>, p: &Path) {
    // The stack is consumed from its end, so the components go on in reverse.
    for c in p.components().rev() {
        match c {
            Component::Normal(n) => stack.push(Step::Name(n.to_owned())),
            Component::ParentDir => stack.push(Step::Parent),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
}

/// Resolve the absolute, lexically normalized `abs`. When `trusted` is given, it must be a
/// canonical directory (just canonicalized by the caller) and is not walked again when `abs`
/// starts with it.
pub(crate) fn walk(abs: &Path, trusted: Option<&Path>) -> Result<Walked, Error> {
    debug_assert!(abs.is_absolute());
    let mut out = PathBuf::from("/");
    let mut depth = 0usize;
    let mut stack: Vec<Step> = Vec::new();
    match trusted.and_then(|t| abs.strip_prefix(t).ok().map(|rest| (t, rest))) {
        Some((t, rest)) => {
            out = t.to_path_buf();
            depth = t.components().count() - 1;
            push_components(&mut stack, rest);
        }
        None => push_components(&mut stack, abs),
    }
    let mut missing_from: Option<usize> = None;
    let mut follows = 0usize;
    while let Some(step) = stack.pop() {
        match step {
            Step::Parent => {
                if out.pop() {
                    depth -= 1;
                }
                if missing_from.is_some_and(|m| depth < m) {
                    missing_from = None;
                }
            }
            Step::Name(name) => {
                out.push(&name);
                depth += 1;
                if missing_from.is_some() {
                    continue;
                }
                match rustix::fs::lstat(&out) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                        follows += 1;
                        if follows > MAX_SYMLINKS {
                            return Err(Error::new(ErrorKind::SymlinkLoop));
                        }
                        let target = rustix::fs::readlink(&out, Vec::new())
                            .map_err(|e| Error::with_source(ErrorKind::Io, e))?;
                        let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                        out.pop();
                        depth -= 1;
                        if target.is_absolute() {
                            out = PathBuf::from("/");
                            depth = 0;
                        }
                        push_components(&mut stack, &target);
                    }
                    Ok(_) => {}
                    Err(Errno::NOENT) | Err(Errno::NOTDIR) => missing_from = Some(depth),
                    Err(Errno::LOOP) => return Err(Error::new(ErrorKind::SymlinkLoop)),
                    Err(e) => return Err(Error::with_source(ErrorKind::Io, e)),
                }
            }
        }
    }
    Ok(Walked {
        path: out,
        depth,
        missing_from,
    })
}

/// Whether `path` is `bound` or lies beneath it, judged component by component (never as a
/// string prefix: `/tmp/cc-task-evil` is not within `/tmp/cc-task`).
pub(crate) fn within(path: &Path, bound: &Path) -> bool {
    path.starts_with(bound)
}

/// The last component of `p` as an `OsStr`, if it has one.
pub(crate) fn leaf(p: &Path) -> Option<&OsStr> {
    match p.components().next_back() {
        Some(Component::Normal(n)) => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_absolute_collapses_like_node_resolve() {
        let base = Path::new("/r/a");
        let cases = [
            ("x", "/r/a/x"),
            ("./x/", "/r/a/x"),
            ("sub/../ok.txt", "/r/a/ok.txt"),
            ("../escape", "/r/escape"),
            ("../../../../..", "/"),
            ("/etc/passwd", "/etc/passwd"),
            ("/a/../../b", "/b"),
            ("", "/r/a"),
            ("~", "/r/a/~"),
            ("%2e%2e/x", "/r/a/%2e%2e/x"),
            ("a//b", "/r/a/a/b"),
        ];
        for (input, expect) in cases {
            assert_eq!(
                lexical_absolute(base, Path::new(input)),
                Path::new(expect),
                "{input}"
            );
        }
    }

    #[test]
    fn within_is_component_wise() {
        assert!(within(Path::new("/tmp/cc"), Path::new("/tmp/cc")));
        assert!(within(Path::new("/tmp/cc/x"), Path::new("/tmp/cc")));
        assert!(!within(Path::new("/tmp/cc-evil"), Path::new("/tmp/cc")));
        assert!(!within(Path::new("/tmp"), Path::new("/tmp/cc")));
    }

    #[test]
    fn walk_missing_tail_and_existing_prefix() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let w = walk(&root.join("d/new/deeper.txt"), None).unwrap();
        assert!(!w.exists());
        assert!(!w.parent_exists());
        assert_eq!(w.existing_prefix(), root.join("d"));
        let w = walk(&root.join("d/new.txt"), Some(&root)).unwrap();
        assert!(!w.exists());
        assert!(w.parent_exists());
        assert_eq!(w.path, root.join("d/new.txt"));
        let w = walk(&root.join("d"), None).unwrap();
        assert!(w.exists());
        assert_eq!(w.existing_prefix(), root.join("d"));
    }

    #[test]
    fn walk_rejects_nul() {
        assert_eq!(
            check_path_text(Path::new("a\0b")).unwrap_err().kind(),
            ErrorKind::InvalidPath
        );
        assert!(check_path_text(Path::new("a/b")).is_ok());
    }
}
