//! One `confine call` line: decoding it into a call, and writing the answer line.
//!
//! Kept apart from the reading loop (and free of I/O) so that the fuzz targets can drive
//! exactly this code.

use confine_tools::{ToolCall, ToolResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;
    use tokio_util::sync::CancellationToken;

    use super::*;

    /// An answer line has exactly `id`, `isError` and `content`, and the id expected.
    fn check_answer(text: &str, id: &Value) -> Result<(), TestCaseError> {
        let v: Value = serde_json::from_str(text).expect("an answer is JSON");
        let obj = v.as_object().expect("an answer is an object");
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        prop_assert_eq!(keys, ["id", "isError", "content"]);
        prop_assert_eq!(&obj["id"], id);
        prop_assert!(obj["content"].is_object());
        Ok(())
    }

    fn line() -> impl Strategy<Value = Vec<u8>> {
        let id = prop_oneof![
            Just("1".to_owned()),
            Just("\"x\"".to_owned()),
            Just("null".to_owned()),
            Just("[1]".to_owned()),
            "[0-9]{1,20}",
        ];
        let name = prop::sample::select(vec!["read_file", "list_directory", "grep", "nope", ""]);
        let arguments = prop_oneof![
            Just("{\"path\":\"a.txt\"}".to_owned()),
            Just("{\"path\":\"../x\"}".to_owned()),
            Just("{}".to_owned()),
            Just("[]".to_owned()),
            Just("\"a\"".to_owned()),
            "\\{\"[a-z]{0,6}\":[0-9]{0,3}\\}",
        ];
        prop_oneof![
            3 => (id, name, arguments).prop_map(|(i, n, a)| {
                format!("{{\"id\":{i},\"name\":\"{n}\",\"arguments\":{a}}}").into_bytes()
            }),
            1 => proptest::collection::vec(any::<u8>(), 0..60)
                .prop_map(|b| b.into_iter().filter(|&c| c != b'\n').collect()),
            1 => "[ \t\r{}\":a-z0-9,]{0,40}".prop_map(String::into_bytes),
        ]
    }

    proptest! {
        /// The twin of the `call_lines` fuzz target's decoding half: every line that is not
        /// blank gets one answer line of exactly the answer's shape; a call's answer carries
        /// its own id, anything else `null`.
        #[test]
        fn every_line_gets_one_answer_of_the_answer_shape(lines in proptest::collection::vec(line(), 1..8)) {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
            let registry = confine_tools::create_read_only_tools(tmp.path()).unwrap();
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            for bytes in lines {
                match decode(&bytes) {
                    Decoded::Blank => {
                        prop_assert!(std::str::from_utf8(&bytes).unwrap().trim().is_empty());
                    }
                    Decoded::Invalid(text) => check_answer(&text, &Value::Null)?,
                    Decoded::Call(id, call) => {
                        let cancel = CancellationToken::new();
                        let result = runtime
                            .block_on(confine_tools::execute_tool_call(&registry, &call, &cancel))
                            .expect("never cancelled");
                        let expected: Value = serde_json::from_str(id.get()).unwrap();
                        check_answer(&answer(&id, &result), &expected)?;
                    }
                }
            }
        }
    }
}
