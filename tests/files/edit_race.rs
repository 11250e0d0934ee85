//! `edit_file` racing a writer that appends to the file, every answer recorded beside what the
//! file holds at the end: an answer never says nothing happened when something did.
//!
//! The file starts with one line `<EDIT-n>` for each edit `n` (and padding, so that the
//! appends carry it over 65,536 bytes late in the run). Edit `n` replaces `<EDIT-n>` with
//! `<DONE-n>`, retried while it answers `EDIT_CONFLICT` (a bounded number of times); a writer
//! thread appends lines `<W-i>` all along, in one of two modes:
//!
//! - **by path**: open with `O_APPEND`, write one line, close (what `echo >> file` does);
//! - **holding**: open with `O_APPEND`, write a burst of lines through that descriptor, close
//!   (a logger that keeps its file open).
//!
//! Neither writer renames, so nothing but an edit ever removes a marker, and edits run one at
//! a time (the per-file lock). What is asserted exactly, for every `n`:
//!
//! - at the end the file holds exactly one of `<EDIT-n>` and `<DONE-n>`, in the order they
//!   started;
//! - `<DONE-n>` is there if and only if one of edit `n`'s answers was a success, and at most
//!   one was (a retry that finds no `<EDIT-n>`, `EDIT_TEXT_NOT_FOUND`, is an earlier answer
//!   that lied);
//! - every answer is a success, `EDIT_CONFLICT` or `FILE_TOO_LARGE`;
//! - the writer's lines are there at most once each, in the order written, and no
//!   `.pify-` temporary is left.
//!
//! What is measured, not asserted: the writer's appends that are missing at the end. An
//! append through a descriptor opened on the file an edit then replaces lands in the replaced
//! file, which no name holds any more: the limit every editor that replaces by rename shares
//! (docs/SECURITY.md gives the figures). `EDIT_RACE_RUNS=<n>` sets the runs of each mode
//! (default 2) to measure rates, `EDIT_RACE_DISK=1` runs on the default temporary directory
//! instead of tmpfs, and `EDIT_RACE_MEASURE=1` reports untrue answers without failing (to
//! count them over many runs).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::support;
use serde_json::json;
use support::{Sibling, call_on, pify_entries, runtime};

/// Edits (markers) in one run.
const EDITS: usize = 200;
/// The most answers one edit gets: it is retried while it answers `EDIT_CONFLICT`.
const ATTEMPTS: usize = 4;
/// The writer's lines per edit started, at most (it waits for the edits beyond that).
const LINES_PER_EDIT: usize = 16;
/// Lines the holding writer writes through one descriptor.
const BURST: usize = 8;
/// Padding at the top of the file: with the markers and the writer's lines the file passes
/// 65,536 bytes about four fifths into the run, so the last edits answer `FILE_TOO_LARGE`.
const PADDING: usize = 33_000;
/// The last edits, which meet a file over the limit whatever the writer managed: before them
/// the run appends padding itself if the writer's lines have not taken the file there.
const TOO_LARGE_AT_THE_END: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    ByPath,
    Holding,
}

fn marker(state: &str, n: usize) -> String {
    format!("<{state}-{n}>")
}

fn writer_line(i: usize) -> String {
    format!("<W-{i:07}>\n")
}

