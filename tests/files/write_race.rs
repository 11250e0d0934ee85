//! Racing writers with the name watched: an editor in another thread saving `tgt` by
//! temp-and-rename, as fast as it can, while `write_file tgt` runs 3,000 times, and a watcher
//! reading `tgt` all along. Neither writer ever leaves the name empty, so the watcher must
//! never find it missing, and every read must be one writer's whole content. A `write_file`
//! that lost the race reports `WRITE_TARGET_REPLACED` and removes nothing; no other outcome
//! is allowed. (Before the fix, the write removed "the installed entry that is not ours",
//! which is the editor's fresh file: the name went missing about once every two writes.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::support;
use serde_json::json;
use support::{Sibling, call_on, pify_entries, runtime};

/// A self-checking content: `who:n:len\n` then `x` up to `len` bytes.
fn content(who: &str, n: u64) -> String {
    let len = 64 + (n as usize * 37) % 4000;
    let mut text = format!("{who}:{n}:{len}\n");
    text.extend(std::iter::repeat_n('x', len - text.len()));
    text
}

/// Whether `bytes` is one writer's whole content.
fn whole(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let Some((head, rest)) = text.split_once('\n') else {
        return false;
    };
    let mut parts = head.split(':');
    let (Some(who), Some(_), Some(len)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    (who == "tool" || who == "editor")
        && len.parse::<usize>() == Ok(text.len())
        && rest.bytes().all(|b| b == b'x')
}

/// The editor and the watcher of a race, and what they counted.
#[derive(Default)]
struct Race {
    stop: AtomicBool,
    missing: AtomicU64,
    torn: AtomicU64,
    reads: AtomicU64,
    saves: AtomicU64,
}

impl Race {
    /// In scope `s`, until `stop`: the editor saving `root/tgt` by temp-and-rename as fast as
    /// it can, and the watcher reading `tgt`, counting reads that find it missing or that
    /// `valid` refuses.
    fn start<'scope, 'env>(
        &'env self,
        s: &'scope std::thread::Scope<'scope, 'env>,
        root: &'env std::path::Path,
        valid: fn(&[u8]) -> bool,
    ) {
        s.spawn(move || {
            let mut n = 1;
            while !self.stop.load(Ordering::Relaxed) {
                let tmp = root.join(".tgt.editor-save");
                std::fs::write(&tmp, content("editor", n)).unwrap();
                std::fs::rename(&tmp, root.join("tgt")).unwrap();
                self.saves.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        });
        s.spawn(move || {
            while !self.stop.load(Ordering::Relaxed) {
                match std::fs::read(root.join("tgt")) {
                    Ok(bytes) if valid(&bytes) => {}
                    Ok(_) => {
                        self.torn.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        self.missing.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("{e}"),
                }
                self.reads.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    /// Missing reads, torn reads, editor saves, reads.
    fn counts(&self) -> (u64, u64, u64, u64) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (
            get(&self.missing),
            get(&self.torn),
            get(&self.saves),
            get(&self.reads),
        )
    }
}

#[test]
fn an_editor_saving_by_rename_races_write_file_and_the_name_is_never_missing() {
    let dirs = Sibling::fast("unused");
    let root = dirs.root.clone();
    std::fs::write(root.join("tgt"), content("editor", 0)).unwrap();
    let registry =
        confine_tools::create_coding_tools(&root, confine_tools::ToolSetOptions::default())
            .expect("a registry");
    let rt = runtime();
    let race = Race::default();
    let (mut written, mut replaced) = (0u64, 0u64);
    std::thread::scope(|s| {
        race.start(s, &root, whole);
        for n in 0..3000 {
            let arguments = json!({"path": "tgt", "content": content("tool", n)});
            let result = call_on(&rt, &registry, "write_file", &arguments);
            if result.is_error {
                assert_eq!(
                    result.record()["error"]["message"],
                    "WRITE_TARGET_REPLACED",
                    "{}",
                    result.content
                );
                replaced += 1;
            } else {
                written += 1;
            }
        }
        race.stop.store(true, Ordering::Relaxed);
    });
    let (missing, torn, saves, reads) = race.counts();
    eprintln!(
        "3000 write_file calls ({written} committed, {replaced} WRITE_TARGET_REPLACED), {saves} editor saves, {reads} reads: {missing} missing, {torn} torn",
    );
    assert_eq!(missing, 0, "the name was seen missing");
    assert_eq!(torn, 0, "a read saw no writer's whole content");
    assert!(whole(&std::fs::read(root.join("tgt")).unwrap()));
    assert!(
        pify_entries(&dirs.base).is_empty(),
        "{:?}",
        pify_entries(&dirs.base)
    );
}

/// Sets the flag when dropped, so the threads of a scope stop when the main loop panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// [`whole`], or an edit of one: `edit_file` flips the byte after the header between `x`
/// and `y` (same length), so an edited content is `who:n:len\n` then `y` or `x`, then `x`s.
fn whole_or_edited(bytes: &[u8]) -> Option<(String, u64)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (head, rest) = text.split_once('\n')?;
    let mut parts = head.split(':');
    let (who, n, len) = (parts.next()?, parts.next()?, parts.next()?);
    let n = n.parse().ok()?;
    let rest = rest.strip_prefix('y').unwrap_or(rest);
    ((who == "tool" || who == "editor")
        && len.parse::<usize>() == Ok(text.len())
        && rest.bytes().all(|b| b == b'x'))
    .then(|| (who.to_owned(), n))
}

/// Iteration `n`'s edit: flip the first byte after the header, `x` to `y` on even turns and
/// back on odd ones (the other turn finds nothing: `EDIT_TEXT_NOT_FOUND`).
fn flip(n: u64) -> serde_json::Value {
    let (old, new) = if n.is_multiple_of(2) {
        ("\nx", "\ny")
    } else {
        ("\ny", "\nx")
    };
    json!({"path": "tgt", "edits": [{"oldText": old, "newText": new}]})
}

/// The same race with `edit_file` in it: the editor saves by temp-and-rename in a loop while
/// `edit_file` and `write_file` alternate 3,000 times, and the watcher reads the name all
/// along. The name is never missing and always holds one writer's whole content or an edit of
/// one; an edit either commits or fails with `EDIT_CONFLICT`, `WRITE_TARGET_REPLACED` or
/// `EDIT_TEXT_NOT_FOUND` (the flip it tries was already made), nothing else.
#[test]
fn an_editor_saving_by_rename_races_edit_file_and_the_name_is_never_missing() {
    let dirs = Sibling::fast("unused");
    let root = dirs.root.clone();
    std::fs::write(root.join("tgt"), content("editor", 0)).unwrap();
    let registry =
        confine_tools::create_workspace_tools(&root, confine_tools::ToolSetOptions::default())
            .expect("a registry");
    let rt = runtime();
    let race = Race::default();
    let mut outcomes = std::collections::BTreeMap::<String, u64>::new();
    std::thread::scope(|s| {
        race.start(s, &root, |bytes| whole_or_edited(bytes).is_some());
        // Should a call's check fail, the other threads still stop.
        let _stop = StopOnDrop(&race.stop);
        for n in 0..3000u64 {
            let (tool, arguments) = if n % 3 == 2 {
                let content = content("tool", n);
                ("write_file", json!({"path": "tgt", "content": content}))
            } else {
                ("edit_file", flip(n / 3 + n % 3))
            };
            let result = call_on(&rt, &registry, tool, &arguments);
            let outcome = if result.is_error {
                result.record()["error"]["message"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            } else {
                "ok".to_owned()
            };
            let allowed: &[&str] = if tool == "edit_file" {
                &[
                    "ok",
                    "EDIT_CONFLICT",
                    "WRITE_TARGET_REPLACED",
                    "EDIT_TEXT_NOT_FOUND",
                ]
            } else {
                &["ok", "WRITE_TARGET_REPLACED"]
            };
            assert!(
                allowed.contains(&outcome.as_str()),
                "{}: {}",
                tool,
                result.content
            );
            *outcomes.entry(format!("{tool} {outcome}")).or_default() += 1;
        }
        race.stop.store(true, Ordering::Relaxed);
    });
    let (missing, torn, saves, reads) = race.counts();
    eprintln!(
        "3000 calls {outcomes:?}, {saves} editor saves, {reads} reads: {missing} missing, {torn} torn",
    );
    assert!(outcomes.get("edit_file ok").is_some_and(|&n| n > 0));
    assert_eq!(missing, 0, "the name was seen missing");
    assert_eq!(torn, 0, "a read saw no writer's whole content");
    assert!(whole_or_edited(&std::fs::read(root.join("tgt")).unwrap()).is_some());
    assert!(
        pify_entries(&dirs.base).is_empty(),
        "{:?}",
        pify_entries(&dirs.base)
    );
}

/// Edit `n` of [`edit_file_never_commits_over_a_save_it_did_not_read`], made against `now`
/// (the file as just read): the mark after the header (`xxx`, or an earlier edit's) becomes `e`
/// and the turn's code. Each committed edit's content is thereby its own (codes repeat only
/// every 1,296 turns), so an edit seen displaced out of turn is known by its mark alone.
/// `None` where `now` already holds this turn's mark.
fn marking_edit(n: u64, now: &[u8]) -> Option<(serde_json::Value, String)> {
    let code = |n: u64| {
        let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let k = (n % 1296) as usize;
        format!("{}{}", digits[k / 36] as char, digits[k % 36] as char)
    };
    let (_, _, old) = whole_or_marked(now).expect("the editor's saves are whole");
    let mark = format!("e{}", code(n));
    (old != mark).then(|| {
        let edit = json!({"path": "tgt", "edits": [{"oldText": format!("\n{old}"), "newText": format!("\n{mark}")}]});
        (edit, mark)
    })
}

/// The writer and save of `bytes` (one writer's whole content, or that content with a mark of
/// [`marking_edit`] after its header), with the mark (`xxx` where none).
fn whole_or_marked(bytes: &[u8]) -> Option<(String, u64, String)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (head, rest) = text.split_once('\n')?;
    let mut parts = head.split(':');
    let (who, n, len) = (parts.next()?, parts.next()?, parts.next()?);
    let n = n.parse().ok()?;
    let mark = rest.get(..3)?;
    let marked = mark == "xxx"
        || (mark.starts_with(['e', 'o'])
            && mark[1..]
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
    (marked
        && (who == "tool" || who == "editor")
        && len.parse::<usize>() == Ok(text.len())
        && rest[3..].bytes().all(|b| b == b'x'))
    .then(|| (who.to_owned(), n, mark.to_owned()))
}

/// An edit replaces exactly the content it read, or nothing. The editor saves with
/// `renameat2(RENAME_EXCHANGE)`, so each save gets back the entry it displaced: with only
/// edits racing it, that entry must be the editor's previous save or an edit of that save.
/// An edit of an older save there means the edit was committed over a newer save it never
/// read, and that save was lost (a compare-and-swap that did not hold), unless that edit
/// reported `EDIT_CONFLICT` (the editor saw it in the instant before it was taken back). Each
/// edit leaves a mark of its own ([`marking_edit`]), so a displaced edit is matched to the one
/// call that made it. Run 3,000 edits. (Without edit_file's check of what its commit
/// displaced, each run of this test lost a save or more; an edit only checked before the
/// rename leaves that instant open.)
#[test]
fn edit_file_never_commits_over_a_save_it_did_not_read() {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    let dirs = Sibling::fast("unused");
    let root = dirs.root.clone();
    std::fs::write(root.join("tgt"), content("editor", 0)).unwrap();
    let registry =
        confine_tools::create_workspace_tools(&root, confine_tools::ToolSetOptions::default())
            .expect("a registry");
    let rt = runtime();
    let stop = AtomicBool::new(false);
    let saves = AtomicU64::new(0);
    // Edits the editor displaced although they were of an older save than its previous one:
    // the save they were of, and their mark.
    let suspects = std::sync::Mutex::new(Vec::<(u64, String)>::new());
    // The edits that reported success: the save they read, and their mark.
    let mut committed = std::collections::BTreeSet::<(u64, String)>::new();
    let mut outcomes = std::collections::BTreeMap::<String, u64>::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let (tmp, tgt) = (root.join(".tgt.editor-save"), root.join("tgt"));
            let mut n = 1;
            while !stop.load(Ordering::Relaxed) {
                std::fs::write(&tmp, content("editor", n)).unwrap();
                renameat_with(CWD, &tmp, CWD, &tgt, RenameFlags::EXCHANGE).unwrap();
                let displaced = std::fs::read(&tmp).unwrap();
                std::fs::remove_file(&tmp).unwrap();
                match whole_or_marked(&displaced) {
                    Some((who, m, _)) if who == "editor" && m == n - 1 => {}
                    Some((_, m, mark)) => suspects.lock().unwrap().push((m, mark)),
                    None => panic!("displaced a torn file"),
                }
                saves.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        });
        // Should a call's check fail, the other threads still stop.
        let _stop = StopOnDrop(&stop);
        for n in 0..3000u64 {
            let now = std::fs::read(root.join("tgt")).unwrap();
            let Some((edit, mark)) = marking_edit(n, &now) else {
                continue;
            };
            let result = call_on(&rt, &registry, "edit_file", &edit);
            let outcome = if result.is_error {
                result.record()["error"]["message"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            } else {
                // The diff's first context line is the header of the save that was read.
                let record = result.record();
                let diff = record["diff"].as_str().unwrap();
                let header = diff.lines().find(|l| l.starts_with(" editor:")).unwrap();
                let m = header.split(':').nth(1).unwrap().parse().unwrap();
                committed.insert((m, mark));
                "ok".to_owned()
            };
            *outcomes.entry(outcome).or_default() += 1;
        }
        stop.store(true, Ordering::Relaxed);
    });
    // A displaced edit that reported success is an edit committed over a newer save (that
    // save was lost); one that reported EDIT_CONFLICT was seen by the editor in the instant
    // before it was taken back, and lost nothing.
    let suspects = suspects.into_inner().unwrap();
    let lost = suspects.iter().filter(|k| committed.contains(k)).count();
    eprintln!(
        "3000 edits {outcomes:?}, {} editor saves: {} edits displaced out of turn, {lost} saves lost",
        saves.into_inner(),
        suspects.len()
    );
    for outcome in outcomes.keys() {
        assert!(
            [
                "ok",
                "EDIT_CONFLICT",
                "WRITE_TARGET_REPLACED",
                "EDIT_TEXT_NOT_FOUND"
            ]
            .contains(&outcome.as_str()),
            "{outcome}"
        );
    }
    assert!(outcomes.get("ok").is_some_and(|&n| n > 0));
    assert_eq!(lost, 0, "an edit was committed over a save it never read");
    assert!(pify_entries(&dirs.base).is_empty());
}
