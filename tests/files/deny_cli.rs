//! Denied paths: every file tool refuses a denied path (`PATH_DENIED`, before any effect), by
//! name, through a symlink to it and through a symlinked directory; the walking tools leave
//! denied entries out and count them in `denied`; each beside its twin without the list, where
//! the same call reads, changes or lists them. The `--deny` flag through the binary.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use confine_tools::{DeniedPaths, ToolRegistry, ToolSetOptions};
use serde_json::{Value, json};
use support::{call_lines, call_on, runtime};

const REFUSED: &str = r#"{"error":{"code":"TOOL_EXECUTION_FAILED","message":"PATH_DENIED"}}"#;

/// The secret every denied file holds (a test looks for it in every record).
const SECRET: &str = "s3cr3t-needle";

/// The deny list of these tests.
fn denied() -> DeniedPaths {
    DeniedPaths::new(&["**/.env", "*.pem", "secrets/**"]).unwrap()
}

/// A workspace with denied files, a denied directory, symlinks to them, and plain files.
fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join("secrets/inner")).unwrap();
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    std::fs::write(ws.join(".env"), format!("KEY={SECRET}\n")).unwrap();
    std::fs::write(ws.join("src/deep/.env"), format!("KEY={SECRET}\n")).unwrap();
    std::fs::write(ws.join("key.pem"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.join("secrets/token"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.join("secrets/inner/more"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.join("src/a.txt"), "plain needle\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "plain needle\n").unwrap();
    std::os::unix::fs::symlink(".env", ws.join("link-to-env")).unwrap();
    std::os::unix::fs::symlink("../key.pem", ws.join("src/link-to-pem")).unwrap();
    std::os::unix::fs::symlink("secrets", ws.join("link-to-secrets")).unwrap();
    std::os::unix::fs::symlink("src/deep", ws.join("link-to-deep")).unwrap();
    tmp
}

fn registry(root: &Path, denied: DeniedPaths) -> ToolRegistry {
    let mut options = ToolSetOptions::default();
    options.denied = Arc::new(denied);
    confine_tools::create_workspace_tools(root, options).unwrap()
}

/// Every entry beneath `root` (symlinks as their targets' text), with file contents.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let kind = entry.file_type().unwrap();
            let what = if kind.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if kind.is_dir() {
                stack.push(path.clone());
                "dir".to_owned()
            } else {
                std::fs::read_to_string(&path).unwrap()
            };
            out.insert(rel, what);
        }
    }
    out
}

