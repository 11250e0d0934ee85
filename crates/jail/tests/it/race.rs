//! Race tests: a thread exchanges a directory (or the leaf file) with a symlink pointing
//! outside the allow bound or into the deny bound, with `renameat2(RENAME_EXCHANGE)` in a
//! tight loop, while the test opens the path thousands of times. The guarded `open_for_*`
//! never yields a descriptor outside or in the deny bound; the naive twin (`resolve_for_*`
//! then `std::fs`) is shown to escape. Every loop is bounded by an iteration count.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crate::Sandbox;
use confine_jail::{FileJail, JailPolicy};

use crate::sandbox;

/// Guarded opens per scenario.
const GUARDED_ITERATIONS: usize = 10_000;
/// Upper bound of naive attempts; the twin stops at its first escape.
const NAIVE_MAX_ITERATIONS: usize = 200_000;

type Id = (u64, u64);

fn id_of(p: &Path) -> Id {
    let m = std::fs::symlink_metadata(p).unwrap();
    (m.dev(), m.ino())
}

fn id_of_file(f: &std::fs::File) -> Id {
    let m = f.metadata().unwrap();
    (m.dev(), m.ino())
}

/// A thread exchanging two names until stopped.
struct Swapper {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<u64>,
}

impl Swapper {
    fn start(a: PathBuf, b: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !flag.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .expect("renameat2(RENAME_EXCHANGE)");
                swaps += 1;
            }
            swaps
        });
        Self { stop, handle }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// What is swapped: the directory `pub/dir`, or the leaf `pub/dir/f.txt`; and where the
/// symlink swapped in points: outside the bounds, or into the deny bound.
#[derive(Clone, Copy, Debug)]
enum Scenario {
    DirToOutside,
    DirToDeny,
    LeafToOutside,
    LeafToDeny,
}

const SCENARIOS: [Scenario; 4] = [
    Scenario::DirToOutside,
    Scenario::DirToDeny,
    Scenario::LeafToOutside,
    Scenario::LeafToDeny,
];

struct Setup {
    sandbox: Sandbox,
    jail: FileJail,
    /// The two names the swapper exchanges.
    a: PathBuf,
    b: PathBuf,
    /// Files whose descriptor must never be returned, and whose content must never change.
    forbidden: Vec<PathBuf>,
    /// Directories in which nothing may be created.
    forbidden_dirs: Vec<PathBuf>,
}

fn setup(scenario: Scenario) -> Setup {
    let link: (&str, &str) = match scenario {
        Scenario::DirToOutside => ("pub/swap", "$OUTSIDE/dir"),
        Scenario::DirToDeny => ("pub/swap", "deny"),
        Scenario::LeafToOutside => ("pub/dir/swap", "$OUTSIDE/dir/f.txt"),
        Scenario::LeafToDeny => ("pub/dir/swap", "../deny/f.txt"),
    };
    let s = sandbox(
        &[
            ("pub/dir/f.txt", "inside"),
            ("pub/deny/f.txt", "denied"),
            ("$OUTSIDE/dir/f.txt", "outside"),
        ],
        &[],
        &[link],
    );
    let root = s.root().to_path_buf();
    let policy = JailPolicy {
        allow_read: vec![root.clone()],
        allow_write: vec![root.join("pub")],
        deny: vec![root.join("pub/deny")],
    };
    let jail = FileJail::new(&root, policy).unwrap();
    let (a, b) = match scenario {
        Scenario::DirToOutside | Scenario::DirToDeny => {
            (root.join("pub/dir"), root.join("pub/swap"))
        }
        Scenario::LeafToOutside | Scenario::LeafToDeny => {
            (root.join("pub/dir/f.txt"), root.join("pub/dir/swap"))
        }
    };
    let forbidden = vec![s.outside().join("dir/f.txt"), root.join("pub/deny/f.txt")];
    let forbidden_dirs = vec![s.outside().join("dir"), root.join("pub/deny")];
    Setup {
        sandbox: s,
        jail,
        a,
        b,
        forbidden,
        forbidden_dirs,
    }
}

/// The state outside and in the deny bound: (file contents, directory listings).
fn forbidden_state(s: &Setup) -> (Vec<String>, Vec<Vec<String>>) {
    let contents = s
        .forbidden
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let listings = s
        .forbidden_dirs
        .iter()
        .map(|d| {
            let mut names: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        })
        .collect();
    (contents, listings)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Read,
    Write,
}

