//! `node_process` across crates (`tools` over `nodeexec` and `rootid`) and through the built
//! `confine call` binary, with a real Node.js.
//!
//! Descendants are found two ways. By a census of `/proc`: each carries a unique marker
//! argument, and a process counts as alive when its command line holds the marker and it is
//! not a zombie. And, as a judge outside would, by the pids a script prints: `nodeexec` runs
//! each call in a cgroup of its own with a PID namespace inside, so the script translates its
//! namespace's pids into host pids through the host's `/proc` before it prints them, and each
//! must be gone after the call (`kill(pid, 0)` is `ESRCH`, allowing the host's init a bounded moment to reap
//! orphans), as must the call's cgroup.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use confine_tools::{ToolCall, ToolRegistry, ToolSetOptions, execute_tool_call};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;
use support::{
    alive, assert_dead, assert_no_pify, census_flags, marked, marker, wait_alive,
    wait_alive_blocking,
};
use testkit::fixture::cmdline;

fn registry(root: &Path, timeout: Option<Duration>) -> ToolRegistry {
    let mut options = marked(ToolSetOptions::default());
    options.node.timeout = timeout;
    confine_tools::create_coding_tools(root, options).expect("tools over a fresh directory")
}

/// A fresh workspace and a registry over it with the time bound `timeout`.
fn workspace(timeout: Option<Duration>) -> (tempfile::TempDir, ToolRegistry) {
    let tmp = tempfile::tempdir().unwrap();
    let reg = registry(tmp.path(), timeout);
    (tmp, reg)
}

/// The record of a call that must succeed.
async fn ok(registry: &ToolRegistry, arguments: Value) -> Value {
    let (is_error, record) = call(registry, arguments).await;
    assert!(!is_error, "{record}");
    record
}

async fn call(registry: &ToolRegistry, arguments: Value) -> (bool, Value) {
    let call = ToolCall::new("t", "node_process", &arguments);
    let result = execute_tool_call(registry, &call, &CancellationToken::new())
        .await
        .expect("not cancelled");
    (result.is_error, result.record())
}

fn timeout_record() -> Value {
    json!({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "NODE_PROCESS_TIMEOUT"}})
}

fn invalid(token: &str) -> Value {
    json!({"error": {"code": "TOOL_ARGUMENTS_INVALID", "message": token}})
}

/// Source starting one descendant in the process group and one in its own session
/// (`detached: true`), neither holding the pipes, then running `tail`.
fn with_descendants(marker: &str, tail: &str) -> String {
    format!(
        "const {{ spawn }} = require('child_process');
         const keep = ['-e', 'setInterval(() => {{}}, 1000)'];
         spawn(process.execPath, [...keep, '{marker}-group'], {{ stdio: 'ignore' }}).unref();
         spawn(process.execPath, [...keep, '{marker}-session'], {{ stdio: 'ignore', detached: true }}).unref();
         {tail}"
    )
}

