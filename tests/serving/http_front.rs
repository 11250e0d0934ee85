//! `confine mcp --http`: MCP over Streamable HTTP, driven from outside by a small HTTP/1.1
//! client of this file (one connection per request, `Connection: close`), so every status and
//! header the server sends is seen as it is.
//!
//! Flags and token (exit 2 with one line), bearer authentication (`401` with
//! `WWW-Authenticate: Bearer`; the token never in stderr nor in an answer), Host and Origin
//! (`403`), the 4 MiB body bound (at N and N+1), the 64-session bound (64 and 65), idle
//! sessions ended with their runs and jobs, a dropped request stream cancelling its call,
//! `notifications/cancelled`, run_command's progress as SSE events, and SIGTERM/SIGINT (exit
//! 0, every process dead). The lifetime checks use the process census.

use crate::support;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{census_flags, confine, marker};

const TOKEN: &str = "test-token-6f1d2c8a9b7e4f30a5c1d2e3f4a5b6c7";
const PROTOCOL: &str = "2025-06-18";

/// A running `confine mcp --http 127.0.0.1:0` and what it wrote on stderr.
struct Server {
    child: Child,
    port: u16,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Start with `flags` after `--root ROOT --http 127.0.0.1:0`, `CONFINE_HTTP_TOKEN=TOKEN`
    /// unless `env` names it, and the census mark on its children.
    fn start(root: &Path, flags: &[&str], env: &[(&str, &str)]) -> Server {
        let mut command = confine();
        command
            .args(["mcp", "--root"])
            .arg(root)
            .args(["--http", "127.0.0.1:0"])
            .args(census_flags())
            .args(flags)
            .env("CONFINE_HTTP_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let mut reader = BufReader::new(child.stderr.take().unwrap());
        let kept = stderr.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                kept.lock().unwrap().push_str(&line);
                if let Some(rest) = line.strip_prefix("listening on http://127.0.0.1:") {
                    let port: u16 = rest.split('/').next().unwrap().parse().unwrap();
                    let _ = tx.send((port, line.clone()));
                }
                line.clear();
            }
        });
        let (port, _) = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no listening line: {}", stderr.lock().unwrap()));
        Server {
            child,
            port,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Send `signal` and expect exit status 0 within 5 s.
    fn end_with(mut self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{signal:?}: {status}");
                return;
            }
            assert!(Instant::now() < deadline, "not ended by {signal:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP answer: status, headers (names lower-case), body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of the body (SSE `data:` lines, or the JSON body itself).
    fn messages(&self) -> Vec<Value> {
        if self.body.trim_start().starts_with('{') {
            return vec![serde_json::from_str(&self.body).unwrap()];
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    }

    /// The response with `id` among the messages.
    fn response(&self, id: &Value) -> Value {
        self.messages()
            .into_iter()
            .find(|m| &m["id"] == id && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no response {id} in {self:?}"))
    }
}

/// Write one request to a new connection; the stream, to read the answer from.
fn send(port: u16, method: &str, headers: &[(&str, &str)], body: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = format!("{method} /mcp HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    // The server may answer (413, 401) before it has read everything.
    let _ = stream.write_all(body);
    stream
}

/// Read a whole answer (to the end of the connection; chunked bodies decoded).
fn read_answer(stream: TcpStream) -> Answer {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status: u16 = line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.to_ascii_lowercase(), v.trim().to_owned()));
    }
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        let _ = reader.read_to_end(&mut body);
    }
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn request(port: u16, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    read_answer(send(port, method, headers, body))
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// POST a JSON-RPC message with the token (and a session's id when given).
fn post(port: u16, session: Option<&str>, message: &Value) -> Answer {
    let auth = bearer();
    let mut headers = vec![
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", PROTOCOL),
    ];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
    }
    request(port, "POST", &headers, message.to_string().as_bytes())
}

fn initialize_message() -> Value {
    json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "tests/serving/http_front.rs", "version": "0"}}})
}