fn guarded(scenario: Scenario, op: Op) {
    let s = setup(scenario);
    let forbidden_ids: Vec<Id> = s.forbidden.iter().map(|f| id_of(f)).collect();
    let before = forbidden_state(&s);
    let swapper = Swapper::start(s.a.clone(), s.b.clone());
    let (mut opened, mut refused, mut escapes) = (0usize, 0usize, Vec::new());
    let mut opened_ids = Vec::new();
    // At least GUARDED_ITERATIONS opens, then on until both outcomes have been seen (bounded
    // at 25 times as many): on a loaded machine the swapper can sleep through a short run.
    for round in 0..GUARDED_ITERATIONS * 25 {
        if round >= GUARDED_ITERATIONS && opened > 0 && refused > 0 {
            break;
        }
        let r = match op {
            Op::Read => s.jail.open_for_read("pub/dir/f.txt"),
            Op::Write => s.jail.open_for_write("pub/dir/f.txt"),
        };
        match r {
            Ok(f) => {
                let id = id_of_file(&f);
                if forbidden_ids.contains(&id) {
                    escapes.push(id);
                }
                opened_ids.push(id);
                opened += 1;
            }
            Err(_) => refused += 1,
        }
    }
    let swaps = swapper.stop();
    // Put the tree back (an odd number of swaps leaves the symlink in place).
    if s.a.is_symlink() {
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &s.a,
            rustix::fs::CWD,
            &s.b,
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .unwrap();
    }
    let inside = id_of(&s.sandbox.root().join("pub/dir/f.txt"));
    assert!(
        escapes.is_empty(),
        "{scenario:?} {op:?}: {} escapes",
        escapes.len()
    );
    assert!(
        opened_ids.iter().all(|id| *id == inside),
        "{scenario:?} {op:?}: a descriptor that is not the inside file"
    );
    assert_eq!(
        forbidden_state(&s),
        before,
        "{scenario:?} {op:?}: forbidden files changed"
    );
    assert!(swaps > 0, "{scenario:?}: the swapper never ran");
    assert!(opened > 0, "{scenario:?} {op:?}: nothing was ever opened");
    assert!(refused > 0, "{scenario:?} {op:?}: the race never showed");
    eprintln!("{scenario:?} {op:?}: {opened} opened, {refused} refused, {swaps} swaps, 0 escapes");
    drop(s.jail);
    s.sandbox.close().unwrap();
}

/// The naive twin: decide with `resolve_for_*`, then use the path with `std::fs`. Returns the
/// attempt at which it escaped.
fn naive(scenario: Scenario, op: Op) -> Option<usize> {
    let s = setup(scenario);
    let forbidden_ids: Vec<Id> = s.forbidden.iter().map(|f| id_of(f)).collect();
    let swapper = Swapper::start(s.a.clone(), s.b.clone());
    let mut escaped_at = None;
    for i in 0..NAIVE_MAX_ITERATIONS {
        let decided = match op {
            Op::Read => s.jail.resolve_for_read("pub/dir/f.txt"),
            Op::Write => s.jail.resolve_for_write("pub/dir/f.txt"),
        };
        let Ok(path) = decided else { continue };
        let used = match op {
            Op::Read => std::fs::File::open(&path),
            // Open for writing without truncating, so the escape is seen by identity alone.
            Op::Write => std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path),
        };
        if let Ok(f) = used
            && forbidden_ids.contains(&id_of_file(&f))
        {
            escaped_at = Some(i);
            break;
        }
    }
    swapper.stop();
    drop(s.jail);
    s.sandbox.close().unwrap();
    escaped_at
}

#[test]
fn open_for_read_race_never_yields_a_descriptor_outside_or_denied() {
    for scenario in SCENARIOS {
        guarded(scenario, Op::Read);
    }
}

#[test]
fn open_for_write_race_never_yields_a_descriptor_outside_or_denied() {
    for scenario in SCENARIOS {
        guarded(scenario, Op::Write);
    }
}

#[test]
fn naive_resolve_then_open_twin_escapes_under_the_same_race() {
    for scenario in SCENARIOS {
        for op in [Op::Read, Op::Write] {
            let at = naive(scenario, op);
            assert!(
                at.is_some(),
                "{scenario:?} {op:?}: the naive twin never escaped"
            );
            eprintln!(
                "naive {scenario:?} {op:?}: escaped at attempt {}",
                at.unwrap()
            );
        }
    }
}
