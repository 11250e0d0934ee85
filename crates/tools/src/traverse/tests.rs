//! The parallel walk beside the sequential one, its reference: on generated trees with
//! symlinks in and out of the root, denied and ignored entries, names no tool could take
//! back, unreadable directories, and at the bounds at N and N+1, both give the same answer.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::*;
use crate::find_files::{FindFilesTool, FindInput, FindOutput, MAX_FIND_RESULTS};
use crate::grep::{GrepInput, GrepOutput, GrepTool, MAX_RESULT_BYTES};
use crate::tool::TypedTool;
use crate::workspace::Workspace;

/// A pool of several threads whatever the machine's cores, so that subtrees go ahead.
fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap()
}

/// A small deterministic generator (the trees must be the same on every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// A tree of some 1,500 entries under `root`, with `outside` (beside it) holding what a
/// symlink out of the root would reach.
fn tree(root: &Path, outside: &Path, seed: u64) {
    let mut r = Lcg(seed);
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(outside.join("out.rs"), "needle outside\n").unwrap();
    std::fs::write(outside.join("sub/deep.rs"), "needle outside\n").unwrap();
    std::fs::write(root.join(".gitignore"), "ignored/\n*.tmp\n").unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".git/x.rs"), "needle in git\n").unwrap();
    std::fs::create_dir_all(root.join("ignored")).unwrap();
    std::fs::write(root.join("ignored/i.rs"), "needle ignored\n").unwrap();
    let mut n = 0u64;
    let mut dirs = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let files = r.below(14);
        for f in 0..files {
            n += 1;
            let ext = ["rs", "txt", "tmp", "md"][r.below(4) as usize];
            let mut text = String::new();
            for l in 0..r.below(6) {
                if r.below(3) == 0 {
                    text.push_str(&format!("line {l} has the needle {n}\n"));
                } else {
                    text.push_str(&format!("line {l} of nothing\n"));
                }
            }
            std::fs::write(dir.join(format!("f{f:02}.{ext}")), text).unwrap();
        }
        match r.below(8) {
            0 => symlink(outside, dir.join("lout")).unwrap(),
            1 => symlink("..", dir.join("lup")).unwrap(),
            2 => symlink("f00.rs", dir.join("lfile.rs")).unwrap(),
            3 => std::fs::write(dir.join("secret.rs"), "needle denied\n").unwrap(),
            4 => std::fs::write(dir.join("bad\u{1}name.rs"), "needle refused name\n").unwrap(),
            5 => std::fs::write(dir.join(".gitignore"), "*.md\n!f01.md\n").unwrap(),
            6 => std::fs::write(dir.join(".f.rs.pify-tmp-1"), "needle temporary\n").unwrap(),
            _ => {}
        }
        if depth < 4 {
            let subs = if depth == 0 { 12 } else { r.below(6) };
            for s in 0..subs {
                let name = match r.below(12) {
                    0 => format!("secretdir{s}"),
                    1 => format!("bad\u{2}dir{s}"),
                    _ => format!("d{depth}{s:02}"),
                };
                let sub = dir.join(name);
                std::fs::create_dir_all(&sub).unwrap();
                dirs.push((sub, depth + 1));
            }
        }
    }
}

struct Sides {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    find: (FindFilesTool, FindFilesTool),
    grep: (GrepTool, GrepTool),
}

fn sides(build: impl FnOnce(&Path, &Path), denied: &[&str]) -> Sides {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    build(&root, &tmp.path().join("outside"));
    let options = crate::ToolSetOptions {
        denied: Arc::new(DeniedPaths::new(denied).unwrap()),
        ..Default::default()
    };
    let ws = Workspace::new(Arc::new(WorkspaceRoot::capture(&root).unwrap()), &options);
    let find = FindFilesTool::new(ws.clone());
    let grep = GrepTool::new(ws);
    Sides {
        _tmp: tmp,
        root,
        find: (find.clone(), find.sequential()),
        grep: (grep.clone(), grep.sequential()),
    }
}

fn code<T>(r: Result<T, CallError>) -> Result<T, String> {
    r.map_err(|e| match e {
        CallError::Cancelled(_) => "cancelled".into(),
        CallError::Failed(e) => format!("{:?}", e.kind()),
    })
}

