//! `run_command` across crates (`tools` over `nodeexec` and `rootid`) and through the built
//! `confine call --allow-commands`: the head-and-tail capture of a 10 MB output, a timeout as
//! data with nothing left running, cancellation mid-run, exit codes and signals as data, the
//! environment, every limit at N and N+1, the sandbox (with its unconfined twin), and a real
//! project's test suite.
//!
//! Descendants are found by a census of `/proc` (`testkit::census`): each carries a unique
//! marker in its command line, and a process counts as alive when it holds the marker and is
//! not a zombie. Every child also carries the suite's census mark, checked after the suite by
//! `cargo xtask test`.

use std::path::Path;
use std::time::{Duration, Instant};

use confine_tools::{RunCommandOptions, ToolCall, ToolRegistry, ToolSetOptions, execute_tool_call};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;
use support::{alive, assert_dead, assert_no_pify, call_lines, marked, marker};

/// Generous bounds: a loaded machine with two cores shared by many builds.
const SLOW_MS: u64 = 120_000;

fn options(max_ms: Option<u64>) -> ToolSetOptions {
    let mut commands = RunCommandOptions::default();
    commands.max_timeout = max_ms.map(Duration::from_millis);
    commands.timeout = Some(Duration::from_millis(max_ms.unwrap_or(SLOW_MS)));
    let mut options = ToolSetOptions::default();
    options.commands = Some(commands);
    options
}

fn registry(root: &Path, options: ToolSetOptions) -> ToolRegistry {
    confine_tools::create_workspace_tools(root, marked(options))
        .expect("tools over a fresh directory")
}

async fn call(registry: &ToolRegistry, arguments: Value) -> (bool, Value) {
    let call = ToolCall::new("t", "run_command", &arguments);
    let result = execute_tool_call(registry, &call, &CancellationToken::new())
        .await
        .expect("not cancelled");
    (result.is_error, result.record())
}

fn invalid(token: &str) -> Value {
    json!({"error": {"code": "TOOL_ARGUMENTS_INVALID", "message": token}})
}

/// A command starting a descendant in the shell's group and one in its own session, each
/// sleeping with `marker` in its command line, then running `tail`.
fn with_descendants(marker: &str, tail: &str) -> String {
    format!(
        "sh -c 'sleep 1000; : {marker}-group' >/dev/null 2>&1 & \
         setsid sh -c 'sleep 1000; : {marker}-session' >/dev/null 2>&1 & \
         {tail}"
    )
}

/// The 10-byte lines `000000000\n`, `000000001\n`, … of `seq`-like output.
fn numbered_lines(count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(count as usize * 10);
    for i in 0..count {
        out.extend_from_slice(format!("{i:09}\n").as_bytes());
    }
    out
}

#[tokio::test]
async fn ten_megabytes_keep_exactly_the_first_and_last_16_kib_with_the_marker() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path(), options(None));
    let lines = 1_000_000u64;
    let command = format!(
        "awk 'BEGIN {{ for (i = 0; i < {lines}; i++) printf \"%09d\\n\", i }}'; \
         awk 'BEGIN {{ for (i = 0; i < 1000; i++) printf \"%09d\\n\", i }}' >&2"
    );
    let (is_error, rec) = call(&reg, json!({"command": command})).await;
    assert!(!is_error, "{rec}");
    let all = numbered_lines(lines);
    let kib16 = 16 * 1024;
    let want = format!(
        "{}{}{}",
        std::str::from_utf8(&all[..kib16]).unwrap(),
        confine_nodeexec::omitted_marker(all.len() as u64 - 2 * kib16 as u64),
        std::str::from_utf8(&all[all.len() - kib16..]).unwrap(),
    );
    assert_eq!(all.len(), 10_000_000);
    let stdout = rec["stdout"].as_str().unwrap();
    assert!(
        stdout == want,
        "stdout is not the head, the marker and the tail"
    );
    assert!(stdout.contains("\n[... 9967232 bytes left out ...]\n"));
    assert_eq!(rec["stdoutTruncated"], true);
    // 10,000 bytes fit whole: no marker.
    let err = numbered_lines(1000);
    assert_eq!(rec["stderr"].as_str().unwrap().as_bytes(), &err[..]);
    assert_eq!(rec["stderrTruncated"], false);
    assert_eq!(
        (rec["exitCode"].clone(), rec["timedOut"].clone()),
        (json!(0), json!(false))
    );
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn output_at_head_plus_tail_is_whole_and_one_more_byte_is_marked() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path(), options(None));
    let n = 32 * 1024;
    let (_, rec) = call(
        &reg,
        json!({"command": format!("head -c {n} /dev/zero | tr '\\0' x")}),
    )
    .await;
    assert_eq!(rec["stdout"].as_str().unwrap(), "x".repeat(n));
    assert_eq!(rec["stdoutTruncated"], false);
    let (_, rec) = call(
        &reg,
        json!({"command": format!("head -c {} /dev/zero | tr '\\0' x", n + 1)}),
    )
    .await;
    let want = format!(
        "{}{}{}",
        "x".repeat(n / 2),
        confine_nodeexec::omitted_marker(1),
        "x".repeat(n / 2)
    );
    assert_eq!(rec["stdout"].as_str().unwrap(), want);
    assert_eq!(rec["stdoutTruncated"], true);
}

