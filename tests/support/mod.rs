//! Helpers shared by the top-level integration tests: the built `confine` binary, a
//! temporary workspace beside a prefix-sharing sibling, leftover `.pify-` scans, tool calls
//! from a blocking test, and the process census (`testkit::census`).
//!
//! Every suite is a module of the one test binary (`tests/tests.rs`) and reaches these as
//! `crate::support`. Every child a lifetime
//! suite starts carries the suite's census mark ([`census_env`], through [`marked`] options
//! or [`census_flags`] for `confine call`), so that `cargo xtask test` can check, once the
//! //! suites have ended, that none of them is left alive.

// Some helpers serve suites that are compiled only on some hosts; the rest would warn there.
#![allow(dead_code)]

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use confine_tools::{ToolCall, ToolRegistry, ToolResult, ToolSetOptions, execute_tool_call};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

// Re-exported for the suites that use them (not every one does).
#[allow(unused_imports)]
pub use testkit::census::{alive, wait_alive, wait_alive_blocking};

/// This suite's name in the census: `confine-<test file>`, the file of the suite that calls
/// (every suite shares one test binary, so the binary's name would not tell them apart).
#[track_caller]
pub fn suite() -> String {
    let file = std::panic::Location::caller().file();
    let stem = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("suite");
    format!("confine-{stem}")
}

/// The name libtest gives test `test` of the suite whose `module_path!()` is `module`
/// (`files::faults::test`, without the crate's name), for a suite that runs one of its own
/// tests again with `--exact`.
pub fn exact(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::{test}"),
        None => test.to_owned(),
    }
}

/// A marker for one test's descendants (see `testkit::census::unique`).
#[track_caller]
pub fn marker() -> String {
    testkit::census::unique(&suite())
}

/// The census mark every child of this suite gets: `(CONFINE_CENSUS, <suite marker>)`.
#[track_caller]
pub fn census_env() -> (String, String) {
    testkit::census::env(&suite())
}

/// `options` with the census mark added to the children's variables.
#[track_caller]
pub fn marked(mut options: ToolSetOptions) -> ToolSetOptions {
    options.env.push(census_env());
    options
}

/// The `confine call` flags that give its children the census mark.
#[track_caller]
pub fn census_flags() -> [String; 2] {
    let (name, value) = census_env();
    ["--env".to_owned(), format!("{name}={value}")]
}

/// No process holding `marker` is alive once `what` ended.
pub fn assert_dead(marker: &str, what: &str) {
    let left = testkit::census::survivors(marker);
    assert!(left.is_empty(), "outlived {what}: {left:#?}");
}

/// Call tool `name` with `arguments` from a blocking test, on `rt`; a call is never cancelled.
pub fn call_on(
    rt: &tokio::runtime::Runtime,
    registry: &ToolRegistry,
    name: &str,
    arguments: &Value,
) -> ToolResult {
    let call = ToolCall::new("t", name, arguments);
    rt.block_on(execute_tool_call(
        registry,
        &call,
        &CancellationToken::new(),
    ))
    .expect("not cancelled")
}

/// A current-thread runtime for blocking tests that make tool calls.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The built `confine` binary under test.
pub fn confine() -> Command {
    // The test drives the binary under test from outside; it is not a tool's child process.
    #[allow(clippy::disallowed_methods)]
    let mut command = Command::new(env!("CARGO_BIN_EXE_confine"));
    // Checkpoints are on by default and go under the user's state directory: the suites'
    // stores go under the build's scratch instead (a test may set its own).
    command.env(
        "XDG_STATE_HOME",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("state"),
    );
    command
}

/// `confine call --root <root> <flags>` with stdin, stdout and stderr piped.
pub fn spawn_call(root: &Path, flags: &[&str]) -> Child {
    confine()
        .args(["call", "--root"])
        .arg(root)
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `confine call --root <root> <flags>` with `input` on stdin (then closed): it must exit 0,
/// and its stdout is one JSON value a line.
pub fn call_lines(root: &Path, flags: &[&str], input: &str) -> Vec<Value> {
    finish_with_input(spawn_call(root, flags), input)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Write `input` to `child`'s piped stdin (then closed): it must exit 0; its stdout.
pub fn finish_with_input(mut child: Child, input: &str) -> String {
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Write `input` to `child`'s stdin from a thread, to kill the child mid-input: the write
/// fails with EPIPE once the child is dead, which is expected.
pub fn feed(child: &mut Child, input: String) -> JoinHandle<()> {
    let mut stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    })
}

/// SIGKILL `child`, reap it, and join its `feeder`.
pub fn kill_and_reap(mut child: Child, feeder: JoinHandle<()>) {
    child.kill().unwrap();
    child.wait().unwrap();
    feeder.join().unwrap();
}

// Re-exported for the suites that use them (not every one does).
#[allow(unused_imports)]
pub use testkit::{Sibling, assert_no_pify, pify_entries};

/// Spawn `server` (a `confine mcp --http ADDR …` command) with stderr piped and wait, at most
/// 30 s, for its `listening on http://HOST:PORT/…` line: the child and the port. stderr is
/// read to its end by a thread of its own, so the server never blocks on it.
pub fn spawn_http(mut server: Command) -> (Child, u16) {
    use std::io::BufRead as _;
    let mut child = server
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Some(rest) = line.strip_prefix("listening on http://") {
                let authority = rest.split('/').next().unwrap_or_default();
                let port = authority.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
                let _ = tx.send(port);
            }
            line.clear();
        }
    });
    let port: u16 = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .ok()
        .flatten()
        .expect("the server's listening line");
    (child, port)
}

/// Whether this process holds `CAP_SYS_ADMIN` (bit 21 of `CapEff` in `/proc/self/status`):
/// false in the container-like setup CI runs some suites in, where a test that makes that
/// setup itself cannot.
pub fn has_cap_sys_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}
