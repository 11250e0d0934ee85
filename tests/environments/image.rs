//! The container image that `deploy/image/build.sh` makes, run as a cluster runs it: its root
//! file system unpacked into an OCI bundle (`umoci unpack`), started by gVisor's `runsc run`
//! inside a network namespace this test makes, the root file system read-only, a workspace
//! directory of the test's bind-mounted at `/workspace`, the manifests' `--no-sandbox` and
//! `--timeout-ms 5000` added. The official MCP Python SDK client (`tests/interop/py/image_client.py`), in a
//! second network namespace of the test's joined to the first by a veth pair, checks
//! `/healthz` without the token, the refusals without it, and initialize, tools/list,
//! write_file, read_file and node_process with it; what it wrote is then found in the
//! workspace directory, owned by the image's user. Twice: with the token in
//! `CONFINE_HTTP_TOKEN`, then in the token file the entry point names (a directory mounted
//! read-only at `/run/secrets`, as a Secret volume would be). `confine doctor` is run in the
//! image under runsc and printed; SIGTERM ends each run with status 0.
//!
//! gVisor runs with `--network=host` inside the test's namespace (its sockets are the
//! namespace's): Debian's runsc refuses its own network stack on kernels that show
//! `net.core.rmem_default` in every network namespace, taking any namespace for the host's.
//!
//! Ignored by default: it builds the image (minutes, Debian's packages), needs root, `runsc`,
//! `umoci`, `ip`, `nsenter` and the Python client's virtual environment (`cargo xtask test`
//! makes it). Run it with `cargo test -p confine-cli --test suite environments::image -- --ignored` (`CONFINE_IMAGE_OCI=DIR`
//! uses an OCI layout already built instead of building one). Traffic stays inside the two
//! namespaces.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// A command of the test's own (`ip`, `umoci`, `runsc`, the image script, the client): the
/// test drives the tools that make and run the container, not the tools' children.
#[allow(clippy::disallowed_methods)] // reason: the test runs the container's tools itself
fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    Command::new(program)
}

