//! The lexical side of path checks shared by the guard and the jail: `..` collapsed as
//! node's `path.resolve` does, the text a path may hold, and component-wise containment. The
//! symlink resolution that follows is `confine_beneath::resolve_path`; [`walk`] maps its
//! failures to this crate's tokens.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use confine_beneath::{ResolveError, Resolved, resolve_path};

use crate::error::{Error, ErrorKind};

/// [`resolve_path`] of `abs`, its failures as this crate's errors.
pub(crate) fn resolve(abs: &Path, trusted: Option<&Path>) -> Result<Resolved, Error> {
    resolve_path(abs, trusted).map_err(|e| match e {
        ResolveError::Loop => Error::new(ErrorKind::SymlinkLoop),
        ResolveError::Io(errno) => Error::with_source(ErrorKind::Io, errno),
        _ => Error::new(ErrorKind::Io),
    })
}

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
    fn path_text_rejects_nul() {
        assert_eq!(
            check_path_text(Path::new("a\0b")).unwrap_err().kind(),
            ErrorKind::InvalidPath
        );
        assert!(check_path_text(Path::new("a/b")).is_ok());
    }
}