/// The calls a model could use to read, change or reach a denied path, by name and through
/// the symlinks of [`workspace`].
fn attacks() -> Vec<(&'static str, Value)> {
    let edit = json!([{"oldText": "KEY", "newText": "K"}]);
    let pem_edit = json!([{"oldText": "s3cr3t", "newText": "x"}]);
    vec![
        ("read_file", json!({"path": ".env"})),
        ("read_file", json!({"path": "src/deep/.env"})),
        ("read_file", json!({"path": "key.pem"})),
        ("read_file", json!({"path": "secrets/token"})),
        ("read_file", json!({"path": "secrets/inner/more"})),
        ("read_file", json!({"path": "link-to-env"})),
        ("read_file", json!({"path": "src/link-to-pem"})),
        ("read_file", json!({"path": "link-to-secrets/token"})),
        ("read_file", json!({"path": "link-to-deep/.env"})),
        ("read_lines", json!({"path": ".env"})),
        ("read_lines", json!({"path": "link-to-env"})),
        ("read_media", json!({"path": "key.pem"})),
        ("read_media", json!({"path": "src/link-to-pem"})),
        ("file_info", json!({"path": ".env"})),
        ("file_info", json!({"path": "secrets"})),
        ("file_info", json!({"path": "link-to-env"})),
        ("file_info", json!({"path": "link-to-secrets/token"})),
        ("write_file", json!({"path": ".env", "content": "x"})),
        ("write_file", json!({"path": "new/.env", "content": "x"})),
        ("write_file", json!({"path": "secrets/new", "content": "x"})),
        (
            "write_file",
            json!({"path": "link-to-secrets/new", "content": "x"}),
        ),
        ("edit_file", json!({"path": ".env", "edits": edit})),
        (
            "edit_file",
            json!({"path": ".env", "edits": edit, "dryRun": true}),
        ),
        ("edit_file", json!({"path": "link-to-env", "edits": edit})),
        (
            "edit_file",
            json!({"path": "src/link-to-pem", "edits": pem_edit}),
        ),
        (
            "edit_file",
            json!({"path": "link-to-deep/.env", "edits": edit}),
        ),
        ("create_directory", json!({"path": "secrets/sub"})),
        ("create_directory", json!({"path": "link-to-secrets/sub"})),
        ("create_directory", json!({"path": "x.pem"})),
        ("delete_file", json!({"path": ".env"})),
        ("delete_file", json!({"path": "secrets/token"})),
        ("delete_file", json!({"path": "link-to-secrets/token"})),
        (
            "move_file",
            json!({"source": ".env", "destination": "env.txt"}),
        ),
        (
            "move_file",
            json!({"source": "link-to-secrets/token", "destination": "t"}),
        ),
        (
            "move_file",
            json!({"source": "secrets", "destination": "public"}),
        ),
        (
            "move_file",
            json!({"source": "notes.txt", "destination": "notes.pem"}),
        ),
        (
            "move_file",
            json!({"source": "notes.txt", "destination": "secrets/notes"}),
        ),
        (
            "move_file",
            json!({"source": "notes.txt", "destination": "link-to-secrets/n"}),
        ),
        ("list_directory", json!({"path": "secrets"})),
        ("list_directory", json!({"path": "link-to-secrets"})),
        ("find_files", json!({"pattern": "*", "path": "secrets"})),
        (
            "find_files",
            json!({"pattern": "*", "path": "link-to-secrets"}),
        ),
        ("grep", json!({"pattern": "s3cr3t", "path": ".env"})),
        ("grep", json!({"pattern": "s3cr3t", "path": "link-to-env"})),
        ("grep", json!({"pattern": "s3cr3t", "path": "secrets"})),
        (
            "grep",
            json!({"pattern": "s3cr3t", "path": "link-to-secrets"}),
        ),
    ]
}

#[test]
fn every_file_tool_refuses_denied_paths_before_any_effect() {
    let tmp = workspace();
    let rt = runtime();
    let tools = registry(tmp.path(), denied());
    let before = snapshot(tmp.path());
    for (tool, args) in attacks() {
        let result = call_on(&rt, &tools, tool, &args);
        assert_eq!(result.content, REFUSED, "{tool} {args}");
        assert_eq!(
            snapshot(tmp.path()),
            before,
            "{tool} {args} changed the workspace"
        );
    }
}

/// The twin: without the list every one of those calls succeeds (so the refusals above are
/// the list's doing), and the reads among them show the secret.
#[test]
fn without_the_list_the_same_calls_read_change_or_list_them() {
    for (tool, args) in attacks() {
        let tmp = workspace();
        let rt = runtime();
        let tools = registry(tmp.path(), DeniedPaths::none());
        let result = call_on(&rt, &tools, tool, &args);
        if tool == "read_media" {
            // Not an image: the file was read and judged by its bytes.
            assert!(result.content.contains("FILE_NOT_MEDIA"), "{args}");
            continue;
        }
        if tool == "edit_file" && args["path"].as_str().unwrap().contains("link-to-") {
            let leaf_link = !args["path"].as_str().unwrap().ends_with(".env");
            if leaf_link {
                // edit_file never follows a symlink at the leaf: the twin refuses it by its
                // own rule, and PATH_DENIED above comes first.
                assert!(result.content.contains("WRITE_TARGET_SYMLINK"), "{args}");
                continue;
            }
        }
        assert!(!result.is_error, "{tool} {args}: {}", result.content);
        if matches!(tool, "read_file" | "read_lines" | "grep") {
            assert!(result.content.contains(SECRET), "{tool} {args}");
        }
    }
}

