//! The kernel sandbox of `node_process` and `run_command`, end to end with a real Node.js:
//! through the tool (`ToolSetOptions::sandbox`, which a library embedder opts into) and
//! through the built `confine call` (sandboxed by default). Every probe runs confined and
//! unconfined on both paths (`--no-sandbox` on the binary); the unconfined twin shows the
//! probe succeeds without the sandbox, so each refusal is the sandbox's doing.
//!
//! A probe prints one JSON line (compared as text): `"ok"`, or the error's `code`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use confine_nodeexec::{LandlockSupport, Sandbox};
use confine_tools::ToolSetOptions;
use serde_json::{Value, json};

use crate::support;
use support::{assert_no_pify, call_lines, call_on, census_flags, marked, runtime};

/// Generous: a cold Node.js starting a second one on a loaded machine.
const TIMEOUT_MS: u64 = 20_000;

const HELPERS: &str = "const fs = require('fs'), cp = require('child_process'), net = require('net');\
    const code = (f) => { try { f(); return 'ok'; } catch (e) { return e.code || String(e); } };\
    const say = (v) => console.log(JSON.stringify(v));\n";

fn kernel_abi() -> u32 {
    testkit::landlock_abi(LandlockSupport::probe().abi())
}

/// How node_process is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// `confine_tools::create_coding_tools` with `ToolSetOptions::sandbox`.
    Tool,
    /// The built binary: `confine call [--sandbox]`.
    Binary,
}

/// The sandbox option: off, on (defaults), or on requiring Landlock ABI `n`.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Open,
    Sandboxed,
    RequireAbi(u32),
}

fn options(mode: Mode) -> ToolSetOptions {
    let mut options = marked(ToolSetOptions::default());
    options.node.timeout = Some(Duration::from_millis(TIMEOUT_MS));
    options.sandbox = match mode {
        Mode::Open => None,
        Mode::Sandboxed => Some(Sandbox::new()),
        Mode::RequireAbi(abi) => {
            let mut sandbox = Sandbox::new();
            sandbox.min_abi(abi);
            Some(sandbox)
        }
    };
    options
}

/// Run each `(source, arguments)` through `path` in `mode`; the record of each call, in order.
fn run_all(route: Route, mode: Mode, root: &Path, probes: &[(String, Vec<String>)]) -> Vec<Value> {
    let arguments = |(source, args): &(String, Vec<String>)| json!({"source": format!("{HELPERS}{source}"), "arguments": args});
    match route {
        Route::Tool => {
            let registry = confine_tools::create_coding_tools(root, options(mode)).unwrap();
            let rt = runtime();
            probes
                .iter()
                .map(|probe| call_on(&rt, &registry, "node_process", &arguments(probe)).record())
                .collect()
        }
        Route::Binary => {
            let mut flags: Vec<String> = vec!["--timeout-ms".into(), TIMEOUT_MS.to_string()];
            flags.extend(census_flags());
            match mode {
                Mode::Open => flags.push("--no-sandbox".into()),
                // The default: no flag.
                Mode::Sandboxed => {}
                Mode::RequireAbi(abi) => {
                    flags.extend(["--sandbox-min-abi".into(), abi.to_string()])
                }
            }
            let input: String = probes
                .iter()
                .enumerate()
                .map(|(i, probe)| {
                    let line =
                        json!({"id": i, "name": "node_process", "arguments": arguments(probe)});
                    format!("{line}\n")
                })
                .collect();
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            call_lines(root, &flags, &input)
                .into_iter()
                .map(|v| v["content"].clone())
                .collect()
        }
    }
}

