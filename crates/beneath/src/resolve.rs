//! Resolving a host path as `realpath(3)` does, one component at a time with `lstat`, with
//! two differences: a component that does not exist does not stop it (the rest is appended
//! literally, since nothing can exist beneath a missing entry), and a symlink is followed
//! whether or not its target exists. So a dangling symlink is judged by where it points, and a
//! later create through it cannot land anywhere the judgement did not see. More than
//! [`MAX_SYMLINKS`] follows is a loop.
//!
//! This is the one resolution here that works on path strings rather than descriptors: the
//! path guard (`resolve_in_sandbox`) and the jail judge paths that the caller then uses by
//! name. The jail's own opens then go through [`open_beneath`](crate::open_beneath) on the
//! bound's descriptor, which is what makes its check and its use the same.
//!
//! Its twin for names beneath a held directory, [`resolve_beneath`], follows the same rules
//! (the same bound on symlinks, a missing tail kept as written) with `readlinkat` on the
//! directory's descriptor, and refuses to leave the directory: it judges a name (the deny
//! list's), it opens nothing.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::FileType;
use rustix::io::Errno;

/// The most symlinks one resolution follows before it is called a loop (Linux `MAXSYMLINKS`).
pub const MAX_SYMLINKS: usize = 40;

/// Why [`resolve_path`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ResolveError {
    /// More than [`MAX_SYMLINKS`] symlinks, or the kernel's `ELOOP`.
    Loop,
    /// `lstat` or `readlink` failed otherwise.
    Io(Errno),
}

impl std::fmt::Display for ResolveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Loop => f.write_str("too many levels of symbolic links"),
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ResolveError {}

/// The outcome of [`resolve_path`].
#[derive(Debug)]
pub struct Resolved {
    /// The resolved absolute path: no `.` or `..`, no symlink in its existing part.
    pub path: PathBuf,
    /// Number of components (below `/`) of `path`.
    depth: usize,
    /// The 1-based index of the first component that did not exist, if any.
    missing_from: Option<usize>,
}

impl Resolved {
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
pub fn resolve_path(abs: &Path, trusted: Option<&Path>) -> Result<Resolved, ResolveError> {
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
                            return Err(ResolveError::Loop);
                        }
                        let target =
                            rustix::fs::readlink(&out, Vec::new()).map_err(ResolveError::Io)?;
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
                    Err(Errno::LOOP) => return Err(ResolveError::Loop),
                    Err(e) => return Err(ResolveError::Io(e)),
                }
            }
        }
    }
    Ok(Resolved {
        path: out,
        depth,
        missing_from,
    })
}

/// The path `rel` names beneath the directory `dir`, its symlinks followed (the leaf's when
/// `follow_leaf`), as plain names relative to `dir`: `None` when it leaves `dir` (a `..` above
/// it, an absolute symlink) or follows more than [`MAX_SYMLINKS`] symlinks. A component that
/// does not exist ends the resolution: the rest is kept as written. Only for judging a name:
/// nothing is opened by it, so a caller that then opens must judge what it opened too.
pub fn resolve_beneath(dir: impl AsFd, rel: &Path, follow_leaf: bool) -> Option<PathBuf> {
    let dir = dir.as_fd();
    let mut todo: VecDeque<OsString> = rel.components().map(|c| c.as_os_str().to_owned()).collect();
    let mut out = PathBuf::new();
    let mut links = 0usize;
    while let Some(part) = todo.pop_front() {
        match part.as_bytes() {
            b"." | b"" => continue,
            b".." => {
                if !out.pop() {
                    return None;
                }
                continue;
            }
            _ => {}
        }
        let candidate = out.join(&part);
        if todo.is_empty() && !follow_leaf {
            return Some(candidate);
        }
        match rustix::fs::readlinkat(dir, &candidate, Vec::new()) {
            Ok(target) => {
                links += 1;
                if links > MAX_SYMLINKS {
                    return None;
                }
                let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                if target.is_absolute() {
                    return None;
                }
                for c in target.components().rev() {
                    todo.push_front(c.as_os_str().to_owned());
                }
            }
            // Not a symlink (EINVAL), or missing from here on: the rest as written.
            Err(Errno::INVAL) => out = candidate,
            Err(_) => {
                out = candidate;
                for rest in todo.drain(..) {
                    out.push(rest);
                }
                return Some(out);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_beneath_follows_at_most_40_symlinks() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::write(root.join(".env"), "").unwrap();
        // l0 -> .env, l{i} -> l{i-1}: naming l{n-1} follows n links.
        std::os::unix::fs::symlink(".env", root.join("l0")).unwrap();
        for i in 1..=MAX_SYMLINKS {
            std::os::unix::fs::symlink(format!("l{}", i - 1), root.join(format!("l{i}"))).unwrap();
        }
        let dir = std::fs::File::open(root).unwrap();
        let last = format!("l{}", MAX_SYMLINKS - 1);
        assert_eq!(
            resolve_beneath(&dir, Path::new(&last), true),
            Some(".env".into())
        );
        let one_more = format!("l{MAX_SYMLINKS}");
        assert_eq!(resolve_beneath(&dir, Path::new(&one_more), true), None);
    }

    #[test]
    fn resolve_beneath_follows_symlinks_beneath_the_directory() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("real/sub")).unwrap();
        std::fs::write(root.join("real/sub/.env"), "").unwrap();
        std::os::unix::fs::symlink("real", root.join("dirlink")).unwrap();
        std::os::unix::fs::symlink("sub/.env", root.join("real/envlink")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("abs")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        let dir = std::fs::File::open(root).unwrap();
        let r = |s: &str, f: bool| resolve_beneath(&dir, Path::new(s), f);
        assert_eq!(r("dirlink/envlink", true), Some("real/sub/.env".into()));
        assert_eq!(r("dirlink/envlink", false), Some("real/envlink".into()));
        assert_eq!(r("dirlink/missing/x", true), Some("real/missing/x".into()));
        assert_eq!(r("abs", true), None);
        assert_eq!(r("abs", false), Some("abs".into()));
        assert_eq!(r("loop", true), None);
        assert_eq!(r("real/../../x", true), None);
    }

    #[test]
    fn a_missing_tail_is_kept_and_the_existing_prefix_known() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let w = resolve_path(&root.join("d/new/deeper.txt"), None).unwrap();
        assert!(!w.exists());
        assert!(!w.parent_exists());
        assert_eq!(w.existing_prefix(), root.join("d"));
        let w = resolve_path(&root.join("d/new.txt"), Some(&root)).unwrap();
        assert!(!w.exists());
        assert!(w.parent_exists());
        assert_eq!(w.path, root.join("d/new.txt"));
        let w = resolve_path(&root.join("d"), None).unwrap();
        assert!(w.exists());
        assert_eq!(w.existing_prefix(), root.join("d"));
    }

    #[test]
    fn a_dangling_symlink_is_judged_by_its_target_and_a_loop_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        std::os::unix::fs::symlink("/nowhere/at/all", root.join("dangling")).unwrap();
        let w = resolve_path(&root.join("dangling"), None).unwrap();
        assert_eq!(w.path, Path::new("/nowhere/at/all"));
        std::os::unix::fs::symlink("b", root.join("a")).unwrap();
        std::os::unix::fs::symlink("a", root.join("b")).unwrap();
        assert!(matches!(
            resolve_path(&root.join("a"), None),
            Err(ResolveError::Loop)
        ));
    }
}