#[tokio::test]
async fn a_command_outliving_its_bound_is_timed_out_with_its_output_and_nothing_left_running() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path(), options(None));
    let m = marker();
    let command = with_descendants(&m, "echo started; echo warming >&2; sleep 1000");
    let (is_error, rec) = call(&reg, json!({"command": command, "timeoutMs": 3000})).await;
    assert!(!is_error, "{rec}");
    assert_eq!(rec["timedOut"], true);
    assert_eq!(rec["stdout"], "started\n");
    assert_eq!(rec["stderr"], "warming\n");
    assert_eq!(rec["exitCode"], Value::Null);
    assert_eq!(rec["signal"], "SIGKILL");
    let ms = rec["durationMs"].as_u64().unwrap();
    assert!((3000..3000 + 30_000).contains(&ms), "{ms}");
    assert_dead(&m, "the call");
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn cancellation_during_a_long_run_kills_the_tree_before_the_call_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path(), options(None));
    let m = marker();
    let command = with_descendants(&m, &format!("sh -c 'sleep 1000; : {m}-main'"));
    let call = ToolCall::new("t", "run_command", &json!({"command": command}));
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let watch = m.clone();
    let trigger = tokio::spawn(async move {
        let until = Instant::now() + Duration::from_secs(60);
        while alive(&watch).len() < 3 {
            assert!(
                Instant::now() < until,
                "the command never started its processes"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        canceller.cancel();
    });
    let result = execute_tool_call(&reg, &call, &cancel).await;
    trigger.await.unwrap();
    assert!(
        result.is_err(),
        "a cancelled call is a rejection, not a result"
    );
    assert_dead(&m, "the cancelled call");
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn exit_codes_and_signals_are_data() {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path(), options(None));
    let (is_error, rec) = call(&reg, json!({"command": "echo out; echo err >&2; exit 7"})).await;
    assert!(!is_error);
    assert_eq!(
        rec,
        json!({"exitCode": 7, "signal": null, "stdout": "out\n", "stderr": "err\n",
               "stdoutTruncated": false, "stderrTruncated": false, "timedOut": false,
               "durationMs": rec["durationMs"]})
    );
    for (sig, name) in [
        ("TERM", "SIGTERM"),
        ("KILL", "SIGKILL"),
        ("SEGV", "SIGSEGV"),
    ] {
        let (is_error, rec) = call(&reg, json!({"command": format!("kill -{sig} $$")})).await;
        assert!(!is_error);
        assert_eq!(
            (rec["exitCode"].clone(), rec["signal"].clone()),
            (Value::Null, json!(name))
        );
        assert_eq!(rec["timedOut"], false);
    }
    let (_, rec) = call(&reg, json!({"command": "no-such-program-anywhere"})).await;
    assert_eq!(rec["exitCode"], 127);
}

#[tokio::test]
async fn the_environment_is_the_allowlist_with_home_user_and_a_fresh_tmpdir() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = options(None);
    opts.env
        .push(("CONFINE_TEST_SET".into(), "set-by-embedder".into()));
    opts.env
        .push(("NODE_OPTIONS".into(), "--require=/evil.js".into()));
    let reg = registry(tmp.path(), opts);
    let command = "echo \"home=$HOME set=$CONFINE_TEST_SET opts=${NODE_OPTIONS-unset} \
        secret=${CARGO_PKG_NAME-unset}\"; echo \"$TMPDIR\"; echo kept > \"$TMPDIR/f\" && \
        mkdir \"$TMPDIR/d\" && echo wrote; pwd";
    let (is_error, rec) = call(&reg, json!({"command": command})).await;
    assert!(!is_error, "{rec}");
    let out = rec["stdout"].as_str().unwrap();
    let mut lines = out.lines();
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        lines.next().unwrap(),
        format!("home={home} set=set-by-embedder opts=unset secret=unset")
    );
    let tmpdir = lines.next().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let name = Path::new(tmpdir)
        .strip_prefix(&root)
        .expect("TMPDIR beneath the root");
    assert!(name.to_string_lossy().starts_with(".pify-run-"), "{tmpdir}");
    assert_eq!(lines.next(), Some("wrote"));
    assert_eq!(lines.next(), Some(root.to_str().unwrap()));
    assert!(!Path::new(tmpdir).exists(), "TMPDIR outlived the call");
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn every_limit_at_n_and_n_plus_one() {
    let tmp = tempfile::tempdir().unwrap();
    let max = 5_000;
    let reg = registry(tmp.path(), options(Some(max)));
    // The command: 32,768 bytes run, 32,769 are refused.
    let at = format!(
        "true{}",
        " ".repeat(confine_tools::limits::MAX_COMMAND_BYTES - 4)
    );
    let (is_error, rec) = call(&reg, json!({"command": at})).await;
    assert!(!is_error, "{rec}");
    assert_eq!(rec["exitCode"], 0);
    let over = format!("{at} ");
    assert_eq!(
        call(&reg, json!({"command": over})).await.1,
        invalid("RUN_COMMAND_TOO_LARGE")
    );
    // timeoutMs: 1 and the maximum are accepted, 0 and the maximum + 1 refused.
    let (is_error, rec) = call(&reg, json!({"command": "true", "timeoutMs": 1})).await;
    assert!(!is_error, "{rec}");
    let (is_error, rec) = call(&reg, json!({"command": "true", "timeoutMs": max})).await;
    assert!(!is_error && rec["exitCode"] == 0, "{rec}");
    for ms in [json!(0), json!(max + 1)] {
        let (_, rec) = call(&reg, json!({"command": "true", "timeoutMs": ms})).await;
        assert_eq!(rec, invalid("RUN_COMMAND_TIMEOUT_OUT_OF_RANGE"), "{ms}");
    }
    // Shape: before any effect, with the tool's own token.
    for bad in [
        json!({}),
        json!({"command": ""}),
        json!({"command": "true\u{0}"}),
        json!({"command": 1}),
        json!({"command": "true", "timeoutMs": -1}),
        json!({"command": "true", "timeoutMs": 1.5}),
        json!({"command": "true", "timeoutMs": "1"}),
        json!({"command": "true", "cwd": "/"}),
        json!(["true"]),
    ] {
        assert_eq!(
            call(&reg, bad.clone()).await.1,
            invalid("INVALID_RUN_COMMAND_INPUT"),
            "{bad}"
        );
    }
    assert_no_pify(tmp.path());
}

