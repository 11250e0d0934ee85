//! Attacks on the network policy's presets and address classes, through the built binary
//! started the way an agent's server is: with the workspace as its working directory.
//!
//! - A `pip/__init__.py` the model wrote in the workspace must not run when the server reads
//!   `@pypi` (`confine doctor` and `confine call`); the twin shows the planted module runs
//!   when Python is started there the ordinary way.
//! - A workspace `.npmrc` naming a listener on the host's loopback as a scope's registry must
//!   not open that listener to sandboxed children under `@npm`; the twin lists the listener
//!   by IP and reaches it.
//! - Names of the test's own, mapped through a private hosts file to every kind of address
//!   that leads inside (cloud metadata, IPv6 forms carrying a loopback or private IPv4
//!   address, site-local), are refused by the proxy with the class named; the twin lists each
//!   address as an IP literal and the refusal lifts. The server runs in a network namespace
//!   the test makes (only its own loopback up), so nothing leaves the machine whatever the
//!   proxy does.
//!
//! No registry host is named here: the presets ask the clients.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support;
use support::census_flags;

/// Generous bounds for a loaded machine.
const RUN_MS: u64 = 60_000;

/// `cmd` with the variables that would make the presets skip their clients removed.
fn without_index_variables(cmd: &mut Command) -> &mut Command {
    cmd.env_remove("PIP_INDEX_URL")
        .env_remove("PIP_EXTRA_INDEX_URL")
        .env_remove("npm_config_local_prefix")
}

/// `confine call --allow-commands <flags> --root <root>` started in `cwd`, one `run_command`
/// of `command`: the answer's content.
fn call_in(cwd: &Path, root: &Path, flags: &[&str], command: &str) -> Value {
    let line = json!({"id": 1, "name": "run_command",
        "arguments": {"command": command, "timeoutMs": RUN_MS}})
    .to_string();
    let mut cmd = support::confine();
    cmd.current_dir(cwd)
        .args(["call", "--allow-commands", "--root"])
        .arg(root)
        .args(census_flags())
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    without_index_variables(&mut cmd);
    let out = support::finish_with_input(cmd.spawn().unwrap(), &(line + "\n"));
    let answer: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    answer["content"].clone()
}

