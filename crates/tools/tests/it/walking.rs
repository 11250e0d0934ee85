//! list_directory, find_files and grep: results, tokens, limits at N and N+1, and the rules
//! every walk keeps (no symlink followed, temporaries and .git left out, .gitignore obeyed).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;

use confine_tools::{ToolCall, ToolRegistry, execute_tool_call};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::{Sandbox, call, token};

fn tools(sb: &Sandbox) -> ToolRegistry {
    confine_tools::create_read_only_tools(&sb.root).unwrap()
}

fn ok(registry: &ToolRegistry, name: &str, args: Value) -> Value {
    let r = call(registry, name, args);
    assert!(!r.is_error, "{name}: {}", r.content);
    r.record()
}

fn write(sb: &Sandbox, rel: &str, content: &str) {
    let p = sb.root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn paths(v: &Value) -> Vec<String> {
    v["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect()
}

fn matches(v: &Value) -> Vec<(String, u64, String)> {
    v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_owned(),
                m["line"].as_u64().unwrap(),
                m["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn list_directory_kinds_sizes_sorted_and_symlinks_not_followed() {
    let sb = Sandbox::disk("TOP SECRET");
    write(&sb, "b.txt", "hello");
    write(&sb, "a/inner.txt", "x");
    symlink(&sb.outside, sb.root.join("out")).unwrap();
    write(&sb, ".x.txt.pify-tmp-0123456789abcdef", "tmp");
    write(&sb, ".pify-node-1.cjs", "tmp");
    std::fs::create_dir(sb.root.join(".pify-run-1")).unwrap();
    let r = tools(&sb);
    let v = ok(&r, "list_directory", json!({}));
    assert_eq!(
        v,
        json!({"path": ".", "entries": [
            {"name": "a", "kind": "directory"},
            {"name": "b.txt", "kind": "file", "bytes": 5},
            {"name": "out", "kind": "symlink"}
        ], "skipped": 0, "truncated": false})
    );
    let v = ok(&r, "list_directory", json!({"path": "a"}));
    assert_eq!(v["path"], "a");
    assert_eq!(v["entries"][0]["name"], "inner.txt");
    // Through the symlink: it leads outside.
    assert_eq!(
        token(&call(&r, "list_directory", json!({"path": "out"}))),
        "PATH_OUTSIDE_WORKSPACE"
    );
    assert_eq!(
        token(&call(&r, "list_directory", json!({"path": "b.txt"}))),
        "NOT_A_DIRECTORY"
    );
    assert_eq!(
        token(&call(&r, "list_directory", json!({"path": "missing"}))),
        "FILE_NOT_FOUND"
    );
    assert_eq!(
        token(&call(&r, "list_directory", json!({"path": "../ws"}))),
        "INVALID_RELATIVE_PATH"
    );
    for bad in [json!({"path": 1}), json!({"dir": "a"}), json!([])] {
        assert_eq!(
            token(&call(&r, "list_directory", bad)),
            "INVALID_LIST_INPUT"
        );
    }
}

#[test]
fn list_directory_counts_names_no_tool_could_take() {
    let sb = Sandbox::disk("TOP SECRET");
    let bad = std::ffi::OsStr::from_bytes(b"bad\xff");
    std::fs::write(sb.root.join(bad), "x").unwrap();
    std::fs::write(sb.root.join("ctl\u{1}"), "x").unwrap();
    write(&sb, "good", "x");
    let v = ok(&tools(&sb), "list_directory", json!({}));
    assert_eq!(v["skipped"], 2);
    assert_eq!(v["entries"].as_array().unwrap().len(), 1);
}

#[test]
fn list_directory_limit_at_n_and_n_plus_one() {
    let sb = Sandbox::disk("TOP SECRET");
    for i in 0..1_000 {
        write(&sb, &format!("n/{i:04}"), "");
        write(&sb, &format!("n1/{i:04}"), "");
    }
    write(&sb, "n1/1000", "");
    let r = tools(&sb);
    let v = ok(&r, "list_directory", json!({"path": "n"}));
    assert_eq!(v["entries"].as_array().unwrap().len(), 1_000);
    assert_eq!(v["truncated"], false);
    let v = ok(&r, "list_directory", json!({"path": "n1"}));
    assert_eq!(v["entries"].as_array().unwrap().len(), 1_000);
    assert_eq!(v["truncated"], true);
    assert_eq!(v["entries"][999]["name"], "0999");
}

#[test]
fn find_files_globs_with_shell_meaning() {
    let sb = Sandbox::disk("TOP SECRET");
    for f in [
        "a.rs",
        "src/lib.rs",
        "src/deep/x.rs",
        "src/y.txt",
        "docs/z.md",
    ] {
        write(&sb, f, "");
    }
    let r = tools(&sb);
    let find = |args: Value| paths(&ok(&r, "find_files", args));
    assert_eq!(find(json!({"pattern": "*.rs"})), ["a.rs"]);
    assert_eq!(
        find(json!({"pattern": "**/*.rs"})),
        ["a.rs", "src/deep/x.rs", "src/lib.rs"]
    );
    assert_eq!(find(json!({"pattern": "src/*.rs"})), ["src/lib.rs"]);
    assert_eq!(
        find(json!({"pattern": "*.{rs,txt}", "path": "src"})),
        ["src/lib.rs", "src/y.txt"]
    );
    assert_eq!(
        find(json!({"pattern": "?.md", "path": "docs"})),
        ["docs/z.md"]
    );
    assert_eq!(find(json!({"pattern": "[a-b].rs"})), ["a.rs"]);
    assert_eq!(
        token(&call(
            &r,
            "find_files",
            json!({"pattern": "a[", "path": "src"})
        )),
        "INVALID_GLOB"
    );
    assert_eq!(
        token(&call(
            &r,
            "find_files",
            json!({"pattern": "*", "path": "a.rs"})
        )),
        "NOT_A_DIRECTORY"
    );
    for bad in [
        json!({}),
        json!({"pattern": 1}),
        json!({"pattern": "*", "extra": true}),
        json!({"pattern": "*", "includeIgnored": "yes"}),
    ] {
        assert_eq!(token(&call(&r, "find_files", bad)), "INVALID_FIND_INPUT");
    }
}

#[test]
fn find_files_obeys_gitignore_root_and_nested_and_skips_git_and_temporaries() {
    let sb = Sandbox::disk("TOP SECRET");
    write(&sb, ".gitignore", "target/\n*.log\n");
    write(&sb, "target/t.rs", "");
    write(&sb, "a.log", "");
    write(&sb, "keep.rs", "");
    write(&sb, "sub/.gitignore", "gen.rs\n!keep.log\n");
    write(&sb, "sub/gen.rs", "");
    write(&sb, "sub/keep.log", "");
    write(&sb, "sub/ok.rs", "");
    write(&sb, ".git/config.rs", "");
    write(&sb, ".keep.rs.pify-tmp-0123456789abcdef", "");
    write(&sb, ".pify-node-1.cjs", "");
    write(&sb, ".pify-run-2/x.rs", "");
    symlink("keep.rs", sb.root.join("link.rs")).unwrap();
    symlink(&sb.outside, sb.root.join("outdir")).unwrap();
    let r = tools(&sb);
    let all = paths(&ok(&r, "find_files", json!({"pattern": "**"})));
    assert_eq!(
        all,
        [
            ".gitignore",
            "keep.rs",
            "link.rs",
            "outdir",
            "sub/.gitignore",
            "sub/keep.log",
            "sub/ok.rs"
        ]
    );
    // Starting below the root, the root's .gitignore still applies.
    let sub = paths(&ok(
        &r,
        "find_files",
        json!({"pattern": "*", "path": "sub"}),
    ));
    assert_eq!(sub, ["sub/.gitignore", "sub/keep.log", "sub/ok.rs"]);
    let everything = paths(&ok(
        &r,
        "find_files",
        json!({"pattern": "**/*.{rs,log}", "includeIgnored": true}),
    ));
    assert_eq!(
        everything,
        [
            "a.log",
            "keep.rs",
            "link.rs",
            "sub/gen.rs",
            "sub/keep.log",
            "sub/ok.rs",
            "target/t.rs"
        ]
    );
}

#[test]
fn find_files_limit_at_n_and_n_plus_one() {
    let sb = Sandbox::disk("TOP SECRET");
    for i in 0..1_000 {
        write(&sb, &format!("d/{i:04}.x"), "");
    }
    let r = tools(&sb);
    let v = ok(&r, "find_files", json!({"pattern": "**/*.x"}));
    assert_eq!((paths(&v).len(), &v["truncated"]), (1_000, &json!(false)));
    write(&sb, "d/1000.x", "");
    let v = ok(&r, "find_files", json!({"pattern": "**/*.x"}));
    assert_eq!((paths(&v).len(), &v["truncated"]), (1_000, &json!(true)));
    assert_eq!(paths(&v)[999], "d/0999.x");
}

#[test]
fn grep_finds_lines_with_context_and_skips_binary_and_ignored() {
    let sb = Sandbox::disk("TOP SECRET");
    write(&sb, "a.txt", "one\ntwo needle\nthree\nfour needle\nfive\n");
    write(&sb, "src/b.rs", "fn needle() {}\r\n");
    write(&sb, "ignored.log", "needle\n");
    write(&sb, ".gitignore", "*.log\n");
    let mut bin = vec![b'a'; 8_191];
    bin.push(0);
    bin.extend_from_slice(b"\nneedle\n");
    std::fs::write(sb.root.join("bin8191"), &bin).unwrap();
    // A NUL just past the first 8 KiB: text.
    let mut text = vec![b'a'; 8_192];
    text.push(0);
    text.extend_from_slice(b"\nneedle\n");
    std::fs::write(sb.root.join("text8192"), &text).unwrap();
    let r = tools(&sb);
    let v = ok(&r, "grep", json!({"pattern": "needle"}));
    assert_eq!(
        matches(&v),
        [
            ("a.txt".into(), 2, "two needle".into()),
            ("a.txt".into(), 4, "four needle".into()),
            ("src/b.rs".into(), 1, "fn needle() {}".into()),
            ("text8192".into(), 2, "needle".into()),
        ]
    );
    assert_eq!(v["filesSearched"], 4); // .gitignore, a.txt, src/b.rs, text8192
    assert!(v["matches"][0].get("before").is_none());
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "NEEDLE", "ignoreCase": true, "contextLines": 1, "path": "a.txt"}),
    );
    assert_eq!(
        v["matches"],
        json!([
            {"path": "a.txt", "line": 2, "text": "two needle", "before": ["one"], "after": ["three"]},
            {"path": "a.txt", "line": 4, "text": "four needle", "before": ["three"], "after": ["five"]}
        ])
    );
    assert_eq!(v["filesSearched"], 1);
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "needle", "contextLines": 2, "path": "a.txt"}),
    );
    // Each match keeps its own context, even where the two overlap.
    assert_eq!(v["matches"][0]["after"], json!(["three", "four needle"]));
    assert_eq!(v["matches"][1]["before"], json!(["two needle", "three"]));
    let v = ok(&r, "grep", json!({"pattern": "needle", "glob": "*.rs"}));
    assert_eq!(matches(&v).len(), 1);
    let v = ok(&r, "grep", json!({"pattern": "needle", "glob": "src/*.rs"}));
    assert_eq!(matches(&v).len(), 1);
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "needle", "glob": "*.rs", "path": "src"}),
    );
    assert_eq!(matches(&v).len(), 1);
}

