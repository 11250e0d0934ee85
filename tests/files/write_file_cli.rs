//! `write_file` across crates and through the built `confine call` binary. Each test is an
//! attack where it can be: symlinked targets and parents (beside a naive `std::fs::write` twin
//! that escapes), a component swapped between an inside and an outside directory while
//! thousands of writes run, a temporary substituted by an inotify watcher, two tool instances
//! writing one target, a writer process SIGKILLed mid-rewrite; plus every limit at N and N+1.
//! Every test ends by checking that no `.pify-` entry is left.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use confine_tools::{Tool, ToolCall, ToolRegistry, ToolResult, execute_tool_call};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;
use support::{Sibling, call_lines, confine, feed, kill_and_reap, pify_entries};

const MAX: usize = 65_536;

/// A fresh parent holding the workspace `ws` and its prefix-sharing sibling `ws-outside`
/// (which holds `secret.txt`), a registry with `write_file` and `read_file` over `ws`, and a
/// runtime to call it with.
struct Ws {
    dirs: Sibling,
    registry: ToolRegistry,
    rt: tokio::runtime::Runtime,
}

impl std::ops::Deref for Ws {
    type Target = Sibling;

    fn deref(&self) -> &Sibling {
        &self.dirs
    }
}

impl Ws {
    /// On the default temporary directory (a real disk here: fsync costs milliseconds).
    fn new() -> Self {
        Self::with(Sibling::disk("TOP SECRET"))
    }

    /// On tmpfs when there is one, for the tests that write thousands of times.
    fn fast() -> Self {
        Self::with(Sibling::fast("TOP SECRET"))
    }

    fn with(dirs: Sibling) -> Self {
        let registry = registry(&dirs.root);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Self { dirs, registry, rt }
    }

    fn call_raw(&self, name: &str, arguments: &str) -> ToolResult {
        let call = ToolCall::from_json("t", name, arguments.to_owned());
        self.rt
            .block_on(execute_tool_call(
                &self.registry,
                &call,
                &CancellationToken::new(),
            ))
            .expect("not cancelled")
    }

    fn write(&self, path: &str, content: &str) -> ToolResult {
        write_via(&self.registry, &self.rt, path, content)
    }

    /// The outside directory holds exactly the untouched secret.
    fn outside_intact(&self) {
        let names: Vec<String> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["secret.txt"], "something landed outside");
        let secret = std::fs::read_to_string(self.outside.join("secret.txt")).unwrap();
        assert_eq!(secret, "TOP SECRET");
    }

    /// No `.pify-` entry anywhere under the parent.
    fn assert_no_leftovers(&self) {
        let found = pify_entries(self.tmp.path());
        assert!(found.is_empty(), "leftovers: {found:?}");
    }
}

fn write_via(
    registry: &ToolRegistry,
    rt: &tokio::runtime::Runtime,
    path: &str,
    content: &str,
) -> ToolResult {
    let call = ToolCall::new(
        "w",
        "write_file",
        &json!({"path": path, "content": content}),
    );
    rt.block_on(execute_tool_call(
        registry,
        &call,
        &CancellationToken::new(),
    ))
    .expect("not cancelled")
}

fn registry(root: &Path) -> ToolRegistry {
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(confine_tools::create_write_tool(root).unwrap()),
        Arc::new(confine_tools::create_read_tool(root).unwrap()),
    ];
    ToolRegistry::new(tools).unwrap()
}