/// `find_files` with `input`, parallel and sequential: the same answer, returned.
fn find_both(s: &Sides, input: serde_json::Value) -> Result<FindOutput, String> {
    let input: FindInput = serde_json::from_value(input).unwrap();
    let req = s.find.0.check(input).unwrap();
    let cancel = CancellationToken::new();
    let parallel = pool().install(|| code(s.find.0.find(&req, &cancel)));
    let sequential = code(s.find.1.find(&req, &cancel));
    assert_eq!(parallel, sequential);
    parallel
}

/// `grep` with `input`, parallel and sequential: the same answer, returned.
fn grep_both(s: &Sides, input: serde_json::Value) -> Result<GrepOutput, String> {
    let input: GrepInput = serde_json::from_value(input).unwrap();
    let req = s.grep.0.check(input).unwrap();
    let cancel = CancellationToken::new();
    let parallel = pool().install(|| code(s.grep.0.grep(&req, &cancel)));
    let sequential = code(s.grep.1.grep(&req, &cancel));
    assert_eq!(parallel, sequential);
    parallel
}

#[test]
fn parallel_walk_equals_sequential_on_generated_trees() {
    for seed in [1, 2, 3] {
        let s = sides(|r, o| tree(r, o, seed), &["**/secret*"]);
        for pattern in ["**/*.rs", "**", "*", "d0*/**/f0?.*", "**/lfile.rs"] {
            let out = find_both(&s, json!({ "pattern": pattern })).unwrap();
            let all = find_both(&s, json!({ "pattern": pattern, "includeIgnored": true }));
            assert!(all.unwrap().paths.len() >= out.paths.len());
        }
        let out = find_both(&s, json!({ "pattern": "**" })).unwrap();
        assert!(out.paths.len() > 100, "seed {seed}: {}", out.paths.len());
        assert!(out.denied > 0 && out.skipped > 0, "seed {seed}");
        // Nothing through a symlink, nothing ignored, denied or temporary.
        for p in &out.paths {
            assert!(!p.contains("lout/") && !p.contains("lup/"), "{p}");
            assert!(!p.starts_with("ignored/") && !p.starts_with(".git/"), "{p}");
            assert!(!p.contains("secret") && !p.contains("pify"), "{p}");
        }
        for (pattern, extra) in [
            ("needle", json!({})),
            ("needle", json!({ "maxMatches": 1000, "contextLines": 2 })),
            ("needle", json!({ "glob": "*.rs", "maxMatches": 7 })),
            ("(?i)LINE [0-2]", json!({ "maxMatches": 1000 })),
            ("needle", json!({ "path": "d000", "maxMatches": 1000 })),
        ] {
            let mut input = extra;
            input["pattern"] = json!(pattern);
            let out = grep_both(&s, input).unwrap();
            assert!(!out.matches.is_empty(), "{pattern}");
            assert!(out.matches.iter().all(|m| !m.text.contains("outside")
                && !m.text.contains("denied")
                && !m.text.contains("temporary")));
        }
    }
}

