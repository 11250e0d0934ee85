//! git's network work under the default sandbox, as an everyday task: a repository the user
//! serves on the host's loopback by git's dumb HTTP protocol (`git update-server-info`, then
//! plain files from a small static server of the test's own), cloned and fetched by
//! `run_command` with `--allow-net 127.0.0.1:PORT`. The children reach the host only through
//! the server's proxy (`http_proxy`, which git honours); the twin without `--allow-net`
//! cannot clone, and nothing reached the server.
//!
//! The children's `NO_PROXY` names the loopback addresses (a run's own loopback, where a
//! job's server is reached directly), so a client sends `127.0.0.1` past the proxy, to the
//! run's own loopback, where the host's server is not: the clone clears `NO_PROXY` to go
//! through the proxy, and the first step shows what happens when it does not.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support;
use support::{call_lines, census_flags};

/// The host's `git <args>` in `dir` (outside any sandbox, no user configuration); panics
/// unless it exits 0.
fn host_git(dir: &Path, args: &[&str]) -> String {
    // The user's own git on the host, not a tool's child process.
    #[allow(clippy::disallowed_methods)]
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn have_git(test: &str) -> bool {
    // The user's own git on the host, asked whether it is there.
    #[allow(clippy::disallowed_methods)]
    let found = std::process::Command::new("git")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        testkit::not_run(test, "no git on PATH");
    }
    found
}

