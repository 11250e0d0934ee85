//! The file tools through `execute_tool_call`: records, tokens, limits at N and N+1.

use std::os::unix::fs::{PermissionsExt, symlink};

use confine_tools::ToolRegistry;
use serde_json::{Value, json};

use crate::{Sandbox, call, token};

fn registry(sb: &Sandbox) -> ToolRegistry {
    confine_tools::create_selected_tools(
        &sb.root,
        Default::default(),
        &[
            "edit_file",
            "read_lines",
            "file_info",
            "create_directory",
            "move_file",
            "delete_file",
        ],
    )
    .unwrap()
}

fn ok(reg: &ToolRegistry, name: &str, args: Value) -> Value {
    let r = call(reg, name, args);
    assert!(!r.is_error, "{name}: {}", r.content);
    r.record()
}

fn read(sb: &Sandbox, rel: &str) -> String {
    std::fs::read_to_string(sb.root.join(rel)).unwrap()
}

// ---- edit_file

#[test]
fn edit_replaces_reports_a_diff_and_keeps_the_mode() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::set_permissions(
        sb.root.join("a.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let rec = ok(
        &reg,
        "edit_file",
        json!({"path": "./a.txt", "edits": [{"oldText": "two", "newText": "2"}]}),
    );
    assert_eq!(rec["path"], "a.txt");
    assert_eq!(rec["bytes"], 12);
    assert_eq!(rec["replacements"], 1);
    assert_eq!(
        rec["diff"],
        "--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
    );
    assert_eq!(read(&sb, "a.txt"), "one\n2\nthree\n");
    let mode = std::fs::metadata(sb.root.join("a.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    sb.assert_no_leftovers();
}

#[test]
fn edit_dry_run_writes_nothing() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("a.txt"), "alpha beta").unwrap();
    let before = std::fs::metadata(sb.root.join("a.txt")).unwrap();
    let rec = ok(
        &reg,
        "edit_file",
        json!({"path": "a.txt", "edits": [{"oldText": "beta", "newText": "gamma"}], "dryRun": true}),
    );
    assert!(rec["diff"].as_str().unwrap().contains("+alpha gamma"));
    assert_eq!(read(&sb, "a.txt"), "alpha beta");
    let after = std::fs::metadata(sb.root.join("a.txt")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(before.ino(), after.ino());
}

#[test]
fn edit_is_all_or_nothing_and_names_the_failing_edit() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("a.txt"), "x y x").unwrap();
    let r = call(
        &reg,
        "edit_file",
        json!({"path": "a.txt", "edits": [
            {"oldText": "y", "newText": "z"},
            {"oldText": "x", "newText": "w"}]}),
    );
    assert_eq!(
        r.record(),
        json!({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "EDIT_TEXT_NOT_UNIQUE", "edit": 1, "lines": [1, 1]}})
    );
    let r = call(
        &reg,
        "edit_file",
        json!({"path": "a.txt", "edits": [
            {"oldText": "y", "newText": "z"},
            {"oldText": "y", "newText": "q"}]}),
    );
    assert_eq!(token(&r), "EDIT_TEXT_NOT_FOUND");
    assert_eq!(r.record()["error"]["edit"], 1);
    assert_eq!(read(&sb, "a.txt"), "x y x");
    let rec = ok(
        &reg,
        "edit_file",
        json!({"path": "a.txt", "edits": [{"oldText": "x", "newText": "w", "replaceAll": true}]}),
    );
    assert_eq!(rec["replacements"], 2);
    assert_eq!(read(&sb, "a.txt"), "w y w");
}

#[test]
fn edit_keeps_crlf_and_bom_on_disk() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("w.txt"), "\u{feff}a\r\nb\r\n").unwrap();
    ok(
        &reg,
        "edit_file",
        json!({"path": "w.txt", "edits": [{"oldText": "a\nb", "newText": "a\nmid\nb"}]}),
    );
    assert_eq!(read(&sb, "w.txt"), "\u{feff}a\r\nmid\r\nb\r\n");
}

