//! edit_file's diagnostics on the wire of `confine call`: the shape of the record a model
//! reads when an edit misses (`closest` and `lines` inside `error`, beside `edit`), and the
//! file untouched.

use serde_json::json;

use crate::support;
use support::call_lines;

#[test]
fn call_edit_miss_records_closest_and_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let file = "fn main() {\r\n    let a = 1;\r\n    let a = 1;\r\n}\r\n";
    std::fs::write(tmp.path().join("m.rs"), file).unwrap();
    let edit = |id: u32, edits: serde_json::Value| {
        json!({"id": id, "name": "edit_file", "arguments": {"path": "m.rs", "edits": edits}})
            .to_string()
    };
    let input = [
        edit(1, json!([{"oldText": "fn main() {\nlet a = 2;", "newText": "x"}])),
        edit(
            2,
            json!([{"oldText": "main", "newText": "run"}, {"oldText": "let a = 1;", "newText": "y"}]),
        ),
    ]
    .join("\n");
    let out = call_lines(tmp.path(), &[], &input);
    assert_eq!(out.len(), 2, "{out:#?}");
    assert_eq!(
        out[0],
        json!({"id": 1, "isError": true, "content": {"error": {
            "code": "TOOL_EXECUTION_FAILED", "message": "EDIT_TEXT_NOT_FOUND", "edit": 0,
            "closest": {"startLine": 1, "endLine": 2, "text": "fn main() {\r\n    let a = 1;",
                        "hint": "different"}}}})
    );
    // Member order on the wire: code, message, edit, then the diagnostics.
    let text = serde_json::to_string(&out[0]["content"]).unwrap();
    assert!(
        text.starts_with(
            r#"{"error":{"code":"TOOL_EXECUTION_FAILED","message":"EDIT_TEXT_NOT_FOUND","edit":0,"closest":{"startLine":1,"endLine":2,"text":"#
        ),
        "{text}"
    );
    assert_eq!(
        out[1],
        json!({"id": 2, "isError": true, "content": {"error": {
            "code": "TOOL_EXECUTION_FAILED", "message": "EDIT_TEXT_NOT_UNIQUE", "edit": 1,
            "lines": [2, 3]}}})
    );
    // Nothing applied: not the first edit of call 2, nothing by similarity.
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("m.rs")).unwrap(),
        file
    );
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["m.rs"]);
}
