//! `grep`: a regular expression searched line by line in one file or in the files the
//! descriptor walk finds, each file searched through the descriptor the walk opened.
//!
//! The search is `grep-searcher` driven by a `grep-regex` matcher (the engine ripgrep uses):
//! it finds candidate lines with the regex's literal optimizations over the whole buffer
//! rather than trying every line. Files of one directory are searched on a small pool of
//! threads (one per core); the results are put back in name order.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use beneath::{Symlinks, WalkDir};
use globset::GlobMatcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use pathgrammar::RelPath;
use rayon::prelude::*;
use rootid::WorkspaceRoot;
use rustix::fs::{FileType, OFlags};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::error::{CallError, Cancelled, ErrorKind, ToolError};
use crate::find_files::{MAX_PATTERN_BYTES, compile_glob};
use crate::list_directory::check_dir_path;
use crate::tool::{ToolHints, TypedTool};
use crate::walk::{FileAt, Ignores, WalkSpec, failed, start_error, walk};

/// The most matches one call returns, and the default.
pub const MAX_MATCHES: usize = 1_000;
/// The default `maxMatches`.
pub const DEFAULT_MAX_MATCHES: usize = 200;
/// The most context lines before and after a match.
pub const MAX_CONTEXT_LINES: usize = 10;
/// A line longer than this many characters is cut.
pub const MAX_LINE_CHARS: usize = 500;
/// A file with a NUL byte in its first this many bytes is binary and skipped.
pub const BINARY_PROBE_BYTES: usize = 8 * 1024;

/// The arguments of `grep`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GrepInput {
    /// A regular expression (Rust `regex` syntax), searched line by line.
    pub pattern: String,
    /// A file, or a directory whose files are searched, relative to the workspace root
    /// (absent: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files matching this glob: without `/` it matches the file name at any depth
    /// (`*.rs`), with `/` the path relative to `path` (`src/**/*.rs`).
    #[serde(default)]
    pub glob: Option<String>,
    /// Match without regard to case (default false).
    #[serde(default)]
    pub ignore_case: Option<bool>,
    /// Lines of context before and after each match, 0 to 10 (default 0).
    #[serde(default)]
    pub context_lines: Option<u64>,
    /// The most matches returned, 1 to 1,000 (default 200).
    #[serde(default)]
    pub max_matches: Option<u64>,
}

/// One matching line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GrepMatch {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The line number, from 1.
    pub line: u64,
    /// The line, without its line end, cut at 500 characters.
    pub text: String,
    /// Up to `contextLines` lines before (when asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Vec<String>>,
    /// Up to `contextLines` lines after (when asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
}

/// The record `grep` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrepOutput {
    /// The matches, by path then line.
    pub matches: Vec<GrepMatch>,
    /// How many files were searched (binary files and files the glob excludes are not).
    pub files_searched: usize,
    /// More than `maxMatches` matched: the rest were left out.
    pub truncated: bool,
}

/// Validated `grep` arguments.
#[derive(Clone, Debug)]
pub struct GrepRequest {
    matcher: RegexMatcher,
    path: Option<RelPath>,
    glob: Option<(GlobMatcher, bool)>,
    context: usize,
    max: usize,
}

/// The `grep` tool over one workspace.
#[derive(Debug, Clone)]
pub struct GrepTool {
    root: Arc<WorkspaceRoot>,
}

impl GrepTool {
    /// A grep tool over an already captured root.
    pub fn new(root: Arc<WorkspaceRoot>) -> Self {
        Self { root }
    }

