//! Protected paths: every tool that changes the workspace refuses the files programs on the
//! host run or obey (`PATH_PROTECTED`, before any effect), through a symlink as well as by
//! name, while reads stay allowed; each beside its twin without the list, where the same call
//! succeeds. The flags `--protect` and `--unprotect-defaults` through the binary.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use confine_tools::{ProtectedPaths, ToolRegistry, ToolSetOptions};
use serde_json::{Value, json};
use support::{call_lines, call_on, runtime};

const REFUSED: &str = r#"{"error":{"code":"TOOL_EXECUTION_FAILED","message":"PATH_PROTECTED"}}"#;

/// A workspace holding a git repository's protected parts and a few ordinary entries.
fn workspace() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join(".git/objects")).unwrap();
    std::fs::write(ws.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::create_dir_all(ws.join("src/dir")).unwrap();
    std::fs::write(ws.join("src/a.txt"), "a\n").unwrap();
    std::os::unix::fs::symlink(".git/hooks", ws.join("link-to-hooks")).unwrap();
    std::os::unix::fs::symlink(".git", ws.join("link-to-git")).unwrap();
    tmp
}

fn registry(root: &Path, protected: ProtectedPaths) -> ToolRegistry {
    let mut options = ToolSetOptions::default();
    options.protected = Arc::new(protected);
    let names = [
        "read_file",
        "write_file",
        "edit_file",
        "create_directory",
        "move_file",
        "delete_file",
    ];
    confine_tools::create_selected_tools(root, options, &names).unwrap()
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

/// The calls a model could use to plant a hook or change git's configuration, by name and
/// through the symlinks of [`workspace`].
fn attacks() -> Vec<(&'static str, Value)> {
    let hook = "#!/bin/sh\necho owned > /tmp/owned\n";
    let edit = json!([{"oldText": "bare = false", "newText": "fsmonitor = /tmp/x.sh"}]);
    vec![
        (
            "write_file",
            json!({"path": ".git/hooks/pre-commit", "content": hook}),
        ),
        (
            "write_file",
            json!({"path": ".git/hooks/pre-commit.sample", "content": hook}),
        ),
        (
            "write_file",
            json!({"path": ".git/hooks/new/deeper", "content": hook}),
        ),
        (
            "write_file",
            json!({"path": ".git/config", "content": "[core]\n"}),
        ),
        (
            "write_file",
            json!({"path": "link-to-hooks/pre-commit", "content": hook}),
        ),
        (
            "write_file",
            json!({"path": "link-to-git/config", "content": "[core]\n"}),
        ),
        (
            "write_file",
            json!({"path": "link-to-git/hooks/post-checkout", "content": hook}),
        ),
        ("edit_file", json!({"path": ".git/config", "edits": edit})),
        (
            "edit_file",
            json!({"path": "link-to-git/config", "edits": edit}),
        ),
        (
            "edit_file",
            json!({"path": ".git/config", "edits": edit, "dryRun": true}),
        ),
        ("create_directory", json!({"path": ".git/hooks/sub"})),
        ("create_directory", json!({"path": ".git/hooks"})),
        ("create_directory", json!({"path": "link-to-hooks/sub"})),
        (
            "move_file",
            json!({"source": "src/a.txt", "destination": ".git/hooks/pre-commit"}),
        ),
        (
            "move_file",
            json!({"source": "src/a.txt", "destination": "link-to-hooks/pre-commit"}),
        ),
        (
            "move_file",
            json!({"source": ".git/config", "destination": "src/config"}),
        ),
        (
            "move_file",
            json!({"source": "link-to-git/config", "destination": "src/config"}),
        ),
        (
            "move_file",
            json!({"source": ".git/hooks", "destination": "src/hooks"}),
        ),
        (
            "move_file",
            json!({"source": ".git", "destination": "old-git"}),
        ),
        (
            "move_file",
            json!({"source": "src/dir", "destination": "link-to-hooks/dir"}),
        ),
        ("delete_file", json!({"path": ".git/config"})),
        (
            "delete_file",
            json!({"path": ".git/hooks/pre-commit.sample"}),
        ),
        ("delete_file", json!({"path": "link-to-git/config"})),
        (
            "delete_file",
            json!({"path": "link-to-hooks/pre-commit.sample"}),
        ),
    ]
}

#[test]
fn every_write_tool_refuses_protected_paths_before_any_effect() {
    let tmp = workspace();
    let rt = runtime();
    let tools = registry(tmp.path(), ProtectedPaths::default());
    let before = snapshot(tmp.path());
    for (tool, args) in attacks() {
        let result = call_on(&rt, &tools, tool, &args);
        assert!(result.is_error, "{tool} {args}: {}", result.content);
        assert_eq!(result.content, REFUSED, "{tool} {args}");
        assert_eq!(
            snapshot(tmp.path()),
            before,
            "{tool} {args} changed the workspace"
        );
    }
    // Reads stay allowed, by name and through a symlink.
    for path in [
        ".git/config",
        "link-to-git/config",
        ".git/hooks/pre-commit.sample",
    ] {
        let read = call_on(&rt, &tools, "read_file", &json!({ "path": path }));
        assert!(!read.is_error, "{path}: {}", read.content);
    }
    // What is near but not protected is written as ever.
    for path in [
        ".git/HEAD",
        ".git/objects/ab",
        ".git/config.lock",
        "src/hooks/pre-commit",
    ] {
        let write = call_on(
            &rt,
            &tools,
            "write_file",
            &json!({"path": path, "content": "x"}),
        );
        assert!(!write.is_error, "{path}: {}", write.content);
    }
}

/// The twin: without the list, every one of those calls but the dry run changes the
/// workspace (so the refusals above are the list's doing, not some other rule's).
#[test]
fn without_the_list_the_same_calls_change_the_workspace() {
    for (tool, args) in attacks() {
        let tmp = workspace();
        let rt = runtime();
        let tools = registry(tmp.path(), ProtectedPaths::none());
        let before = snapshot(tmp.path());
        let result = call_on(&rt, &tools, tool, &args);
        if tool == "create_directory" && args["path"] == ".git/hooks" {
            // Already there: `created: false`, nothing to change.
            assert_eq!(result.content, r#"{"path":".git/hooks","created":false}"#);
            continue;
        }
        assert!(!result.is_error, "{tool} {args}: {}", result.content);
        if args["dryRun"] != true {
            assert_ne!(snapshot(tmp.path()), before, "{tool} {args}");
        }
    }
}

/// Moving the repository away and a directory of the model's in plants hooks without ever
/// naming one: the first step is refused; without the list both succeed.
#[test]
fn moving_the_repository_away_and_another_in_is_refused() {
    let tmp = workspace();
    let rt = runtime();
    std::fs::create_dir_all(tmp.path().join("src/planted/hooks")).unwrap();
    std::fs::write(
        tmp.path().join("src/planted/hooks/pre-commit"),
        "#!/bin/sh
",
    )
    .unwrap();
    let away = json!({"source": ".git", "destination": "old-git"});
    let swap_in = json!({"source": "src/planted", "destination": ".git"});
    let guarded = registry(tmp.path(), ProtectedPaths::default());
    assert_eq!(call_on(&rt, &guarded, "move_file", &away).content, REFUSED);
    std::fs::rename(tmp.path().join(".git"), tmp.path().join("old-git")).unwrap();
    assert_eq!(
        call_on(&rt, &guarded, "move_file", &swap_in).content,
        REFUSED
    );
    assert!(!tmp.path().join(".git").exists());
    std::fs::rename(tmp.path().join("old-git"), tmp.path().join(".git")).unwrap();
    let naive = registry(tmp.path(), ProtectedPaths::none());
    assert!(!call_on(&rt, &naive, "move_file", &away).is_error);
    assert!(!call_on(&rt, &naive, "move_file", &swap_in).is_error);
    assert!(tmp.path().join(".git/hooks/pre-commit").exists());
}

#[test]
fn a_hook_written_through_a_symlink_lands_in_the_hooks_without_the_list() {
    let tmp = workspace();
    let rt = runtime();
    let args = json!({"path": "link-to-hooks/pre-commit", "content": "#!/bin/sh\n"});
    let guarded = registry(tmp.path(), ProtectedPaths::default());
    assert_eq!(call_on(&rt, &guarded, "write_file", &args).content, REFUSED);
    assert!(!tmp.path().join(".git/hooks/pre-commit").exists());
    let naive = registry(tmp.path(), ProtectedPaths::none());
    assert!(!call_on(&rt, &naive, "write_file", &args).is_error);
    assert!(tmp.path().join(".git/hooks/pre-commit").exists());
}

/// `.git` itself a symlink to the real repository directory: the path as written is refused
/// (git follows the link), and so is the real place.
#[test]
fn a_repository_reached_through_a_symlinked_git_is_protected_both_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join("real-git/hooks")).unwrap();
    std::fs::write(ws.join("real-git/config"), "").unwrap();
    std::os::unix::fs::symlink("real-git", ws.join(".git")).unwrap();
    let rt = runtime();
    let tools = registry(ws, ProtectedPaths::default());
    let hook = json!({"path": ".git/hooks/pre-commit", "content": "x"});
    assert_eq!(call_on(&rt, &tools, "write_file", &hook).content, REFUSED);
    // The real directory is not `.git` by name: writable (the list is about names git uses).
    let real = json!({"path": "real-git/hooks/pre-commit", "content": "x"});
    assert!(!call_on(&rt, &tools, "write_file", &real).is_error);
}

