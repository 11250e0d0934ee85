//! The scan attacks, replayed from outside through `confine mcp`: a `grep` the regex engine can
//! only crawl through (256 MiB of `a`/`b` lines) and a `read_lines` past 256 MiB of empty
//! lines, each cancelled with `notifications/cancelled` as soon as the server first reads the
//! file. The scan must stop: the file is read no more (inotify `IN_ACCESS`, watched from
//! outside) after a grace of 200 ms, over a quiet second; and the same server answers the next
//! call. Before scans checked cancellation inside a file, both went on reading to the end.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rustix::fs::inotify;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

const MIB: usize = 1 << 20;

async fn connect(root: &Path) -> Client {
    #[allow(clippy::disallowed_methods)] // reason: the test drives the built binary itself
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_confine"));
    cmd.arg("mcp")
        .arg("--root")
        .arg(root)
        .arg("--read-only")
        .env("CONFINE_LOG", "warn");
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn confine mcp");
    ().serve(transport).await.expect("initialize")
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

/// How many `IN_ACCESS` events wait on `fd` (non-blocking).
fn drain(fd: &std::os::fd::OwnedFd) -> usize {
    let mut buf = [0u8; 4096];
    let mut events = 0;
    // Bounded: each read takes events that happened before it; a quiet file ends it.
    for _ in 0..100_000 {
        match rustix::io::read(fd, &mut buf) {
            Ok(n) if n > 0 => events += 1,
            _ => return events,
        }
    }
    events
}

/// Call `name` on `client`, cancel it once `watched` is first read, and check that the server
/// reads it no more.
async fn cancel_stops_the_scan(client: &Client, watched: &Path, name: &str, arguments: Value) {
    let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&fd, watched, inotify::WatchFlags::ACCESS).unwrap();
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments));
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("send the call");
    let started = Instant::now();
    while drain(&fd) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{name}: the file was never read"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Still reading: the call has not ended by itself (else this test would prove nothing).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(drain(&fd) > 0, "{name}: the scan ended before the cancel");
    handle
        .cancel(Some("test".into()))
        .await
        .expect("send notifications/cancelled");
    tokio::time::sleep(Duration::from_millis(200)).await;
    drain(&fd);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = drain(&fd);
    assert_eq!(
        after, 0,
        "{name}: the file was still read a second after the cancel"
    );
}

/// `bytes` of lines of `a` and `b` (xorshift's top bit): for `a[ab]{20}[^ab\n]` the regex
/// engine cannot use a literal and its lazy DFA gives up (too many states), so a search crawls.
fn ab_lines(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    while out.len() < bytes {
        for _ in 0..99 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push(if x >> 63 == 0 { b'a' } else { b'b' });
        }
        out.push(b'\n');
    }
    out
}

#[tokio::test]
async fn mcp_cancel_stops_a_grep_and_a_read_lines_inside_one_file() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("ab.txt"), ab_lines(256 * MIB)).unwrap();
    std::fs::write(root.path().join("newlines.txt"), vec![b'\n'; 256 * MIB]).unwrap();
    std::fs::write(root.path().join("a.txt"), "still here").unwrap();
    let client = connect(root.path()).await;
    cancel_stops_the_scan(
        &client,
        &root.path().join("ab.txt"),
        "grep",
        json!({"pattern": "a[ab]{20}[^ab\\n]", "path": "ab.txt"}),
    )
    .await;
    cancel_stops_the_scan(
        &client,
        &root.path().join("newlines.txt"),
        "read_lines",
        json!({"path": "newlines.txt", "offset": 1_000_000_000u64}),
    )
    .await;
    let read = client
        .call_tool(
            CallToolRequestParams::new("read_file").with_arguments(args(json!({"path": "a.txt"}))),
        )
        .await
        .expect("the server answers on");
    assert_eq!(
        read.structured_content.expect("a record")["content"],
        "still here"
    );
    client.cancel().await.expect("close");
}
