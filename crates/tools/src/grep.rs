//! `grep`: a regular expression searched line by line in one file or in the files the
//! descriptor walk finds, each file searched through the descriptor the walk opened.
//!
//! The search is `grep-searcher` driven by a `grep-regex` matcher (the engine ripgrep uses):
//! it finds candidate lines with the regex's literal optimizations over the whole buffer
//! rather than trying every line. Files of one directory are searched on a small pool of
//! threads (one per core, fewer when wide context windows would pass the memory budget); the
//! results are put back in name order.
//!
//! # Bounded whatever the files hold
//!
//! A call holds at most 64 MiB of its own, and a scan ends:
//! - each file is read as `crate::scan` reads it: up to the size it had when its search
//!   began, holes skipped (one NUL byte each: line numbers are those of the file as written),
//!   cancellation checked before every read;
//! - a line longer than [`MAX_SEARCHED_LINE`] (1 MiB) is searched in its first 1 MiB only, the
//!   rest read and dropped up to its line end, and counted in `longLinesCut`;
//! - the searcher's line window is capped ([`window_limit`]: the context lines before a
//!   match and the line itself, each at most 1 MiB), and as many files are searched at once as
//!   such windows fit in [`WINDOWS_BUDGET`];
//! - a regular expression whose compiled form would pass [`MAX_REGEX_BYTES`] (16 MiB) is
//!   `INVALID_REGEX`, and its lazy DFA's cache is [`REGEX_CACHE_BYTES`] per searching thread;
//! - the matches hold at most [`MAX_RESULT_BYTES`] (4 MiB of paths, lines, context lines): a
//!   match that does not fit ends the result (`truncated`). The files searched at once share
//!   it; from the first file (in name order) whose matches ended early, the files are searched
//!   again one at a time, so the result is the longest prefix of the whole answer that fits.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use confine_beneath::{Symlinks, WalkDir};
use confine_pathgrammar::RelPath;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use rayon::prelude::*;
use rustix::fs::{FileType, OFlags};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::glob::{MAX_PATTERN_BYTES, PathGlob, compile_glob};
use crate::scan::{LineCut, SEARCH_READ, ScanReader, is_cancelled};
use crate::tool::{ToolHints, TypedTool};
use crate::traverse::{
    AHEAD_ITEM_BYTES, FileAt, Ignores, Visitor, WalkSpec, check_dir_path, start_error, walk,
};
use crate::workspace::Workspace;

pub use crate::scan::MAX_SEARCHED_LINE;

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
/// The largest compiled form of a pattern (each of its automata), in bytes: past it the
/// pattern is `INVALID_REGEX`.
pub const MAX_REGEX_BYTES: usize = 16 << 20;
/// The cache of the pattern's lazy DFA, per searching thread, in bytes.
pub const REGEX_CACHE_BYTES: usize = 2 << 20;
/// What the line windows of the files searched at once may hold together, caches included.
pub const WINDOWS_BUDGET: usize = 24 << 20;
/// The most bytes the matches of one call hold (paths, lines and context lines, as strings):
/// past it the result ends with `truncated`.
pub const MAX_RESULT_BYTES: usize = 4 << 20;
/// The buffer a search reads into before its window grows.
const READ_CHUNK: usize = 64 * 1024;

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
    /// Lines longer than 1 MiB met in the files searched: each was searched in its first
    /// 1 MiB only.
    pub long_lines_cut: u64,
    /// Entries the walk left out because no tool could be given their path back (a name the
    /// path grammar refuses, a path over 4,096 bytes); a directory counts once, its contents
    /// unseen.
    pub skipped: usize,
    /// Entries left out because they are denied (`--deny`; a directory counts once, its
    /// contents unseen); absent when none were.
    #[serde(skip_serializing_if = "crate::traverse::is_zero")]
    pub denied: usize,
    /// More than `maxMatches` matched: the rest were left out.
    pub truncated: bool,
}

/// Validated `grep` arguments.
#[derive(Clone, Debug)]
pub struct GrepRequest {
    matcher: RegexMatcher,
    path: Option<RelPath>,
    glob: Option<(PathGlob, bool)>,
    context: usize,
    max: usize,
}

/// The `grep` tool over one workspace.
#[derive(Debug, Clone)]
pub struct GrepTool {
    ws: Workspace,
    /// Subtrees walked ahead on the thread pool (false only for the tests' reference).
    parallel: bool,
}

