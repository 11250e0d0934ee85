//! A directory exchanged with a symlink to outside (`renameat2(RENAME_EXCHANGE)` in a loop
//! from a thread) while the walk runs thousands of times: the descriptor walk never yields an
//! outside name or byte; its path-walking twin does.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use confine_beneath::{EntryKind, FileId, Symlinks, WalkDir};
use rustix::fs::{Mode, OFlags, RenameFlags};

const SECRET_NAME: &str = "outside-secret.txt";
const SECRET: &str = "OUTSIDE BYTES";

struct Setup {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
}

/// `ws/d` a directory holding `inside.txt`; `ws/alt` a symlink to `outside/`, which holds
/// the secret.
fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("d/inside.txt"), "inside").unwrap();
    std::fs::write(outside.join(SECRET_NAME), SECRET).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("alt")).unwrap();
    Setup { _tmp: tmp, ws }
}

/// Exchange `ws/d` and `ws/alt` until told to stop.
fn swapper(ws: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let dir = rustix::fs::open(ws, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            rustix::fs::renameat_with(&dir, "d", &dir, "alt", RenameFlags::EXCHANGE).unwrap();
            n += 1;
        }
        n
    })
}

/// Every name and file content the descriptor walk reaches from the root.
fn walk_guarded(root: &impl std::os::fd::AsFd, root_id: FileId, out: &mut BTreeSet<String>) {
    let mut stack = vec![WalkDir::open_beneath(root, "", Symlinks::Refuse).unwrap()];
    while let Some(mut dir) = stack.pop() {
        let Ok(entries) = dir.read_entries() else {
            continue;
        };
        let mut found = Vec::new();
        for e in &entries {
            found.push(e.name().to_string_lossy().into_owned());
            match e.kind() {
                EntryKind::Directory => {
                    if let Some(child) = dir.open_dir(e).unwrap() {
                        stack.push(child);
                    }
                }
                EntryKind::File => {
                    if let Some((mut f, _)) = dir.open_file(e).unwrap() {
                        let mut s = String::new();
                        f.read_to_string(&mut s).unwrap();
                        found.push(s);
                    }
                }
                _ => {}
            }
        }
        if dir.is_beneath(root_id).unwrap() {
            out.extend(found);
        }
    }
}

/// The naive twin: a path walk that checks `symlink_metadata` before `read_dir`, as a careful
/// path-based walker does; the swap lands between the check and the use.
fn walk_naive(dir: &Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        out.insert(e.file_name().to_string_lossy().into_owned());
        let path = e.path();
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => walk_naive(&path, out),
            Ok(m) if m.is_file() => {
                if let Ok(s) = std::fs::read_to_string(&path) {
                    out.insert(s);
                }
            }
            _ => {}
        }
    }
}

fn leaked(seen: &BTreeSet<String>) -> bool {
    seen.contains(SECRET_NAME) || seen.contains(SECRET)
}

#[test]
fn walk_during_symlink_exchange_never_leaves_the_root() {
    let s = setup();
    let root = rustix::fs::open(&s.ws, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
    let root_id = FileId::of_fd(&root).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(&s.ws, stop.clone());
    let mut saw_inside = 0;
    for _ in 0..3000 {
        let mut seen = BTreeSet::new();
        walk_guarded(&root, root_id, &mut seen);
        assert!(!leaked(&seen), "outside reached: {seen:?}");
        saw_inside += usize::from(seen.contains("inside"));
    }
    stop.store(true, Ordering::Relaxed);
    let n = swaps.join().unwrap();
    assert!(n > 100, "the swapper ran only {n} exchanges");
    // The race was live: the walk did descend into the real directory.
    assert!(saw_inside > 0);
}

#[test]
fn naive_twin_walk_during_symlink_exchange_leaks() {
    let s = setup();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(&s.ws, stop.clone());
    let mut leaks = 0;
    for _ in 0..50_000 {
        let mut seen = BTreeSet::new();
        walk_naive(&s.ws, &mut seen);
        if leaked(&seen) {
            leaks += 1;
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swaps.join().unwrap();
    assert!(
        leaks > 0,
        "the naive path walk never leaked in 50,000 walks: the race test proves nothing here"
    );
}