/// The error token of a result, or panic.
fn token(result: &ToolResult) -> String {
    assert!(result.is_error, "expected an error, got {}", result.content);
    result.record()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn code(result: &ToolResult) -> String {
    result.record()["error"]["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn ok(result: &ToolResult) -> Value {
    assert!(!result.is_error, "expected success, got {}", result.content);
    result.record()
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// Every entry beneath `dir` (relative path, and content for files), for before/after
/// comparisons.
fn tree(dir: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
                out.push((rel, None));
            } else if t.is_file() {
                out.push((rel, Some(std::fs::read(e.path()).unwrap())));
            } else {
                out.push((rel, None));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn write_creates_parents_and_returns_path_and_bytes() {
    let ws = Ws::new();
    let rec = ok(&ws.write("./a//b\\c.txt", "héllo"));
    assert_eq!(rec, json!({"path": "a/b/c.txt", "bytes": 6}));
    assert_eq!(std::fs::read_to_string(ws.p("a/b/c.txt")).unwrap(), "héllo");
    assert_eq!(mode(&ws.p("a/b/c.txt")), 0o644);
    assert!(ws.p("a/b").is_dir());
    // Replaced wholly, empty content included; NUL is text like any other.
    ok(&ws.write("a/b/c.txt", ""));
    assert_eq!(std::fs::read(ws.p("a/b/c.txt")).unwrap(), b"");
    ok(&ws.write("a/b/c.txt", "x\0y"));
    assert_eq!(std::fs::read(ws.p("a/b/c.txt")).unwrap(), b"x\0y");
    // read_file reads back what write_file wrote.
    let back = ws.call_raw("read_file", r#"{"path":"a/b/c.txt"}"#);
    assert_eq!(ok(&back)["content"], "x\0y");
    ws.outside_intact();
    ws.assert_no_leftovers();
}

#[test]
fn write_keeps_the_targets_mode() {
    let ws = Ws::new();
    for m in [0o600, 0o755, 0o640, 0o400] {
        std::fs::write(ws.p("m.sh"), "old").unwrap();
        std::fs::set_permissions(ws.p("m.sh"), std::fs::Permissions::from_mode(m)).unwrap();
        ok(&ws.write("m.sh", "new"));
        assert_eq!(mode(&ws.p("m.sh")), m);
        assert_eq!(std::fs::read_to_string(ws.p("m.sh")).unwrap(), "new");
        std::fs::remove_file(ws.p("m.sh")).unwrap();
    }
    ws.assert_no_leftovers();
}

/// Content size at N and N+1, counted in UTF-8 bytes (multi-byte characters included);
/// refusals happen before anything is created.
#[test]
fn write_content_limit_at_n_and_n_plus_one() {
    let ws = Ws::fast();
    let cases: Vec<(String, bool)> = vec![
        ("a".repeat(MAX), true),
        ("a".repeat(MAX + 1), false),
        (format!("{}a", "€".repeat(21_845)), true), // 65,535 + 1
        ("€".repeat(21_846), false),                // 65,538
        (format!("{}ab", "€".repeat(21_845)), false), // 65,537
        ("😀".repeat(16_384), true),                // 65,536
        (format!("{}a", "😀".repeat(16_384)), false), // 65,537
        ("é".repeat(32_768), true),                 // 65,536
        (format!("{}é", "é".repeat(32_768)), false), // 65,538
    ];
    for (i, (content, accepted)) in cases.iter().enumerate() {
        let path = format!("limit-{i}.txt");
        let result = ws.write(&path, content);
        if *accepted {
            assert_eq!(content.len(), MAX);
            assert_eq!(ok(&result)["bytes"], MAX);
            assert_eq!(std::fs::read_to_string(ws.p(&path)).unwrap(), *content);
        } else {
            assert!(content.len() > MAX);
            assert_eq!(code(&result), "TOOL_ARGUMENTS_INVALID");
            assert_eq!(token(&result), "FILE_TOO_LARGE");
            assert!(!ws.p(&path).exists());
        }
    }
    ws.assert_no_leftovers();
}

/// A 255-byte name (ASCII and multi-byte) is writable, twice (create, then replace: the
/// temporary's name is shortened to fit); 256 bytes is refused by the grammar.
#[test]
fn write_names_of_255_bytes_and_refuses_256() {
    let ws = Ws::fast();
    let multibyte = format!("{}x", "é".repeat(127));
    for name in ["n".repeat(255), multibyte, format!("d/{}", "q".repeat(255))] {
        ok(&ws.write(&name, "one"));
        ok(&ws.write(&name, "two"));
        assert_eq!(std::fs::read_to_string(ws.p(&name)).unwrap(), "two");
    }
    let before = tree(&ws.root);
    for name in ["n".repeat(256), format!("{}ab", "é".repeat(127))] {
        let result = ws.write(&name, "x");
        assert_eq!(token(&result), "INVALID_RELATIVE_PATH");
    }
    assert_eq!(tree(&ws.root), before);
    ws.assert_no_leftovers();
}

/// Shape, then grammar, then size, all before any effect.
#[test]
fn write_validation_order_and_shapes() {
    let ws = Ws::fast();
    let big = "a".repeat(MAX + 1);
    let cases: Vec<(String, &str)> = vec![
        ("null".into(), "INVALID_WRITE_INPUT"),
        ("[]".into(), "INVALID_WRITE_INPUT"),
        (r#"["a.txt","x"]"#.into(), "INVALID_WRITE_INPUT"),
        (r#""a.txt""#.into(), "INVALID_WRITE_INPUT"),
        (r#"{}"#.into(), "INVALID_WRITE_INPUT"),
        (r#"{"path":"a.txt"}"#.into(), "INVALID_WRITE_INPUT"),
        (r#"{"content":"x"}"#.into(), "INVALID_WRITE_INPUT"),
        (
            r#"{"path":"a.txt","content":"x","mode":"0777"}"#.into(),
            "INVALID_WRITE_INPUT",
        ),
        (
            r#"{"path":"a.txt","path":"b.txt","content":"x"}"#.into(),
            "INVALID_WRITE_INPUT",
        ),
        (
            r#"{"path":"a.txt","content":"x","content":"y"}"#.into(),
            "INVALID_WRITE_INPUT",
        ),
        (r#"{"path":5,"content":"x"}"#.into(), "INVALID_WRITE_INPUT"),
        (
            r#"{"path":"a.txt","content":null}"#.into(),
            "INVALID_WRITE_INPUT",
        ),
        (
            r#"{"path":"a.txt","content":["x"]}"#.into(),
            "INVALID_WRITE_INPUT",
        ),
        // The shape is judged before the size: an unknown field with huge content.
        (
            json!({"path": "a.txt", "content": big, "x": 1}).to_string(),
            "INVALID_WRITE_INPUT",
        ),
        // The grammar before the size.
        (
            json!({"path": "../a.txt", "content": big}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "", "content": "x"}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "/etc/passwd", "content": "x"}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "a\0b", "content": "x"}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "C:\\x", "content": "x"}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "a.txt:ads", "content": "x"}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "con.txt", "content": "x"}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "a/./../b", "content": "x"}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": ".", "content": "x"}).to_string(),
            "INVALID_RELATIVE_PATH",
        ),
        (
            json!({"path": "a.txt", "content": big}).to_string(),
            "FILE_TOO_LARGE",
        ),
    ];
    for (args, expected) in &cases {
        let result = ws.call_raw("write_file", args);
        assert_eq!(code(&result), "TOOL_ARGUMENTS_INVALID", "{args:.80}");
        assert_eq!(token(&result), *expected, "{args:.80}");
    }
    assert!(tree(&ws.root).is_empty(), "an effect before validation");
    ws.outside_intact();
    ws.assert_no_leftovers();
}

#[test]
fn write_through_a_non_directory_parent_fails() {
    let ws = Ws::fast();
    std::fs::write(ws.p("file"), "f").unwrap();
    testkit::fixture::mkfifo(&ws.p("fifo"));
    symlink("file", ws.p("file-link")).unwrap();
    symlink("nowhere", ws.p("dangling")).unwrap();
    let before = tree(&ws.root);
    for path in [
        "file/x.txt",
        "file/sub/x.txt",
        "fifo/x.txt",
        "file-link/x.txt",
        "dangling/x.txt",
    ] {
        let result = ws.write(path, "x");
        assert_eq!(token(&result), "WRITE_PARENT_NOT_DIRECTORY", "{path}");
    }
    assert_eq!(tree(&ws.root), before);
    assert!(
        !ws.p("nowhere").exists(),
        "created through a dangling symlink"
    );
    ws.assert_no_leftovers();
}

/// Symlinked parents that leave the root are refused at once and nothing is created out
/// there; the naive twin writes straight through them.
#[test]
fn write_symlinked_parent_leaving_root_is_refused_naive_write_escapes() {
    let ws = Ws::fast();
    symlink(&ws.outside, ws.p("abs-out")).unwrap();
    symlink("../ws-outside", ws.p("rel-out")).unwrap();
    std::fs::create_dir(ws.p("sub")).unwrap();
    symlink("../../ws-outside", ws.p("sub/up-out")).unwrap();
    symlink("../ws-outside/newdir", ws.p("dangling-out")).unwrap();
    // An absolute symlink is refused even when it points inside (cap-std's rule).
    symlink(ws.p("sub"), ws.p("abs-in")).unwrap();

    // The naive twin: std::fs follows the link out of the workspace.
    std::fs::write(ws.p("rel-out/naive.txt"), "escaped").unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.outside.join("naive.txt")).unwrap(),
        "escaped"
    );
    std::fs::remove_file(ws.outside.join("naive.txt")).unwrap();

    for path in [
        "abs-out/x.txt",
        "abs-out/new/x.txt",
        "rel-out/x.txt",
        "rel-out/secret.txt",
        "rel-out/new/deeper/x.txt",
        "sub/up-out/x.txt",
        "dangling-out/x.txt",
        "abs-in/x.txt",
    ] {
        let result = ws.write(path, "pwned");
        assert_eq!(token(&result), "PATH_OUTSIDE_WORKSPACE", "{path}");
    }
    ws.outside_intact();
    assert!(!ws.p("sub/x.txt").exists());
    ws.assert_no_leftovers();
}

/// A relative symlinked parent that stays inside is followed, as `read_file` follows it: the
/// file lands in the directory the link leads to, and missing directories are created there.
#[test]
fn write_symlinked_parent_inside_is_followed() {
    let ws = Ws::fast();
    std::fs::create_dir_all(ws.p("real/deep")).unwrap();
    symlink("real", ws.p("in-link")).unwrap();
    symlink("..", ws.p("real/deep/up-link")).unwrap();
    ok(&ws.write("in-link/x.txt", "one"));
    ok(&ws.write("in-link/new/y.txt", "two"));
    ok(&ws.write("real/deep/up-link/z.txt", "three"));
    assert_eq!(std::fs::read_to_string(ws.p("real/x.txt")).unwrap(), "one");
    assert_eq!(
        std::fs::read_to_string(ws.p("real/new/y.txt")).unwrap(),
        "two"
    );
    assert_eq!(
        std::fs::read_to_string(ws.p("real/z.txt")).unwrap(),
        "three"
    );
    assert!(
        std::fs::symlink_metadata(ws.p("in-link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    ws.outside_intact();
    ws.assert_no_leftovers();
}

/// A target that is a symlink is never written through: `PATH_OUTSIDE_WORKSPACE` when it
/// leads out, `WRITE_TARGET_SYMLINK` when it stays inside; the naive twin overwrites the
/// outside file.
#[test]
fn write_symlink_targets_are_refused_naive_write_follows() {
    let ws = Ws::fast();
    std::fs::write(ws.p("inside.txt"), "inside").unwrap();
    let cases = [
        (
            "abs-out",
            ws.outside.join("secret.txt"),
            "PATH_OUTSIDE_WORKSPACE",
        ),
        (
            "rel-out",
            "../ws-outside/secret.txt".into(),
            "PATH_OUTSIDE_WORKSPACE",
        ),
        (
            "dangling-out",
            "../ws-outside/new.txt".into(),
            "PATH_OUTSIDE_WORKSPACE",
        ),
        (
            "abs-dangling-out",
            ws.outside.join("new.txt"),
            "PATH_OUTSIDE_WORKSPACE",
        ),
        ("rel-in", "inside.txt".into(), "WRITE_TARGET_SYMLINK"),
        ("abs-in", ws.p("inside.txt"), "WRITE_TARGET_SYMLINK"),
        ("dangling-in", "nothing.txt".into(), "WRITE_TARGET_SYMLINK"),
        ("to-dir", ".".into(), "WRITE_TARGET_SYMLINK"),
    ];
    for (name, target, _) in &cases {
        symlink(target, ws.p(name)).unwrap();
    }

    // The naive twin, on a copy of the setup: it follows the link out.
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("victim.txt"), "TOP SECRET").unwrap();
    symlink(
        scratch.path().join("victim.txt"),
        scratch.path().join("link"),
    )
    .unwrap();
    std::fs::write(scratch.path().join("link"), "pwned").unwrap();
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("victim.txt")).unwrap(),
        "pwned"
    );

    let before = tree(&ws.root);
    for (name, _, expected) in &cases {
        let result = ws.write(name, "pwned");
        assert_eq!(code(&result), "TOOL_EXECUTION_FAILED");
        assert_eq!(token(&result), *expected, "{name}");
    }
    assert_eq!(tree(&ws.root), before);
    assert!(!ws.p("nothing.txt").exists());
    ws.outside_intact();
    ws.assert_no_leftovers();
}

#[test]
fn write_non_regular_targets_are_refused_and_kept() {
    let ws = Ws::fast();
    std::fs::create_dir(ws.p("dir")).unwrap();
    std::fs::write(ws.p("dir/keep.txt"), "keep").unwrap();
    testkit::fixture::mkfifo(&ws.p("fifo"));
    let _socket = std::os::unix::net::UnixListener::bind(ws.p("sock")).unwrap();
    let before = tree(&ws.root);
    for path in ["dir", "fifo", "sock", "dir/"] {
        let result = ws.write(path, "x");
        assert_eq!(token(&result), "WRITE_TARGET_NOT_REGULAR", "{path}");
    }
    assert_eq!(tree(&ws.root), before);
    ws.assert_no_leftovers();
}

#[test]
fn write_after_root_replaced_fails_root_changed() {
    let ws = Ws::fast();
    let moved = ws.root.with_file_name("ws-moved");
    std::fs::rename(&ws.root, &moved).unwrap();
    std::fs::create_dir(&ws.root).unwrap();
    let result = ws.write("x.txt", "x");
    assert_eq!(token(&result), "WORKSPACE_ROOT_CHANGED");
    assert!(tree(&ws.root).is_empty());
    assert!(tree(&moved).is_empty());
    ws.assert_no_leftovers();
}

#[test]
fn write_cancelled_is_a_rejection_and_writes_nothing() {
    let ws = Ws::fast();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let tool = confine_tools::create_write_tool(&ws.root).unwrap();
    let args = serde_json::value::RawValue::from_string(
        json!({"path": "a/b.txt", "content": "x"}).to_string(),
    )
    .unwrap();
    let outcome = ws.rt.block_on(tool.execute(&args, &cancel));
    assert_eq!(
        outcome.unwrap_err(),
        confine_tools::CallError::Cancelled(confine_tools::Cancelled)
    );
    let call = ToolCall::new("c", "write_file", &json!({"path": "b.txt", "content": "x"}));
    let outcome = ws
        .rt
        .block_on(execute_tool_call(&ws.registry, &call, &cancel));
    assert_eq!(outcome.unwrap_err(), confine_tools::Cancelled);
    assert!(tree(&ws.root).is_empty());
    ws.assert_no_leftovers();
}

#[test]
fn write_error_records_hold_no_host_path() {
    let ws = Ws::fast();
    symlink(&ws.outside, ws.p("out")).unwrap();
    std::fs::write(ws.p("f"), "f").unwrap();
    let host = ws.tmp.path().canonicalize().unwrap().display().to_string();
    for path in ["out/x", "f/x", "out"] {
        let result = ws.write(path, "x");
        assert!(result.is_error);
        assert!(!result.content.contains(&host), "{}", result.content);
        let rec = result.record();
        assert_eq!(rec["error"].as_object().unwrap().len(), 2);
    }
    ws.assert_no_leftovers();
}

/// Two tool instances (two captures of one workspace, on two threads) write 64 KiB contents to
/// one target while a reader watches: every read and the final content are exactly one of the
/// contents, and no temporary is left.
#[test]
fn write_concurrent_64k_from_two_tool_instances() {
    let ws = Ws::fast();
    let contents = ["A".repeat(MAX), "B".repeat(MAX)];
    ok(&ws.write("shared/target.txt", &contents[0]));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = contents
            .iter()
            .map(|content| {
                let root = ws.root.clone();
                s.spawn(move || {
                    // A tool instance of its own, over a capture of its own.
                    let registry = registry(&root);
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    for _ in 0..150 {
                        let result = write_via(&registry, &rt, "shared/target.txt", content);
                        assert_eq!(ok(&result)["bytes"], MAX);
                    }
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let got = std::fs::read_to_string(ws.p("shared/target.txt")).unwrap();
                assert!(contents.contains(&got), "torn read of {} bytes", got.len());
                reads += 1;
            }
            reads
        });
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    let end = std::fs::read_to_string(ws.p("shared/target.txt")).unwrap();
    assert!(contents.contains(&end));
    assert_eq!(std::fs::read_dir(ws.p("shared")).unwrap().count(), 1);
    ws.assert_no_leftovers();
}

/// An attacker watching the directory with inotify replaces each temporary the moment it
/// appears, with a regular file, a symlink to the outside secret or a directory (our file
/// moved aside). The write then fails with `WRITE_TEMP_IDENTITY_CHANGED` (or succeeds when the
/// attacker came too late); the outside is never written, the attacker's directory is never
/// removed, and the target holds the attacker's object only when the substitution landed in
/// the instant between the last look at the temporary and the rename: the write then fails
/// with `WRITE_TARGET_REPLACED` (never a success), as when the attacker renames its object
/// over the target itself, which it may (rare: counted and printed).
#[test]
fn write_temp_substituted_via_inotify_never_commits_attacker() {
    let ws = Ws::new(); // a real disk: the fsync window is wide, the attacker wins
    let dir = ws.p("d");
    std::fs::create_dir(&dir).unwrap();
    let mut inotify = inotify::Inotify::init().unwrap();
    inotify
        .watches()
        .add(&dir, inotify::WatchMask::CREATE)
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<(usize, PathBuf)>();
    let stop = Arc::new(AtomicBool::new(false));
    let (attack_dir, outside, stop_flag) = (dir.clone(), ws.outside.clone(), stop.clone());
    let attacker = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut n = 0usize;
        // The attacker's own plants raise events too; it reacts to each name once.
        let mut seen = std::collections::HashSet::new();
        while !stop_flag.load(Ordering::Relaxed) {
            let Ok(events) = inotify.read_events_blocking(&mut buf) else {
                break;
            };
            for event in events {
                let Some(name) = event.name else { continue };
                if !name.to_string_lossy().contains(".pify-tmp-") || !seen.insert(name.to_owned()) {
                    continue;
                }
                let at = attack_dir.join(name);
                let kind = n % 3;
                let _ = std::fs::rename(&at, attack_dir.join(format!("stolen-{n}")));
                let _ = match kind {
                    0 => std::fs::write(&at, "ATTACKER"),
                    1 => symlink(outside.join("secret.txt"), &at),
                    _ => std::fs::create_dir(&at)
                        .and_then(|()| std::fs::write(at.join("attacker.txt"), "mine")),
                };
                let _ = tx.send((kind, at));
                n += 1;
            }
        }
    });
    let (mut changed, mut late) = (0, 0);
    for i in 0..12 {
        let target = format!("d/t{}.txt", i % 3);
        let existed = ws.p(&target).exists();
        let old = std::fs::read(ws.p(&target)).ok();
        let content = format!("{i}").repeat(MAX / 2);
        let result = ws.write(&target, &content);
        let (kind, planted) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
        if result.is_error {
            // The substitution is caught at the temporary (its identity changed) or, when the
            // attacker's rename lands on the target between the check and the commit, at the
            // target; both refuse, and the target is checked below either way.
            assert!(
                ["WRITE_TEMP_IDENTITY_CHANGED", "WRITE_TARGET_REPLACED"]
                    .contains(&token(&result).as_str()),
                "{}",
                token(&result)
            );
            changed += 1;
        }
        // The target is never the attacker's file or symlink: it is the old content (refused
        // before the rename), ours (the attacker came too late), or absent (a swap between
        // the check and the rename, detected and removed after it).
        let now = std::fs::symlink_metadata(ws.p(&target));
        match now {
            Ok(m) if m.is_file() => {
                let got = std::fs::read(ws.p(&target)).unwrap();
                if result.is_error && got == b"ATTACKER" && kind == 0 {
                    assert_eq!(token(&result), "WRITE_TARGET_REPLACED");
                    std::fs::remove_file(ws.p(&target)).unwrap();
                    late += 1;
                } else if result.is_error {
                    assert_eq!(Some(got), old, "target changed by a failed write");
                } else {
                    assert_eq!(got, content.as_bytes());
                }
            }
            Ok(m) if m.is_dir() => {
                // The rare late swap of a directory over a missing target: left in place.
                assert!(result.is_error && !existed && kind == 2);
                std::fs::rename(ws.p(&target), &planted).unwrap();
            }
            Ok(_) => {
                assert!(
                    result.is_error && kind == 1,
                    "the target became the attacker's symlink"
                );
                assert_eq!(token(&result), "WRITE_TARGET_REPLACED");
                std::fs::remove_file(ws.p(&target)).unwrap();
                late += 1;
            }
            Err(_) => assert!(result.is_error),
        }
        // The attacker's object is where it was put, untouched.
        if std::fs::symlink_metadata(&planted).is_ok() {
            match kind {
                0 => {
                    assert_eq!(std::fs::read_to_string(&planted).unwrap(), "ATTACKER");
                    std::fs::remove_file(&planted).unwrap();
                }
                1 => {
                    assert!(std::fs::symlink_metadata(&planted).unwrap().is_symlink());
                    std::fs::remove_file(&planted).unwrap();
                }
                _ => {
                    let kept = std::fs::read_to_string(planted.join("attacker.txt")).unwrap();
                    assert_eq!(kept, "mine");
                    std::fs::remove_dir_all(&planted).unwrap();
                }
            }
        } else {
            // Only a late swap installs the plant at the target, where it was removed.
            assert!(result.is_error && kind != 2);
        }
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("stolen-") {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        ws.outside_intact();
    }
    assert!(changed > 0, "the attacker never won a race");
    eprintln!("{changed} writes refused, {late} substitutions in the instant before the rename");
    stop.store(true, Ordering::Relaxed);
    // Wake the attacker's blocking read so that it sees the stop flag.
    std::fs::write(dir.join("wake"), "").unwrap();
    attacker.join().unwrap();
    ws.assert_no_leftovers();
}

/// A thread swaps `d` between a real directory inside and a symlink to the outside directory
/// (renameat2 RENAME_EXCHANGE) while thousands of writes go to `d/...` (new files, new
/// subdirectories, replacements). Not one byte lands outside. The naive twin, under the same
/// swap, escapes.
#[test]
fn write_symlink_swap_race_never_lands_outside() {
    let ws = Ws::fast();
    std::fs::create_dir(ws.p("d")).unwrap();
    symlink(&ws.outside, ws.p("swap")).unwrap();
    let root_dir = std::fs::File::open(&ws.root).unwrap();
    let stop = AtomicBool::new(false);
    let (mut written, mut refused) = (0u32, 0u32);
    let mut naive_escapes = 0u32;
    std::thread::scope(|s| {
        let swapper = s.spawn(|| {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    &root_dir,
                    "d",
                    &root_dir,
                    "swap",
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps += 1;
            }
            swaps
        });
        for i in 0..3000 {
            let path = match i % 3 {
                0 => format!("d/f{}.txt", i % 40),
                1 => format!("d/sub{}/g.txt", i % 9),
                _ => "d/same.txt".to_owned(),
            };
            let result = ws.write(&path, "inside-only");
            if result.is_error {
                let t = token(&result);
                assert!(
                    [
                        "PATH_OUTSIDE_WORKSPACE",
                        "WRITE_PARENT_NOT_DIRECTORY",
                        "WRITE_FAILED"
                    ]
                    .contains(&t.as_str()),
                    "{t}"
                );
                refused += 1;
            } else {
                written += 1;
            }
        }
        // The naive twin under the same swap: std::fs follows whatever `d` is now.
        for i in 0..2000 {
            if std::fs::write(ws.p(&format!("d/naive{i}.txt")), "escaped").is_ok()
                && ws.outside.join(format!("naive{i}.txt")).exists()
            {
                naive_escapes += 1;
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(swapper.join().unwrap() > 0);
    });
    assert!(
        written > 0 && refused > 0,
        "written {written}, refused {refused}"
    );
    assert!(naive_escapes > 0, "the naive twin never escaped");
    for e in std::fs::read_dir(&ws.outside).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("naive") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    ws.outside_intact();
    ws.assert_no_leftovers();
}

/// A tiny deterministic generator for kill delays (no dependency needed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

/// `confine call` rewriting one file with large contents is SIGKILLed at a random moment, 200
/// times: the target is always wholly one of the contents (old or new), never torn. A killed
/// writer can leave its temporary behind (nothing can remove it); such leftovers are counted,
/// checked to be ours (name and mode), and removed.
#[test]
fn write_sigkill_mid_rewrite_never_tears() {
    let ws = Ws::new();
    // Contents of different lengths, so a torn mix would show.
    let versions: Vec<String> = (0..4)
        .map(|v| {
            let ch = char::from(b'a' + v as u8);
            ch.to_string().repeat(MAX - 1000 * v)
        })
        .collect();
    ok(&ws.write("victim.txt", &versions[0]));
    let lines: String = (0..8)
        .map(|i| {
            let v = &versions[1 + i % 3];
            let call = json!({"id": i, "name": "write_file",
                "arguments": {"path": "victim.txt", "content": v}});
            format!("{call}\n")
        })
        .collect();
    let mut rng = Lcg(0x5eed_cafe);
    let mut leftovers = 0;
    for _ in 0..200 {
        let mut child: Child = confine()
            .args(["call", "--root"])
            .arg(&ws.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let feeder = feed(&mut child, lines.clone());
        std::thread::sleep(Duration::from_micros(rng.next() % 40_000));
        kill_and_reap(child, feeder);
        let got = std::fs::read_to_string(ws.p("victim.txt")).unwrap();
        assert!(versions.contains(&got), "torn target: {} bytes", got.len());
        for temp in pify_entries(&ws.root) {
            let name = temp.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.starts_with(".victim.txt.pify-tmp-"), "{name}");
            // 0600 until step 4 gives it the target's final mode (0644 here) just before the
            // rename; a kill can land on either side of that.
            assert!([0o600, 0o644].contains(&mode(&temp)), "{:o}", mode(&temp));
            std::fs::remove_file(&temp).unwrap();
            leftovers += 1;
        }
    }
    // Only our one target (and any temporaries just removed) were ever there.
    assert_eq!(std::fs::read_dir(&ws.root).unwrap().count(), 1);
    eprintln!("temporaries left by killed writers: {leftovers}");
    assert!(leftovers > 0, "no kill ever landed mid-rewrite");
    ws.outside_intact();
    ws.assert_no_leftovers();
}

/// Through the built binary: writes, refusals by token, and the tree afterwards.
#[test]
fn write_through_confine_call_binary() {
    let ws = Ws::fast();
    symlink(&ws.outside, ws.p("out")).unwrap();
    let input = [
        json!({"id": 1, "name": "write_file", "arguments": {"path": "a/b.txt", "content": "hi"}}),
        json!({"id": 2, "name": "write_file", "arguments": {"path": "out/x.txt", "content": "x"}}),
        json!({"id": 3, "name": "write_file", "arguments": {"path": "../x", "content": "x"}}),
        json!({"id": 4, "name": "write_file", "arguments": {"path": "a", "content": "x"}}),
        json!({"id": 5, "name": "read_file", "arguments": {"path": "a/b.txt"}}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect::<String>();
    let lines = call_lines(&ws.root, &[], &input);
    assert_eq!(lines.len(), 5);
    assert_eq!(
        lines[0],
        json!({"id": 1, "isError": false, "content": {"path": "a/b.txt", "bytes": 2}})
    );
    let msg = |i: usize| lines[i]["content"]["error"]["message"].clone();
    assert_eq!(msg(1), "PATH_OUTSIDE_WORKSPACE");
    assert_eq!(msg(2), "INVALID_RELATIVE_PATH");
    assert_eq!(msg(3), "WRITE_TARGET_NOT_REGULAR");
    assert_eq!(lines[4]["content"]["content"], "hi");
    ws.outside_intact();
    ws.assert_no_leftovers();
}