impl GrepTool {
    /// A grep tool over an already captured root.
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
    pub fn grep(
        &self,
        req: &GrepRequest,
        cancel: &CancellationToken,
    ) -> Result<GrepOutput, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        self.ws.root.verify()?;
        if let Some(path) = &req.path {
            self.ws.denied.check_path(&self.ws.root, path)?;
        }
        let rel = Path::new(req.path.as_ref().map_or("", RelPath::as_str));
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let fd =
            confine_beneath::open_beneath(self.ws.root.dir(), rel, flags, Symlinks::FollowInside)
                .map_err(|e| start_error(&self.ws.root, rel, &e, ErrorKind::ReadFailed))?;
        let st = rustix::fs::fstat(&fd).map_err(|_| failed(ErrorKind::ReadFailed))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {}
            FileType::RegularFile => {
                let path = req.path.as_ref().map_or("", RelPath::as_str);
                let mut searcher = searcher(req.context);
                let mut matches = Vec::new();
                let held = Held::default();
                let one = search_file(
                    &mut searcher,
                    req,
                    std::fs::File::from(fd),
                    &st,
                    cancel,
                    &held,
                    path,
                    req.max + 1,
                    &mut matches,
                )?;
                self.ws
                    .denied
                    .check_read(&self.ws.root, rel, confine_beneath::FileId::of(&st))?;
                let truncated = one.stopped || matches.len() > req.max;
                matches.truncate(req.max);
                return Ok(GrepOutput {
                    matches,
                    files_searched: usize::from(one.searched),
                    long_lines_cut: one.long_lines_cut,
                    skipped: 0,
                    denied: 0,
                    truncated,
                });
            }
            _ => return Err(failed(ErrorKind::FileNotRegular)),
        }
        let real_start = self.ws.denied.walk_start(&self.ws.root, &fd)?;
        let start = WalkDir::from_fd(fd).map_err(|_| failed(ErrorKind::ReadFailed))?;
        let counts = Counts::default();
        let spec = WalkSpec {
            root_id: self.ws.root.identity(),
            prefix: req
                .path
                .as_ref()
                .map_or_else(String::new, |p| p.as_str().to_owned()),
            include_ignored: false,
            cancel,
            limit: req.max,
            parallel: self.parallel,
            denied: real_start.map(|r| (&*self.ws.denied, r)),
        };
        let ignores = Ignores::above(&self.ws.root, req.path.as_ref());
        let search = Search { req };
        let walked = walk(start, ignores, &spec, &search, &counts)?;
        let mut matches = walked.items;
        let truncated =
            walked.truncated || counts.held.full.load(Ordering::Relaxed) || matches.len() > req.max;
        matches.truncate(req.max);
        Ok(GrepOutput {
            matches,
            files_searched: counts.searched.into_inner(),
            long_lines_cut: counts.cut.into_inner(),
            skipped: walked.skipped,
            denied: walked.denied,
            truncated,
        })
    }
}

/// What the searches of one walker count together: the call's own, or those of a subtree
/// walked ahead (added to the call's once the walk reaches it, [`Visitor::absorb`]).
#[derive(Default)]
struct Counts {
    searched: AtomicUsize,
    cut: AtomicU64,
    held: Held,
}

/// The bytes the matches of one walker hold, shared by the files searched at once.
struct Held {
    bytes: AtomicUsize,
    /// A match did not fit in `limit`: the result ends before it.
    full: AtomicBool,
    /// The most bytes: [`MAX_RESULT_BYTES`] for the call, [`AHEAD_ITEM_BYTES`] for a
    /// subtree walked ahead.
    limit: usize,
}

impl Default for Held {
    fn default() -> Self {
        Self {
            bytes: AtomicUsize::new(0),
            full: AtomicBool::new(false),
            limit: MAX_RESULT_BYTES,
        }
    }
}

impl Held {
    /// Take `n` bytes if they fit.
    fn take(&self, n: usize) -> bool {
        let before = self.bytes.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) > self.limit {
            self.bytes.fetch_sub(n, Ordering::Relaxed);
            self.full.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// One call's search of the files the walk finds.
struct Search<'a> {
    req: &'a GrepRequest,
}

impl Visitor for Search<'_> {
    type Item = GrepMatch;
    type Tally = Counts;

    fn tally(&self, ahead: bool) -> Counts {
        let mut counts = Counts::default();
        if ahead {
            counts.held.limit = AHEAD_ITEM_BYTES;
        }
        counts
    }

