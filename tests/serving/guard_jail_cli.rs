//! `confine guard` and `confine jail` driven through the built binary: the output arrays,
//! the conformance files, and exit status 2 with a one-line reason on bad usage.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::support;

/// Run the built `confine` with `args`.
fn confine(args: &[&str]) -> Output {
    support::confine()
        .args(args)
        .output()
        .expect("spawn confine")
}

fn write_case(dir: &Path, name: &str, case: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(case).unwrap()).unwrap();
    p.to_string_lossy().into_owned()
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "status {:?}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn guard_prints_path_and_ok_for_the_document_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let case = json!({
        "files": {"ok.txt": "x", "sub/deep.txt": "y"},
        "symlinks": {"link": "/etc", "out": "$OUTSIDE/secret.txt", "dangling": "$OUTSIDE/new.txt"},
        "paths": ["ok.txt", "sub/deep.txt", "sub/../ok.txt", "../escape", "/etc/passwd",
                  "link/passwd", "out", "dangling", "$ROOT/ok.txt", "../cc-task-abc-evil/secret.txt"]
    });
    let out = confine(&["guard", &write_case(tmp.path(), "g.json", &case)]);
    assert_eq!(
        stdout_json(&out),
        json!([
            {"path": "ok.txt", "ok": true},
            {"path": "sub/deep.txt", "ok": true},
            {"path": "sub/../ok.txt", "ok": true},
            {"path": "../escape", "ok": false},
            {"path": "/etc/passwd", "ok": false},
            {"path": "link/passwd", "ok": false},
            {"path": "out", "ok": false},
            {"path": "dangling", "ok": false},
            {"path": "$ROOT/ok.txt", "ok": true},
            {"path": "../cc-task-abc-evil/secret.txt", "ok": false}
        ])
    );
}

#[test]
fn jail_prints_op_path_and_ok() {
    let tmp = tempfile::tempdir().unwrap();
    let case = json!({
        "files": {"a/x.txt": "x", "a/secret/s.txt": "s"},
        "symlinks": {"a/out": "$OUTSIDE/secret.txt", "a/todeny": "secret/s.txt"},
        "cwd": "a",
        "policy": {"allowRead": ["$ROOT"], "allowWrite": ["$ROOT/a"], "deny": ["$ROOT/a/secret"]},
        "checks": [
            {"op": "read", "path": "x.txt"},
            {"op": "read", "path": "out"},
            {"op": "read", "path": "todeny"},
            {"op": "write", "path": "new.txt"},
            {"op": "write", "path": "../new.txt"},
            {"op": "write", "path": "missing/new.txt"},
            {"op": "write", "path": "out"}
        ]
    });
    let out = confine(&["jail", &write_case(tmp.path(), "j.json", &case)]);
    assert_eq!(
        stdout_json(&out),
        json!([
            {"op": "read", "path": "x.txt", "ok": true},
            {"op": "read", "path": "out", "ok": false},
            {"op": "read", "path": "todeny", "ok": false},
            {"op": "write", "path": "new.txt", "ok": true},
            {"op": "write", "path": "../new.txt", "ok": false},
            {"op": "write", "path": "missing/new.txt", "ok": false},
            {"op": "write", "path": "out", "ok": false}
        ])
    );
}

/// The conformance files through the binary: every `ok` as expected.
#[test]
fn conformance_files_through_the_binary() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let guard_file = dir.join("guard.json");
    let guard: Value = serde_json::from_slice(&std::fs::read(&guard_file).unwrap()).unwrap();
    let out = stdout_json(&confine(&["guard", guard_file.to_str().unwrap()]));
    let got: Vec<bool> = out
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["ok"].as_bool().unwrap())
        .collect();
    let expect: Vec<bool> = serde_json::from_value(guard["expect"].clone()).unwrap();
    assert_eq!(got, expect);

    let jail_file = dir.join("jail.json");
    let jail: Value = serde_json::from_slice(&std::fs::read(&jail_file).unwrap()).unwrap();
    let out = stdout_json(&confine(&["jail", jail_file.to_str().unwrap()]));
    let got: Vec<(String, bool)> = out
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["path"].as_str().unwrap().to_owned(),
                o["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    let expect: Vec<(String, bool)> = jail["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_owned(),
                c["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, expect);
}

#[test]
fn bad_usage_exits_2_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let invalid = tmp.path().join("invalid.json");
    std::fs::write(&invalid, "{not json").unwrap();
    let wrong_shape = write_case(tmp.path(), "shape.json", &json!({"paths": "ok.txt"}));
    let missing = tmp.path().join("missing.json");
    for args in [
        vec!["guard"],
        vec!["jail"],
        vec!["guard", missing.to_str().unwrap()],
        vec!["jail", missing.to_str().unwrap()],
        vec!["guard", invalid.to_str().unwrap()],
        vec!["jail", invalid.to_str().unwrap()],
        vec!["guard", &wrong_shape],
        vec!["jail", &wrong_shape],
    ] {
        let out = confine(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(!err.trim().is_empty(), "{args:?}");
        if args.len() == 2 {
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        }
    }
}

#[test]
fn help_exits_0() {
    for cmd in ["guard", "jail"] {
        let out = confine(&[cmd, "--help"]);
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8(out.stdout).unwrap().contains("CASE"));
    }
}
