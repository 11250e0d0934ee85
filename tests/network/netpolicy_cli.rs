//! The network policy end to end, through the built `confine call`, as attacks: listeners of
//! the test's own on the host's loopback (TCP and UDP) probed from children directly and
//! through the proxy under each kind of entry, the proxy's refusals read as a client reads
//! them, the child's environment, its own loopback, and the records' `network` decisions.
//! Each probe that must fail has a twin that shows it succeeds without the policy.
//!
//! The probes are Node.js scripts run by `run_command` (`node -e …`) printing one JSON line.
//! A proxy request is made by hand (`CONNECT host:port` with the credentials of
//! `HTTPS_PROXY`), so the test sees exactly what a client sees. The mechanism is the best this
//! system gives, and with `CONFINE_NETWORK_MECHANISM=landlock` the weaker one.

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support;
use support::census_flags;

/// Generous bounds for a loaded machine.
const RUN_MS: u64 = 60_000;

/// Probe helpers: `say` prints one JSON value and exits; `viaProxy(target, send)` makes a
/// CONNECT through the proxy of `HTTPS_PROXY` and says `{status, reply}`.
const JS: &str = r#"
const net = require('net'), dgram = require('dgram');
const say = (v) => { console.log(JSON.stringify(v)); process.exit(0); };
setTimeout(() => say('timeout'), 15000);
function viaProxy(target, send) {
  const p = new URL(process.env.HTTPS_PROXY);
  const auth = Buffer.from(decodeURIComponent(p.username) + ':' + decodeURIComponent(p.password)).toString('base64');
  const s = net.connect(Number(p.port), p.hostname);
  let buf = '', status = null;
  s.on('data', (d) => {
    buf += d;
    if (status === null && buf.includes('\r\n\r\n')) {
      status = Number(buf.split(' ')[1]);
      const body = buf.slice(buf.indexOf('\r\n\r\n') + 4);
      if (status === 200) { buf = ''; s.write(send); } else { say({status, body: body.trim()}); }
    } else if (status === 200) { say({status, reply: buf}); }
  });
  s.on('end', () => say({status, body: buf.trim()}));
  s.on('error', (e) => say({error: e.code}));
  s.write('CONNECT ' + target + ' HTTP/1.1\r\nHost: ' + target + '\r\nProxy-Authorization: Basic ' + auth + '\r\n\r\n');
}
"#;

/// One `run_command` call line running `node -e <JS + source>`.
fn node_call(id: u64, source: &str) -> String {
    let script = format!("{JS}\n{source}");
    let command = format!("node -e {}", shell_quote(&script));
    json!({"id": id, "name": "run_command", "arguments": {"command": command, "timeoutMs": RUN_MS}})
        .to_string()
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `confine call --allow-commands <flags>` over `root` with `lines`; the answers' contents.
fn call(root: &Path, flags: &[&str], env: &[(&str, &str)], lines: &[String]) -> Vec<Value> {
    let mut cmd = support::confine();
    cmd.args([
        "call",
        "--allow-commands",
        "--command-max-timeout-ms",
        "120000",
        "--root",
    ])
    .arg(root)
    .args(census_flags())
    .args(flags)
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().unwrap();
    let input = lines.join("\n") + "\n";
    support::finish_with_input(child, &input)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["content"].clone())
        .collect()
}

/// What the probe said (its stdout's last line, parsed).
fn said(content: &Value) -> Value {
    let stdout = content["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("{content}"));
    let line = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no output: {content}"));
    serde_json::from_str(line).unwrap_or_else(|_| panic!("{content}"))
}

/// A TCP listener of the test's own on the host's loopback that counts connections and
/// answers `pong` to whatever it reads.
struct Target {
    port: u16,
    connections: Arc<AtomicUsize>,
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl Target {
    fn new() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (c, b) = (connections.clone(), bytes.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(64) {
                let Ok(mut stream) = stream else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let b = b.clone();
                std::thread::spawn(move || {
                    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
                    let mut buf = [0u8; 64];
                    if let Ok(n) = stream.read(&mut buf) {
                        b.lock().unwrap().extend_from_slice(&buf[..n]);
                        stream.write_all(b"pong").ok();
                    }
                });
            }
        });
        Self {
            port,
            connections,
            bytes,
        }
    }

    fn connections(&self) -> usize {
        // Let a connection in flight be counted.
        std::thread::sleep(Duration::from_millis(200));
        self.connections.load(Ordering::SeqCst)
    }
}

/// The mechanisms to test: the best here, and the Landlock one forced.
const MECHANISMS: [&[(&str, &str)]; 2] = [&[], &[("CONFINE_NETWORK_MECHANISM", "landlock")]];