#[test]
fn edit_sizes_before_and_after_at_n_and_n_plus_one() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    let n = confine_tools::limits::MAX_EDIT_BYTES;
    // Before: a file of N bytes is edited, N + 1 is refused.
    std::fs::write(sb.root.join("n.txt"), format!("A{}", "x".repeat(n - 1))).unwrap();
    ok(
        &reg,
        "edit_file",
        json!({"path": "n.txt", "edits": [{"oldText": "A", "newText": "B"}]}),
    );
    std::fs::write(sb.root.join("n1.txt"), format!("A{}", "x".repeat(n))).unwrap();
    let r = call(
        &reg,
        "edit_file",
        json!({"path": "n1.txt", "edits": [{"oldText": "A", "newText": "B"}]}),
    );
    assert_eq!(token(&r), "FILE_TOO_LARGE");
    // After: growing to N is fine, to N + 1 refused and nothing written.
    std::fs::write(sb.root.join("g.txt"), "A").unwrap();
    ok(
        &reg,
        "edit_file",
        json!({"path": "g.txt", "edits": [{"oldText": "A", "newText": "y".repeat(n)}]}),
    );
    assert_eq!(read(&sb, "g.txt").len(), n);
    std::fs::write(sb.root.join("g.txt"), "AB").unwrap();
    let r = call(
        &reg,
        "edit_file",
        json!({"path": "g.txt", "edits": [{"oldText": "A", "newText": "y".repeat(n)}]}),
    );
    assert_eq!(token(&r), "FILE_TOO_LARGE");
    assert_eq!(read(&sb, "g.txt"), "AB");
    // A newText over N is refused at validation.
    let r = call(
        &reg,
        "edit_file",
        json!({"path": "g.txt", "edits": [{"oldText": "A", "newText": "y".repeat(n + 1)}]}),
    );
    assert_eq!(r.record()["error"]["code"], "TOOL_ARGUMENTS_INVALID");
    assert_eq!(token(&r), "FILE_TOO_LARGE");
}

#[test]
fn edit_refusals() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("a.txt"), "abc").unwrap();
    for args in [
        json!({"path": "a.txt", "edits": []}),
        json!({"path": "a.txt", "edits": [{"oldText": "", "newText": "x"}]}),
        json!({"path": "a.txt", "edits": [{"oldText": "a"}]}),
        json!({"path": "a.txt", "edits": [{"oldText": "a", "newText": "b", "extra": 1}]}),
        json!({"path": "a.txt", "edits": "a"}),
        json!({"path": "a.txt", "edits": [{"oldText": "a", "newText": "b"}], "dryRun": "yes"}),
    ] {
        let r = call(&reg, "edit_file", args.clone());
        assert_eq!(token(&r), "INVALID_EDIT_INPUT", "{args}");
    }
    let edit = |p: &str| json!({"path": p, "edits": [{"oldText": "a", "newText": "b"}]});
    assert_eq!(
        token(&call(&reg, "edit_file", edit("../a.txt"))),
        "INVALID_RELATIVE_PATH"
    );
    assert_eq!(
        token(&call(&reg, "edit_file", edit("missing/a.txt"))),
        "FILE_NOT_FOUND"
    );
    assert!(!sb.root.join("missing").exists(), "nothing is created");
    assert_eq!(
        token(&call(&reg, "edit_file", edit("none.txt"))),
        "FILE_NOT_FOUND"
    );
    std::fs::create_dir(sb.root.join("dir")).unwrap();
    assert_eq!(
        token(&call(&reg, "edit_file", edit("dir"))),
        "FILE_NOT_REGULAR"
    );
    std::fs::write(sb.root.join("bin.txt"), b"a\xff").unwrap();
    assert_eq!(
        token(&call(&reg, "edit_file", edit("bin.txt"))),
        "FILE_NOT_UTF8"
    );
    symlink("a.txt", sb.root.join("in-link")).unwrap();
    assert_eq!(
        token(&call(&reg, "edit_file", edit("in-link"))),
        "WRITE_TARGET_SYMLINK"
    );
    symlink(sb.outside.join("secret.txt"), sb.root.join("out-link")).unwrap();
    assert_eq!(
        token(&call(&reg, "edit_file", edit("out-link"))),
        "PATH_OUTSIDE_WORKSPACE"
    );
    symlink(&sb.outside, sb.root.join("out-dir")).unwrap();
    assert_eq!(
        token(&call(&reg, "edit_file", edit("out-dir/secret.txt"))),
        "PATH_OUTSIDE_WORKSPACE"
    );
    assert_eq!(
        std::fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
        "TOP SECRET"
    );
    assert_eq!(read(&sb, "a.txt"), "abc");
    sb.assert_no_leftovers();
}

