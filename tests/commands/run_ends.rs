//! A call ends with its program, through the tools: `run_command` answers when its shell
//! exits and `node_process` when its script does, whatever they left holding their output (a
//! descendant on stdout, one on stderr, one in its own session), with the program's own exit
//! status (0, 1, 3, 255, or a signal), `timedOut: false`, and nothing left alive. Before, such
//! a call waited for its whole time bound and reported a timeout (`NODE_PROCESS_TIMEOUT` for a
//! script that had exited 0).

use std::path::Path;
use std::time::{Duration, Instant};

use confine_tools::{RunCommandOptions, ToolCall, ToolRegistry, ToolSetOptions, execute_tool_call};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;
use support::{assert_dead, marked, marker};

/// Time bounds far above the answer these tests expect (about 100 ms after the exit).
const BOUND_MS: u64 = 30_000;

fn registry(root: &Path) -> ToolRegistry {
    let mut commands = RunCommandOptions::default();
    commands.timeout = Some(Duration::from_millis(BOUND_MS));
    let mut options = ToolSetOptions::default();
    options.commands = Some(commands);
    options.node.timeout = Some(Duration::from_millis(BOUND_MS));
    confine_tools::create_workspace_tools(root, marked(options))
        .expect("tools over a fresh directory")
}

async fn call(registry: &ToolRegistry, name: &str, arguments: Value) -> (bool, Value, Duration) {
    let call = ToolCall::new("t", name, &arguments);
    let start = Instant::now();
    let result = execute_tool_call(registry, &call, &CancellationToken::new())
        .await
        .expect("not cancelled");
    (result.is_error, result.record(), start.elapsed())
}

#[tokio::test]
async fn run_command_answers_when_its_shell_exits() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
    let holders = [
        ("stdout", "sh -c 'sleep 60; : {m}' 2>/dev/null &"),
        ("stderr", "sh -c 'sleep 60; : {m}' >/dev/null &"),
        ("session", "(setsid sh -c 'sleep 60; : {m}' &);"),
    ];
    for (what, holder) in holders {
        for code in [0, 1, 3, 255] {
            let m = marker();
            let command = format!(
                "{} echo spawned; echo warned >&2; exit {code}",
                holder.replace("{m}", &m)
            );
            let (is_error, record, took) =
                call(&registry, "run_command", json!({"command": command})).await;
            assert!(!is_error, "{what} {code}: {record}");
            assert_eq!(record["exitCode"], code, "{what}: {record}");
            assert_eq!(record["signal"], Value::Null, "{what}: {record}");
            assert_eq!(record["timedOut"], false, "{what}: {record}");
            assert_eq!(record["stdout"], "spawned\n", "{what}: {record}");
            assert_eq!(record["stderr"], "warned\n", "{what}: {record}");
            assert!(took < Duration::from_secs(10), "{what} {code}: {took:?}");
            assert_dead(&m, &format!("run_command whose {what} was held"));
        }
    }
    let m = marker();
    let command = format!("(setsid sh -c 'sleep 60; : {m}' &); echo spawned; kill -KILL $$");
    let (_, record, took) = call(&registry, "run_command", json!({"command": command})).await;
    assert_eq!(record["exitCode"], Value::Null, "{record}");
    assert_eq!(record["signal"], "SIGKILL", "{record}");
    assert_eq!(record["timedOut"], false, "{record}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_dead(&m, "run_command killed by a signal");
}

#[tokio::test]
async fn node_process_answers_when_its_script_exits() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path());
    let holders = [
        ("stdout", "['ignore', 'inherit', 'ignore']", false),
        ("stderr", "['ignore', 'ignore', 'inherit']", false),
        ("session", "'inherit'", true),
    ];
    for (what, stdio, detached) in holders {
        for code in [0, 1, 3, 255] {
            let m = marker();
            let source = format!(
                "require('child_process').spawn(process.execPath,
                    ['-e', 'setInterval(() => {{}}, 1000)', '{m}'],
                    {{ stdio: {stdio}, detached: {detached} }}).unref();
                 console.log('spawned'); process.exitCode = {code};"
            );
            let (is_error, record, took) =
                call(&registry, "node_process", json!({"source": source})).await;
            assert!(
                took < Duration::from_secs(10),
                "{what} {code}: {took:?} {record}"
            );
            // A script's exit status is data, whatever it is.
            assert!(!is_error, "{what} {code}: {record}");
            assert_eq!(record["exitCode"], code, "{what}: {record}");
            assert_eq!(record["timedOut"], false, "{what}: {record}");
            assert_eq!(record["stdout"], "spawned\n", "{what}: {record}");
            assert_dead(&m, &format!("node_process whose {what} was held"));
        }
    }
}