    /// Run a validated request; blocking.
    pub fn grep(
        &self,
        req: &GrepRequest,
        cancel: &CancellationToken,
    ) -> Result<GrepOutput, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        self.root.verify()?;
        let rel = Path::new(req.path.as_ref().map_or("", RelPath::as_str));
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd = beneath::open_beneath(self.root.dir(), rel, flags, Symlinks::FollowInside)
            .map_err(|e| start_error(&self.root, rel, &e, ErrorKind::ReadFailed))?;
        let st = rustix::fs::fstat(&fd).map_err(|_| failed(ErrorKind::ReadFailed))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {}
            FileType::RegularFile => {
                let path = req.path.as_ref().map_or("", RelPath::as_str);
                let mut searcher = searcher(req.context);
                let mut matches = Vec::new();
                let searched = search_file(
                    &mut searcher,
                    req,
                    std::fs::File::from(fd),
                    path,
                    req.max + 1,
                    &mut matches,
                )?;
                let truncated = matches.len() > req.max;
                matches.truncate(req.max);
                return Ok(GrepOutput {
                    matches,
                    files_searched: usize::from(searched),
                    truncated,
                });
            }
            _ => return Err(failed(ErrorKind::FileNotRegular)),
        }
        let start = WalkDir::from_fd(fd).map_err(|_| failed(ErrorKind::ReadFailed))?;
        let spec = WalkSpec {
            root_id: self.root.identity(),
            prefix: req
                .path
                .as_ref()
                .map_or_else(String::new, |p| p.as_str().to_owned()),
            include_ignored: false,
            cancel,
            limit: req.max,
        };
        let ignores = Ignores::above(&self.root, req.path.as_ref());
        let searched = std::sync::atomic::AtomicUsize::new(0);
        let walked = walk(start, ignores, &spec, |dir, files| {
            search_batch(dir, files, req, cancel, &searched)
        })?;
        let mut matches = walked.items;
        let truncated = walked.truncated || matches.len() > req.max;
        matches.truncate(req.max);
        Ok(GrepOutput {
            matches,
            files_searched: searched.into_inner(),
            truncated,
        })
    }
}

fn searcher(context: usize) -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .before_context(context)
        .after_context(context)
        .binary_detection(BinaryDetection::none())
        .build()
}

/// The files of one directory the glob keeps, searched on the pool; each file's matches in
/// the order of `files`.
fn search_batch(
    dir: &WalkDir,
    files: &[FileAt<'_>],
    req: &GrepRequest,
    cancel: &CancellationToken,
    searched: &std::sync::atomic::AtomicUsize,
) -> Result<Vec<Vec<GrepMatch>>, CallError> {
    let one = |f: &FileAt<'_>, searcher: &mut Searcher| -> Result<Vec<GrepMatch>, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        if let Some((glob, by_name)) = &req.glob {
            let subject = if *by_name {
                f.rel.rsplit('/').next().unwrap_or(f.rel)
            } else {
                f.rel
            };
            if !glob.is_match(subject) {
                return Ok(Vec::new());
            }
        }
        let Some((file, _)) = dir
            .open_file(f.entry)
            .map_err(|_| failed(ErrorKind::ReadFailed))?
        else {
            return Ok(Vec::new()); // a symlink, FIFO, … or changed since the listing
        };
        let mut out = Vec::new();
        if search_file(searcher, req, file, &f.path, req.max + 1, &mut out)? {
            searched.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(out)
    };
    files
        .par_iter()
        .map_init(|| searcher(req.context), |s, f| one(f, s))
        .collect()
}

/// Search one opened file; false when it was skipped as binary.
fn search_file(
    searcher: &mut Searcher,
    req: &GrepRequest,
    mut file: std::fs::File,
    path: &str,
    budget: usize,
    out: &mut Vec<GrepMatch>,
) -> Result<bool, CallError> {
    let mut probe = [0u8; BINARY_PROBE_BYTES];
    let mut filled = 0;
    while filled < probe.len() {
        match file.read(&mut probe[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(failed(ErrorKind::ReadFailed)),
        }
    }
    let head = &probe[..filled];
    if head.contains(&0) {
        return Ok(false);
    }
    let mut sink = Collect {
        path,
        context: req.context,
        budget,
        out,
        first: 0,
        recent: VecDeque::new(),
    };
    sink.first = sink.out.len();
    let reader = io::Cursor::new(head).chain(file);
    searcher
        .search_reader(&req.matcher, reader, &mut sink)
        .map_err(|_| failed(ErrorKind::ReadFailed))?;
    Ok(true)
}

/// A line as a result shows it: no line end, lossy UTF-8, at most 500 characters.
fn shown(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text.into_owned(),
    }
}