#[test]
fn the_binary_offers_run_command_only_with_allow_commands_and_never_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let line =
        "{\"id\":1,\"name\":\"run_command\",\"arguments\":{\"command\":\"echo $FROM_FLAG\"}}\n";
    let out = call_lines(
        tmp.path(),
        &["--allow-commands", "--env", "FROM_FLAG=flagged"],
        line,
    );
    assert_eq!(out[0]["content"]["stdout"], "flagged\n", "{}", out[0]);
    let out = call_lines(tmp.path(), &[], line);
    assert_eq!(out[0]["content"]["error"]["code"], "TOOL_NOT_FOUND");
    for flags in [
        &["--allow-commands", "--read-only"][..],
        &["--tools", "run_command"],
        &["--command-timeout-ms", "5"],
        &["--allow-commands", "--command-max-timeout-ms", "0"],
    ] {
        let status = support::confine()
            .args(["call", "--root"])
            .arg(tmp.path())
            .args(flags)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(2), "{flags:?}");
    }
    // The embedder's maximum through the flags: N accepted, N + 1 refused.
    let input = "{\"id\":1,\"name\":\"run_command\",\"arguments\":{\"command\":\"true\",\"timeoutMs\":4000}}\n\
                 {\"id\":2,\"name\":\"run_command\",\"arguments\":{\"command\":\"true\",\"timeoutMs\":4001}}\n";
    let out = call_lines(
        tmp.path(),
        &["--allow-commands", "--command-max-timeout-ms", "4000"],
        input,
    );
    assert_eq!(out[0]["content"]["exitCode"], 0, "{}", out[0]);
    assert_eq!(
        out[1]["content"]["error"]["message"],
        "RUN_COMMAND_TIMEOUT_OUT_OF_RANGE"
    );
}