/// What the walking tools return, with and without the list.
#[test]
fn walks_leave_denied_entries_out_and_count_them() {
    let tmp = workspace();
    let rt = runtime();
    let guarded = registry(tmp.path(), denied());
    let naive = registry(tmp.path(), DeniedPaths::none());
    let record = |tools: &ToolRegistry, tool: &str, args: Value| -> Value {
        let r = call_on(&rt, tools, tool, &args);
        assert!(!r.is_error, "{tool} {args}: {}", r.content);
        serde_json::from_str(&r.content).unwrap()
    };

    let listed = record(&guarded, "list_directory", json!({}));
    let names: Vec<&str> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // `.env`, `key.pem` and `secrets` are left out; a symlink's own name is not denied.
    assert_eq!(
        names,
        [
            "link-to-deep",
            "link-to-env",
            "link-to-secrets",
            "notes.txt",
            "src"
        ]
    );
    assert_eq!(listed["denied"], 3, "{listed}");
    assert_eq!(listed["skipped"], 0);
    let plain = record(&naive, "list_directory", json!({}));
    assert_eq!(plain["entries"].as_array().unwrap().len(), 8);
    assert!(plain.get("denied").is_none(), "absent when none: {plain}");
    // Through a symlinked directory, judged by where it leads.
    let deep = record(&guarded, "list_directory", json!({"path": "link-to-deep"}));
    assert_eq!(deep["entries"], json!([]));
    assert_eq!(deep["denied"], 1);

    let found = record(&guarded, "find_files", json!({"pattern": "**/*"}));
    assert_eq!(
        found["paths"],
        json!([
            "link-to-deep",
            "link-to-env",
            "link-to-secrets",
            "notes.txt",
            "src/a.txt",
            "src/link-to-pem"
        ]),
        "{found}"
    );
    // `.env`, `key.pem`, `secrets` (once, not entered), `src/deep/.env`.
    assert_eq!(found["denied"], 4, "{found}");
    let all = record(&naive, "find_files", json!({"pattern": "**/*"}));
    assert_eq!(all["paths"].as_array().unwrap().len(), 11, "{all}");
    assert!(all.get("denied").is_none());

    let grepped = record(&guarded, "grep", json!({"pattern": "needle"}));
    assert_eq!(grepped["matches"].as_array().unwrap().len(), 2, "{grepped}");
    assert!(!grepped.to_string().contains(SECRET));
    assert_eq!(grepped["denied"], 4);
    let leaked = record(&naive, "grep", json!({"pattern": "needle"}));
    assert!(leaked.to_string().contains(SECRET));
    assert!(leaked.get("denied").is_none());
    // A start beneath a directory holding a denied entry counts it by its real path.
    let sub = record(
        &guarded,
        "grep",
        json!({"pattern": "s3cr3t", "path": "link-to-deep"}),
    );
    assert_eq!(sub["matches"], json!([]));
    assert_eq!(sub["denied"], 1);
}

/// An anchored pattern: the directory of its literal part holds it, so it is never moved (its
/// files would be readable at the new name); a pattern that matches a name at any depth
/// holds nothing, so directories move freely.
#[test]
fn a_directory_holding_an_anchored_pattern_is_not_moved() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join("config")).unwrap();
    std::fs::write(ws.join("config/db.pem"), SECRET).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/.env"), SECRET).unwrap();
    let rt = runtime();
    let list = DeniedPaths::new(&["config/*.pem", "**/.env"]).unwrap();
    let guarded = registry(ws, list);
    let away = json!({"source": "config", "destination": "cfg"});
    assert_eq!(call_on(&rt, &guarded, "move_file", &away).content, REFUSED);
    let moved = json!({"source": "src", "destination": "lib"});
    assert!(!call_on(&rt, &guarded, "move_file", &moved).is_error);
    let read = json!({"path": "lib/.env"});
    assert_eq!(call_on(&rt, &guarded, "read_file", &read).content, REFUSED);
    // The twin: moved away, the file is read under its new name.
    let naive = registry(ws, DeniedPaths::none());
    assert!(!call_on(&rt, &naive, "move_file", &away).is_error);
    let read = call_on(&rt, &naive, "read_file", &json!({"path": "cfg/db.pem"}));
    assert!(read.content.contains(SECRET));
}

