//! The everyday battery: what an agent runs all day, through `confine call --allow-commands
//! --sandbox` beside the same without the sandbox, as root and as an ordinary user (`nobody`,
//! through `runuser`) with a realistic home of its own (a git identity in `~/.gitconfig`,
//! the usual secrets). Every item that works unconfined must work sandboxed; every secret
//! must stay unread under the sandbox (and is read unconfined: the twin).
//!
//! The battery includes a loopback server (Python's `http.server`, which reads
//! `/etc/mime.types`) reached from the same command: under `--sandbox` the network policy
//! gives the run a loopback of its own where its mechanism is a namespace.
//!
//! Not in the battery yet: toolchains installed under the home (`cargo` from rustup, nvm,
//! pyenv) and `pip install` of a local wheel, which the sandbox does not open yet.

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
const BATTERY: &str = r#"
item() { name=$1; shift; ( "$@" ) >/dev/null 2>&1; echo "$name=$?"; }
git_work() {
  git init -q repo && cd repo && echo one > a && git add a && git commit -qm one &&
  git branch topic && echo two >> a && git diff --quiet; [ $? = 1 ] && git stash -q &&
  git stash pop -q && git commit -qam two &&
  [ "$(git log -1 --format=%an/%ae)" = "$EXPECTED_ID" ]
}
git_clone() { git clone -q "$ORIGIN" copy && [ -f copy/README ]; }
chmod_run() { printf '#!/bin/sh\necho ran\n' > s.sh && chmod +x s.sh && [ "$(./s.sh)" = ran ]; }
touch_make() {
  mkdir mk && cd mk && echo x > in.txt && touch -d '2001-02-03 04:05' in.txt &&
  printf 'out.txt: in.txt\n\tcp in.txt out.txt\n' > Makefile && make -s &&
  [ "$(stat -c %Y in.txt)" = "$(date -d '2001-02-03 04:05' +%s)" ] && [ -f out.txt ]
}
tar_cp() {
  mkdir src && echo x > src/f && chmod 750 src/f && touch -d '2001-02-03' src/f &&
  tar cf t.tar src && mkdir out && tar xf t.tar -C out && cp -a src copied &&
  [ "$(stat -c %a/%Y out/src/f)" = "$(stat -c %a/%Y src/f)" ] &&
  [ "$(stat -c %a/%Y copied/f)" = "$(stat -c %a/%Y src/f)" ]
}
links() { echo x > target && ln target hard && ln -s target soft && [ "$(cat soft)" = x ]; }
venv() { python3 -m venv --without-pip v && v/bin/python -c 'import sys; print(sys.prefix)'; }
shm() { python3 -c 'import multiprocessing as m; assert m.Pool(2).map(abs, [-1, -2]) == [1, 2]'; }
sqlite() { python3 -c 'import sqlite3; c = sqlite3.connect("d.db"); c.execute("create table t(x)"); c.commit()'; }
tmp() { f=$(mktemp /tmp/everyday.XXXXXX) && echo x > "$f" && [ "$(cat "$f")" = x ] && rm "$f"; }
c_build() { printf 'int main(void){return 0;}\n' > m.c && cc -o m m.c && ./m; }
npm_work() {
  mkdir pkg && cd pkg && npm init -y >/dev/null &&
  node -e 'const p=require("./package.json"); p.scripts={test:"node -e 0"}; require("fs").writeFileSync("package.json", JSON.stringify(p))' &&
  npm test
}
http_server() {
  echo served > page.txt
  python3 -u -m http.server 0 --bind 127.0.0.1 > srv.log 2>&1 & pid=$!
  i=0; while [ $i -lt 200 ] && ! grep -q ' port ' srv.log; do sleep 0.05; i=$((i+1)); done
  port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' srv.log | head -n 1)
  python3 -c 'import sys, urllib.request as u; r = u.build_opener(u.ProxyHandler({})).open("http://127.0.0.1:" + sys.argv[1] + "/page.txt"); assert r.read() == b"served\n"' "$port"
  r=$?; kill $pid; wait $pid; return $r
}
item git git_work
item clone git_clone
item chmod chmod_run
item make touch_make
item tar tar_cp
item ln links
item venv venv
item shm shm
item sqlite sqlite
item tmp tmp
item cc c_build
item npm npm_work
item http http_server
"#;

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

/// Run `command` through `confine call` under `prefix` (empty, or `runuser -u nobody --`)
/// with `home` as the server's HOME; the run_command record.
fn run(prefix: &[&str], ws: &Path, home: &Path, sandbox: bool, command: &str) -> Value {
    let line = json!({"id": 1, "name": "run_command",
        "arguments": {"command": command, "timeoutMs": 120_000}});
    let confine = env!("CARGO_BIN_EXE_confine");
    let (program, args): (&str, Vec<&str>) = match prefix.split_first() {
        Some((first, rest)) => (first, [rest, &[confine]].concat()),
        None => (confine, vec![]),
    };
    // The system's programs only: toolchains under a home (rustup, nvm, pyenv, which the
    // sandbox does not open yet) are left out of the battery.
    let path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
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
    if sandbox {
        flags.push("--sandbox");
    }
    // The test drives the binary under test from outside.
    #[allow(clippy::disallowed_methods)]
    let mut child = std::process::Command::new(program)
        .args(args)
        .args(&flags)
        .args(support::census_flags())
        .env_clear()
        .env("PATH", path)
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

/// A workspace holding a local repository `origin` to clone, owned by `owner`.
fn workspace(owner: Option<u32>) -> tempfile::TempDir {
    let ws = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
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
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    fake_home(home.path());
    if let Some(uid) = owner {
        chown_tree(home.path(), uid);
    }

    let open_ws = workspace(owner);
    let open = statuses(&run(prefix, open_ws.path(), home.path(), false, BATTERY));
    let boxed_ws = workspace(owner);
    let record = run(prefix, boxed_ws.path(), home.path(), true, BATTERY);
    let boxed = statuses(&record);
    assert_eq!(open.len(), 13, "unconfined: {open:?}");
    assert_eq!(boxed.len(), 13, "sandboxed: {record}");
    // The loopback server works unconfined here (else its item would prove nothing).
    assert!(
        open.contains(&("http".to_owned(), "0".to_owned())),
        "unconfined: {open:?}"
    );
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
    let boxed = statuses(&run(prefix, boxed_ws.path(), home.path(), true, &probe));
    let open = statuses(&run(prefix, open_ws.path(), home.path(), false, &probe));
    assert_eq!(boxed.len(), SECRETS.len() + 4, "{boxed:?}");
    for ((name, sandboxed), (_, unconfined)) in boxed.iter().zip(&open) {
        match name.as_str() {
            // The private home's .gitconfig holds the identity alone.
            "config" => assert_eq!(sandboxed, "1", "{boxed:?}"),
            "shadow" | "root" => assert_ne!(sandboxed, "0", "{name} read: {boxed:?}"),
            "etc" => assert_eq!(sandboxed, "0", "{boxed:?}"),
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