/// Source starting one descendant in the process group and one in its own session, then
/// printing `node=<pid> group=<pid> session=<pid> cgroup=<path>` (its own host pid, theirs,
/// and its cgroup v2 path) to stdout and to `pids.txt` in the working directory (renamed into
/// place, for calls that end without output), then running `tail`.
///
/// The call runs in a PID namespace of its own where one can be made, so `process.pid` and
/// `child.pid` are the namespace's numbers. The script turns them into host pids as anyone
/// could: `/proc` is the host's (no mount namespace), so `/proc/self` names its host pid, and
/// the host pid of a namespace pid is the `/proc` entry in the same PID namespace whose
/// `NSpid` ends with it. Without a namespace the translation is the identity.
fn printing_pids(marker: &str, tail: &str) -> String {
    format!(
        "const fs = require('fs'), {{ spawn }} = require('child_process');
         const keep = ['-e', 'setInterval(() => {{}}, 1000)'];
         const g = spawn(process.execPath, [...keep, '{marker}-group'], {{ stdio: 'ignore' }});
         const s = spawn(process.execPath, [...keep, '{marker}-session'], {{ stdio: 'ignore', detached: true }});
         g.unref(); s.unref();
         const ns = fs.readlinkSync('/proc/self/ns/pid');
         const host = (pid) => {{
           for (const d of fs.readdirSync('/proc').filter((d) => /^[0-9]+$/.test(d))) {{
             try {{
               if (fs.readlinkSync('/proc/' + d + '/ns/pid') !== ns) continue;
               const ids = fs.readFileSync('/proc/' + d + '/status', 'utf8').match(/^NSpid:\\s+(.*)$/m)[1].trim().split(/\\s+/);
               if (Number(ids[ids.length - 1]) === pid) return Number(d);
             }} catch {{}}
           }}
           throw new Error('no host pid for ' + pid);
         }};
         const cg = fs.readFileSync('/proc/self/cgroup', 'utf8').split('\\n').find((l) => l.startsWith('0::')).slice(3);
         const line = 'node=' + fs.readlinkSync('/proc/self') + ' group=' + host(g.pid) + ' session=' + host(s.pid) + ' cgroup=' + cg;
         fs.writeFileSync('pids.tmp', line); fs.renameSync('pids.tmp', 'pids.txt');
         console.log(line);
         {tail}"
    )
}

