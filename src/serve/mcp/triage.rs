//! What the stdio transport makes of one input line before rmcp sees it: a pure function, so
//! that every shape of malformed input gets its one answer here, whatever rmcp would do with
//! it (rmcp ignores a line that is not JSON and answers some invalid requests without their
//! id).
//!
//! - A blank line (only whitespace) is skipped without an answer, as `confine call` does.
//! - Nesting deeper than [`MAX_NESTING`] levels (the message's own object is level 1; brackets
//!   inside strings do not count) is refused with `-32600` and the top-level `id` when one
//!   can be read, before the line is parsed: it is never handed to a recursive parser.
//! - A line that is not JSON (invalid UTF-8 included) is `-32700` with `id: null`.
//! - JSON that is not a JSON-RPC 2.0 message (not an object, a batch array, `jsonrpc` other
//!   than `"2.0"`, a `method` that is not a string, `params` that are neither an object nor an
//!   array, an `id` that is neither a string nor a number, no `method` and no result) is
//!   `-32600`, with its `id` where it is a string or a number, else `null`.
//! - A notification (a `method`, no `id`) and a response from the client (`result` or
//!   `error` with an `id`) are passed on and never answered, as JSON-RPC requires.

use serde::Deserialize;
use serde_json::Value;

use crate::serve::lines::{nests_deeper_than, top_level_id};

/// The deepest nesting of arrays and objects a message may have.
pub const MAX_NESTING: usize = 128;

/// JSON-RPC: the line is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the message is not a valid request.
pub const INVALID_REQUEST: i64 = -32600;

/// What one line is.
#[derive(Debug, PartialEq)]
pub enum Triage {
    /// Only whitespace: skipped.
    Blank,
    /// A request: its id (a string or a number) and the whole message.
    Request {
        /// The client's id, answered back unchanged.
        id: Value,
        /// The parsed message.
        message: Value,
    },
    /// A notification or a response from the client: passed on, never answered.
    Unanswered(Value),
    /// Refused here: answered with this error code and message, and this id.
    Refused {
        /// The request's id, or `null`.
        id: Value,
        /// `-32700` or `-32600`.
        code: i64,
        /// A fixed message.
        message: &'static str,
    },
}

fn refused(id: Value, code: i64, message: &'static str) -> Triage {
    Triage::Refused { id, code, message }
}

/// Parse without serde_json's own recursion limit (127 levels, one fewer than ours): the
/// depth was bounded before, by [`nests_deeper_than`].
fn parse(line: &[u8]) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let value = Value::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Classify one line (without its newline); see the module docs.
pub fn triage(line: &[u8]) -> Triage {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Triage::Blank;
    }
    if nests_deeper_than(line, MAX_NESTING) {
        return refused(
            top_level_id(line).unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid request: nested deeper than 128 levels",
        );
    }
    let Ok(value) = parse(line) else {
        return refused(
            Value::Null,
            PARSE_ERROR,
            "Parse error: the message is not JSON",
        );
    };
    let Value::Object(map) = &value else {
        return refused(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: a message is one JSON object (batches are not accepted)",
        );
    };
    let id = map.get("id");
    let readable = id.filter(|id| id.is_string() || id.is_number()).cloned();
    let answer_id = readable.clone().unwrap_or(Value::Null);
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return refused(
            answer_id,
            INVALID_REQUEST,
            "Invalid request: `jsonrpc` must be \"2.0\"",
        );
    }
    match map.get("method") {
        Some(Value::String(_)) => {
            if !matches!(
                map.get("params"),
                None | Some(Value::Object(_) | Value::Array(_))
            ) {
                return refused(
                    answer_id,
                    INVALID_REQUEST,
                    "Invalid request: `params` must be an object or an array",
                );
            }
            match (id, readable) {
                (None, _) => Triage::Unanswered(value),
                (Some(_), Some(id)) => Triage::Request { id, message: value },
                (Some(_), None) => refused(
                    Value::Null,
                    INVALID_REQUEST,
                    "Invalid request: `id` must be a string or a number",
                ),
            }
        }
        Some(_) => refused(
            answer_id,
            INVALID_REQUEST,
            "Invalid request: `method` must be a string",
        ),
        None => {
            let result = map.contains_key("result");
            let error = map.contains_key("error");
            // A client's error about something we sent may carry a null id; answering it
            // would start an exchange of errors.
            if result != error && id.is_some() && (readable.is_some() || error) {
                Triage::Unanswered(value)
            } else {
                refused(answer_id, INVALID_REQUEST, "Invalid request: no `method`")
            }
        }
    }
}

