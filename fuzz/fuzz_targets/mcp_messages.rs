//! Fuzz `confine mcp` with arbitrary messages: the binary's own stdio transport (`Gate`: line
//! bound, triage of malformed input, id mapping, bounds) and MCP handler (`ConfineServer`,
//! over a read-only tool set on a temporary workspace), served by rmcp over an in-memory
//! pipe, one session for the whole run as a real client would hold it.
//!
//! Each input is cut into lines at its newlines; the lines are written, then a `ping` with a
//! fresh id, then (once the answers are counted) a second `ping` as a barrier.
//!
//! Oracle:
//! - nothing panics (the target is built with `-Cpanic=abort`, so a panic in any task ends
//!   the run) and the session answers the pings (it survived whatever came before);
//! - every line the server wrote is a JSON-RPC 2.0 object;
//! - **every request line got exactly one answer**: the answers read up to the barrier are as
//!   many as the lines that expect one, counted here by rules of their own (below), less at
//!   most one per `notifications/cancelled` (a cancelled request is not answered).
//!
//! A line expects no answer when it is blank, or when it nests at most 128 levels, parses as
//! a JSON object with `"jsonrpc": "2.0"` and is a notification (a string `method`, no `id`,
//! `params` absent, an object or an array) or a client's response (no `method`, exactly one of
//! `result` and `error`, an `id` that is a string or a number, or any `id` with `error`).
//! Every other line, including any line over the bound, expects exactly one.
//!
//! The line bound is lowered to 512 bytes here so that oversized messages are common.

#![no_main]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde::Deserialize as _;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

use confine_cli::serve::lines::MAX_LINE_BYTES;
use confine_cli::serve::mcp::{gate, server};

/// The bound used here (the binary's is [`MAX_LINE_BYTES`]).
const FUZZ_LINE_BYTES: usize = 512;

struct World {
    _tmp: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    io: Mutex<server::TestClient>,
    next: AtomicU64,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        assert!(FUZZ_LINE_BYTES < MAX_LINE_BYTES);
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
        let registry = confine_tools::create_read_only_tools(tmp.path()).unwrap();
        // One thread: the session's tasks run inside each input's `block_on`, without a
        // wake-up of another thread per message.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let handler = server::ConfineServer::new(registry, server::Setting::default());
        let limits = gate::Limits {
            line_bytes: FUZZ_LINE_BYTES,
            ..gate::Limits::SERVED
        };
        let io = runtime.block_on(server::test_session(handler, limits));
        World {
            _tmp: tmp,
            runtime,
            io: Mutex::new(io),
            next: AtomicU64::new(0),
        }
    })
}

/// Deeper than 128 levels of `[`/`{` outside strings, counted here independently.
fn too_deep(line: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in line {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > 128 {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// What one line of input expects: `(answers, cancels)`.
fn expects(line: &[u8]) -> (usize, usize) {
    if line.len() > FUZZ_LINE_BYTES {
        return (1, 0);
    }
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return (0, 0);
    }
    if too_deep(line) {
        return (1, 0);
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let parsed = Value::deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    let Ok(Value::Object(map)) = parsed else {
        return (1, 0);
    };
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return (1, 0);
    }
    let id = map.get("id");
    let readable = id.is_some_and(|id| id.is_string() || id.is_number());
    match map.get("method") {
        Some(Value::String(method)) => {
            let params_ok = matches!(
                map.get("params"),
                None | Some(Value::Object(_) | Value::Array(_))
            );
            if params_ok && id.is_none() {
                (0, usize::from(method == "notifications/cancelled"))
            } else {
                (1, 0)
            }
        }
        Some(_) => (1, 0),
        None => {
            let (result, error) = (map.contains_key("result"), map.contains_key("error"));
            let response = result != error && id.is_some() && (readable || error);
            (usize::from(!response), 0)
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    let n = w.next.fetch_add(1, Ordering::Relaxed);
    let ping_id = Value::from(format!("sync-{n}"));
    let barrier_id = Value::from(format!("barrier-{n}"));
    let (mut answered, mut cancels) = (0, 0);
    for line in data.split(|&b| b == b'\n') {
        let (a, c) = expects(line);
        answered += a;
        cancels += c;
    }
    w.runtime.block_on(async {
        let mut io = w.io.lock().await;
        let (write, lines) = &mut *io;
        let ping = |id: &Value| {
            let message = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
            format!("\n{message}\n").into_bytes()
        };
        let mut bytes = data.to_vec();
        bytes.extend_from_slice(&ping(&ping_id));
        write.write_all(&bytes).await.unwrap();
        let mut answers = tokio::time::timeout(
            Duration::from_secs(20),
            server::answers_until(lines, &ping_id),
        )
        .await
        .expect("the session answers a ping after any input")
        .expect("every line is JSON-RPC 2.0 and the session goes on");
        // Answers of this input's calls may come after the ping's: wait for the barrier's.
        write.write_all(&ping(&barrier_id)).await.unwrap();
        let rest = tokio::time::timeout(
            Duration::from_secs(20),
            server::answers_until(lines, &barrier_id),
        )
        .await
        .expect("the session answers the barrier")
        .expect("every line is JSON-RPC 2.0");
        answers.extend(rest);
        // The two pings are answered too.
        let got = answers.len() - 2;
        assert!(
            got <= answered && got + cancels >= answered,
            "{answered} answers expected (less at most {cancels} cancelled), {got} given: \
             {answers:?}"
        );
    });
});