/// The `(name, value)` pairs of a line printed by [`printing_pids`].
fn printed(line: &str) -> Vec<(String, String)> {
    line.split_whitespace()
        .map(|f| {
            let (k, v) = f.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn wait_printed(root: &Path) -> Vec<(String, String)> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(root.join("pids.txt")) {
            return printed(&text);
        }
        assert!(Instant::now() < until, "the script never printed its pids");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// While the call runs: the printed descendant pids name, on the host, exactly the processes
/// carrying the marker.
fn assert_printed_live(pids: &[(String, String)], marker: &str) {
    for (name, value) in pids {
        if name == "group" || name == "session" {
            let pid: i32 = value.parse().unwrap();
            assert!(
                cmdline(pid).contains(&format!("{marker}-{name}")),
                "pid {pid} printed as {name} is not that process on the host"
            );
        }
    }
}

/// After the call: every printed pid is gone from the host (`kill(pid, 0)` fails with ESRCH,
/// or the pid already names another live process without the marker: reused), within a
/// bounded wait for the host's init to reap orphans; and the call's cgroup is removed.
fn assert_printed_dead(pids: &[(String, String)], marker: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    for (name, value) in pids {
        if name == "cgroup" {
            let run_cgroup = value
                .rsplit('/')
                .next()
                .is_some_and(|last| last.starts_with("confine-"));
            if !run_cgroup {
                // Root with a writable cgroup v2 hierarchy always gets the cgroup mode; an
                // ordinary user without delegation (or a container) gets none.
                assert!(
                    !root_with_writable_cgroups(),
                    "not in a run cgroup: {value}"
                );
                testkit::not_run(
                    "node_process_run_cgroup_is_removed (the cgroup half of assert_printed_dead)",
                    &format!(
                        "no run cgroup here (an ordinary user without delegation, or a read-only \
                         cgroup mount): the call ran in {value}"
                    ),
                );
                continue;
            }
            let dir = cgroup2_mount().join(value.trim_start_matches('/'));
            assert!(!dir.exists(), "{} was left behind", dir.display());
            continue;
        }
        let pid: i32 = value.parse().unwrap();
        loop {
            let errno = rustix::process::test_kill_process(
                rustix::process::Pid::from_raw(pid).expect("a pid"),
            )
            .err();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z'));
            let args = cmdline(pid);
            let reused = errno.is_none()
                && !zombie
                && !args.is_empty()
                && !args.iter().any(|a| a.contains(marker));
            if errno == Some(rustix::io::Errno::SRCH) || reused {
                break;
            }
            assert!(
                Instant::now() < until,
                "pid {pid} ({name}) outlived the call"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Whether this process is root and the cgroup2 hierarchy is writable here (where the
/// server's calls get a cgroup of their own).
fn root_with_writable_cgroups() -> bool {
    rustix::process::geteuid().is_root()
        && rustix::fs::access(cgroup2_mount(), rustix::fs::Access::WRITE_OK).is_ok()
        && !rustix::fs::statvfs(cgroup2_mount())
            .is_ok_and(|s| s.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
}

/// The mount point of the (first) cgroup2 hierarchy.
fn cgroup2_mount() -> std::path::PathBuf {
    testkit::fixture::cgroup2_mount().expect("a cgroup2 mount")
}

#[tokio::test]
async fn node_process_execution_context() {
    let tmp = tempfile::tempdir().unwrap();
    // The root is given through a symlink: the child's cwd must be the canonical directory.
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let reg = registry(&link, None);
    let source = [
        "process.stdout.write(JSON.stringify({",
        "  execPath: process.execPath,",
        "  args: process.argv.slice(1),",
        "  cwd: process.cwd(),",
        "}));",
        "process.stderr.write('diagnostic');",
    ]
    .join("\n");
    let call = ToolCall::new(
        "c",
        "node_process",
        &json!({"source": source, "arguments": ["alpha", "two words"]}),
    );
    let result = execute_tool_call(&reg, &call, &CancellationToken::new())
        .await
        .unwrap();
    assert!(!result.is_error, "{}", result.content);
    let record = result.record();
    let node = std::fs::canonicalize(testkit::node_on_path()).unwrap();
    let stdout: Value = serde_json::from_str(record["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(
        stdout,
        json!({"execPath": node, "args": ["alpha", "two words"], "cwd": std::fs::canonicalize(&real).unwrap()})
    );
    // The whole record, keys in the contract's order.
    let expected = json!({
        "exitCode": 0, "signal": null, "stdout": record["stdout"], "stderr": "diagnostic",
        "stdoutTruncated": false, "stderrTruncated": false, "timedOut": false,
    });
    assert_eq!(result.content, expected.to_string());
    assert_no_pify(&real);
}

#[tokio::test]
async fn node_process_source_boundary() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(5)));
    // 32,768 bytes exactly, multi-byte characters included, and it runs.
    let head = "process.stdout.write('ok') // é€😀\n";
    let pad = 32_768 - head.len() - 2;
    let source = format!("{head}/*{}", "x".repeat(pad - 2)) + "*/";
    assert_eq!(source.len(), 32_768);
    let record = ok(&reg, json!({"source": source})).await;
    assert_eq!(record["stdout"], "ok");
    let (is_error, record) = call(&reg, json!({"source": format!("{source} ")})).await;
    assert!(is_error);
    assert_eq!(record, invalid("NODE_SOURCE_TOO_LARGE"));
    // A multi-byte character that crosses the limit counts in bytes.
    let (_, record) = call(&reg, json!({"source": format!("{}é", "x".repeat(32_767))})).await;
    assert_eq!(record, invalid("NODE_SOURCE_TOO_LARGE"));
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_argument_boundaries_with_quotes_and_backslashes() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(5)));
    let echo = "process.stdout.write(JSON.stringify(process.argv.slice(1)))";
    let tricky: Vec<String> = [
        "",
        " ",
        "\"",
        "\\",
        "\\\"",
        "a\\\\\"b",
        "end\\\\",
        "two words",
        "--",
        "-e",
        "--inspect",
        "tab\there",
        "new\nline",
        "üñí \"çødé\" 😀",
        "$HOME `id` $(id) ; | &",
    ]
    .map(String::from)
    .to_vec();
    let record = ok(&reg, json!({"source": echo, "arguments": tricky})).await;
    assert_eq!(
        serde_json::from_str::<Value>(record["stdout"].as_str().unwrap()).unwrap(),
        json!(tricky)
    );

    // Each argument at 2,048 bytes (quotes and backslashes), four of them: 8,192 in all.
    let full: Vec<String> = [
        "\\\"".repeat(1024),
        "\\".repeat(2048),
        "\"".repeat(2048),
        "é".repeat(1024),
    ]
    .to_vec();
    let record = ok(&reg, json!({"source": echo, "arguments": full})).await;
    assert_eq!(
        serde_json::from_str::<Value>(record["stdout"].as_str().unwrap()).unwrap(),
        json!(full)
    );

    let cases = [
        (json!(vec!["a"; 32]), None),
        (json!(vec!["a"; 33]), Some("TOO_MANY_NODE_ARGUMENTS")),
        (json!(["x".repeat(2049)]), Some("NODE_ARGUMENT_TOO_LARGE")),
        (
            json!(["é".repeat(1024) + "x"]),
            Some("NODE_ARGUMENT_TOO_LARGE"),
        ),
        (
            json!([
                full[0].clone(),
                full[1].clone(),
                full[2].clone(),
                full[3].clone(),
                "x"
            ]),
            Some("NODE_ARGUMENTS_TOO_LARGE"),
        ),
        (json!(["a\u{0}b"]), Some("INVALID_NODE_PROCESS_INPUT")),
        (json!(null), Some("INVALID_NODE_PROCESS_INPUT")),
        (json!([1]), Some("INVALID_NODE_PROCESS_INPUT")),
    ];
    for (arguments, want) in cases {
        let (is_error, record) = call(&reg, json!({"source": "", "arguments": arguments})).await;
        match want {
            None => assert!(!is_error, "{record}"),
            Some(token) => assert_eq!(record, invalid(token), "{arguments}"),
        }
    }
    let (is_error, record) = call(&reg, json!({"source": "", "argument": []})).await;
    assert!(is_error);
    assert_eq!(record, invalid("INVALID_NODE_PROCESS_INPUT"));
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_caps_both_streams_on_character_boundaries() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(5)));
    let record = ok(&reg, json!({"source": "process.stdout.write('é'.repeat(20000)); process.stderr.write('x' + '€'.repeat(20000))"})).await;
    let stdout = record["stdout"].as_str().unwrap();
    let stderr = record["stderr"].as_str().unwrap();
    assert_eq!(stdout.len(), 32_768);
    assert!(stdout.chars().all(|c| c == 'é'));
    // 1 + 3n ≤ 32,768: n = 10,922, 32,767 bytes.
    assert_eq!(stderr.len(), 32_767);
    assert!(stderr.starts_with('x') && stderr[1..].chars().all(|c| c == '€'));
    assert_eq!(record["stdoutTruncated"], true);
    assert_eq!(record["stderrTruncated"], true);
    let (_, record) = call(
        &reg,
        json!({"source": "process.stdout.write('a'.repeat(32768))"}),
    )
    .await;
    assert_eq!(
        (
            record["stdout"].as_str().unwrap().len(),
            &record["stdoutTruncated"]
        ),
        (32_768, &json!(false))
    );
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_nonzero_exit_and_signal_are_data() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(5)));
    let (is_error, record) = call(
        &reg,
        json!({"source": "console.log('x'); process.exitCode = 7"}),
    )
    .await;
    assert!(!is_error);
    assert_eq!(
        record,
        json!({"exitCode": 7, "signal": null, "stdout": "x\n", "stderr": "", "stdoutTruncated": false, "stderrTruncated": false, "timedOut": false})
    );
    let (is_error, record) = call(&reg, json!({"source": "throw new Error('boom')"})).await;
    assert!(!is_error);
    assert_eq!(record["exitCode"], 1);
    assert!(record["stderr"].as_str().unwrap().contains("boom"));
    let (is_error, record) = call(
        &reg,
        json!({"source": "process.kill(process.pid, 'SIGKILL')"}),
    )
    .await;
    assert!(!is_error);
    assert_eq!(
        (&record["exitCode"], &record["signal"]),
        (&Value::Null, &json!("SIGKILL"))
    );
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_busy_loop_times_out() {
    let (tmp, reg) = workspace(None);
    let start = Instant::now();
    let (is_error, record) = call(&reg, json!({"source": "for (;;) {}"})).await;
    let took = start.elapsed();
    assert!(is_error);
    assert_eq!(record, timeout_record());
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_millis(1000),
        "{took:?}"
    );
    assert_no_pify(tmp.path());
}

/// The call ends with the script: a detached descendant holding stdout and stderr is killed
/// at the script's exit, and the record is the script's own (it was a timeout before).
#[tokio::test]
async fn node_process_descendant_holding_stdout_ends_with_the_script() {
    let tmp = tempfile::tempdir().unwrap();
    let bound = Duration::from_millis(5000);
    let reg = registry(tmp.path(), Some(bound));
    let m = marker();
    let source = format!(
        "require('child_process').spawn(process.execPath, ['-e', 'setInterval(() => {{}}, 1000)', '{m}'],
           {{ stdio: ['ignore', 'inherit', 'inherit'], detached: true }}).unref();
         console.log('parent exits now')"
    );
    let start = Instant::now();
    let (is_error, record) = call(&reg, json!({"source": source})).await;
    let took = start.elapsed();
    assert!(!is_error, "{record}");
    assert_eq!(record["exitCode"], 0, "{record}");
    assert_eq!(record["timedOut"], false, "{record}");
    assert_eq!(record["stdout"], "parent exits now\n", "{record}");
    assert!(took < bound, "{took:?}");
    assert_dead(&m, "the call");
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_descendants_dead_after_exit_and_timeout() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(3)));
    let m = marker();
    let record = ok(
        &reg,
        json!({"source": with_descendants(&m, "console.log('bye')")}),
    )
    .await;
    assert_eq!(record["stdout"], "bye\n");
    assert_dead(&m, "the call (after exit)");

    let m = marker();
    let probe = m.clone();
    let seen = tokio::spawn(async move { wait_alive(&probe, 2).await });
    let (_, record) = call(
        &reg,
        json!({"source": with_descendants(&m, "setInterval(() => {}, 1000)")}),
    )
    .await;
    seen.await.unwrap();
    assert_eq!(record, timeout_record());
    assert_dead(&m, "the call (after timeout)");
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_cancellation_kills_before_returning() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(10)));
    let m = marker();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let probe = m.clone();
    tokio::spawn(async move {
        wait_alive(&probe, 2).await;
        trigger.cancel();
    });
    let call = ToolCall::new(
        "c",
        "node_process",
        &json!({"source": with_descendants(&m, "setInterval(() => {}, 1000)")}),
    );
    let result = execute_tool_call(&reg, &call, &cancel).await;
    assert_eq!(result, Err(confine_tools::Cancelled));
    assert_dead(&m, "the cancelled call");
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_dropped_future_kills_and_removes_the_script() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(10)));
    let m = marker();
    let call = ToolCall::new(
        "c",
        "node_process",
        &json!({"source": with_descendants(&m, "setInterval(() => {}, 1000)")}),
    );
    let cancel = CancellationToken::new();
    let mut fut = Box::pin(execute_tool_call(&reg, &call, &cancel));
    tokio::select! {
        _ = &mut fut => panic!("the call ended by itself"),
        () = wait_alive(&m, 2) => {}
    }
    drop(fut);
    assert_dead(&m, "the dropped call");
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_replaced_root_is_workspace_root_changed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let reg = registry(&root, None);
    std::fs::rename(&root, tmp.path().join("moved")).unwrap();
    std::fs::create_dir(&root).unwrap();
    let (is_error, record) = call(
        &reg,
        json!({"source": "require('fs').writeFileSync('x', 'y')"}),
    )
    .await;
    assert!(is_error);
    assert_eq!(
        record,
        json!({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "WORKSPACE_ROOT_CHANGED"}})
    );
    assert!(
        std::fs::read_dir(&root).unwrap().next().is_none(),
        "nothing ran in the replacement"
    );
    assert_no_pify(tmp.path());
}