/// A field of [`Envelope`]: its text when present, `null` included (serde's `Option` reads
/// `null` as absent, which the triage tells apart).
#[derive(Default)]
struct Field<'a>(Option<&'a serde_json::value::RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a serde_json::value::RawValue>::deserialize(d).map(|raw| Field(Some(raw)))
    }
}

impl Field<'_> {
    fn text(&self) -> Option<&str> {
        self.0.map(serde_json::value::RawValue::get)
    }

    fn starts_with(&self, any: &[u8]) -> bool {
        self.text()
            .and_then(|t| t.as_bytes().first())
            .is_some_and(|b| any.contains(b))
    }
}

/// The members of a message the triage looks at, each kept as the text of the line.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Field<'a>,
    #[serde(default, borrow)]
    id: Field<'a>,
    #[serde(default, borrow)]
    method: Field<'a>,
    #[serde(default, borrow)]
    params: Field<'a>,
    #[serde(default, borrow)]
    result: Field<'a>,
    #[serde(default, borrow)]
    error: Field<'a>,
}

/// What [`well_formed`] found.
#[derive(Debug, PartialEq)]
pub enum WellFormed {
    /// A request: the client's id (a string or a number), whether it is `initialize`.
    Request {
        /// The client's id, as [`triage`] would give it.
        id: Value,
        /// `method` is `initialize`.
        initialize: bool,
    },
    /// A notification other than `notifications/cancelled`.
    Notification,
}