    fn files(
        &self,
        counts: &Counts,
        dir: &WalkDir,
        files: &[FileAt<'_>],
        cancel: &CancellationToken,
    ) -> Result<Vec<Vec<GrepMatch>>, CallError> {
        search_batch(dir, files, self.req, cancel, counts)
    }

    fn full(&self, counts: &Counts) -> bool {
        counts.held.full.load(Ordering::Relaxed)
    }

    fn absorb(&self, into: &Counts, from: &Counts) -> bool {
        let bytes = from.held.bytes.load(Ordering::Relaxed);
        if from.held.full.load(Ordering::Relaxed) || !into.held.take(bytes) {
            // `take` refused: the call's result would have ended inside that subtree.
            into.held.full.store(false, Ordering::Relaxed);
            return false;
        }
        into.searched
            .fetch_add(from.searched.load(Ordering::Relaxed), Ordering::Relaxed);
        into.cut
            .fetch_add(from.cut.load(Ordering::Relaxed), Ordering::Relaxed);
        true
    }

    fn cost(&self, m: &GrepMatch) -> usize {
        let lines =
            |l: &Option<Vec<String>>| l.as_ref().map_or(0, |l| l.iter().map(String::len).sum());
        m.path.len() + m.text.len() + lines(&m.before) + lines(&m.after)
    }
}

/// What searching one file gave besides its matches.
struct FileSearch {
    /// It was searched (not skipped as binary).
    searched: bool,
    long_lines_cut: u64,
    /// The bytes its matches hold (taken from [`Held`]).
    bytes: usize,
    /// Its matches end early: one did not fit in [`MAX_RESULT_BYTES`] (or the call's result
    /// was full before it began).
    stopped: bool,
}

/// The most a search's line window may grow to beyond its read buffer, with `context` lines
/// before a match: those lines and the line itself, each at most 1 MiB and its line end, plus
/// a read's worth of the next. Lines are cut before the searcher sees them, so a window never
/// needs more; the searcher enforces it (a search that would need more fails, never grows).
pub fn window_limit(context: usize) -> usize {
    (context + 2) * (MAX_SEARCHED_LINE + 1) + READ_CHUNK
}

/// How many files one call searches at once: as many as their windows (and the regex caches)
/// fit in [`WINDOWS_BUDGET`], at least one, at most the threads of the pool.
fn search_width(context: usize) -> usize {
    let one = READ_CHUNK + window_limit(context) + REGEX_CACHE_BYTES;
    (WINDOWS_BUDGET / one).clamp(1, rayon::current_num_threads().max(1))
}

fn searcher(context: usize) -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .before_context(context)
        .after_context(context)
        .binary_detection(BinaryDetection::none())
        .heap_limit(Some(window_limit(context)))
        .build()
}

/// The files of one directory the glob keeps, searched on the pool; each file's matches in
/// the order of `files`.
fn search_batch(
    dir: &WalkDir,
    files: &[FileAt<'_>],
    req: &GrepRequest,
    cancel: &CancellationToken,
    counts: &Counts,
) -> Result<Vec<Vec<GrepMatch>>, CallError> {
    let none = |stopped| FileSearch {
        searched: false,
        long_lines_cut: 0,
        bytes: 0,
        stopped,
    };
    let one = |f: &FileAt<'_>,
               searcher: &mut Searcher|
     -> Result<(Vec<GrepMatch>, FileSearch), CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        if counts.held.full.load(Ordering::Relaxed) {
            return Ok((Vec::new(), none(true)));
        }
        if let Some((glob, by_name)) = &req.glob {
            let mut rel = String::new();
            let subject = if *by_name { f.name } else { f.rel(&mut rel) };
            if !glob.is_match(subject) {
                return Ok((Vec::new(), none(false)));
            }
        }
        let Some((file, st)) = dir
            .open_file(f.entry)
            .map_err(|_| failed(ErrorKind::ReadFailed))?
        else {
            // A symlink, FIFO, … or changed since the listing.
            return Ok((Vec::new(), none(false)));
        };
        let mut out = Vec::new();
        let done = search_file(
            searcher,
            req,
            file,
            &st,
            cancel,
            &counts.held,
            &f.path(),
            req.max + 1,
            &mut out,
        )?;
        Ok((out, done))
    };
    // At most `search_width` chunks, each searched in order by one thread: that many windows
    // at once.
    let chunk = files.len().div_ceil(search_width(req.context)).max(1);
    let per_chunk: Vec<Vec<(Vec<GrepMatch>, FileSearch)>> = files
        .par_chunks(chunk)
        .map(|part| {
            let mut s = searcher(req.context);
            part.iter().map(|f| one(f, &mut s)).collect()
        })
        .collect::<Result<_, CallError>>()?;
    let mut results: Vec<(Vec<GrepMatch>, FileSearch)> = per_chunk.into_iter().flatten().collect();
    // The result stays the longest prefix of the whole answer that fits: a later file may have
    // filled it while an earlier one was searched, so from the first file (in name order)
    // whose matches ended early, what they hold is given back and the files are searched
    // again one at a time, until one ends early.
    if let Some(first) = results.iter().position(|(_, done)| done.stopped) {
        for (_, done) in results.drain(first..) {
            counts.held.bytes.fetch_sub(done.bytes, Ordering::Relaxed);
        }
        counts.held.full.store(false, Ordering::Relaxed);
        let mut s = searcher(req.context);
        for f in &files[first..] {
            let again = one(f, &mut s)?;
            let stopped = again.1.stopped;
            results.push(again);
            if stopped {
                break;
            }
        }
    }
    let mut ended = false;
    let mut out = Vec::with_capacity(files.len());
    for (matches, done) in results {
        if ended {
            counts.held.bytes.fetch_sub(done.bytes, Ordering::Relaxed);
            out.push(Vec::new());
            continue;
        }
        if done.searched {
            counts.searched.fetch_add(1, Ordering::Relaxed);
        }
        counts.cut.fetch_add(done.long_lines_cut, Ordering::Relaxed);
        ended = done.stopped;
        out.push(matches);
    }
    out.resize_with(files.len(), Vec::new);
    Ok(out)
}