#[tokio::test]
async fn node_process_script_may_remove_itself() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(5)));
    let record = ok(&reg, json!({"source": "const fs = require('fs'); fs.unlinkSync(__filename); console.log(fs.statSync(__dirname).isDirectory())"})).await;
    assert_eq!(record["stdout"], "true\n");
    assert_no_pify(tmp.path());
}

/// A judge's check through the tool: the host pids a script prints (its own, a descendant in
/// the group and one in its own session) name those processes while the call runs, and all are dead after
/// the call, whether it ended by exit, timeout or cancellation; no cgroup is left.
#[tokio::test]
async fn node_process_printed_pids_dead_after_exit_timeout_and_cancellation() {
    let (tmp, reg) = workspace(Some(Duration::from_secs(3)));
    let forever = "setInterval(() => {}, 1000)";

    // Exit: the pids come back on stdout.
    let m = marker();
    let record = ok(&reg, json!({"source": printing_pids(&m, "")})).await;
    let pids = printed(record["stdout"].as_str().unwrap());
    assert_eq!(pids.len(), 4, "{record}");
    assert_printed_dead(&pids, &m);
    std::fs::remove_file(tmp.path().join("pids.txt")).unwrap();

    // Timeout: no output comes back; the script's file says the pids.
    let m = marker();
    let root = tmp.path().to_owned();
    let probe = m.clone();
    let during = tokio::task::spawn_blocking(move || {
        let pids = wait_printed(&root);
        assert_printed_live(&pids, &probe);
        pids
    });
    let (_, record) = call(&reg, json!({"source": printing_pids(&m, forever)})).await;
    assert_eq!(record, timeout_record());
    let pids = during.await.unwrap();
    assert_printed_dead(&pids, &m);
    std::fs::remove_file(tmp.path().join("pids.txt")).unwrap();

    // Cancellation, once both descendants are seen from the host.
    let m = marker();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let root = tmp.path().to_owned();
    let probe = m.clone();
    let during = tokio::task::spawn_blocking(move || {
        let pids = wait_printed(&root);
        assert_printed_live(&pids, &probe);
        trigger.cancel();
        pids
    });
    let tool_call = ToolCall::new(
        "c",
        "node_process",
        &json!({"source": printing_pids(&m, forever)}),
    );
    let result = execute_tool_call(&reg, &tool_call, &cancel).await;
    assert_eq!(result, Err(confine_tools::Cancelled));
    let pids = during.await.unwrap();
    assert_printed_dead(&pids, &m);
    assert_dead(&m, "the calls");
    assert_no_pify(tmp.path());
}