/// The common case of [`triage`] read without building the message: a line that triage
/// would pass on as a request (`jsonrpc` written `"2.0"`, a string `method`, `params` an
/// object or an array or absent, an `id` that is a string or a number, no `result` nor
/// `error`) or as a notification (the same without `id`, and not a cancellation). `None` for
/// anything else (blank, deep, not JSON, a duplicate member, escapes in `jsonrpc`, a
/// refusal, a response, a cancellation): [`triage`] decides those, so every answer stays
/// its. The line must still be read by rmcp's types, which may refuse what this accepts.
pub fn well_formed(line: &[u8]) -> Option<WellFormed> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if nests_deeper_than(line, MAX_NESTING) {
        return None;
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    let envelope = Envelope::deserialize(&mut de).ok()?;
    de.end().ok()?;
    if envelope.jsonrpc.text() != Some("\"2.0\"")
        || !envelope.method.starts_with(b"\"")
        || !(envelope.params.0.is_none() || envelope.params.starts_with(b"{["))
        || envelope.result.0.is_some()
        || envelope.error.0.is_some()
    {
        return None;
    }
    let method: std::borrow::Cow<'_, str> = serde_json::from_str(envelope.method.text()?).ok()?;
    match envelope.id.text() {
        None if method == "notifications/cancelled" => None,
        None => Some(WellFormed::Notification),
        Some(_) if envelope.id.starts_with(b"\"-0123456789") => Some(WellFormed::Request {
            id: serde_json::from_str(envelope.id.text()?).ok()?,
            initialize: method == "initialize",
        }),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn code_and_id(line: &[u8]) -> (i64, Value) {
        match triage(line) {
            Triage::Refused { id, code, .. } => (code, id),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn every_malformed_shape_is_refused_with_its_code_and_readable_id() {
        let cases: &[(&[u8], i64, Value)] = &[
            (b"not json", PARSE_ERROR, Value::Null),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"",
                PARSE_ERROR,
                Value::Null,
            ),
            (b"\xff\xfe{}", PARSE_ERROR, Value::Null),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
                PARSE_ERROR,
                Value::Null,
            ),
            (b"{} {}", PARSE_ERROR, Value::Null),
            (b"[]", INVALID_REQUEST, Value::Null),
            (
                b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
                INVALID_REQUEST,
                Value::Null,
            ),
            (b"7", INVALID_REQUEST, Value::Null),
            (b"{\"id\":3,\"method\":\"ping\"}", INVALID_REQUEST, json!(3)),
            (
                b"{\"jsonrpc\":\"1.0\",\"id\":\"a\",\"method\":\"ping\"}",
                INVALID_REQUEST,
                json!("a"),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":7}",
                INVALID_REQUEST,
                json!(4),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"method\":7}",
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":\"x\"}",
                INVALID_REQUEST,
                json!(5),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
                INVALID_REQUEST,
                Value::Null,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}",
                INVALID_REQUEST,
                Value::Null,
            ),
            (b"{\"jsonrpc\":\"2.0\",\"id\":6}", INVALID_REQUEST, json!(6)),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{},\"error\":{}}",
                INVALID_REQUEST,
                json!(7),
            ),
        ];
        for (line, code, id) in cases {
            assert_eq!(
                code_and_id(line),
                (*code, id.clone()),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn nesting_of_128_levels_passes_and_129_is_refused_with_the_id() {
        // Build exactly: object(1) > params(2) > arguments(3) > arrays.
        let exact = |levels: usize| {
            let arrays = levels - 3;
            format!(
                r#"{{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{{"name":"x","arguments":{{"a":{}{}}}}}}}"#,
                "[".repeat(arrays),
                "]".repeat(arrays)
            )
        };
        assert!(matches!(
            triage(exact(128).as_bytes()),
            Triage::Request { id, .. } if id == json!("deep")
        ));
        assert_eq!(
            code_and_id(exact(129).as_bytes()),
            (INVALID_REQUEST, json!("deep"))
        );
        // Deep and not JSON at all is still the nesting answer, once.
        assert_eq!(code_and_id(&[b'['; 500]), (INVALID_REQUEST, Value::Null));
    }

    #[test]
    fn notifications_and_responses_are_unanswered_and_blank_lines_skipped() {
        for line in [
            &b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"[..],
            b"{\"jsonrpc\":\"2.0\",\"method\":\"anything/else\",\"params\":[1]}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}",
        ] {
            assert!(
                matches!(triage(line), Triage::Unanswered(_)),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        assert_eq!(triage(b""), Triage::Blank);
        assert_eq!(triage(b" \t\r"), Triage::Blank);
        assert!(matches!(
            triage(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}\r"),
            Triage::Request { id, .. } if id == json!(1.5)
        ));
    }

    /// Whatever the line, [`well_formed`] agrees with [`triage`] where it answers at all.
    #[test]
    fn the_fast_reading_agrees_with_the_triage() {
        let lines: &[&[u8]] = &[
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0062\",\"method\":\"initialize\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1.5e0,\"method\":\"ping\",\"params\":[]}\r",
            b"\xEF\xBB\xBF{\"method\":\"ping\",\"id\":-7,\"jsonrpc\":\"2.0\"}",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"result\":{}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":null}",
            b"{\"jsonrpc\":\"2\\u002e0\",\"id\":1,\"method\":\"ping\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
            b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
            b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} x",
            b"  ",
            b"not json",
        ];
        let mut fast = 0;
        for line in lines {
            let shown = String::from_utf8_lossy(line);
            match (well_formed(line), triage(line)) {
                (None, _) => continue,
                (
                    Some(WellFormed::Request { id, initialize }),
                    Triage::Request {
                        id: expected,
                        message,
                    },
                ) => {
                    assert_eq!(id, expected, "{shown}");
                    assert_eq!(initialize, message["method"] == "initialize", "{shown}");
                }
                (Some(WellFormed::Notification), Triage::Unanswered(message)) => {
                    assert!(message.get("id").is_none(), "{shown}");
                    assert_ne!(message["method"], "notifications/cancelled", "{shown}");
                }
                (got, expected) => panic!("{shown}: {got:?} against {expected:?}"),
            }
            fast += 1;
        }
        assert_eq!(fast, 5, "the well-formed lines are read fast");
    }
}
