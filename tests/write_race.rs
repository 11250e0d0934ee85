//! Racing writers with the name watched: an editor in another thread saving `tgt` by
//! temp-and-rename, as fast as it can, while `write_file tgt` runs 3,000 times, and a watcher
//! reading `tgt` all along. Neither writer ever leaves the name empty, so the watcher must
//! never find it missing, and every read must be one writer's whole content. A `write_file`
//! that lost the race reports `WRITE_TARGET_REPLACED` and removes nothing; no other outcome
//! is allowed. (Before the fix, the write removed "the installed entry that is not ours",
//! which is the editor's fresh file: the name went missing about once every two writes.)

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::json;
mod support;
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

#[test]
fn an_editor_saving_by_rename_races_write_file_and_the_name_is_never_missing() {
    let dirs = Sibling::fast("unused");
    let root = dirs.root.clone();
    std::fs::write(root.join("tgt"), content("editor", 0)).unwrap();
    let registry = tools::create_coding_tools(&root, tools::NodeProcessOptions::default())
        .expect("a registry");
    let rt = runtime();
    let stop = AtomicBool::new(false);
    let (missing, torn, reads, saves) = (
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
    );
    let (mut written, mut replaced) = (0u64, 0u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 1;
            while !stop.load(Ordering::Relaxed) {
                let tmp = root.join(".tgt.editor-save");
                std::fs::write(&tmp, content("editor", n)).unwrap();
                std::fs::rename(&tmp, root.join("tgt")).unwrap();
                saves.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                match std::fs::read(root.join("tgt")) {
                    Ok(bytes) if whole(&bytes) => {}
                    Ok(_) => {
                        torn.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        missing.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("{e}"),
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        });
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
        stop.store(true, Ordering::Relaxed);
    });
    let (missing, torn) = (missing.into_inner(), torn.into_inner());
    eprintln!(
        "3000 write_file calls ({written} committed, {replaced} WRITE_TARGET_REPLACED), {} editor saves, {} reads: {missing} missing, {torn} torn",
        saves.into_inner(),
        reads.into_inner()
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
