//! Background jobs through the tools and through the binary: `run_command {…, background:
//! true}` answers `{jobId, command}` at once, `job_output` hands over what was written since
//! the previous one (64 KiB unread per stream at most, exact `*Dropped` counts, never a split
//! character), `job_stop` kills the job and everything it started, `job_list` lists them; the
//! bounds at N and N+1 (`--max-jobs`, `waitMs`, the 16 ended jobs kept), a job's own time
//! bound, jobs that do not take run slots, one loopback shared with later runs, and jobs that
//! never outlive their server (its registry dropped, its input ended, its SIGKILL), each
//! checked by a mark on the host's process table.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use confine_tools::{
    RunCommandOptions, ToolCall, ToolRegistry, ToolSetOptions, execute_tool_call_record,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support;
use support::{assert_dead, census_flags, marked, marker, spawn_call};

/// Far above anything these tests wait for.
const LONG: Duration = Duration::from_secs(60);

fn options(adjust: impl FnOnce(&mut RunCommandOptions)) -> ToolSetOptions {
    let mut commands = RunCommandOptions::default();
    commands.timeout = Some(LONG);
    commands.max_timeout = Some(Duration::from_secs(600));
    adjust(&mut commands);
    let mut options = ToolSetOptions::default();
    options.commands = Some(commands);
    marked(options)
}

fn registry(root: &Path, adjust: impl FnOnce(&mut RunCommandOptions)) -> ToolRegistry {
    confine_tools::create_workspace_tools(root, options(adjust))
        .expect("tools over a fresh directory")
}

async fn call(registry: &ToolRegistry, name: &str, arguments: Value) -> (bool, Value) {
    let call = ToolCall::new("t", name, &arguments);
    let (record, is_error) = execute_tool_call_record(registry, &call, &CancellationToken::new())
        .await
        .expect("not cancelled");
    (is_error, record)
}

/// Start `command` as a job; its id.
async fn start(registry: &ToolRegistry, command: &str) -> String {
    let (is_error, record) = call(
        registry,
        "run_command",
        json!({"command": command, "background": true}),
    )
    .await;
    assert!(!is_error, "{record}");
    assert_eq!(record["command"], command, "{record}");
    assert_eq!(record.as_object().unwrap().len(), 2, "{record}");
    record["jobId"].as_str().expect("a job id").to_owned()
}

/// The job's line in `job_list`.
async fn listed(registry: &ToolRegistry, id: &str) -> Option<Value> {
    let (is_error, record) = call(registry, "job_list", json!({})).await;
    assert!(!is_error, "{record}");
    record["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jobId"] == id)
        .cloned()
}

