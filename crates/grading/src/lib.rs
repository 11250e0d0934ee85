//! The case runner behind `confine guard`, `confine jail` and the conformance corpus
//! (`tests/conformance/README.md`): temporary case trees and the guard's and jail's verdicts.
//!
//! Published as `confine-grading` (the `confine` binary depends on it), and shared by the
//! binary and `cargo xtask conformance`, so that the confinement crates carry no test
//! fixtures and no serde or tempfile dependency of their own.
//!
//! Each run makes a fresh temporary parent holding the sandbox root `cc-task-abc` and its
//! prefix-sharing sibling `cc-task-abc-evil` (which holds `secret.txt`), builds the case's
//! tree inside the root, maps every path, and removes the parent. In every path of the case
//! (tree entries, symlink targets, paths, cwd, bounds) `$ROOT` stands for the root's canonical
//! path and `$OUTSIDE` for the sibling's.
//!
//! ```
//! let case: confine_grading::GuardCase = serde_json::from_str(
//!     r#"{"files": {"ok.txt": "x"}, "symlinks": {"out": "$OUTSIDE"},
//!         "paths": ["ok.txt", "../escape", "out/secret.txt"]}"#,
//! )?;
//! let oks: Vec<bool> = confine_grading::run_guard_case(&case)?.iter().map(|o| o.ok).collect();
//! assert_eq!(oks, [true, false, false]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use confine_jail::{FileJail, JailPolicy, resolve_in_sandbox};

/// The name of the sandbox root inside the temporary parent.
pub const ROOT_NAME: &str = "cc-task-abc";
/// The name of the prefix-sharing sibling of the root.
pub const OUTSIDE_NAME: &str = "cc-task-abc-evil";
/// The file the sibling holds.
pub const SECRET_NAME: &str = "secret.txt";
/// The content of that file.
pub const SECRET_CONTENT: &str = "secret outside the sandbox\n";

/// Why a case could not be run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GradingError {
    /// The temporary parent could not be made or removed.
    #[error("temporary sandbox: {0}")]
    Sandbox(#[source] io::Error),
    /// An entry of the case's tree could not be created.
    #[error("cannot create {what} {name:?}: {source}")]
    Build {
        /// `file`, `dir` or `symlink`.
        what: &'static str,
        /// The entry as written in the case.
        name: String,
        /// The failure.
        #[source]
        source: io::Error,
    },
}

/// The tree a case builds inside the root.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct CaseTree {
    /// Files and their contents (parent directories are created).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Directories (created with their parents).
    #[serde(default)]
    pub dirs: Vec<String>,
    /// Symlinks and their targets (targets taken verbatim after substitution).
    #[serde(default)]
    pub symlinks: BTreeMap<String, String>,
    /// Named pipes (parent directories are created).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fifos: Vec<String>,
    /// Permission bits set last, after everything else exists.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub modes: BTreeMap<String, u32>,
}

impl CaseTree {
    /// Build the tree beneath `base`: directories, files, named pipes, symlinks, then modes.
    /// `substitute` maps every entry name and symlink target (the `$ROOT`/`$OUTSIDE` places).
    pub fn build_at(
        &self,
        base: &Path,
        substitute: impl Fn(&str) -> String,
    ) -> Result<(), GradingError> {
        let fail = |what, name: &String| {
            let name = name.clone();
            move |source| GradingError::Build { what, name, source }
        };
        let place = |entry: &str| base.join(substitute(entry));
        let with_parent = |at: &Path, make: &dyn Fn() -> io::Result<()>| -> io::Result<()> {
            if let Some(p) = at.parent() {
                std::fs::create_dir_all(p)?;
            }
            make()
        };
        for d in &self.dirs {
            std::fs::create_dir_all(place(d)).map_err(fail("dir", d))?;
        }
        for (f, content) in &self.files {
            let at = place(f);
            with_parent(&at, &|| std::fs::write(&at, content)).map_err(fail("file", f))?;
        }
        for p in &self.fifos {
            let at = place(p);
            let make = || {
                rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &at,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                )
                .map_err(io::Error::from)
            };
            with_parent(&at, &make).map_err(fail("fifo", p))?;
        }
        for (l, target) in &self.symlinks {
            let at = place(l);
            let target = substitute(target);
            with_parent(&at, &|| std::os::unix::fs::symlink(&target, &at))
                .map_err(fail("symlink", l))?;
        }
        for (m, mode) in &self.modes {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(place(m), std::fs::Permissions::from_mode(*mode))
                .map_err(fail("mode", m))?;
        }
        Ok(())
    }
}

/// A `confine guard` case; `expect` is only read by the conformance runner.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct GuardCase {
    /// The tree to build.
    #[serde(flatten)]
    pub tree: CaseTree,
    /// The paths to map through [`resolve_in_sandbox`].
    pub paths: Vec<String>,
    /// The expected `ok` of each path (conformance files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Vec<bool>>,
}

/// One path's outcome; serializes as `{"path", "ok"}`.
#[derive(Clone, Debug, Serialize)]
pub struct GuardOutcome {
    /// The path as written in the case.
    pub path: String,
    /// Whether the guard accepted it.
    pub ok: bool,
    /// The error token when refused.
    #[serde(skip)]
    pub code: Option<&'static str>,
}