/// What a successful record's script printed last (its JSON line, as text).
fn said(record: &Value) -> String {
    let stdout = record["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("not a success record: {record}"));
    stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no output: {record}"))
        .to_owned()
}

/// One probe: its source and arguments, what it says confined and what it says unconfined.
struct Probe {
    name: &'static str,
    source: String,
    args: Vec<String>,
    confined: String,
    open: String,
}

fn probe(name: &'static str, source: &str, args: &[&str], confined: &str, open: &str) -> Probe {
    Probe {
        name,
        source: source.to_owned(),
        args: args.iter().map(|a| a.to_string()).collect(),
        confined: confined.to_owned(),
        open: open.to_owned(),
    }
}

/// Whether the tests run as root.
fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The probes, run through the tool and the binary, confined then unconfined.
#[test]
fn sandbox_probes_through_the_tool_and_the_binary() {
    use std::os::unix::fs::PermissionsExt;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let udp_port = udp.local_addr().unwrap().port().to_string();
    // Through the binary `--sandbox` turns the network policy on: the child's network is a
    // namespace of the server's own (its own loopback: nothing listens there, a datagram is
    // sent into it), or in the Landlock mode no TCP but to the proxy and no UDP socket.
    // Through the tool without a network policy: no socket at all. Either way nothing reaches
    // the host's listeners (checked below).
    let own_loopback =
        confine_nodeexec::Network::new(confine_nodeexec::NetworkMechanism::Namespace)
            .map(|(n, _)| n.own_loopback())
            .unwrap_or(false);
    for route in [Route::Tool, Route::Binary] {
        let workspace = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let out_file = outside.path().join("x.txt");
        let grandchild_file = outside.path().join("grandchild.txt");
        let tmp_file = PathBuf::from("/tmp").join(testkit::unique("confine-sandbox-probe"));
        let s = |p: &Path| p.to_str().unwrap().to_owned();
        let (out_file_s, grandchild_s, tmp_s) = (s(&out_file), s(&grandchild_file), s(&tmp_file));
        // A secret, a file whose mode must not change and a module, all outside; a listener
        // in /tmp; a module and data inside.
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "s3cret").unwrap();
        let mode_file = outside.path().join("mode.txt");
        std::fs::write(&mode_file, "x").unwrap();
        std::fs::set_permissions(&mode_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let module = outside.path().join("outside.js");
        std::fs::write(&module, "module.exports = 'outside';").unwrap();
        let socket = PathBuf::from("/tmp").join(testkit::unique("confine-sandbox-listener"));
        let unix_listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        unix_listener.set_nonblocking(true).unwrap();
        std::fs::create_dir_all(workspace.path().join("node_modules/sum")).unwrap();
        std::fs::write(
            workspace.path().join("node_modules/sum/index.js"),
            "module.exports = (n) => n * (n + 1) / 2;",
        )
        .unwrap();
        std::fs::write(workspace.path().join("n.txt"), "20").unwrap();
        let (secret_s, mode_s, module_s, socket_s) =
            (s(&secret), s(&mode_file), s(&module), s(&socket));
        // What lies in the host's /tmp (these tests' scratch directories): read-only to the
        // tool route's children (the read-only view, no private /tmp given), invisible to the
        // binary's (its private /tmp covers the host's).
        let hidden = |tool: &'static str| match route {
            Route::Tool => tool,
            Route::Binary => r#""ENOENT""#,
        };
        let mut probes = vec![
            probe(
                "write outside the workspace",
                "say(code(() => fs.writeFileSync(process.argv[1], 'x')))",
                &[&out_file_s],
                hidden(r#""EROFS""#),
                r#""ok""#,
            ),
            probe(
                "create in /tmp",
                "say(code(() => fs.writeFileSync(process.argv[1], 'x')))",
                &[&tmp_s],
                // The binary's children write their private /tmp, never the host's.
                match route {
                    Route::Tool => r#""EROFS""#,
                    Route::Binary => r#""ok""#,
                },
                r#""ok""#,
            ),
            probe(
                "a grandchild writes outside",
                "const r = cp.spawnSync(process.execPath, ['-e', \
                 \"try { require('fs').writeFileSync(process.argv[1], 'x') } \
                   catch (e) { console.log(e.code); process.exit(3) }\", '--', process.argv[1]]);\
                 say({ status: r.status, out: String(r.stdout).trim() })",
                &[&grandchild_s],
                match route {
                    Route::Tool => r#"{"status":3,"out":"EROFS"}"#,
                    Route::Binary => r#"{"status":3,"out":"ENOENT"}"#,
                },
                r#"{"status":0,"out":""}"#,
            ),
            probe(
                "TCP connect to 127.0.0.1",
                "const c = net.connect({ host: '127.0.0.1', port: Number(process.argv[1]) });\
                 c.on('connect', () => { say('ok'); c.destroy(); });\
                 c.on('error', (e) => say(e.code));",
                &[&port],
                match (route, own_loopback) {
                    (Route::Binary, true) => r#""ECONNREFUSED""#,
                    _ => r#""EACCES""#,
                },
                r#""ok""#,
            ),
            probe(
                "UDP datagram to 127.0.0.1",
                "(() => { let s; try { s = require('dgram').createSocket('udp4'); }\
                   catch (e) { say(e.code); return; }\
                 s.on('error', (e) => { say(e.code); s.close(); });\
                 s.send('hi', Number(process.argv[1]), '127.0.0.1',\
                        (e) => { if (!e) say('ok'); s.close(); }); })()",
                &[&udp_port],
                match (route, own_loopback) {
                    (Route::Binary, true) => r#""ok""#,
                    _ => r#""EACCES""#,
                },
                r#""ok""#,
            ),
            probe(
                "write inside, read system files",
                "say([code(() => fs.mkdirSync('d', { recursive: true })),\
                      code(() => fs.writeFileSync('d/inside.txt', 'x')),\
                      code(() => fs.readFileSync('/etc/passwd')),\
                      code(() => fs.readdirSync('/usr/lib'))])",
                &[],
                r#"["ok","ok","ok","ok"]"#,
                r#"["ok","ok","ok","ok"]"#,
            ),
            probe(
                "address space beyond the limit",
                // Each WebAssembly memory reserves about 10 GiB of address space and writes
                // none of it: beyond the sandbox's 4 GiB, within the default data bound.
                "const held = [];\
                 try { for (let i = 0; i < 6; i++) held.push(new WebAssembly.Memory({ initial: 1 })); say('ok'); }\
                 catch (e) { say(e.constructor.name); }",
                &[],
                r#""RangeError""#,
                r#""ok""#,
            ),
            probe(
                "read a secret outside the workspace",
                "say(code(() => fs.readFileSync(process.argv[1])))",
                &[&secret_s],
                match route {
                    Route::Tool => r#""EACCES""#,
                    Route::Binary => r#""ENOENT""#,
                },
                r#""ok""#,
            ),
            probe(
                "chmod, chown and utimes outside the workspace",
                "const p = process.argv[1];\
                 say([code(() => fs.chmodSync(p, 0o777)),\
                      code(() => fs.chownSync(p, process.getuid(), process.getgid())),\
                      code(() => fs.utimesSync(p, 0, 0))])",
                &[&mode_s],
                match route {
                    Route::Tool => r#"["EROFS","EROFS","EROFS"]"#,
                    Route::Binary => r#"["ENOENT","ENOENT","ENOENT"]"#,
                },
                r#"["ok","ok","ok"]"#,
            ),
            probe(
                "connect to a pathname socket in /tmp",
                "const c = net.connect({ path: process.argv[1] });\
                 c.on('connect', () => { say('ok'); c.destroy(); });\
                 c.on('error', (e) => say(e.code));",
                &[&socket_s],
                r#""EACCES""#,
                r#""ok""#,
            ),
            probe(
                "require a module outside the workspace",
                "say(code(() => require(process.argv[1])))",
                &[&module_s],
                match route {
                    Route::Tool => r#""EACCES""#,
                    Route::Binary => r#""MODULE_NOT_FOUND""#,
                },
                r#""ok""#,
            ),
            probe(
                "a real workload: read, require, write, spawn",
                "const n = Number(fs.readFileSync('n.txt', 'utf8'));\
                 fs.writeFileSync('sum.txt', String(require('sum')(n)));\
                 const r = cp.spawnSync(process.execPath, ['-e', \
                   \"process.stdout.write(require('fs').readFileSync('sum.txt', 'utf8'))\"]);\
                 say([String(r.stdout), String(cp.execFileSync('/bin/sh', ['-c', 'echo sh'])).trim()])",
                &[],
                r#"["210","sh"]"#,
                r#"["210","sh"]"#,
            ),
        ];
        if root() {
            probes.push(probe(
                "read /etc/shadow as root",
                "say(code(() => { if (fs.readFileSync('/etc/shadow').length === 0) throw { code: 'empty' }; }))",
                &[],
                r#""empty""#,
                r#""ok""#,
            ));
        }
        let table: Vec<(String, Vec<String>)> = probes
            .iter()
            .map(|p| (p.source.clone(), p.args.clone()))
            .collect();

        let confined = run_all(route, Mode::Sandboxed, workspace.path(), &table);
        for (p, record) in probes.iter().zip(&confined) {
            assert_eq!(said(record), p.confined, "{route:?} confined: {}", p.name);
        }
        assert!(!out_file.exists() && !grandchild_file.exists() && !tmp_file.exists());
        let mode = std::fs::metadata(&mode_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o644, "{route:?}: the mode changed");
        assert!(
            unix_listener.accept().is_err(),
            "{route:?}: the listener received a connection from the sandbox"
        );
        // Nothing confined reached the host's TCP and UDP listeners either.
        listener.set_nonblocking(true).unwrap();
        assert!(
            listener.accept().is_err(),
            "{route:?}: a confined connection arrived"
        );
        listener.set_nonblocking(false).unwrap();
        udp.set_nonblocking(true).unwrap();
        assert!(
            udp.recv_from(&mut [0u8; 8]).is_err(),
            "{route:?}: a confined datagram arrived"
        );
        udp.set_nonblocking(false).unwrap();

        let open = run_all(route, Mode::Open, workspace.path(), &table);
        for (p, record) in probes.iter().zip(&open) {
            assert_eq!(said(record), p.open, "{route:?} unconfined: {}", p.name);
        }
        assert!(out_file.exists() && grandchild_file.exists());
        std::fs::remove_file(&tmp_file).unwrap();
        assert!(workspace.path().join("d/inside.txt").exists());
        // The unconfined connections reached the listener.
        listener.set_nonblocking(true).unwrap();
        assert!(listener.accept().is_ok());
        while listener.accept().is_ok() {}
        // And the unconfined datagram arrived (no confined one did: checked above).
        let mut buf = [0u8; 8];
        let (n, _) = udp.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hi");
        assert!(
            unix_listener.accept().is_ok(),
            "{route:?}: the unconfined twin connected"
        );
        std::fs::remove_file(&socket).unwrap();
        assert_no_pify(workspace.path());
    }
}

/// `--sandbox-read` and `--sandbox-write` add places; without them the same calls are refused.
#[test]
fn sandbox_read_and_write_flags_add_places() {
    let workspace = tempfile::tempdir().unwrap();
    let readable = tempfile::tempdir().unwrap();
    let writable = tempfile::tempdir().unwrap();
    std::fs::write(readable.path().join("r.txt"), "readable").unwrap();
    let source = format!(
        "{HELPERS}const [r, w] = process.argv.slice(1);\
         say([code(() => fs.readFileSync(r + '/r.txt', 'utf8')),\
              code(() => fs.writeFileSync(r + '/new.txt', 'x')),\
              code(() => fs.writeFileSync(w + '/w.txt', 'x'))])"
    );
    let line = json!({"id": 1, "name": "node_process", "arguments": {"source": source,
        "arguments": [readable.path(), writable.path()]}});
    let input = format!("{line}\n");
    let timeout = TIMEOUT_MS.to_string();
    let base = ["--timeout-ms", &timeout, "--sandbox"];
    let refused = call_lines(workspace.path(), &base, &input);
    // (Both scratch directories lie in the host's /tmp, which the private /tmp covers.)
    assert_eq!(
        said(&refused[0]["content"]),
        r#"["ENOENT","ENOENT","ENOENT"]"#
    );
    let (r, w) = (
        readable.path().to_str().unwrap(),
        writable.path().to_str().unwrap(),
    );
    let mut flags = base.to_vec();
    flags.extend(["--sandbox-read", r, "--sandbox-write", w]);
    let added = call_lines(workspace.path(), &flags, &input);
    // The readable directory is bound again inside the private /tmp, read-only.
    assert_eq!(said(&added[0]["content"]), r#"["ok","EROFS","ok"]"#);
    assert!(writable.path().join("w.txt").exists());
    assert!(!readable.path().join("new.txt").exists());
    // A path that does not exist is a usage error, before anything runs.
    let missing = workspace.path().join("missing");
    let out = support::confine()
        .args(["call", "--sandbox", "--sandbox-read"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // And the flags contradict --no-sandbox.
    let out = support::confine()
        .args(["call", "--no-sandbox", "--sandbox-read", r])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sandbox_unavailable_is_the_failure_token() {
    let abi = kernel_abi();
    let probe = vec![(
        "say(code(() => fs.writeFileSync('/tmp/x', '')))".to_owned(),
        vec![],
    )];
    for route in [Route::Tool, Route::Binary] {
        let workspace = tempfile::tempdir().unwrap();
        // One ABI more than this kernel has: as on an older kernel. Nothing runs.
        if route == Route::Binary {
            // The binary refuses to start, with one line naming what is missing and the way
            // out.
            let out = support::confine()
                .args(["call", "--root"])
                .arg(workspace.path())
                .args(["--sandbox-min-abi", &(abi + 1).to_string()])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(
                stderr.contains(&format!("Landlock ABI {} or newer is needed", abi + 1))
                    && stderr.contains("--no-sandbox"),
                "{stderr}"
            );
            // Without process tools nothing needs the sandbox: the server starts.
            let out = support::confine()
                .args(["call", "--read-only", "--root"])
                .arg(workspace.path())
                .args(["--sandbox-min-abi", &(abi + 1).to_string()])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{out:?}");
        } else {
            let refused = run_all(route, Mode::RequireAbi(abi + 1), workspace.path(), &probe);
            assert_eq!(
                refused[0],
                json!({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "NODE_SANDBOX_UNAVAILABLE"}}),
                "{route:?}"
            );
        }
        // The twin: the kernel's own ABI is enough, and the script runs, confined.
        let ran = run_all(route, Mode::RequireAbi(abi), workspace.path(), &probe);
        let tmp = match route {
            Route::Tool => r#""EROFS""#,
            // The binary's children write their private /tmp.
            Route::Binary => r#""ok""#,
        };
        assert_eq!(said(&ran[0]), tmp, "{route:?}");
        assert_no_pify(workspace.path());
    }
}

#[test]
fn sandbox_option_leaves_other_results_unchanged() {
    // Exit codes, signals and stderr are data under the sandbox as without it.
    let table = vec![(
        "process.stderr.write('e'); process.exitCode = 7;".to_owned(),
        vec![],
    )];
    let workspace = tempfile::tempdir().unwrap();
    let confined = run_all(Route::Tool, Mode::Sandboxed, workspace.path(), &table);
    let open = run_all(Route::Tool, Mode::Open, workspace.path(), &table);
    assert_eq!(confined, open);
    assert_eq!(confined[0]["exitCode"], 7);
    assert_eq!(confined[0]["stderr"], "e");
}

/// `confine doctor` reports this kernel's Landlock ABI and a passing end-to-end check.
#[test]
fn doctor_reports_landlock_and_the_sandbox_check() {
    let abi = kernel_abi();
    #[allow(clippy::disallowed_methods)]
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_confine"))
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["landlock"], json!({"available": true, "abi": abi}));
    assert_eq!(report["sandbox"]["usable"], true);
    assert_eq!(
        report["sandbox"]["abi"],
        abi.min(confine_nodeexec::MAX_TESTED_ABI)
    );
    assert_eq!(
        report["sandbox"]["check"],
        json!({"ran": true, "passed": true, "writeInside": "ok", "writeTmp": "EROFS",
               "readOutside": "EACCES", "chmodOutside": "EROFS", "chmodInside": "ok",
               "metadataHere": "read-only view (mount namespace): metadata changeable inside, EROFS outside"})
    );
    // The private /tmp and /dev/shm: one tmpfs of the server's, its default bound.
    assert_eq!(
        report["sandbox"]["privateTmp"],
        json!({"tmpfs": true, "bytes": confine_nodeexec::default_tmp_bytes(),
               "inodes": confine_nodeexec::DEFAULT_TMP_INODES}),
        "{report}"
    );
    // The effective policy: what may be read and written, metadata, Unix sockets.
    let read = report["sandbox"]["read"].as_array().unwrap();
    assert_eq!(read[0], "<workspace>");
    for path in ["/usr", "/etc/passwd", "/dev/null", "/proc/meminfo"] {
        assert!(read.contains(&json!(path)), "{path}: {report}");
    }
    for path in ["/", "/etc/shadow", "/root", "/tmp", "/proc"] {
        assert!(!read.contains(&json!(path)), "{path}: {report}");
    }
    // All of /etc, its secrets covered in the run's mount namespace.
    assert!(read.contains(&json!("/etc")), "{report}");
    assert_eq!(report["sandbox"]["etc"]["whole"], true, "{report}");
    let covered = report["sandbox"]["etc"]["covered"].as_array().unwrap();
    if Path::new("/etc/shadow").exists() {
        assert!(covered.contains(&json!("/etc/shadow")), "{report}");
    }
    // The program's own terminal, where the system has the device.
    let mut write = vec!["<workspace>", "/dev/null"];
    if Path::new("/dev/tty").exists() {
        write.push("/dev/tty");
    }
    assert_eq!(report["sandbox"]["write"], json!(write));
    assert!(
        report["sandbox"]["metadata"]
            .as_str()
            .unwrap()
            .contains("seccomp")
    );
    assert!(
        report["sandbox"]["pathnameUnixSockets"]
            .as_str()
            .unwrap()
            .starts_with("seccomp")
    );
    assert!(report["node"]["version"].as_str().unwrap().starts_with('v'));
    assert!(
        report["containment"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        "{report}"
    );

    #[allow(clippy::disallowed_methods)]
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_confine"))
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(&format!("landlock:      available, ABI {abi}")),
        "{text}"
    );
    assert!(text.contains("sandbox check: passed"), "{text}");
    assert!(text.contains("sandbox read:  <workspace>, /usr"), "{text}");
    assert!(
        text.contains("unix sockets:  pathname sockets unreachable (seccomp"),
        "{text}"
    );
}

/// The probe of the environment tests: a secret outside, a `chmod` outside, `/etc/shadow`
/// (`empty` where a mount covers it), a
/// write inside and a child process, as one JSON object.
const ENVIRONMENT_PROBE: &str = "const [secret, mode] = process.argv.slice(1);\
    say({ secret: code(() => fs.readFileSync(secret)), chmod: code(() => fs.chmodSync(mode, 0o777)),\
          shadow: code(() => { if (fs.readFileSync('/etc/shadow').length === 0) throw { code: 'empty' }; }), inside: code(() => fs.writeFileSync('in.txt', 'x')),\
          child: String(cp.execFileSync(process.execPath, ['-e', 'console.log(1 + 1)'])).trim() })";

/// Run [`ENVIRONMENT_PROBE`] through `<prefix…> <confine> call --root <root> [--sandbox]`;
/// what the script printed.
fn probe_as(
    prefix: &[&str],
    confine: &Path,
    root: &Path,
    sandbox: bool,
    args: [&Path; 2],
) -> String {
    use std::io::Write as _;
    let line = json!({"id": 1, "name": "node_process", "arguments": {
        "source": format!("{HELPERS}{ENVIRONMENT_PROBE}"), "arguments": args}});
    #[allow(clippy::disallowed_methods)]
    let mut cmd = std::process::Command::new(prefix[0]);
    cmd.args(&prefix[1..])
        .arg(confine)
        .args(["call", "--timeout-ms", &TIMEOUT_MS.to_string(), "--root"])
        .arg(root)
        .args(census_flags())
        .args((!sandbox).then_some("--no-sandbox"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{prefix:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{line}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let record: Value = serde_json::from_str(text.trim()).unwrap_or_else(|_| {
        panic!(
            "{prefix:?} sandbox={sandbox}: no record; stdout {text}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    said(&record["content"])
}

/// The policy holds for an ordinary user (`nobody`, through `runuser`) and in a container-like
/// setup (a private mount namespace with `/sys/fs/cgroup` read-only and `CAP_SYS_ADMIN`
/// dropped with `capsh`), through the built binary; each beside its unconfined twin.
#[test]
fn sandbox_holds_as_a_user_and_in_a_container_like_setup() {
    use std::os::unix::fs::PermissionsExt;
    if !root() {
        testkit::not_run(
            "sandbox_holds_as_a_user_and_in_a_container_like_setup",
            "as an ordinary \
             user (it needs root, to run the binary as another user and to drop a \
             capability); CI runs it as root",
        );
        return;
    }
    let nobody = rustix::process::Uid::from_raw(65534);
    let nogroup = rustix::process::Gid::from_raw(65534);
    let open_to_all = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // The binary where any user may run it, a workspace and files outside owned by nobody.
    let bin = tempfile::tempdir().unwrap();
    open_to_all(bin.path(), 0o755);
    let confine = bin.path().join("confine");
    std::fs::copy(env!("CARGO_BIN_EXE_confine"), &confine).unwrap();
    open_to_all(&confine, 0o755);
    let workspace = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    open_to_all(outside.path(), 0o755);
    let secret = outside.path().join("secret.txt");
    let mode = outside.path().join("mode.txt");
    for file in [&secret, &mode] {
        std::fs::write(file, "x").unwrap();
    }
    for path in [workspace.path(), secret.as_path(), mode.as_path()] {
        rustix::fs::chown(path, Some(nobody), Some(nogroup)).unwrap();
    }
    open_to_all(&secret, 0o600);
    let reset = || open_to_all(&mode, 0o644);
    let args = [secret.as_path(), mode.as_path()];
    // The files outside lie in the host's /tmp, which the children's private /tmp covers.
    let confined =
        r#"{"secret":"ENOENT","chmod":"ENOENT","shadow":"empty","inside":"ok","child":"2"}"#;

    // An ordinary user: /etc/shadow is unreadable to it unconfined, and covered (empty) in
    // the sandboxed run's mount namespace.
    let user = ["runuser", "-u", "nobody", "--"];
    reset();
    assert_eq!(
        probe_as(&user, &confine, workspace.path(), true, args),
        confined
    );
    assert_eq!(
        std::fs::metadata(&mode).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert_eq!(
        probe_as(&user, &confine, workspace.path(), false, args),
        r#"{"secret":"ok","chmod":"ok","shadow":"EACCES","inside":"ok","child":"2"}"#
    );

    // Root in a container-like setup: no CAP_SYS_ADMIN (so no namespace of its own), a
    // read-only cgroup file system.
    let script = "mount --bind /sys/fs/cgroup /sys/fs/cgroup \
        && mount -o remount,bind,ro /sys/fs/cgroup \
        && exec capsh --drop=cap_sys_admin -- -c 'exec \"$0\" \"$@\"' \"$@\"";
    let container = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ];
    // A workspace and files of root's own: a child runs without capabilities even unsandboxed,
    // so root could not write, read or chmod nobody's files.
    let workspace = tempfile::tempdir().unwrap();
    for path in [secret.as_path(), mode.as_path()] {
        rustix::fs::chown(
            path,
            Some(rustix::process::Uid::ROOT),
            Some(rustix::process::Gid::ROOT),
        )
        .unwrap();
    }
    reset();
    assert_eq!(
        probe_as(&container, &confine, workspace.path(), true, args),
        confined
    );
    assert_eq!(
        std::fs::metadata(&mode).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert_eq!(
        probe_as(&container, &confine, workspace.path(), false, args),
        r#"{"secret":"ok","chmod":"ok","shadow":"ok","inside":"ok","child":"2"}"#
    );
}

/// `ps` and `/proc` under the sandbox show the run's own processes (a `/proc` of its PID
/// namespace), every one of them readable, and nothing of the host's: this test's own
/// process is not there. The `--no-sandbox` twin sees it.
#[test]
fn proc_shows_the_runs_processes_and_nothing_of_the_host() {
    let ws = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let command = format!(
        "sleep 30 & s=$!; ps -e -o comm= | sort | tr '\\n' ' '; echo; \
         tr '\\0' ' ' < /proc/$s/cmdline; echo; \
         if [ -e /proc/{me} ]; then echo host-visible; else echo host-hidden; fi; \
         ls /proc | grep -c '^[0-9]*$'; kill $s"
    );
    let line = json!({"id": 1, "name": "run_command", "arguments": {"command": command}});
    let run = |extra: &[&str]| -> Vec<String> {
        let mut flags = vec!["--allow-commands".to_owned()];
        flags.extend(census_flags());
        flags.extend(extra.iter().map(|s| (*s).to_owned()));
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let out = call_lines(ws.path(), &flags, &format!("{line}\n")).remove(0);
        assert_eq!(out["isError"], false, "{out}");
        let stdout = out["content"]["stdout"].as_str().unwrap().to_owned();
        stdout.lines().map(str::to_owned).collect()
    };
    let confined = run(&[]);
    assert_eq!(confined.len(), 4, "{confined:?}");
    // ps lists the run's processes: the shell, sleep and ps itself.
    for name in ["ps", "sh", "sleep"] {
        assert!(
            confined[0].split(' ').any(|n| n == name),
            "{name} not listed: {confined:?}"
        );
    }
    // A process the program started is readable, not only the program's own entry.
    assert_eq!(confined[1].trim(), "sleep 30", "{confined:?}");
    assert_eq!(confined[2], "host-hidden", "{confined:?}");
    let count: usize = confined[3].trim().parse().unwrap();
    assert!(count < 16, "the run's processes only: {confined:?}");
    // The twin: the host's /proc, this test's process in it.
    let open = run(&["--no-sandbox"]);
    assert_eq!(open[2], "host-visible", "{open:?}");
}

#[test]
fn the_private_tmp_is_bounded_by_sandbox_tmp_size_at_n_and_n_plus_one() {
    let workspace = tempfile::tempdir().unwrap();
    // /tmp and /dev/shm share the bound: N bytes fit across both, one byte more does not.
    let fill = "head -c 65536 /dev/zero > /tmp/a && head -c 65536 /dev/zero > /dev/shm/b && \
                if head -c 1 /dev/zero > /tmp/c 2>/dev/null; then echo over; else echo full; fi; \
                rm /dev/shm/b && echo kept > /tmp/kept";
    let read = "cat /tmp/kept; ls /tmp/a";
    let input = [fill, read]
        .iter()
        .enumerate()
        .map(|(i, command)| {
            json!({"id": i, "name": "run_command", "arguments": {"command": command}}).to_string()
                + "\n"
        })
        .collect::<String>();
    let stdout = |flags: &[&str]| -> Vec<String> {
        let mut all = vec!["--allow-commands"];
        all.extend_from_slice(flags);
        call_lines(workspace.path(), &all, &input)
            .iter()
            .map(|line| {
                assert_eq!(line["isError"], false, "{line}");
                line["content"]["stdout"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let bounded = stdout(&["--sandbox-tmp-size", "128K"]);
    assert_eq!(bounded[0], "full\n");
    // Shared by the server's runs.
    assert_eq!(bounded[1], "kept\n/tmp/a\n");
    // The twin: one page more, and the byte fits.
    let roomier = stdout(&["--sandbox-tmp-size", "132K"]);
    assert_eq!(roomier[0], "over\n");
    // Nothing reached the host's /tmp.
    assert_eq!(std::fs::read_to_string("/tmp/kept").ok(), None);
    // A size of nothing, or not a size: a usage error.
    for bad in ["0", "0K", "12X", "K", "-1"] {
        #[allow(clippy::disallowed_methods)]
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_confine"))
            .args(["call", "--root"])
            .arg(workspace.path())
            .args(["--allow-commands", &format!("--sandbox-tmp-size={bad}")])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--sandbox-tmp-size"),
            "{bad}: {out:?}"
        );
    }
}
