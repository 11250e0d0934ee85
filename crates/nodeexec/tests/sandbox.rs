//! The opt-in kernel sandbox ([`confine_nodeexec::Sandbox`]) with a real Node.js: every probe runs
//! twice, confined and not, and the unconfined twin shows the same probe succeeds without the
//! sandbox, so each refusal is the sandbox's doing.
//!
//! Every probe is a Node.js script that prints one JSON line (compared as text): `"ok"` for
//! an operation that worked, or the error's `code` (`"EACCES"`, `"EPERM"`, …).

use std::path::Path;
use std::time::Duration;

use confine_nodeexec::{ErrorKind, LandlockSupport, Outcome, Sandbox};
use tokio_util::sync::CancellationToken;

mod support;
use support::{command, has_cap_sys_admin, node};

fn kernel_abi() -> u32 {
    testkit::landlock_abi(LandlockSupport::probe().abi())
}

/// Whether the tests run as root (some twins need a capability).
fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A workspace and a second directory beside it, "outside".
struct Dirs {
    workspace: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Self {
        Self {
            workspace: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
        }
    }

    fn ws(&self) -> &Path {
        self.workspace.path()
    }

    fn out(&self) -> &Path {
        self.outside.path()
    }
}

const HELPERS: &str = "const fs = require('fs'), cp = require('child_process'), net = require('net');\
    const code = (f) => { try { f(); return 'ok'; } catch (e) { return e.code || String(e); } };\
    const say = (v) => console.log(JSON.stringify(v));";

/// Run `source` (after the helpers) with `args` in `dirs.ws()`, sandboxed by `sandbox` or not.
fn run(dirs: &Dirs, sandbox: Option<&Sandbox>, source: &str, args: &[&str]) -> Outcome {
    run_env(dirs, sandbox, source, args, &[])
}

