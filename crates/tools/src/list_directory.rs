//! `list_directory`: the entries of one directory beneath the workspace, read from its
//! descriptor, symlinks shown as symlinks.
//!
//! However many entries the directory holds, only the 1,001 smallest names are kept while it
//! is read (the walk's bounded window), and cancellation is checked between entries.

use std::path::Path;

use confine_beneath::{EntryKind, FileId};
use confine_pathgrammar::RelPath;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::temp_names::is_temporary;
use crate::tool::{ToolHints, TypedTool};
use crate::traverse::{check_dir_path, join, open_start, plain_name, read_window};
use crate::workspace::Workspace;

/// The most entries one call returns.
pub const MAX_LIST_ENTRIES: usize = 1_000;

/// The arguments of `list_directory`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Relative path of the directory inside the workspace (for example `src`); absent means
    /// the workspace root.
    #[serde(default)]
    pub path: Option<String>,
}

/// One entry of the listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListEntry {
    /// The entry's name.
    pub name: String,
    /// `file`, `directory`, `symlink` or `other`.
    pub kind: &'static str,
    /// A file's size in bytes (files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

/// The record `list_directory` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListOutput {
    /// The normalized relative path of the directory (`.` for the root).
    pub path: String,
    /// The entries, sorted by name.
    pub entries: Vec<ListEntry>,
    /// Entries whose names no tool could be given back (not UTF-8, control characters, …).
    pub skipped: usize,
    /// Entries left out because they are denied (`--deny`); absent when none were.
    #[serde(skip_serializing_if = "crate::traverse::is_zero")]
    pub denied: usize,
    /// More than [`MAX_LIST_ENTRIES`] entries: the rest were left out.
    pub truncated: bool,
}

/// The `list_directory` tool over one workspace.
#[derive(Debug, Clone)]
pub struct ListDirectoryTool {
    ws: Workspace,
}

impl ListDirectoryTool {
    /// A list tool over an already captured root.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }

    /// List `path` (the root when `None`); blocking.
    pub fn list(
        &self,
        path: Option<&RelPath>,
        cancel: &CancellationToken,
    ) -> Result<ListOutput, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        self.ws.root.verify()?;
        if let Some(path) = path {
            self.ws.denied.check_path(&self.ws.root, path)?;
        }
        let mut dir = open_start(&self.ws.root, path, ErrorKind::ReadFailed)?;
        let real_start = self.ws.denied.walk_start(&self.ws.root, &dir)?;
        let mut denied = 0;
        // Only the smallest names are kept while the directory is read, however many it holds.
        // A name whose path would pass 4,096 bytes is left out (and counted) as a walk leaves
        // it out: no tool could take it back.
        let prefix = path.map_or(0, |p| p.as_str().len() + 1);
        let mut skipped = 0;
        let window = read_window(
            &mut dir,
            None,
            MAX_LIST_ENTRIES + 1,
            usize::MAX,
            cancel,
            |entry| match plain_name(entry.name()) {
                Some(name) if prefix + name.len() > confine_pathgrammar::MAX_PATH_BYTES => {
                    skipped += 1;
                    false
                }
                Some(name) if is_temporary(name) => false,
                Some(name) => match &real_start {
                    Some(real) if self.ws.denied.is_denied(Path::new(&join(real, name))) => {
                        denied += 1;
                        false
                    }
                    _ => true,
                },
                None => {
                    skipped += 1;
                    false
                }
            },
        )?;
        let mut named = window.entries;
        let truncated = window.more || named.len() > MAX_LIST_ENTRIES;
        named.truncate(MAX_LIST_ENTRIES);
        let mut entries = Vec::with_capacity(named.len());
        for entry in named {
            if cancel.is_cancelled() {
                return Err(Cancelled.into());
            }
            let name = entry
                .name_str()
                .expect("only UTF-8 names are kept")
                .to_owned();
            let (kind, bytes) = match entry.kind() {
                EntryKind::File => match dir.stat_at(entry.name()) {
                    // Described as it is now (it may have changed since the listing).
                    Ok(st) => {
                        let kind = EntryKind::of(rustix::fs::FileType::from_raw_mode(st.st_mode));
                        let bytes = (kind == EntryKind::File).then_some(st.st_size as u64);
                        (kind, bytes)
                    }
                    Err(_) => continue, // gone meanwhile
                },
                kind => (kind, None),
            };
            entries.push(ListEntry {
                name,
                kind: kind.as_str(),
                bytes,
            });
        }
        // What was read must come from a directory that still lies beneath the root.
        if !dir
            .is_beneath(self.root_id())
            .map_err(|_| failed(ErrorKind::ReadFailed))?
        {
            return Err(failed(ErrorKind::PathOutsideWorkspace));
        }
        Ok(ListOutput {
            path: shown_path(path),
            entries,
            skipped,
            denied,
            truncated,
        })
    }

    fn root_id(&self) -> FileId {
        self.ws.root.identity()
    }
}

impl TypedTool for ListDirectoryTool {
    type Input = ListInput;
    type Valid = Option<RelPath>;
    type Output = ListOutput;
    const NAME: &'static str = "list_directory";
    const DESCRIPTION: &'static str = "List one directory inside the workspace. `path` is \
        relative to the workspace root (absent: the root). Returns {path, entries: [{name, \
        kind, bytes?}], skipped, truncated}: kind is file, directory, symlink or other (a \
        symlink is shown as a symlink, never followed), bytes for files; sorted by name; at \
        most 1,000 entries (truncated says more exist); names no tool could take back are \
        counted in skipped.";
    const HINTS: ToolHints = ToolHints::read_only("List directory");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidListInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, input: ListInput) -> Result<Option<RelPath>, ToolError> {
        check_dir_path(input.path.as_deref())
    }

    async fn run(
        &self,
        valid: Option<RelPath>,
        cancel: &CancellationToken,
    ) -> Result<ListOutput, CallError> {
        let tool = self.clone();
        let cancel = cancel.clone();
        off_reactor(move || tool.list(valid.as_ref(), &cancel)).await
    }
}

/// A directory argument as a result shows it: normalized, `.` for the root.
pub(crate) fn shown_path(path: Option<&RelPath>) -> String {
    path.map_or_else(|| ".".to_owned(), |p| p.as_str().to_owned())
}