/// Wait (bounded) until `job_list` no longer shows the job running; its status.
async fn ended(registry: &ToolRegistry, id: &str) -> String {
    let until = Instant::now() + LONG;
    loop {
        let line = listed(registry, id).await.expect("listed");
        if line["status"] != "running" {
            return line["status"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < until, "job {id} still running: {line}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn error_code(record: &Value) -> &str {
    record["error"]["message"].as_str().unwrap_or_default()
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_printing_job_is_polled_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path(), |_| {});
    let id = start(
        &registry,
        "for i in 1 2 3 4 5; do echo line $i; echo warn $i >&2; sleep 0.1; done; exit 3",
    )
    .await;
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let mut last = Value::Null;
    for _ in 0..200 {
        let (is_error, record) = call(
            &registry,
            "job_output",
            json!({"jobId": id, "waitMs": 2000}),
        )
        .await;
        assert!(!is_error, "{record}");
        let keys: Vec<&str> = record.as_object().unwrap().keys().map(|k| &**k).collect();
        assert_eq!(
            keys,
            [
                "jobId",
                "status",
                "exitCode",
                "signal",
                "stdout",
                "stderr",
                "stdoutDropped",
                "stderrDropped",
                "durationMs"
            ]
        );
        stdout += record["stdout"].as_str().unwrap();
        stderr += record["stderr"].as_str().unwrap();
        assert_eq!(record["stdoutDropped"], 0);
        assert_eq!(record["stderrDropped"], 0);
        last = record;
        if last["status"] != "running" {
            break;
        }
        assert_eq!(last["exitCode"], Value::Null);
    }
    assert_eq!(last["status"], "exited", "{last}");
    assert_eq!(last["exitCode"], 3, "{last}");
    assert_eq!(last["signal"], Value::Null, "{last}");
    let expected = |w: &str| (1..=5).map(|i| format!("{w} {i}\n")).collect::<String>();
    assert_eq!(stdout, expected("line"));
    assert_eq!(stderr, expected("warn"));
    // Once read, nothing is handed over twice; the end stays.
    let (_, again) = call(&registry, "job_output", json!({"jobId": id})).await;
    assert_eq!(
        (again["stdout"].as_str(), again["status"].as_str()),
        (Some(""), Some("exited"))
    );
    let line = listed(&registry, &id).await.unwrap();
    assert_eq!(line["status"], "exited");
    assert!(
        line["command"].as_str().unwrap().starts_with("for i"),
        "{line}"
    );
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_megabyte_of_output_keeps_the_newest_64_kib_whole_characters_and_exact_counts() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path(), |_| {});
    // stdout: 524,288 two-byte characters then one byte (1,048,577 bytes): the newest 65,536
    // bytes would begin in the middle of a character, so 65,535 are kept. stderr: exactly
    // 1 MiB of ASCII, the newest 65,536 kept.
    let id = start(
        &registry,
        "yes é | head -n 524288 | tr -d '\\n'; printf x; head -c 1048576 /dev/zero | tr '\\0' e >&2",
    )
    .await;
    assert_eq!(ended(&registry, &id).await, "exited");
    let (_, record) = call(&registry, "job_output", json!({"jobId": id})).await;
    let stdout = record["stdout"].as_str().unwrap();
    assert_eq!(stdout.len(), 65_535);
    assert_eq!(stdout, format!("{}x", "é".repeat(32_767)));
    assert_eq!(record["stdoutDropped"], 1_048_577 - 65_535);
    let stderr = record["stderr"].as_str().unwrap();
    assert_eq!(stderr, "e".repeat(65_536));
    assert_eq!(record["stderrDropped"], 1_048_576 - 65_536);
    assert_eq!(record["exitCode"], 0);
    // Counted since the previous job_output: nothing more went.
    let (_, record) = call(&registry, "job_output", json!({"jobId": id})).await;
    assert_eq!(
        (
            &record["stdout"],
            &record["stdoutDropped"],
            &record["stderrDropped"]
        ),
        (&json!(""), &json!(0), &json!(0))
    );
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_max_jobs_run_at_once_and_they_take_no_run_slot() {
    let dir = tempfile::tempdir().unwrap();
    let m = marker();
    let mut options = options(|c| c.max_jobs = Some(2));
    // One run slot only: a running job must not hold it.
    options.slots = Some(Arc::new(confine_nodeexec::RunSlots::new(1)));
    let registry = confine_tools::create_workspace_tools(dir.path(), options).unwrap();
    let sleeper = format!("sleep 60; : {m}");
    let first = start(&registry, &sleeper).await;
    let second = start(&registry, &sleeper).await;
    // N + 1.
    let (is_error, record) = call(
        &registry,
        "run_command",
        json!({"command": sleeper, "background": true}),
    )
    .await;
    assert!(is_error, "{record}");
    assert_eq!(error_code(&record), "JOB_LIMIT_REACHED", "{record}");
    // A run still runs at once beside two jobs, with one slot.
    let (is_error, record) = call(&registry, "run_command", json!({"command": "echo ran"})).await;
    assert!(!is_error, "{record}");
    assert_eq!(record["stdout"], "ran\n");
    // A stopped job frees its place.
    let (is_error, record) = call(&registry, "job_stop", json!({"jobId": first})).await;
    assert!(!is_error, "{record}");
    assert_eq!(record["status"], "killed", "{record}");
    assert_eq!(record["signal"], "SIGKILL", "{record}");
    assert_eq!(record["exitCode"], Value::Null, "{record}");
    let third = start(&registry, &sleeper).await;
    assert_ne!(third, first);
    assert_ne!(third, second);
    for id in [&second, &third] {
        let (_, record) = call(&registry, "job_stop", json!({"jobId": id})).await;
        assert_eq!(record["status"], "killed", "{record}");
    }
    // Stopping again answers the same end (idempotent).
    let (is_error, record) = call(&registry, "job_stop", json!({"jobId": first})).await;
    assert!(!is_error, "{record}");
    assert_eq!(record["status"], "killed", "{record}");
    assert_dead(&m, "job_stop");
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_stop_kills_everything_the_job_started() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path(), |_| {});
    let m = marker();
    let id = start(
        &registry,
        &format!(
            "(setsid sh -c 'sleep 60; : {m}' &); sh -c 'sleep 60; : {m}' & echo up; sleep 60; : {m}"
        ),
    )
    .await;
    let (_, record) = call(
        &registry,
        "job_output",
        json!({"jobId": id, "waitMs": 10000}),
    )
    .await;
    assert_eq!(record["stdout"], "up\n", "{record}");
    support::wait_alive_blocking(&m, 3);
    let (_, record) = call(&registry, "job_stop", json!({"jobId": id})).await;
    assert_eq!(record["status"], "killed", "{record}");
    assert_dead(&m, "job_stop of a job with descendants");
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_has_its_own_time_bound() {
    let dir = tempfile::tempdir().unwrap();
    let m = marker();
    let sleeper = format!("echo started; sleep 60; : {m}");
    // timeoutMs of the call.
    let registry_a = registry(dir.path(), |_| {});
    let (is_error, record) = call(
        &registry_a,
        "run_command",
        json!({"command": sleeper, "background": true, "timeoutMs": 300}),
    )
    .await;
    assert!(!is_error, "{record}");
    let id = record["jobId"].as_str().unwrap().to_owned();
    assert_eq!(ended(&registry_a, &id).await, "timedOut");
    let (_, record) = call(&registry_a, "job_output", json!({"jobId": id})).await;
    assert_eq!(record["signal"], "SIGKILL", "{record}");
    assert_eq!(record["stdout"], "started\n", "{record}");
    assert!(record["durationMs"].as_u64().unwrap() >= 300, "{record}");
    // The job bound of the options, when the call names none.
    let registry_b = registry(dir.path(), |c| {
        c.job_timeout = Some(Duration::from_millis(300))
    });
    let id = start(&registry_b, &sleeper).await;
    assert_eq!(ended(&registry_b, &id).await, "timedOut");
    // Lowered to the command maximum.
    let registry_c = registry(dir.path(), |c| {
        c.job_timeout = Some(Duration::from_secs(3600));
        c.max_timeout = Some(Duration::from_millis(300));
    });
    let id = start(&registry_c, &sleeper).await;
    assert_eq!(ended(&registry_c, &id).await, "timedOut");
    // A call may not ask for more than the command maximum.
    let (is_error, record) = call(
        &registry_c,
        "run_command",
        json!({"command": sleeper, "background": true, "timeoutMs": 301}),
    )
    .await;
    assert!(is_error, "{record}");
    assert_eq!(
        error_code(&record),
        "RUN_COMMAND_TIMEOUT_OUT_OF_RANGE",
        "{record}"
    );
    assert_dead(&m, "jobs past their time bound");
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_ended_jobs_are_kept_oldest_first_out() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path(), |_| {});
    let mut ids = Vec::new();
    for i in 0..17 {
        let id = start(&registry, &format!("echo {i}")).await;
        assert_eq!(ended(&registry, &id).await, "exited");
        ids.push(id);
        // N: all kept so far.
        if i == 15 {
            let (_, list) = call(&registry, "job_list", json!({})).await;
            assert_eq!(list["jobs"].as_array().unwrap().len(), 16, "{list}");
        }
    }
    // N + 1: the oldest ended is forgotten.
    let (_, list) = call(&registry, "job_list", json!({})).await;
    let listed: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jobId"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids[1..].iter().map(|s| &**s).collect::<Vec<_>>());
    let (is_error, record) = call(&registry, "job_output", json!({"jobId": ids[0]})).await;
    assert!(is_error);
    assert_eq!(error_code(&record), "JOB_NOT_FOUND", "{record}");
    let (_, record) = call(&registry, "job_output", json!({"jobId": ids[1]})).await;
    assert_eq!(record["stdout"], "1\n", "{record}");
    let (_, record) = call(&registry, "job_output", json!({"jobId": ids[16]})).await;
    assert_eq!(record["stdout"], "16\n", "{record}");
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_arguments_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path(), |_| {});
    let id = start(&registry, "true").await;
    ended(&registry, &id).await;
    // waitMs at N answers (the job has ended: at once); N + 1 is refused.
    let (is_error, record) = call(
        &registry,
        "job_output",
        json!({"jobId": id, "waitMs": 30_000}),
    )
    .await;
    assert!(!is_error, "{record}");
    for (tool, arguments) in [
        ("job_output", json!({"jobId": id, "waitMs": 30_001})),
        ("job_output", json!({"jobId": id, "waitMs": -1})),
        ("job_output", json!({"jobId": id, "extra": 1})),
        ("job_output", json!({})),
        ("job_output", json!({"jobId": 7})),
        ("job_output", json!({"jobId": ""})),
        ("job_stop", json!({})),
        ("job_stop", json!({"jobId": id, "waitMs": 1})),
        ("job_list", json!({"jobId": id})),
    ] {
        let (is_error, record) = call(&registry, tool, arguments.clone()).await;
        assert!(is_error, "{tool} {arguments}");
        assert_eq!(
            error_code(&record),
            "INVALID_JOB_INPUT",
            "{tool} {arguments}: {record}"
        );
    }
    for tool in ["job_output", "job_stop"] {
        let (is_error, record) = call(&registry, tool, json!({"jobId": "job-999"})).await;
        assert!(is_error);
        assert_eq!(error_code(&record), "JOB_NOT_FOUND", "{tool}: {record}");
    }
    // `background` must be a boolean.
    let (is_error, record) = call(
        &registry,
        "run_command",
        json!({"command": "true", "background": "yes"}),
    )
    .await;
    assert!(is_error);
    assert_eq!(error_code(&record), "INVALID_RUN_COMMAND_INPUT", "{record}");
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_ms_returns_on_new_output_and_can_be_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path(), |_| {});
    let m = marker();
    let id = start(&registry, &format!("sleep 0.3; echo late; sleep 60; : {m}")).await;
    let began = Instant::now();
    let (_, record) = call(
        &registry,
        "job_output",
        json!({"jobId": id, "waitMs": 30_000}),
    )
    .await;
    assert_eq!(record["stdout"], "late\n", "{record}");
    assert_eq!(record["status"], "running", "{record}");
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    // A wait with nothing coming, cancelled after 200 ms.
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        canceller.cancel();
    });
    let began = Instant::now();
    let arguments = json!({"jobId": id, "waitMs": 30_000});
    let outcome = execute_tool_call_record(
        &registry,
        &ToolCall::new("t", "job_output", &arguments),
        &cancel,
    )
    .await;
    assert!(
        outcome.is_err(),
        "answered instead of cancelled: {outcome:?}"
    );
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
    // The job itself runs on.
    assert_eq!(listed(&registry, &id).await.unwrap()["status"], "running");
    drop(registry);
    testkit::census::check(&m, Duration::from_secs(5)).unwrap();
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_tools_stops_every_job() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path(), |c| c.max_jobs = Some(4));
    let m = marker();
    for _ in 0..4 {
        start(&registry, &format!("sleep 60; : {m}")).await;
    }
    support::wait_alive_blocking(&m, 4);
    drop(registry);
    testkit::census::check(&m, Duration::from_secs(5)).unwrap();
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_dev_server_is_reachable_by_later_runs() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(dir.path(), |_| {});
    let m = marker();
    // Port 0 lets the kernel choose; the server prints the port it got.
    let server = format!(
        "node -e \"require('http').createServer((q, s) => s.end('hello from the job')).listen(0, \
         '127.0.0.1', function () {{ console.log(this.address().port) }})\"; : {m}"
    );
    let id = start(&registry, &server).await;
    let mut port = String::new();
    for _ in 0..100 {
        let (_, record) = call(
            &registry,
            "job_output",
            json!({"jobId": id, "waitMs": 1000}),
        )
        .await;
        assert_eq!(record["status"], "running", "{record}");
        port += record["stdout"].as_str().unwrap();
        if port.ends_with('\n') {
            break;
        }
    }
    let port: u16 = port.trim().parse().expect("a port");
    let client = format!(
        "node -e \"fetch('http://127.0.0.1:{port}/').then(r => r.text()).then(t => console.log(t))\""
    );
    let (is_error, record) = call(&registry, "run_command", json!({"command": client})).await;
    assert!(!is_error, "{record}");
    assert_eq!(record["stdout"], "hello from the job\n", "{record}");
    let (_, record) = call(&registry, "job_stop", json!({"jobId": id})).await;
    assert_eq!(record["status"], "killed", "{record}");
    assert_dead(&m, "the dev server's job_stop");
}