/// Open an initialized session: its id.
fn open(port: u16) -> String {
    let answer = post(port, None, &initialize_message());
    assert_eq!(answer.status, 200, "{answer:?}");
    let session = answer
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let note = post(
        port,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(note.status, 202, "{note:?}");
    session
}

fn call_message(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    dir
}

#[test]
fn a_session_lists_and_calls_the_tools_and_the_startup_line_says_where() {
    let dir = workspace();
    let server = Server::start(dir.path(), &[], &[]);
    let session = open(server.port);
    let list = post(
        server.port,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    let names: Vec<String> = list.response(&json!(1))["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"read_file".to_owned()), "{names:?}");
    assert!(!names.contains(&"run_command".to_owned()), "{names:?}");
    let read = post(
        server.port,
        Some(&session),
        &call_message(2, "read_file", json!({"path": "a.txt"})),
    );
    let result = &read.response(&json!(2))["result"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["content"], "alpha\n");
    let outside = post(
        server.port,
        Some(&session),
        &call_message(3, "read_file", json!({"path": "../x"})),
    );
    assert_eq!(outside.response(&json!(3))["result"]["isError"], true);
    let stderr = server.stderr();
    let listening: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("listening on "))
        .collect();
    assert_eq!(
        listening,
        [format!("listening on http://127.0.0.1:{}/mcp", server.port)]
    );
    // Another path is not served (with the token; without it, nothing but the health probe
    // is answered: tests/environments/deploy.rs).
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    write!(
        stream,
        "GET /other HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: {}\r\n\
         Connection: close\r\n\r\n",
        server.port,
        bearer()
    )
    .unwrap();
    assert_eq!(read_answer(stream).status, 404);
}

#[test]
fn requests_without_the_token_get_401_and_the_token_is_never_shown() {
    let dir = workspace();
    let server = Server::start(dir.path(), &["--allow-commands"], &[]);
    let body = initialize_message().to_string();
    let wrong = format!("Bearer {}x", TOKEN);
    let short = format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]);
    for auth in [
        None,
        Some("Basic abc"),
        Some(wrong.as_str()),
        Some(&short),
        Some("Bearer "),
    ] {
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(auth) = auth {
            headers.push(("Authorization", auth));
        }
        let answer = request(server.port, "POST", &headers, body.as_bytes());
        assert_eq!(answer.status, 401, "{auth:?}: {answer:?}");
        assert_eq!(
            answer.header("www-authenticate"),
            Some("Bearer"),
            "{answer:?}"
        );
        assert!(answer.header("mcp-session-id").is_none());
    }
    // With it, the same request opens a session; a command that prints its environment
    // does not see the token either.
    let session = open(server.port);
    let run = post(
        server.port,
        Some(&session),
        &call_message(
            1,
            "run_command",
            json!({"command": "env; echo $CONFINE_HTTP_TOKEN"}),
        ),
    );
    let result = run.response(&json!(1));
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert!(!run.body.contains(TOKEN), "{}", run.body);
    let unauthorized = request(server.port, "GET", &[], b"");
    assert!(!unauthorized.body.contains(TOKEN));
    server.end_with(rustix::process::Signal::TERM);
}

