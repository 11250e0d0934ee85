//! edit_file's diagnostics of a miss through `execute_tool_call`: `closest` on
//! `EDIT_TEXT_NOT_FOUND` (each hint, the text bound at N and N+1, CRLF, BOM, an empty file, a
//! file shorter than `oldText`), `lines` on `EDIT_TEXT_NOT_UNIQUE` (at N and N+1), several edits
//! in one call, and the file unchanged (bytes, inode, modification time) after every miss,
//! with and without `dryRun`.

use std::os::unix::fs::MetadataExt;

use confine_tools::ToolRegistry;
use confine_tools::limits::{MAX_CLOSEST_CHARS, MAX_OCCURRENCE_LINES};
use serde_json::{Value, json};

use crate::{Sandbox, call};

fn registry(sb: &Sandbox) -> ToolRegistry {
    confine_tools::create_selected_tools(&sb.root, Default::default(), &["edit_file"]).unwrap()
}

/// What identifies the file's state: its bytes, inode and modification time.
fn state(sb: &Sandbox, rel: &str) -> (Vec<u8>, u64, i64, i64) {
    let path = sb.root.join(rel);
    let meta = std::fs::metadata(&path).unwrap();
    (
        std::fs::read(&path).unwrap(),
        meta.ino(),
        meta.mtime(),
        meta.mtime_nsec(),
    )
}

/// Write `content` to `f.txt`, send `edits` with and without `dryRun`, check both miss with the
/// same record and leave the file as it was; return the record's error object.
fn miss(content: &str, edits: Value) -> Value {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("f.txt"), content).unwrap();
    let before = state(&sb, "f.txt");
    let mut records = Vec::new();
    for dry in [true, false] {
        let r = call(
            &reg,
            "edit_file",
            json!({"path": "f.txt", "edits": edits, "dryRun": dry}),
        );
        assert!(r.is_error, "expected a miss: {}", r.content);
        assert_eq!(
            state(&sb, "f.txt"),
            before,
            "the file changed (dryRun {dry})"
        );
        let text = r.content.to_string();
        assert!(
            !text.contains(sb.root.to_str().unwrap()),
            "a host path in {text}"
        );
        records.push(r.record());
    }
    assert_eq!(records[0], records[1], "dryRun answers the same");
    let leftovers: Vec<_> = std::fs::read_dir(&sb.root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["f.txt"], "nothing beside the file");
    records.pop().unwrap()["error"].clone()
}

fn one(old: &str) -> Value {
    json!([{"oldText": old, "newText": "REPLACED"}])
}

fn not_found(closest: Value) -> Value {
    json!({"code": "TOOL_EXECUTION_FAILED", "message": "EDIT_TEXT_NOT_FOUND", "edit": 0, "closest": closest})
}

#[test]
fn edit_miss_hint_indentation() {
    let file = "fn main() {\n    let a = 1;\n    let b = 2;\n}\n";
    let got = miss(file, one("let a = 1;\nlet b = 2;"));
    assert_eq!(
        got,
        not_found(
            json!({"startLine": 2, "endLine": 3, "text": "    let a = 1;\n    let b = 2;", "hint": "indentation"})
        )
    );
    // A final line end in oldText takes the region's line end with it.
    let got = miss(file, one("      let b = 2;\n"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 3, "endLine": 3, "text": "    let b = 2;\n", "hint": "indentation"})
    );
}

#[test]
fn edit_miss_hint_whitespace() {
    let got = miss("x = 1\ncall(a, b);\ny = 2\n", one("call(a,b);"));
    assert_eq!(
        got,
        not_found(
            json!({"startLine": 2, "endLine": 2, "text": "call(a, b);", "hint": "whitespace"})
        )
    );
    // Spaces inside a line and different indentation at once: whitespace.
    let got = miss("if x {\n\treturn  a;\n}\n", one("if x {\n    return a;\n}"));
    assert_eq!(got["closest"]["hint"], "whitespace");
    assert_eq!(got["closest"]["startLine"], 1);
    assert_eq!(got["closest"]["endLine"], 3);
}

#[test]
fn edit_miss_hint_quotes() {
    let file = "print(\"hello\")  # it's ok - really\nnext\n";
    let got = miss(
        file,
        one("print(\u{201C}hello\u{201D})  # it\u{2019}s ok \u{2014} really"),
    );
    assert_eq!(
        got,
        not_found(
            json!({"startLine": 1, "endLine": 1, "text": "print(\"hello\")  # it's ok - really", "hint": "quotes"})
        )
    );
    // And the other way: the file holds the typographic forms.
    let got = miss("say \u{2018}hi\u{2019}\n", one("say 'hi'"));
    assert_eq!(got["closest"]["hint"], "quotes");
    assert_eq!(got["closest"]["text"], "say \u{2018}hi\u{2019}");
}

