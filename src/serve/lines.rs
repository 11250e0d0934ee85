//! Bounded JSON Lines input, shared by `confine call` and the MCP stdio transport.
//!
//! A line is held in memory only up to [`MAX_LINE_BYTES`] (its newline not counted). A longer
//! line is not buffered: from the moment it passes the bound its bytes are only scanned, with
//! constant memory, for a top-level `"id"` (so the answer can name the request it refuses),
//! and dropped up to the next newline; the stream then goes on. A client that sends 300 MB
//! without a newline costs the server one bound's worth of memory, not 300 MB.
//!
//! Why 4 MiB: the largest argument any tool accepts is a 65,536-byte text (write_file's
//! content, edit_file's texts); escaped as JSON in the worst case (every byte a `\u00XX`) that
//! is 393,216 bytes, so a call carrying several such texts fits, and so does any MCP message
//! a client has a reason to send. Beyond that a line can only be a mistake or an attack, and
//! 4 MiB per connection is a memory cost any host can pay.
//!
//! Hand-written rather than taken from a crate: tokio-util's `LinesCodec` has a maximum length
//! but buffers the line up to it as `String` and gives no hook to see the rest of an oversized
//! line (where a request's `id` may stand, after its large `params`); rmcp's own transport
//! bounds lines at 16 MiB but drops an oversized one without an answer, which leaves the
//! client waiting forever.

use serde_json::Value;

/// The longest line read, in bytes, not counting its newline.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// The longest raw `id` value kept from an oversized line.
const MAX_ID_BYTES: usize = 256;

/// What a newline (or the end of input) completed.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A line within the bound, without its newline.
    Line(Vec<u8>),
    /// A line over the bound, dropped; the top-level `id` it held, when one was found and is
    /// a JSON string or number.
    Oversized {
        /// The request id, for the answer.
        id: Option<Value>,
    },
}

/// Splits bytes into lines of at most `max` bytes; see the module docs.
#[derive(Debug)]
pub struct Framer {
    max: usize,
    line: Vec<u8>,
    over: Option<IdScan>,
}

impl Framer {
    /// A framer with the bound `max`.
    pub fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            over: None,
        }
    }

    /// Take bytes from `input` up to and including the first newline: how many were taken,
    /// and the frame a newline completed.
    pub fn push(&mut self, input: &[u8]) -> (usize, Option<Frame>) {
        let newline = input.iter().position(|&b| b == b'\n');
        let taken = newline.map_or(input.len(), |i| i + 1);
        let body = &input[..newline.unwrap_or(input.len())];
        match &mut self.over {
            Some(scan) => scan.feed(body),
            None if self.line.len() + body.len() > self.max => {
                let mut scan = IdScan::default();
                scan.feed(&self.line);
                scan.feed(body);
                // Release the memory, not only the length.
                self.line = Vec::new();
                self.over = Some(scan);
            }
            None => self.line.extend_from_slice(body),
        }
        (taken, newline.map(|_| self.end()))
    }

    /// The end of input: the last line if it had no newline.
    pub fn finish(&mut self) -> Option<Frame> {
        (self.over.is_some() || !self.line.is_empty()).then(|| self.end())
    }

    fn end(&mut self) -> Frame {
        match self.over.take() {
            Some(scan) => Frame::Oversized { id: scan.id() },
            None => Frame::Line(std::mem::take(&mut self.line)),
        }
    }
}

