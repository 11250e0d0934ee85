//! Bounded input, attacked from outside: lines at the bound and one byte over it, and a 300 MB
//! line without a newline, sent to `confine call` and `confine mcp`; the answer, the stream
//! going on, and the server's peak resident memory (which must stay far below the line).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Stdio};

use serde_json::{Value, json};

use crate::support;
use support::{confine, spawn_call};

/// The line bound of both transports (4 MiB, not counting the newline).
const MAX_LINE: usize = 4 * 1024 * 1024;

/// The peak resident memory of a live process, in KiB (`VmHWM`).
fn peak_rss_kib(child: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// `line` padded with spaces after its JSON to exactly `len` bytes.
fn padded(line: &Value, len: usize) -> String {
    let mut text = line.to_string();
    assert!(text.len() <= len);
    text.extend(std::iter::repeat_n(' ', len - text.len()));
    text
}

fn next_json(out: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

/// Write `count` MiB of `byte` (no newline) to `stdin`.
fn flood(stdin: &mut impl Write, byte: u8, count: usize) {
    let chunk = vec![byte; 1024 * 1024];
    for _ in 0..count {
        stdin.write_all(&chunk).unwrap();
    }
}

#[test]
fn call_takes_a_line_at_the_bound_and_refuses_one_byte_more_then_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
    let read = json!({"id": 1, "name": "read_file", "arguments": {"path": "a.txt"}});
    let mut child = spawn_call(tmp.path(), &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let writer = std::thread::spawn(move || {
        for len in [MAX_LINE, MAX_LINE + 1] {
            writeln!(stdin, "{}", padded(&read, len)).unwrap();
        }
        writeln!(stdin, "{read}").unwrap();
    });
    let at = next_json(&mut out);
    assert_eq!(at["id"], 1);
    assert_eq!(at["content"]["content"], "alpha");
    let over = next_json(&mut out);
    assert_eq!(
        over,
        json!({"id": null, "isError": true, "content": {"error": {"code": "INVALID_TOOL_CALL", "message": "LINE_TOO_LONG"}}})
    );
    let after = next_json(&mut out);
    assert_eq!(after["content"]["content"], "alpha", "the stream goes on");
    writer.join().unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn call_drops_300_mb_without_a_newline_in_little_memory() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
    let mut child = spawn_call(tmp.path(), &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let writer = std::thread::spawn(move || {
        stdin
            .write_all(br#"{"id": 9, "name": "read_file", "arguments": {"path": ""#)
            .unwrap();
        flood(&mut stdin, b'a', 300);
        stdin.write_all(b"\"}}\n").unwrap();
        writeln!(
            stdin,
            "{}",
            json!({"id": 2, "name": "read_file", "arguments": {"path": "a.txt"}})
        )
        .unwrap();
        stdin
    });
    let over = next_json(&mut out);
    assert_eq!(over["id"], Value::Null);
    assert_eq!(over["content"]["error"]["message"], "LINE_TOO_LONG");
    let after = next_json(&mut out);
    assert_eq!(after["id"], 2);
    assert_eq!(after["content"]["content"], "alpha");
    let peak = peak_rss_kib(&child);
    drop(writer.join().unwrap());
    assert!(child.wait().unwrap().success());
    assert!(
        peak < 64 * 1024,
        "peak resident memory {peak} KiB after a 300 MB line"
    );
}

/// `confine mcp` with a raw client: initialized, then `lines` sent by a writer thread.
struct Mcp {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Mcp {
    fn start(root: &std::path::Path) -> (Self, std::process::ChildStdin) {
        let mut child = confine()
            .args(["mcp", "--root"])
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        writeln!(stdin, "{init}").unwrap();
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        assert_eq!(next_json(&mut out)["id"], 0);
        (Self { child, out }, stdin)
    }
}

fn mcp_read(id: Value, path: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": path}}})
}

#[test]
fn mcp_takes_a_message_at_the_bound_and_answers_one_byte_more_with_its_id() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
    let (mut mcp, mut stdin) = Mcp::start(tmp.path());
    let writer = std::thread::spawn(move || {
        writeln!(stdin, "{}", padded(&mcp_read(json!(1), "a.txt"), MAX_LINE)).unwrap();
        writeln!(
            stdin,
            "{}",
            padded(&mcp_read(json!("over"), "a.txt"), MAX_LINE + 1)
        )
        .unwrap();
        writeln!(stdin, "{}", mcp_read(json!(3), "a.txt")).unwrap();
        stdin
    });
    // Requests run concurrently: the answers may come in any order.
    let mut answers: Vec<Value> = (0..3).map(|_| next_json(&mut mcp.out)).collect();
    // Sorted by id text: "\"over\"" before "1" before "3".
    answers.sort_by_key(|a| a["id"].to_string());
    let [over, at, after] = <[Value; 3]>::try_from(answers).unwrap();
    assert_eq!(at["id"], 1);
    assert_eq!(at["result"]["structuredContent"]["content"], "alpha");
    assert_eq!(over["id"], "over", "{over}");
    assert_eq!(over["error"]["code"], -32600, "{over}");
    assert_eq!(after["id"], 3);
    assert_eq!(after["result"]["structuredContent"]["content"], "alpha");
    drop(writer.join().unwrap());
    assert!(mcp.child.wait().unwrap().success());
}

#[test]
fn mcp_drops_300_mb_without_a_newline_in_little_memory_and_finds_a_trailing_id() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
    let (mut mcp, mut stdin) = Mcp::start(tmp.path());
    let writer = std::thread::spawn(move || {
        // As the TypeScript SDK writes a request: the id after the (large) params.
        stdin
            .write_all(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":"b.txt","content":""#)
            .unwrap();
        flood(&mut stdin, b'b', 300);
        stdin.write_all(b"\"}},\"id\":77}\n").unwrap();
        writeln!(stdin, "{}", mcp_read(json!(2), "a.txt")).unwrap();
        stdin
    });
    // Requests run concurrently: the two answers may come in either order.
    let (mut over, mut after) = (next_json(&mut mcp.out), next_json(&mut mcp.out));
    if over["id"] == 2 {
        std::mem::swap(&mut over, &mut after);
    }
    assert_eq!(over["id"], 77, "{over}");
    assert_eq!(over["error"]["code"], -32600, "{over}");
    assert_eq!(after["id"], 2);
    assert_eq!(after["result"]["structuredContent"]["content"], "alpha");
    let peak = peak_rss_kib(&mcp.child);
    drop(writer.join().unwrap());
    assert!(mcp.child.wait().unwrap().success());
    assert!(
        peak < 64 * 1024,
        "peak resident memory {peak} KiB after a 300 MB message"
    );
    assert!(
        !tmp.path().join("b.txt").exists(),
        "the dropped call had no effect"
    );
}

#[test]
fn mcp_tools_call_with_arguments_that_are_not_an_object_is_invalid_params() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut mcp, mut stdin) = Mcp::start(tmp.path());
    let bad = [json!("a.txt"), json!(["a.txt"]), json!(5), json!(true)];
    for (i, arguments) in bad.iter().enumerate() {
        let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "read_file", "arguments": arguments}});
        writeln!(stdin, "{call}").unwrap();
        let answer = next_json(&mut mcp.out);
        assert_eq!(answer["id"], i, "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{arguments}: {answer}");
    }
    // A name that is not a string is invalid params too; an unknown method stays -32601.
    let call = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": 5, "arguments": {}}});
    writeln!(stdin, "{call}").unwrap();
    assert_eq!(next_json(&mut mcp.out)["error"]["code"], -32602);
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 11, "method": "tools/frobnicate"})
    )
    .unwrap();
    assert_eq!(next_json(&mut mcp.out)["error"]["code"], -32601);
    drop(stdin);
    assert!(mcp.child.wait().unwrap().success());
}
