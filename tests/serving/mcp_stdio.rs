//! `confine mcp` driven from outside: the built binary, spawned as a child and spoken to by
//! rmcp's own client over stdio.
//!
//! The tests of `write_file` and `node_process` are written to their documented contracts
//! (`docs/TOOLS.md`); those that need a working `node_process` first call [`require_node_process`], which
//! fails with a message naming the missing tool rather than an obscure assertion.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode, JsonObject,
};
use rmcp::service::{PeerRequestOptions, RoleClient, RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::support;
use support::pify_entries;

type Client = RunningService<RoleClient, ()>;

/// The built binary as a command: `confine mcp --root ROOT EXTRA…`.
fn confine_mcp(root: &Path, extra: &[&str]) -> tokio::process::Command {
    #[allow(clippy::disallowed_methods)] // reason: the test drives the built binary itself
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_confine"));
    cmd.arg("mcp").arg("--root").arg(root).args(extra);
    cmd.env("CONFINE_LOG", "warn");
    cmd
}

/// Spawn the server and initialize a client session with it.
async fn connect(root: &Path, extra: &[&str]) -> Client {
    let (transport, _stderr) = TokioChildProcess::builder(confine_mcp(root, extra))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn confine mcp");
    ().serve(transport).await.expect("initialize")
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, not {other}"),
    }
}

async fn call(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments)))
        .await
}

/// The record of a result, checked to be both the text item and `structuredContent`.
fn record(result: &CallToolResult) -> Value {
    assert_eq!(result.content.len(), 1, "one content item: {result:?}");
    let text = result.content[0].as_text().expect("a text content item");
    let from_text: Value = serde_json::from_str(&text.text).expect("the text is JSON");
    let structured = result
        .structured_content
        .clone()
        .expect("structuredContent");
    assert_eq!(
        from_text, structured,
        "text and structuredContent hold one record"
    );
    structured
}

fn is_error(result: &CallToolResult) -> bool {
    result.is_error.expect("isError is always present")
}

/// Processes whose working directory is `root` (a node_process child runs there; the server
/// itself does not), with their command lines (arguments joined by spaces).
fn processes_in(root: &Path) -> Vec<(u32, String)> {
    let root = root.canonicalize().expect("root exists");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd == root) {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            found.push((pid, cmdline.trim().to_owned()));
        }
    }
    found
}

/// Poll `check` every 10 ms until it holds or `limit` passes; the time it took.
async fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// Checks that `node_process` answers before a test relies on it, so a broken tool fails with a
/// clear message instead of a confusing downstream assertion.
async fn require_node_process(client: &Client) {
    let result = call(
        client,
        "node_process",
        json!({"source": "process.stdout.write('ok')"}),
    )
    .await
    .expect("node_process is served");
    let rec = record(&result);
    assert!(
        !is_error(&result) && rec["stdout"] == "ok",
        "this test needs a working node_process (Node.js on PATH); it answered {rec}"
    );
}

fn temp_root() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary root")
}

