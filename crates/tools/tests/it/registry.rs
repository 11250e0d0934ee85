//! The registry and the call path.

use std::sync::Arc;

use confine_tools::{Tool, ToolRegistry};
use serde_json::json;

use crate::{Sandbox, call};

#[test]
fn registry_refuses_duplicate_names() {
    let sb = Sandbox::disk("TOP SECRET");
    let a: Arc<dyn Tool> = Arc::new(confine_tools::create_read_tool(&sb.root).unwrap());
    let b: Arc<dyn Tool> = Arc::new(confine_tools::create_read_tool(&sb.root).unwrap());
    let err = ToolRegistry::new([a, b]).unwrap_err();
    assert_eq!(err.0, "read_file");
}

#[test]
fn definitions_have_strict_schemas() {
    let sb = Sandbox::disk("TOP SECRET");
    let registry = confine_tools::create_coding_tools(&sb.root, Default::default()).unwrap();
    let defs = registry.definitions();
    let names: Vec<&str> = defs.iter().map(|d| d.name).collect();
    assert_eq!(names, ["read_file", "write_file", "node_process"]);
    for d in &defs {
        assert_eq!(d.parameters["type"], "object", "{}", d.name);
        assert_eq!(d.parameters["additionalProperties"], false, "{}", d.name);
        assert!(
            d.description.len() > 40,
            "{} needs a model-facing description",
            d.name
        );
    }
    assert_eq!(defs[0].parameters["required"], json!(["path"]));
    assert_eq!(defs[0].parameters["properties"]["path"]["type"], "string");
}

#[test]
fn unknown_tool_is_a_record() {
    let sb = Sandbox::disk("TOP SECRET");
    let registry = confine_tools::create_read_only_tools(&sb.root).unwrap();
    let r = call(&registry, "delete_everything", json!({}));
    assert!(r.is_error);
    assert_eq!(r.record()["error"]["code"], "TOOL_NOT_FOUND");
    assert!(
        r.record()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("delete_everything")
    );
    assert_eq!(r.tool_call_id, "t");
}

#[test]
fn validate_is_pure_and_refuses_shapes() {
    let sb = Sandbox::disk("TOP SECRET");
    let tool = confine_tools::create_read_tool(&sb.root).unwrap();
    let raw = |s: &str| serde_json::value::RawValue::from_string(s.to_owned()).unwrap();
    assert!(tool.validate(&raw(r#"{"path":"a"}"#)).is_ok());
    for bad in [
        r#"["a"]"#,
        r#""a""#,
        "null",
        r#"{"path":"a","x":1}"#,
        r#"{"path":"a","path":"b"}"#,
        r#"{"path":null}"#,
    ] {
        let e = tool.validate(&raw(bad)).unwrap_err();
        assert_eq!(e.kind().unwrap().code(), "INVALID_READ_INPUT", "{bad}");
    }
    let e = tool.validate(&raw(r#"{"path":"../a"}"#)).unwrap_err();
    assert_eq!(e.kind().unwrap().code(), "INVALID_RELATIVE_PATH");
}

#[test]
fn factories_refuse_unusable_roots_with_tokens() {
    let sb = Sandbox::disk("TOP SECRET");
    std::fs::write(sb.root.join("f"), "x").unwrap();
    let code =
        |r: Result<confine_tools::ReadFileTool, confine_tools::BuildError>| r.unwrap_err().code();
    assert_eq!(
        code(confine_tools::create_read_tool(sb.root.join("missing"))),
        "WORKSPACE_ROOT_NOT_FOUND"
    );
    assert_eq!(
        code(confine_tools::create_read_tool(sb.root.join("f"))),
        "WORKSPACE_ROOT_NOT_DIRECTORY"
    );
    assert_eq!(
        code(confine_tools::create_read_tool("")),
        "INVALID_WORKSPACE_ROOT"
    );
}

/// `read_file` → `ReadFileTool`.
fn type_name_for(tool: &str) -> String {
    let mut out = String::new();
    for part in tool.split('_') {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    out + "Tool"
}

/// Each tool's type is named after the tool, and every tool served has its type listed here.
#[test]
fn every_tool_type_is_named_after_its_tool() {
    fn short<T: confine_tools::TypedTool>() -> (&'static str, &'static str) {
        let full = std::any::type_name::<T>();
        (T::NAME, full.rsplit("::").next().unwrap_or(full))
    }
    let types = [
        short::<confine_tools::ReadFileTool>(),
        short::<confine_tools::WriteFileTool>(),
        short::<confine_tools::NodeProcessTool>(),
        short::<confine_tools::EditFileTool>(),
        short::<confine_tools::ReadLinesTool>(),
        short::<confine_tools::ReadMediaTool>(),
        short::<confine_tools::ListDirectoryTool>(),
        short::<confine_tools::FindFilesTool>(),
        short::<confine_tools::GrepTool>(),
        short::<confine_tools::FileInfoTool>(),
        short::<confine_tools::CreateDirectoryTool>(),
        short::<confine_tools::MoveFileTool>(),
        short::<confine_tools::DeleteFileTool>(),
        short::<confine_tools::RunCommandTool>(),
        short::<confine_tools::JobOutputTool>(),
        short::<confine_tools::JobStopTool>(),
        short::<confine_tools::JobListTool>(),
        short::<confine_tools::JobInputTool>(),
        short::<confine_tools::JobResizeTool>(),
    ];
    for (tool, ty) in types {
        assert_eq!(ty, type_name_for(tool), "the type of {tool}");
    }
    let served: Vec<&str> = confine_tools::WORKSPACE_TOOLS
        .iter()
        .chain(confine_tools::COMMAND_TOOLS)
        .copied()
        .collect();
    let mut named: Vec<&str> = types.iter().map(|(t, _)| *t).collect();
    named.sort_unstable();
    let mut served_sorted = served.clone();
    served_sorted.sort_unstable();
    assert_eq!(named, served_sorted, "every tool served has its type here");
}