#[test]
fn the_flag_denies_through_the_binary_and_a_bad_glob_is_a_usage_error() {
    let tmp = workspace();
    let line = |id: &str, name: &str, args: Value| {
        format!("{}\n", json!({"id": id, "name": name, "arguments": args}))
    };
    let input = line("1", "read_file", json!({"path": ".env"}))
        + &line("2", "read_file", json!({"path": "key.pem"}))
        + &line("3", "read_file", json!({"path": "secrets/token"}))
        + &line("4", "read_file", json!({"path": "notes.txt"}))
        + &line("5", "list_directory", json!({}));
    let refused = json!({"code": "TOOL_EXECUTION_FAILED", "message": "PATH_DENIED"});
    let got = call_lines(
        tmp.path(),
        &[
            "--deny",
            "**/.env",
            "--deny",
            "*.pem",
            "--deny",
            "secrets/**",
        ],
        &input,
    );
    for record in &got[..3] {
        assert_eq!(record["content"]["error"], refused, "{record}");
    }
    assert_eq!(got[3]["isError"], false, "{}", got[3]);
    assert_eq!(got[4]["content"]["denied"], 3, "{}", got[4]);
    let text = serde_json::to_string(&got).unwrap();
    assert!(!text.contains(SECRET));
    assert!(!text.contains(&tmp.path().display().to_string()), "{text}");
    // The twin: without --deny the same lines read the secrets.
    let got = call_lines(tmp.path(), &[], &input);
    assert!(got[..3].iter().all(|r| r["isError"] == false), "{got:?}");

    // A pattern the list refuses is a usage error naming the flag and the pattern.
    for bad in ["!x", "", "../up", "a[b"] {
        let out = support::confine()
            .args(["call", "--root"])
            .arg(tmp.path())
            .args(["--deny", bad])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--deny"), "{bad:?}: {stderr}");
        assert!(
            stderr.contains(&format!("{bad:?}")) || bad.is_empty(),
            "{bad:?}: {stderr}"
        );
    }
    // 256 patterns are taken, 257 refused.
    let flags = |n: usize| -> Vec<String> {
        (0..n)
            .flat_map(|i| ["--deny".to_owned(), format!("f{i}")])
            .collect()
    };
    let run = |n: usize| {
        support::confine()
            .args(["call", "--root"])
            .arg(tmp.path())
            .args(flags(n))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    assert_eq!(
        run(confine_tools::limits::MAX_DENIED_PATTERNS)
            .status
            .code(),
        Some(0)
    );
    let over = run(confine_tools::limits::MAX_DENIED_PATTERNS + 1);
    assert_eq!(over.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&over.stderr).contains("--deny: more than 256"));
}