/// A directory created on the way is checked before its `mkdirat`: nothing is made beneath
/// the hooks through a symlink, even a directory.
#[test]
fn no_directory_is_created_beneath_the_hooks_on_the_way() {
    let tmp = workspace();
    let rt = runtime();
    let tools = registry(tmp.path(), ProtectedPaths::default());
    let args = json!({"path": "link-to-hooks/a/b/c", "content": "x"});
    assert_eq!(call_on(&rt, &tools, "write_file", &args).content, REFUSED);
    assert!(!tmp.path().join(".git/hooks/a").exists());
}

#[test]
fn the_flags_add_patterns_and_drop_the_defaults() {
    let tmp = workspace();
    let line = |id: &str, path: &str| {
        format!(
            "{}\n",
            json!({"id": id, "name": "write_file", "arguments": {"path": path, "content": "x"}})
        )
    };
    let input = line("1", "Makefile") + &line("2", ".git/hooks/pre-commit") + &line("3", "ci/x");
    let refused = json!({"code": "TOOL_EXECUTION_FAILED", "message": "PATH_PROTECTED"});
    let got = call_lines(
        tmp.path(),
        &["--protect", "Makefile", "--protect", "/ci/"],
        &input,
    );
    let contents: Vec<&Value> = got.iter().map(|r| &r["content"]["error"]).collect();
    assert_eq!(contents, [&refused, &refused, &refused]);
    assert!(!tmp.path().join("Makefile").exists());

    let got = call_lines(
        tmp.path(),
        &["--unprotect-defaults", "--protect", "Makefile"],
        &input,
    );
    assert_eq!(got[0]["content"]["error"], refused);
    assert_eq!(got[1]["isError"], false, "{}", got[1]);
    assert_eq!(got[2]["isError"], false, "{}", got[2]);
    assert!(tmp.path().join(".git/hooks/pre-commit").exists());

    // A pattern the list refuses is a usage error, one line naming it.
    for bad in ["!x", "", "../up", "a[b"] {
        let out = support::confine()
            .args(["call", "--root"])
            .arg(tmp.path())
            .args(["--protect", bad])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--protect"), "{bad:?}: {stderr}");
    }
}