// ---- read_lines

#[test]
fn read_lines_windows_and_truncation() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("l.txt"), "1\n2\r\n3\n4").unwrap();
    let rec = ok(&reg, "read_lines", json!({"path": "l.txt"}));
    assert_eq!(
        rec,
        json!({"path": "l.txt", "startLine": 1, "endLine": 4, "text": "1\n2\r\n3\n4", "truncated": false})
    );
    let rec = ok(
        &reg,
        "read_lines",
        json!({"path": "l.txt", "offset": 2, "limit": 2}),
    );
    assert_eq!(rec["text"], "2\r\n3\n");
    assert_eq!(
        (
            rec["startLine"].clone(),
            rec["endLine"].clone(),
            rec["truncated"].clone()
        ),
        (json!(2), json!(3), json!(true))
    );
    let rec = ok(&reg, "read_lines", json!({"path": "l.txt", "offset": 9}));
    assert_eq!(
        (
            rec["endLine"].clone(),
            rec["text"].clone(),
            rec["truncated"].clone()
        ),
        (json!(8), json!(""), json!(false))
    );
    std::fs::write(sb.root.join("empty.txt"), "").unwrap();
    let rec = ok(&reg, "read_lines", json!({"path": "empty.txt"}));
    assert_eq!(rec["endLine"], 0);
}

#[test]
fn read_lines_limit_and_offset_bounds() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    let lines: String = (1..=2001).map(|i| format!("{i}\n")).collect();
    std::fs::write(sb.root.join("l.txt"), lines).unwrap();
    let rec = ok(&reg, "read_lines", json!({"path": "l.txt", "limit": 2000}));
    assert_eq!(
        (rec["endLine"].clone(), rec["truncated"].clone()),
        (json!(2000), json!(true))
    );
    let rec = ok(&reg, "read_lines", json!({"path": "l.txt"}));
    assert_eq!(rec["endLine"], 2000, "the default limit is 2,000");
    let rec = ok(&reg, "read_lines", json!({"path": "l.txt", "offset": 2}));
    assert_eq!(
        (rec["endLine"].clone(), rec["truncated"].clone()),
        (json!(2001), json!(false))
    );
    for bad in [
        json!({"path": "l.txt", "limit": 2001}),
        json!({"path": "l.txt", "limit": 0}),
        json!({"path": "l.txt", "offset": 0}),
        json!({"path": "l.txt", "offset": -1}),
        json!({"path": "l.txt", "offset": "1"}),
        json!({"path": "l.txt", "lines": 1}),
    ] {
        assert_eq!(
            token(&call(&reg, "read_lines", bad.clone())),
            "INVALID_READ_LINES_INPUT",
            "{bad}"
        );
    }
}

#[test]
fn read_lines_cuts_a_line_over_2000_chars() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    let n = "é".repeat(2000);
    let n1 = "é".repeat(2001);
    std::fs::write(sb.root.join("c.txt"), format!("{n}\n{n1}\nend\n")).unwrap();
    let rec = ok(&reg, "read_lines", json!({"path": "c.txt"}));
    assert_eq!(rec["text"], format!("{n}\n{n}\nend\n"));
    assert_eq!(rec["endLine"], 3);
}

#[test]
fn read_lines_text_bytes_at_n_and_n_plus_one() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    // 32 lines of 2,001 bytes, then one of 1,504 bytes: exactly 65,536.
    let block: String = (0..32).map(|_| format!("{}\n", "é".repeat(1000))).collect();
    std::fs::write(
        sb.root.join("n.txt"),
        format!("{block}{}\nnext\n", "a".repeat(1503)),
    )
    .unwrap();
    let rec = ok(&reg, "read_lines", json!({"path": "n.txt"}));
    assert_eq!(rec["text"].as_str().unwrap().len(), 65_536);
    assert_eq!(
        (rec["endLine"].clone(), rec["truncated"].clone()),
        (json!(33), json!(true))
    );
    std::fs::write(
        sb.root.join("n1.txt"),
        format!("{block}{}\nnext\n", "a".repeat(1504)),
    )
    .unwrap();
    let rec = ok(&reg, "read_lines", json!({"path": "n1.txt"}));
    assert_eq!(rec["text"].as_str().unwrap().len(), 64_032);
    assert_eq!(
        (rec["endLine"].clone(), rec["truncated"].clone()),
        (json!(32), json!(true))
    );
}

