//! The everyday battery (`tests/data/everyday.sh`): what an agent runs all day, through
//! `confine call --allow-commands` (the sandbox is the default: no flag) beside the same with
//! `--no-sandbox`, as root and as an ordinary user (`nobody`,
//! through `runuser`) with a realistic home of its own (a git identity in `~/.gitconfig`,
//! the usual secrets). Every item that works unconfined must work sandboxed; every secret
//! must stay unread under the sandbox (and is read unconfined: the twin).
//!
//! The battery includes a loopback server (Python's `http.server`, which reads
//! `/etc/mime.types`) reached from the same command: under `--sandbox` the network policy
//! gives the run a loopback of its own where its mechanism is a namespace.
//!
//! The fake home holds a rustup-style toolchain, as rustup installs one: `~/.cargo/bin/cargo`
//! (rustup itself where the machine has it, else a proxy script of the same shape) running
//! `~/.rustup/toolchains/<name>/bin/cargo`, a copy of the running toolchain (hard links where
//! the file system allows), beside `~/.cargo/credentials.toml`, a secret.

use crate::support;

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

/// The identity of the fake home's `.gitconfig`.
const NAME: &str = "Ada Everyday";
const EMAIL: &str = "ada@example.invalid";

/// The battery: one line `name=status` per item, in order. Each item runs in a subshell of
/// its own in the workspace; `$1` is a local repository to clone.
const BATTERY: &str = include_str!("../data/everyday.sh");

/// The battery's items.
const ITEMS: usize = 16;

/// The secrets of the fake home (relative paths) and their contents.
const SECRETS: &[(&str, &str)] = &[
    (".ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----"),
    (
        ".aws/credentials",
        "[default]\naws_secret_access_key = SECRET",
    ),
    (".netrc", "machine example.invalid login a password SECRET"),
    (".git-credentials", "https://a:SECRET@example.invalid"),
    (".npmrc", "//registry.example.invalid/:_authToken=SECRET"),
    (
        ".config/gh/hosts.yml",
        "example.invalid:\n  oauth_token: SECRET",
    ),
    (".bash_history", "export TOKEN=SECRET"),
    (".cargo/credentials.toml", "[registry]\ntoken = \"SECRET\""),
    (".kube/config", "users:\n- user:\n    token: SECRET"),
    (
        ".docker/config.json",
        "{\"auths\": {\"x\": {\"auth\": \"SECRET\"}}}",
    ),
];

