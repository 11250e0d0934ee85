//! read_file: every token, limits at N and N+1, and escapes attempted as attacks.

use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use confine_tools::{Cancelled, ToolCall, execute_tool_call};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{Sandbox, call, token};

fn read(sb: &Sandbox, path: &str) -> confine_tools::ToolResult {
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    call(&registry, "read_file", json!({ "path": path }))
}

#[test]
fn read_returns_path_content_bytes() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::create_dir(sb.root.join("d")).unwrap();
    std::fs::write(sb.root.join("d/a.txt"), "héllo").unwrap();
    let r = read(&sb, "./d//a.txt");
    assert!(!r.is_error);
    assert_eq!(
        r.content,
        r#"{"path":"d/a.txt","content":"héllo","bytes":6}"#
    );
}

#[test]
fn read_size_limit_at_n_and_n_plus_one() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("n.txt"), "a".repeat(65_536)).unwrap();
    std::fs::write(sb.root.join("n1.txt"), "a".repeat(65_537)).unwrap();
    // 65,536 bytes ending in a 2-byte character, and one byte more.
    std::fs::write(sb.root.join("mb.txt"), format!("{}é", "a".repeat(65_534))).unwrap();
    std::fs::write(sb.root.join("mb1.txt"), format!("{}é", "a".repeat(65_535))).unwrap();
    let r = read(&sb, "n.txt");
    assert!(!r.is_error);
    assert_eq!(r.record()["bytes"], 65_536);
    assert_eq!(token(&read(&sb, "n1.txt")), "FILE_TOO_LARGE");
    assert_eq!(read(&sb, "mb.txt").record()["bytes"], 65_536);
    assert_eq!(token(&read(&sb, "mb1.txt")), "FILE_TOO_LARGE");
    assert_eq!(
        read(&sb, "n1.txt").record()["error"]["code"],
        "TOOL_EXECUTION_FAILED"
    );
}

#[test]
fn read_refuses_invalid_utf8() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("bin"), [0x66, 0x6f, 0xff, 0x6f]).unwrap();
    std::fs::write(sb.root.join("cut"), &"é".as_bytes()[..1]).unwrap();
    assert_eq!(token(&read(&sb, "bin")), "FILE_NOT_UTF8");
    assert_eq!(token(&read(&sb, "cut")), "FILE_NOT_UTF8");
}

#[test]
fn read_refuses_non_regular_without_blocking() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::create_dir(sb.root.join("dir")).unwrap();
    testkit::fixture::mkfifo(&sb.root.join("fifo"));
    let _sock = std::os::unix::net::UnixListener::bind(sb.root.join("sock")).unwrap();
    // A FIFO with no writer would block a plain open forever: run in a thread with a generous
    // bound so a regression fails instead of hanging.
    let root = sb.root.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let registry = confine_tools::create_read_only_tools(&root).unwrap();
        let got: Vec<String> = ["dir", "fifo", "sock"]
            .iter()
            .map(|p| token(&call(&registry, "read_file", json!({ "path": p }))))
            .collect();
        tx.send(got).unwrap();
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("read_file blocked");
    assert_eq!(got, ["FILE_NOT_REGULAR"; 3]);
}

#[test]
fn read_refuses_a_device_node() {
    let sb = Sandbox::disk("TOP SECRET");
    // The null device's numbers (1, 3); needs CAP_MKNOD, which the test machines have as root.
    match rustix::fs::mknodat(
        rustix::fs::CWD,
        sb.root.join("null"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(1, 3),
    ) {
        Ok(()) => assert_eq!(token(&read(&sb, "null")), "FILE_NOT_REGULAR"),
        Err(e) => eprintln!("skipping the device case: mknod refused ({e})"),
    }
}

#[test]
fn read_not_found_forms() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("file"), "x").unwrap();
    symlink("nowhere", sb.root.join("dangling")).unwrap();
    assert_eq!(token(&read(&sb, "missing")), "FILE_NOT_FOUND");
    assert_eq!(token(&read(&sb, "file/child")), "FILE_NOT_FOUND");
    assert_eq!(token(&read(&sb, "dangling")), "FILE_NOT_FOUND");
}

#[test]
fn read_refuses_symlinks_leaving_the_root_and_naive_read_escapes() {
    let sb = Sandbox::disk("TOP SECRET");
    symlink(sb.outside.join("secret.txt"), sb.root.join("abs")).unwrap();
    symlink("../ws-outside/secret.txt", sb.root.join("rel")).unwrap();
    symlink("../ws-outside", sb.root.join("dirlink")).unwrap();
    std::fs::create_dir(sb.root.join("d")).unwrap();
    symlink("../../ws-outside/secret.txt", sb.root.join("d/deep")).unwrap();
    for path in ["abs", "rel", "dirlink/secret.txt", "d/deep"] {
        // The naive twin: a plain read of the same joined path leaves the root.
        let naive = std::fs::read_to_string(sb.root.join(path)).unwrap();
        assert_eq!(
            naive, "TOP SECRET",
            "the naive read of {path} should escape"
        );
        let r = read(&sb, path);
        assert_eq!(token(&r), "PATH_OUTSIDE_WORKSPACE", "{path}");
        assert!(!r.content.contains("SECRET"));
    }
}