/// Whether `python3 -m pip` works here, started outside any workspace.
fn python_with_pip() -> bool {
    #[allow(clippy::disallowed_methods)] // asks the client, outside any tool
    Command::new("python3")
        .args(["-I", "-m", "pip", "--version"])
        .current_dir("/")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A workspace holding a `pip` package that, imported, writes `marker` (outside the
/// workspace) and exits.
fn plant_pip(ws: &Path, marker: &Path) {
    std::fs::create_dir_all(ws.join("pip")).unwrap();
    std::fs::write(
        ws.join("pip/__init__.py"),
        format!(
            "open({:?}, 'w').write('planted pip ran')\nraise SystemExit(0)\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(ws.join("pip/__main__.py"), "import pip\n").unwrap();
}

#[test]
fn a_planted_pip_in_the_workspace_never_runs_when_pypi_is_read() {
    const TEST: &str = "a_planted_pip_in_the_workspace_never_runs_when_pypi_is_read";
    if !python_with_pip() {
        testkit::not_run(
            TEST,
            "python3 with pip is not on this PATH (the fake-client tests of the netpolicy crate cover the flags)",
        );
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("marker");
    plant_pip(ws.path(), &marker);

    // The twin: Python started in the workspace the ordinary way imports the planted module.
    #[allow(clippy::disallowed_methods)] // shows the plant works, outside any tool
    let status = Command::new("python3")
        .args(["-m", "pip", "--version"])
        .current_dir(ws.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(marker.exists(), "the planted pip runs when imported");
    std::fs::remove_file(&marker).unwrap();

    // `confine doctor` in the workspace reads @pypi and prints what it resolved to.
    let mut cmd = support::confine();
    cmd.current_dir(ws.path())
        .args(["doctor", "--allow-net", "@pypi"])
        .stdin(Stdio::null());
    without_index_variables(&mut cmd);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!marker.exists(), "confine doctor ran the workspace's pip");
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("@pypi"), "{stdout}");

    // `confine call` with the workspace as root and working directory.
    let out = call_in(ws.path(), ws.path(), &["--allow-net", "@pypi"], "echo ok");
    assert_eq!(out["exitCode"], 0, "{out}");
    assert!(!marker.exists(), "confine call ran the workspace's pip");
}

/// A listener of the test's own on the host's loopback that counts connections and answers
/// each with a small HTTP response.
struct Listener {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Listener {
    fn new() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connections);
        std::thread::spawn(move || {
            for stream in listener.incoming().take(16) {
                let Ok(mut stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\npong",
                );
            }
        });
        Self { port, connections }
    }

    fn connections(&self) -> usize {
        // Let a connection in flight be counted.
        std::thread::sleep(Duration::from_millis(200));
        self.connections.load(Ordering::SeqCst)
    }
}

/// curl through the proxy (`--noproxy ''`: the children's `NO_PROXY` names 127.0.0.1, which
/// would send curl there directly), printing the status code alone.
fn curl_through_proxy(url: &str) -> String {
    format!("curl --noproxy '' -sS -o /dev/null -w '%{{http_code}}' --max-time 20 '{url}'; echo")
}

#[test]
fn a_workspace_npmrc_cannot_open_the_hosts_loopback_under_npm() {
    let ws = tempfile::tempdir().unwrap();
    let target = Listener::new();
    let port = target.port;
    // A project: npm takes the directory with package.json as the project and reads its
    // .npmrc, a scope's registry on the host's loopback among it.
    std::fs::write(ws.path().join("package.json"), "{}\n").unwrap();
    std::fs::write(
        ws.path().join(".npmrc"),
        format!("@x:registry=http://127.0.0.1:{port}/\n"),
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{port}/x");
    let command = curl_through_proxy(&url);

    let out = call_in(
        ws.path(),
        ws.path(),
        &["--sandbox", "--allow-net", "@npm"],
        &command,
    );
    let stdout = out["stdout"].as_str().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(stdout.trim(), "403", "{out}");
    assert_eq!(out["network"][0]["host"], "127.0.0.1", "{out}");
    assert_eq!(out["network"][0]["port"], port, "{out}");
    assert_eq!(out["network"][0]["allowed"], false, "{out}");
    assert_eq!(target.connections(), 0, "the loopback listener was reached");

    // The twin: the embedder lists the listener by IP, and the same curl reaches it.
    let listed = format!("127.0.0.1:{port}");
    let out = call_in(
        ws.path(),
        ws.path(),
        &["--sandbox", "--allow-net", "@npm", "--allow-net", &listed],
        &command,
    );
    assert_eq!(out["stdout"].as_str().unwrap().trim(), "200", "{out}");
    assert_eq!(
        out["network"],
        json!([{"host": "127.0.0.1", "port": port, "allowed": true}]),
        "{out}"
    );
    assert_eq!(target.connections(), 1);
}

/// Names of the test's own and the addresses a private hosts file maps them to, each leading
/// inside, with the class the proxy names.
const INSIDE: &[(&str, &str, &str)] = &[
    ("meta-gcp.confine.test", "169.254.169.254", "cloud metadata"),
    ("meta-ecs.confine.test", "169.254.170.2", "cloud metadata"),
    (
        "meta-alibaba.confine.test",
        "100.100.100.200",
        "cloud metadata",
    ),
    ("meta-azure.confine.test", "168.63.129.16", "cloud metadata"),
    ("meta-aws6.confine.test", "fd00:ec2::254", "cloud metadata"),
    ("compat.confine.test", "::127.0.0.1", "loopback"),
    ("nat64.confine.test", "64:ff9b::7f00:1", "loopback"),
    (
        "nat64-meta.confine.test",
        "64:ff9b::a9fe:a9fe",
        "cloud metadata",
    ),
    ("nat64-local.confine.test", "64:ff9b:1::a00:1", "private"),
    ("sixtofour.confine.test", "2002:7f00:1::", "loopback"),
    ("teredo.confine.test", "2001:0:7f00:1::", "loopback"),
    ("sitelocal.confine.test", "fec0::1", "site-local"),
];

/// A name mapped to a documentation address, which is not refused.
const OUTSIDE: (&str, &str) = ("doc.confine.test", "192.0.2.1");

/// How to make a network and mount namespace here: directly (root with CAP_SYS_ADMIN), else
/// inside a user namespace of the test's own (an ordinary user, or root without the
/// capability); `None` where neither works.
fn namespace_prefix() -> Option<Vec<&'static str>> {
    let candidates = [
        vec!["unshare", "--net", "--mount"],
        vec!["unshare", "--map-root-user", "--net", "--mount"],
    ];
    candidates.into_iter().find(|prefix| {
        #[allow(clippy::disallowed_methods)] // probes the system, outside any tool
        Command::new(prefix[0])
            .args(&prefix[1..])
            .args([
                "sh",
                "-c",
                "mount --bind /dev/null /dev/null && ip link set lo up",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// `confine call` inside a fresh network namespace (its loopback up, nothing else) where
/// `/etc/hosts` is `hosts`: the answer's content.
fn call_in_namespace(
    prefix: &[&str],
    hosts: &Path,
    root: &Path,
    flags: &[String],
    command: &str,
) -> Value {
    let line = json!({"id": 1, "name": "run_command",
        "arguments": {"command": command, "timeoutMs": RUN_MS}})
    .to_string();
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut script = format!(
        "ip link set lo up && mount --bind {} /etc/hosts && exec {} call --allow-commands --root {}",
        quote(&hosts.display().to_string()),
        quote(env!("CARGO_BIN_EXE_confine")),
        quote(&root.display().to_string()),
    );
    for flag in census_flags().iter().chain(flags) {
        script.push(' ');
        script.push_str(&quote(flag));
    }
    #[allow(clippy::disallowed_methods)] // starts the binary under test inside a namespace
    let mut cmd = Command::new(prefix[0]);
    cmd.args(&prefix[1..])
        .args(["sh", "-c", &script])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = support::finish_with_input(cmd.spawn().unwrap(), &(line + "\n"));
    let answer: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    answer["content"].clone()
}

fn bracketed(addr: &str) -> String {
    if addr.contains(':') {
        format!("[{addr}]")
    } else {
        addr.to_owned()
    }
}

#[test]
fn names_that_lead_inside_are_refused_and_their_listed_literals_are_not() {
    const TEST: &str = "names_that_lead_inside_are_refused_and_their_listed_literals_are_not";
    let Some(prefix) = namespace_prefix() else {
        testkit::not_run(
            TEST,
            "no network and mount namespace can be made here (neither directly nor in a user namespace); the address tables of the netpolicy crate cover the classes",
        );
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let hosts = ws.path().join("hosts");
    let mut text = String::from("127.0.0.1 localhost\n::1 localhost\n");
    for (name, addr, _) in INSIDE {
        text.push_str(&format!("{addr} {name}\n"));
    }
    text.push_str(&format!("{} {}\n", OUTSIDE.1, OUTSIDE.0));
    std::fs::write(&hosts, text).unwrap();

    // Every name listed, each asked for in turn; then the documentation name.
    let mut flags = vec!["--sandbox".to_owned()];
    let mut command = String::new();
    for (name, _, _) in INSIDE.iter().chain([&(OUTSIDE.0, OUTSIDE.1, "")]) {
        flags.extend(["--allow-net".to_owned(), format!("{name}:80")]);
        command.push_str(&curl_through_proxy(&format!("http://{name}:80/")));
        command.push('\n');
    }
    let out = call_in_namespace(&prefix, &hosts, ws.path(), &flags, &command);
    let codes: Vec<&str> = out["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"))
        .lines()
        .collect();
    let network = out["network"].as_array().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(network.len(), INSIDE.len() + 1, "{out}");
    for (i, (name, addr, class)) in INSIDE.iter().enumerate() {
        assert_eq!(codes[i], "403", "{name} ({addr}): {out}");
        assert_eq!(
            network[i],
            json!({"host": name, "port": 80, "allowed": false,
                   "reason": format!("resolves to a {class} address")}),
            "{addr}"
        );
    }
    // The documentation address is not refused: the name resolved through the private hosts
    // file, was allowed, and the connection failed in the namespace (502).
    assert_eq!(
        network[INSIDE.len()],
        json!({"host": OUTSIDE.0, "port": 80, "allowed": true}),
        "{out}"
    );
    assert_eq!(codes[INSIDE.len()], "502", "{out}");

    // The twin: each address listed as an IP literal and asked for as such is allowed (the
    // connection then fails in the namespace, which has no route there: only the decision
    // matters).
    let mut flags = vec!["--sandbox".to_owned()];
    let mut command = String::new();
    for (_, addr, _) in INSIDE {
        let literal = bracketed(addr);
        flags.extend(["--allow-net".to_owned(), format!("{literal}:80")]);
        command.push_str(&curl_through_proxy(&format!("http://{literal}:80/")));
        command.push('\n');
    }
    let out = call_in_namespace(&prefix, &hosts, ws.path(), &flags, &command);
    let network = out["network"].as_array().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(network.len(), INSIDE.len(), "{out}");
    for (decision, (_, addr, _)) in network.iter().zip(INSIDE) {
        assert_eq!(decision["allowed"], true, "{addr}: {out}");
        assert!(decision.get("reason").is_none(), "{addr}: {out}");
    }
}