/// A realistic home in `dir`: a git identity and the secrets.
fn fake_home(dir: &Path) {
    std::fs::write(
        dir.join(".gitconfig"),
        format!(
            "[user]\n\tname = {NAME}\n\temail = {EMAIL}\n[credential]\n\thelper = store\n\
             [url \"https://example.invalid/\"]\n\tinsteadOf = gh:\n"
        ),
    )
    .unwrap();
    for (path, text) in SECRETS {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
}

/// A toolchain in `home` as rustup lays one out, made from the toolchain running the tests
/// (the first `rustc` on PATH): `.rustup/toolchains/t/{bin,lib}` (hard links, or a copy where
/// they are refused), `.rustup/settings.toml` naming it, and `.cargo/bin/{cargo,rustc}`: hard
/// links to rustup where it is on PATH (rustup dispatches by its own name), else scripts that
/// do what its proxies do.
fn rustup_style_toolchain(home: &Path) {
    let sh = |script: &str| {
        // The test builds its fixture with the system's tools.
        #[allow(clippy::disallowed_methods)]
        let out = std::process::Command::new("sh")
            .args(["-ec", script, "sh"])
            .arg(home)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    sh(r#"
        sysroot=$(rustc --print sysroot)
        host=$(rustc -vV | sed -n 's/^host: //p')
        t="$1/.rustup/toolchains/t"
        mkdir -p "$t/lib/rustlib" "$1/.cargo/bin"
        copy() { cp -al "$@" 2>/dev/null || cp -a "$@"; }
        copy "$sysroot/bin" "$t/"
        for f in "$sysroot"/lib/*.so*; do copy "$f" "$t/lib/"; done
        copy "$sysroot/lib/rustlib/$host" "$t/lib/rustlib/"
        printf 'version = "12"
default_toolchain = "t"
profile = "minimal"
auto_self_update = "disable"
'           > "$1/.rustup/settings.toml"
        rustup=$(command -v rustup || true)
        for tool in cargo rustc; do
          if [ -n "$rustup" ]; then
            copy "$(readlink -f "$rustup")" "$1/.cargo/bin/$tool"
          else
            printf '#!/bin/sh
exec "${RUSTUP_HOME:-$HOME/.rustup}/toolchains/t/bin/%s" "$@"
'               "$tool" > "$1/.cargo/bin/$tool"
            chmod +x "$1/.cargo/bin/$tool"
          fi
        done
    "#);
}

/// Run `command` through `confine call` under `prefix` (empty, or `runuser -u nobody --`)
/// with `home` as the server's HOME; the run_command record.
fn run(prefix: &[&str], ws: &Path, home: &Path, sandbox: bool, command: &str) -> Value {
    let line = json!({"id": 1, "name": "run_command",
        "arguments": {"command": command, "timeoutMs": 120_000}});
    let confine = env!("CARGO_BIN_EXE_confine");
    // The system's programs and the home's rustup-style toolchain.
    let path = format!(
        "{}/.cargo/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        home.display()
    );
    // Through `env`, after the prefix: `runuser` sets HOME to the user's own.
    let home_var = format!("HOME={}", home.display());
    let path_var = format!("PATH={path}");
    let (program, args): (&str, Vec<&str>) = match prefix.split_first() {
        Some((first, rest)) => (
            first,
            [rest, &["/usr/bin/env", &home_var, &path_var, confine]].concat(),
        ),
        None => (confine, vec![]),
    };
    let ws_s = ws.to_str().unwrap();
    let expected = format!("EXPECTED_ID={NAME}/{EMAIL}");
    let origin = format!("ORIGIN={ws_s}/origin");
    let mut flags = vec![
        "call",
        "--root",
        ws_s,
        "--allow-commands",
        "--command-max-timeout-ms",
        "120000",
        "--env",
        &expected,
        "--env",
        &origin,
    ];
    // The sandbox is the default: the sandboxed runs name no flag, the twins opt out.
    if !sandbox {
        flags.push("--no-sandbox");
    }
    // The test drives the binary under test from outside.
    #[allow(clippy::disallowed_methods)]
    let mut child = std::process::Command::new(program)
        .args(args)
        .args(&flags)
        .args(support::census_flags())
        .env_clear()
        .env("PATH", &path)
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{line}").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let record: Value = serde_json::from_str(text.trim()).unwrap_or_else(|_| {
        panic!(
            "no record: {text}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    record["content"].clone()
}

/// A workspace holding a local repository `origin` to clone, owned by `owner`: in the
/// system's temporary directory, never beneath this repository (whose `rust-toolchain.toml`
/// and workspace manifest cargo and rustup would find above it).
fn workspace(owner: Option<u32>) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let origin = ws.path().join("origin");
    std::fs::create_dir(&origin).unwrap();
    std::fs::write(origin.join("README"), "origin\n").unwrap();
    let git = |args: &[&str]| {
        #[allow(clippy::disallowed_methods)]
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&origin)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "README"]);
    git(&[
        "-c",
        "user.name=o",
        "-c",
        "user.email=o@example.invalid",
        "commit",
        "-qm",
        "origin",
    ]);
    if let Some(uid) = owner {
        chown_tree(ws.path(), uid);
    }
    ws
}

fn chown_tree(path: &Path, uid: u32) {
    let id = Some(rustix::process::Uid::from_raw(uid));
    let gid = Some(rustix::process::Gid::from_raw(uid));
    rustix::fs::chown(path, id, gid).unwrap();
    if std::fs::symlink_metadata(path).unwrap().is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// The battery's lines as (item, status).
fn statuses(record: &Value) -> Vec<(String, String)> {
    let stdout = record["stdout"].as_str().unwrap_or_default();
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect()
}

/// The battery and the secrets, sandboxed beside unconfined, under `prefix` as `owner`.
fn battery(prefix: &[&str], owner: Option<u32>) {
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    fake_home(home.path());
    if let Some(uid) = owner {
        chown_tree(home.path(), uid);
    }
    // Made after the home was given away: its files are (or link to) the running
    // toolchain's, never to change owner; the user owns the two directories that hold them.
    rustup_style_toolchain(home.path());
    // A crate in the user's cargo cache, as cargo extracts one.
    let dep = home.path().join(".cargo/registry/src/idx/dep-1.0");
    std::fs::create_dir_all(&dep).unwrap();
    std::fs::write(dep.join("lib.rs"), "// dep\n").unwrap();
    if let Some(uid) = owner {
        chown_tree(&home.path().join(".cargo/registry"), uid);
    }
    if let Some(uid) = owner {
        for dir in [".cargo", ".rustup"] {
            let id = Some(rustix::process::Uid::from_raw(uid));
            let gid = Some(rustix::process::Gid::from_raw(uid));
            rustix::fs::chown(home.path().join(dir), id, gid).unwrap();
        }
    }

    let open_ws = workspace(owner);
    let open_record = run(prefix, open_ws.path(), home.path(), false, BATTERY);
    let open = statuses(&open_record);
    let boxed_ws = workspace(owner);
    let record = run(prefix, boxed_ws.path(), home.path(), true, BATTERY);
    let boxed = statuses(&record);
    assert_eq!(open.len(), ITEMS, "unconfined: {open:?}");
    assert_eq!(boxed.len(), ITEMS, "sandboxed: {record}");
    // The loopback server and the home's toolchain work unconfined here (else their items
    // would prove nothing).
    for item in ["http", "cargo"] {
        assert!(
            open.contains(&(item.to_owned(), "0".to_owned())),
            "unconfined: {open_record}"
        );
    }
    for ((item, unconfined), (_, sandboxed)) in open.iter().zip(&boxed) {
        if unconfined == "0" {
            assert_eq!(
                sandboxed, "0",
                "{item} works unconfined, not sandboxed: {record}"
            );
        }
    }
    // Nothing of the battery reached the host's /tmp.
    assert!(
        std::fs::read_dir("/tmp")
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("everyday."))
    );

    // The secrets: each read by `cat`, then /etc/shadow and /root listed.
    let mut probe = String::new();
    for (path, _) in SECRETS {
        probe.push_str(&format!(
            "cat {}/{path} >/dev/null 2>&1; echo {path}=$?\n",
            home.path().display()
        ));
    }
    // Covered by an empty file under the sandbox: nothing to read (grep finds no line).
    probe.push_str("grep -q . /etc/shadow 2>/dev/null; echo shadow=$?\n");
    probe.push_str("ls /root >/dev/null 2>&1; echo root=$?\n");
    // The rest of /etc is readable: what pip and Python's mimetypes read.
    probe.push_str("cat /etc/debian_version /etc/mime.types >/dev/null 2>&1; echo etc=$?\n");
    probe.push_str("cat ~/.gitconfig | grep -c -e helper -e insteadOf; echo config=$?\n");
    // The cargo cache: seen as it is, a child's additions kept in the server's layer, the
    // user's files unchanged.
    probe.push_str(
        "cat \"$CARGO_HOME/registry/src/idx/dep-1.0/lib.rs\" >/dev/null 2>&1; echo cache_read=$?\n\
         echo changed 2>/dev/null > \"$CARGO_HOME/registry/src/idx/dep-1.0/lib.rs\"; echo cache_write=$?\n\
         mkdir \"$CARGO_HOME/registry/src/idx/new-1.0\" 2>/dev/null; echo cache_add=$?\n",
    );
    let boxed = statuses(&run(prefix, boxed_ws.path(), home.path(), true, &probe));
    let open = statuses(&run(prefix, open_ws.path(), home.path(), false, &probe));
    assert!(
        !home.path().join(".cargo/registry/src/idx/new-1.0").exists(),
        "a sandboxed child's crate landed in the user's cache"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join(".cargo/registry/src/idx/dep-1.0/lib.rs"))
            .unwrap(),
        "// dep\n"
    );
    assert_eq!(boxed.len(), SECRETS.len() + 7, "{boxed:?}");
    for ((name, sandboxed), (_, unconfined)) in boxed.iter().zip(&open) {
        match name.as_str() {
            // The private home's .gitconfig holds the identity alone.
            "config" => assert_eq!(sandboxed, "1", "{boxed:?}"),
            "shadow" | "root" => assert_ne!(sandboxed, "0", "{name} read: {boxed:?}"),
            "etc" | "cache_read" | "cache_add" => assert_eq!(sandboxed, "0", "{boxed:?}"),
            "cache_write" => assert_ne!(sandboxed, "0", "{boxed:?}"),
            _ => {
                assert_ne!(sandboxed, "0", "{name} read under the sandbox");
                assert_eq!(unconfined, "0", "the twin reads {name}");
            }
        }
    }
}

#[test]
fn everyday_work_runs_sandboxed_as_root_and_secrets_stay_unread() {
    if !rustix::process::geteuid().is_root() {
        testkit::not_run(
            "everyday_work_runs_sandboxed_as_root_and_secrets_stay_unread",
            "as an ordinary user (it runs the battery as root); the ordinary-user run is \
             everyday_work_runs_sandboxed_as_a_user_and_secrets_stay_unread",
        );
        return;
    }
    battery(&[], None);
}

#[test]
fn everyday_work_runs_sandboxed_as_a_user_and_secrets_stay_unread() {
    if !rustix::process::geteuid().is_root() {
        // Already an ordinary user: run as oneself.
        battery(&[], None);
        return;
    }
    // The binary must be reachable by nobody, as must its target directory.
    std::fs::set_permissions(
        env!("CARGO_TARGET_TMPDIR"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    battery(&["runuser", "-u", "nobody", "--"], Some(65534));
}
