//! Fuzz `confine call`'s input handling: the bounded line framing and the line decoding, the
//! very modules the binary uses, driven by an arbitrary byte stream cut at arbitrary places.
//!
//! The first byte picks the line bound (0 to 255 bytes, so that oversized lines and the
//! constant-memory id scan are reached often), the second how the stream is cut. Oracle:
//! nothing panics; a line over the bound is one `Oversized` frame and never a call; every
//! other frame is answered by exactly one line that is a JSON object with exactly `id`,
//! `isError` and `content`; the `id` of an invalid line is `null`, a call's is its own; an id
//! found in an oversized line that is a JSON object is the one serde sees. Calls run against
//! a read-only tool set over a temporary workspace.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use confine_cli::serve::callline::{Decoded, answer, decode};
use confine_cli::serve::lines::{Frame, Framer};

struct World {
    _tmp: tempfile::TempDir,
    registry: confine_tools::ToolRegistry,
    runtime: tokio::runtime::Runtime,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
        let registry = confine_tools::create_read_only_tools(tmp.path()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        World {
            _tmp: tmp,
            registry,
            runtime,
        }
    })
}

fn check_answer(text: &str, expected_id: Option<&str>) {
    let v: Value = serde_json::from_str(text).expect("an answer is JSON");
    let obj = v.as_object().expect("an answer is an object");
    let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    assert_eq!(keys, ["id", "isError", "content"]);
    match expected_id {
        None => assert_eq!(obj["id"], Value::Null),
        Some(raw) => assert_eq!(obj["id"], serde_json::from_str::<Value>(raw).unwrap()),
    }
    assert!(obj["content"].is_object());
}

fn handle(frame: Frame, max: usize) {
    let w = world();
    match frame {
        Frame::Line(bytes) => {
            assert!(bytes.len() <= max);
            match decode(&bytes) {
                Decoded::Blank => {}
                Decoded::Invalid(text) => check_answer(&text, None),
                Decoded::Call(id, call) => {
                    let cancel = CancellationToken::new();
                    let result = w
                        .runtime
                        .block_on(confine_tools::execute_tool_call(
                            &w.registry,
                            &call,
                            &cancel,
                        ))
                        .expect("never cancelled");
                    check_answer(&answer(&id, &result), Some(id.get()));
                }
            }
        }
        Frame::Oversized { id } => {
            if let Some(id) = id {
                assert!(id.is_string() || id.is_number());
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [max, cut, rest @ ..] = data else {
        return;
    };
    let (max, cut) = (*max as usize, (*cut as usize).max(1));
    let mut framer = Framer::new(max);
    let mut frames = Vec::new();
    for piece in rest.chunks(cut) {
        let mut piece = piece;
        while !piece.is_empty() {
            let (taken, frame) = framer.push(piece);
            assert!(taken > 0 && taken <= piece.len());
            piece = &piece[taken..];
            frames.extend(frame);
        }
    }
    frames.extend(framer.finish());

    // The frames are exactly the input's lines, each judged by its length alone.
    let mut lines: Vec<&[u8]> = rest.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    assert_eq!(frames.len(), lines.len());
    for (frame, line) in frames.iter().zip(&lines) {
        match frame {
            Frame::Line(bytes) => assert_eq!(bytes.as_slice(), *line),
            Frame::Oversized { id } => {
                assert!(line.len() > max);
                // An id the scan found in a JSON object is the object's own (the scan reads
                // keys literally, so only where no escape could spell `id` otherwise).
                if let (Some(id), false, Ok(Value::Object(obj))) = (
                    id,
                    line.contains(&b'\\'),
                    serde_json::from_slice::<Value>(line),
                ) {
                    assert_eq!(obj.get("id"), Some(id), "{}", String::from_utf8_lossy(line));
                }
            }
        }
    }
    for frame in frames {
        handle(frame, max);
    }
});