/// `confine call` with commands allowed, its children marked.
fn spawn_server(root: &Path) -> std::process::Child {
    let census = census_flags();
    let mut flags = vec!["--allow-commands"];
    flags.extend(census.iter().map(|s| &**s));
    spawn_call(root, &flags)
}

fn job_line(m: &str) -> String {
    json!({"id": 1, "name": "run_command", "arguments": {"command": format!("sleep 60; : {m}"), "background": true}})
        .to_string()
        + "\n"
}

#[test]
fn jobs_end_with_the_servers_input() {
    let dir = tempfile::tempdir().unwrap();
    let m = marker();
    let mut child = spawn_server(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..2 {
        stdin.write_all(job_line(&m).as_bytes()).unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert!(line.contains("jobId"), "{line}");
    }
    support::wait_alive_blocking(&m, 2);
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    testkit::census::check(&m, Duration::from_secs(3)).unwrap();
}

#[test]
fn jobs_end_with_the_servers_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let m = marker();
    let mut child = spawn_server(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let detached =
        json!({"id": 1, "name": "run_command", "arguments": {"command": format!("(setsid sh -c 'sleep 60; : {m}' &); sleep 60; : {m}"), "background": true}})
            .to_string()
            + "\n";
    for line in [job_line(&m), detached] {
        stdin.write_all(line.as_bytes()).unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        assert!(answer.contains("jobId"), "{answer}");
    }
    support::wait_alive_blocking(&m, 3);
    child.kill().unwrap();
    child.wait().unwrap();
    // Within a second by the contract; three allow for a loaded machine.
    testkit::census::check(&m, Duration::from_secs(3)).unwrap();
}

/// `confine call --allow-commands <flags>` over `root` with `JOBS_SECRET` in its environment:
/// the answers to `lines`.
fn call_with_secret(root: &Path, flags: &[&str], lines: &[Value]) -> Vec<Value> {
    let census = census_flags();
    let mut child = support::confine()
        .args(["call", "--allow-commands", "--root"])
        .arg(root)
        .args(flags)
        .args(&census)
        .env("JOBS_SECRET", "from-the-server")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    for line in lines {
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        answers.push(serde_json::from_str(&answer).unwrap());
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    answers
}

#[test]
fn a_job_runs_under_the_sandbox_and_the_environment_allowlist_as_a_run_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, outside) = (tmp.path().join("ws"), tmp.path().join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "the secret\n").unwrap();
    let leak = outside.join("leak.txt");
    let command = format!(
        "echo \"[$JOBS_SECRET]\"; echo pwned > '{}' 2>/dev/null; cat '{}' 2>/dev/null; echo done",
        leak.display(),
        outside.join("secret.txt").display()
    );
    let lines = [
        json!({"id": 1, "name": "run_command", "arguments": {"command": command, "background": true}}),
        json!({"id": 2, "name": "job_output", "arguments": {"jobId": "job-1", "waitMs": 100}}),
    ];
    let poll = |flags: &[&str]| -> String {
        // Polled (bounded) until it has ended, in one server: answers carry what was new.
        let mut out = String::new();
        let mut all = lines.to_vec();
        for _ in 0..50 {
            all.push(json!({"id": 3, "name": "job_output", "arguments": {"jobId": "job-1", "waitMs": 200}}));
        }
        let answers = call_with_secret(&root, flags, &all);
        assert_eq!(answers[0]["content"]["jobId"], "job-1", "{answers:?}");
        for answer in answers.iter().skip(1) {
            out += answer["content"]["stdout"].as_str().unwrap();
            if answer["content"]["status"] == "exited" {
                return out;
            }
        }
        panic!("the job never ended: {out:?}");
    };
    // The naive twin: without the sandbox and with the variable passed, the probe reaches out.
    let open = poll(&["--no-sandbox", "--env", "JOBS_SECRET"]);
    assert_eq!(open, "[from-the-server]\nthe secret\ndone\n");
    assert!(leak.exists(), "the unconfined probe wrote outside");
    std::fs::remove_file(&leak).unwrap();
    // Under the sandbox and the allowlist: nothing of the outside, no variable.
    let confined = poll(&["--sandbox"]);
    assert_eq!(confined, "[]\ndone\n");
    assert!(
        !leak.exists(),
        "a sandboxed job wrote outside its workspace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_job_output_no_job_is_started() {
    let dir = tempfile::tempdir().unwrap();
    let registry =
        confine_tools::create_selected_tools(dir.path(), options(|_| {}), &["run_command"])
            .unwrap();
    let (is_error, record) = call(
        &registry,
        "run_command",
        json!({"command": "sleep 60", "background": true}),
    )
    .await;
    assert!(is_error, "{record}");
    assert_eq!(error_code(&record), "INVALID_RUN_COMMAND_INPUT", "{record}");
    let (is_error, record) = call(&registry, "run_command", json!({"command": "echo ran"})).await;
    assert!(!is_error, "{record}");
    // With job_output beside it, the same call starts a job.
    let registry = confine_tools::create_selected_tools(
        dir.path(),
        options(|_| {}),
        &["run_command", "job_output"],
    )
    .unwrap();
    start(&registry, "true").await;
}

#[test]
fn jobs_end_with_the_servers_sigterm_and_sigint() {
    use rustix::process::{Pid, Signal};
    for signal in [Signal::TERM, Signal::INT] {
        let dir = tempfile::tempdir().unwrap();
        let m = marker();
        let mut child = spawn_server(dir.path());
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdin.write_all(job_line(&m).as_bytes()).unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        assert!(answer.contains("jobId"), "{answer}");
        support::wait_alive_blocking(&m, 1);
        let pid = Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "{signal:?}: {status}");
        testkit::census::check(&m, Duration::from_secs(3)).unwrap();
        drop(stdin);
    }
}

