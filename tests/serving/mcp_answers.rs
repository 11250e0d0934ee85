//! `confine mcp` over stdio, driven from outside with raw bytes: every request line gets
//! exactly one answer whatever it holds, a connection's memory stays bounded when the client
//! does not read, and an ending signal ends the server promptly with every process of its
//! calls dead.
//!
//! Answers are counted per line: each line under test is followed by a `ping` with a fresh
//! id, and every answer read before the ping's belongs to that line (the transport answers a
//! malformed line before it reads the next one).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::{Value, json};

use crate::support;
use support::{assert_dead, census_flags, marker};

/// Every wait on the server is bounded by this (generous: the machine is shared).
const PATIENCE: Duration = Duration::from_secs(30);

/// One `confine mcp` child and a thread reading its stdout a line at a time.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    next_sync: u64,
}

/// `confine mcp --root ROOT <census flags> EXTRA…`, stdout not yet read.
fn spawn(root: &Path, extra: &[&str]) -> Child {
    support::confine()
        .arg("mcp")
        .arg("--root")
        .arg(root)
        .args(census_flags())
        .args(extra)
        .env("CONFINE_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("confine mcp runs")
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

impl Server {
    /// A server with an initialized session.
    fn start(root: &Path, extra: &[&str]) -> Self {
        let mut child = spawn(root, extra);
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut server = Self {
            child,
            stdin,
            lines,
            next_sync: 0,
        };
        server.send(format!("{}\n", initialize()).as_bytes());
        let answers = server.answers_until(&json!("init"));
        assert_eq!(answers.len(), 1, "{answers:?}");
        assert_eq!(answers[0]["result"]["serverInfo"]["name"], "confine");
        server.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        server
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// The next line the server writes, parsed; each must be a JSON-RPC 2.0 object.
    fn next(&mut self, limit: Duration) -> Option<Value> {
        match self.lines.recv_timeout(limit) {
            Ok(line) => {
                let value: Value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                    panic!("not JSON ({e}): {}", String::from_utf8_lossy(&line))
                });
                assert_eq!(value["jsonrpc"], "2.0", "{value}");
                Some(value)
            }
            Err(RecvTimeoutError::Timeout) => panic!("no line from the server in {limit:?}"),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Every answer (a line without `method`) up to and including the one with `id`.
    fn answers_until(&mut self, id: &Value) -> Vec<Value> {
        let mut answers = Vec::new();
        loop {
            let value = self
                .next(PATIENCE)
                .unwrap_or_else(|| panic!("the server ended before answering {id}: {answers:?}"));
            if value.get("method").is_some() {
                continue;
            }
            let done = &value["id"] == id;
            answers.push(value);
            if done {
                return answers;
            }
        }
    }

    /// Send `line` (a newline added), then a ping: the answers `line` got, in order. A line
    /// rmcp handles may be answered after the ping (its handler runs as a task of its own):
    /// with `expect` set, reading goes on until that id is answered too. Then a second ping
    /// is a barrier: whatever `line` got is read before its answer.
    fn answers_to_request(&mut self, line: &[u8], expect: Option<&Value>) -> Vec<Value> {
        let n = self.next_sync;
        self.next_sync += 1;
        let ping = |id: &Value| json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
        let (sync, barrier) = (json!(format!("sync-{n}")), json!(format!("barrier-{n}")));
        let mut bytes = line.to_vec();
        bytes.extend_from_slice(format!("\n{}\n", ping(&sync)).as_bytes());
        self.send(&bytes);
        let mut answers = self.answers_until(&sync);
        if let Some(id) = expect
            && !answers.iter().any(|a| &a["id"] == id)
        {
            answers.extend(self.answers_until(id));
        }
        self.send(format!("{}\n", ping(&barrier)).as_bytes());
        answers.extend(self.answers_until(&barrier));
        let pings: Vec<Value> = answers
            .iter()
            .filter(|a| a["id"] == sync || a["id"] == barrier)
            .cloned()
            .collect();
        assert_eq!(pings.len(), 2, "each ping answered once: {answers:?}");
        for p in &pings {
            assert_eq!(p["result"], json!({}), "{p}");
        }
        answers.retain(|a| a["id"] != sync && a["id"] != barrier);
        answers
    }

    /// [`Self::answers_to_request`] for a line answered (if at all) before the next is read.
    fn answers_to(&mut self, line: &[u8]) -> Vec<Value> {
        self.answers_to_request(line, None)
    }

    /// Close stdin and wait for a clean exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        let status = wait_for(&mut self.child, PATIENCE).expect("the server exits at end of input");
        assert!(status.success(), "{status:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait for `child` to exit, at most `limit`.
fn wait_for(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// The error code and id of the only answer, which must be an error.
fn one_error(answers: &[Value], what: &str) -> (i64, Value) {
    assert_eq!(answers.len(), 1, "{what}: exactly one answer: {answers:?}");
    let a = &answers[0];
    let code = a["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{what}: an error: {a}"));
    assert!(a["error"]["message"].is_string(), "{what}: {a}");
    assert!(a.get("result").is_none(), "{what}: {a}");
    (code, a["id"].clone())
}

fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
    tmp
}

/// A `tools/call` of `read_file` whose arguments nest to exactly `levels` levels (the
/// message's own object is level 1).
fn nested_call(id: &str, levels: usize) -> String {
    let arrays = levels - 3;
    format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"a.txt","x":{}{}}}}}}}"#,
        "[".repeat(arrays),
        "]".repeat(arrays)
    )
}

