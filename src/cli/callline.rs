//! One `confine call` line: decoding it into a call, and writing the answer line.
//!
//! Kept apart from the reading loop (and free of I/O) so that the fuzz targets can drive
//! exactly this code.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tools::{ToolCall, ToolResult};

#[derive(Deserialize)]
struct Line {
    // Raw, so the id is echoed exactly as given (an integer beyond 64 bits included).
    id: Box<RawValue>,
    name: String,
    arguments: Box<RawValue>,
}

/// One output line: `{"id", "isError", "content"}` in that order.
#[derive(Serialize)]
struct Answer<'a> {
    id: &'a RawValue,
    #[serde(rename = "isError")]
    is_error: bool,
    content: Value,
}

/// The message of the answer to a line that is not a call.
pub const INVALID_TOOL_CALL: &str = "INVALID_TOOL_CALL";
/// The message of the answer to a line over the line bound.
pub const LINE_TOO_LONG: &str = "LINE_TOO_LONG";

/// The answer line to a line that is not a call: `id` null, code `INVALID_TOOL_CALL`.
pub fn invalid(message: &str) -> String {
    serde_json::json!({
        "id": null,
        "isError": true,
        "content": {"error": {"code": "INVALID_TOOL_CALL", "message": message}},
    })
    .to_string()
}

/// What one input line (without its newline) holds.
pub enum Decoded {
    /// Only white space: skipped, not answered.
    Blank,
    /// Not a call: the answer line.
    Invalid(String),
    /// A call, with its raw id.
    Call(Box<RawValue>, ToolCall),
}

/// Decode one line. A line that is not UTF-8, not a JSON object of exactly the call's shape,
/// or whose `arguments` is not an object, is not a call.
pub fn decode(bytes: &[u8]) -> Decoded {
    let Ok(line) = std::str::from_utf8(bytes) else {
        return Decoded::Invalid(invalid(INVALID_TOOL_CALL));
    };
    if line.trim().is_empty() {
        return Decoded::Blank;
    }
    let line = line.trim_end_matches(['\n', '\r']);
    let Ok(parsed) = serde_json::from_str::<Line>(line) else {
        return Decoded::Invalid(invalid(INVALID_TOOL_CALL));
    };
    if !line.trim_start().starts_with('{') || !parsed.arguments.get().starts_with('{') {
        return Decoded::Invalid(invalid(INVALID_TOOL_CALL));
    }
    let call = ToolCall {
        id: parsed.id.get().to_owned(),
        name: parsed.name,
        arguments: parsed.arguments,
    };
    Decoded::Call(parsed.id, call)
}

/// The answer line to a call.
pub fn answer(id: &RawValue, result: &ToolResult) -> String {
    serde_json::to_string(&Answer {
        id,
        is_error: result.is_error,
        content: result.record(),
    })
    .expect("an answer serializes")
}
