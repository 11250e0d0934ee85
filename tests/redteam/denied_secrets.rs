//! Red team: a model after the workspace's secrets (`.env`, `id_rsa`, a `*.pem`) while the
//! embedder denies them (`--deny`). Through the built binary:
//!
//! * a symlink to a denied file is refused to `read_file` and `edit_file` (`PATH_DENIED`), and
//!   `move_file` neither takes a denied file to an allowed name nor an allowed one to a denied
//!   name; the naive twin without `--deny` reads and moves them;
//! * races: a symlink swapped between a denied and an allowed file while `read_file` reads
//!   it in a loop never returns the denied file's bytes (the resolution is judged before the
//!   open and again after the read, on the file that was read); a denied file renamed back
//!   and forth to an allowed name is never read under its denied name or through a symlink
//!   to it; under the allowed name it is readable while it bears it (the list names paths:
//!   what holds is written in `docs/SECURITY.md`). The twins without `--deny` read the secret;
//! * a sandboxed script (`node_process`, `run_command cat`) reads nothing of `.env`,
//!   `id_rsa`, a `*.pem` or a symlink to one (covered in a mount namespace of the run's own)
//!   and cannot rename, remove or hard-link them; the twin with `--sandbox` alone reads them;
//! * where no mount namespace can be made, a sandboxed call with denied entries is refused
//!   (`NODE_SANDBOX_UNAVAILABLE`) rather than run with them readable; in the container-like
//!   setup (cgroup file system read-only, `CAP_SYS_ADMIN` dropped) they stay covered.

use crate::support;

use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use confine_tools::{DeniedPaths, ToolSetOptions};
use serde_json::{Value, json};
use support::{call_lines, call_on, census_flags, runtime};

const SECRET: &str = "s3cr3t-needle";

const DENY: [&str; 6] = ["--deny", "**/.env", "--deny", "id_rsa", "--deny", "*.pem"];

/// A workspace with the three secrets, a symlink to one, and a plain file.
fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    for name in [".env", "id_rsa", "server.pem"] {
        std::fs::write(ws.join(name), format!("{name}:{SECRET}\n")).unwrap();
    }
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::os::unix::fs::symlink("../server.pem", ws.join("sub/cert")).unwrap();
    std::fs::write(ws.join("sub/.env"), format!("sub/.env:{SECRET}\n")).unwrap();
    std::fs::write(ws.join("plain.txt"), "plain\n").unwrap();
    tmp
}

/// The records of `calls` (tool name, arguments) through `confine call --root ws <flags>`.
fn call(ws: &Path, flags: &[&str], calls: &[(&str, Value)]) -> Vec<Value> {
    let input: String = calls
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            format!(
                "{}\n",
                json!({"id": i, "name": name, "arguments": arguments})
            )
        })
        .collect();
    let census = census_flags();
    let mut all: Vec<&str> = flags.to_vec();
    all.extend(census.iter().map(String::as_str));
    let mut records = call_lines(ws, &all, &input);
    records.sort_by_key(|r| r["id"].as_u64());
    records
}