#[test]
fn every_malformed_line_gets_exactly_one_answer_with_its_readable_id() {
    let tmp = workspace();
    let mut server = Server::start(tmp.path(), &[]);
    let big_id = format!(
        r#"{{"jsonrpc":"2.0","method":"ping","params":{{"pad":"{}"}},"id":"big"}}"#,
        "a".repeat(4 * 1024 * 1024)
    );
    let big_null = format!(r#"{{"pad":"{}"}}"#, "a".repeat(4 * 1024 * 1024 + 1));
    let cases: Vec<(&str, Vec<u8>, i64, Value)> = vec![
        ("not JSON", b"not json".to_vec(), -32700, Value::Null),
        (
            "truncated",
            br#"{"jsonrpc":"2.0","id":1,"method":"ping""#.to_vec(),
            -32700,
            Value::Null,
        ),
        (
            "invalid UTF-8 outside strings",
            b"\xff\xfe{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}".to_vec(),
            -32700,
            Value::Null,
        ),
        (
            "invalid UTF-8 in the id",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\x28\",\"method\":\"ping\"}".to_vec(),
            -32700,
            Value::Null,
        ),
        (
            "two values",
            br#"{"jsonrpc":"2.0","id":3,"method":"ping"} {}"#.to_vec(),
            -32700,
            Value::Null,
        ),
        ("a NUL byte", b"\0".to_vec(), -32700, Value::Null),
        ("an empty array", b"[]".to_vec(), -32600, Value::Null),
        (
            "a batch",
            br#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#.to_vec(),
            -32600,
            Value::Null,
        ),
        ("a number", b"7".to_vec(), -32600, Value::Null),
        ("a string", br#""ping""#.to_vec(), -32600, Value::Null),
        ("null", b"null".to_vec(), -32600, Value::Null),
        ("an empty object", b"{}".to_vec(), -32600, Value::Null),
        (
            "no jsonrpc",
            br#"{"id":5,"method":"ping"}"#.to_vec(),
            -32600,
            json!(5),
        ),
        (
            "jsonrpc 1.0",
            br#"{"jsonrpc":"1.0","id":"six","method":"ping"}"#.to_vec(),
            -32600,
            json!("six"),
        ),
        (
            "jsonrpc a number",
            br#"{"jsonrpc":2.0,"id":7,"method":"ping"}"#.to_vec(),
            -32600,
            json!(7),
        ),
        (
            "method a number",
            br#"{"jsonrpc":"2.0","id":8,"method":7}"#.to_vec(),
            -32600,
            json!(8),
        ),
        (
            "method a number, no id",
            br#"{"jsonrpc":"2.0","method":7}"#.to_vec(),
            -32600,
            Value::Null,
        ),
        (
            "params a string",
            br#"{"jsonrpc":"2.0","id":9,"method":"ping","params":"x"}"#.to_vec(),
            -32600,
            json!(9),
        ),
        (
            "params a string, no id (not a valid notification)",
            br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":1}"#.to_vec(),
            -32600,
            Value::Null,
        ),
        (
            "id null",
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(),
            -32600,
            Value::Null,
        ),
        (
            "id an object",
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_vec(),
            -32600,
            Value::Null,
        ),
        (
            "id a boolean",
            br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#.to_vec(),
            -32600,
            Value::Null,
        ),
        (
            "no method",
            br#"{"jsonrpc":"2.0","id":10}"#.to_vec(),
            -32600,
            json!(10),
        ),
        (
            "result and error",
            br#"{"jsonrpc":"2.0","id":11,"result":{},"error":{"code":1,"message":"x"}}"#.to_vec(),
            -32600,
            json!(11),
        ),
        (
            "id a fraction",
            br#"{"jsonrpc":"2.0","id":1.5,"method":"no/such"}"#.to_vec(),
            -32601,
            json!(1.5),
        ),
        (
            "unknown method",
            br#"{"jsonrpc":"2.0","id":12,"method":"no/such"}"#.to_vec(),
            -32601,
            json!(12),
        ),
        (
            "a notification's method with an id",
            br#"{"jsonrpc":"2.0","id":13,"method":"notifications/initialized"}"#.to_vec(),
            -32601,
            json!(13),
        ),
        (
            "tools/call without params",
            br#"{"jsonrpc":"2.0","id":14,"method":"tools/call"}"#.to_vec(),
            -32602,
            json!(14),
        ),
        (
            "tools/call with string arguments",
            br#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"read_file","arguments":"a.txt"}}"#.to_vec(),
            -32602,
            json!(15),
        ),
        (
            "tools/call of a tool not served",
            br#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"no_such","arguments":{}}}"#.to_vec(),
            -32602,
            json!(16),
        ),
        (
            "nested 129 levels",
            nested_call("deep", 129).into_bytes(),
            -32600,
            json!("deep"),
        ),
        (
            "nested 500 levels, not JSON",
            [b'['; 500].to_vec(),
            -32600,
            Value::Null,
        ),
        (
            "over 4 MiB, id after the padding",
            big_id.into_bytes(),
            -32600,
            json!("big"),
        ),
        (
            "over 4 MiB, no id",
            big_null.into_bytes(),
            -32600,
            Value::Null,
        ),
    ];
    let mut failed = Vec::new();
    for (what, line, code, id) in &cases {
        let answers = server.answers_to_request(line, Some(id).filter(|id| !id.is_null()));
        let ok = answers.len() == 1
            && answers[0]["error"]["code"] == json!(code)
            && &answers[0]["id"] == id;
        if !ok {
            failed.push(format!(
                "{what}: expected one {code} with id {id}, got {answers:?}"
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));

    // 128 levels is within the bound: the call runs (one answer, a result).
    let answers = server.answers_to_request(
        nested_call("deep128", 128).as_bytes(),
        Some(&json!("deep128")),
    );
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], "deep128");
    assert!(answers[0]["result"].is_object(), "{answers:?}");

    // A line of exactly 4 MiB is read (and answered as what it is: a ping).
    let prefix = r#"{"jsonrpc":"2.0","id":"edge","method":"ping","params":{"pad":""#;
    let suffix = r#""}}"#;
    let pad = 4 * 1024 * 1024 - prefix.len() - suffix.len();
    let edge = format!("{prefix}{}{suffix}", "a".repeat(pad));
    assert_eq!(edge.len(), 4 * 1024 * 1024);
    let answers = server.answers_to_request(edge.as_bytes(), Some(&json!("edge")));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], "edge");
    assert_eq!(answers[0]["result"], json!({}));
    let over = format!("{prefix}{}{suffix}", "a".repeat(pad + 1));
    let (code, id) = one_error(&server.answers_to(over.as_bytes()), "4 MiB + 1");
    assert_eq!((code, id), (-32600, json!("edge")));

    // The session went on through all of it.
    let answers = server.answers_to_request(
        br#"{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.txt"}}}"#,
        Some(&json!("last")),
    );
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["result"]["isError"], false, "{answers:?}");
    server.finish();
}