/// A streaming scan of a JSON object for the raw value of its top-level `"id"` key, in
/// constant memory. It does not validate: on anything but a well-formed object it simply
/// finds nothing, or a raw value that then fails to parse.
#[derive(Debug, Default)]
struct IdScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, after `{` or `,`: the next string is a key.
    expect_key: bool,
    /// The key being read (only its first three bytes: enough to tell `id` from others).
    key: Option<Vec<u8>>,
    /// The last key read at depth 1 was `id`, and its `:` has not come yet.
    key_is_id: bool,
    /// Reading the value of a top-level `id`.
    capturing: bool,
    value: Vec<u8>,
    value_too_long: bool,
    found: Option<Vec<u8>>,
}

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.capturing {
            if self.value.len() < MAX_ID_BYTES + 1 {
                self.value.push(b);
            } else {
                self.value_too_long = true;
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.key_is_id = key == b"id";
                }
            } else if let Some(key) = self.key.as_mut()
                && key.len() < 3
            {
                key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.expect_key = false;
                    self.key = Some(Vec::with_capacity(3));
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = b == b'{';
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.expect_key = true;
            }
            b':' if self.depth == 1 && self.key_is_id => {
                self.key_is_id = false;
                self.capturing = true;
                self.value.clear();
                self.value_too_long = false;
            }
            _ => {}
        }
    }

    /// A `,` or `}` at depth 1 ended a value (the terminator is the last byte captured).
    fn end_value(&mut self) {
        if self.capturing {
            self.capturing = false;
            self.value.pop();
            if !self.value_too_long {
                self.found = Some(std::mem::take(&mut self.value));
            }
        }
    }

    /// The id, when it is a JSON string or number.
    fn id(self) -> Option<Value> {
        let raw = self.found?;
        match serde_json::from_slice::<Value>(&raw).ok()? {
            v @ (Value::String(_) | Value::Number(_)) => Some(v),
            _ => None,
        }
    }
}

/// The top-level `"id"` of a JSON object, read without parsing the whole (so it is found in a
/// message too deep to parse), when it is a JSON string or number whose value ended with a `,`
/// or the object's `}`.
pub fn top_level_id(bytes: &[u8]) -> Option<Value> {
    let mut scan = IdScan::default();
    scan.feed(bytes);
    scan.id()
}