/// The bounds of a jail case, as written (`allowRead`, `allowWrite`, `deny`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySpec {
    /// Read bounds.
    #[serde(default)]
    pub allow_read: Vec<String>,
    /// Write bounds.
    #[serde(default)]
    pub allow_write: Vec<String>,
    /// Deny bounds.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// The operation of a jail check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// [`FileJail::resolve_for_read`].
    Read,
    /// [`FileJail::resolve_for_write`].
    Write,
}

/// One check of a jail case; `ok` is only read by the conformance runner.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct JailCheck {
    /// Which decision.
    pub op: Op,
    /// The requested path.
    pub path: String,
    /// The expected outcome (conformance files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
}

/// A `confine jail` case.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct JailCase {
    /// The tree to build.
    #[serde(flatten)]
    pub tree: CaseTree,
    /// The jail's cwd; relative to the root (default: the root).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The bounds; relative ones resolve against the cwd.
    #[serde(default)]
    pub policy: PolicySpec,
    /// The decisions to make.
    pub checks: Vec<JailCheck>,
}

/// One check's outcome; serializes as `{"op", "path", "ok"}`.
#[derive(Clone, Debug, Serialize)]
pub struct JailOutcome {
    /// The operation.
    pub op: Op,
    /// The path as written in the case.
    pub path: String,
    /// Whether the jail allowed it.
    pub ok: bool,
    /// The error token when refused.
    #[serde(skip)]
    pub code: Option<&'static str>,
}

/// The temporary parent of one case: the root, its prefix-sharing sibling holding the secret,
/// and their canonical paths. Written here rather than taken from the tests' fixture crate, so
/// that the binary links no test support.
#[derive(Debug)]
pub struct Sandbox {
    tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

impl Sandbox {
    /// Make the parent with `cc-task-abc` and `cc-task-abc-evil/secret.txt`.
    pub fn new() -> Result<Self, GradingError> {
        let build = || -> io::Result<Self> {
            let tmp = tempfile::Builder::new().prefix("confine-case-").tempdir()?;
            let base = tmp.path().canonicalize()?;
            let (root, outside) = (base.join(ROOT_NAME), base.join(OUTSIDE_NAME));
            std::fs::create_dir(&root)?;
            std::fs::create_dir(&outside)?;
            std::fs::write(outside.join(SECRET_NAME), SECRET_CONTENT)?;
            Ok(Self { tmp, root, outside })
        };
        build().map_err(GradingError::Sandbox)
    }

    /// The root's canonical path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The sibling's canonical path.
    pub fn outside(&self) -> &Path {
        &self.outside
    }

    /// Replace `$ROOT` and `$OUTSIDE` by the canonical paths.
    pub fn substitute(&self, s: &str) -> String {
        s.replace("$ROOT", &self.root.to_string_lossy())
            .replace("$OUTSIDE", &self.outside.to_string_lossy())
    }

    /// Build `tree` beneath the root (see [`CaseTree::build_at`]).
    pub fn build(&self, tree: &CaseTree) -> Result<(), GradingError> {
        tree.build_at(self.root(), |s| self.substitute(s))
    }

    /// Remove the parent and everything in it.
    pub fn close(self) -> Result<(), GradingError> {
        self.tmp.close().map_err(GradingError::Sandbox)
    }
}

/// Run a guard case: build it, map each path through [`resolve_in_sandbox`], clean up.
pub fn run_guard_case(case: &GuardCase) -> Result<Vec<GuardOutcome>, GradingError> {
    let sandbox = Sandbox::new()?;
    sandbox.build(&case.tree)?;
    let outcomes = case
        .paths
        .iter()
        .map(|p| {
            let r = resolve_in_sandbox(sandbox.root(), sandbox.substitute(p));
            GuardOutcome {
                path: p.clone(),
                ok: r.ok,
                code: r.error.map(|e| e.code()),
            }
        })
        .collect();
    sandbox.close()?;
    Ok(outcomes)
}

/// Run a jail case: build it, make the [`FileJail`], decide each check with
/// `resolve_for_read` / `resolve_for_write`, clean up. A policy the jail refuses to build
/// (an unresolvable bound) allows nothing: every check is `ok: false` with its token.
pub fn run_jail_case(case: &JailCase) -> Result<Vec<JailOutcome>, GradingError> {
    let sandbox = Sandbox::new()?;
    sandbox.build(&case.tree)?;
    // FileJail::new normalizes the cwd lexically (`..` collapsed) itself.
    let cwd = sandbox
        .root()
        .join(sandbox.substitute(case.cwd.as_deref().unwrap_or("")));
    let list = |v: &[String]| -> Vec<PathBuf> {
        v.iter()
            .map(|s| PathBuf::from(sandbox.substitute(s)))
            .collect()
    };
    let policy = JailPolicy {
        allow_read: list(&case.policy.allow_read),
        allow_write: list(&case.policy.allow_write),
        deny: list(&case.policy.deny),
    };
    let jail = FileJail::new(&cwd, policy);
    let outcomes = case
        .checks
        .iter()
        .map(|c| {
            let path = sandbox.substitute(&c.path);
            let r = jail.as_ref().map_err(|e| e.code()).and_then(|j| {
                match c.op {
                    Op::Read => j.resolve_for_read(&path),
                    Op::Write => j.resolve_for_write(&path),
                }
                .map_err(|e| e.code())
            });
            JailOutcome {
                op: c.op,
                path: c.path.clone(),
                ok: r.is_ok(),
                code: r.err(),
            }
        })
        .collect();
    drop(jail);
    sandbox.close()?;
    Ok(outcomes)
}