#[test]
fn notifications_responses_and_blank_lines_get_no_answer() {
    let tmp = workspace();
    let mut server = Server::start(tmp.path(), &[]);
    for line in [
        &b""[..],
        b"   \t",
        b"\r",
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        br#"{"jsonrpc":"2.0","method":"notifications/no_such","params":{"a":1}}"#,
        br#"{"jsonrpc":"2.0","method":"no/such","params":[1,2]}"#,
        br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}"#,
        br#"{"jsonrpc":"2.0","id":77,"result":{}}"#,
        br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}"#,
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"no"}}"#,
    ] {
        let answers = server.answers_to(line);
        assert!(
            answers.is_empty(),
            "{}: {answers:?}",
            String::from_utf8_lossy(line)
        );
    }
    server.finish();
}

/// Answers arrive per line, several malformed lines in one write: as many answers as lines
/// that expect one, and nothing for the rest.
#[test]
fn a_burst_of_mixed_lines_is_answered_line_for_line() {
    let tmp = workspace();
    let mut server = Server::start(tmp.path(), &[]);
    let mut burst = Vec::new();
    let mut expected = Vec::new();
    for i in 0..50 {
        match i % 5 {
            0 => {
                burst.extend_from_slice(b"garbage\xff\n");
                expected.push((-32700, Value::Null));
            }
            1 => {
                burst.extend_from_slice(format!("{{\"jsonrpc\":\"1\",\"id\":{i}}}\n").as_bytes());
                expected.push((-32600, json!(i)));
            }
            2 => burst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"n/x\"}\n"),
            3 => {
                burst.extend_from_slice(nested_call(&format!("d{i}"), 200).as_bytes());
                burst.push(b'\n');
                expected.push((-32600, json!(format!("d{i}"))));
            }
            _ => burst.extend_from_slice(b"\n"),
        }
    }
    let answers = server.answers_to(&burst);
    let got: Vec<(i64, Value)> = answers
        .iter()
        .map(|a| (a["error"]["code"].as_i64().unwrap(), a["id"].clone()))
        .collect();
    assert_eq!(got, expected);

    // Requests rmcp refuses (unknown method, unknown tool), far more than the 64 calls that
    // may be in flight: each releases its place, each is answered once, and the session goes
    // on.
    let mut burst = Vec::new();
    for i in 0..300u64 {
        let line = if i.is_multiple_of(2) {
            json!({"jsonrpc": "2.0", "id": i, "method": "no/such"})
        } else {
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "no_such", "arguments": {}}})
        };
        burst.extend_from_slice(format!("{line}\n").as_bytes());
    }
    let last = json!({"jsonrpc": "2.0", "id": "after", "method": "tools/call",
                      "params": {"name": "read_file", "arguments": {"path": "a.txt"}}});
    burst.extend_from_slice(last.to_string().as_bytes());
    let mut answers = server.answers_to_request(&burst, Some(&json!("after")));
    // Calls run concurrently: an answer may come after the pings that follow its request.
    // Read on (bounded: 50 rounds of 100 ms) until every request's answer has come.
    for _ in 0..50 {
        if answers.len() >= 301 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        answers.extend(server.answers_to(b""));
    }
    let mut seen = vec![0; 300];
    for a in &answers {
        if a["id"] == "after" {
            assert_eq!(a["result"]["isError"], false, "{a}");
            continue;
        }
        let i = a["id"].as_u64().unwrap() as usize;
        let code = if i.is_multiple_of(2) { -32601 } else { -32602 };
        assert_eq!(a["error"]["code"], code, "{a}");
        seen[i] += 1;
    }
    assert!(seen.iter().all(|n| *n == 1), "{seen:?}");
    assert_eq!(answers.len(), 301);
    server.finish();
}