#[test]
fn grep_tokens_and_ranges_at_n_and_n_plus_one() {
    let sb = Sandbox::disk("TOP SECRET");
    write(&sb, "a.txt", "x\n");
    let r = tools(&sb);
    let tok = |args: Value| token(&call(&r, "grep", args));
    assert_eq!(tok(json!({"pattern": "("})), "INVALID_REGEX");
    assert_eq!(tok(json!({"pattern": "x", "glob": "{"})), "INVALID_GLOB");
    assert_eq!(
        tok(json!({"pattern": "x", "path": "nope"})),
        "FILE_NOT_FOUND"
    );
    assert_eq!(
        tok(json!({"pattern": "x", "path": "/etc"})),
        "INVALID_RELATIVE_PATH"
    );
    for bad in [
        json!({"pattern": "x", "contextLines": 11}),
        json!({"pattern": "x", "contextLines": -1}),
        json!({"pattern": "x", "maxMatches": 0}),
        json!({"pattern": "x", "maxMatches": 1_001}),
        json!({"pattern": "x", "maxMatches": 1.5}),
        json!({"pattern": "x", "unknown": 1}),
        json!({"path": "a.txt"}),
    ] {
        assert_eq!(tok(bad.clone()), "INVALID_GREP_INPUT", "{bad}");
    }
    for good in [
        json!({"pattern": "x", "contextLines": 10}),
        json!({"pattern": "x", "contextLines": 0}),
        json!({"pattern": "x", "maxMatches": 1_000}),
        json!({"pattern": "x", "maxMatches": 1}),
    ] {
        ok(&r, "grep", good);
    }
}