/// The names of a process's threads.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A session that only reads files never starts what a run needs: with the whole tool set
/// (and so the network policy) served, no proxy thread exists after reads. The namespace and
/// the proxy are made at the first run instead (`NetworkPolicy::deferred`).
#[tokio::test]
async fn mcp_a_session_of_reads_starts_no_proxy_thread() {
    let root = temp_root();
    std::fs::write(root.path().join("a.txt"), "alpha").unwrap();
    let (transport, _stderr) = TokioChildProcess::builder(confine_mcp(root.path(), &[]))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn confine mcp");
    let pid = transport.id().expect("the server's pid");
    let client: Client = ().serve(transport).await.expect("initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(
        tools.iter().any(|t| t.name == "node_process"),
        "the process tools are served, so the network policy is on"
    );
    for _ in 0..3 {
        let result = call(&client, "read_file", json!({"path": "a.txt"}))
            .await
            .expect("read_file");
        assert!(!is_error(&result), "{result:?}");
    }
    let threads = thread_names(pid);
    assert!(!threads.is_empty(), "the server's threads are readable");
    assert!(
        !threads.iter().any(|t| t == "confine-proxy"),
        "no proxy thread in a session of reads: {threads:?}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn mcp_initialize_reports_confine_and_instructions() {
    let root = temp_root();
    let client = connect(root.path(), &[]).await;
    let info = client.peer_info().expect("server info after initialize");
    let server = info.server_info.clone().expect("serverInfo");
    assert_eq!(server.name, "confine");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
    assert!(info.capabilities.tools.is_some(), "tools capability");
    let instructions = info
        .instructions
        .clone()
        .expect("instructions for the model");
    assert!(instructions.contains("workspace"), "{instructions}");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn mcp_list_gives_the_workspace_tool_set_with_closed_schemas_and_annotations() {
    let root = temp_root();
    let client = connect(root.path(), &[]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let n = confine_cli::tools::WORKSPACE_TOOLS.len();
    assert_eq!(names[..n], *confine_cli::tools::WORKSPACE_TOOLS);
    assert_eq!(names[n..], *confine_cli::tools::CHECKPOINT_TOOLS);
    assert_eq!(names[..3], ["read_file", "write_file", "node_process"]);
    for tool in &tools {
        let hints = tool.annotations.as_ref().expect("annotations");
        let read_only = confine_cli::tools::READ_ONLY_TOOLS.contains(&tool.name.as_ref())
            || ["checkpoint_list", "checkpoint_diff"].contains(&tool.name.as_ref());
        assert_eq!(hints.read_only_hint, Some(read_only), "{}", tool.name);
        assert!(hints.title.is_some(), "{}", tool.name);
        if !read_only {
            assert!(hints.destructive_hint.is_some(), "{}", tool.name);
            assert!(hints.idempotent_hint.is_some(), "{}", tool.name);
        }
    }
    let node = &tools[2].annotations.as_ref().unwrap();
    assert_eq!(node.destructive_hint, Some(true));
    assert_eq!(node.idempotent_hint, Some(false));
    for tool in &tools {
        let schema = &tool.input_schema;
        assert_eq!(schema.get("type"), Some(&json!("object")), "{}", tool.name);
        assert_eq!(
            schema.get("additionalProperties"),
            Some(&json!(false)),
            "{}",
            tool.name
        );
        assert!(
            schema.get("properties").is_some_and(Value::is_object),
            "{}",
            tool.name
        );
        assert!(
            tool.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{}",
            tool.name
        );
    }
    let required = |i: usize| tools[i].input_schema.get("required").cloned();
    assert_eq!(required(0), Some(json!(["path"])));
    assert_eq!(required(1), Some(json!(["path", "content"])));
    assert_eq!(required(2), Some(json!(["source"])));
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn mcp_read_only_lists_and_serves_the_read_only_tools_alone() {
    let root = temp_root();
    std::fs::write(root.path().join("a.txt"), "alpha").unwrap();
    let client = connect(root.path(), &["--read-only"]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, confine_cli::tools::READ_ONLY_TOOLS);
    assert!(names.contains(&"read_file"));
    for absent in ["write_file", "node_process"] {
        assert!(!names.contains(&absent), "{absent} is not read-only");
    }
    let read = call(&client, "read_file", json!({"path": "a.txt"}))
        .await
        .expect("read");
    assert_eq!(record(&read)["content"], "alpha");
    let write = call(
        &client,
        "write_file",
        json!({"path": "b.txt", "content": "x"}),
    )
    .await;
    match write {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code, ErrorCode::INVALID_PARAMS),
        other => panic!("write_file is not served read-only: {other:?}"),
    }
    assert!(!root.path().join("b.txt").exists());
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn mcp_tools_flag_serves_the_chosen_subset_in_set_order() {
    let root = temp_root();
    std::fs::write(root.path().join("a.txt"), "alpha").unwrap();
    let client = connect(root.path(), &["--tools", "write_file,read_file"]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["read_file", "write_file"]);
    match call(&client, "node_process", json!({"source": ""})).await {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code, ErrorCode::INVALID_PARAMS),
        other => panic!("node_process is not served: {other:?}"),
    }
    client.cancel().await.expect("close");
}

#[test]
fn mcp_tools_flag_refuses_an_unknown_name_and_a_writer_with_read_only() {
    let root = temp_root();
    for extra in [
        &["--tools", "read_file,rm_rf"][..],
        &["--tools", ""],
        &["--read-only", "--tools", "read_file,write_file"],
    ] {
        #[allow(clippy::disallowed_methods)] // reason: the test drives the built binary itself
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_confine"))
            .arg("mcp")
            .arg("--root")
            .arg(root.path())
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("run confine mcp");
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(out.stdout.is_empty(), "{extra:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line of reason: {stderr}");
    }
}

#[tokio::test]
async fn mcp_read_file_returns_the_record_as_text_and_structured_content() {
    let root = temp_root();
    std::fs::create_dir(root.path().join("src")).unwrap();
    std::fs::write(root.path().join("src/index.js"), "console.log('hi');\n").unwrap();
    let client = connect(root.path(), &[]).await;
    let result = call(&client, "read_file", json!({"path": "./src//index.js"}))
        .await
        .expect("read");
    assert!(!is_error(&result));
    assert_eq!(
        record(&result),
        json!({"path": "src/index.js", "content": "console.log('hi');\n", "bytes": 19})
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn mcp_refusals_are_tool_errors_with_structured_content() {
    let root = temp_root();
    let client = connect(root.path(), &[]).await;
    let cases = [
        (
            "read_file",
            json!({"path": "../etc/passwd"}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_RELATIVE_PATH",
        ),
        (
            "read_file",
            json!({"path": "/etc/passwd"}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_RELATIVE_PATH",
        ),
        (
            "read_file",
            json!({"path": "a", "extra": 1}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_READ_INPUT",
        ),
        (
            "read_file",
            json!({}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_READ_INPUT",
        ),
        (
            "read_file",
            json!({"path": "missing.txt"}),
            "TOOL_EXECUTION_FAILED",
            "FILE_NOT_FOUND",
        ),
        (
            "node_process",
            json!({"source": 1}),
            "TOOL_ARGUMENTS_INVALID",
            "INVALID_NODE_PROCESS_INPUT",
        ),
    ];
    for (tool, arguments, code, message) in cases {
        let result = call(&client, tool, arguments.clone())
            .await
            .unwrap_or_else(|e| panic!("{tool} {arguments}: a tool error, not {e:?}"));
        assert!(is_error(&result), "{tool} {arguments}");
        assert_eq!(
            record(&result),
            json!({"error": {"code": code, "message": message}}),
            "{tool} {arguments}"
        );
    }
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn mcp_unknown_tool_is_a_protocol_error() {
    let root = temp_root();
    let client = connect(root.path(), &[]).await;
    match call(&client, "rm_rf", json!({})).await {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains("rm_rf"), "{}", e.message);
        }
        other => panic!("an unknown tool is a JSON-RPC error: {other:?}"),
    }
    // The session goes on.
    let tools = client
        .list_all_tools()
        .await
        .expect("tools/list after the error");
    assert_eq!(
        tools.len(),
        confine_cli::tools::WORKSPACE_TOOLS.len() + confine_cli::tools::CHECKPOINT_TOOLS.len()
    );
    client.cancel().await.expect("close");
}

/// Needs `write_file`.
#[tokio::test]
async fn mcp_write_file_then_read_back() {
    let root = temp_root();
    let client = connect(root.path(), &[]).await;
    let result = call(
        &client,
        "write_file",
        json!({"path": "out/new.txt", "content": "héllo"}),
    )
    .await
    .expect("write");
    assert_eq!(record(&result), json!({"path": "out/new.txt", "bytes": 6}));
    assert!(!is_error(&result));
    assert_eq!(
        std::fs::read_to_string(root.path().join("out/new.txt")).unwrap(),
        "héllo"
    );
    let refused = call(
        &client,
        "write_file",
        json!({"path": "C:/x", "content": ""}),
    )
    .await
    .expect("a tool error, not a protocol error");
    assert!(is_error(&refused));
    assert_eq!(
        record(&refused),
        json!({"error": {"code": "TOOL_ARGUMENTS_INVALID", "message": "INVALID_RELATIVE_PATH"}})
    );
    let read = call(&client, "read_file", json!({"path": "out/new.txt"}))
        .await
        .expect("read");
    assert_eq!(record(&read)["content"], "héllo");
    assert!(pify_entries(root.path()).is_empty());
    client.cancel().await.expect("close");
}

/// Needs `node_process` (Node.js on PATH).
#[tokio::test]
async fn mcp_node_process_runs_in_the_root_and_reports_output() {
    let root = temp_root();
    let client = connect(root.path(), &[]).await;
    require_node_process(&client).await;
    let source = "console.log(process.cwd()); console.error(process.argv.slice(1).join(',')); process.exitCode = 3";
    let result = call(
        &client,
        "node_process",
        json!({"source": source, "arguments": ["a", "b"]}),
    )
    .await
    .expect("node_process");
    assert!(!is_error(&result), "nonzero exit is data");
    let rec = record(&result);
    let canonical = root.path().canonicalize().unwrap();
    assert_eq!(rec["stdout"], format!("{}\n", canonical.display()));
    assert_eq!(rec["stderr"], "a,b\n");
    assert_eq!(rec["exitCode"], 3);
    assert_eq!(rec["signal"], Value::Null);
    assert_eq!(rec["timedOut"], false);
    assert!(pify_entries(root.path()).is_empty());
    client.cancel().await.expect("close");
}

/// Needs `node_process`: the bound set with `--timeout-ms` is a tool error.
#[tokio::test]
async fn mcp_node_process_timeout_is_a_tool_error() {
    let root = temp_root();
    let client = connect(root.path(), &["--timeout-ms", "300"]).await;
    require_node_process(&client).await;
    let started = Instant::now();
    let result = call(
        &client,
        "node_process",
        json!({"source": "while (true) {}"}),
    )
    .await
    .expect("node_process");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered near the bound"
    );
    assert!(is_error(&result));
    assert_eq!(
        record(&result),
        json!({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "NODE_PROCESS_TIMEOUT"}})
    );
    assert!(
        processes_in(root.path()).is_empty(),
        "no process outlives the call"
    );
    client.cancel().await.expect("close");
}

/// Needs `node_process` (Node.js on PATH). `notifications/cancelled` for a running call kills its
/// process; another call running beside it is not disturbed, and the server goes on serving.
#[tokio::test]
async fn mcp_cancel_kills_the_running_node_process_and_spares_the_others() {
    let root = temp_root();
    std::fs::write(root.path().join("a.txt"), "still here").unwrap();
    let client = connect(root.path(), &["--timeout-ms", "20000"]).await;
    require_node_process(&client).await;

    // The marker arguments tell the two node processes apart in /proc.
    let spin = CallToolRequestParams::new("node_process").with_arguments(args(json!({
        "source": "while (true) {}", "arguments": ["spin-marker"]
    })));
    let handle = client
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(spin)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("send the spinning call");
    // A second, slower call that must complete despite the cancellation beside it.
    let peer = client.peer().clone();
    let sibling = tokio::spawn(async move {
        let params = CallToolRequestParams::new("node_process").with_arguments(args(json!({
            "source": "setTimeout(() => console.log('sibling done'), 3000)",
            "arguments": ["sibling-marker"]
        })));
        peer.call_tool(params).await
    });

    let root_path = root.path().to_path_buf();
    let pid_of = |marker: &str| {
        processes_in(&root_path)
            .into_iter()
            .find(|(_, cmdline)| cmdline.contains(marker))
            .map(|(pid, _)| pid)
    };
    let appeared = wait_until(Duration::from_secs(10), || {
        pid_of("spin-marker").is_some() && pid_of("sibling-marker").is_some()
    })
    .await;
    assert!(
        appeared.is_some(),
        "both node processes start: {:?}",
        processes_in(root.path())
    );
    let spin_pid = pid_of("spin-marker").expect("spinning process");
    let sibling_pid = pid_of("sibling-marker").expect("sibling process");

    // Concurrent requests are served while the node processes run.
    let read = call(&client, "read_file", json!({"path": "a.txt"}))
        .await
        .expect("read");
    assert_eq!(record(&read)["content"], "still here");

    handle
        .cancel(Some("test".into()))
        .await
        .expect("send notifications/cancelled");
    let alive = |pid: u32| processes_in(&root_path).iter().any(|(p, _)| *p == pid);
    let gone = wait_until(Duration::from_secs(2), || !alive(spin_pid)).await;
    let gone = gone
        .unwrap_or_else(|| panic!("the cancelled process dies: {:?}", processes_in(&root_path)));
    assert!(
        gone < Duration::from_millis(1000),
        "killed within a fraction of a second: {gone:?}"
    );
    assert!(
        alive(sibling_pid),
        "the sibling still runs: {:?}",
        processes_in(&root_path)
    );

    let sibling = sibling
        .await
        .expect("join")
        .expect("the sibling call completes");
    assert!(!is_error(&sibling), "{sibling:?}");
    assert_eq!(record(&sibling)["stdout"], "sibling done\n");

    let cleaned = wait_until(Duration::from_secs(2), || {
        processes_in(&root_path).is_empty() && pify_entries(&root_path).is_empty()
    })
    .await;
    assert!(
        cleaned.is_some(),
        "no process and no script left: {:?} {:?}",
        processes_in(root.path()),
        pify_entries(root.path())
    );
    // The server still answers.
    let read = call(&client, "read_file", json!({"path": "a.txt"}))
        .await
        .expect("read after");
    assert_eq!(record(&read)["content"], "still here");
    client.cancel().await.expect("close");
}

/// The raw protocol: one banner line on stderr, nothing but JSON-RPC on stdout, and end of
/// input ends the server promptly with status 0, killing a running node process (needs
/// `node_process` for the kill; the rest holds without it).
#[tokio::test]
async fn mcp_end_of_input_kills_running_calls_and_exits_cleanly() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    let root = temp_root();
    let mut child = confine_mcp(root.path(), &["--timeout-ms", "20000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = child.stderr.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "node_process", "arguments": {"source": "while (true) {}"}}}),
    ];
    for line in &lines {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    let first = stdout
        .next_line()
        .await
        .unwrap()
        .expect("initialize answer");
    let first: Value = serde_json::from_str(&first).expect("stdout carries JSON-RPC only");
    assert_eq!(first["result"]["serverInfo"]["name"], "confine");

    let root_path = root.path().to_path_buf();
    let node_started = wait_until(Duration::from_secs(5), || {
        !processes_in(&root_path).is_empty()
    })
    .await
    .is_some();

    drop(stdin);
    let started = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(3), child.wait())
        .await
        .expect("the server exits promptly at end of input")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Whatever else reached stdout is JSON-RPC.
    while let Some(line) = stdout.next_line().await.unwrap() {
        let value: Value = serde_json::from_str(&line).expect("stdout carries JSON-RPC only");
        assert_eq!(value["jsonrpc"], "2.0");
    }
    let mut err = String::new();
    stderr.read_to_string(&mut err).await.unwrap();
    let banner: Vec<&str> = err.lines().filter(|l| l.starts_with("confine ")).collect();
    assert_eq!(banner.len(), 1, "one banner line: {err}");
    assert!(banner[0].contains("mcp"), "{err}");

    assert!(
        node_started,
        "this test needs a working node_process (Node.js on PATH) to check the kill at end of input"
    );
    let gone = wait_until(Duration::from_secs(1), || {
        processes_in(&root_path).is_empty()
    })
    .await;
    assert!(
        gone.is_some(),
        "no node process outlives the server: {:?}",
        processes_in(root.path())
    );
    assert!(pify_entries(root.path()).is_empty());
}

#[tokio::test]
async fn mcp_unusable_root_exits_2_with_the_token() {
    let root = temp_root();
    let missing = root.path().join("missing");
    let out = confine_mcp(&missing, &[])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing on stdout");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("WORKSPACE_ROOT_NOT_FOUND"), "{err}");
}

/// Needs `node_process` with the kernel sandbox: `--sandbox` reaches the tool, so JavaScript
/// can write inside the workspace and not outside it (or, where the kernel cannot enforce
/// that, the call is refused with NODE_SANDBOX_UNAVAILABLE rather than run unconfined).
#[tokio::test]
async fn mcp_sandbox_flag_confines_node_writes_to_the_root() {
    let root = temp_root();
    let outside = temp_root();
    let target = outside.path().join("escaped.txt");
    let client = connect(root.path(), &["--sandbox", "--timeout-ms", "5000"]).await;
    let source = format!(
        "const fs = require('fs');\
         try {{ fs.writeFileSync({target:?}, 'x'); console.log('escaped'); }}\
         catch (e) {{ console.log('refused'); }}\
         fs.writeFileSync('inside.txt', 'y'); console.log('inside');",
        target = target.display().to_string()
    );
    let result = call(&client, "node_process", json!({"source": source}))
        .await
        .expect("node_process");
    let rec = record(&result);
    if is_error(&result) {
        assert_eq!(
            rec,
            json!({"error": {"code": "TOOL_EXECUTION_FAILED", "message": "NODE_SANDBOX_UNAVAILABLE"}})
        );
    } else {
        assert_eq!(rec["stdout"], "refused\ninside\n", "{rec}");
        assert_eq!(
            std::fs::read_to_string(root.path().join("inside.txt")).unwrap(),
            "y"
        );
    }
    assert!(!target.exists(), "nothing written outside the workspace");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn mcp_jobs_come_with_commands_annotated_and_die_when_the_input_ends() {
    let root = temp_root();
    let client = connect(root.path(), &["--allow-commands"]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let n = confine_cli::tools::WORKSPACE_TOOLS.len();
    assert_eq!(names[..n], *confine_cli::tools::WORKSPACE_TOOLS);
    let m = n + confine_cli::tools::COMMAND_TOOLS.len();
    assert_eq!(names[n..m], *confine_cli::tools::COMMAND_TOOLS);
    assert_eq!(names[m..], *confine_cli::tools::CHECKPOINT_TOOLS);
    let hints = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.annotations.clone())
            .expect("annotated")
    };
    for read_only in ["job_output", "job_list"] {
        assert_eq!(hints(read_only).read_only_hint, Some(true), "{read_only}");
    }
    let stop = hints("job_stop");
    assert_eq!(
        (
            stop.read_only_hint,
            stop.destructive_hint,
            stop.idempotent_hint
        ),
        (Some(false), Some(true), Some(true))
    );
    assert_eq!(hints("run_command").read_only_hint, Some(false));
    // Typing into a job and resizing its terminal change no file: neither read-only nor
    // destructive.
    for interactive in ["job_input", "job_resize"] {
        let h = hints(interactive);
        assert_eq!(
            (h.read_only_hint, h.destructive_hint),
            (Some(false), Some(false)),
            "{interactive}"
        );
    }
    // A job over MCP: started, polled, left running when the input ends.
    let started = call(
        &client,
        "run_command",
        json!({"command": "echo ready; exec sleep 60", "background": true}),
    )
    .await
    .expect("run_command");
    let id = record(&started)["jobId"].as_str().unwrap().to_owned();
    let output = call(&client, "job_output", json!({"jobId": id, "waitMs": 10000}))
        .await
        .expect("job_output");
    let output = record(&output);
    assert_eq!(
        (&output["status"], &output["stdout"]),
        (&json!("running"), &json!("ready\n"))
    );
    // The shell prints, then becomes `sleep 60`: wait (bounded) for the exec.
    let runs = wait_until(Duration::from_secs(10), || {
        processes_in(root.path())
            .iter()
            .any(|(_, c)| c == "sleep 60")
    })
    .await;
    assert!(
        runs.is_some(),
        "the job runs: {:?}",
        processes_in(root.path())
    );
    // An interactive job over stdio: a prompt on a terminal answered by job_input.
    let started = call(
        &client,
        "run_command",
        json!({"command": "read x; echo got $x; exec sleep 60", "background": true,
               "tty": {"cols": 80, "rows": 24}}),
    )
    .await
    .expect("run_command");
    let prompt = record(&started)["jobId"].as_str().unwrap().to_owned();
    let mut seen = String::new();
    let answered = call(
        &client,
        "job_input",
        json!({"jobId": prompt, "text": "hello\n", "waitMs": 10000}),
    )
    .await
    .expect("job_input");
    let answered = record(&answered);
    assert_eq!(answered["written"], 6, "{answered}");
    seen.push_str(answered["stdout"].as_str().unwrap());
    for _ in 0..30 {
        if seen.contains("got hello") {
            break;
        }
        let more = call(
            &client,
            "job_output",
            json!({"jobId": prompt, "waitMs": 1000}),
        )
        .await
        .expect("job_output");
        seen.push_str(record(&more)["stdout"].as_str().unwrap());
    }
    assert!(seen.contains("got hello\r\n"), "{seen:?}");
    client.cancel().await.expect("close");
    let gone = wait_until(Duration::from_secs(5), || {
        processes_in(root.path()).is_empty()
    })
    .await;
    assert!(gone.is_some(), "left: {:?}", processes_in(root.path()));
}