#[test]
fn edit_miss_hint_different() {
    let got = miss("alpha\nbeta\ngamma\n", one("betta"));
    assert_eq!(
        got,
        not_found(json!({"startLine": 2, "endLine": 2, "text": "beta", "hint": "different"}))
    );
    // Quotes and indentation wrong at once: different, on the right lines still.
    let got = miss("a\n  say('x')\nb\n", one("say(\u{2018}x\u{2019})"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 2, "endLine": 2, "text": "  say('x')", "hint": "different"})
    );
}

#[test]
fn edit_miss_closest_text_at_n_and_n_plus_one_characters() {
    // Two-byte characters: the cut falls on a character boundary, counted in characters.
    let n = "\u{e9}".repeat(MAX_CLOSEST_CHARS);
    let got = miss(&format!("{n}\n"), one("zz"));
    assert_eq!(got["closest"]["text"], n.as_str());
    let over = format!("{n}\u{e9}");
    let got = miss(&format!("{over}\n"), one("zz"));
    assert_eq!(got["closest"]["text"], n.as_str(), "cut to N characters");
    // Over several lines, the bound is on the whole region.
    let lines = "abcdefghi\n".repeat(300);
    let got = miss(&lines, one(&"abcdefghj\n".repeat(300)));
    let text = got["closest"]["text"].as_str().unwrap();
    assert_eq!(text.chars().count(), MAX_CLOSEST_CHARS);
    assert_eq!(got["closest"]["endLine"], 300);
}

#[test]
fn edit_miss_empty_file_and_file_shorter_than_old_text() {
    // No line to point at: no closest.
    let got = miss("", one("anything"));
    assert_eq!(
        got,
        json!({"code": "TOOL_EXECUTION_FAILED", "message": "EDIT_TEXT_NOT_FOUND", "edit": 0})
    );
    let got = miss("\u{feff}", one("anything"));
    assert!(got.get("closest").is_none(), "{got}");
    // Fewer lines than oldText: the whole text is the region.
    let got = miss("a\n  b\n", one("a\nb\nc\n"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 1, "endLine": 2, "text": "a\n  b\n", "hint": "different"})
    );
    let got = miss("a\n  b", one("a\nb\n\n"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 1, "endLine": 2, "text": "a\n  b", "hint": "whitespace"})
    );
}

#[test]
fn edit_not_unique_lines_at_n_and_n_plus_one_occurrences() {
    let got = miss("k = 1\nk\n\nxk k\n", one("k"));
    assert_eq!(
        got,
        json!({"code": "TOOL_EXECUTION_FAILED", "message": "EDIT_TEXT_NOT_UNIQUE", "edit": 0, "lines": [1, 2, 4, 4]})
    );
    let all: Vec<usize> = (1..=MAX_OCCURRENCE_LINES).collect();
    let n = "k\n".repeat(MAX_OCCURRENCE_LINES);
    assert_eq!(miss(&n, one("k"))["lines"], json!(all));
    let over = "k\n".repeat(MAX_OCCURRENCE_LINES + 1);
    assert_eq!(miss(&over, one("k"))["lines"], json!(all), "at most N");
    // A multi-line oldText: the first line of each occurrence.
    let got = miss("a\nb\nc\na\nb\n", one("a\nb"));
    assert_eq!(got["lines"], json!([1, 4]));
}

#[test]
fn edit_miss_in_a_crlf_file() {
    // Every line ends in CRLF: an LF oldText matches as CRLF does, the lines count as the
    // file's, and the region's text is the file's own bytes (CRLF).
    let file = "one\r\n  two\r\nthree\r\n";
    let got = miss(file, one("two\n  three"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 2, "endLine": 3, "text": "  two\r\nthree", "hint": "indentation"})
    );
    let got = miss(file, one("two\r\n  three"));
    assert_eq!(got["closest"]["hint"], "indentation");
    assert_eq!(got["closest"]["startLine"], 2);
    // Mixed endings are matched byte for byte: an LF oldText against CRLF lines differs by
    // line ends only, which is whitespace.
    let got = miss("a\r\nb\nc\n", one("a\nb"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 1, "endLine": 2, "text": "a\r\nb", "hint": "whitespace"})
    );
    // A CRLF oldText against an LF file: whitespace too.
    let got = miss("x\na\nb\n", one("a\r\nb"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 2, "endLine": 3, "text": "a\nb", "hint": "whitespace"})
    );
    let got = miss("k\r\nk\r\n", one("k"));
    assert_eq!(got["lines"], json!([1, 2]));
}

