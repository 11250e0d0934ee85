//! [`resolve_in_sandbox`]: the path guard (absolute paths allowed when they land inside,
//! the deepest existing ancestor canonicalized, containment judged by `relative()`, never by a
//! string prefix).

use std::path::{Path, PathBuf};

use crate::error::{Error, ErrorKind};
use crate::lexical::{check_path_text, lexical_absolute, resolve, within};

/// What [`resolve_in_sandbox`] decided: `ok` with the canonical `resolved` path inside the
/// root, or not `ok` with an `error`.
#[derive(Debug)]
pub struct GuardResult {
    /// Whether the path lands inside the sandbox root.
    pub ok: bool,
    /// The resolved path (absolute, no `.`/`..`, no symlink in its existing part) when `ok`.
    pub resolved: Option<PathBuf>,
    /// Why the path was refused when not `ok`: [`ErrorKind::OutsideSandbox`],
    /// [`ErrorKind::SymlinkLoop`], [`ErrorKind::InvalidRoot`], [`ErrorKind::InvalidPath`] or
    /// [`ErrorKind::Io`].
    pub error: Option<Error>,
}

impl GuardResult {
    fn accept(resolved: PathBuf) -> Self {
        Self {
            ok: true,
            resolved: Some(resolved),
            error: None,
        }
    }

    fn reject(error: Error) -> Self {
        Self {
            ok: false,
            resolved: None,
            error: Some(error),
        }
    }

    /// The outcome as a `Result`.
    pub fn into_result(self) -> Result<PathBuf, Error> {
        match (self.resolved, self.error) {
            (Some(p), None) if self.ok => Ok(p),
            (_, Some(e)) => Err(e),
            _ => Err(Error::new(ErrorKind::OutsideSandbox)),
        }
    }
}

/// Map the model-supplied path `p` into the sandbox rooted at `task_dir`, or refuse it.
///
/// 1. The root is canonicalized (`realpath`) on every call, so symlinks in the root itself
///    are resolved.
/// 2. An absolute `p` is taken as it is; a relative one is joined to the canonical root. `.`
///    and `..` are then collapsed lexically, as node's `path.resolve` does (`sub/../ok.txt`
///    is `ok.txt`; `..` at `/` stays at `/`).
/// 3. Symlinks are resolved component by component. The part that exists is resolved as
///    `realpath` would; a missing tail is appended literally (a create may target a file
///    that does not exist yet). Going beyond the reference implementation: a symlink whose target does
///    not exist (dangling) is still followed, so it is judged by where it points, and more than
///    40 symlinks is [`ErrorKind::SymlinkLoop`]; neither can let a later create escape.
/// 4. The result must be the root or lie beneath it, compared component by component (never
///    as a string prefix): `/tmp/cc-task-abc-evil` is outside `/tmp/cc-task-abc`.
///
/// Names are never decoded: `~`, `%2e%2e` or `$HOME` are literal file names.
pub fn resolve_in_sandbox(task_dir: impl AsRef<Path>, p: impl AsRef<Path>) -> GuardResult {
    let p = p.as_ref();
    if let Err(e) = check_path_text(p) {
        return GuardResult::reject(e);
    }
    let root = match std::fs::canonicalize(task_dir.as_ref()) {
        Ok(root) if root.is_dir() => root,
        Ok(_) => return GuardResult::reject(Error::new(ErrorKind::InvalidRoot)),
        Err(e) => return GuardResult::reject(Error::with_source(ErrorKind::InvalidRoot, e)),
    };
    let abs = lexical_absolute(&root, p);
    match resolve(&abs, Some(&root)) {
        Ok(w) if within(&w.path, &root) => GuardResult::accept(w.path),
        Ok(_) => GuardResult::reject(Error::new(ErrorKind::OutsideSandbox)),
        Err(e) => GuardResult::reject(e),
    }
}