/// Collects one file's matches, each with its own context lines (the searcher reports a line
/// shared by two matches' contexts once; it is given to both here).
struct Collect<'a> {
    path: &'a str,
    context: usize,
    budget: usize,
    out: &'a mut Vec<GrepMatch>,
    /// This file's first match in `out`.
    first: usize,
    /// The last `context` lines seen, with their numbers.
    recent: VecDeque<(u64, String)>,
}

impl Collect<'_> {
    fn saw(&mut self, line: u64, text: &str) {
        if self.context == 0 {
            return;
        }
        for m in self.out[self.first..].iter_mut().rev() {
            if m.line + (self.context as u64) < line {
                break;
            }
            if let Some(after) = &mut m.after
                && m.line < line
                && after.len() < self.context
            {
                after.push(text.to_owned());
            }
        }
        if self.recent.len() == self.context {
            self.recent.pop_front();
        }
        self.recent.push_back((line, text.to_owned()));
    }
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.out.len() - self.first >= self.budget {
            return Ok(false);
        }
        let line = m.line_number().unwrap_or(0);
        let text = shown(m.bytes());
        let before = (self.context > 0).then(|| {
            let from = line.saturating_sub(self.context as u64);
            self.recent
                .iter()
                .filter(|(n, _)| *n >= from && *n < line)
                .map(|(_, t)| t.clone())
                .collect()
        });
        self.saw(line, &text);
        self.out.push(GrepMatch {
            path: self.path.to_owned(),
            line,
            text,
            before,
            after: (self.context > 0).then(Vec::new),
        });
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        let line = c.line_number().unwrap_or(0);
        let text = shown(c.bytes());
        self.saw(line, &text);
        Ok(true)
    }
}

impl TypedTool for GrepTool {
    type Input = GrepInput;
    type Valid = GrepRequest;
    type Output = GrepOutput;
    const NAME: &'static str = "grep";
    const DESCRIPTION: &'static str = "Search file contents in the workspace with a regular \
        expression (Rust regex syntax), line by line. `path` is a file or a directory relative \
        to the workspace root (absent: the root); a directory is searched recursively, \
        leaving out .gitignore'd files, .git and binary files (a NUL byte in the first 8 KiB), \
        never following symlinks. `glob` keeps only matching files (`*.rs` matches the name at \
        any depth; a glob with `/` matches the path relative to `path`). ignoreCase, \
        contextLines (0-10, default 0), maxMatches (1-1000, default 200). Returns {matches: \
        [{path, line, text, before?, after?}], filesSearched, truncated}; lines are cut at 500 \
        characters.";
    const HINTS: ToolHints = ToolHints::read_only("Search file contents");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidGrepInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, input: GrepInput) -> Result<GrepRequest, ToolError> {
        let invalid = || ToolError::invalid(ErrorKind::InvalidGrepInput);
        let context = match input.context_lines {
            None => 0,
            Some(n) if n <= MAX_CONTEXT_LINES as u64 => n as usize,
            Some(_) => return Err(invalid()),
        };
        let max = match input.max_matches {
            None => DEFAULT_MAX_MATCHES,
            Some(n) if (1..=MAX_MATCHES as u64).contains(&n) => n as usize,
            Some(_) => return Err(invalid()),
        };
        let path = check_dir_path(input.path.as_deref())?;
        let glob = input
            .glob
            .as_deref()
            .map(|g| compile_glob(g).map(|m| (m, !g.contains('/'))))
            .transpose()?;
        if input.pattern.len() > MAX_PATTERN_BYTES {
            return Err(ToolError::invalid(ErrorKind::InvalidRegex));
        }
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(input.ignore_case.unwrap_or(false))
            .line_terminator(Some(b'\n'))
            .build(&input.pattern)
            .map_err(|_| ToolError::invalid(ErrorKind::InvalidRegex))?;
        Ok(GrepRequest {
            matcher,
            path,
            glob,
            context,
            max,
        })
    }

    async fn run(
        &self,
        valid: GrepRequest,
        cancel: &CancellationToken,
    ) -> Result<GrepOutput, CallError> {
        let tool = self.clone();
        let cancel = cancel.clone();
        off_reactor(move || tool.grep(&valid, &cancel)).await
    }
}