/// A tools/call of run_command with `command`, as one line.
fn run_command(id: Value, command: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "run_command", "arguments": {"command": command}}})
    .to_string()
}

#[test]
fn a_second_request_with_the_id_of_one_in_flight_is_refused_and_the_first_is_answered() {
    let tmp = workspace();
    let m = marker();
    let mut server = Server::start(tmp.path(), &["--allow-commands"]);
    let root = tmp.path();
    // The first runs until `go` exists (bounded: 600 rounds of 50 ms).
    let first = run_command(
        json!(1),
        &format!(
            "echo {m} >/dev/null; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; \
             i=$((i+1)); done; echo first > first.txt; echo first"
        ),
    );
    server.send(format!("{first}\n").as_bytes());
    support::wait_alive_blocking(&m, 1);
    // Same id, while the first runs: refused at once, and its command never runs.
    let second = run_command(json!(1), "echo second > second.txt");
    let (code, id) = one_error(&server.answers_to(second.as_bytes()), "duplicate id");
    assert_eq!((code, id), (-32600, json!(1)));
    // The string "1" is another id: it runs.
    let other = run_command(json!("1"), "echo other");
    let answers = server.answers_to_request(other.as_bytes(), Some(&json!("1")));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], "1");
    assert_eq!(
        answers[0]["result"]["structuredContent"]["stdout"], "other\n",
        "{answers:?}"
    );
    // Let the first end: its answer is not lost.
    std::fs::write(root.join("go"), "").unwrap();
    let answers = server.answers_until(&json!(1));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0]["result"]["structuredContent"]["stdout"], "first\n",
        "{answers:?}"
    );
    assert!(root.join("first.txt").exists());
    assert!(!root.join("second.txt").exists(), "the refused call ran");
    // Once answered, the id is free again.
    let again = run_command(json!(1), "echo again");
    let answers = server.answers_to_request(again.as_bytes(), Some(&json!(1)));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0]["result"]["structuredContent"]["stdout"], "again\n",
        "{answers:?}"
    );
    server.finish();
    assert_dead(&m, "the server");
}