#[test]
fn the_token_never_reaches_stderr() {
    let dir = workspace();
    let server = Server::start(dir.path(), &[], &[("CONFINE_LOG", "debug")]);
    let session = open(server.port);
    let _ = post(
        server.port,
        Some(&session),
        &call_message(1, "read_file", json!({"path": "a.txt"})),
    );
    let _ = request(
        server.port,
        "POST",
        &[("Authorization", "Bearer nope")],
        b"{}",
    );
    let stderr = server.stderr();
    assert!(stderr.contains("listening on"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "the token is in stderr:\n{stderr}");
}

/// `confine mcp FLAGS` with `env` (and without CONFINE_HTTP_TOKEN unless given): its exit
/// status and stderr, the server never started.
fn refused(flags: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = confine();
    command
        .arg("mcp")
        .args(flags)
        .env_remove("CONFINE_HTTP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn flags_that_cannot_be_served_are_exit_2_with_one_line() {
    let dir = workspace();
    let root = dir.path().to_str().unwrap();
    let (code, err) = refused(
        &["--root", root, "--http", "0.0.0.0:0"],
        &[("CONFINE_HTTP_TOKEN", TOKEN)],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("not a loopback address") && err.contains("--http-public"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, err) = refused(&["--root", root, "--http", "127.0.0.1:0"], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("CONFINE_HTTP_TOKEN") && err.contains("--http-token-file"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let (code, err) = refused(
        &["--root", root, "--http", "0.0.0.0:0", "--http-no-auth"],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    let inside = dir.path().join("sub/token");
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let (code, err) = refused(
        &[
            "--root",
            root,
            "--http",
            "127.0.0.1:0",
            "--http-token-file",
            inside.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("beneath the workspace root"), "{err}");
    assert!(!inside.exists(), "no token file was made beneath the root");
    // Through a relative path and `..` too.
    let (code, err) = refused(
        &[
            "--root",
            root,
            "--http",
            "127.0.0.1:0",
            "--http-token-file",
            &format!("{root}/sub/../t"),
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    // Without --http, its companions are usage errors.
    let (code, _) = refused(&["--root", root, "--http-no-auth"], &[]);
    assert_eq!(code, Some(2));
}

#[test]
fn a_missing_token_file_is_created_0600_with_a_new_token_and_used() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = workspace();
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("token");
    let path = file.to_str().unwrap().to_owned();
    let mut server = Server::start(dir.path(), &["--http-token-file", &path], &[]);
    // CONFINE_HTTP_TOKEN wins when set; start again without it.
    let _ = server.child.kill();
    let _ = server.child.wait();
    assert!(
        !file.exists(),
        "the token file is not read or made while CONFINE_HTTP_TOKEN is set"
    );
    let mut command = confine();
    command
        .args(["mcp", "--root"])
        .arg(dir.path())
        .args(["--http", "127.0.0.1:0", "--http-token-file", &path])
        .env_remove("CONFINE_HTTP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut port = None;
    let mut seen = String::new();
    for _ in 0..4 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if let Some(rest) = line.strip_prefix("listening on http://127.0.0.1:") {
            port = Some(rest.split('/').next().unwrap().parse::<u16>().unwrap());
            break;
        }
    }
    let port = port.unwrap_or_else(|| panic!("no listening line: {seen}"));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert_eq!(token.len(), 43, "{token}");
    assert!(!seen.contains(&token));
    let auth = format!("Bearer {token}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let body = initialize_message().to_string();
    assert_eq!(request(port, "POST", &headers, body.as_bytes()).status, 200);
    let old = &headers[1..];
    assert_eq!(request(port, "POST", old, body.as_bytes()).status, 401);
    let _ = child.kill();
    let _ = child.wait();
    // An existing file is read, not replaced.
    let server = Server::start(dir.path(), &["--http-token-file", &path], &[]);
    drop(server);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
}

#[test]
fn no_auth_is_served_on_loopback_and_says_so() {
    let dir = workspace();
    let server = Server::start(
        dir.path(),
        &["--http-no-auth"],
        &[("CONFINE_HTTP_TOKEN", "")],
    );
    let stderr = server.stderr();
    assert!(
        stderr.contains(&format!(
            "listening on http://127.0.0.1:{}/mcp (unauthenticated)",
            server.port
        )),
        "{stderr}"
    );
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let body = initialize_message().to_string();
    assert_eq!(
        request(server.port, "POST", &headers, body.as_bytes()).status,
        200
    );
}

#[test]
fn foreign_hosts_and_origins_get_403() {
    let dir = workspace();
    let server = Server::start(dir.path(), &[], &[]);
    let port = server.port;
    let body = initialize_message().to_string();
    let auth = bearer();
    let with = |extra: &[(&str, &str)]| {
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        request(port, "POST", &headers, body.as_bytes()).status
    };
    let local = format!("localhost:{port}");
    let other_port = format!("127.0.0.1:{}", port.wrapping_add(1));
    assert_eq!(with(&[]), 200);
    assert_eq!(with(&[("Host", &local)]), 200);
    assert_eq!(with(&[("Host", "evil.example")]), 403);
    assert_eq!(with(&[("Host", &format!("evil.example:{port}"))]), 403);
    assert_eq!(with(&[("Host", &other_port)]), 403);
    assert_eq!(with(&[("Origin", "http://localhost:5173")]), 200);
    assert_eq!(with(&[("Origin", "http://127.0.0.1")]), 200);
    assert_eq!(with(&[("Origin", "http://[::1]:80")]), 200);
    assert_eq!(with(&[("Origin", "http://evil.example")]), 403);
    assert_eq!(with(&[("Origin", "http://localhost.evil.example")]), 403);
    assert_eq!(with(&[("Origin", "https://localhost")]), 403);
    assert_eq!(with(&[("Origin", "null")]), 403);
}

/// A `ping` padded to exactly `n` bytes.
fn ping_of(n: usize) -> Vec<u8> {
    let head = r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{"pad":""#;
    let tail = r#""}}}"#;
    let mut body = head.as_bytes().to_vec();
    body.resize(n - tail.len(), b'a');
    body.extend_from_slice(tail.as_bytes());
    assert_eq!(body.len(), n);
    body
}

#[test]
fn a_body_of_4_mib_is_served_and_one_byte_more_is_413() {
    const LIMIT: usize = 4 * 1024 * 1024;
    let dir = workspace();
    let server = Server::start(dir.path(), &[], &[]);
    let session = open(server.port);
    let auth = bearer();
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", PROTOCOL),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let at = request(server.port, "POST", &headers, &ping_of(LIMIT));
    assert_eq!(
        at.status,
        200,
        "{}",
        at.body.chars().take(300).collect::<String>()
    );
    assert_eq!(at.response(&json!(7))["result"], json!({}));
    let over = request(server.port, "POST", &headers, &ping_of(LIMIT + 1));
    assert_eq!(over.status, 413, "{over:?}");
}

#[test]
fn sixty_four_sessions_live_and_the_65th_gets_503_until_one_ends() {
    let dir = workspace();
    let server = Server::start(dir.path(), &[], &[]);
    let sessions: Vec<String> = (0..64).map(|_| open(server.port)).collect();
    let refused = post(server.port, None, &initialize_message());
    assert_eq!(refused.status, 503, "{refused:?}");
    // Every one of the 64 still answers.
    let last = post(
        server.port,
        Some(&sessions[63]),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    );
    assert_eq!(last.response(&json!(1))["result"], json!({}));
    // DELETE ends one; then one more opens.
    let auth = bearer();
    let deleted = request(
        server.port,
        "DELETE",
        &[
            ("Authorization", &auth),
            ("Mcp-Session-Id", &sessions[0]),
            ("MCP-Protocol-Version", PROTOCOL),
        ],
        b"",
    );
    assert!(deleted.status / 100 == 2, "{deleted:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let again = post(server.port, None, &initialize_message());
        if again.status == 200 {
            break;
        }
        assert_eq!(again.status, 503);
        assert!(
            Instant::now() < deadline,
            "no session opened after a DELETE"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A run_command that sleeps for a minute, marked with `m`.
fn sleeper(m: &str) -> Value {
    json!({"command": format!("sleep 60; : {m}")})
}

#[test]
fn an_idle_session_ends_with_its_runs_and_jobs() {
    let dir = workspace();
    let server = Server::start(
        dir.path(),
        &["--allow-commands"],
        &[("CONFINE_HTTP_IDLE_MS", "1500")],
    );
    let m = marker();
    let session = open(server.port);
    let mut job = sleeper(&m);
    job["background"] = json!(true);
    let started = post(
        server.port,
        Some(&session),
        &call_message(1, "run_command", job),
    );
    let record = &started.response(&json!(1))["result"]["structuredContent"];
    assert!(record["jobId"].is_string(), "{record}");
    // A call that is still running when the session goes idle.
    let _running = send(
        server.port,
        "POST",
        &[
            ("Authorization", &bearer()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", PROTOCOL),
            ("Mcp-Session-Id", &session),
        ],
        call_message(2, "run_command", sleeper(&m))
            .to_string()
            .as_bytes(),
    );
    support::wait_alive_blocking(&m, 2);
    // Idle for 1.5 s, then rmcp's drain of at most 5 s: dead within 15 s on a loaded machine.
    testkit::census::check(&m, Duration::from_secs(15)).unwrap();
    let gone = post(
        server.port,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    );
    assert_eq!(gone.status, 404, "{gone:?}");
}

#[test]
fn a_dropped_request_stream_cancels_its_call() {
    let dir = workspace();
    let server = Server::start(dir.path(), &["--allow-commands"], &[]);
    let m = marker();
    let session = open(server.port);
    let auth = bearer();
    let stream = send(
        server.port,
        "POST",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", PROTOCOL),
            ("Mcp-Session-Id", &session),
        ],
        call_message(
            1,
            "run_command",
            json!({"command": format!("(setsid sh -c 'sleep 60; : {m}' &); sleep 60; : {m}")}),
        )
        .to_string()
        .as_bytes(),
    );
    support::wait_alive_blocking(&m, 2);
    drop(stream);
    testkit::census::check(&m, Duration::from_secs(10)).unwrap();
    // The session goes on.
    let ping = post(
        server.port,
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    );
    assert_eq!(ping.response(&json!(2))["result"], json!({}));
}

#[test]
fn notifications_cancelled_ends_the_call_and_its_processes() {
    let dir = workspace();
    let server = Server::start(dir.path(), &["--allow-commands"], &[]);
    let m = marker();
    let session = open(server.port);
    let auth = bearer();
    let stream = send(
        server.port,
        "POST",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", PROTOCOL),
            ("Mcp-Session-Id", &session),
        ],
        call_message(5, "run_command", sleeper(&m))
            .to_string()
            .as_bytes(),
    );
    support::wait_alive_blocking(&m, 1);
    let note = post(
        server.port,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}),
    );
    assert_eq!(note.status, 202, "{note:?}");
    testkit::census::check(&m, Duration::from_secs(5)).unwrap();
    drop(stream);
}

#[test]
fn run_command_progress_arrives_as_sse_events_before_the_result() {
    let dir = workspace();
    let server = Server::start(dir.path(), &["--allow-commands"], &[]);
    let session = open(server.port);
    let message = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "run_command", "_meta": {"progressToken": "p9"},
        "arguments": {"command": "echo first; sleep 1.5; echo second; sleep 1.5"}}});
    let answer = post(server.port, Some(&session), &message);
    let messages = answer.messages();
    let result_at = messages
        .iter()
        .position(|m| m["id"] == 9)
        .unwrap_or_else(|| panic!("no result: {answer:?}"));
    let progress: Vec<&Value> = messages[..result_at]
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{answer:?}");
    for p in &progress {
        assert_eq!(p["params"]["progressToken"], "p9");
    }
    assert!(
        messages[result_at + 1..]
            .iter()
            .all(|m| m["method"] != "notifications/progress"),
        "no progress after the result"
    );
    assert_eq!(
        messages[result_at]["result"]["structuredContent"]["exitCode"],
        0
    );
}

#[test]
fn sigterm_and_sigint_cancel_running_calls_and_jobs_and_exit_0() {
    use rustix::process::Signal;
    for signal in [Signal::TERM, Signal::INT] {
        let dir = workspace();
        let server = Server::start(dir.path(), &["--allow-commands"], &[]);
        let m = marker();
        let session = open(server.port);
        let mut job = sleeper(&m);
        job["background"] = json!(true);
        let started = post(
            server.port,
            Some(&session),
            &call_message(1, "run_command", job),
        );
        assert!(started.response(&json!(1))["result"]["structuredContent"]["jobId"].is_string());
        let _running = send(
            server.port,
            "POST",
            &[
                ("Authorization", &bearer()),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", PROTOCOL),
                ("Mcp-Session-Id", &session),
            ],
            call_message(2, "run_command", sleeper(&m))
                .to_string()
                .as_bytes(),
        );
        support::wait_alive_blocking(&m, 2);
        server.end_with(signal);
        testkit::census::check(&m, Duration::from_secs(3)).unwrap();
    }
}

/// POST a stateless (2026-07-28) `tools/call` of `name` with the token.
fn stateless_call(port: u16, id: u64, name: &str, arguments: Value) -> Value {
    let auth = bearer();
    let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let answer = request(
        port,
        "POST",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ],
        message.to_string().as_bytes(),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.header("mcp-session-id").is_none(), "{answer:?}");
    answer.response(&json!(id))["result"]["structuredContent"].clone()
}

fn job_ids(record: &Value) -> Vec<String> {
    record["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("{record}"))
        .iter()
        .map(|j| j["jobId"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn stateless_requests_are_served_and_share_jobs_that_sessions_do_not_see() {
    let dir = workspace();
    let server = Server::start(dir.path(), &["--allow-commands"], &[]);
    let m = marker();
    let read = stateless_call(server.port, 1, "read_file", json!({"path": "a.txt"}));
    assert_eq!(read["content"], "alpha\n", "{read}");
    let mut job = sleeper(&m);
    job["background"] = json!(true);
    let started = stateless_call(server.port, 2, "run_command", job.clone());
    let stateless_job = started["jobId"].as_str().expect("a jobId").to_owned();
    // A later stateless request sees it: one registry for every stateless request.
    let listed = stateless_call(server.port, 3, "job_list", json!({}));
    assert_eq!(job_ids(&listed), std::slice::from_ref(&stateless_job));
    // A session has jobs of its own, and another session does not see them.
    let a = open(server.port);
    let b = open(server.port);
    let in_a = post(server.port, Some(&a), &call_message(4, "run_command", job));
    assert!(in_a.response(&json!(4))["result"]["structuredContent"]["jobId"].is_string());
    let list = |session: &str| {
        let answer = post(
            server.port,
            Some(session),
            &call_message(5, "job_list", json!({})),
        );
        job_ids(&answer.response(&json!(5))["result"]["structuredContent"])
    };
    assert_eq!(list(&a).len(), 1);
    assert!(list(&b).is_empty(), "{:?}", list(&b));
    assert_eq!(
        job_ids(&stateless_call(server.port, 6, "job_list", json!({}))),
        [stateless_job]
    );
    support::wait_alive_blocking(&m, 2);
    // Ending a session with DELETE kills its job; the stateless one runs on.
    let auth = bearer();
    let deleted = request(
        server.port,
        "DELETE",
        &[
            ("Authorization", &auth),
            ("Mcp-Session-Id", &a),
            ("MCP-Protocol-Version", PROTOCOL),
        ],
        b"",
    );
    assert!(deleted.status / 100 == 2, "{deleted:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while support::alive(&m).len() > 1 {
        assert!(
            Instant::now() < deadline,
            "the session's job outlived its DELETE"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The server's end kills the stateless job too.
    server.end_with(rustix::process::Signal::TERM);
    testkit::census::check(&m, Duration::from_secs(3)).unwrap();
}

#[test]
fn a_public_server_on_every_address_accepts_any_host_naming_its_port() {
    let dir = workspace();
    let mut child = confine()
        .args(["mcp", "--root"])
        .arg(dir.path())
        .args(["--http", "0.0.0.0:0", "--http-public"])
        .env("CONFINE_HTTP_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut port = None;
    for _ in 0..4 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(rest) = line.strip_prefix("listening on http://0.0.0.0:") {
            port = Some(rest.split('/').next().unwrap().parse::<u16>().unwrap());
            break;
        }
    }
    let port = port.expect("a listening line on 0.0.0.0");
    let body = initialize_message().to_string();
    let auth = bearer();
    let status = |host: &str| {
        let headers = [
            ("Host", host),
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        request(port, "POST", &headers, body.as_bytes()).status
    };
    assert_eq!(status(&format!("127.0.0.1:{port}")), 200);
    assert_eq!(status(&format!("build-host.internal:{port}")), 200);
    assert_eq!(status("build-host.internal"), 403);
    assert_eq!(
        status(&format!("build-host.internal:{}", port.wrapping_add(1))),
        403
    );
    // The token is still needed.
    let headers = [("Host", "127.0.0.1"), ("Content-Type", "application/json")];
    let local = format!("127.0.0.1:{port}");
    let no_token = [("Host", local.as_str()), headers[1]];
    assert_eq!(
        request(port, "POST", &no_token, body.as_bytes()).status,
        401
    );
    let _ = child.kill();
    let _ = child.wait();
}