#[test]
fn edit_miss_in_a_file_with_a_bom() {
    // The mark is not part of line 1's text.
    let got = miss("\u{feff}  hello\nx\n", one("    hello\nx"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 1, "endLine": 2, "text": "  hello\nx", "hint": "indentation"})
    );
    let got = miss("\u{feff}a\r\nb  c\r\nd\r\n", one("b c"));
    assert_eq!(
        got["closest"],
        json!({"startLine": 2, "endLine": 2, "text": "b  c", "hint": "whitespace"})
    );
    let got = miss("\u{feff}k\nk\n", one("k"));
    assert_eq!(got["lines"], json!([1, 2]));
}

#[test]
fn edit_miss_among_several_edits_is_diagnosed_for_that_edit() {
    // Edit 0 applies (in memory), edit 1 misses: its lines count in the text edit 0 left.
    let got = miss(
        "a\nb\nc;\n",
        json!([
            {"oldText": "a\n", "newText": "a1\na2\na3\n"},
            {"oldText": "  c;", "newText": "x"},
        ]),
    );
    assert_eq!(
        got,
        json!({"code": "TOOL_EXECUTION_FAILED", "message": "EDIT_TEXT_NOT_FOUND", "edit": 1,
               "closest": {"startLine": 5, "endLine": 5, "text": "c;", "hint": "indentation"}})
    );
    // The region is taken from the text as edit 0 left it, not the file.
    let got = miss(
        "let v = 1;\n",
        json!([
            {"oldText": "1", "newText": "2"},
            {"oldText": "let  v = 1;", "newText": "x"},
        ]),
    );
    assert_eq!(got["edit"], 1);
    assert_eq!(got["closest"]["text"], "let v = 2;");
    assert_eq!(got["closest"]["hint"], "different");
    let got = miss(
        "a\nb\n",
        json!([
            {"oldText": "b", "newText": "a"},
            {"oldText": "a", "newText": "z"},
            {"oldText": "never", "newText": "z"},
        ]),
    );
    assert_eq!(
        got,
        json!({"code": "TOOL_EXECUTION_FAILED", "message": "EDIT_TEXT_NOT_UNIQUE", "edit": 1, "lines": [1, 2]})
    );
}

/// The exact text of `closest` resent as `oldText` applies: the diagnostics point at text the
/// model can copy, and only the exact text is ever applied.
#[test]
fn edit_resending_closest_text_applies_exactly_that() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    let file = "one\r\n    two \u{201C}q\u{201D}\r\nthree\r\n";
    std::fs::write(sb.root.join("f.txt"), file).unwrap();
    let r = call(
        &reg,
        "edit_file",
        json!({"path": "f.txt", "edits": [{"oldText": "two \"q\"", "newText": "2"}]}),
    );
    let closest = r.record()["error"]["closest"].clone();
    assert_eq!(closest["hint"], "different", "{closest}");
    assert_eq!(
        std::fs::read_to_string(sb.root.join("f.txt")).unwrap(),
        file
    );
    let r = call(
        &reg,
        "edit_file",
        json!({"path": "f.txt", "edits": [{"oldText": closest["text"], "newText": "2"}]}),
    );
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(
        std::fs::read_to_string(sb.root.join("f.txt")).unwrap(),
        "one\r\n2\r\nthree\r\n"
    );
}

/// The search for the closest region is the one part of a miss that grows with the input
/// (text lines × `oldText` lines): on the worst case a file can hold (65,536 empty lines
/// against an `oldText` of 32,768 lines, about 10⁹ line comparisons, seconds of work) a
/// cancellation is noticed inside the search, and the call ends as cancelled (not with a
/// record) well within a second of it.
#[test]
fn edit_miss_search_notices_cancellation() {
    let sb = Sandbox::disk("TOP SECRET");
    let reg = registry(&sb);
    std::fs::write(sb.root.join("f.txt"), "\n".repeat(65_536)).unwrap();
    let call = confine_tools::ToolCall::new(
        "t",
        "edit_file",
        &json!({"path": "f.txt", "edits": [{"oldText": "x\n".repeat(32_768), "newText": ""}]}),
    );
    let cancel = tokio_util::sync::CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            cancel.cancel();
            std::time::Instant::now()
        })
    };
    // A current-thread runtime runs the work inline: only the search's own checks can stop it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let got = rt.block_on(confine_tools::execute_tool_call(&reg, &call, &cancel));
    let ended = std::time::Instant::now();
    let cancelled_at = canceller.join().unwrap();
    assert!(got.is_err(), "expected a cancellation, got {got:?}");
    let late = ended.saturating_duration_since(cancelled_at);
    assert!(
        late < std::time::Duration::from_secs(1),
        "ended {late:?} after the cancellation"
    );
    assert_eq!(std::fs::read(sb.root.join("f.txt")).unwrap().len(), 65_536);
}