#[test]
fn read_lines_streams_a_large_file() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    let lines: String = (1..=300_000).map(|i| format!("line {i}\n")).collect();
    assert!(lines.len() > 3_000_000);
    std::fs::write(sb.root.join("big.txt"), lines).unwrap();
    let rec = ok(
        &reg,
        "read_lines",
        json!({"path": "big.txt", "offset": 299_999, "limit": 5}),
    );
    assert_eq!(rec["text"], "line 299999\nline 300000\n");
    assert_eq!(
        (rec["endLine"].clone(), rec["truncated"].clone()),
        (json!(300_000), json!(false))
    );
}

#[test]
fn read_lines_refusals() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("bad.txt"), b"ok\n\xff\n").unwrap();
    assert_eq!(
        token(&call(&reg, "read_lines", json!({"path": "bad.txt"}))),
        "FILE_NOT_UTF8"
    );
    // The bad line is never returned when the window ends before it.
    let rec = ok(&reg, "read_lines", json!({"path": "bad.txt", "limit": 1}));
    assert_eq!(rec["text"], "ok\n");
    testkit::fixture::mkfifo(&sb.root.join("fifo"));
    assert_eq!(
        token(&call(&reg, "read_lines", json!({"path": "fifo"}))),
        "FILE_NOT_REGULAR"
    );
    std::fs::create_dir(sb.root.join("d")).unwrap();
    assert_eq!(
        token(&call(&reg, "read_lines", json!({"path": "d"}))),
        "FILE_NOT_REGULAR"
    );
    assert_eq!(
        token(&call(&reg, "read_lines", json!({"path": "nope"}))),
        "FILE_NOT_FOUND"
    );
    symlink(sb.outside.join("secret.txt"), sb.root.join("out")).unwrap();
    assert_eq!(
        token(&call(&reg, "read_lines", json!({"path": "out"}))),
        "PATH_OUTSIDE_WORKSPACE"
    );
}

// ---- file_info