/// VmRSS (KiB) and thread count of `pid`, from `/proc/PID/status`.
fn rss_and_threads(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].split_whitespace().next()?.parse().ok()
    };
    Some((field("VmRSS:")?, field("Threads:")?))
}

/// 10,000 calls pipelined by a client that does not read its answers: the server stops
/// reading (its memory and threads stay bounded while the writer is blocked), then, once the
/// client reads, every call is answered exactly once.
#[test]
fn ten_thousand_unread_calls_stay_bounded_and_are_all_answered_once() {
    const CALLS: usize = 10_000;
    const RSS_BOUND_KIB: u64 = 200 * 1024;
    // At most 64 calls run at once, each with at most one job on the tools' filesystem pool
    // (which never runs more threads than jobs in flight), beside at most 4 runtime workers
    // and a few threads of the process's own (main, stdio, signals).
    const THREADS_BOUND: u64 = 64 + 4 + 8;
    let tmp = workspace();
    // A file whose answer is large (about 24 KiB of JSON: the text, and the record again as
    // structured content), so that the unread answers would be 240 MB if they were kept.
    std::fs::write(tmp.path().join("big.txt"), "x".repeat(12_000)).unwrap();
    let mut child = spawn(tmp.path(), &[]);
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut input = format!(
        "{}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n",
        initialize()
    )
    .into_bytes();
    for i in 0..CALLS {
        let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                          "params": {"name": "read_file", "arguments": {"path": "big.txt"}}});
        input.extend_from_slice(format!("{call}\n").as_bytes());
    }
    let total = input.len();
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // The writer hands stdin back: closing it before every answer is read would end the
    // session (end of input cancels the calls still running).
    let writer = std::thread::spawn({
        let written = written.clone();
        move || {
            for chunk in input.chunks(4096) {
                stdin.write_all(chunk).expect("the server reads its input");
                written.fetch_add(chunk.len(), std::sync::atomic::Ordering::Relaxed);
            }
            stdin
        }
    });
    // Sample while nobody reads, until the writer has made no progress for two seconds.
    let (mut peak_rss, mut peak_threads) = (0, 0);
    let mut last = 0;
    let mut still = 0;
    let until = Instant::now() + Duration::from_secs(120);
    while still < 20 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        let (rss, threads) = rss_and_threads(pid).expect("the server is alive");
        peak_rss = peak_rss.max(rss);
        peak_threads = peak_threads.max(threads);
        let now = written.load(std::sync::atomic::Ordering::Relaxed);
        if now == last {
            still += 1;
        } else {
            still = 0;
            last = now;
        }
    }
    let stuck_at = written.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "unread: the server stopped reading at {stuck_at} of {total} bytes; peak RSS \
         {peak_rss} KiB, {peak_threads} threads"
    );
    assert!(
        stuck_at < total,
        "the server read all {total} bytes although no answer was read: it does not stop \
         reading (peak RSS {peak_rss} KiB, {peak_threads} threads)"
    );
    assert!(
        peak_rss < RSS_BOUND_KIB,
        "peak RSS {peak_rss} KiB while unread"
    );
    assert!(
        peak_threads <= THREADS_BOUND,
        "{peak_threads} threads while unread"
    );
    // Now read everything: each call answered once.
    let (tx, lines) = channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        loop {
            let mut line = Vec::new();
            if reader.read_until(b'\n', &mut line).unwrap_or(0) == 0 || tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut seen = vec![0u32; CALLS];
    let (mut init, mut answered) = (0, 0);
    while answered < CALLS {
        let line = lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("{e}: {answered} of {CALLS} answered, then nothing"));
        let value: Value = serde_json::from_slice(&line).expect("JSON-RPC");
        if value.get("method").is_some() {
            continue;
        }
        if value["id"] == "init" {
            init += 1;
            continue;
        }
        let i = value["id"].as_u64().expect("a numeric id") as usize;
        assert_eq!(value["result"]["isError"], false, "{value}");
        seen[i] += 1;
        answered += 1;
        if answered % 100 == 0
            && let Some((rss, threads)) = rss_and_threads(pid)
        {
            peak_rss = peak_rss.max(rss);
            peak_threads = peak_threads.max(threads);
        }
    }
    drop(writer.join().unwrap());
    let status = wait_for(&mut child, PATIENCE).expect("the server exits at end of input");
    assert!(status.success(), "{status:?}");
    // Nothing more came after the last call's answer.
    let extra: Vec<Vec<u8>> = lines.iter().collect();
    reader.join().unwrap();
    assert!(extra.is_empty(), "{} lines more", extra.len());
    assert_eq!(init, 1);
    let wrong: Vec<(usize, u32)> = seen
        .iter()
        .enumerate()
        .filter(|(_, n)| **n != 1)
        .map(|(i, n)| (i, *n))
        .take(10)
        .collect();
    assert!(wrong.is_empty(), "ids not answered exactly once: {wrong:?}");
    eprintln!("read: all answered once; peak RSS {peak_rss} KiB, {peak_threads} threads");
    assert!(peak_rss < RSS_BOUND_KIB, "peak RSS {peak_rss} KiB");
    assert!(peak_threads <= THREADS_BOUND, "{peak_threads} threads");
}