/// The writer: appends lines `0..` to `path` in `mode`, at most [`LINES_PER_EDIT`] for each
/// edit started, until `stop`. Returns how many lines its writes completed.
fn append(path: &Path, mode: Mode, started: &AtomicUsize, stop: &AtomicBool) -> usize {
    let mut written = 0;
    let budget = || (started.load(Ordering::Relaxed) + 1) * LINES_PER_EDIT;
    while !stop.load(Ordering::Relaxed) {
        if written >= budget() {
            // Woken when the next edit starts (the timeout only bounds a missed wake-up).
            std::thread::park_timeout(std::time::Duration::from_millis(5));
            continue;
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .expect("the name always holds the file (no writer removes it)");
        let lines = match mode {
            Mode::ByPath => 1,
            Mode::Holding => BURST,
        };
        for _ in 0..lines {
            file.write_all(writer_line(written).as_bytes()).unwrap();
            written += 1;
            if mode == Mode::Holding {
                std::thread::yield_now();
            }
        }
    }
    written
}

/// What one run found.
#[derive(Debug, Default)]
struct Run {
    /// Answers by token (`ok` for a success), over all edits.
    outcomes: BTreeMap<String, usize>,
    /// Edits whose file holds `<DONE-n>` although no answer of theirs was a success.
    applied_but_failed: Vec<usize>,
    /// Edits that answered success but whose `<DONE-n>` is not in the file.
    succeeded_but_missing: Vec<usize>,
    /// The writer's completed line writes, and how many of them the file lacks.
    written: usize,
    lost: usize,
}

/// One run: [`EDITS`] edits racing the writer in `mode` on tmpfs (or `disk`).
fn run(mode: Mode, disk: bool) -> Run {
    let dirs = if disk {
        Sibling::disk("unused")
    } else {
        Sibling::fast("unused")
    };
    let path = dirs.root.join("log.txt");
    let mut initial = String::new();
    for _ in 0..PADDING / 100 {
        initial.push_str(&format!("{}\n", "p".repeat(99)));
    }
    for n in 0..EDITS {
        initial.push_str(&format!("{}\n", marker("EDIT", n)));
    }
    std::fs::write(&path, &initial).unwrap();
    let registry =
        confine_tools::create_workspace_tools(&dirs.root, confine_tools::ToolSetOptions::default())
            .expect("a registry");
    let rt = runtime();
    let (started, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
    let mut answers: Vec<Vec<String>> = vec![Vec::new(); EDITS];
    let written = std::thread::scope(|s| {
        let writer = s.spawn(|| append(&path, mode, &started, &stop));
        // Should a call panic, the writer still stops.
        let _stop = StopOnDrop(&stop);
        for (n, answers) in answers.iter_mut().enumerate() {
            if n == EDITS - TOO_LARGE_AT_THE_END {
                grow_past_the_limit(&path);
            }
            started.store(n, Ordering::Relaxed);
            writer.thread().unpark();
            let arguments = json!({
                "path": "log.txt",
                "edits": [{"oldText": marker("EDIT", n), "newText": marker("DONE", n)}],
            });
            for _ in 0..ATTEMPTS {
                let result = call_on(&rt, &registry, "edit_file", &arguments);
                let outcome = if result.is_error {
                    result.record()["error"]["message"]
                        .as_str()
                        .unwrap_or("no token")
                        .to_owned()
                } else {
                    "ok".to_owned()
                };
                let retry = outcome == "EDIT_CONFLICT";
                answers.push(outcome);
                if !retry {
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap()
    });

    let text = std::fs::read_to_string(&path).unwrap();
    let mut found = Run {
        written,
        ..Run::default()
    };
    let (mut markers, mut lines) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let inner = line.strip_prefix('<').and_then(|l| l.strip_suffix('>'));
        match inner.and_then(|l| l.split_once('-')) {
            Some(("EDIT", n)) => markers.push((false, n.parse::<usize>().unwrap())),
            Some(("DONE", n)) => markers.push((true, n.parse::<usize>().unwrap())),
            Some(("W", i)) => lines.push(i.parse::<usize>().unwrap()),
            _ => assert!(
                line.bytes().all(|b| b == b'p'),
                "a line no writer wrote: {line:?}"
            ),
        }
    }
    let order: Vec<usize> = markers.iter().map(|&(_, n)| n).collect();
    assert_eq!(
        order,
        (0..EDITS).collect::<Vec<_>>(),
        "each edit's line exactly once, in place"
    );
    for (n, answers) in answers.iter().enumerate() {
        for outcome in answers {
            *found.outcomes.entry(outcome.clone()).or_default() += 1;
        }
        let oks = answers.iter().filter(|a| *a == "ok").count();
        assert!(oks <= 1, "edit {n} answered success twice: {answers:?}");
        match (markers[n].0, oks == 1) {
            (true, false) => found.applied_but_failed.push(n),
            (false, true) => found.succeeded_but_missing.push(n),
            _ => {}
        }
    }
    assert!(
        lines.windows(2).all(|w| w[0] < w[1]),
        "the writer's lines at most once each, in order"
    );
    assert!(lines.last().is_none_or(|&last| last < written));
    found.lost = written - lines.len();
    assert!(
        pify_entries(&dirs.base).is_empty(),
        "{:?}",
        pify_entries(&dirs.base)
    );
    found
}

/// Appends padding lines by path until `path` is over the edit limit, unless the writer's
/// lines already took it there: the last edits then answer `FILE_TOO_LARGE` however far a
/// writer slowed by a loaded machine fell behind its budget.
fn grow_past_the_limit(path: &Path) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    while file.metadata().unwrap().len() <= 65_536 {
        file.write_all(format!("{}\n", "p".repeat(99)).as_bytes())
            .unwrap();
    }
}

/// Sets the flag when dropped, so the writer stops when the main loop panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn runs() -> usize {
    std::env::var("EDIT_RACE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// On the default temporary directory (a disk, where fsync costs milliseconds) rather than
/// tmpfs when `EDIT_RACE_DISK=1`.
fn on_disk() -> bool {
    std::env::var("EDIT_RACE_DISK").is_ok_and(|v| v == "1")
}

/// [`runs`] runs in `mode`: every answer true to the file, in every run; the lost appends are
/// reported.
fn race(mode: Mode, disk: bool) {
    let (mut lying, mut losing, mut lost, mut written) = (0, 0, 0, 0);
    let mut outcomes = BTreeMap::<String, usize>::new();
    let mut failures = Vec::new();
    let runs = runs();
    for _ in 0..runs {
        let found = run(mode, disk);
        for (k, v) in &found.outcomes {
            *outcomes.entry(k.clone()).or_default() += v;
        }
        if !found.applied_but_failed.is_empty() || !found.succeeded_but_missing.is_empty() {
            lying += 1;
            failures.push((
                found.applied_but_failed.clone(),
                found.succeeded_but_missing.clone(),
            ));
        }
        losing += usize::from(found.lost > 0);
        lost += found.lost;
        written += found.written;
    }
    eprintln!(
        "edit_race {mode:?} ({}): {runs} runs of {EDITS} edits, answers {outcomes:?}; {lying} \
         runs with an answer untrue to the file; {losing} runs lost appends ({lost} of \
         {written} lines)",
        if disk { "disk" } else { "tmpfs" },
    );
    assert!(
        failures.is_empty() || std::env::var("EDIT_RACE_MEASURE").is_ok(),
        "(applied but answered an error, answered success but absent): {failures:?}"
    );
    for outcome in outcomes.keys() {
        assert!(
            ["ok", "EDIT_CONFLICT", "FILE_TOO_LARGE"].contains(&outcome.as_str()),
            "{outcome}: {outcomes:?}"
        );
    }
    // The race ran: edits landed, some met an append, and the file grew too large at the end.
    for expected in ["ok", "EDIT_CONFLICT", "FILE_TOO_LARGE"] {
        assert!(
            outcomes.contains_key(expected),
            "no {expected}: {outcomes:?}"
        );
    }
}

#[test]
fn edit_answers_match_the_file_with_a_writer_appending_by_path() {
    race(Mode::ByPath, on_disk());
}

#[test]
fn edit_answers_match_the_file_with_a_writer_holding_the_file_open() {
    race(Mode::Holding, on_disk());
}

/// A directory the server may write and search but not read (mode 0300, a drop box): the
/// edited file is installed, but the directory cannot be opened for its `fsync`. The edit is
/// in place, so the answer is a success (it was `WRITE_FAILED`, an error telling the model
/// nothing happened, while the file held the edit). As root, whom the kernel lets read any
/// directory, the server runs as the user `nobody` (uid 65534) over a workspace given to it.
#[test]
fn an_edit_in_a_directory_that_cannot_be_read_answers_what_it_did() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    let dirs = Sibling::fast("unused");
    let drop_box = dirs.root.join("drop");
    std::fs::create_dir(&drop_box).unwrap();
    std::fs::write(drop_box.join("f.txt"), "one <EDIT-1> two\n").unwrap();
    let root = rustix::process::geteuid().is_root();
    if root {
        for entry in [&dirs.base, &dirs.root, &drop_box, &drop_box.join("f.txt")] {
            std::os::unix::fs::chown(entry, Some(65534), Some(65534)).unwrap();
        }
    }
    std::fs::set_permissions(&drop_box, std::fs::Permissions::from_mode(0o300)).unwrap();
    let mut server = support::confine();
    server
        .args(["call", "--root"])
        .arg(&dirs.root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if root {
        server.uid(65534).gid(65534);
    }
    let mut child = match server.spawn() {
        Ok(child) => child,
        Err(e) if root && e.kind() == std::io::ErrorKind::PermissionDenied => {
            testkit::not_run(
                "an_edit_in_a_directory_that_cannot_be_read_answers_what_it_did",
                &format!(
                    "\
                 as root (the server cannot be started as the user nobody here, no \
                 CAP_SETUID or the built binary out of that user's reach: {e}); the \
                 ordinary-user run covers it"
                ),
            );
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let call = json!({"id": 1, "name": "edit_file", "arguments": {"path": "drop/f.txt",
        "edits": [{"oldText": "<EDIT-1>", "newText": "<DONE-1>"}]}});
    writeln!(child.stdin.take().unwrap(), "{call}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    std::fs::set_permissions(&drop_box, std::fs::Permissions::from_mode(0o700)).unwrap();
    let text = std::fs::read_to_string(drop_box.join("f.txt")).unwrap();
    assert_eq!(text, "one <DONE-1> two\n", "the edit is in place");
    assert_eq!(answer["isError"], false, "{answer}");
    assert_eq!(answer["content"]["replacements"], 1, "{answer}");
    assert!(
        pify_entries(&dirs.base).is_empty(),
        "{:?}",
        pify_entries(&dirs.base)
    );
}