/// `confine doctor` shows the list and whether sandboxed children find denied entries
/// covered here (either answer is a fact of this machine; a child reading the secret is
/// never one).
#[test]
fn doctor_shows_the_denied_paths_and_whether_children_find_them_covered() {
    let doctor = |args: &[&str]| {
        let out = support::confine()
            .arg("doctor")
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let text = doctor(&["--deny", "**/.env", "--deny", "*.pem"]);
    assert!(text.contains("denied:        **/.env, *.pem\n"), "{text}");
    let line = text.lines().find(|l| l.starts_with("covered:")).unwrap();
    assert!(
        line.contains("denied entries covered for sandboxed children")
            || line.contains("fails with NODE_SANDBOX_UNAVAILABLE")
            || line.contains("not checked (\"no Node.js\")"),
        "{line}"
    );
    assert!(!line.contains("FAILED"), "{line}");
    assert!(doctor(&[]).contains("denied:        none (no --deny)\n"));
    let report: Value = serde_json::from_str(&doctor(&["--json", "--deny", "secrets/**"])).unwrap();
    assert_eq!(
        report["denied"]["patterns"],
        json!(["secrets/**"]),
        "{report}"
    );
    let check = &report["denied"]["check"];
    assert!(
        check["ran"] == false
            || check["covered"] == true
            || check["readDenied"] == "NODE_SANDBOX_UNAVAILABLE",
        "{check}"
    );
}

/// `n` entries in `dir` (hard links, a fresh inode every 50,000: cheap to make), named by
/// `name`.
fn many(dir: &Path, n: usize, name: impl Fn(usize) -> String) {
    use rustix::fs::{AtFlags, Mode, OFlags};
    std::fs::create_dir_all(dir).unwrap();
    let fd = rustix::fs::open(dir, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
    for i in 0..n {
        if i % 50_000 == 0 {
            let flags = OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC;
            rustix::fs::openat(&fd, name(i).as_str(), flags, Mode::from_raw_mode(0o644)).unwrap();
        } else {
            let first = name(i - i % 50_000);
            rustix::fs::linkat(&fd, first.as_str(), &fd, name(i).as_str(), AtFlags::empty())
                .unwrap();
        }
    }
}

/// The walk that finds what the sandbox covers: 100,000 entries looked at (N) pass, one more
/// fails, and so does a sandboxed call there (`NODE_SANDBOX_UNAVAILABLE`, nothing run); 1,024
/// denied entries (N) are covered, one more fails.
#[test]
fn the_cover_walk_bounds_at_n_and_n_plus_one() {
    use confine_tools::limits::{MAX_COVER_SCAN, MAX_COVERED};
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().canonicalize().unwrap();
    // Anchored at `big`: only its entries are looked at.
    let list = DeniedPaths::new(&["big/*.pem"]).unwrap();
    many(&ws.join("big"), MAX_COVER_SCAN, |i| format!("e{i}"));
    assert_eq!(
        list.existing_beneath(std::fs::File::open(&ws).unwrap()),
        Ok(vec![])
    );
    let mut options = ToolSetOptions::default();
    options.denied = Arc::new(list.clone());
    options.sandbox = Some(confine_nodeexec::Sandbox::new());
    options.commands = Some(confine_tools::RunCommandOptions::default());
    let set = confine_tools::create_workspace_tools(&ws, options).unwrap();
    let rt = runtime();
    let command = json!({"command": "echo ran"});
    let ran = call_on(&rt, &set, "run_command", &command);
    assert!(
        ran.content.contains(r#""stdout":"ran\n""#),
        "{}",
        ran.content
    );
    std::fs::write(ws.join("big/one-more"), "").unwrap();
    assert_eq!(
        list.existing_beneath(std::fs::File::open(&ws).unwrap()),
        Err(confine_tools::CoverError::TooManyEntries)
    );
    let ran = call_on(&rt, &set, "run_command", &command);
    assert!(
        ran.content.contains("NODE_SANDBOX_UNAVAILABLE"),
        "{}",
        ran.content
    );
    std::fs::remove_dir_all(ws.join("big")).unwrap();

    let list = DeniedPaths::new(&["keys/*.pem"]).unwrap();
    many(&ws.join("keys"), MAX_COVERED, |i| format!("k{i}.pem"));
    assert_eq!(
        list.existing_beneath(std::fs::File::open(&ws).unwrap())
            .unwrap()
            .len(),
        MAX_COVERED
    );
    std::fs::write(ws.join("keys/one-more.pem"), "").unwrap();
    assert_eq!(
        list.existing_beneath(std::fs::File::open(&ws).unwrap()),
        Err(confine_tools::CoverError::TooManyDenied)
    );
}