/// A scan's read error as the call's: its cancellation, or `READ_FAILED`.
fn scan_error(e: &io::Error, cancel: &CancellationToken) -> CallError {
    if is_cancelled(e) || cancel.is_cancelled() {
        Cancelled.into()
    } else {
        failed(ErrorKind::ReadFailed)
    }
}

/// Search one opened file (its `fstat` is `st`), its matches' bytes taken from `held`.
#[expect(
    clippy::too_many_arguments,
    reason = "one search's inputs, each distinct"
)]
fn search_file(
    searcher: &mut Searcher,
    req: &GrepRequest,
    file: std::fs::File,
    st: &rustix::fs::Stat,
    cancel: &CancellationToken,
    held: &Held,
    path: &str,
    budget: usize,
    out: &mut Vec<GrepMatch>,
) -> Result<FileSearch, CallError> {
    let mut file = LineCut::new(ScanReader::new(file, st, cancel).max_read(SEARCH_READ));
    let mut probe = [0u8; BINARY_PROBE_BYTES];
    let mut filled = 0;
    while filled < probe.len() {
        match file.read(&mut probe[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(scan_error(&e, cancel)),
        }
    }
    let head = &probe[..filled];
    if head.contains(&0) {
        return Ok(FileSearch {
            searched: false,
            long_lines_cut: 0,
            bytes: 0,
            stopped: false,
        });
    }
    let mut sink = Collect {
        path,
        held,
        bytes: 0,
        stopped: false,
        context: req.context,
        budget,
        out,
        first: 0,
        recent: VecDeque::new(),
    };
    sink.first = sink.out.len();
    let mut reader = io::Cursor::new(head).chain(&mut file);
    searcher
        .search_reader(&req.matcher, &mut reader, &mut sink)
        .map_err(|e| scan_error(&e, cancel))?;
    Ok(FileSearch {
        searched: true,
        long_lines_cut: file.cut,
        bytes: sink.bytes,
        stopped: sink.stopped,
    })
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
    /// The call's result bytes.
    held: &'a Held,
    /// The bytes this file's matches took from `held`.
    bytes: usize,
    /// A match did not fit: the search stopped before it.
    stopped: bool,
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
                // Counted, never refused: at most `context` lines a match, each at most 500
                // characters, after a match that fit.
                self.held.bytes.fetch_add(text.len(), Ordering::Relaxed);
                self.bytes += text.len();
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
        let cost = self.path.len()
            + text.len()
            + before
                .as_ref()
                .map_or(0, |b: &Vec<String>| b.iter().map(String::len).sum());
        if !self.held.take(cost) {
            self.stopped = true;
            return Ok(false);
        }
        self.bytes += cost;
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
        [{path, line, text, before?, after?}], filesSearched, longLinesCut, skipped, truncated}; \
        lines are cut at 500 characters; a line over 1 MiB is searched in its first 1 MiB only \
        (counted in longLinesCut); skipped counts entries whose paths no tool could take back.";
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
            .size_limit(MAX_REGEX_BYTES)
            .dfa_size_limit(REGEX_CACHE_BYTES)
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
