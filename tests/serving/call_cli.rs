//! `confine call` driven as a built binary: JSON Lines in, one flushed line out per call.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support;
use support::{call_lines, confine};

#[test]
fn call_answers_in_order_with_ids_and_records() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
    let input = [
        json!({"id": 1, "name": "read_file", "arguments": {"path": "a.txt"}}).to_string(),
        json!({"id": "two", "name": "read_file", "arguments": {"path": "../a.txt"}}).to_string(),
        "not json".to_owned(),
        json!({"id": 3, "name": "read_file"}).to_string(),
        json!({"id": 4, "name": "read_file", "arguments": "a.txt"}).to_string(),
        String::new(),
        json!({"id": {"nested": [1]}, "name": "nope", "arguments": {}}).to_string(),
        r#"{"id": 5, "name": "read_file", "arguments": {"path": "a.txt", "path": "b"}}"#.to_owned(),
    ]
    .join("\n");
    let out = call_lines(tmp.path(), &[], &input);
    assert_eq!(out.len(), 7, "{out:#?}");
    assert_eq!(
        out[0],
        json!({"id": 1, "isError": false, "content": {"path": "a.txt", "content": "alpha", "bytes": 5}})
    );
    assert_eq!(
        out[1],
        json!({"id": "two", "isError": true, "content": {"error": {"code": "TOOL_ARGUMENTS_INVALID", "message": "INVALID_RELATIVE_PATH"}}})
    );
    let invalid = json!({"id": null, "isError": true, "content": {"error": {"code": "INVALID_TOOL_CALL", "message": "INVALID_TOOL_CALL"}}});
    assert_eq!(out[2], invalid);
    assert_eq!(out[3], invalid);
    assert_eq!(out[4], invalid);
    assert_eq!(out[5]["id"], json!({"nested": [1]}));
    assert_eq!(out[5]["content"]["error"]["code"], "TOOL_NOT_FOUND");
    assert_eq!(out[6]["content"]["error"]["message"], "INVALID_READ_INPUT");
    // Key order of a line is id, isError, content.
    let text = serde_json::to_string(&out[0]).unwrap();
    assert!(
        text.starts_with(r#"{"id":1,"isError":false,"content":"#),
        "{text}"
    );
}

#[test]
fn call_serves_the_workspace_set_and_narrows_it_with_read_only_and_tools() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
    let write =
        json!({"id": 1, "name": "write_file", "arguments": {"path": "b.txt", "content": "x"}})
            .to_string();
    let read = json!({"id": 2, "name": "read_file", "arguments": {"path": "a.txt"}}).to_string();
    let input = format!("{write}\n{read}\n");

    let out = call_lines(tmp.path(), &[], &input);
    assert_eq!(out[0]["isError"], false, "{out:?}");
    assert_eq!(out[1]["content"]["content"], "alpha");

    std::fs::remove_file(tmp.path().join("b.txt")).unwrap();
    let out = call_lines(tmp.path(), &["--read-only"], &input);
    assert_eq!(out[0]["content"]["error"]["code"], "TOOL_NOT_FOUND");
    assert_eq!(out[1]["content"]["content"], "alpha");
    assert!(!tmp.path().join("b.txt").exists());

    let out = call_lines(tmp.path(), &["--tools", "write_file"], &input);
    assert_eq!(out[0]["isError"], false);
    assert_eq!(out[1]["content"]["error"]["code"], "TOOL_NOT_FOUND");

    let status = confine()
        .args(["call", "--tools", "read_file,nope", "--root"])
        .arg(tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
}

#[test]
fn call_flushes_each_line_before_reading_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
    let mut child = confine()
        .args(["call", "--root"])
        .arg(tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for i in 0..3 {
        // stdin stays open: an answer can only arrive if the server flushed it.
        writeln!(
            stdin,
            "{}",
            json!({"id": i, "name": "read_file", "arguments": {"path": "a.txt"}})
        )
        .unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["id"], i);
        assert_eq!(v["content"]["content"], "alpha");
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn call_unusable_root_exits_2_with_token() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("file"), "x").unwrap();
    for (root, token) in [
        (tmp.path().join("missing"), "WORKSPACE_ROOT_NOT_FOUND"),
        (tmp.path().join("file"), "WORKSPACE_ROOT_NOT_DIRECTORY"),
    ] {
        let out = confine()
            .args(["call", "--root"])
            .arg(&root)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(token), "{stderr}");
        assert!(
            !stderr.contains(&*tmp.path().to_string_lossy()),
            "host path leaked: {stderr}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn call_defaults_root_to_current_directory() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("here.txt"), "here").unwrap();
    let mut child = confine()
        .arg("call")
        .current_dir(tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"id\":1,\"name\":\"read_file\",\"arguments\":{\"path\":\"here.txt\"}}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["content"]["content"], "here");
}

#[test]
fn help_and_bad_usage() {
    for cmd in [
        &["--help"][..],
        &["call", "--help"],
        &["mcp", "--help"],
        &["guard", "--help"],
        &["jail", "--help"],
    ] {
        let out = confine().args(cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{cmd:?}"
        );
    }
    let out = confine()
        .args(["call", "--timeout-ms", "zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = confine().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = confine().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// With `CONFINE_LOG=debug` a failed call's cause (here the root's re-verification error)
/// reaches stderr for the operator, while the record keeps only the token.
#[test]
fn call_logs_the_cause_of_a_failure_at_debug_and_keeps_it_out_of_the_record() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("a.txt"), "alpha").unwrap();
    let mut child = confine()
        .args(["call", "--root"])
        .arg(&root)
        .env("CONFINE_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let read = json!({"id": 1, "name": "read_file", "arguments": {"path": "a.txt"}}).to_string();
    writeln!(stdin, "{read}").unwrap();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap()["isError"],
        json!(false)
    );
    // Replace the root: the next call fails with WORKSPACE_ROOT_CHANGED.
    std::fs::rename(&root, tmp.path().join("moved")).unwrap();
    std::fs::create_dir(&root).unwrap();
    writeln!(stdin, "{read}").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let record: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        record["content"],
        json!({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "WORKSPACE_ROOT_CHANGED"}})
    );
    assert!(!line.contains(&*tmp.path().to_string_lossy()), "{line}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tool call failed") && stderr.contains("WORKSPACE_ROOT_CHANGED"),
        "stderr at debug names the failure and its cause:\n{stderr}"
    );
}