#[test]
fn direct_tcp_and_udp_to_the_hosts_loopback_never_arrive() {
    let ws = tempfile::tempdir().unwrap();
    let target = Target::new();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let tcp = node_call(
        1,
        &format!(
            "const s = net.connect({}, '127.0.0.1'); s.on('connect', () => say('connected')); \
             s.on('error', (e) => say(e.code));",
            target.port
        ),
    );
    let datagram = node_call(
        2,
        &format!(
            "const u = dgram.createSocket('udp4'); u.on('error', (e) => say(e.code)); \
             u.send('leak', {udp_port}, '127.0.0.1', (e) => say(e ? e.code : 'sent'));"
        ),
    );
    let mut buf = [0u8; 64];
    // The twin: no policy, both arrive.
    let out = call(
        ws.path(),
        &["--no-sandbox"],
        &[],
        &[tcp.clone(), datagram.clone()],
    );
    assert_eq!(said(&out[0]), "connected", "{}", out[0]);
    assert!(
        out[0].get("network").is_none(),
        "no policy, no decisions: {}",
        out[0]
    );
    assert_eq!(target.connections(), 1);
    assert!(udp.recv(&mut buf).is_ok(), "the twin's datagram arrived");
    let listed = format!("127.0.0.1:{}", target.port);
    for env in MECHANISMS {
        for flags in [
            &["--sandbox"][..],
            &["--allow-net", &listed],
            &["--sandbox", "--allow-net", &listed],
        ] {
            let out = call(ws.path(), flags, env, &[tcp.clone(), datagram.clone()]);
            let got = said(&out[0]);
            assert!(
                got == "ECONNREFUSED" || got == "EACCES",
                "{flags:?} {env:?}: {}",
                out[0]
            );
            assert!(out[0]["network"].is_array(), "{}", out[0]);
            let sent = said(&out[1]);
            assert!(sent == "sent" || sent == "EACCES", "{flags:?}: {}", out[1]);
            assert_eq!(
                target.connections(),
                1,
                "{flags:?} {env:?}: a connection arrived"
            );
            assert!(
                udp.recv(&mut buf).is_err(),
                "{flags:?} {env:?}: a datagram arrived"
            );
        }
    }
}

#[test]
fn the_proxy_refuses_before_any_byte_and_passes_a_listed_ip() {
    let ws = tempfile::tempdir().unwrap();
    let target = Target::new();
    let port = target.port;
    let to_ip = node_call(1, &format!("viaProxy('127.0.0.1:{port}', 'ping');"));
    let to_name = node_call(2, &format!("viaProxy('localhost:{port}', 'ping');"));
    for env in MECHANISMS {
        let base = target.connections();
        // Not listed: 403 with the one-line reason, and nothing reached the listener.
        let out = call(ws.path(), &["--sandbox"], env, std::slice::from_ref(&to_ip));
        let got = said(&out[0]);
        assert_eq!(got["status"], 403, "{env:?}: {}", out[0]);
        assert_eq!(
            got["body"],
            format!("confine: 127.0.0.1:{port} refused: not on the allow list")
        );
        assert_eq!(
            out[0]["network"],
            json!([{"host": "127.0.0.1", "port": port, "allowed": false, "reason": "not on the allow list"}])
        );
        assert_eq!(
            target.connections(),
            base,
            "{env:?}: a refused tunnel reached the target"
        );
        // A listed name that resolves to loopback: refused as such.
        let listed_name = format!("localhost:{port}");
        let out = call(
            ws.path(),
            &["--sandbox", "--allow-net", &listed_name],
            env,
            std::slice::from_ref(&to_name),
        );
        let got = said(&out[0]);
        assert_eq!(got["status"], 403, "{}", out[0]);
        let body = got["body"].as_str().unwrap();
        assert!(body.contains("loopback"), "{body}");
        assert_eq!(out[0]["network"][0]["allowed"], false);
        assert_eq!(target.connections(), base);
        // Listed by IP: the tunnel opens and bytes pass both ways.
        let listed_ip = format!("127.0.0.1:{port}");
        let out = call(
            ws.path(),
            &["--sandbox", "--allow-net", &listed_ip],
            env,
            std::slice::from_ref(&to_ip),
        );
        let got = said(&out[0]);
        assert_eq!(
            got,
            json!({"status": 200, "reply": "pong"}),
            "{env:?}: {}",
            out[0]
        );
        assert_eq!(
            out[0]["network"],
            json!([{"host": "127.0.0.1", "port": port, "allowed": true}])
        );
        assert_eq!(target.connections(), base + 1);
    }
    assert_eq!(target.connections(), MECHANISMS.len());
    assert!(String::from_utf8_lossy(&target.bytes.lock().unwrap()).contains("ping"));
}