#[test]
fn file_info_reports_without_following() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("f.txt"), "12345").unwrap();
    std::fs::set_permissions(
        sb.root.join("f.txt"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let rec = ok(&reg, "file_info", json!({"path": "f.txt"}));
    assert_eq!(rec["kind"], "file");
    assert_eq!(rec["bytes"], 5);
    assert_eq!(rec["mode"], "644");
    let modified = rec["modified"].as_str().unwrap();
    assert_eq!(modified.len(), 20, "{modified}");
    assert!(
        modified.ends_with('Z') && modified.as_bytes()[10] == b'T',
        "{modified}"
    );
    let mtime = std::fs::metadata(sb.root.join("f.txt"))
        .unwrap()
        .modified()
        .unwrap();
    let secs = mtime
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let year = 1970 + secs / 31_556_952;
    assert!(modified.starts_with(&year.to_string()), "{modified}");

    std::fs::create_dir(sb.root.join("d")).unwrap();
    std::fs::set_permissions(sb.root.join("d"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let rec = ok(&reg, "file_info", json!({"path": "d"}));
    assert_eq!(
        (rec["kind"].clone(), rec["mode"].clone()),
        (json!("directory"), json!("750"))
    );
    symlink(sb.outside.join("secret.txt"), sb.root.join("out")).unwrap();
    let rec = ok(&reg, "file_info", json!({"path": "out"}));
    assert_eq!(rec["kind"], "symlink");
    assert!(!rec.to_string().contains(sb.outside.to_str().unwrap()));
    symlink(&sb.outside, sb.root.join("outdir")).unwrap();
    assert_eq!(
        token(&call(
            &reg,
            "file_info",
            json!({"path": "outdir/secret.txt"})
        )),
        "PATH_OUTSIDE_WORKSPACE"
    );
    assert_eq!(
        token(&call(&reg, "file_info", json!({"path": "none"}))),
        "FILE_NOT_FOUND"
    );
    assert_eq!(
        token(&call(&reg, "file_info", json!({"path": "f.txt/x"}))),
        "NOT_A_DIRECTORY"
    );
    assert_eq!(
        token(&call(&reg, "file_info", json!({"path": "f.txt", "x": 1}))),
        "INVALID_INFO_INPUT"
    );
}

// ---- create_directory

#[test]
fn create_directory_with_parents_and_created_flag() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    let rec = ok(&reg, "create_directory", json!({"path": "a/b/c"}));
    assert_eq!(rec, json!({"path": "a/b/c", "created": true}));
    assert!(sb.root.join("a/b/c").is_dir());
    let rec = ok(&reg, "create_directory", json!({"path": "a/b/c"}));
    assert_eq!(rec["created"], false);
    let rec = ok(&reg, "create_directory", json!({"path": "a"}));
    assert_eq!(rec["created"], false);
    std::fs::write(sb.root.join("file"), "").unwrap();
    assert_eq!(
        token(&call(&reg, "create_directory", json!({"path": "file"}))),
        "NOT_A_DIRECTORY"
    );
    assert_eq!(
        token(&call(&reg, "create_directory", json!({"path": "file/sub"}))),
        "NOT_A_DIRECTORY"
    );
    symlink(&sb.outside, sb.root.join("out")).unwrap();
    assert_eq!(
        token(&call(&reg, "create_directory", json!({"path": "out/new"}))),
        "PATH_OUTSIDE_WORKSPACE"
    );
    assert!(!sb.outside.join("new").exists());
    assert_eq!(
        token(&call(&reg, "create_directory", json!({"path": "/tmp/x"}))),
        "INVALID_RELATIVE_PATH"
    );
    assert_eq!(
        token(&call(&reg, "create_directory", json!({}))),
        "INVALID_MKDIR_INPUT"
    );
}

// ---- move_file

#[test]
fn move_renames_creates_parents_and_never_replaces() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("a.txt"), "A").unwrap();
    std::fs::write(sb.root.join("b.txt"), "B").unwrap();
    let rec = ok(
        &reg,
        "move_file",
        json!({"source": "a.txt", "destination": "x/y/a.txt"}),
    );
    assert_eq!(rec, json!({"source": "a.txt", "destination": "x/y/a.txt"}));
    assert_eq!(read(&sb, "x/y/a.txt"), "A");
    assert!(!sb.root.join("a.txt").exists());
    let r = call(
        &reg,
        "move_file",
        json!({"source": "x/y/a.txt", "destination": "b.txt"}),
    );
    assert_eq!(token(&r), "MOVE_DESTINATION_EXISTS");
    assert_eq!(
        (read(&sb, "x/y/a.txt"), read(&sb, "b.txt")),
        ("A".into(), "B".into())
    );
    // A directory moves whole; a symlink moves as itself.
    ok(
        &reg,
        "move_file",
        json!({"source": "x", "destination": "z"}),
    );
    assert_eq!(read(&sb, "z/y/a.txt"), "A");
    symlink(sb.outside.join("secret.txt"), sb.root.join("link")).unwrap();
    ok(
        &reg,
        "move_file",
        json!({"source": "link", "destination": "moved-link"}),
    );
    assert_eq!(
        std::fs::read_link(sb.root.join("moved-link")).unwrap(),
        sb.outside.join("secret.txt")
    );
    assert_eq!(
        std::fs::read_to_string(sb.outside.join("secret.txt")).unwrap(),
        "TOP SECRET"
    );
    assert!(!sb.root.join("secret.txt").exists());
}

