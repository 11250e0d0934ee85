//! Stalls against `confine mcp --http`: connections that have not authenticated, sending
//! nothing or a byte at a time, cannot delay a client with the token. Each attack stands
//! beside that client, which must be answered in a few seconds (a generous bound, under the
//! ten seconds a head may take, so passing it shows the client did not wait for the stall).
//!
//! The proxy's own stalls (a run at its bound of connections, heads that never come) are
//! tested in `crates/netpolicy/tests/it/stalls.rs`.

use crate::support;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{census_flags, confine};

const TOKEN: &str = "stall-token-0b8e5d1c7a2f4e6b9c3d5a7f1e2b4c6d";
/// Bounds a test that went wrong; it times nothing.
const PATIENCE: Duration = Duration::from_secs(30);
/// How long a client with the token may wait for its answer beside a stall.
const PROMPT: Duration = Duration::from_secs(5);

/// A running `confine mcp --http 127.0.0.1:0`.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(root: &Path) -> Server {
        let mut server = confine();
        server
            .args(["mcp", "--root"])
            .arg(root)
            .args(["--http", "127.0.0.1:0"])
            .args(census_flags())
            .env("CONFINE_HTTP_TOKEN", TOKEN);
        let (child, port) = support::spawn_http(server);
        Server { child, port }
    }

    fn connect(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.port)).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An `initialize` with the token, keeping the connection open.
fn initialize(port: u16, id: u64) -> Vec<u8> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "tests/redteam/http_stalls.rs", "version": "0"}}})
    .to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one answer off a connection (its body by length or by chunks); its status and body.
fn read_answer(reader: &mut BufReader<TcpStream>) -> (u16, String) {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {line:?}"));
    let (mut length, mut chunked) = (0usize, false);
    // A head of at most 100 lines.
    for _ in 0..100 {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        chunked |= l.starts_with("transfer-encoding:") && l.contains("chunked");
    }
    let mut body = Vec::new();
    if chunked {
        // At most 1000 chunks.
        for _ in 0..1000 {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        let mut all = vec![0; length];
        reader.read_exact(&mut all).unwrap();
        body = all;
    }
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A client with the token: a new connection, an `initialize`, its answer. Asserts a 200
/// within [`PROMPT`] (the read itself gives up after [`PATIENCE`]).
fn client_with_the_token(server: &Server) {
    let started = Instant::now();
    let mut stream = server.connect();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.write_all(&initialize(server.port, 1)).unwrap();
    let (status, body) = read_answer(&mut BufReader::new(stream));
    let took = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("serverInfo"), "{body}");
    assert!(took < PROMPT, "answered after {took:?}");
}

/// Whether the server has closed `stream` within `wait` (an end of stream or a reset).
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 1024];
    // Each pass reads something or ends; at most 64 of them (a short answer, then the end).
    for _ in 0..64 {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
    false
}

/// 256 connections each send one byte of a request and nothing more (today they held every
/// place for 60 s, renewably); a client with the token is answered at once.
#[test]
fn a_byte_from_each_of_256_connections_does_not_delay_a_client_with_the_token() {
    let root = tempfile::tempdir().unwrap();
    let server = Server::start(root.path());
    let mut loris = Vec::new();
    for _ in 0..256 {
        let mut stream = server.connect();
        stream.write_all(b"P").unwrap();
        loris.push(stream);
    }
    client_with_the_token(&server);
}

/// 64 connections that send nothing wait beside each other; the 65th takes the place of the
/// oldest, which is closed, and the others stay.
#[test]
fn the_65th_unauthenticated_connection_takes_the_oldest_ones_place() {
    let root = tempfile::tempdir().unwrap();
    let server = Server::start(root.path());
    let mut waiting: Vec<TcpStream> = (0..64).map(|_| server.connect()).collect();
    // At the bound: the server has taken all 64 in (its accepts are in order) and keeps them.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !closed_within(&mut waiting[0], Duration::from_millis(300)),
        "64 may wait"
    );
    let _newest = server.connect();
    assert!(
        closed_within(&mut waiting[0], PATIENCE),
        "the oldest gives way"
    );
    assert!(
        !closed_within(&mut waiting[1], Duration::from_millis(300)),
        "only the oldest gives way"
    );
    client_with_the_token(&server);
}

/// A connection that sends a request head a byte a second is closed about ten seconds after
/// it came, however many bytes it sent; a client with the token is answered meanwhile.
#[test]
fn a_head_dribbled_a_byte_a_second_is_closed_after_10_s() {
    let root = tempfile::tempdir().unwrap();
    let server = Server::start(root.path());
    let started = Instant::now();
    let mut dribble = server.connect();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Pad: {}",
        server.port,
        "p".repeat(64)
    );
    let mut closed = false;
    // One byte a second, at most 30; each pass waits a second for the close.
    for (i, byte) in head.as_bytes().iter().take(30).enumerate() {
        if dribble.write_all(std::slice::from_ref(byte)).is_err()
            || closed_within(&mut dribble, Duration::from_secs(1))
        {
            closed = true;
            break;
        }
        if i == 2 {
            client_with_the_token(&server);
        }
    }
    let took = started.elapsed();
    assert!(closed, "still open after {took:?}");
    assert!(
        took >= Duration::from_millis(9500) && took < Duration::from_secs(25),
        "closed after {took:?}"
    );
}

/// The twin: a connection that has authenticated keeps its place while 100 newer
/// connections that send a byte each come and go; its next request is answered.
#[test]
fn an_authenticated_connection_is_not_crowded_out() {
    let root = tempfile::tempdir().unwrap();
    let server = Server::start(root.path());
    let stream = server.connect();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    writer.write_all(&initialize(server.port, 1)).unwrap();
    let (status, body) = read_answer(&mut reader);
    assert_eq!(status, 200, "{body}");
    let mut loris = Vec::new();
    for _ in 0..100 {
        let mut stream = server.connect();
        stream.write_all(b"P").unwrap();
        loris.push(stream);
    }
    // The oldest of the newcomers gave way (so the room was full), not the authenticated one.
    assert!(closed_within(&mut loris[0], PATIENCE), "the room was full");
    writer.write_all(&initialize(server.port, 2)).unwrap();
    let (status, body) = read_answer(&mut reader);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("serverInfo"), "{body}");
}