/// A long call is running; `signal` ends the server: exit status 0 within 3 s, and no process
/// of the call alive.
fn signal_ends_a_running_call(server: &mut Child, m: &str, signal: Signal, what: &str) {
    // The server and two processes of the call (a shell or Node.js, and its `sleep`): the
    // `sleep` itself, since what the server starts before it serves (the sandbox's git
    // identity, read at start) holds the marker too.
    support::wait_alive_blocking(m, 3);
    let until = Instant::now() + Duration::from_secs(10);
    while !testkit::census::survivors(m)
        .iter()
        .any(|s| s.cmdline.starts_with("sleep"))
    {
        assert!(
            Instant::now() < until,
            "{what}: the call's sleep never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = rustix::process::Pid::from_raw(server.id() as i32).unwrap();
    let sent = Instant::now();
    rustix::process::kill_process(pid, signal).unwrap();
    let status = wait_for(server, Duration::from_secs(3))
        .unwrap_or_else(|| panic!("{what}: {signal:?} did not end the server within 3 s"));
    assert_eq!(
        status.code(),
        Some(0),
        "{what}: {signal:?} ends with status 0 ({:?} after the signal)",
        sent.elapsed()
    );
    if let Err(left) = testkit::census::check(m, Duration::from_millis(500)) {
        panic!("{what}: {signal:?}: {left}");
    }
}

#[test]
fn sigterm_and_sigint_end_confine_mcp_and_call_promptly_with_the_calls_dead() {
    let node = testkit::node_on_path();
    assert!(node.is_file(), "Node.js is needed for node_process");
    for signal in [Signal::TERM, Signal::INT] {
        for tool in ["run_command", "node_process"] {
            // The workspace's name holds the marker: the server (in its `--root`) and every
            // process of the call (in its working directory) are in the census.
            let m = marker();
            let tmp = tempfile::Builder::new().prefix(&m).tempdir().unwrap();
            let arguments = if tool == "run_command" {
                json!({"command": "sleep 30; :"})
            } else {
                json!({"source": format!(
                    "require('child_process').spawn('sleep', ['30'], {{stdio: 'ignore'}}); \
                     setTimeout(() => {{}}, 30000);"
                )})
            };
            let flags = ["--allow-commands", "--timeout-ms", "60000"];

            // confine mcp, mid-call.
            let mut server = spawn(tmp.path(), &flags);
            let mut stdin = server.stdin.take().unwrap();
            let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": {"name": tool, "arguments": arguments}});
            let input = format!(
                "{}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n{call}\n",
                initialize()
            );
            stdin.write_all(input.as_bytes()).unwrap();
            stdin.flush().unwrap();
            signal_ends_a_running_call(&mut server, &m, signal, &format!("confine mcp, {tool}"));
            drop(stdin);

            // confine call, mid-call.
            let mut call_child = support::spawn_call(
                tmp.path(),
                &[
                    &census_flags()[0],
                    &census_flags()[1],
                    "--allow-commands",
                    "--timeout-ms",
                    "60000",
                ],
            );
            let mut stdin = call_child.stdin.take().unwrap();
            let line = json!({"id": 1, "name": tool, "arguments": arguments});
            writeln!(stdin, "{line}").unwrap();
            stdin.flush().unwrap();
            signal_ends_a_running_call(
                &mut call_child,
                &m,
                signal,
                &format!("confine call, {tool}"),
            );
            drop(stdin);
        }
    }
}

/// Without a call running, and before a session is initialized, a signal ends the server too.
#[test]
fn a_signal_ends_an_idle_or_uninitialized_server_with_status_0() {
    let tmp = workspace();
    for initialized in [false, true] {
        for signal in [Signal::TERM, Signal::INT] {
            let mut server = spawn(tmp.path(), &[]);
            let mut stdin = server.stdin.take().unwrap();
            let mut stdout = BufReader::new(server.stdout.take().unwrap());
            if initialized {
                writeln!(stdin, "{}", initialize()).unwrap();
                let mut line = String::new();
                stdout.read_line(&mut line).unwrap();
                assert!(line.contains("serverInfo"), "{line}");
            } else {
                // Give it time to start listening for signals.
                std::thread::sleep(Duration::from_millis(300));
            }
            let pid = rustix::process::Pid::from_raw(server.id() as i32).unwrap();
            rustix::process::kill_process(pid, signal).unwrap();
            let status = wait_for(&mut server, Duration::from_secs(3))
                .unwrap_or_else(|| panic!("{signal:?} (initialized: {initialized}): no exit"));
            assert_eq!(status.code(), Some(0), "{signal:?}");
            drop(stdin);
        }
    }
}

/// `confine call` waiting for its next line: a signal ends it too.
#[test]
fn a_signal_ends_an_idle_confine_call_with_status_0() {
    let tmp = workspace();
    for signal in [Signal::TERM, Signal::INT] {
        let mut child = support::spawn_call(tmp.path(), &[]);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let line = json!({"id": 1, "name": "read_file", "arguments": {"path": "a.txt"}});
        writeln!(stdin, "{line}").unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        assert!(answer.contains("\"isError\":false"), "{answer}");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let status = wait_for(&mut child, Duration::from_secs(3))
            .unwrap_or_else(|| panic!("{signal:?}: confine call did not exit within 3 s"));
        assert_eq!(status.code(), Some(0), "{signal:?}");
        drop(stdin);
    }
}

/// A client that pipelines calls and reads nothing: the server has stopped reading, answers
/// wait, and a signal still ends it within 3 s with status 0.
#[test]
fn a_signal_ends_a_server_whose_client_does_not_read() {
    let tmp = workspace();
    std::fs::write(tmp.path().join("big.txt"), "x".repeat(12_000)).unwrap();
    for signal in [Signal::TERM, Signal::INT] {
        let mut child = spawn(tmp.path(), &[]);
        let mut stdin = child.stdin.take().unwrap();
        let mut input = format!("{}\n", initialize()).into_bytes();
        for i in 0..3_000 {
            let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                              "params": {"name": "read_file", "arguments": {"path": "big.txt"}}});
            input.extend_from_slice(format!("{call}\n").as_bytes());
        }
        let total = input.len();
        let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writer = std::thread::spawn({
            let written = written.clone();
            move || {
                for chunk in input.chunks(4096) {
                    if stdin.write_all(chunk).is_err() {
                        return;
                    }
                    written.fetch_add(chunk.len(), std::sync::atomic::Ordering::Relaxed);
                }
                // Hold stdin open: the end of input must not be what ends the server.
                std::thread::sleep(Duration::from_secs(10));
            }
        });
        let (mut last, mut still) = (0, 0);
        let until = Instant::now() + Duration::from_secs(60);
        while still < 10 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
            let now = written.load(std::sync::atomic::Ordering::Relaxed);
            (still, last) = if now == last {
                (still + 1, last)
            } else {
                (0, now)
            };
        }
        assert!(last < total, "the server read everything: nothing waits");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let status = wait_for(&mut child, Duration::from_secs(3))
            .unwrap_or_else(|| panic!("{signal:?}: a server with unread answers did not exit"));
        assert_eq!(status.code(), Some(0), "{signal:?}");
        writer.join().unwrap();
    }
}