#[test]
fn grep_caps_matches_and_cuts_lines() {
    let sb = Sandbox::disk("TOP SECRET");
    let many: String = (0..1_001).map(|i| format!("hit {i}\n")).collect();
    write(&sb, "many.txt", &many);
    write(
        &sb,
        "long.txt",
        &format!("{}\n{}\n", "é".repeat(500), "é".repeat(501)),
    );
    let r = tools(&sb);
    let v = ok(&r, "grep", json!({"pattern": "hit", "maxMatches": 1_000}));
    assert_eq!((matches(&v).len(), &v["truncated"]), (1_000, &json!(true)));
    let v = ok(
        &r,
        "grep",
        json!({"pattern": "hit", "path": "many.txt", "maxMatches": 1_000}),
    );
    assert_eq!(v["truncated"], true);
    let v = ok(&r, "grep", json!({"pattern": "hit"}));
    assert_eq!((matches(&v).len(), &v["truncated"]), (200, &json!(true)));
    let v = ok(&r, "grep", json!({"pattern": "hit 1000"}));
    assert_eq!((matches(&v).len(), &v["truncated"]), (1, &json!(false)));
    let v = ok(&r, "grep", json!({"pattern": "é", "path": "long.txt"}));
    let texts: Vec<usize> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap().chars().count())
        .collect();
    assert_eq!(texts, [500, 500]);
}

#[test]
fn walking_tools_stop_when_cancelled() {
    let sb = Sandbox::disk("TOP SECRET");
    write(&sb, "a.txt", "x\n");
    let r = tools(&sb);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (name, args) in [
        ("list_directory", json!({})),
        ("find_files", json!({"pattern": "**"})),
        ("grep", json!({"pattern": "x"})),
    ] {
        let got = rt.block_on(execute_tool_call(
            &r,
            &ToolCall::new("c", name, &args),
            &cancel,
        ));
        assert!(got.is_err(), "{name} answered a cancelled call");
    }
}

#[test]
fn walking_results_never_hold_a_host_path() {
    let sb = Sandbox::disk("TOP SECRET");
    write(&sb, "a.txt", "needle\n");
    let r = tools(&sb);
    let host = sb.root.to_string_lossy().into_owned();
    for (name, args) in [
        ("list_directory", json!({})),
        ("list_directory", json!({"path": "missing"})),
        ("find_files", json!({"pattern": "**"})),
        ("grep", json!({"pattern": "needle"})),
        ("grep", json!({"pattern": "("})),
    ] {
        let got = call(&r, name, args);
        assert!(!got.content.contains(&host), "{}", got.content);
    }
}