/// A tree of `per_dir` files (each `name` with one `needle` line) in each of `dirs`
/// directories, `a/dNN/`, so the limit falls in a subtree walked ahead.
fn spread(root: &Path, dirs: usize, per_dir: usize, total: usize) {
    let mut n = 0;
    for d in 0..dirs {
        let dir = root.join(format!("a/d{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..per_dir {
            if n == total {
                return;
            }
            std::fs::write(dir.join(format!("f{f:03}.rs")), "one needle here\n").unwrap();
            n += 1;
        }
    }
}

#[test]
fn parallel_walk_truncates_where_the_sequential_one_does_at_n_and_n_plus_one() {
    for total in [MAX_FIND_RESULTS, MAX_FIND_RESULTS + 1] {
        let s = sides(|r, _| spread(r, 20, 60, total), &[]);
        let out = find_both(&s, json!({ "pattern": "**/*.rs" })).unwrap();
        assert_eq!(out.paths.len(), MAX_FIND_RESULTS);
        assert_eq!(out.truncated, total > MAX_FIND_RESULTS, "{total}");
    }
    let s = sides(|r, _| spread(r, 20, 30, 600), &[]);
    for max in [1, 29, 30, 31, 299, 599, 600] {
        let out = grep_both(&s, json!({ "pattern": "needle", "maxMatches": max })).unwrap();
        assert_eq!(out.matches.len(), max.min(600));
        assert_eq!(out.truncated, max < 600, "{max}");
    }
}

#[test]
fn parallel_grep_ends_where_the_sequential_one_does_at_the_result_bytes() {
    // 500-character lines with ten lines of context: some 10 KiB a match, so 4 MiB of result
    // ends the answer after some 400 of 600 matches, in a subtree walked ahead.
    let s = sides(
        |root, _| {
            let line = "x".repeat(600);
            let body: String = (0..25)
                .map(|i| {
                    if i == 12 {
                        format!("needle {line}\n")
                    } else {
                        format!("{line}\n")
                    }
                })
                .collect();
            for d in 0..20 {
                let dir = root.join(format!("d{d:02}"));
                std::fs::create_dir_all(&dir).unwrap();
                for f in 0..30 {
                    std::fs::write(dir.join(format!("f{f:02}")), &body).unwrap();
                }
            }
        },
        &[],
    );
    let input = json!({ "pattern": "needle", "maxMatches": 1000, "contextLines": 10 });
    let out = grep_both(&s, input).unwrap();
    assert!(out.truncated);
    let bytes: usize = out
        .matches
        .iter()
        .map(|m| {
            m.path.len()
                + m.text.len()
                + m.before.iter().flatten().map(String::len).sum::<usize>()
                + m.after.iter().flatten().map(String::len).sum::<usize>()
        })
        .sum();
    assert!(
        bytes <= MAX_RESULT_BYTES && out.matches.len() > 300,
        "{}",
        out.matches.len()
    );
    // With two lines of context every match fits: 600 of some 2.5 KiB each.
    let input = json!({ "pattern": "needle", "maxMatches": 1000, "contextLines": 2 });
    let out = grep_both(&s, input).unwrap();
    assert_eq!((out.matches.len(), out.truncated), (600, false));
}

#[test]
fn parallel_walk_reads_a_directory_larger_than_a_window_ahead() {
    // Some 7,000 names in a subdirectory offered to the pool: more than its first window.
    let names = AHEAD_ENTRIES_BUDGET / 2 / (64 + 12) + 500;
    let s = sides(
        |root, _| {
            for d in ["a", "b", "c"] {
                let dir = root.join(d);
                std::fs::create_dir_all(&dir).unwrap();
                for f in 0..names {
                    std::fs::write(dir.join(format!("f{f:07}.txt")), "").unwrap();
                }
            }
            std::fs::write(root.join("b/f0003000.txt"), "needle\n").unwrap();
        },
        &[],
    );
    let out = find_both(&s, json!({ "pattern": "*/f000300?.txt" })).unwrap();
    assert_eq!(out.paths.len(), 30);
    let out = grep_both(&s, json!({ "pattern": "needle" })).unwrap();
    assert_eq!(out.files_searched, 3 * names);
    assert_eq!(out.matches.len(), 1);
}

#[test]
fn parallel_walk_fails_as_the_sequential_one_on_an_unreadable_directory() {
    if rustix::process::geteuid().is_root() {
        testkit::not_run(
            "parallel_walk_fails_as_the_sequential_one_on_an_unreadable_directory",
            "root reads a directory of mode 000; the user pass runs it",
        );
        return;
    }
    let s = sides(|r, _| spread(r, 20, 30, 600), &[]);
    let locked = s.root.join("a/d13");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let failed = find_both(&s, json!({ "pattern": "**/*.rs" }));
    let grep = grep_both(&s, json!({ "pattern": "needle", "maxMatches": 1000 }));
    // The limit falls before the locked directory: both answer, truncated.
    let early = grep_both(&s, json!({ "pattern": "needle", "maxMatches": 100 }));
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(failed, Err("Some(ReadFailed)".to_owned()));
    assert_eq!(grep, Err("Some(ReadFailed)".to_owned()));
    assert!(early.unwrap().truncated);
}

/// A visitor that counts how many subtrees went ahead, to show the pool is used.
struct Counting(AtomicUsize);

impl Visitor for Counting {
    type Item = String;
    type Tally = ();

    fn tally(&self, ahead: bool) {
        if ahead {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn files(
        &self,
        _: &(),
        _: &WalkDir,
        files: &[FileAt<'_>],
        _: &CancellationToken,
    ) -> Result<Vec<Vec<String>>, CallError> {
        Ok(files.iter().map(|f| vec![f.path()]).collect())
    }

    fn cost(&self, item: &String) -> usize {
        item.len()
    }
}

#[test]
fn parallel_walk_walks_subtrees_ahead_and_keeps_the_order() {
    let tmp = tempfile::tempdir().unwrap();
    spread(tmp.path(), 20, 200, 4000);
    let ws = WorkspaceRoot::capture(tmp.path()).unwrap();
    let cancel = CancellationToken::new();
    let run = |parallel| {
        let spec = WalkSpec {
            root_id: ws.identity(),
            prefix: String::new(),
            include_ignored: false,
            cancel: &cancel,
            limit: 10_000,
            denied: None,
            parallel,
        };
        let visitor = Counting(AtomicUsize::new(0));
        let start = open_start(&ws, None, ErrorKind::ReadFailed).unwrap();
        let walked = pool()
            .install(|| walk(start, Ignores::default(), &spec, &visitor, &()))
            .unwrap();
        (walked.items, visitor.0.into_inner())
    };
    let (parallel, ahead) = run(true);
    let (sequential, none) = run(false);
    assert_eq!(parallel, sequential);
    assert_eq!(parallel.len(), 4000);
    assert!(parallel.is_sorted());
    assert_eq!(none, 0);
    assert!(ahead > 0, "no subtree went ahead");
}

fn open_dir(path: &Path) -> WalkDir {
    WalkDir::from_fd(std::fs::File::open(path).unwrap().into()).unwrap()
}

/// `read_window` beside the plain answer (every kept name after `after`, sorted, the smallest
/// that fit): directories of random names read in windows bounded by count and by bytes,
/// window after window to the end, give every entry once, in order.
#[test]
fn read_window_gives_the_smallest_names_that_fit_window_after_window() {
    use std::os::unix::ffi::OsStrExt;
    let cancel = CancellationToken::new();
    let mut r = Lcg(7);
    for case in 0..24u64 {
        let tmp = tempfile::tempdir().unwrap();
        let n = 1 + r.below(300) as usize;
        let mut names: Vec<String> = (0..n)
            .map(|i| format!("{}-{i}", "x".repeat(r.below(40) as usize)))
            .collect();
        for name in &names {
            std::fs::write(tmp.path().join(name), "").unwrap();
        }
        // A name the keeper refuses stays out of every window.
        std::fs::write(tmp.path().join("skip-me"), "").unwrap();
        names.sort();
        let max_entries = if case % 2 == 0 {
            usize::MAX
        } else {
            1 + r.below(40) as usize
        };
        let max_bytes = 64 + r.below(4_000) as usize;
        let mut dir = open_dir(tmp.path());
        let mut got: Vec<String> = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let mut judged = 0;
            let w = read_window(
                &mut dir,
                after.as_deref(),
                max_entries,
                max_bytes,
                &cancel,
                |e| {
                    judged += 1;
                    e.name() != "skip-me"
                },
            )
            .unwrap();
            // Every entry after `after` is judged, those past the window's end too.
            if after.is_none() {
                assert_eq!(judged, names.len() + 1, "case {case}");
            }
            assert!(
                !w.entries.is_empty(),
                "case {case}: a window holds one at least"
            );
            let bytes: usize = w.entries.iter().map(entry_bytes).sum();
            assert!(w.entries.len() <= max_entries);
            assert!(w.entries.len() == 1 || bytes <= max_bytes, "case {case}");
            let from = got.len();
            got.extend(w.entries.iter().map(|e| e.name_str().unwrap().to_owned()));
            // The smallest that fit: the next name would not have.
            if w.more {
                let next = &names[got.len()];
                assert!(
                    w.entries.len() == max_entries || bytes + next.len() + 64 > max_bytes,
                    "case {case}: {next} would have fit after {}",
                    got.len() - from
                );
            }
            after = Some(w.entries.last().unwrap().name().as_bytes().to_vec());
            if !w.more {
                break;
            }
        }
        assert_eq!(got, names, "case {case}");
    }
}

#[test]
fn read_window_stops_when_cancelled() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..10 {
        std::fs::write(tmp.path().join(format!("f{i}")), "").unwrap();
    }
    let cancel = CancellationToken::new();
    cancel.cancel();
    let mut dir = open_dir(tmp.path());
    let r = read_window(&mut dir, None, usize::MAX, usize::MAX, &cancel, |_| true);
    assert!(matches!(r, Err(CallError::Cancelled(_))));
}
