//! `find_files`: paths beneath a directory matching a glob, found by the descriptor walk.

use confine_pathgrammar::RelPath;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::error::{CallError, Cancelled, ErrorKind, ToolError};
use crate::glob::{PathGlob, compile_glob};
use crate::tool::{ToolHints, TypedTool};
use crate::traverse::{FileAt, Ignores, Visitor, WalkSpec, check_dir_path, open_start, walk};
use crate::workspace::Workspace;

/// The most paths one call returns.
pub const MAX_FIND_RESULTS: usize = 1_000;

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

/// The `find_files` tool over one workspace.
#[derive(Debug, Clone)]
pub struct FindFilesTool {
    ws: Workspace,
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
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws, parallel: true }
    }

    /// The same tool walking on the calling thread alone: the reference the parallel walk's
    /// answers are compared with.
    #[cfg(test)]
    pub(crate) fn sequential(mut self) -> Self {
        self.parallel = false;
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
        self.ws.root.verify()?;
        if let Some(path) = &req.path {
            self.ws.denied.check_path(&self.ws.root, path)?;
        }
        let start = open_start(&self.ws.root, req.path.as_ref(), ErrorKind::ReadFailed)?;
        let real_start = self.ws.denied.walk_start(&self.ws.root, &start)?;
        let ignores = if req.include_ignored {
            Ignores::default()
        } else {
            Ignores::above(&self.ws.root, req.path.as_ref())
        };
        let spec = WalkSpec {
            root_id: self.ws.root.identity(),
            prefix: req
                .path
                .as_ref()
                .map_or_else(String::new, |p| p.as_str().to_owned()),
            include_ignored: req.include_ignored,
            cancel,
            limit: MAX_FIND_RESULTS,
            parallel: self.parallel,
            denied: real_start.map(|r| (&*self.ws.denied, r)),
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