/// Whether `bytes` nest arrays and objects deeper than `max` levels (the outermost object is
/// level 1); brackets inside strings do not count. Constant memory, one pass, stops at the
/// first level over `max`.
pub fn nests_deeper_than(bytes: &[u8], max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
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
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn frames(max: usize, input: &[u8], chunk: usize) -> Vec<Frame> {
        let mut framer = Framer::new(max);
        let mut out = Vec::new();
        for piece in input.chunks(chunk.max(1)) {
            let mut rest = piece;
            while !rest.is_empty() {
                let (n, frame) = framer.push(rest);
                rest = &rest[n..];
                out.extend(frame);
            }
        }
        out.extend(framer.finish());
        out
    }

    #[test]
    fn a_line_of_exactly_the_bound_passes_and_one_byte_more_does_not() {
        let at = vec![b'a'; 16];
        let over = vec![b'a'; 17];
        let mut input = at.clone();
        input.push(b'\n');
        input.extend_from_slice(&over);
        input.extend_from_slice(b"\nnext\n");
        assert_eq!(
            frames(16, &input, 5),
            [
                Frame::Line(at),
                Frame::Oversized { id: None },
                Frame::Line(b"next".to_vec())
            ]
        );
    }

    #[test]
    fn the_id_of_an_oversized_request_is_found_wherever_it_stands() {
        let big = "x".repeat(100);
        let cases = [
            (
                format!(r#"{{"id": 7, "params": "{big}"}}"#),
                Some(serde_json::json!(7)),
            ),
            (
                format!(r#"{{"method":"a","params":{{"id":1,"t":"{big}"}},"id":"r-9"}}"#),
                Some(serde_json::json!("r-9")),
            ),
            // An `id` inside a nested object or a string is not the request's.
            (
                format!(r#"{{"params":{{"id":1}},"s":"\"id\":3,{big}"}}"#),
                None,
            ),
            // Escaped quotes in strings do not end them.
            (
                format!(r#"{{"a":"\\\"{big}","id" : -12 }}"#),
                Some(serde_json::json!(-12)),
            ),
            // Only strings and numbers are ids.
            (format!(r#"{{"id":{{"x":1}},"p":"{big}"}}"#), None),
            (format!(r#"{{"id":null,"p":"{big}"}}"#), None),
            // Not an object at all.
            (format!(r#"["id", 1, "{big}"]"#), None),
            // An id too long to keep.
            (
                format!(r#"{{"id":"{}","p":"{big}"}}"#, "i".repeat(300)),
                None,
            ),
        ];
        for (line, id) in cases {
            assert_eq!(
                frames(32, line.as_bytes(), 7),
                [Frame::Oversized { id }],
                "{line}"
            );
        }
    }

    #[test]
    fn an_oversized_line_without_newline_ends_at_the_end_of_input() {
        assert_eq!(
            frames(4, b"ok\n0123456789", 3),
            [Frame::Line(b"ok".to_vec()), Frame::Oversized { id: None }]
        );
        assert_eq!(frames(4, b"", 3), []);
        assert_eq!(frames(4, b"ab", 3), [Frame::Line(b"ab".to_vec())]);
    }

    #[test]
    fn memory_stays_at_the_bound_while_an_oversized_line_streams_past() {
        let mut framer = Framer::new(1024);
        let chunk = vec![b'z'; 64 * 1024];
        for _ in 0..100 {
            let (n, frame) = framer.push(&chunk);
            assert_eq!((n, frame), (chunk.len(), None));
            assert!(framer.line.capacity() <= 1024);
        }
        assert_eq!(framer.push(b"\n").1, Some(Frame::Oversized { id: None }));
    }

    #[test]
    fn nesting_is_counted_outside_strings_at_the_bound_and_one_more() {
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(!nests_deeper_than(nest(128).as_bytes(), 128));
        assert!(nests_deeper_than(nest(129).as_bytes(), 128));
        let in_string = format!("{{\"a\":\"{}\\\"{}\"}}", "[".repeat(300), "{".repeat(300));
        assert!(!nests_deeper_than(in_string.as_bytes(), 2));
        assert!(nests_deeper_than(b"{\"a\":{\"b\":[1]}}", 2));
        assert!(!nests_deeper_than(b"{\"a\":{\"b\":[1]}}", 3));
    }

    #[test]
    fn the_top_level_id_is_read_from_a_message_that_does_not_parse() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","params":{}{},"id":"d-1"}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(
            top_level_id(deep.as_bytes()),
            Some(serde_json::json!("d-1"))
        );
        assert_eq!(
            top_level_id(br#"{"id": 4, "method": 7"#),
            Some(serde_json::json!(4))
        );
        // An id whose value never ended is not read.
        assert_eq!(top_level_id(br#"{"id": 4"#), None);
        assert_eq!(top_level_id(br#"{"params":{"id":4}}"#), None);
        assert_eq!(top_level_id(br#"{"id":true}"#), None);
        assert_eq!(top_level_id(b"\xff\xfe"), None);
    }

    proptest! {
        /// Whatever the input and however it is cut, lines within the bound come out whole
        /// and in order, every longer one is one `Oversized`, and nothing is lost or merged.
        #[test]
        fn framing_matches_a_plain_split(
            input in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), any::<u8>()], 0..400),
            max in 0usize..40,
            chunk in 1usize..50,
        ) {
            let mut expected: Vec<Frame> = Vec::new();
            let mut parts: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
            if parts.last().is_some_and(|p| p.is_empty()) {
                parts.pop();
            }
            for part in parts {
                expected.push(if part.len() > max {
                    Frame::Oversized { id: None }
                } else {
                    Frame::Line(part.to_vec())
                });
            }
            let got: Vec<Frame> = frames(max, &input, chunk)
                .into_iter()
                .map(|f| match f {
                    Frame::Oversized { .. } => Frame::Oversized { id: None },
                    line => line,
                })
                .collect();
            prop_assert_eq!(got, expected);
        }
    }
}