#[test]
fn children_get_the_proxy_variables_and_nothing_when_the_policy_is_off() {
    let ws = tempfile::tempdir().unwrap();
    let line = json!({"id": 1, "name": "run_command", "arguments": {"command":
        "for v in HTTPS_PROXY HTTP_PROXY https_proxy http_proxy NO_PROXY no_proxy NODE_USE_ENV_PROXY; do eval echo \"$v=\\${$v-unset}\"; done"}})
    .to_string();
    let out = call(
        ws.path(),
        &["--allow-net", "example.test"],
        &[],
        std::slice::from_ref(&line),
    );
    let stdout = out[0]["stdout"].as_str().unwrap();
    let proxy = stdout
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("HTTPS_PROXY=");
    assert!(
        proxy.starts_with("http://confine:") && proxy.contains("@127.0.0.1:"),
        "{stdout}"
    );
    for name in ["HTTP_PROXY", "https_proxy", "http_proxy"] {
        assert!(stdout.contains(&format!("{name}={proxy}\n")), "{stdout}");
    }
    assert!(
        stdout.contains("NO_PROXY=localhost,127.0.0.1,::1\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("no_proxy=localhost,127.0.0.1,::1\n"),
        "{stdout}"
    );
    assert!(stdout.contains("NODE_USE_ENV_PROXY=1\n"), "{stdout}");
    assert_eq!(out[0]["network"], json!([]));
    // Off: the host's network, no variables, no decisions.
    let out = call(ws.path(), &["--no-sandbox"], &[], &[line]);
    assert!(
        out[0]["stdout"]
            .as_str()
            .unwrap()
            .contains("HTTPS_PROXY=unset")
    );
    assert!(out[0].get("network").is_none());
}

#[test]
fn a_job_and_a_later_command_meet_on_the_servers_own_loopback() {
    let ws = tempfile::tempdir().unwrap();
    // A dev server as a background job: it listens on the run's loopback and writes its port.
    let server = "const srv = net.createServer((c) => c.end('from-the-job')); \
        srv.listen(0, '127.0.0.1', () => require('fs').writeFileSync('port', String(srv.address().port)));";
    let job = json!({"id": 1, "name": "run_command", "arguments": {
        "command": format!("node -e {}", shell_quote(&format!("{JS}\n{server}"))),
        "background": true}})
    .to_string();
    let wait = json!({"id": 2, "name": "run_command", "arguments": {
        "command": "for i in $(seq 100); do [ -s port ] && break; sleep 0.1; done; cat port", "timeoutMs": 30000}})
    .to_string();
    let client = node_call(
        3,
        "const port = Number(require('fs').readFileSync('port', 'utf8')); \
         const c = net.connect(port, '127.0.0.1'); let got = ''; c.on('data', (d) => got += d); \
         c.on('end', () => say(got)); c.on('error', (e) => say(e.code));",
    );
    let out = call(ws.path(), &["--sandbox"], &[], &[job, wait, client]);
    assert!(out[0]["jobId"].is_string(), "{}", out[0]);
    let port: u16 = out[1]["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert_eq!(said(&out[2]), "from-the-job", "{}", out[2]);
    // The host's loopback does not have it.
    assert!(!testkit::host_loopback_answers(port, b"from-the-job"));
}

#[test]
fn a_server_and_its_client_meet_in_one_command_but_not_in_the_landlock_mode() {
    let ws = tempfile::tempdir().unwrap();
    let line = node_call(
        1,
        "const srv = net.createServer((c) => c.end('pong')); srv.on('error', (e) => say(e.code)); \
         srv.listen(0, '127.0.0.1', () => { const c = net.connect(srv.address().port, '127.0.0.1'); \
         let got = ''; c.on('data', (d) => got += d); c.on('end', () => say(got)); c.on('error', (e) => say(e.code)); });",
    );
    let out = call(ws.path(), &["--sandbox"], &[], std::slice::from_ref(&line));
    assert_eq!(said(&out[0]), "pong", "{}", out[0]);
    let out = call(ws.path(), &["--sandbox"], MECHANISMS[1], &[line]);
    assert_eq!(said(&out[0]), "EACCES", "{}", out[0]);
}

#[test]
fn a_malformed_entry_or_an_unknown_preset_is_a_usage_error_naming_it() {
    let ws = tempfile::tempdir().unwrap();
    for entry in ["a b", "@nosuch", "host:99999", "*.", "[::1"] {
        let out = support::confine()
            .args(["call", "--allow-net", entry, "--root"])
            .arg(ws.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{entry}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{entry}: {stderr}");
        assert!(stderr.contains(entry), "{entry}: {stderr}");
    }
    let out = support::confine()
        .args(["call", "--allow-net", "example.test", "--root"])
        .arg(ws.path())
        .env("CONFINE_NETWORK_MECHANISM", "nosuch")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