/// A static file server on 127.0.0.1 for `dir` (GET and HEAD, one request a connection), for
/// at most `LIFE` and `MAX_REQUESTS` requests; it counts what it answered.
struct StaticServer {
    port: u16,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

const LIFE: Duration = Duration::from_secs(120);
const MAX_REQUESTS: usize = 1000;

impl StaticServer {
    fn new(dir: PathBuf) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopped) = (Arc::clone(&requests), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let end = Instant::now() + LIFE;
            while !stopped.load(Ordering::Relaxed)
                && Instant::now() < end
                && count.load(Ordering::Relaxed) < MAX_REQUESTS
            {
                match listener.accept() {
                    Ok((stream, _)) => {
                        count.fetch_add(1, Ordering::Relaxed);
                        serve_one(&dir, stream);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self {
            port,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One request on `stream`: the file beneath `dir` its path names (no `..`), or 404.
fn serve_one(dir: &Path, stream: std::net::TcpStream) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(&stream);
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    // The rest of the head, at most 100 lines.
    for _ in 0..100 {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(n) if n > 2 => continue,
            _ => break,
        }
    }
    let mut parts = first.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    // A proxy forwards the absolute form (`http://host:port/path`).
    let path = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let path = path.split('?').next().unwrap_or("");
    let file = (!path.split('/').any(|c| c == ".."))
        .then(|| std::fs::read(dir.join(path.trim_start_matches('/'))).ok())
        .flatten();
    let mut out = &stream;
    let _ = match file {
        Some(body) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                body.len()
            );
            out.write_all(head.as_bytes()).and_then(|()| match method {
                "HEAD" => Ok(()),
                _ => out.write_all(&body),
            })
        }
        None => out
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
}

/// One run_command through `confine call --root ws <flags>` (git without the user's
/// configuration); its record.
fn run(ws: &Path, flags: &[&str], command: &str) -> Value {
    let line = json!({"id": 1, "name": "run_command",
        "arguments": {"command": command, "timeoutMs": 60_000}});
    let mut all = vec![
        "--allow-commands",
        "--env",
        "GIT_CONFIG_GLOBAL=/dev/null",
        "--env",
        "GIT_CONFIG_NOSYSTEM=1",
    ];
    all.extend_from_slice(flags);
    let census = census_flags();
    all.extend(census.iter().map(String::as_str));
    call_lines(ws, &all, &format!("{line}\n")).remove(0)
}

fn stdout(record: &Value) -> String {
    assert_eq!(record["isError"], false, "{record}");
    record["content"]["stdout"].as_str().unwrap().to_owned()
}

/// A bare repository `r.git` the user serves by dumb HTTP: one commit holding `f.txt`.
fn served_repository(top: &Path) -> PathBuf {
    let work = top.join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("f.txt"), "from the host\n").unwrap();
    host_git(&work, &["init", "-q"]);
    host_git(&work, &["add", "f.txt"]);
    host_git(&work, &["commit", "-qm", "one"]);
    let served = top.join("served");
    std::fs::create_dir(&served).unwrap();
    host_git(top, &["clone", "-q", "--bare", "work", "served/r.git"]);
    host_git(&served.join("r.git"), &["update-server-info"]);
    served
}

#[test]
fn git_clone_and_fetch_over_http_from_an_allowed_host_work_under_the_sandbox() {
    const TEST: &str = "git_clone_and_fetch_over_http_from_an_allowed_host_work_under_the_sandbox";
    if !have_git(TEST) {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let served = served_repository(top.path());
    let server = StaticServer::new(served);
    let port = server.port;
    let url = format!("http://127.0.0.1:{port}/r.git");
    let allowed = format!("127.0.0.1:{port}");
    let clone =
        format!("NO_PROXY= no_proxy= git clone -q {url} c 2>&1; echo clone=$?; cat c/f.txt");

    // As the children's NO_PROXY has it, git goes to the run's own loopback: nothing there.
    let ws = tempfile::tempdir().unwrap();
    let direct = format!("git clone -q {url} c >/dev/null 2>&1; echo clone=$?");
    let record = run(ws.path(), &["--allow-net", &allowed], &direct);
    assert_eq!(stdout(&record), "clone=128\n", "{record}");
    assert_eq!(server.requests(), 0);

    // Through the proxy: the clone works, and a fetch brings the user's next commit.
    let record = run(ws.path(), &["--allow-net", &allowed], &clone);
    assert_eq!(stdout(&record), "clone=0\nfrom the host\n", "{record}");
    assert!(ws.path().join("c/f.txt").is_file());
    let after_clone = server.requests();
    assert!(after_clone > 0);
    let work = top.path().join("work");
    std::fs::write(work.join("g.txt"), "later\n").unwrap();
    host_git(&work, &["add", "g.txt"]);
    host_git(&work, &["commit", "-qm", "two"]);
    let bare = top.path().join("served/r.git");
    host_git(&work, &["push", "-q", bare.to_str().unwrap(), "HEAD"]);
    host_git(&bare, &["update-server-info"]);
    let fetch = "cd c && NO_PROXY= no_proxy= git fetch -q origin 2>&1; echo fetch=$?; \
                 git log --format=%s FETCH_HEAD";
    let record = run(ws.path(), &["--allow-net", &allowed], fetch);
    assert_eq!(stdout(&record), "fetch=0\ntwo\none\n", "{record}");
    // Sent with its run's credentials (git waits for a challenge unless told), the request
    // is in the run's record.
    let record = run(
        ws.path(),
        &["--allow-net", &allowed],
        "cd c && NO_PROXY= no_proxy= git -c http.proxyAuthMethod=basic fetch -q origin 2>&1; \
         echo fetch=$?",
    );
    assert_eq!(stdout(&record), "fetch=0\n", "{record}");
    assert_eq!(
        record["content"]["network"],
        json!([{"host": "127.0.0.1", "port": port, "allowed": true}]),
        "{record}"
    );

    // The twin: the same clone without `--allow-net` is refused by the proxy, and nothing
    // reached the server.
    let before = server.requests();
    let ws = tempfile::tempdir().unwrap();
    let refused = format!(
        "NO_PROXY= no_proxy= git -c http.proxyAuthMethod=basic clone -q {url} c 2>&1; \
         echo clone=$?"
    );
    let record = run(ws.path(), &[], &refused);
    let said = stdout(&record);
    assert!(said.ends_with("clone=128\n"), "{record}");
    assert!(said.contains("403"), "{record}");
    assert_eq!(
        record["content"]["network"],
        json!([{"host": "127.0.0.1", "port": port, "allowed": false,
                "reason": "not on the allow list"}]),
        "{record}"
    );
    assert!(!ws.path().join("c/f.txt").exists());
    assert_eq!(server.requests(), before);
}
