//! run_command's progress over MCP, judged by the official MCP TypeScript SDK client
//! (`tests/interop/progress.mjs`): `onprogress` receives notifications about once a second
//! while a command runs, with elapsed milliseconds and the last line, and none after the
//! result; and a real npm project's `npm test` (`node --test`, one failing test) run the
//! same way, its summary and exit status in the result; and a long, noisy command cancelled
//! mid-run through the SDK's `AbortController`, every process it started gone afterwards.

use std::path::Path;

use serde_json::Value;

#[test]
fn the_typescript_sdk_client_receives_run_command_progress() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    // Never a silent pass: without the client this test cannot judge, so it fails.
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "tests/interop/node_modules is missing: run `npm ci` in tests/interop first"
    );
    let workspace = tempfile::tempdir().unwrap();
    #[allow(clippy::disallowed_methods)] // reason: the test runs the interop client script
    let output = std::process::Command::new("node")
        .arg("progress.mjs")
        .arg(env!("CARGO_BIN_EXE_confine"))
        .arg(workspace.path())
        .current_dir(&dir)
        .output()
        .expect("run node tests/interop/progress.mjs (is Node.js installed?)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("progress.mjs prints a JSON summary ({e}):\n{stdout}\n{stderr}")
    });
    assert!(
        output.status.success() && summary["ok"] == true,
        "the TypeScript SDK client found failures:\n{}\nstderr:\n{stderr}",
        serde_json::to_string_pretty(&summary).unwrap_or_default()
    );
    assert_eq!(summary["passed"], 13, "{summary}");
}