/// The same from outside, through `confine call`, as the grading census runs it: the pids an
/// exited call printed, and those a timed-out call wrote down, are dead once each answer is
/// out.
#[test]
fn confine_call_printed_pids_dead_after_exit_and_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    // Unsandboxed: the harder case (a sandboxed run is contained the same way, and more).
    let mut child = confine_call(tmp.path(), &["--no-sandbox", "--timeout-ms", "1500"], &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut answers = BufReader::new(child.stdout.take().unwrap()).lines();

    let m = marker();
    let line =
        json!({"id": 1, "name": "node_process", "arguments": {"source": printing_pids(&m, "")}});
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    let answer: Value = serde_json::from_str(&answers.next().unwrap().unwrap()).unwrap();
    assert_eq!(answer["isError"], false, "{answer}");
    let pids = printed(answer["content"]["stdout"].as_str().unwrap());
    assert_printed_dead(&pids, &m);
    std::fs::remove_file(tmp.path().join("pids.txt")).unwrap();

    let m = marker();
    let line = json!({"id": 2, "name": "node_process", "arguments": {"source": printing_pids(&m, "setInterval(() => {}, 1000)")}});
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    let pids = wait_printed(tmp.path());
    assert_printed_live(&pids, &m);
    let answer: Value = serde_json::from_str(&answers.next().unwrap().unwrap()).unwrap();
    assert_eq!(answer["content"], timeout_record());
    assert_printed_dead(&pids, &m);

    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert_no_pify(tmp.path());
}

