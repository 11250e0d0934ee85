//! Attacks on the file tools by a concurrent local process, each beside a naive twin that
//! works by path (std::fs) and shows the attack succeeds unguarded.
//!
//! The swapper thread exchanges, with `renameat2(RENAME_EXCHANGE)`, a real directory `d`
//! inside the workspace and a symlink `flip` (inside too) that points to the outside
//! directory: at every instant `d` is either the real directory or a symlink leading out.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use rustix::fs::{CWD, RenameFlags, renameat_with};
use serde_json::json;

use crate::{Sandbox, call};

/// Calls of the tool under attack; each of them races the swapper.
const ROUNDS: usize = 1_000;

struct Swapper {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<u64>>,
}

impl Swapper {
    /// Exchange `a` and `b` until stopped.
    fn start(a: PathBuf, b: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut swaps = 0;
            while !flag.load(Ordering::Relaxed) {
                renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).expect("exchange");
                swaps += 1;
            }
            swaps
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

/// The workspace with `d` (real, holding `victim`) and `flip` (a symlink to outside, whose
/// `victim` is the outside file to protect).
fn arena() -> Sandbox {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::create_dir(sb.root.join("d")).unwrap();
    std::fs::write(sb.root.join("d/victim"), "inside").unwrap();
    std::fs::write(sb.outside.join("victim"), "OUTSIDE").unwrap();
    std::os::unix::fs::symlink(&sb.outside, sb.root.join("flip")).unwrap();
    sb
}

/// Put the inside victim back in whichever of the two names is the real directory now,
/// through a descriptor of that directory (never by a path the swapper could turn outside).
fn restore_inside_victim(root: &Path) {
    use rustix::fs::{Mode, OFlags, openat};
    for name in ["d", "flip"] {
        let dir = openat(
            CWD,
            root.join(name),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        let Ok(dir) = dir else { continue };
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW;
        if let Ok(fd) = openat(
            &dir,
            "victim",
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        ) {
            let _ = rustix::io::write(&fd, b"inside");
        }
    }
}

fn outside_intact(sb: &Sandbox) -> bool {
    std::fs::read_to_string(sb.outside.join("victim")).is_ok_and(|s| s == "OUTSIDE")
        && std::fs::read_dir(&sb.outside).unwrap().count() == 2
}

/// A naive twin under the swap: `attempt(round)` by path, the inside victim put back after
/// each, until `escaped` sees the attack happen (true) or the rounds run out (false).
fn naive_twin_escapes(
    sb: &Sandbox,
    escaped: impl Fn(&Sandbox) -> bool,
    mut attempt: impl FnMut(usize),
) -> bool {
    let swapper = Swapper::start(sb.root.join("d"), sb.root.join("flip"));
    let mut seen = false;
    for round in 0..ROUNDS * 50 {
        attempt(round);
        if escaped(sb) {
            seen = true;
            break;
        }
        restore_inside_victim(&sb.root);
    }
    swapper.stop();
    seen
}

#[test]
fn delete_file_with_a_parent_swapped_for_an_outside_symlink_never_deletes_outside() {
    let sb = arena();
    let reg = confine_tools::create_selected_tools(&sb.root, Default::default(), &["delete_file"])
        .unwrap();
    let swapper = Swapper::start(sb.root.join("d"), sb.root.join("flip"));
    let mut deleted = 0;
    for _ in 0..ROUNDS {
        let r = call(&reg, "delete_file", json!({"path": "d/victim"}));
        if !r.is_error {
            deleted += 1;
        } else {
            let t = crate::token(&r);
            assert!(
                [
                    "PATH_OUTSIDE_WORKSPACE",
                    "FILE_NOT_FOUND",
                    "PATH_CHANGED_DURING_READ"
                ]
                .contains(&t.as_str()),
                "{t}"
            );
        }
        assert!(outside_intact(&sb), "the outside file was deleted");
        restore_inside_victim(&sb.root);
    }
    let swaps = swapper.stop();
    eprintln!("delete_file under swap: {deleted} of {ROUNDS} deleted inside, {swaps} swaps");
    assert!(
        swaps > 0 && deleted > 0,
        "the race ran ({swaps} swaps, {deleted} deletions)"
    );
}

#[test]
fn naive_delete_by_path_does_delete_outside_under_the_same_swap() {
    let sb = arena();
    let deleted_outside = |sb: &Sandbox| !sb.outside.join("victim").exists();
    let escaped = naive_twin_escapes(&sb, deleted_outside, |_| {
        let _ = std::fs::remove_file(sb.root.join("d/victim"));
    });
    assert!(
        escaped,
        "the naive twin should have deleted the outside file"
    );
}

#[test]
fn move_file_with_parents_swapped_for_an_outside_symlink_never_touches_outside() {
    let sb = arena();
    let reg =
        confine_tools::create_selected_tools(&sb.root, Default::default(), &["move_file"]).unwrap();
    std::fs::create_dir(sb.root.join("keep")).unwrap();
    let swapper = Swapper::start(sb.root.join("d"), sb.root.join("flip"));
    let mut moved = 0;
    for i in 0..ROUNDS {
        // Out of the swapped directory, and into it.
        let from = call(
            &reg,
            "move_file",
            json!({"source": "d/victim", "destination": format!("keep/v{i}")}),
        );
        std::fs::write(sb.root.join("keep/src"), "planted").unwrap();
        let into = call(
            &reg,
            "move_file",
            json!({"source": "keep/src", "destination": format!("d/planted{i}")}),
        );
        moved += usize::from(!from.is_error) + usize::from(!into.is_error);
        assert!(outside_intact(&sb), "the outside directory changed");
        restore_inside_victim(&sb.root);
    }
    let swaps = swapper.stop();
    eprintln!(
        "move_file under swap: {moved} moves of {} calls, {swaps} swaps",
        2 * ROUNDS
    );
    assert!(swaps > 0 && moved > 0, "the race ran");
    for e in std::fs::read_dir(sb.root.join("keep")).unwrap().flatten() {
        if e.file_name() != "src" {
            assert_eq!(
                std::fs::read_to_string(e.path()).unwrap(),
                "inside",
                "{:?}",
                e.file_name()
            );
        }
    }
}

#[test]
fn naive_move_by_path_does_touch_outside_under_the_same_swap() {
    let sb = arena();
    std::fs::create_dir(sb.root.join("keep")).unwrap();
    let changed_outside = |sb: &Sandbox| !outside_intact(sb);
    let escaped = naive_twin_escapes(&sb, changed_outside, |i| {
        let _ = std::fs::rename(sb.root.join("d/victim"), sb.root.join(format!("keep/v{i}")));
    });
    assert!(
        escaped,
        "the naive twin should have moved the outside file in"
    );
}

/// Every whole version the file may hold: `ext <k>` with `AAA` (the external writer's) or
/// with `BBB` (an edit of it).
fn whole(content: &str) -> Option<(&str, &str)> {
    let (head, tail) = content.split_once('\n')?;
    let ok = head.len() == 12 && head.starts_with("ext ") && (tail == "AAA\n" || tail == "BBB\n");
    ok.then_some((head, tail))
}

#[test]
fn edit_file_racing_an_external_writer_conflicts_or_applies_to_what_it_read() {
    let sb = Sandbox::disk("TOP SECRET");
    let path = sb.root.join("race.txt");
    std::fs::write(&path, "ext 00000000\nAAA\n").unwrap();
    let reg =
        confine_tools::create_selected_tools(&sb.root, Default::default(), &["edit_file"]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));

    // The external writer: opens the name and overwrites it in place with a whole version.
    let writer = {
        let (stop, path) = (stop.clone(), path.clone());
        std::thread::spawn(move || {
            use std::os::unix::fs::FileExt;
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                k += 1;
                if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) {
                    let _ = f.write_all_at(format!("ext {k:08}\nAAA\n").as_bytes(), 0);
                }
            }
            k
        })
    };
    // An observer: every content seen is a whole version.
    let observer = {
        let (stop, path) = (stop.clone(), path.clone());
        std::thread::spawn(move || {
            let mut torn = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(s) = std::fs::read_to_string(&path)
                    && whole(&s).is_none()
                {
                    torn.push(s);
                }
            }
            torn
        })
    };
    let (mut applied, mut conflicts) = (0, 0);
    for _ in 0..ROUNDS {
        let r = call(
            &reg,
            "edit_file",
            json!({"path": "race.txt", "edits": [{"oldText": "AAA", "newText": "BBB"}]}),
        );
        if r.is_error {
            let t = crate::token(&r);
            // The writer restores AAA only in place; an edit that reads our own BBB finds no AAA.
            assert!(
                ["EDIT_CONFLICT", "EDIT_TEXT_NOT_FOUND"].contains(&t.as_str()),
                "{t}"
            );
            conflicts += usize::from(t == "EDIT_CONFLICT");
            continue;
        }
        applied += 1;
        // The diff shows one whole version read, and the same version edited.
        let diff = r.record()["diff"].as_str().unwrap().to_owned();
        let context: Vec<&str> = diff.lines().filter(|l| l.starts_with(' ')).collect();
        assert_eq!(context.len(), 1, "{diff}");
        assert!(context[0].starts_with(" ext "), "{diff}");
        assert!(diff.contains("-AAA\n+BBB\n"), "{diff}");
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().unwrap();
    let torn = observer.join().unwrap();
    eprintln!(
        "edit_file racing a writer: {applied} applied, {conflicts} conflicts, {writes} external writes"
    );
    assert!(
        torn.is_empty(),
        "a mixed file was seen: {:?}",
        &torn[..torn.len().min(3)]
    );
    assert!(applied > 0 && writes > 0, "the race ran");
    sb.assert_no_leftovers();
}

#[test]
fn naive_in_place_edit_exposes_a_mixed_file_under_the_same_race() {
    let sb = Sandbox::disk("TOP SECRET");
    let path = sb.root.join("race.txt");
    std::fs::write(&path, "ext 00000000\nAAA\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let observer = {
        let (stop, path) = (stop.clone(), path.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(s) = std::fs::read_to_string(&path)
                    && whole(&s).is_none()
                {
                    return Some(s);
                }
            }
            None
        })
    };
    for _ in 0..ROUNDS * 50 {
        if observer.is_finished() {
            break;
        }
        // Read, replace, write back by path: truncation then write.
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::write(&path, text.replace("BBB", "AAA").replace("AAA", "BBB"));
    }
    stop.store(true, Ordering::Relaxed);
    let seen = observer.join().unwrap();
    assert!(
        seen.is_some(),
        "the naive twin should have shown a file that is no whole version"
    );
}
