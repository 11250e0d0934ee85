//! Fuzz `confine mcp` with arbitrary messages: the binary's own line bound and MCP handler
//! (`ConfineServer`, over a read-only tool set on a temporary workspace), served by rmcp over
//! an in-memory pipe, one session for the whole run as a real client would hold it.
//!
//! Each input is written as one or more lines (its own newlines cut it), followed by a `ping`
//! with a fresh id. Oracle: nothing panics (the target is built with `-Cpanic=abort`, so a
//! panic in any task ends the run); the session answers the ping (it survived whatever came
//! before); every line the server wrote is a JSON-RPC 2.0 object. The line bound is lowered
//! to 512 bytes here so that oversized messages are common.

#![no_main]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

#[path = "../../src/cli/lines.rs"]
mod lines;
#[path = "../../src/cli/mcp/server.rs"]
mod server;

use lines::MAX_LINE_BYTES;

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
        let registry = tools::create_read_only_tools(tmp.path()).unwrap();
        // One thread: the session's tasks run inside each input's `block_on`, without a
        // wake-up of another thread per message.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let handler = server::ConfineServer::new(registry, true, None);
        let io = runtime.block_on(server::test_session(handler, |read| {
            lines::BoundedLines::new(read, FUZZ_LINE_BYTES, server::too_large_stand_in)
        }));
        World {
            _tmp: tmp,
            runtime,
            io: Mutex::new(io),
            next: AtomicU64::new(0),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    let n = w.next.fetch_add(1, Ordering::Relaxed);
    let id = Value::from(format!("sync-{n}"));
    w.runtime.block_on(async {
        let mut io = w.io.lock().await;
        let (write, lines) = &mut *io;
        let ping = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
        let mut bytes = data.to_vec();
        bytes.extend_from_slice(format!("\n{ping}\n").as_bytes());
        write.write_all(&bytes).await.unwrap();
        tokio::time::timeout(Duration::from_secs(20), server::until_id(lines, &id))
            .await
            .expect("the session answers a ping after any input")
            .expect("every line is JSON-RPC 2.0 and the session goes on");
    });
});