/// What a record said: its error token, or its content.
fn said(record: &Value) -> String {
    match record["isError"] == true {
        true => record["content"]["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned(),
        false => record["content"].to_string(),
    }
}

#[test]
fn a_symlink_to_a_denied_file_and_moves_from_and_to_denied_names_are_refused() {
    let tmp = workspace();
    let ws = tmp.path();
    let edit = json!([{"oldText": "s3cr3t", "newText": "x"}]);
    let calls = [
        ("read_file", json!({"path": "sub/cert"})),
        (
            "edit_file",
            json!({"path": "sub/cert", "edits": edit, "dryRun": true}),
        ),
        ("read_lines", json!({"path": "sub/cert"})),
        ("grep", json!({"pattern": "s3cr3t", "path": "sub/cert"})),
        (
            "move_file",
            json!({"source": ".env", "destination": "env.txt"}),
        ),
        (
            "move_file",
            json!({"source": "plain.txt", "destination": "sub/.env"}),
        ),
        (
            "move_file",
            json!({"source": "sub/cert", "destination": "cert.txt"}),
        ),
    ];
    let records = call(ws, &DENY, &calls);
    for (record, (name, args)) in records.iter().zip(&calls) {
        assert_eq!(said(record), "PATH_DENIED", "{name} {args}: {record}");
    }
    assert!(ws.join(".env").exists() && ws.join("plain.txt").exists());
    // The naive twin: the symlink is read, the secret moved to an allowed name.
    let records = call(ws, &[], &calls[..5]);
    assert!(said(&records[0]).contains(SECRET), "{}", records[0]);
    assert!(said(&records[2]).contains(SECRET));
    assert!(said(&records[3]).contains(SECRET));
    assert_eq!(records[4]["isError"], false);
    assert!(ws.join("env.txt").exists());
}

/// The rounds of each race (bounded).
const ROUNDS: usize = 400;

/// `link` swapped (atomically, by rename) between a symlink to `.env` and one to
/// `plain.txt` while `read_file link` runs `ROUNDS` times: with the list no read returns the
/// secret; without it some read does (so the race reaches the secret).
#[test]
fn a_symlink_swapped_to_a_denied_file_during_reads_never_yields_it() {
    // The twin reads on until the race first lands (at most 25 times as many rounds): on a
    // loaded machine the swapper may miss the first few hundred reads.
    let leaked = |denied: DeniedPaths, until_secret: bool| -> (usize, usize) {
        let tmp = workspace();
        let ws = tmp.path().to_path_buf();
        std::os::unix::fs::symlink("plain.txt", ws.join("link")).unwrap();
        let mut options = ToolSetOptions::default();
        options.denied = Arc::new(denied);
        let tools = confine_tools::create_selected_tools(&ws, options, &["read_file"]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (ws, stop) = (ws.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) && i < 10_000_000 {
                    let target = if i.is_multiple_of(2) {
                        ".env"
                    } else {
                        "plain.txt"
                    };
                    let tmp = ws.join(format!("link.{}", i % 2));
                    let _ = std::fs::remove_file(&tmp);
                    std::os::unix::fs::symlink(target, &tmp).unwrap();
                    std::fs::rename(&tmp, ws.join("link")).unwrap();
                    i += 1;
                }
            })
        };
        let rt = runtime();
        let (mut secrets, mut plain) = (0, 0);
        let rounds = if until_secret { ROUNDS * 25 } else { ROUNDS };
        for _ in 0..rounds {
            let r = call_on(&rt, &tools, "read_file", &json!({"path": "link"}));
            if r.content.contains(SECRET) {
                secrets += 1;
                if until_secret {
                    break;
                }
            } else if !r.is_error {
                plain += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        (secrets, plain)
    };
    let (secrets, plain) = leaked(DeniedPaths::new(&["**/.env"]).unwrap(), false);
    assert_eq!(secrets, 0, "a swapped symlink yielded the denied file");
    assert!(plain > 0, "no read went through at all");
    let (secrets, _) = leaked(DeniedPaths::none(), true);
    assert!(
        secrets > 0,
        "the twin never read the secret: the race did not run"
    );
}

/// `.env` renamed to `moved.txt` and back, again and again, while `.env` and a symlink to it
/// are read: neither ever yields the secret with the list; the twin reads it by its name.
#[test]
fn a_denied_file_renamed_back_and_forth_is_never_read_by_its_denied_name() {
    // `until_read`: on past ROUNDS until the secret was read once (the twin: a renamer the
    // loaded machine starved may not have run yet), bounded at 25 times as many.
    let run = |denied: DeniedPaths, until_read: bool| -> usize {
        let tmp = workspace();
        let ws = tmp.path().to_path_buf();
        std::os::unix::fs::symlink(".env", ws.join("to-env")).unwrap();
        let mut options = ToolSetOptions::default();
        options.denied = Arc::new(denied);
        let tools = confine_tools::create_selected_tools(&ws, options, &["read_file"]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let renamer = {
            let (ws, stop) = (ws.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) && i < 10_000_000 {
                    let (from, to) = match i % 2 {
                        0 => (".env", "moved.txt"),
                        _ => ("moved.txt", ".env"),
                    };
                    std::fs::rename(ws.join(from), ws.join(to)).unwrap();
                    i += 1;
                }
            })
        };
        let rt = runtime();
        let mut secrets = 0;
        for i in 0..ROUNDS * 25 {
            if i >= ROUNDS && (!until_read || secrets > 0) {
                break;
            }
            let path = if i.is_multiple_of(2) {
                ".env"
            } else {
                "to-env"
            };
            let r = call_on(&rt, &tools, "read_file", &json!({ "path": path }));
            if r.content.contains(SECRET) {
                secrets += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        renamer.join().unwrap();
        secrets
    };
    assert_eq!(run(DeniedPaths::new(&["**/.env"]).unwrap(), false), 0);
    assert!(
        run(DeniedPaths::none(), true) > 0,
        "the twin never read the secret"
    );
}

/// The sandboxed script: each secret and the symlink read with `cat`, then renamed, removed
/// and hard-linked; one line per step.
const CAT: &str = "for f in .env id_rsa server.pem sub/cert; do printf '%s=' $f; cat $f 2>/dev/null; echo $?; done; \
     mv .env env.txt 2>/dev/null; echo mv=$?; rm id_rsa 2>/dev/null; echo rm=$?; \
     ln server.pem hard 2>/dev/null; echo ln=$?; \
     mv sub moved && cat moved/.env; echo moved=$?";

/// The same in Node.js.
const NODE: &str = "const fs = require('fs');
for (const f of ['.env', 'id_rsa', 'server.pem', 'sub/cert']) {
  let got; try { got = fs.readFileSync(f, 'utf8'); } catch (e) { got = e.code; }
  console.log(f + '=' + JSON.stringify(got));
}";

fn stdout(record: &Value) -> String {
    assert_eq!(record["isError"], false, "{record}");
    record["content"]["stdout"].as_str().unwrap().to_owned()
}

#[test]
fn a_sandboxed_script_reads_no_denied_entry_and_the_twin_without_deny_does() {
    let sandboxed = ["--sandbox", "--allow-commands", "--timeout-ms", "20000"];
    let guarded = [&sandboxed[..], &DENY[..]].concat();
    let tmp = workspace();
    let ws = tmp.path();
    let calls = [
        ("run_command", json!({"command": CAT})),
        ("node_process", json!({"source": NODE})),
    ];
    let records = call(ws, &guarded, &calls);
    let shell = stdout(&records[0]);
    assert!(!shell.contains(SECRET), "{shell}");
    // A covered file reads as empty; it can be neither renamed, removed nor hard-linked, and
    // a directory above one renamed carries the cover along.
    assert_eq!(
        shell,
        ".env=0\nid_rsa=0\nserver.pem=0\nsub/cert=0\nmv=1\nrm=1\nln=1\nmoved=0\n"
    );
    let node = stdout(&records[1]);
    assert!(!node.contains(SECRET), "{node}");
    assert!(node.contains(".env=\"\"\n"), "{node}");
    for name in [".env", "id_rsa", "server.pem"] {
        let kept = std::fs::read_to_string(ws.join(name)).unwrap();
        assert!(kept.contains(SECRET), "{name} changed: {kept}");
    }

    // The twin: the same sandbox without --deny reads every one of them.
    let tmp = workspace();
    let records = call(tmp.path(), &sandboxed, &calls);
    let shell = stdout(&records[0]);
    for name in [".env", "id_rsa", "server.pem"] {
        assert!(
            shell.contains(&format!("{name}={name}:{SECRET}")),
            "{shell}"
        );
    }
    assert!(
        shell.contains(&format!("sub/cert=server.pem:{SECRET}"))
            && shell.contains(&format!("sub/.env:{SECRET}\nmoved=0")),
        "{shell}"
    );
    assert!(stdout(&records[1]).contains(SECRET));
}

/// A denied directory is covered whole (an empty tmpfs of mode 0): nothing beneath it is
/// read; the twin lists and reads it.
#[test]
fn a_denied_directory_is_covered_whole_for_a_sandboxed_child() {
    let tmp = workspace();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join("secrets/inner")).unwrap();
    std::fs::write(ws.join("secrets/inner/key"), SECRET).unwrap();
    let command = json!({"command": "ls secrets 2>/dev/null; echo ls=$?; cat secrets/inner/key 2>/dev/null; echo cat=$?"});
    let flags = ["--sandbox", "--allow-commands", "--deny", "secrets/**"];
    let records = call(ws, &flags, &[("run_command", command.clone())]);
    assert_eq!(stdout(&records[0]), "ls=2\ncat=1\n");
    let records = call(ws, &flags[..2], &[("run_command", command)]);
    assert_eq!(stdout(&records[0]), format!("inner\nls=0\n{SECRET}cat=0\n"));
}

/// `confine call <flags>` run under `prefix` (a shell that sets up a container-like
/// environment, then runs its arguments), with one run_command call; its record.
fn call_under(prefix: &[&str], ws: &Path, flags: &[&str], command: &str) -> Value {
    let line = json!({"id": 1, "name": "run_command", "arguments": {"command": command}});
    #[allow(clippy::disallowed_methods)]
    let mut child = std::process::Command::new(prefix[0])
        .args(&prefix[1..])
        .arg(env!("CARGO_BIN_EXE_confine"))
        .args(["call", "--root"])
        .arg(ws)
        .args(flags)
        .args(census_flags())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{prefix:?}: {e}"));
    writeln!(child.stdin.take().unwrap(), "{line}").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|_| {
        panic!(
            "{prefix:?}: no record; stdout {text}; stderr {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A user namespace of its own in which no further namespace can be made and
/// `CAP_SYS_ADMIN` is dropped (as a container whose seccomp profile refuses namespaces).
fn no_namespaces() -> Option<[&'static str; 10]> {
    let script = "echo 0 > /proc/sys/user/max_user_namespaces \
        && exec capsh --drop=cap_sys_admin -- -c 'exec \"$0\" \"$@\"' \"$@\"";
    let prefix = [
        "unshare",
        "-U",
        "-r",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ];
    #[allow(clippy::disallowed_methods)]
    let works = std::process::Command::new(prefix[0])
        .args(&prefix[1..])
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    works.then_some(prefix)
}

#[test]
fn without_a_mount_namespace_a_sandboxed_call_with_denied_entries_is_refused() {
    const TEST: &str = "without_a_mount_namespace_a_sandboxed_call_with_denied_entries_is_refused";
    let Some(prefix) = no_namespaces() else {
        testkit::not_run(
            TEST,
            "no user namespace (with capsh) can be made here to refuse namespaces inside",
        );
        return;
    };
    let tmp = workspace();
    let flags = [&["--sandbox", "--allow-commands"][..], &DENY[..]].concat();
    let record = call_under(&prefix, tmp.path(), &flags, "cat .env");
    assert_eq!(said(&record), "NODE_SANDBOX_UNAVAILABLE", "{record}");
    // Nothing denied exists: nothing to cover, the call runs.
    let empty = tempfile::tempdir().unwrap();
    let record = call_under(&prefix, empty.path(), &flags, "echo ran");
    assert_eq!(stdout(&record), "ran\n");
    // The twin without --deny runs there and reads the secret.
    let record = call_under(
        &prefix,
        tmp.path(),
        &["--sandbox", "--allow-commands"],
        "cat .env",
    );
    assert!(stdout(&record).contains(SECRET), "{record}");
}

#[test]
fn in_the_container_like_setup_denied_entries_stay_covered() {
    const TEST: &str = "in_the_container_like_setup_denied_entries_stay_covered";
    if !rustix::process::geteuid().is_root() {
        testkit::not_run(
            TEST,
            "as an ordinary user (it needs root, to remount the cgroup file system and drop a \
             capability); CI runs it as root",
        );
        return;
    }
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
    let tmp = workspace();
    let flags = [&["--sandbox", "--allow-commands"][..], &DENY[..]].concat();
    let record = call_under(&container, tmp.path(), &flags, CAT);
    assert_eq!(
        stdout(&record),
        ".env=0\nid_rsa=0\nserver.pem=0\nsub/cert=0\nmv=1\nrm=1\nln=1\nmoved=0\n"
    );
    let record = call_under(&container, tmp.path(), &flags[..2], CAT);
    assert!(stdout(&record).contains(SECRET), "{record}");
}

/// A background job (`run_command` with `background: true`) is a sandboxed child like any:
/// its reads of the denied entries give nothing; the twin's job reads them.
#[test]
fn a_sandboxed_background_job_reads_no_denied_entry() {
    let job = |flags: &[&str]| -> String {
        let tmp = workspace();
        let records = call(
            tmp.path(),
            flags,
            &[
                (
                    "run_command",
                    json!({"command": "cat .env id_rsa server.pem sub/cert; echo done=$?",
                           "background": true}),
                ),
                ("job_output", json!({"jobId": "job-1", "waitMs": 10_000})),
            ],
        );
        assert_eq!(records[0]["isError"], false, "{}", records[0]);
        assert_eq!(records[1]["isError"], false, "{}", records[1]);
        records[1]["content"]["stdout"].as_str().unwrap().to_owned()
    };
    let sandboxed = ["--sandbox", "--allow-commands"];
    assert_eq!(job(&[&sandboxed[..], &DENY[..]].concat()), "done=0\n");
    assert!(job(&sandboxed).contains(SECRET));
}