/// The `confine call` binary with `env` added to (not replacing) this process's environment.
fn confine_call(root: &Path, extra: &[&str], env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = support::confine();
    cmd.arg("call")
        .arg("--root")
        .arg(root)
        .args(census_flags())
        .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("confine runs")
}

#[test]
fn confine_call_hides_host_secrets_and_node_options() {
    let tmp = tempfile::tempdir().unwrap();
    let env = [
        ("CONFINE_TEST_SECRET", "sk-live-123"),
        ("OPENAI_API_KEY", "sk-other"),
        ("NODE_OPTIONS", "--require /nonexistent/preload.js"),
        ("LC_CTYPE", "C.UTF-8"),
    ];
    // Unsandboxed: the policy then sets no proxy variable of its own.
    let mut child = confine_call(tmp.path(), &["--no-sandbox"], &env);
    let lines = [
        json!({"id": 1, "name": "node_process", "arguments": {"source": "process.stdout.write(JSON.stringify(process.env))"}}),
        json!({"id": 2, "name": "node_process", "arguments": {"source": "for (;;) {}"}}),
        json!({"id": "x", "name": "node_process", "arguments": {"source": "process.exitCode = 3"}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[0]["isError"], false, "{}", answers[0]);
    let env: Value =
        serde_json::from_str(answers[0]["content"]["stdout"].as_str().unwrap()).unwrap();
    let env = env.as_object().unwrap();
    for name in env.keys() {
        // The census mark is passed by the test itself (`--env`, see the support module).
        let allowed = ["PATH", "LANG", "TZ", testkit::census::MARK_VAR].contains(&name.as_str())
            || name.starts_with("LC_");
        assert!(allowed, "{name} leaked into the child");
    }
    assert_eq!(env.get("LC_CTYPE"), Some(&json!("C.UTF-8")));
    assert!(!env.contains_key("NODE_OPTIONS") && !env.contains_key("CONFINE_TEST_SECRET"));
    assert_eq!(
        answers[1],
        json!({"id": 2, "isError": true, "content": timeout_record()})
    );
    assert_eq!(answers[2]["id"], "x");
    assert_eq!(answers[2]["content"]["exitCode"], 3);
    assert_no_pify(tmp.path());
}

/// The server is not dumpable, so a script (same user, no capabilities) cannot read its
/// environment through `/proc/<server>/environ`.
#[test]
fn a_script_cannot_read_the_servers_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = confine_call(tmp.path(), &[], &[("CONFINE_TEST_SECRET", "sk-live-456")]);
    let source = format!(
        "try {{ process.stdout.write(require('fs').readFileSync('/proc/{}/environ', \
         'latin1')) }} catch (e) {{ process.stdout.write('refused ' + e.code) }}",
        child.id()
    );
    let mut stdin = child.stdin.take().unwrap();
    let line = json!({"id": 1, "name": "node_process", "arguments": {"source": source}});
    writeln!(stdin, "{line}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["isError"], false, "{answer}");
    let stdout = answer["content"]["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("refused E"), "{stdout}");
}

/// What makes the server undumpable is what `--keep-dumpable` turns off: another process of
/// the same user may read the server's `/proc/<pid>/fd` only with the flag. Root reads it
/// either way, so as root the difference cannot be seen and the test says so (`.ci/run` runs
/// this suite as an ordinary user too).
#[test]
fn keep_dumpable_lets_the_same_user_inspect_the_server() {
    if rustix::process::geteuid().is_root() {
        testkit::not_run(
            "keep_dumpable_lets_the_same_user_inspect_the_server",
            "as root (root \
             reads every process's /proc files); the ordinary-user CI run covers it",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for (extra, readable) in [(&[][..], false), (&["--keep-dumpable"][..], true)] {
        let mut child = confine_call(tmp.path(), extra, &[]);
        let mut stdin = child.stdin.take().unwrap();
        // One answered call: the server is past its start-up by then.
        let line = json!({"id": 1, "name": "list_directory", "arguments": {"path": "."}});
        writeln!(stdin, "{line}").unwrap();
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut answer = String::new();
        std::io::BufRead::read_line(&mut reader, &mut answer).unwrap();
        let listed = std::fs::read_dir(format!("/proc/{}/fd", child.id()));
        assert_eq!(listed.is_ok(), readable, "{extra:?}: {:?}", listed.err());
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }
}

/// SIGTERM, and every other signal a person or a supervisor sends to end a server (SIGHUP,
/// SIGQUIT, SIGINT, SIGUSR1, SIGUSR2, SIGALRM), cancels the running call: its processes are
/// dead and its script removed before `confine call` exits with status 0.
#[test]
fn confine_call_ending_signals_kill_the_running_call() {
    use rustix::process::Signal;
    for signal in [
        Signal::TERM,
        Signal::HUP,
        Signal::QUIT,
        Signal::INT,
        Signal::USR1,
        Signal::USR2,
        Signal::ALARM,
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let m = marker();
        let mut child = confine_call(tmp.path(), &["--timeout-ms", "20000"], &[]);
        let line = json!({"id": 1, "name": "node_process", "arguments": {"source": with_descendants(&m, "setInterval(() => {}, 1000)")}});
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        wait_alive_blocking(&m, 2);
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let status = child.wait().unwrap();
        drop(stdin);
        assert_eq!(status.code(), Some(0), "{signal:?}");
        assert_dead(&m, &format!("confine ({signal:?})"));
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines().count();
        assert_eq!(stdout, 0, "a cancelled call answers nothing");
        assert_no_pify(tmp.path());
    }
}

/// `kill -9` of `confine call` in the middle of a call: within a second nothing the call
/// started is alive (the waiter, told by the kernel of its parent's death, ends the run); the
/// script left in the workspace is removed when a tool is next built over it.
#[test]
fn confine_call_sigkill_kills_the_call_within_a_second() {
    let tmp = tempfile::tempdir().unwrap();
    let m = marker();
    let mut child = confine_call(tmp.path(), &["--timeout-ms", "20000"], &[]);
    let line = json!({"id": 1, "name": "node_process", "arguments": {"source": with_descendants(&m, "setInterval(() => {}, 1000)")}});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    wait_alive_blocking(&m, 2);
    child.kill().unwrap();
    child.wait().unwrap();
    if let Err(left) = testkit::census::check(&m, Duration::from_secs(1)) {
        panic!("outlived the killed server by a second: {left}");
    }
    drop(stdin);
    assert_eq!(
        support::pify_entries(tmp.path()).len(),
        1,
        "the killed server's script is left"
    );
    registry(tmp.path(), None);
    assert_no_pify(tmp.path());
}

/// A flood of concurrent heavy calls through one registry with two slots: never more than two
/// Node.js processes of theirs alive at once, every call answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_process_flood_is_bounded_by_the_slots() {
    let tmp = tempfile::tempdir().unwrap();
    let mut options = marked(ToolSetOptions::default());
    options.node.timeout = Some(Duration::from_secs(20));
    options.slots = Some(std::sync::Arc::new(confine_nodeexec::RunSlots::new(2)));
    let reg = std::sync::Arc::new(confine_tools::create_coding_tools(tmp.path(), options).unwrap());
    let m = marker();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let counter = {
        let (m, peak, stop) = (m.clone(), peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                peak.fetch_max(alive(&m).len(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let source =
        "const t = Date.now(); while (Date.now() - t < 200) {} process.stdout.write('done')";
    let mut calls = Vec::new();
    for _ in 0..8 {
        let (reg, m) = (reg.clone(), m.clone());
        calls.push(tokio::spawn(async move {
            call(&reg, json!({"source": source, "arguments": [m]})).await
        }));
    }
    for c in calls {
        let (is_error, record) = c.await.unwrap();
        assert!(!is_error, "{record}");
        assert_eq!(record["stdout"], "done");
    }
    stop.cancel();
    counter.await.unwrap();
    let peak = peak.load(Ordering::Relaxed);
    assert!((1..=2).contains(&peak), "peak {peak}");
    assert_no_pify(tmp.path());
}
