//! A directory exchanged with a symlink to outside (`renameat2(RENAME_EXCHANGE)` in a loop
//! from a thread) while `list_directory`, `find_files` and `grep` walk it thousands of times:
//! no outside name or byte ever appears. The twin, a `walkdir` walk (paths, `d_type`, then
//! open by name), reads the outside secret under the same swapper.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use confine_tools::{ToolCall, execute_tool_call};
use rustix::fs::{Mode, OFlags, RenameFlags};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::Sandbox;

/// `ws/d` (a directory holding `inside.txt`) and `ws/alt` (a symlink to the outside directory
/// holding `secret.txt`, "TOP SECRET"), exchanged until `stop`.
fn swapping(sb: &Sandbox, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::fs::create_dir(sb.root.join("d")).unwrap();
    std::fs::write(sb.root.join("d/inside.txt"), "inside SECRET-FREE\n").unwrap();
    std::fs::write(sb.outside.join("secret.txt"), "TOP SECRET\n").unwrap();
    std::os::unix::fs::symlink(&sb.outside, sb.root.join("alt")).unwrap();
    let dir = rustix::fs::open(&sb.root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            rustix::fs::renameat_with(&dir, "d", &dir, "alt", RenameFlags::EXCHANGE).unwrap();
            n += 1;
        }
        n
    })
}

#[test]
fn walks_during_symlink_exchange_never_reach_outside() {
    let sb = Sandbox::disk("TOP SECRET");
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapping(&sb, stop.clone());
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cancel = CancellationToken::new();
    let calls = [
        ("list_directory", json!({"path": "d"})),
        ("list_directory", json!({"path": "alt"})),
        ("find_files", json!({"pattern": "**"})),
        ("find_files", json!({"pattern": "**", "path": "d"})),
        ("grep", json!({"pattern": "SECRET"})),
        ("grep", json!({"pattern": "SECRET", "path": "d"})),
    ];
    let mut inside_seen = 0;
    for round in 0..600 {
        for (name, args) in &calls {
            let call = ToolCall::new(round.to_string(), *name, args);
            let r = rt
                .block_on(execute_tool_call(&registry, &call, &cancel))
                .unwrap();
            assert!(
                !r.content.contains("secret.txt") && !r.content.contains("TOP SECRET"),
                "{name} reached outside: {}",
                r.content
            );
            inside_seen += usize::from(r.content.contains("inside"));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let n = swaps.join().unwrap();
    assert!(n > 100, "the swapper ran only {n} exchanges");
    assert!(inside_seen > 0, "the walks never saw the real directory");
}

/// The naive twin: the same walk by path, as `walkdir` does it.
fn naive_walk(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        out.push(e.file_name().to_string_lossy().into_owned());
        if e.file_type().is_file()
            && let Ok(s) = std::fs::read_to_string(e.path())
        {
            out.push(s);
        }
    }
    out
}

#[test]
fn naive_twin_walkdir_during_symlink_exchange_reads_outside() {
    let sb = Sandbox::disk("TOP SECRET");
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapping(&sb, stop.clone());
    let mut leaked = false;
    for _ in 0..50_000 {
        let seen = naive_walk(&sb.root);
        if seen
            .iter()
            .any(|s| s == "secret.txt" || s.contains("TOP SECRET"))
        {
            leaked = true;
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swaps.join().unwrap();
    assert!(
        leaked,
        "walkdir never reached outside in 50,000 walks: the guarded test proves nothing here"
    );
}