/// A tiny Rust crate with one passing and one failing test, generated in the workspace.
fn tiny_crate(root: &Path) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 { a + b }\n\
         #[cfg(test)] mod tests {\n\
         #[test] fn adds() { assert_eq!(super::add(2, 2), 4); }\n\
         #[test] fn fails() { assert_eq!(super::add(2, 2), 5, \"deliberately wrong\"); }\n}\n",
    )
    .unwrap();
}

/// The real workload: a project's test suite, its failure and its summary read back.
async fn cargo_test_through_run_command(options: ToolSetOptions) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    tiny_crate(tmp.path());
    let reg = registry(tmp.path(), options);
    let (is_error, rec) = call(
        &reg,
        json!({"command": "cargo test --offline 2>&1", "timeoutMs": SLOW_MS}),
    )
    .await;
    assert!(!is_error, "{rec}");
    assert_no_pify(tmp.path());
    rec
}

fn assert_cargo_ran(rec: &Value) {
    let out = rec["stdout"].as_str().unwrap();
    assert_eq!(rec["timedOut"], false, "{out}");
    assert_eq!(rec["exitCode"], 101, "{out}");
    assert!(out.contains("test tests::adds ... ok"), "{out}");
    assert!(out.contains("deliberately wrong"), "{out}");
    assert!(
        out.contains("test result: FAILED. 1 passed; 1 failed"),
        "{out}"
    );
}

#[tokio::test]
async fn a_real_crates_test_suite_runs_through_run_command() {
    let rec = cargo_test_through_run_command(options(Some(SLOW_MS))).await;
    assert_cargo_ran(&rec);
}

#[tokio::test]
async fn a_real_crates_test_suite_runs_under_the_sandbox() {
    let mut opts = options(Some(SLOW_MS));
    // What the docs tell a cargo project to add: the toolchains in the home directory, or
    // wherever this machine keeps them (`CARGO_HOME`, `RUSTUP_HOME`, the installation of the
    // `cargo` on PATH, as where CI runs the suite as an ordinary user).
    let home = std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let mut sandbox = confine_nodeexec::Sandbox::new();
    let mut dirs = vec![home.join(".cargo"), home.join(".rustup")];
    dirs.extend(
        ["CARGO_HOME", "RUSTUP_HOME"]
            .iter()
            .filter_map(|v| std::env::var_os(v).map(Into::into)),
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(cargo) = std::env::split_paths(&path)
        .map(|d| d.join("cargo"))
        .find(|c| c.is_file())
    {
        let cargo = cargo.canonicalize().unwrap();
        dirs.extend(cargo.parent().and_then(|bin| bin.parent()).map(Into::into));
    }
    for dir in dirs {
        if dir.exists() {
            sandbox.allow_read(dir);
        }
    }
    opts.sandbox = Some(sandbox);
    let rec = cargo_test_through_run_command(opts).await;
    assert_cargo_ran(&rec);
}

#[tokio::test]
async fn under_the_sandbox_it_cannot_write_outside_or_connect_and_can_run_node_and_sh() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escaped.txt");
    let command = format!(
        "echo inside > inside.txt && sh -c 'cat inside.txt' && \
         node -e \"console.log(require('fs').readFileSync('inside.txt', 'utf8').trim() + ' via node')\"; \
         if echo out > '{}' 2>/dev/null; then echo wrote-outside; else echo write-refused; fi; \
         node -e \"require('net').connect({port}, '127.0.0.1') \
           .on('connect', function () {{ console.log('connected'); this.destroy(); }}) \
           .on('error', (e) => console.log('connect-' + e.code))\"",
        target.display()
    );
    let run = |sandboxed: bool| {
        let command = command.clone();
        async move {
            let tmp = tempfile::tempdir().unwrap();
            let mut opts = options(None);
            if sandboxed {
                opts.sandbox = Some(confine_nodeexec::Sandbox::new());
            }
            let reg = registry(tmp.path(), opts);
            let (is_error, rec) = call(&reg, json!({"command": command})).await;
            assert!(!is_error, "{rec}");
            rec["stdout"].as_str().unwrap().to_owned()
        }
    };
    // The unconfined twin: the same command writes outside and connects.
    let open = run(false).await;
    assert_eq!(open, "inside\ninside via node\nwrote-outside\nconnected\n");
    std::fs::remove_file(&target).unwrap();
    let confined = run(true).await;
    assert_eq!(
        confined.lines().take(3).collect::<Vec<_>>(),
        ["inside", "inside via node", "write-refused"],
        "{confined}"
    );
    let last = confined.lines().nth(3).unwrap_or_default();
    assert!(last.starts_with("connect-E"), "{confined}");
    assert!(!target.exists());
    drop(listener);
}

