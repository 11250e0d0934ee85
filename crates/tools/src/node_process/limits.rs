//! The limits on `node_process`'s arguments, all checked before any effect, in this order:
//! the source's size, the number of arguments, NUL in one, each one's size, their total size,
//! and the Windows command line they would make (the reference's ceiling, see the module
//! docs).

use super::winquote::windows_command_line_units;
use super::{NodeInput, NodeProcessTool, script::script_name};
use crate::error::{ErrorKind, ToolError};

/// The most UTF-8 bytes of source.
pub const MAX_SOURCE_BYTES: usize = 32_768;
/// The most arguments.
pub const MAX_ARGUMENTS: usize = 32;
/// The most UTF-8 bytes of one argument.
pub const MAX_ARGUMENT_BYTES: usize = 2_048;
/// The most UTF-8 bytes of all arguments together.
pub const MAX_ARGUMENTS_TOTAL_BYTES: usize = 8_192;
/// The most UTF-16 units of the Windows command line.
pub const MAX_WINDOWS_COMMAND_LINE_UNITS: usize = 30_000;

impl NodeProcessTool {
    /// The argument limits, in order: source, count, NUL, each size, total, Windows.
    pub(super) fn check_limits(&self, input: &NodeInput) -> Result<(), ToolError> {
        let invalid = |k| Err(ToolError::invalid(k));
        if input.source.len() > MAX_SOURCE_BYTES {
            return invalid(ErrorKind::NodeSourceTooLarge);
        }
        if input.arguments.len() > MAX_ARGUMENTS {
            return invalid(ErrorKind::TooManyNodeArguments);
        }
        if input.arguments.iter().any(|a| a.contains('\0')) {
            return invalid(ErrorKind::InvalidNodeProcessInput);
        }
        if input.arguments.iter().any(|a| a.len() > MAX_ARGUMENT_BYTES) {
            return invalid(ErrorKind::NodeArgumentTooLarge);
        }
        if input.arguments.iter().map(String::len).sum::<usize>() > MAX_ARGUMENTS_TOTAL_BYTES {
            return invalid(ErrorKind::NodeArgumentsTooLarge);
        }
        if self.command_line_units(&input.arguments) > MAX_WINDOWS_COMMAND_LINE_UNITS {
            return invalid(ErrorKind::NodeArgumentsTooLarge);
        }
        Ok(())
    }

    /// The UTF-16 length of `"<node>" "<root>/.pify-node-<owner>-<uuid>.cjs" -- <arguments…>`.
    fn command_line_units(&self, arguments: &[String]) -> usize {
        let node = self.node.to_string_lossy();
        let script = self
            .children
            .root()
            .canonical()
            .join(script_name(uuid::Uuid::nil()))
            .to_string_lossy()
            .into_owned();
        let head = [node.as_ref(), script.as_str(), "--"];
        windows_command_line_units(head.into_iter().chain(arguments.iter().map(String::as_str)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use confine_rootid::WorkspaceRoot;

    use super::*;
    use crate::node_process::NodeRun;
    use crate::tool::{TypedTool, parse_arguments};
    use crate::workspace::{ToolSetOptions, Workspace};

    fn tool() -> (tempfile::TempDir, NodeProcessTool) {
        let tmp = tempfile::tempdir().unwrap();
        let root = Arc::new(WorkspaceRoot::capture(tmp.path()).unwrap());
        (
            tmp,
            NodeProcessTool::new(&Workspace::with_defaults(root), &ToolSetOptions::default())
                .unwrap(),
        )
    }

    fn check(tool: &NodeProcessTool, json: serde_json::Value) -> Result<NodeRun, ToolError> {
        let raw = serde_json::value::to_raw_value(&json).unwrap();
        let input = parse_arguments::<NodeInput>(&raw, ErrorKind::InvalidNodeProcessInput)?;
        tool.check(input)
    }

    fn token(r: Result<NodeRun, ToolError>) -> &'static str {
        match r {
            Ok(_) => "OK",
            Err(e) => e.kind().map_or("?", ErrorKind::code),
        }
    }

    #[test]
    fn check_shapes() {
        let (_t, tool) = tool();
        let cases = [
            (serde_json::json!({"source": ""}), "OK"),
            (serde_json::json!({"source": "", "arguments": []}), "OK"),
            (
                serde_json::json!({"source": "", "arguments": null}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (
                serde_json::json!({"source": null}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (serde_json::json!({}), "INVALID_NODE_PROCESS_INPUT"),
            (
                serde_json::json!({"source": "", "extra": 1}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (
                serde_json::json!({"source": "", "arguments": [1]}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (
                serde_json::json!({"source": "", "arguments": "a"}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (
                serde_json::json!({"source": "", "arguments": ["a\u{0}b"]}),
                "INVALID_NODE_PROCESS_INPUT",
            ),
            (serde_json::json!(["source"]), "INVALID_NODE_PROCESS_INPUT"),
        ];
        for (json, want) in cases {
            assert_eq!(token(check(&tool, json.clone())), want, "{json}");
        }
        let raw = serde_json::value::RawValue::from_string(r#"{"source":"","source":""}"#.into())
            .unwrap();
        assert!(parse_arguments::<NodeInput>(&raw, ErrorKind::InvalidNodeProcessInput).is_err());
    }

    #[test]
    fn check_limits_at_n_and_n_plus_one() {
        let (_t, tool) = tool();
        let src = |n: usize| serde_json::json!({"source": "x".repeat(n)});
        assert_eq!(token(check(&tool, src(MAX_SOURCE_BYTES))), "OK");
        assert_eq!(
            token(check(&tool, src(MAX_SOURCE_BYTES + 1))),
            "NODE_SOURCE_TOO_LARGE"
        );
        let args = |v: Vec<String>| serde_json::json!({"source": "", "arguments": v});
        assert_eq!(token(check(&tool, args(vec!["a".into(); 32]))), "OK");
        assert_eq!(
            token(check(&tool, args(vec!["a".into(); 33]))),
            "TOO_MANY_NODE_ARGUMENTS"
        );
        assert_eq!(token(check(&tool, args(vec!["\\\"".repeat(1024)]))), "OK");
        assert_eq!(token(check(&tool, args(vec!["é".repeat(1024)]))), "OK");
        assert_eq!(
            token(check(&tool, args(vec!["a".repeat(2049)]))),
            "NODE_ARGUMENT_TOO_LARGE"
        );
        assert_eq!(token(check(&tool, args(vec!["a".repeat(2048); 4]))), "OK");
        let mut over = vec!["a".repeat(2048); 4];
        over.push("b".into());
        assert_eq!(token(check(&tool, args(over))), "NODE_ARGUMENTS_TOO_LARGE");
    }

    #[test]
    fn command_line_ceiling_is_unreachable_within_byte_limits() {
        let (_t, tool) = tool();
        // The costliest arguments the byte limits allow: backslash-quote pairs.
        let worst = vec!["\\\"".repeat(1024); 4];
        let units = tool.command_line_units(&worst);
        assert!(units < MAX_WINDOWS_COMMAND_LINE_UNITS, "{units}");
        // The count itself: 4 quoted arguments of 1024 pairs, each pair `\\\"` (4 units).
        let head = tool.command_line_units(&[]);
        assert_eq!(units, head + 4 * (1 + 2 + 4 * 1024));
    }
}