/// `confine doctor` shows the list (defaults marked, `--protect` added, `--unprotect-defaults`
/// dropping them) and whether sandboxed children find the hooks read-only here.
#[test]
fn doctor_shows_the_protected_paths_and_what_children_find() {
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
    let text = doctor(&[]);
    let defaults: Vec<String> = confine_tools::DEFAULT_PROTECTED
        .iter()
        .map(|p| format!("{p} (default)"))
        .collect();
    assert!(
        text.contains(&format!("protected:     {}\n", defaults.join(", "))),
        "{text}"
    );
    assert!(text.contains(".git/commondir (default)"), "{text}");
    // Either answer is a fact of this machine; a hook planted by a child is never one.
    let line = text.lines().find(|l| l.starts_with("read-only:")).unwrap();
    assert!(
        line.contains(
            "(a mount namespace of each run's own; a hook planted in a scratch \
             repository: EROFS)"
        ) || line.contains("fails with NODE_SANDBOX_UNAVAILABLE")
            || line.contains("not checked (\"no Node.js\")"),
        "{line}"
    );
    let report: Value = serde_json::from_str(&doctor(&[
        "--json",
        "--unprotect-defaults",
        "--protect",
        "secrets/**",
    ]))
    .unwrap();
    assert_eq!(
        report["protected"]["patterns"],
        json!(["secrets/**"]),
        "{report}"
    );
    assert_eq!(report["protected"]["defaults"], 0);
    let text = doctor(&["--unprotect-defaults"]);
    assert!(
        text.contains("protected:     none (--unprotect-defaults, no --protect)\n"),
        "{text}"
    );
    assert!(
        text.contains("read-only:     not checked (.git/hooks is not protected)"),
        "{text}"
    );
}