// Multi-threaded: the jobs' tasks run while a test blocks on the process census.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_sharing_job_slots_share_the_bound_and_not_the_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let m = marker();
    let slots = Arc::new(confine_tools::JobSlots::new(2));
    let shared = || {
        let slots = slots.clone();
        registry(dir.path(), move |c| {
            // Ignored beside the shared slots: their bound is the one counted.
            c.max_jobs = Some(8);
            c.job_slots = Some(slots);
        })
    };
    let (one, two, three) = (shared(), shared(), shared());
    let sleeper = format!("sleep 60; : {m}");
    let first = start(&one, &sleeper).await;
    let second = start(&two, &sleeper).await;
    assert_ne!(
        first, second,
        "ids are unique among the sets sharing the slots"
    );
    assert_eq!(slots.running(), 2);
    // N + 1, from a third set.
    let (is_error, record) = call(
        &three,
        "run_command",
        json!({"command": sleeper, "background": true}),
    )
    .await;
    assert!(is_error, "{record}");
    assert_eq!(error_code(&record), "JOB_LIMIT_REACHED", "{record}");
    // The jobs stay each set's own.
    let (is_error, record) = call(&three, "job_output", json!({"jobId": first})).await;
    assert!(is_error, "{record}");
    assert_eq!(error_code(&record), "JOB_NOT_FOUND", "{record}");
    assert!(listed(&two, &first).await.is_none());
    // A set built without them keeps a bound of its own (its max_jobs).
    let alone = registry(dir.path(), |c| c.max_jobs = Some(1));
    let own = start(&alone, &sleeper).await;
    // Twin: the owner's drop kills its job and frees its slot for another set.
    drop(one);
    let deadline = Instant::now() + LONG;
    while slots.running() > 1 {
        assert!(
            Instant::now() < deadline,
            "the dropped set's job kept its slot"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let third = start(&three, &sleeper).await;
    for (set, id) in [(&two, &second), (&three, &third), (&alone, &own)] {
        let (_, record) = call(set, "job_stop", json!({"jobId": id})).await;
        assert_eq!(record["status"], "killed", "{record}");
    }
    assert_eq!(slots.running(), 0);
    assert_dead(&m, "job_stop");
}

/// `--max-jobs` over HTTP: one bound for the whole server. Each session, and the stateless
/// requests, have a job table of their own (a session sees, reads and stops only its own
/// jobs), but every table counts against the server's one bound.
mod over_http {
    use std::io::{Read as _, Write as _};
    use std::net::TcpStream;
    use std::path::Path;
    use std::process::Child;
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::support::{self, census_flags, confine, marker};

    const TOKEN: &str = "jobs-test-token-0b6c2f7e9d4a41c3a8e5f1d2c3b4a596";
    const PROTOCOL: &str = "2025-06-18";

    /// A running `confine mcp --http 127.0.0.1:0 --allow-commands <flags>`.
    struct Server {
        child: Child,
        port: u16,
    }

    impl Server {
        fn spawn(root: &Path, flags: &[&str]) -> Server {
            let mut server = confine();
            server
                .args(["mcp", "--root"])
                .arg(root)
                .args(["--http", "127.0.0.1:0", "--allow-commands"])
                .args(census_flags())
                .args(flags)
                .env("CONFINE_HTTP_TOKEN", TOKEN);
            let (child, port) = support::spawn_http(server);
            Server { child, port }
        }

        /// POST `message` (with the session's id, or in the stateless form): the JSON-RPC
        /// response with `id`, and the session id the answer named.
        fn post(&self, session: Option<&str>, message: &Value) -> (Value, Option<String>) {
            let stateless = message["params"]["_meta"].is_object();
            let mut head = format!(
                "POST /mcp HTTP/1.1\r\nConnection: close\r\nHost: 127.0.0.1:{}\r\n\
                 Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\n",
                self.port
            );
            if stateless {
                let name = message["params"]["name"].as_str().unwrap();
                head.push_str(&format!(
                    "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {name}\r\n"
                ));
            } else {
                head.push_str(&format!("MCP-Protocol-Version: {PROTOCOL}\r\n"));
            }
            if let Some(session) = session {
                head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
            }
            let body = message.to_string();
            head.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
            let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            stream.write_all(head.as_bytes()).unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).unwrap();
            let status = answer.split(' ').nth(1).unwrap_or_default();
            assert!(status.starts_with('2'), "{answer}");
            let session = answer
                .lines()
                .take_while(|l| !l.is_empty() && *l != "\r")
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("mcp-session-id")
                        .then(|| value.trim().to_owned())
                });
            let (head, mut rest) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
            let mut body = String::new();
            if head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked")
            {
                // Each chunk: its size in hex, CRLF, the bytes, CRLF; a size of 0 ends it.
                while let Some((size, after)) = rest.split_once("\r\n") {
                    let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                    if size == 0 || after.len() < size {
                        break;
                    }
                    body.push_str(&after[..size]);
                    rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
                }
            } else {
                body.push_str(rest);
            }
            // SSE `data:` lines, or one JSON body.
            let response = body
                .lines()
                .filter_map(|l| {
                    let l = l.trim();
                    serde_json::from_str::<Value>(l.strip_prefix("data:").unwrap_or(l).trim()).ok()
                })
                .find(|m| m["id"] == message["id"] && m.get("method").is_none())
                .unwrap_or(Value::Null);
            (response, session)
        }

        /// Open an initialized session: its id.
        fn open(&self) -> String {
            let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "tests/commands/jobs_cli.rs", "version": "0"}}});
            let (response, session) = self.post(None, &init);
            assert!(response["result"].is_object(), "{response}");
            let session = session.expect("a session id");
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            self.post(Some(&session), &note);
            session
        }

        /// Call `name` in `session`, or as a stateless request without one: the record.
        fn call(&self, session: Option<&str>, name: &str, arguments: Value) -> Value {
            let mut message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}});
            if session.is_none() {
                message["params"]["_meta"] = json!({
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}});
            }
            let (response, _) = self.post(session, &message);
            response["result"]["structuredContent"].clone()
        }

        /// Start `sleep 30` marked with `m` as a job: its id, or the refusal's token. The
        /// shell execs `sleep` with the mark in its environment: one process per job, never a
        /// forked copy of the shell holding the mark in its command line for an instant.
        fn start_job(&self, session: Option<&str>, m: &str) -> Result<String, String> {
            let record = self.call(
                session,
                "run_command",
                json!({"command": format!("JOB_MARK={m} exec sleep 30"), "background": true}),
            );
            match record["jobId"].as_str() {
                Some(id) => Ok(id.to_owned()),
                None => Err(record["error"]["message"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{record}"))
                    .to_owned()),
            }
        }

        fn stop(&self, session: Option<&str>, id: &str) {
            let record = self.call(session, "job_stop", json!({"jobId": id}));
            assert_eq!(record["status"], "killed", "{record}");
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn refused(result: Result<String, String>) {
        assert_eq!(result, Err("JOB_LIMIT_REACHED".to_owned()));
    }

    #[test]
    fn max_jobs_bounds_every_session_of_a_server_together() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::spawn(dir.path(), &["--max-jobs", "2"]);
        let m = marker();
        let [a, b, c] = [server.open(), server.open(), server.open()];
        // N: two jobs in two sessions.
        let in_a = server.start_job(Some(&a), &m).unwrap();
        let in_b = server.start_job(Some(&b), &m).unwrap();
        support::wait_alive_blocking(&m, 2);
        // N + 1, from a third session and from one that already has a job.
        refused(server.start_job(Some(&c), &m));
        refused(server.start_job(Some(&a), &m));
        assert_eq!(support::alive(&m).len(), 2, "more than 2 jobs run");
        // The bound is shared, the jobs are not: c cannot read, stop or list a's job.
        for tool in ["job_output", "job_stop"] {
            let record = server.call(Some(&c), tool, json!({"jobId": in_a}));
            assert_eq!(
                record["error"]["message"], "JOB_NOT_FOUND",
                "{tool}: {record}"
            );
        }
        let listed = server.call(Some(&c), "job_list", json!({}));
        assert_eq!(listed["jobs"], json!([]), "{listed}");
        assert_ne!(in_a, in_b, "ids are unique in the server");
        // Twin: once a's job is stopped, c's start is admitted (and is the second running).
        server.stop(Some(&a), &in_a);
        let in_c = server.start_job(Some(&c), &m).unwrap();
        refused(server.start_job(Some(&b), &m));
        server.stop(Some(&b), &in_b);
        server.stop(Some(&c), &in_c);
        drop(server);
        testkit::census::check(&m, Duration::from_secs(3)).unwrap();
    }

    #[test]
    fn max_jobs_bounds_stateless_requests_and_sessions_together() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::spawn(dir.path(), &["--max-jobs", "2"]);
        let m = marker();
        let a = server.open();
        // N: one job in a session, one stateless.
        let in_a = server.start_job(Some(&a), &m).unwrap();
        let stateless = server.start_job(None, &m).unwrap();
        support::wait_alive_blocking(&m, 2);
        // N + 1 either way.
        refused(server.start_job(None, &m));
        refused(server.start_job(Some(&a), &m));
        // A session cannot reach the stateless job, nor the stateless requests a session's.
        let record = server.call(Some(&a), "job_output", json!({"jobId": stateless}));
        assert_eq!(record["error"]["message"], "JOB_NOT_FOUND", "{record}");
        let record = server.call(None, "job_output", json!({"jobId": in_a}));
        assert_eq!(record["error"]["message"], "JOB_NOT_FOUND", "{record}");
        // Twin: a stopped session job frees a place for a stateless start.
        server.stop(Some(&a), &in_a);
        let again = server.start_job(None, &m).unwrap();
        refused(server.start_job(Some(&a), &m));
        server.stop(None, &stateless);
        server.stop(None, &again);
        drop(server);
        testkit::census::check(&m, Duration::from_secs(3)).unwrap();
    }

    /// Interactive jobs over HTTP: a terminal job's REPL answered turn by turn in a session,
    /// a pipe job's prompt answered, and both gone with `job_stop` and with the server.
    #[test]
    fn input_reaches_interactive_jobs_over_http() {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::spawn(dir.path(), &[]);
        let m = marker();
        let session = server.open();
        let s = Some(session.as_str());
        // Read the job's stdout until it holds `needle` (bounded): all of it.
        let read_until = |id: &str, mut seen: String, needle: &str| {
            for _ in 0..60 {
                if seen.contains(needle) {
                    return seen;
                }
                let record = server.call(s, "job_output", json!({"jobId": id, "waitMs": 1000}));
                seen.push_str(
                    record["stdout"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{record}")),
                );
            }
            panic!("{needle:?} never came: {seen:?}");
        };
        let turn = |id: &str, text: &str, needle: &str| {
            let record = server.call(
                s,
                "job_input",
                json!({"jobId": id, "text": text, "waitMs": 5000}),
            );
            assert_eq!(record["written"], text.len(), "{record}");
            read_until(id, record["stdout"].as_str().unwrap().to_owned(), needle)
        };
        let started = server.call(
            s,
            "run_command",
            json!({"command": format!("JOB_MARK={m} python3 -u -i -q"), "background": true,
                   "tty": {"cols": 80, "rows": 24}}),
        );
        let repl = started["jobId"].as_str().expect("a job id").to_owned();
        turn(&repl, "x = 41\n", ">>> ");
        turn(&repl, "print(x + 1)\n", "42\r\n");
        let record = server.call(
            s,
            "job_resize",
            json!({"jobId": repl, "cols": 90, "rows": 20}),
        );
        assert_eq!(record["cols"], 90, "{record}");
        turn(
            &repl,
            "import os; print(os.get_terminal_size())\n",
            "columns=90, lines=20",
        );
        let started = server.call(
            s,
            "run_command",
            json!({"command": format!("JOB_MARK={m} sh -c 'read x; echo got $x; exec sleep 60'"),
                   "background": true, "stdin": true}),
        );
        let prompt = started["jobId"].as_str().expect("a job id").to_owned();
        let seen = turn(&prompt, "hello\n", "got hello\n");
        assert_eq!(seen, "got hello\n");
        support::wait_alive_blocking(&m, 3);
        server.stop(s, &repl);
        // The prompt's job is left for the server's end.
        drop(server);
        testkit::census::check(&m, Duration::from_secs(3)).unwrap();
    }
}