const TOKEN: &str = "image-token-5d2a7c9e1f3b4d6a8c0e2f4a6b8d0c1e";
/// The token of the second run, in the token file.
const FILE_TOKEN: &str = "image-file-token-8f0e2d4c6b8a0f1e3d5c7b9a1f3e5d7c";
/// The image's user (deploy/image/build.sh).
const UID: u32 = 10001;
const SERVER_ADDR: &str = "10.251.0.1";
const CLIENT_ADDR: &str = "10.251.0.2";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Run `program args`; its stdout, or a panic with what it printed.
fn run(program: &str, args: &[&str]) -> String {
    let out = command(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two network namespaces joined by a veth pair (server `10.251.0.1/30`, client
/// `10.251.0.2/30`), removed (with the pair) when dropped.
struct Namespaces {
    server: String,
    client: String,
}

impl Namespaces {
    fn new() -> Namespaces {
        let id = std::process::id();
        let ns = Namespaces {
            server: format!("confine-img-s{id}"),
            client: format!("confine-img-c{id}"),
        };
        let (s_end, c_end) = (format!("cis{id}"), format!("cic{id}"));
        run("ip", &["netns", "add", &ns.server]);
        run("ip", &["netns", "add", &ns.client]);
        run(
            "ip",
            &[
                "link", "add", &s_end, "netns", &ns.server, "type", "veth", "peer", "name", &c_end,
                "netns", &ns.client,
            ],
        );
        for (name, end, addr) in [
            (&ns.server, &s_end, SERVER_ADDR),
            (&ns.client, &c_end, CLIENT_ADDR),
        ] {
            let cidr = format!("{addr}/30");
            run("ip", &["-n", name, "addr", "add", &cidr, "dev", end]);
            run("ip", &["-n", name, "link", "set", end, "up"]);
            run("ip", &["-n", name, "link", "set", "lo", "up"]);
        }
        ns
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in [&self.server, &self.client] {
            let _ = command("ip").args(["netns", "del", name]).status();
        }
    }
}

/// A container run by `runsc run`, killed and deleted when dropped.
struct Container {
    child: Child,
    state: PathBuf,
    id: String,
    /// `--net=/var/run/netns/NAME`: runsc's control socket is an abstract Unix socket, seen
    /// only from the sandbox's network namespace, so every runsc command runs there.
    netns: String,
}

impl Container {
    fn runsc(&self, args: &[&str]) -> Command {
        let mut runsc = command("nsenter");
        runsc
            .args([self.netns.as_str(), "runsc", "--root"])
            .arg(&self.state)
            .args(args);
        runsc
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Quietly: after a clean end there is nothing left to kill or delete.
        for args in [
            &["kill", &self.id, "KILL"][..],
            &["delete", "--force", &self.id],
        ] {
            let _ = self.runsc(args).stderr(Stdio::null()).status();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The OCI layout to test: `CONFINE_IMAGE_OCI`, else one built now into `target/image`.
fn image() -> PathBuf {
    if let Some(dir) = std::env::var_os("CONFINE_IMAGE_OCI") {
        return PathBuf::from(dir);
    }
    let out = repo().join("target/image");
    let script = repo().join("deploy/image/build.sh");
    run(script.to_str().unwrap(), &[out.to_str().unwrap()]);
    out.join("oci")
}

/// Where the container's token comes from.
enum Token<'a> {
    /// `CONFINE_HTTP_TOKEN`.
    Env(&'a str),
    /// A directory of the host's, mounted read-only at `/run/secrets`, holding
    /// `confine-token` (the image's `--http-token-file`).
    File(&'a Path),
}

/// Give the bundle's `config.json` the workspace, the token and a read-only root.
fn configure(bundle: &Path, workspace: &Path, token: &Token<'_>) {
    let path = bundle.join("config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(config["process"]["user"]["uid"], UID, "the image's user");
    let args = config["process"]["args"].clone();
    assert!(
        args.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "/usr/local/bin/confine"),
        "{args}"
    );
    config["process"]["terminal"] = json!(false);
    // As the manifests' `args` do: no sandbox of confine's own (gVisor has no Landlock, and
    // is the sandbox here), and room for Node.js, which starts slower under gVisor.
    let args = config["process"]["args"].as_array_mut().unwrap();
    if !args.contains(&json!("--no-sandbox")) {
        args.push(json!("--no-sandbox"));
    }
    if !args.contains(&json!("--timeout-ms")) {
        args.extend([json!("--timeout-ms"), json!("5000")]);
    }
    let env = config["process"]["env"].as_array_mut().unwrap();
    env.retain(|e| {
        !e.as_str()
            .is_some_and(|e| e.starts_with("CONFINE_HTTP_TOKEN="))
    });
    if let Token::Env(token) = token {
        env.push(json!(format!("CONFINE_HTTP_TOKEN={token}")));
    }
    config["root"]["readonly"] = json!(true);
    let mounts = config["mounts"].as_array_mut().unwrap();
    mounts.retain(|m| {
        !["/tmp", "/workspace", "/run/secrets"].contains(&m["destination"].as_str().unwrap_or(""))
    });
    if let Token::File(dir) = token {
        mounts.push(json!({"destination": "/run/secrets", "type": "bind",
            "source": dir, "options": ["rbind", "ro"]}));
    }
    mounts.push(
        json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
        "options": ["nosuid", "nodev", "mode=1777"]}),
    );
    mounts.push(json!({"destination": "/workspace", "type": "bind",
        "source": workspace, "options": ["rbind", "rw"]}));
    // runsc is started inside the namespace (`nsenter`) and the sandbox stays in it:
    // gVisor's network stack takes over the namespace's interfaces.
    let namespaces = config["linux"]["namespaces"].as_array_mut().unwrap();
    namespaces.retain(|n| n["type"] != "network");
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
}

/// `confine doctor` in the image's root file system under runsc (without network), printed:
/// what the tools and the sandbox can do inside gVisor.
fn doctor(bundle: &Path, state: &Path) {
    let dir = bundle.with_file_name("doctor");
    std::fs::create_dir(&dir).unwrap();
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    config["root"]["path"] = json!(bundle.join("rootfs"));
    config["process"]["args"] = json!(["/usr/local/bin/confine", "doctor"]);
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec_pretty(&config).unwrap(),
    )
    .unwrap();
    let id = format!("confine-doctor-{}", std::process::id());
    let out = command("runsc")
        .arg("--root")
        .arg(state)
        .args(["--network=none", "run", "--bundle"])
        .arg(&dir)
        .arg(&id)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = command("runsc")
        .arg("--root")
        .arg(state)
        .args(["delete", "--force", &id])
        .status();
    eprintln!(
        "confine doctor in the image under runsc ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "confine doctor under runsc");
}

#[test]
#[ignore = "builds the OCI image (minutes) and needs root, runsc, umoci and the Python SDK \
            client: run `cargo test -p confine-cli --test suite environments::image -- --ignored` (docs/DEPLOY.md)"]
fn the_image_runs_under_gvisor_and_serves_the_python_sdk_client() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the image test needs root (namespaces, runsc run)"
    );
    let python = repo().join("tests/interop/py/.venv/bin/python");
    assert!(
        python.exists(),
        "tests/interop/py/.venv is missing: run `cargo xtask test` once, or `python3 -m venv \
         tests/interop/py/.venv && tests/interop/py/.venv/bin/pip install -r \
         tests/interop/py/requirements.txt`"
    );
    let oci = image();
    let scratch = tempfile::Builder::new()
        .prefix("image-test-")
        .tempdir_in(repo().join("target"))
        .unwrap();
    let bundle = scratch.path().join("bundle");
    let reference = format!("{}:latest", oci.display());
    run(
        "umoci",
        &["unpack", "--image", &reference, bundle.to_str().unwrap()],
    );
    let workspace = scratch.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    std::os::unix::fs::chown(&workspace, Some(UID), Some(UID)).unwrap();
    let namespaces = Namespaces::new();
    let state = scratch.path().join("runsc-state");
    std::fs::create_dir(&state).unwrap();

    // The token in the environment, as the manifests give it.
    configure(&bundle, &workspace, &Token::Env(TOKEN));
    let container = start(&bundle, &state, &namespaces, "env");
    drive(&namespaces, &python, TOKEN);
    // What the client wrote is in the workspace, owned by the image's user.
    let written = workspace.join("hello.txt");
    assert_eq!(
        std::fs::read_to_string(&written).unwrap(),
        "from the image\n"
    );
    use std::os::unix::fs::MetadataExt as _;
    assert_eq!(std::fs::metadata(&written).unwrap().uid(), UID);
    let deep = workspace.join("notes/deep.txt");
    assert_eq!(std::fs::read_to_string(&deep).unwrap(), "beneath\n");
    doctor(&bundle, &state);
    stop(container);

    // The token in the file the entry point names, mounted from a Secret's directory.
    let secrets = scratch.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    let file = secrets.join("confine-token");
    std::fs::write(&file, format!("{FILE_TOKEN}\n")).unwrap();
    std::os::unix::fs::chown(&file, Some(UID), Some(UID)).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o400)).unwrap();
    std::fs::remove_file(&written).unwrap();
    configure(&bundle, &workspace, &Token::File(&secrets));
    let container = start(&bundle, &state, &namespaces, "file");
    drive(&namespaces, &python, FILE_TOKEN);
    assert_eq!(
        std::fs::read_to_string(&written).unwrap(),
        "from the image\n"
    );
    stop(container);
    drop(namespaces);
}

/// Start the bundle with `runsc run` in the server's namespace; back once it listens.
fn start(bundle: &Path, state: &Path, namespaces: &Namespaces, name: &str) -> Container {
    let id = format!("confine-image-{name}-{}", std::process::id());
    // nsenter, not `ip netns exec`, which would mount a sysfs of its own over /sys and hide
    // the cgroup file system runsc sets the sandbox's cgroup up in.
    let netns = format!("--net=/var/run/netns/{}", namespaces.server);
    let mut child = command("nsenter")
        .args([&netns, "runsc", "--root"])
        .arg(state)
        .args(["--network=host", "run", "--bundle"])
        .arg(bundle)
        .arg(&id)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runsc");
    let stderr = child.stderr.take().unwrap();
    let container = Container {
        child,
        state: state.to_owned(),
        id,
        netns,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stderr).lines();
        while let Some(Ok(line)) = lines.next() {
            eprintln!("container: {line}");
            if line.starts_with("listening on ") {
                let _ = tx.send(line);
            }
        }
    });
    let listening = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the server's listening line (see the container's lines above)");
    assert_eq!(listening, "listening on http://0.0.0.0:8080/mcp");
    container
}

/// The Python SDK client, from the client's namespace, with `token`: every check passes.
fn drive(namespaces: &Namespaces, python: &Path, token: &str) {
    let base = format!("http://{SERVER_ADDR}:8080");
    let out = command("ip")
        .args(["netns", "exec", &namespaces.client])
        .arg(python)
        .arg(repo().join("tests/interop/py/image_client.py"))
        .args([&base, token])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Exit 1 is a failed check, read below; anything else is the client's own failure.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "the Python SDK client: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_str(stdout.trim()).unwrap();
    let checks = summary["checks"].as_array().unwrap();
    assert!(checks.len() >= 11, "{summary}");
    for check in checks {
        assert_eq!(
            check["ok"], true,
            "the Python SDK client's check: {check}\n{summary}"
        );
    }
}

/// SIGTERM ends the server (and the container) with status 0.
fn stop(mut container: Container) {
    let status = container
        .runsc(&["kill", &container.id, "TERM"])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let ended = loop {
        if let Some(status) = container.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "runsc run did not end after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(ended.success(), "runsc run: {ended}");
}