#[test]
fn move_refusals() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("a.txt"), "A").unwrap();
    std::fs::create_dir(sb.root.join("d")).unwrap();
    symlink(&sb.outside, sb.root.join("out")).unwrap();
    let mv = |s: &str, d: &str| {
        token(&call(
            &reg,
            "move_file",
            json!({"source": s, "destination": d}),
        ))
    };
    assert_eq!(mv("none", "x"), "FILE_NOT_FOUND");
    assert_eq!(mv("a.txt", "out/a.txt"), "PATH_OUTSIDE_WORKSPACE");
    assert_eq!(mv("out/secret.txt", "stolen.txt"), "PATH_OUTSIDE_WORKSPACE");
    assert_eq!(mv("a.txt", "a.txt/b"), "NOT_A_DIRECTORY");
    assert_eq!(mv("d", "d/inside"), "WRITE_FAILED");
    assert_eq!(mv("a.txt", "a.txt"), "MOVE_DESTINATION_EXISTS");
    assert_eq!(mv("a.txt", "../a.txt"), "INVALID_RELATIVE_PATH");
    assert_eq!(
        token(&call(&reg, "move_file", json!({"source": "a.txt"}))),
        "INVALID_MOVE_INPUT"
    );
    assert_eq!(read(&sb, "a.txt"), "A");
    assert!(!sb.outside.join("a.txt").exists());
    assert!(!sb.root.join("stolen.txt").exists());
}

// ---- delete_file

#[test]
fn delete_file_symlink_and_empty_directory_never_recursive() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("f"), "x").unwrap();
    assert_eq!(
        ok(&reg, "delete_file", json!({"path": "f"})),
        json!({"path": "f"})
    );
    assert!(!sb.root.join("f").exists());
    symlink(sb.outside.join("secret.txt"), sb.root.join("link")).unwrap();
    ok(&reg, "delete_file", json!({"path": "link"}));
    assert!(std::fs::symlink_metadata(sb.root.join("link")).is_err());
    assert!(
        sb.outside.join("secret.txt").exists(),
        "the link's target stays"
    );
    std::fs::create_dir_all(sb.root.join("full/sub")).unwrap();
    assert_eq!(
        token(&call(&reg, "delete_file", json!({"path": "full"}))),
        "DELETE_DIRECTORY_NOT_EMPTY"
    );
    assert!(sb.root.join("full/sub").is_dir());
    ok(&reg, "delete_file", json!({"path": "full/sub"}));
    ok(&reg, "delete_file", json!({"path": "full"}));
    assert!(!sb.root.join("full").exists());
    assert_eq!(
        token(&call(&reg, "delete_file", json!({"path": "none"}))),
        "FILE_NOT_FOUND"
    );
    symlink(&sb.outside, sb.root.join("out")).unwrap();
    assert_eq!(
        token(&call(
            &reg,
            "delete_file",
            json!({"path": "out/secret.txt"})
        )),
        "PATH_OUTSIDE_WORKSPACE"
    );
    assert!(sb.outside.join("secret.txt").exists());
    for root_name in [".", "", "./"] {
        let r = call(&reg, "delete_file", json!({"path": root_name}));
        assert_eq!(token(&r), "INVALID_RELATIVE_PATH", "{root_name:?}");
    }
    assert!(sb.root.is_dir());
    assert_eq!(
        token(&call(&reg, "delete_file", json!({"path": 1}))),
        "INVALID_DELETE_INPUT"
    );
}

#[test]
fn a_cancelled_call_is_a_rejection_and_changes_nothing() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("a.txt"), "one\n").unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    cancel.cancel();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (name, args) in [
        (
            "edit_file",
            json!({"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}),
        ),
        ("read_lines", json!({"path": "a.txt"})),
        ("file_info", json!({"path": "a.txt"})),
        ("create_directory", json!({"path": "new"})),
        (
            "move_file",
            json!({"source": "a.txt", "destination": "b.txt"}),
        ),
        ("delete_file", json!({"path": "a.txt"})),
    ] {
        let call = confine_tools::ToolCall::new("c", name, &args);
        let got = rt.block_on(confine_tools::execute_tool_call(&reg, &call, &cancel));
        assert_eq!(got, Err(confine_tools::Cancelled), "{name}");
        // The tool itself, called past the registry's own check, also refuses.
        let tool = reg.get(name).unwrap();
        let got = rt.block_on(tool.execute(&call.arguments, &cancel));
        assert!(
            matches!(got, Err(confine_tools::CallError::Cancelled(_))),
            "{name}: {got:?}"
        );
    }
    assert_eq!(read(&sb, "a.txt"), "one\n");
    assert!(!sb.root.join("new").exists() && !sb.root.join("b.txt").exists());
}