#[test]
fn read_refuses_absolute_symlink_even_inside() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("a.txt"), "a").unwrap();
    symlink(sb.root.join("a.txt"), sb.root.join("abs-in")).unwrap();
    symlink("a.txt", sb.root.join("rel-in")).unwrap();
    assert_eq!(token(&read(&sb, "abs-in")), "PATH_OUTSIDE_WORKSPACE");
    assert_eq!(read(&sb, "rel-in").record()["content"], "a");
}

#[test]
fn read_error_records_hold_no_host_path() {
    let sb = Sandbox::disk("TOP SECRET");
    symlink(sb.outside.join("secret.txt"), sb.root.join("abs")).unwrap();
    let host = sb.tmp.path().to_string_lossy().into_owned();
    for path in ["abs", "missing", "../x", "/etc/passwd"] {
        let r = read(&sb, path);
        assert!(r.is_error);
        assert!(!r.content.contains(&host), "{}", r.content);
        assert!(!r.content.contains("/tmp"), "{}", r.content);
    }
}

#[test]
fn read_after_root_replaced_fails_root_changed() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("a.txt"), "original").unwrap();
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    std::fs::rename(&sb.root, sb.tmp.path().join("moved")).unwrap();
    std::fs::create_dir(&sb.root).unwrap();
    std::fs::write(sb.root.join("a.txt"), "impostor").unwrap();
    let r = call(&registry, "read_file", json!({"path": "a.txt"}));
    assert_eq!(token(&r), "WORKSPACE_ROOT_CHANGED");
    assert!(!r.content.contains("impostor"));
}

#[test]
fn read_cancelled_before_is_a_rejection_not_a_record() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("a.txt"), "a").unwrap();
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let got = rt.block_on(execute_tool_call(
        &registry,
        &ToolCall::new("c", "read_file", &json!({"path": "a.txt"})),
        &cancel,
    ));
    assert_eq!(got, Err(Cancelled));
    // The tool itself checks too, for callers that skip the registry.
    let tool = confine_tools::create_read_tool(&sb.root).unwrap();
    let rel = confine_pathgrammar::normalize("a.txt").unwrap();
    assert!(matches!(
        tool.read(&rel, &cancel),
        Err(confine_tools::CallError::Cancelled(_))
    ));
}

/// A thread flips `link` between an inside file and the outside secret (atomic rename of a
/// fresh symlink over it) while thousands of reads run: not one returns the secret. The naive
/// twin, `std::fs::read` of the same path under the same race, does return it.
#[test]
fn read_symlink_swap_race_never_escapes() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("inside.txt"), "inside").unwrap();
    let link = sb.root.join("link");
    symlink("inside.txt", &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root, outside) = (stop.clone(), sb.root.clone(), sb.outside.clone());
        std::thread::spawn(move || {
            let mut flip = false;
            let staging = root.join("link.staging");
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&staging);
                if flip {
                    symlink("inside.txt", &staging).unwrap();
                } else {
                    symlink(outside.join("secret.txt"), &staging).unwrap();
                }
                std::fs::rename(&staging, root.join("link")).unwrap();
                flip = !flip;
            }
        })
    };
    let tool = confine_tools::create_read_tool(&sb.root).unwrap();
    let rel = confine_pathgrammar::normalize("link").unwrap();
    let cancel = CancellationToken::new();
    let (mut inside, mut refused, mut naive_escapes) = (0, 0, 0);
    // At least 3000 rounds, then on until each outcome has been seen (bounded at 25 times as
    // many): on a loaded machine the swapper can sleep through a whole short run.
    for round in 0..3000 * 25 {
        if round >= 3000 && inside > 0 && refused > 0 && naive_escapes > 0 {
            break;
        }
        match tool.read(&rel, &cancel) {
            Ok(out) => {
                assert_eq!(out.content, "inside", "a guarded read escaped");
                inside += 1;
            }
            Err(confine_tools::CallError::Failed(e)) => {
                let t = e.kind().unwrap().code();
                assert!(
                    matches!(
                        t,
                        "PATH_OUTSIDE_WORKSPACE" | "PATH_CHANGED_DURING_READ" | "FILE_NOT_FOUND"
                    ),
                    "{t}"
                );
                refused += 1;
            }
            Err(other) => panic!("{other:?}"),
        }
        if std::fs::read_to_string(&link).is_ok_and(|c| c == "TOP SECRET") {
            naive_escapes += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        inside > 0 && refused > 0,
        "the race did not run: {inside} {refused}"
    );
    assert!(
        naive_escapes > 0,
        "the naive twin should have escaped at least once"
    );
    sb.assert_no_leftovers();
}
