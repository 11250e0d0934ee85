//! `find_files`: paths beneath a directory matching a glob, found by the descriptor walk.

use std::sync::Arc;

use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::deny::DeniedPaths;
use crate::error::{CallError, Cancelled, ErrorKind, ToolError};
use crate::list_directory::check_dir_path;
use crate::tool::{ToolHints, TypedTool};
use crate::traverse::{FileAt, Ignores, Visitor, WalkSpec, open_start, walk};

/// The most paths one call returns.
pub const MAX_FIND_RESULTS: usize = 1_000;

/// The longest glob accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4_096;

/// The arguments of `find_files`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FindInput {
    /// A glob matched against paths relative to `path`: `*` and `?` never match `/`, `**/`
    /// matches any number of directories (none included), `[...]` a class, `{a,b}` either
    /// (for example `**/*.rs` or `src/*.{js,ts}`).
    pub pattern: String,
    /// The directory to search, relative to the workspace root (absent: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Also return entries that `.gitignore` files exclude (default false).
    #[serde(default)]
    pub include_ignored: Option<bool>,
}

/// The record `find_files` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FindOutput {
    /// Matching paths relative to the workspace root, sorted.
    pub paths: Vec<String>,
    /// Entries the walk left out because no tool could be given their path back (a name the
    /// path grammar refuses, a path over 4,096 bytes); a directory counts once, its contents
    /// unseen.
    pub skipped: usize,
    /// Entries left out because they are denied (`--deny`; a directory counts once, its
    /// contents unseen); absent when none were.
    #[serde(skip_serializing_if = "crate::traverse::is_zero")]
    pub denied: usize,
    /// More than [`MAX_FIND_RESULTS`] matched: the rest were left out.
    pub truncated: bool,
}

/// Validated `find_files` arguments.
#[derive(Clone, Debug)]
pub struct FindRequest {
    glob: PathGlob,
    path: Option<RelPath>,
    include_ignored: bool,
}

/// One compiled glob, matched against `/`-separated relative paths.
///
/// A set of one glob rather than globset's `GlobMatcher`: the set picks a matching strategy
/// from the glob's shape (`**/*.rs` is a lookup of the extension, `**/name` of the file name,
/// a literal a comparison), where the matcher always runs its regex; the answer is the same.
#[derive(Clone, Debug)]
pub(crate) struct PathGlob(GlobSet);

impl PathGlob {
    /// Whether `path` matches.
    pub(crate) fn is_match(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

/// Compile a glob with the shell's and `.gitignore`'s meaning (`*` stops at `/`).
pub(crate) fn compile_glob(pattern: &str) -> Result<PathGlob, ToolError> {
    if pattern.is_empty() || pattern.len() > MAX_PATTERN_BYTES || pattern.contains('\0') {
        return Err(ToolError::invalid(ErrorKind::InvalidGlob));
    }
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|_| ToolError::invalid(ErrorKind::InvalidGlob))?;
    GlobSetBuilder::new()
        .add(glob)
        .build()
        .map(PathGlob)
        .map_err(|_| ToolError::invalid(ErrorKind::InvalidGlob))
}

/// The `find_files` tool over one workspace.
#[derive(Debug, Clone)]
pub struct FindFilesTool {
    root: Arc<WorkspaceRoot>,
    denied: Arc<DeniedPaths>,
    /// Subtrees walked ahead on the thread pool (false only for the tests' reference).
    parallel: bool,
}

/// The files whose path relative to the start matches the glob: their paths.
struct Matches<'a>(&'a PathGlob);

