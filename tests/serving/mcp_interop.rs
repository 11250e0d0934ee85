//! `confine mcp` judged by a client nobody here wrote: the official MCP TypeScript SDK
//! (`tests/interop/client.mjs`, installed with `npm ci` in `tests/interop`, which `cargo xtask
//! test`, the README's test command, does first).
//!
//! The script lists the tools, calls each one, checks refusals are tool errors and an unknown
//! tool a protocol error, checks `--read-only`, and cancels a running `node_process` through
//! an `AbortSignal`, checking through /proc that the process is gone. It prints a JSON summary
//! and exits non-zero on any failed check.

use std::path::Path;

use serde_json::Value;

#[test]
fn mcp_interop_with_the_typescript_sdk_client() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop");
    // Never a silent pass: without the client this test cannot judge, so it fails.
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "tests/interop/node_modules is missing: run the tests with `cargo xtask test` (it runs \
         `npm ci` in tests/interop first) so that the MCP TypeScript SDK judges `confine mcp`"
    );
    #[allow(clippy::disallowed_methods)] // reason: the test runs the interop client script
    let output = std::process::Command::new("node")
        .arg("client.mjs")
        .arg(env!("CARGO_BIN_EXE_confine"))
        // The workspace set and, checkpoints being on by default, the checkpoint tools
        // (of which list and diff only read).
        .env(
            "CONFINE_EXPECT_TOOLS",
            [
                confine_cli::tools::WORKSPACE_TOOLS,
                confine_cli::tools::CHECKPOINT_TOOLS,
            ]
            .concat()
            .join(","),
        )
        .env(
            "CONFINE_EXPECT_READ_ONLY",
            confine_cli::tools::READ_ONLY_TOOLS.join(","),
        )
        .env(
            "CONFINE_EXPECT_READ_HINTED",
            [
                confine_cli::tools::READ_ONLY_TOOLS,
                &["checkpoint_list", "checkpoint_diff"],
            ]
            .concat()
            .join(","),
        )
        .current_dir(&dir)
        .output()
        .expect("run node tests/interop/client.mjs (is Node.js installed?)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("client.mjs prints a JSON summary ({e}):\n{stdout}\n{stderr}"));
    let failed: Vec<&Value> = summary["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["ok"] != true)
        .collect();
    assert!(
        output.status.success() && summary["ok"] == true && failed.is_empty(),
        "the TypeScript SDK client found failures ({}):\n{}\nstderr:\n{stderr}",
        output.status,
        serde_json::to_string_pretty(&failed).unwrap_or_default()
    );
    assert!(summary["passed"].as_u64().unwrap_or(0) >= 20, "{summary}");
}