/// run_command waits for the same slots as node_process: with the registry's one slot held,
/// a command is queued (it never starts) and a cancellation while queued is a rejection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_waits_for_the_shared_slots_and_is_cancellable_while_queued() {
    let tmp = tempfile::tempdir().unwrap();
    let slots = std::sync::Arc::new(confine_nodeexec::RunSlots::new(1));
    let mut opts = options(None);
    opts.slots = Some(slots.clone());
    let registry = registry(tmp.path(), opts);
    let free = CancellationToken::new();
    let held = slots.acquire(&free).await.unwrap();
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cancel.cancel();
        })
    };
    let queued = ToolCall::new("q", "run_command", &json!({"command": "touch started"}));
    let outcome = execute_tool_call(&registry, &queued, &cancel).await;
    canceller.await.unwrap();
    assert!(
        outcome.is_err(),
        "a queued call cancelled is a rejection: {outcome:?}"
    );
    assert!(
        !tmp.path().join("started").exists(),
        "the queued command never ran"
    );
    drop(held);
    let (is_error, record) = call(&registry, json!({"command": "touch started"})).await;
    assert!(!is_error, "{record}");
    assert!(tmp.path().join("started").exists());
    assert_no_pify(tmp.path());
}

/// By default the shell has a session of its own and no new privileges; the embedder's
/// `keep_privileges` (shared with `node_process`) keeps the embedder's session and privileges
/// for `run_command` too.
#[tokio::test]
async fn keep_privileges_applies_to_run_command_too() {
    let own_no_new_privs = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("NoNewPrivs:").map(|v| v.trim().to_owned()))
        .unwrap();
    assert_eq!(
        own_no_new_privs, "0",
        "the test itself runs with no new privileges"
    );
    // The shell's no-new-privileges flag, then, read by its child `sed` from `/proc/self`
    // (pids as the host's `/proc` names them): `sed`'s parent (the shell) and its session. A
    // shell that leads a session of its own has the two equal.
    let command = "grep '^NoNewPrivs' /proc/self/status | tr -d ' \\t'; \
                   sed 's/.*) //' /proc/self/stat | cut -d' ' -f2,4 | tr ' ' '\\n'";
    for keep in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let mut opts = options(None);
        opts.keep_privileges = keep;
        let reg = registry(tmp.path(), opts);
        let (is_error, rec) = call(&reg, json!({"command": command})).await;
        assert!(!is_error, "{rec}");
        let out = rec["stdout"].as_str().unwrap().to_owned();
        let mut lines = out.lines();
        let no_new_privs = lines.next().unwrap_or_default();
        let (pid, session) = (lines.next().unwrap(), lines.next().unwrap());
        if keep {
            assert_eq!(no_new_privs, "NoNewPrivs:0", "{out}");
            assert_ne!(session, pid, "{out}");
        } else {
            assert_eq!(no_new_privs, "NoNewPrivs:1", "{out}");
            assert_eq!(session, pid, "{out}");
        }
    }
}