impl Visitor for Matches<'_> {
    type Item = String;
    type Tally = ();

    fn tally(&self, _ahead: bool) {}

    fn files(
        &self,
        _: &(),
        _: &confine_beneath::WalkDir,
        files: &[FileAt<'_>],
        _: &CancellationToken,
    ) -> Result<Vec<Vec<String>>, CallError> {
        let mut rel = String::new();
        Ok(files
            .iter()
            .map(|f| {
                if self.0.is_match(f.rel(&mut rel)) {
                    vec![f.path()]
                } else {
                    Vec::new()
                }
            })
            .collect())
    }

    fn cost(&self, path: &String) -> usize {
        path.len() + std::mem::size_of::<String>()
    }
}

impl FindFilesTool {
    /// A find tool over an already captured root.
    pub(crate) fn new(root: Arc<WorkspaceRoot>) -> Self {
        Self {
            root,
            denied: Arc::default(),
            parallel: true,
        }
    }

    /// The same tool walking on the calling thread alone: the reference the parallel walk's
    /// answers are compared with.
    #[cfg(test)]
    pub(crate) fn sequential(mut self) -> Self {
        self.parallel = false;
        self
    }

    /// Refuse the paths of `denied` (`PATH_DENIED`; default: none).
    pub(crate) fn deny(mut self, denied: Arc<DeniedPaths>) -> Self {
        self.denied = denied;
        self
    }

    /// Run a validated request; blocking.
    pub fn find(
        &self,
        req: &FindRequest,
        cancel: &CancellationToken,
    ) -> Result<FindOutput, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        self.root.verify()?;
        if let Some(path) = &req.path {
            self.denied.check_path(&self.root, path)?;
        }
        let start = open_start(&self.root, req.path.as_ref(), ErrorKind::ReadFailed)?;
        let real_start = self.denied.walk_start(&self.root, &start)?;
        let ignores = if req.include_ignored {
            Ignores::default()
        } else {
            Ignores::above(&self.root, req.path.as_ref())
        };
        let spec = WalkSpec {
            root_id: self.root.identity(),
            prefix: req
                .path
                .as_ref()
                .map_or_else(String::new, |p| p.as_str().to_owned()),
            include_ignored: req.include_ignored,
            cancel,
            limit: MAX_FIND_RESULTS,
            parallel: self.parallel,
            denied: real_start.map(|r| (&*self.denied, r)),
        };
        let walked = walk(start, ignores, &spec, &Matches(&req.glob), &())?;
        let mut paths = walked.items;
        let truncated = walked.truncated || paths.len() > MAX_FIND_RESULTS;
        paths.truncate(MAX_FIND_RESULTS);
        Ok(FindOutput {
            paths,
            skipped: walked.skipped,
            denied: walked.denied,
            truncated,
        })
    }
}

impl TypedTool for FindFilesTool {
    type Input = FindInput;
    type Valid = FindRequest;
    type Output = FindOutput;
    const NAME: &'static str = "find_files";
    const DESCRIPTION: &'static str = "Find files in the workspace by glob. `pattern` is \
        matched against paths relative to `path` (absent: the workspace root): `*` and `?` \
        never match `/`, `**/` matches any number of directories, `[...]` and `{a,b}` as in \
        the shell (for example `**/*.rs`). Entries excluded by .gitignore files are left out \
        unless includeIgnored is true; .git is never entered; symlinks are never followed. \
        Returns {paths, skipped, truncated}: paths relative to the workspace root, sorted, at \
        most 1,000; skipped counts entries whose paths no tool could take back.";
    const HINTS: ToolHints = ToolHints::read_only("Find files");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidFindInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, input: FindInput) -> Result<FindRequest, ToolError> {
        let path = check_dir_path(input.path.as_deref())?;
        let glob = compile_glob(&input.pattern)?;
        Ok(FindRequest {
            glob,
            path,
            include_ignored: input.include_ignored.unwrap_or(false),
        })
    }

    async fn run(
        &self,
        valid: FindRequest,
        cancel: &CancellationToken,
    ) -> Result<FindOutput, CallError> {
        let tool = self.clone();
        let cancel = cancel.clone();
        off_reactor(move || tool.find(&valid, &cancel)).await
    }
}
