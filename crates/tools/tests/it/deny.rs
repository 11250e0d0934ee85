//! Denied paths through the Rust API: a set built with `ToolSetOptions::denied` refuses
//! what the list denies (the same set without it reads the secret), and a walk started through a symlink
//! swapped between an allowed and a denied directory never shows a denied name or byte (the
//! twin without the list does).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use confine_tools::{DeniedPaths, ToolRegistry, ToolSetOptions};
use serde_json::{Value, json};

use crate::{call, token};

const SECRET: &str = "denied-bytes";

fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join("secrets")).unwrap();
    std::fs::write(ws.join("secrets/key"), SECRET).unwrap();
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::write(ws.join("d/open"), "allowed bytes").unwrap();
    std::fs::write(ws.join(".env"), SECRET).unwrap();
    tmp
}

/// The read-only tools over `ws`, built with `list` as the set's denied paths when given.
fn read_tools(ws: &Path, list: Option<DeniedPaths>) -> ToolRegistry {
    let mut options = ToolSetOptions::default();
    if let Some(list) = list {
        options.denied = Arc::new(list);
    }
    let names = [
        "read_file",
        "read_lines",
        "file_info",
        "list_directory",
        "find_files",
        "grep",
    ];
    confine_tools::create_selected_tools(ws, options, &names).unwrap()
}

fn list() -> DeniedPaths {
    DeniedPaths::new(&["secrets/**", "**/.env"]).unwrap()
}

#[test]
fn a_set_built_with_denied_paths_refuses_and_the_set_without_reads() {
    let tmp = workspace();
    let calls: [(&str, Value); 6] = [
        ("read_file", json!({"path": ".env"})),
        ("read_lines", json!({"path": "secrets/key"})),
        ("file_info", json!({"path": "secrets/key"})),
        ("list_directory", json!({"path": "secrets"})),
        ("find_files", json!({"pattern": "*", "path": "secrets"})),
        ("grep", json!({"pattern": "denied", "path": "secrets"})),
    ];
    let guarded = read_tools(tmp.path(), Some(list()));
    let naive = read_tools(tmp.path(), None);
    for (name, args) in &calls {
        assert_eq!(
            token(&call(&guarded, name, args.clone())),
            "PATH_DENIED",
            "{name}"
        );
        let r = call(&naive, name, args.clone());
        assert!(!r.is_error, "{name}: {}", r.content);
    }
    let all = call(&naive, "grep", json!({"pattern": "denied"}));
    assert!(all.content.contains(SECRET));
    let some = call(&guarded, "grep", json!({"pattern": "bytes"}));
    assert!(!some.content.contains(SECRET), "{}", some.content);
    assert_eq!(some.record()["denied"], 2, "{}", some.content);
}

/// A write through a symlinked parent into a denied directory is refused by where the held
/// parent really stands (the factories' write tools, `deny` set through the options).
#[test]
fn a_write_through_a_symlinked_parent_into_a_denied_directory_is_refused() {
    let tmp = workspace();
    std::os::unix::fs::symlink("secrets", tmp.path().join("s")).unwrap();
    let mut options = ToolSetOptions::default();
    options.denied = Arc::new(list());
    let guarded = confine_tools::create_workspace_tools(tmp.path(), options).unwrap();
    for (name, args) in [
        ("write_file", json!({"path": "s/new", "content": "x"})),
        ("create_directory", json!({"path": "s/dir"})),
        ("delete_file", json!({"path": "s/key"})),
        (
            "move_file",
            json!({"source": "d/open", "destination": "s/open"}),
        ),
    ] {
        assert_eq!(
            token(&call(&guarded, name, args.clone())),
            "PATH_DENIED",
            "{name}"
        );
    }
    let names: Vec<_> = std::fs::read_dir(tmp.path().join("secrets"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["key"]);
    assert!(tmp.path().join("d/open").exists());
}

/// `link` swapped (atomically, by rename) between `d` and `secrets` while the walking tools
/// walk `link`, a bounded number of times: with the list no result names `key` or holds the
/// secret (the start is judged where the opened directory really stands); without it some do.
#[test]
fn a_walk_through_a_swapped_symlink_never_shows_a_denied_directory() {
    let run = |list: Option<DeniedPaths>| -> usize {
        let tmp = workspace();
        let ws = tmp.path().to_path_buf();
        std::os::unix::fs::symlink("d", ws.join("link")).unwrap();
        let tools = read_tools(&ws, list);
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (ws, stop) = (ws.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) && i < 10_000_000 {
                    let target = if i.is_multiple_of(2) { "secrets" } else { "d" };
                    let tmp = ws.join(format!("link.{}", i % 2));
                    let _ = std::fs::remove_file(&tmp);
                    std::os::unix::fs::symlink(target, &tmp).unwrap();
                    std::fs::rename(&tmp, ws.join("link")).unwrap();
                    i += 1;
                }
            })
        };
        let mut leaks = 0;
        for i in 0..300 {
            let (name, args) = match i % 3 {
                0 => ("list_directory", json!({"path": "link"})),
                1 => ("find_files", json!({"pattern": "*", "path": "link"})),
                _ => ("grep", json!({"pattern": "bytes", "path": "link"})),
            };
            let r = call(&tools, name, args);
            if r.content.contains("key") || r.content.contains(SECRET) {
                leaks += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        leaks
    };
    assert_eq!(run(Some(list())), 0);
    assert!(run(None) > 0, "the twin never walked the denied directory");
}