/// The instructions a model reads at initialization, over the wire.
fn instructions(flags: &[&str]) -> String {
    let tmp = workspace();
    let mut server = spawn(tmp.path(), flags);
    let mut stdin = server.stdin.take().unwrap();
    writeln!(stdin, "{}", initialize()).unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    let status = wait_for(&mut server, PATIENCE).expect("exits at end of input");
    assert!(status.success());
    let value: Value = serde_json::from_str(&line).unwrap();
    value["result"]["instructions"]
        .as_str()
        .expect("instructions")
        .to_owned()
}

#[test]
fn the_instructions_never_claim_unsandboxed_runners_are_confined() {
    const UNCONFINED: &str = "what they run has this server's own access to the machine";
    const ALL_CONFINED: &str = "These tools work inside one directory, the workspace, and \
                                cannot reach outside it.";

    // The default sandboxes the runners; --no-sandbox says they are not confined.
    let default = instructions(&[]);
    assert!(
        default.contains("node_process runs under a kernel sandbox"),
        "{default}"
    );
    assert!(!default.contains(UNCONFINED), "{default}");
    let unconfined = instructions(&["--no-sandbox"]);
    assert!(
        unconfined.contains(&format!(
            "node_process is not confined to the workspace: {UNCONFINED}"
        )),
        "{unconfined}"
    );
    assert!(!unconfined.contains(ALL_CONFINED), "{unconfined}");

    let commands = instructions(&["--allow-commands", "--no-sandbox"]);
    assert!(
        commands.contains(&format!(
            "node_process and run_command are not confined to the workspace: {UNCONFINED}"
        )),
        "{commands}"
    );
    assert!(!commands.contains(ALL_CONFINED), "{commands}");

    let sandboxed = instructions(&["--sandbox", "--allow-commands"]);
    assert!(
        sandboxed.contains("node_process and run_command run under a kernel sandbox"),
        "{sandboxed}"
    );
    assert!(!sandboxed.contains(UNCONFINED), "{sandboxed}");

    let read_only = instructions(&["--read-only"]);
    assert!(read_only.starts_with(ALL_CONFINED), "{read_only}");
    assert!(!read_only.contains("node_process"), "{read_only}");
    assert!(!read_only.contains(UNCONFINED), "{read_only}");
}