/// [`run`] with variables set in the child.
fn run_env(
    dirs: &Dirs,
    sandbox: Option<&Sandbox>,
    source: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Outcome {
    let mut cmd = command(node());
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.arg("-e")
        .arg(format!("{HELPERS}\n{source}"))
        .arg("--")
        .args(args)
        .current_dir(dirs.ws())
        .timeout(Duration::from_secs(20))
        // These tests judge the sandbox's own limits: lift nodeexec's default data bound.
        .max_memory(None);
    if let Some(sandbox) = sandbox {
        let dir = std::fs::File::open(dirs.ws()).unwrap();
        let rules = sandbox.build(&dir).expect("sandbox builds on this kernel");
        cmd.sandbox(&rules);
    } else {
        // The unconfined twin keeps the embedder's privileges (dropped by default even
        // without a sandbox), so it shows what the sandbox alone takes away.
        cmd.drop_privileges(false);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(cmd.run(&CancellationToken::new()))
        .expect("the run completes")
}

/// The JSON text the script printed (its last stdout line).
fn said(outcome: &Outcome) -> String {
    let line = outcome.stdout.text.lines().last().unwrap_or_else(|| {
        panic!(
            "no output; exit {:?} signal {:?}; stderr: {}",
            outcome.exit_code, outcome.signal, outcome.stderr.text
        )
    });
    line.to_owned()
}

/// The sandbox without its seccomp socket filter: Landlock's network rules alone.
fn landlock_only() -> Sandbox {
    let mut sandbox = Sandbox::new();
    sandbox.socket_filter(false);
    sandbox
}

/// Run the probe confined and unconfined; returns (sandboxed, unsandboxed) answers.
fn twin(dirs: &Dirs, source: &str, args: &[&str]) -> (String, String) {
    let confined = said(&run(dirs, Some(&Sandbox::new()), source, args));
    let open = said(&run(dirs, None, source, args));
    (confined, open)
}

#[test]
fn sandbox_refuses_writing_outside_the_workspace() {
    let dirs = Dirs::new();
    let target = dirs.out().join("x.txt");
    let probe = "say(code(() => fs.writeFileSync(process.argv[1], 'x')))";
    let (confined, open) = twin(&dirs, probe, &[target.to_str().unwrap()]);
    // The read-only view answers first; Landlock alone refuses too.
    assert_eq!(confined, r#""EROFS""#);
    let mut landlock = Sandbox::new();
    landlock.read_only_outside(false);
    let alone = said(&run(
        &dirs,
        Some(&landlock),
        probe,
        &[target.to_str().unwrap()],
    ));
    assert_eq!(alone, r#""EACCES""#);
    assert_eq!(open, r#""ok""#);
    assert_eq!(std::fs::read(&target).unwrap(), b"x");
}

#[test]
fn sandbox_refuses_changing_existing_files_outside() {
    let dirs = Dirs::new();
    let target = dirs.out().join("keep.txt");
    let probe = "say([\
        code(() => fs.appendFileSync(process.argv[1], 'more')),\
        code(() => fs.truncateSync(process.argv[1], 0)),\
        code(() => fs.renameSync(process.argv[1], process.argv[1] + '.moved')),\
        code(() => fs.unlinkSync(process.argv[1])),\
        code(() => fs.mkdirSync(process.argv[1] + '.d')),\
        code(() => fs.symlinkSync('/etc/passwd', process.argv[1] + '.l')),\
    ])";
    std::fs::write(&target, "keep").unwrap();
    let confined = said(&run(
        &dirs,
        Some(&Sandbox::new()),
        probe,
        &[target.to_str().unwrap()],
    ));
    assert_eq!(
        confined,
        r#"["EROFS","EROFS","EROFS","EROFS","EROFS","EROFS"]"#
    );
    // Landlock alone, without the read-only view: refused as well.
    let mut landlock = Sandbox::new();
    landlock.read_only_outside(false);
    let alone = said(&run(
        &dirs,
        Some(&landlock),
        probe,
        &[target.to_str().unwrap()],
    ));
    assert_eq!(
        alone,
        r#"["EACCES","EACCES","EACCES","EACCES","EACCES","EACCES"]"#
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    let open = said(&run(&dirs, None, probe, &[target.to_str().unwrap()]));
    // The rename moved it away, so the unlink found nothing; the rest worked.
    assert_eq!(open, r#"["ok","ok","ok","ENOENT","ok","ok"]"#);
}

#[test]
fn sandbox_refuses_creating_in_tmp() {
    let dirs = Dirs::new();
    let target = Path::new("/tmp").join(testkit::unique("confine-sandbox-tmp"));
    let probe = "say(code(() => fs.writeFileSync(process.argv[1], 'x')))";
    let (confined, open) = twin(&dirs, probe, &[target.to_str().unwrap()]);
    // The host's /tmp: read-only in the view (no private /tmp was given here).
    assert_eq!(confined, r#""EROFS""#);
    assert_eq!(open, r#""ok""#);
    std::fs::remove_file(&target).unwrap();
}

#[test]
fn sandbox_binds_grandchildren() {
    let dirs = Dirs::new();
    let target = dirs.out().join("grandchild.txt");
    // The grandchild is a second Node.js started by the script; it exits 3 on a refusal.
    let probe = "const r = cp.spawnSync(process.execPath, ['-e', \
        \"try { require('fs').writeFileSync(process.argv[1], 'x') } \
          catch (e) { console.log(e.code); process.exit(3) }\", '--', process.argv[1]]);\
        say({ status: r.status, out: String(r.stdout).trim() })";
    let (confined, open) = twin(&dirs, probe, &[target.to_str().unwrap()]);
    assert_eq!(confined, r#"{"status":3,"out":"EROFS"}"#);
    assert_eq!(open, r#"{"status":0,"out":""}"#);
    assert!(target.exists());
}

/// Connect to `port` on 127.0.0.1; answers "ok" on connect or the error code.
const CONNECT: &str = "const s = net.connect({ host: '127.0.0.1', port: Number(process.argv[1]) });\
    s.on('connect', () => { say('ok'); s.destroy(); });\
    s.on('error', (e) => say(e.code));";

#[test]
fn sandbox_refuses_tcp_connect() {
    let dirs = Dirs::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let (confined, open) = twin(&dirs, CONNECT, &[&port]);
    assert_eq!(confined, r#""EACCES""#);
    assert_eq!(open, r#""ok""#);
    // Landlock's own TCP rule, without the seccomp filter that refuses the socket first.
    assert_eq!(
        said(&run(&dirs, Some(&landlock_only()), CONNECT, &[&port])),
        r#""EACCES""#
    );
    // The unconfined twin's connection reached the listener.
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_ok());
}

#[test]
fn sandbox_refuses_tcp_listen() {
    let dirs = Dirs::new();
    let probe = "const srv = net.createServer();\
        srv.on('error', (e) => say(e.code));\
        srv.listen(0, '127.0.0.1', () => { say('ok'); srv.close(); });";
    let (confined, open) = twin(&dirs, probe, &[]);
    assert_eq!(confined, r#""EACCES""#);
    assert_eq!(open, r#""ok""#);
    assert_eq!(
        said(&run(&dirs, Some(&landlock_only()), probe, &[])),
        r#""EACCES""#
    );
}

#[test]
fn sandbox_allows_writing_inside_and_reading_the_system() {
    let dirs = Dirs::new();
    let probe = "say([\
        code(() => fs.mkdirSync('sub/deeper', { recursive: true })),\
        code(() => fs.writeFileSync('sub/deeper/a.txt', 'a')),\
        code(() => fs.renameSync('sub/deeper/a.txt', 'b.txt')),\
        code(() => fs.truncateSync('b.txt', 0)),\
        code(() => fs.symlinkSync('b.txt', 'link')),\
        code(() => fs.readFileSync('/etc/passwd')),\
        code(() => fs.readdirSync('/usr')),\
        code(() => fs.writeFileSync('/dev/null', 'discarded')),\
        code(() => cp.execFileSync(process.execPath, ['--version'])),\
    ])";
    let (confined, open) = twin(&dirs, probe, &[]);
    let all_ok = r#"["ok","ok","ok","ok","ok","ok","ok","ok","ok"]"#;
    assert_eq!(confined, all_ok);
    // The unconfined twin, in the same workspace, finds the directories there already.
    assert_eq!(
        open,
        r#"["ok","ok","ok","ok","EEXIST","ok","ok","ok","ok"]"#
    );
    // What the confined run did is there: the file moved up, then truncated; the link.
    assert_eq!(std::fs::read(dirs.ws().join("b.txt")).unwrap(), b"");
    assert!(dirs.ws().join("sub/deeper").is_dir());
    assert!(dirs.ws().join("link").is_symlink());
}

#[test]
fn sandbox_unavailable_when_the_abi_is_too_old() {
    let dirs = Dirs::new();
    let dir = std::fs::File::open(dirs.ws()).unwrap();
    let abi = kernel_abi();
    // Requiring one ABI more than the kernel has: as on an older kernel.
    let mut sandbox = Sandbox::new();
    sandbox.min_abi(abi + 1);
    let err = sandbox.build(&dir).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SandboxUnavailable);
    assert_eq!(err.kind().code(), "SANDBOX_UNAVAILABLE");
    // The twin: requiring exactly the kernel's ABI builds, and the program runs confined.
    sandbox.min_abi(abi);
    let rules = sandbox.build(&dir).unwrap();
    assert_eq!(rules.abi(), abi.min(confine_nodeexec::MAX_TESTED_ABI));
    let outcome = run(
        &dirs,
        Some(&sandbox),
        "say(code(() => fs.writeFileSync('/tmp/x', '')))",
        &[],
    );
    assert_eq!(said(&outcome), r#""EROFS""#);
}

/// Six untouched 1 GiB buffers: 6 GiB of address space, next to no memory.
const ALLOCATE: &str = "const held = [];\
    try { for (let i = 0; i < 6; i++) held.push(new ArrayBuffer(2 ** 30)); say('ok'); }\
    catch (e) { say(e.constructor.name); }";

#[test]
fn sandbox_bounds_the_address_space() {
    let dirs = Dirs::new();
    let (confined, open) = twin(&dirs, ALLOCATE, &[]);
    assert_eq!(confined, r#""RangeError""#);
    assert_eq!(open, r#""ok""#);
    // With the limit lifted, the sandboxed run allocates too.
    let mut unlimited = Sandbox::new();
    unlimited.address_space(None);
    assert_eq!(
        said(&run(&dirs, Some(&unlimited), ALLOCATE, &[])),
        r#""ok""#
    );
}

#[test]
fn sandbox_bounds_open_files_at_n_and_n_plus_one() {
    let dirs = Dirs::new();
    // Node itself holds some descriptors; open /dev/null until refused, count what we got.
    let probe = "const fds = []; let err = 'none';\
        try { for (let i = 0; i < 5000; i++) fds.push(fs.openSync('/dev/null', 'r')); }\
        catch (e) { err = e.code; }\
        say([err, Math.max(...fds)]);";
    let (confined, open) = twin(&dirs, probe, &[]);
    // Descriptors are numbered from 0: the highest usable one is the limit minus one.
    assert_eq!(confined, r#"["EMFILE",1023]"#);
    assert!(open.starts_with(r#"["none","#), "{open}");
}

#[test]
fn sandbox_drops_capabilities() {
    let dirs = Dirs::new();
    let probe = "const status = fs.readFileSync('/proc/self/status', 'utf8');\
        fs.writeFileSync('owned.txt', 'x');\
        say([/CapEff:\\s*(\\w+)/.exec(status)[1],\
             code(() => fs.chownSync('owned.txt', 4321, 4321))])";
    let (confined, open) = twin(&dirs, probe, &[]);
    assert_eq!(confined, r#"["0000000000000000","EPERM"]"#);
    if root() {
        assert!(!open.starts_with(r#"["0000000000000000""#), "{open}");
        if has_cap_sys_admin() {
            assert!(open.ends_with(r#","ok"]"#), "{open}");
        } else {
            // Root without CAP_SYS_ADMIN: the twin runs in a user namespace of its own, where
            // the other owner is not mapped.
            assert!(open.ends_with(r#","EINVAL"]"#), "{open}");
            testkit::not_run(
                "sandbox_drops_capabilities (the twin's chown to another owner)",
                "root without CAP_SYS_ADMIN runs the twin in a user namespace where the other \
                 owner is not mapped (EINVAL); the root pass runs it",
            );
        }
    }
}

#[test]
fn sandbox_refuses_signals_outside_it() {
    let dirs = Dirs::new();
    // Signal 0 checks that a signal could be sent to the test process (no PID namespace, so
    // the test's pid means the test).
    let probe = "say(code(() => process.kill(Number(process.argv[1]), 0)))";
    let pid = std::process::id().to_string();
    let cmd_run = |sandbox: Option<&Sandbox>| {
        let mut cmd = command(node());
        cmd.arg("-e")
            .arg(format!("{HELPERS}\n{probe}"))
            .arg("--")
            .arg(&pid)
            .current_dir(dirs.ws())
            .pid_namespace(false)
            .timeout(Duration::from_secs(20));
        if let Some(sandbox) = sandbox {
            let dir = std::fs::File::open(dirs.ws()).unwrap();
            cmd.sandbox(&sandbox.build(&dir).unwrap());
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        said(&rt.block_on(cmd.run(&CancellationToken::new())).unwrap())
    };
    if kernel_abi() >= 6 {
        assert_eq!(cmd_run(Some(&Sandbox::new())), r#""EPERM""#);
    }
    assert_eq!(cmd_run(None), r#""ok""#);
}

#[test]
fn sandbox_refuses_abstract_unix_sockets_outside_it() {
    use std::os::linux::net::SocketAddrExt;
    let dirs = Dirs::new();
    let name = testkit::unique("confine-sandbox-abstract");
    // Node.js (libuv) connects with the whole 108-byte `sun_path`: the name NUL-padded.
    let mut padded = name.clone().into_bytes();
    padded.resize(107, 0);
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&padded).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let probe = "const s = net.connect({ path: '\\0' + process.argv[1] });\
        s.on('connect', () => { say('ok'); s.destroy(); });\
        s.on('error', (e) => say(e.code));";
    let (confined, open) = twin(&dirs, probe, &[&name]);
    // The seccomp filter refuses the Unix socket itself.
    assert_eq!(confined, r#""EACCES""#);
    assert_eq!(open, r#""ok""#);
    // Without it, Landlock's scope refuses the connection (ABI 6 and above).
    if kernel_abi() >= 6 {
        let scoped = said(&run(&dirs, Some(&landlock_only()), probe, &[&name]));
        assert_eq!(scoped, r#""EPERM""#);
    }
}

#[test]
fn sandbox_refuses_pathname_unix_sockets_outside_it() {
    use std::io::Read;
    let dirs = Dirs::new();
    // A listener in /tmp, as a daemon's socket would be (the Docker socket, an SSH agent).
    let path = Path::new("/tmp").join(testkit::unique("confine-sandbox-socket"));
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let probe = "const s = net.connect({ path: process.argv[1] });\
        s.on('connect', () => { s.end('secret', () => { say('ok'); s.destroy(); }); });\
        s.on('error', (e) => say(e.code));";
    let arg = path.to_str().unwrap();
    let confined = said(&run(&dirs, Some(&Sandbox::new()), probe, &[arg]));
    assert_eq!(confined, r#""EACCES""#);
    assert_eq!(
        listener.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "the listener received a connection from the sandbox"
    );
    // Landlock alone (ABI 7) has no right for connecting to a pathname socket.
    let landlock = said(&run(&dirs, Some(&landlock_only()), probe, &[arg]));
    assert_eq!(landlock, r#""ok""#);
    let open = said(&run(&dirs, None, probe, &[arg]));
    assert_eq!(open, r#""ok""#);
    let mut received = Vec::new();
    while let Ok((mut stream, _)) = listener.accept() {
        stream.set_nonblocking(false).unwrap();
        stream.read_to_end(&mut received).unwrap();
    }
    assert_eq!(received, b"secretsecret");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn sandbox_keeps_unix_stream_pairs_for_child_stdio_and_ipc() {
    let dirs = Dirs::new();
    // libuv gives a child's stdio and Node.js's IPC channel a socketpair(AF_UNIX, SOCK_STREAM).
    let probe = "fs.writeFileSync('child.js', \
            \"process.on('message', (m) => { process.send(m + '!'); process.exit(0); })\");\
        const child = cp.fork('./child.js');\
        child.on('message', (m) => say([m, String(cp.execFileSync('/bin/sh', ['-c', 'echo sh']))]));\
        child.on('error', (e) => say(e.code));\
        child.send('ping');";
    let (confined, open) = twin(&dirs, probe, &[]);
    assert_eq!(confined, r#"["ping!","sh\n"]"#);
    assert_eq!(open, confined);
}

/// Send one datagram to a Rust UDP socket; answers "ok" or the error code.
const UDP_SEND: &str = "let s; try { s = require('dgram').createSocket('udp4'); } catch (e) { say(e.code); return; }\
    s.on('error', (e) => { say(e.code); s.close(); });\
    s.send('hello', Number(process.argv[1]), '127.0.0.1', (e) => { if (!e) say('ok'); s.close(); });";

#[test]
fn sandbox_refuses_udp_and_other_ip_sockets() {
    let dirs = Dirs::new();
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = socket.local_addr().unwrap().port().to_string();
    let source = format!("(() => {{ {UDP_SEND} }})()");
    let (confined, open) = twin(&dirs, &source, &[&port]);
    assert_eq!(confined, r#""EACCES""#);
    assert_eq!(open, r#""ok""#);
    let mut buf = [0u8; 16];
    let (n, _) = socket.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello");
    // Without the seccomp filter, Landlock alone lets UDP through (it has no UDP rule at ABI 7).
    assert_eq!(
        said(&run(&dirs, Some(&landlock_only()), &source, &[&port])),
        r#""ok""#
    );
    let (n, _) = socket.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"hello");
}

#[test]
fn sandbox_refuses_reading_secrets_outside_the_workspace() {
    let dirs = Dirs::new();
    // A fake home with the usual secrets, and a secret elsewhere outside the workspace.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_ed25519"), "home-key").unwrap();
    std::fs::write(home.path().join(".env"), "TOKEN=home").unwrap();
    let secret = dirs.out().join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    let probe = "const home = require('os').homedir();\
        const read = (p) => { try { return fs.readFileSync(p, 'utf8'); } catch (e) { return e.code; } };\
        const list = (p) => { try { return fs.readdirSync(p).length > 0 ? 'listed' : 'empty'; } catch (e) { return e.code; } };\
        say([read(home + '/.ssh/id_ed25519'), read(home + '/.env'), list(home),\
             read(process.argv[1]), list(process.argv[2]), list('/tmp')])";
    let args = [secret.to_str().unwrap(), dirs.out().to_str().unwrap()];
    let env = [("HOME", home.path().to_str().unwrap())];
    let confined = said(&run_env(&dirs, Some(&Sandbox::new()), probe, &args, &env));
    assert_eq!(
        confined,
        r#"["EACCES","EACCES","EACCES","EACCES","EACCES","EACCES"]"#
    );
    let open = said(&run_env(&dirs, None, probe, &args, &env));
    assert_eq!(
        open,
        r#"["home-key","TOKEN=home","listed","s3cret","listed","listed"]"#
    );
    // An embedder may add a place to read.
    let mut more = Sandbox::new();
    more.allow_read(dirs.out());
    let added = said(&run_env(&dirs, Some(&more), probe, &args, &env));
    assert_eq!(
        added,
        r#"["EACCES","EACCES","EACCES","s3cret","listed","EACCES"]"#
    );
}

#[test]
fn sandbox_refuses_reading_etc_shadow_and_root_as_root() {
    if !root() {
        testkit::not_run(
            "sandbox_refuses_reading_etc_shadow_and_root_as_root",
            "needs root (an ordinary user cannot read /etc/shadow anyway)",
        );
        return;
    }
    let dirs = Dirs::new();
    // /etc/shadow is covered by /dev/null in the run's mount namespace: read, it is empty.
    let probe = "const size = (p) => { try { return fs.readFileSync(p).length > 0 ? 'bytes' : 'empty'; }\
        catch (e) { return e.code; } };\
        say([size('/etc/shadow'), code(() => fs.readdirSync('/root')), size('/etc/passwd')])";
    let (confined, open) = twin(&dirs, probe, &[]);
    assert_eq!(confined, r#"["empty","EACCES","bytes"]"#);
    assert_eq!(open, r#"["bytes","ok","bytes"]"#);
    // Without the view (where no mount namespace can be made), the allow-list: EACCES.
    let mut no_view = Sandbox::new();
    no_view.read_only_outside(false);
    let confined = said(&run(&dirs, Some(&no_view), probe, &[]));
    assert_eq!(confined, r#"["EACCES","EACCES","bytes"]"#);
}

/// Files of `/etc` the test makes as root, removed when dropped.
struct EtcFiles(Vec<std::path::PathBuf>);

impl Drop for EtcFiles {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// All of `/etc` is readable under the sandbox (what pip, Python's `http.server`, git read:
/// `/etc/debian_version`, `/etc/mime.types`), but its secrets: as root the test makes an SSH
/// host key (`/etc/ssh/ssh_host_*_key`, secret by name although its mode lets others read it)
/// and a file of mode 0600 (kept from other users, so secret by mode), and the sandboxed
/// program reads neither (each is `/dev/null` in its mount namespace) nor `/etc/shadow`,
/// while the unconfined twin reads them all. Without the view (the fallback where no mount
/// namespace can be made) `/etc` is the allow-list again: the ordinary files are `EACCES`.
#[test]
fn sandbox_reads_etc_but_not_its_secrets() {
    let dirs = Dirs::new();
    let ordinary: Vec<&str> = ["/etc/debian_version", "/etc/mime.types", "/etc/login.defs"]
        .into_iter()
        .filter(|p| Path::new(p).is_file())
        .collect();
    assert!(
        !ordinary.is_empty(),
        "no ordinary file of /etc to read here"
    );
    let mut secrets = vec!["/etc/shadow".to_owned()];
    let mut made = EtcFiles(Vec::new());
    if root() && Path::new("/etc/ssh").is_dir() {
        use std::os::unix::fs::PermissionsExt;
        let id = std::process::id();
        let key = format!("/etc/ssh/ssh_host_confinetest{id}_key");
        let private = format!("/etc/confinetest-{id}.secret");
        for (path, mode) in [(&key, 0o644), (&private, 0o600)] {
            std::fs::write(path, "PRIVATE KEY").unwrap();
            made.0.push(path.into());
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
            secrets.push(path.clone());
        }
    } else {
        testkit::not_run(
            "sandbox_reads_etc_but_not_its_secrets (made secrets)",
            "an ordinary user cannot make files in /etc; the root pass runs it",
        );
    }
    let paths: Vec<&str> = ordinary
        .iter()
        .copied()
        .chain(secrets.iter().map(String::as_str))
        .collect();
    let probe = "const size = (p) => { try { return fs.readFileSync(p).length > 0 ? 'bytes' : 'empty'; }\
        catch (e) { return e.code; } };\
        say(process.argv.slice(1).map(size))";
    let answers = |sandbox: Option<&Sandbox>| -> Vec<String> {
        let line = said(&run(&dirs, sandbox, probe, &paths));
        let inner = line.trim_start_matches('[').trim_end_matches(']');
        inner
            .split(',')
            .map(|a| a.trim_matches('"').to_owned())
            .collect()
    };
    let confined = answers(Some(&Sandbox::new()));
    for (path, answer) in paths.iter().zip(&confined) {
        match ordinary.contains(path) {
            true => assert_eq!(answer, "bytes", "{path}: {confined:?}"),
            // Covered ("empty"), or already kept from an ordinary user ("EACCES").
            false => assert!(
                answer == "empty" || answer == "EACCES",
                "{path}: {confined:?}"
            ),
        }
    }
    if root() {
        let open = answers(None);
        assert!(open.iter().all(|a| a == "bytes"), "twin: {open:?}");
    }
    let mut no_view = Sandbox::new();
    no_view.read_only_outside(false);
    let confined = answers(Some(&no_view));
    for (path, answer) in paths.iter().zip(&confined) {
        assert_eq!(answer, "EACCES", "{path} without the view: {confined:?}");
    }
}

#[test]
fn sandbox_refuses_requiring_modules_outside_the_workspace() {
    let dirs = Dirs::new();
    std::fs::write(dirs.out().join("outside.js"), "module.exports = 'outside';").unwrap();
    let module = dirs.ws().join("node_modules/inside");
    std::fs::create_dir_all(&module).unwrap();
    std::fs::write(module.join("index.js"), "module.exports = 'inside';").unwrap();
    let probe = "const load = (m) => { try { return require(m); } catch (e) { return e.code; } };\
        say([load('inside'), load(process.argv[1])])";
    let outside = dirs.out().join("outside.js");
    let args = [outside.to_str().unwrap()];
    let (confined, open) = twin(&dirs, probe, &args);
    assert_eq!(confined, r#"["inside","EACCES"]"#);
    assert_eq!(open, r#"["inside","outside"]"#);
    let mut more = Sandbox::new();
    more.allow_read(dirs.out());
    assert_eq!(
        said(&run(&dirs, Some(&more), probe, &args)),
        r#"["inside","outside"]"#
    );
}

#[test]
fn sandbox_runs_a_real_workload() {
    let dirs = Dirs::new();
    std::fs::write(dirs.ws().join("data.json"), r#"{"n": 20}"#).unwrap();
    let module = dirs.ws().join("node_modules/sum");
    std::fs::create_dir_all(&module).unwrap();
    std::fs::write(
        module.join("index.js"),
        "module.exports = (n) => n * (n + 1) / 2;",
    )
    .unwrap();
    let probe = "const sum = require('sum');\
        const { n } = JSON.parse(fs.readFileSync('data.json', 'utf8'));\
        fs.mkdirSync('out', { recursive: true });\
        fs.writeFileSync('out/result.txt', String(sum(n)));\
        const child = cp.spawnSync(process.execPath, ['-e',\
            \"process.stdout.write(require('fs').readFileSync('out/result.txt', 'utf8'))\"]);\
        const shell = cp.execFileSync('/bin/sh', ['-c', 'cat out/result.txt | wc -c']);\
        say([String(child.stdout), child.status, String(shell).trim(), require('os').cpus().length > 0])";
    let (confined, open) = twin(&dirs, probe, &[]);
    assert_eq!(confined, r#"["210",0,"3",true]"#);
    assert_eq!(open, confined);
    assert_eq!(
        std::fs::read_to_string(dirs.ws().join("out/result.txt")).unwrap(),
        "210"
    );
}

/// `setxattr(path, "user.confine", "v", 1, 0)` by Perl's raw `syscall` (Node.js has no
/// extended-attribute call; Perl is part of every Debian system).
fn setxattr_source() -> String {
    #[cfg(target_arch = "x86_64")]
    const SETXATTR: u32 = 188;
    #[cfg(target_arch = "aarch64")]
    const SETXATTR: u32 = 5;
    format!(
        "const setxattr = (p) => {{ const r = cp.spawnSync('/usr/bin/perl', ['-e',\
            'my ($p, $n, $v) = (shift, \"user.confine\", \"v\"); print syscall({SETXATTR}, $p, $n, $v, 1, 0) == 0 ? \"ok\" : ($!{{EPERM}} ? \"EPERM\" : $!{{EROFS}} ? \"EROFS\" : \"errno \" . ($! + 0))',\
            p]); return r.error ? r.error.code : String(r.stdout); }};"
    )
}

#[test]
fn sandbox_refuses_metadata_changes_outside_the_workspace() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dirs = Dirs::new();
    let target = dirs.out().join("mode.txt");
    let reset = || {
        std::fs::write(&target, "x").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    };
    reset();
    let before = std::fs::metadata(&target).unwrap();
    // By path, and by a descriptor opened for reading (a file the program may read: as root
    // that is every system file).
    let probe = format!(
        "{}\
        const p = process.argv[1];\
        const fd = (() => {{ try {{ return fs.openSync(p, 'r'); }} catch (e) {{ return -1; }} }})();\
        say([code(() => fs.chmodSync(p, 0o777)), code(() => fs.fchmodSync(fd, 0o777)),\
             code(() => fs.chownSync(p, process.getuid(), process.getgid())),\
             code(() => fs.fchownSync(fd, process.getuid(), process.getgid())),\
             code(() => fs.utimesSync(p, 0, 0)), code(() => fs.futimesSync(fd, 0, 0)),\
             code(() => fs.lutimesSync(p, 0, 0)), setxattr(p)])",
        setxattr_source()
    );
    let args = [target.to_str().unwrap()];
    let mut readable = Sandbox::new();
    readable.allow_read(dirs.out());
    // The read-only view: the kernel refuses every change outside, as root too.
    let confined = said(&run(&dirs, Some(&readable), &probe, &args));
    assert_eq!(
        confined,
        r#"["EROFS","EROFS","EROFS","EROFS","EROFS","EROFS","EROFS","EROFS"]"#
    );
    // Without the view (as where no mount namespace can be made): the seccomp rule refuses
    // them everywhere.
    let mut fallback = Sandbox::new();
    fallback.allow_read(dirs.out()).read_only_outside(false);
    let refused = said(&run(&dirs, Some(&fallback), &probe, &args));
    assert_eq!(
        refused,
        r#"["EPERM","EPERM","EPERM","EPERM","EPERM","EPERM","EPERM","EPERM"]"#
    );
    let after = std::fs::metadata(&target).unwrap();
    assert_eq!(after.permissions().mode() & 0o7777, 0o644);
    assert_eq!((after.mtime(), after.uid()), (before.mtime(), before.uid()));
    assert!(xattr_absent(&target));

    // Landlock alone does not govern metadata: without the view and the filter it all goes
    // through.
    let mut landlock = Sandbox::new();
    landlock
        .allow_read(dirs.out())
        .metadata_filter(false)
        .read_only_outside(false);
    let ok8 = r#"["ok","ok","ok","ok","ok","ok","ok","ok"]"#;
    assert_eq!(said(&run(&dirs, Some(&landlock), &probe, &args)), ok8);
    reset();
    let open = said(&run(&dirs, None, &probe, &args));
    assert_eq!(open, ok8);
    assert_eq!(
        std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777,
        0o777
    );
    assert!(!xattr_absent(&target));
}

/// Whether `path` has no `user.confine` attribute.
fn xattr_absent(path: &Path) -> bool {
    let mut buf = [0u8; 8];
    matches!(
        rustix::fs::getxattr(path, "user.confine", &mut buf),
        Err(rustix::io::Errno::NODATA)
    )
}

/// Metadata inside the workspace: modes, times, owner to one's own uid, copies keeping modes
/// all work under the read-only view; set-user-ID and set-group-ID modes (by `chmod` and at
/// creation) and another owner do not. Without the view (where no mount namespace can be
/// made) every change is refused, as before.
#[test]
fn sandbox_allows_metadata_changes_inside_the_workspace_but_no_set_id_bits() {
    let dirs = Dirs::new();
    let probe = "fs.writeFileSync('a.txt', 'x');\
        const other = process.getuid() === 0 ? 1 : 0;\
        say([code(() => fs.chmodSync('a.txt', 0o755)), code(() => fs.copyFileSync('a.txt', 'b.txt')),\
             code(() => fs.utimesSync('a.txt', 1, 1)), code(() => fs.chownSync('a.txt', process.getuid(), -1)),\
             code(() => fs.writeFileSync('c.txt', fs.readFileSync('a.txt'))),\
             code(() => fs.chmodSync('a.txt', 0o4755)), code(() => fs.chmodSync('a.txt', 0o2755)),\
             code(() => fs.closeSync(fs.openSync('s.txt', 'w', 0o4755))),\
             (fs.statSync('a.txt').mode & 0o7777).toString(8),\
             code(() => fs.chownSync('a.txt', other, -1))])";
    let (confined, open) = twin(&dirs, probe, &[]);
    assert_eq!(
        confined,
        r#"["ok","ok","ok","ok","ok","EPERM","EPERM","EPERM","755","EPERM"]"#
    );
    // The twin: unconfined, the set-ID modes go through (the other owner too, as root).
    // (Another owner: root's to give; an ordinary user's run meets EPERM, or EINVAL in the
    // user namespace of its containment, where the other uid is not mapped.)
    let open = open.replace("EINVAL", "EPERM");
    let other = if root() && has_cap_sys_admin() {
        "ok"
    } else {
        if root() {
            testkit::not_run(
                "sandbox_allows_metadata_changes_inside_the_workspace_but_no_set_id_bits \
                 (the twin's other owner)",
                "root without CAP_SYS_ADMIN runs the twin in a user namespace where the other \
                 owner is not mapped; the root pass runs it",
            );
        }
        "EPERM"
    };
    assert_eq!(
        open,
        format!(r#"["ok","ok","ok","ok","ok","ok","ok","ok","2755","{other}"]"#)
    );
    // Without the view: the seccomp rule refuses metadata inside the workspace too.
    let dirs = Dirs::new();
    let mut fallback = Sandbox::new();
    fallback.read_only_outside(false);
    let refused = said(&run(&dirs, Some(&fallback), probe, &[]));
    assert_eq!(
        refused,
        r#"["EPERM","EPERM","EPERM","EPERM","ok","EPERM","EPERM","EPERM","644","EPERM"]"#
    );
}

#[test]
fn sandbox_reads_its_own_proc_entries_only() {
    let dirs = Dirs::new();
    // Another process's entries: its environment and memory map (which Landlock's ptrace
    // restriction would refuse anyway), and its status and command line (which it would
    // not: command lines may hold secrets).
    let probe = "const p = '/proc/' + process.argv[1];\
        say([code(() => fs.readFileSync(p + '/environ')), code(() => fs.readFileSync(p + '/maps')),\
             code(() => fs.readFileSync(p + '/status')), code(() => fs.readFileSync(p + '/cmdline')),\
             code(() => fs.readFileSync('/proc/self/status')), code(() => fs.readFileSync('/proc/self/maps')),\
             code(() => fs.readdirSync('/proc/self/fd')), code(() => fs.readFileSync('/proc/meminfo'))])";
    let pid = std::process::id().to_string();
    let (confined, open) = twin(&dirs, probe, &[&pid]);
    // Where the run has a PID namespace (every mode here), its `/proc` is that namespace's
    // and the host's process is not there at all; elsewhere it is there and unreadable.
    let hidden = r#"["ENOENT","ENOENT","ENOENT","ENOENT","ok","ok","ok","ok"]"#;
    let refused = r#"["EACCES","EACCES","EACCES","EACCES","ok","ok","ok","ok"]"#;
    assert!(confined == hidden || confined == refused, "{confined}");
    if root() && has_cap_sys_admin() {
        assert_eq!(open, r#"["ok","ok","ok","ok","ok","ok","ok","ok"]"#);
    } else {
        if root() {
            testkit::not_run(
                "sandbox_reads_its_own_proc_entries_only (the twin as root with every capability)",
                "root without CAP_SYS_ADMIN runs the twin in a user namespace of its own, as an \
                 ordinary user's; the root pass runs it",
            );
        }
        // An ordinary user's run (and root's without CAP_SYS_ADMIN) is in a user namespace
        // of its own, from which another namespace's process's environment and memory map
        // are refused anyway (no CAP_SYS_PTRACE there); its status and command line are not.
        assert_eq!(open, r#"["EACCES","EACCES","ok","ok","ok","ok","ok","ok"]"#);
    }
}

/// A workspace holding a repository's `.git/hooks` and `.git/config`, with the probe of
/// [`READ_ONLY_PROBE`] and a sandbox keeping those two read-only.
fn repository() -> (Dirs, Sandbox) {
    let dirs = Dirs::new();
    std::fs::create_dir_all(dirs.ws().join(".git/hooks")).unwrap();
    std::fs::create_dir_all(dirs.ws().join(".git/objects")).unwrap();
    std::fs::write(dirs.ws().join(".git/config"), "[core]\n").unwrap();
    std::fs::write(
        dirs.ws().join(".git/hooks/pre-commit.sample"),
        "#!/bin/sh\n",
    )
    .unwrap();
    let root = dirs.ws().canonicalize().unwrap();
    let mut sandbox = Sandbox::new();
    sandbox
        .read_only(root.join(".git/hooks"))
        .read_only(root.join(".git/config"));
    (dirs, sandbox)
}

/// Plant a hook, change an existing one, append to the configuration, replace it by a rename
/// (`EXDEV`: a mount point), remove the hooks directory or move `.git` aside (`EBUSY`: mount
/// points); then write beside them (`.git/objects`, the
/// workspace).
const READ_ONLY_PROBE: &str = "say([\
    code(() => fs.writeFileSync('.git/hooks/pre-commit', '#!/bin/sh\\necho planted\\n')),\
    code(() => fs.appendFileSync('.git/hooks/pre-commit.sample', 'echo planted\\n')),\
    code(() => fs.appendFileSync('.git/config', '[core]\\n\\tfsmonitor = ./x\\n')),\
    code(() => { fs.writeFileSync('config.new', '[core]\\n'); fs.renameSync('config.new', '.git/config'); }),\
    code(() => fs.rmSync('.git/hooks', { recursive: true })),\
    code(() => fs.renameSync('.git', 'moved')),\
    code(() => fs.writeFileSync('.git/objects/x', 'x')),\
    code(() => fs.writeFileSync('in.txt', 'x')),\
])";

/// The read-only paths ([`Sandbox::read_only`]) hold against every way of changing them, while
/// the rest of the tree stays writable; the twin without them changes them all.
#[test]
fn sandbox_keeps_read_only_paths_read_only() {
    let (dirs, sandbox) = repository();
    let outcome = run(&dirs, Some(&sandbox), READ_ONLY_PROBE, &[]);
    assert_eq!(
        said(&outcome),
        r#"["EROFS","EROFS","EROFS","EXDEV","EBUSY","EBUSY","ok","ok"]"#
    );
    assert!(!dirs.ws().join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(dirs.ws().join(".git/hooks/pre-commit.sample")).unwrap(),
        "#!/bin/sh\n"
    );
    assert_eq!(
        std::fs::read_to_string(dirs.ws().join(".git/config")).unwrap(),
        "[core]\n"
    );
    // No mount reached the embedder's namespace: the same paths are writable here.
    std::fs::write(dirs.ws().join(".git/hooks/probe"), "x").unwrap();
    std::fs::remove_file(dirs.ws().join(".git/hooks/probe")).unwrap();

    // The same sandbox without the read-only paths: every change goes through.
    let (dirs, _) = repository();
    let outcome = run(&dirs, Some(&Sandbox::new()), READ_ONLY_PROBE, &[]);
    assert_eq!(
        said(&outcome),
        r#"["ok","ok","ok","ok","ok","ok","ENOENT","ok"]"#
    );
}

/// Whether this process holds `CAP_SYS_ADMIN` (root outside a container-like setup).
fn sys_admin() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap()
        .trim();
    u64::from_str_radix(eff, 16).unwrap() & (1 << 21) != 0
}

/// Where no mount namespace can be made (subreaper mode, so without the user namespace the
/// PID namespace brings, for an ordinary user or a root without `CAP_SYS_ADMIN`), a sandbox with read-only paths refuses to start
/// (`SandboxUnavailable`: the program never runs with them writable), and one without runs.
#[test]
fn sandbox_with_read_only_paths_is_unavailable_without_a_mount_namespace() {
    const TEST: &str = "sandbox_with_read_only_paths_is_unavailable_without_a_mount_namespace";
    if sys_admin() {
        testkit::not_run(
            TEST,
            "with CAP_SYS_ADMIN (a mount namespace is made in every mode); \
             it runs as an ordinary user and in the container-like setup",
        );
        return;
    }
    let (dirs, sandbox) = repository();
    let start = |sandbox: &Sandbox| {
        let mut cmd = command(node());
        cmd.arg("-e")
            .arg(format!("{HELPERS}\n{READ_ONLY_PROBE}"))
            .current_dir(dirs.ws())
            .timeout(Duration::from_secs(20))
            .containment(confine_nodeexec::Containment::Subreaper);
        let dir = std::fs::File::open(dirs.ws()).unwrap();
        cmd.sandbox(&sandbox.build(&dir).unwrap());
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(cmd.run(&CancellationToken::new()))
    };
    let err = start(&sandbox).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SandboxUnavailable, "{err}");
    assert!(!dirs.ws().join(".git/hooks/pre-commit").exists());
    assert!(!dirs.ws().join("in.txt").exists(), "the program never ran");
    let outcome = start(&Sandbox::new()).unwrap();
    assert!(said(&outcome).ends_with(r#""ok"]"#));
}

/// A read-only path that is missing, outside the write root, or the write root itself is
/// refused at build, before anything starts.
#[test]
fn sandbox_read_only_paths_must_exist_beneath_the_write_root() {
    let dirs = Dirs::new();
    let dir = std::fs::File::open(dirs.ws()).unwrap();
    let root = dirs.ws().canonicalize().unwrap();
    for path in [root.join("missing"), dirs.out().to_owned(), root.clone()] {
        let mut sandbox = Sandbox::new();
        sandbox.read_only(&path);
        let err = sandbox.build(&dir).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::StartFailed, "{path:?}: {err}");
    }
}

/// Run `program` with `args` in `dirs.ws()`, sandboxed (the default policy) or not (the
/// unconfined twin, with the embedder's privileges, as [`run`] does).
fn run_program(dirs: &Dirs, sandboxed: bool, program: &str, args: &[&str]) -> Outcome {
    let mut cmd = command(program);
    cmd.args(args)
        .current_dir(dirs.ws())
        .timeout(Duration::from_secs(20))
        .max_memory(None);
    match sandboxed {
        true => {
            let dir = std::fs::File::open(dirs.ws()).unwrap();
            let rules = Sandbox::new()
                .build(&dir)
                .expect("sandbox builds on this kernel");
            cmd.sandbox(&rules);
        }
        false => {
            cmd.drop_privileges(false);
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(cmd.run(&CancellationToken::new()))
        .expect("the run completes")
}

/// Python 3 at a path the sandbox reads (not a shim under the home), if there is one.
fn system_python() -> Option<&'static str> {
    ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// `os.unshare(os.CLONE_NEWUSER)` (Python 3.12), or the same call through ctypes before it:
/// prints `ok` or the error's name.
const PY_UNSHARE_USER: &str = "import os, ctypes, errno\n\
try:\n    os.unshare(os.CLONE_NEWUSER); print('ok')\n\
except AttributeError:\n    libc = ctypes.CDLL(None, use_errno=True)\n    \
print('ok' if libc.unshare(0x10000000) == 0 else errno.errorcode[ctypes.get_errno()])\n\
except OSError as e:\n    print(errno.errorcode[e.errno])";

/// Under the sandbox no namespace can be made, a user namespace least of all (inside one a
/// program would hold every capability again): `unshare -U true` and `unshare -r true` fail
/// with `EPERM`, and so does Python's `unshare(CLONE_NEWUSER)`. Twin: the same commands
/// unconfined succeed where this host lets a process make a user namespace (said loudly
/// where it does not).
#[test]
fn sandbox_refuses_user_namespaces() {
    const TEST: &str = "sandbox_refuses_user_namespaces";
    let dirs = Dirs::new();
    let unshare = ["/usr/bin/unshare", "/bin/unshare"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(unshare) = unshare else {
        testkit::not_run(TEST, "no unshare(1) here");
        return;
    };
    for flags in ["-U", "-r"] {
        let o = run_program(&dirs, true, unshare, &[flags, "/bin/true"]);
        assert_eq!(o.exit_code, Some(1), "{flags}: {o:?}");
        assert!(
            o.stderr.text.contains("Operation not permitted"),
            "{flags}: {o:?}"
        );
    }
    let python = system_python();
    if let Some(python) = python {
        let o = run_program(&dirs, true, python, &["-c", PY_UNSHARE_USER]);
        assert_eq!(o.stdout.text, "EPERM\n", "{o:?}");
    }
    // The twin.
    let open = run_program(&dirs, false, unshare, &["-U", "/bin/true"]);
    if open.exit_code != Some(0) {
        testkit::not_run(
            &format!("{TEST} (twin)"),
            &format!(
                "this host refuses user namespaces outside the sandbox too: {}",
                open.stderr.text.trim()
            ),
        );
        return;
    }
    let o = run_program(&dirs, false, unshare, &["-r", "/bin/true"]);
    assert_eq!(o.exit_code, Some(0), "{o:?}");
    if let Some(python) = python {
        let o = run_program(&dirs, false, python, &["-c", PY_UNSHARE_USER]);
        assert_eq!(o.stdout.text, "ok\n", "{o:?}");
    }
}

/// What the namespace rule must not break, under the sandbox: threads and forks (no
/// namespace flag; `clone3`, refused with `ENOSYS`, falls back to `clone`): Node.js worker
/// threads, a shell's background job and `wait`, Python threads and `fork`. Each also runs
/// unconfined, with the same answer.
#[test]
fn sandbox_keeps_threads_and_forks() {
    let dirs = Dirs::new();
    let node_workers = "const { Worker } = require('worker_threads');\
        let n = 0; for (let i = 0; i < 4; i++) {\
        const w = new Worker('require(\"worker_threads\").parentPort.postMessage(6 * 7)', { eval: true });\
        w.on('message', (v) => { n += v; if (n === 4 * 42) say('workers ' + n); }); }";
    let (confined, open) = twin(&dirs, node_workers, &[]);
    assert_eq!(confined, r#""workers 168""#);
    assert_eq!(open, confined);
    let shell = "sleep 0 & wait $! && echo forked";
    for sandboxed in [true, false] {
        let o = run_program(&dirs, sandboxed, "/bin/sh", &["-c", shell]);
        assert_eq!(o.stdout.text, "forked\n", "{sandboxed}: {o:?}");
    }
    let Some(python) = system_python() else {
        testkit::not_run(
            "sandbox_keeps_threads_and_forks (python)",
            "no system Python here",
        );
        return;
    };
    let threads = "import threading, os\n\
        out = []\n\
        ts = [threading.Thread(target=lambda i=i: out.append(i)) for i in range(8)]\n\
        [t.start() for t in ts]; [t.join() for t in ts]\n\
        pid = os.fork()\n\
        if pid == 0: os._exit(7)\n\
        print(sum(out), os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))";
    for sandboxed in [true, false] {
        let o = run_program(&dirs, sandboxed, python, &["-c", threads]);
        assert_eq!(o.stdout.text, "28 7\n", "{sandboxed}: {o:?}");
    }
}

/// The probe of the private `/tmp` and `/dev/shm`: their bounds, then each at N and N + 1.
const TMPFS_PROBE: &str = "const s = fs.statfsSync('/tmp');\
    const r = { bytes: s.blocks * s.bsize, inodes: s.files, same: JSON.stringify(s) === JSON.stringify(fs.statfsSync('/dev/shm')) };\
    const free = fs.statfsSync('/tmp').bfree * s.bsize;\
    r.freeBytes = free;\
    r.fill = code(() => fs.writeFileSync('/tmp/fill', Buffer.alloc(free)));\
    r.oneMore = code(() => fs.writeFileSync('/dev/shm/one', 'x'));\
    fs.unlinkSync('/tmp/fill'); try { fs.unlinkSync('/dev/shm/one'); } catch (e) {}\
    const entries = fs.statfsSync('/tmp').ffree;\
    r.freeEntries = entries;\
    let made = 0; for (let i = 0; i < entries; i++) { if (code(() => fs.writeFileSync('/dev/shm/e' + i, '')) === 'ok') made++; }\
    r.made = made;\
    r.entryMore = code(() => fs.writeFileSync('/tmp/more', ''));\
    for (let i = 0; i < entries; i++) { try { fs.unlinkSync('/dev/shm/e' + i); } catch (e) {} }\
    r.marker = code(() => fs.writeFileSync('/tmp/' + process.argv[1], 'kept'));\
    say(r);";

#[test]
fn the_private_tmp_is_one_bounded_tmpfs_shared_by_the_servers_runs_alone() {
    use std::sync::Arc;
    let dirs = Dirs::new();
    let marker = testkit::unique("confine-private-tmp");
    let server = |bytes, inodes| {
        let mut private = confine_nodeexec::PrivateDirs::create(None).unwrap();
        private.bound_tmp(bytes, inodes).unwrap();
        let private = Arc::new(private);
        let mut sandbox = Sandbox::new();
        sandbox.private_dirs(Arc::clone(&private));
        (private, sandbox)
    };
    let (private, sandbox) = server(1 << 20, 64);
    assert_eq!(
        private.tmp_bound(),
        None,
        "made at the first run, not before"
    );
    let ran = said(&run(&dirs, Some(&sandbox), TMPFS_PROBE, &[&marker]));
    // Made everywhere these tests run (root makes it in a mount namespace of a helper's; an
    // ordinary user, and root without CAP_SYS_ADMIN, in a user namespace of the helper's).
    assert_eq!(private.tmp_bound(), Some((1 << 20, 64)), "{ran}");
    let r: serde_json::Value = serde_json::from_str(&ran).unwrap();
    // One bound for both: N bytes fit, one more does not; so with entries.
    assert_eq!(r["bytes"], 1 << 20, "{r}");
    assert_eq!(r["inodes"], 64, "{r}");
    assert_eq!(r["same"], true, "{r}");
    assert_eq!(r["freeBytes"], 1 << 20, "{r}");
    assert_eq!(r["fill"], "ok", "{r}");
    assert_eq!(r["oneMore"], "ENOSPC", "{r}");
    let free_entries = r["freeEntries"].as_u64().unwrap();
    assert!((32..64).contains(&free_entries), "{r}");
    assert_eq!(r["made"], free_entries, "{r}");
    assert_eq!(r["entryMore"], "ENOSPC", "{r}");
    assert_eq!(r["marker"], "ok", "{r}");
    // Nothing of it in the host's /tmp.
    assert!(!Path::new("/tmp").join(&marker).exists());
    // The server's next run sees what the first left; another server's does not.
    let read = format!("say(code(() => fs.readFileSync('/tmp/{marker}', 'utf8')))");
    let twice = said(&run(
        &dirs,
        Some(&sandbox),
        &format!("{read}; say(fs.readFileSync('/tmp/{marker}', 'utf8'))"),
        &[],
    ));
    assert_eq!(twice, r#""kept""#);
    let (_other, other_sandbox) = server(1 << 20, 64);
    assert_eq!(
        said(&run(&dirs, Some(&other_sandbox), &read, &[])),
        r#""ENOENT""#
    );
    // A zero bound is refused.
    let mut zero = confine_nodeexec::PrivateDirs::create(None).unwrap();
    assert!(zero.bound_tmp(0, 64).is_err());
    assert!(zero.bound_tmp(1, 0).is_err());
}
