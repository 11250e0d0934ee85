//! Red team through the library: an embedder builds tools with a public factory and gives it
//! a deny list and a protected list in its options; the model then reads a denied file or
//! plants a git hook. Every public factory builds through the one path that applies the
//! options' lists (and the defaults where a factory takes no options: nothing denied, the
//! default protected list), so every tool of every set refuses:
//!
//! * a denied read (`secret.txt`, denied by the options) is `PATH_DENIED` for every reading
//!   tool of the set, and writing it is refused too;
//! * a protected write (`.git/hooks/pre-commit`, a default, and `guarded.txt`, the options'
//!   own pattern) is `PATH_PROTECTED` for every write tool of the set, and nothing lands;
//!
//! each beside its twin: the same tool on a path neither denied nor protected succeeds.
//! `create_coding_tools` built `read_file` and `write_file` without the options' lists before
//! (so a denied file was read and `guarded.txt` written); this file fails on that code.
//! `node_process` has neither a read nor a write of its own here: its children meet the
//! lists under the sandbox (`tests/redteam/protected_hooks.rs`, `tests/redteam/denied_secrets.rs`).

use crate::support;

use std::path::Path;
use std::sync::Arc;

use confine_tools::{
    DeniedPaths, ProtectedPaths, Tool, ToolRegistry, ToolSetOptions, WORKSPACE_TOOLS,
};
use serde_json::{Value, json};
use support::{call_on, runtime};

/// The options an embedder gives: `secret.txt` denied, `guarded.txt` protected beside the
/// defaults.
fn options() -> ToolSetOptions {
    let mut options = ToolSetOptions::default();
    options.denied = Arc::new(DeniedPaths::new(&["secret.txt"]).unwrap());
    options.protected = Arc::new(ProtectedPaths::new(true, &["/guarded.txt"]).unwrap());
    options
}

/// A workspace with a repository's hooks directory, a denied file, a protected file and
/// files neither denied nor protected.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(root.join("secret.txt"), "the secret\n").unwrap();
    std::fs::write(root.join("guarded.txt"), "guard\n").unwrap();
    std::fs::write(root.join("notes.txt"), "note\n").unwrap();
    for name in ["scratch.txt", "draft.txt", "movable.txt", "old.txt"] {
        std::fs::write(root.join(name), "draft\n").unwrap();
    }
    dir
}

/// What a set is expected to honour: the options' own lists, or only the defaults.
#[derive(Clone, Copy, PartialEq)]
enum Lists {
    /// Built with [`options`].
    Options,
    /// Built without options: nothing denied, the default protected list.
    Defaults,
}

/// One attack on one tool: its arguments, the token expected, and the twin's arguments.
struct Probe {
    tool: &'static str,
    attack: Value,
    token: &'static str,
    twin: Value,
    /// Whether the attack needs the options' own lists (a set without options lets it through).
    needs_options: bool,
}

fn probes() -> Vec<Probe> {
    let hook = "#!/bin/sh\necho planted\n";
    let read = |tool, needs_options| Probe {
        tool,
        attack: json!({"path": "secret.txt"}),
        token: "PATH_DENIED",
        twin: json!({"path": "notes.txt"}),
        needs_options,
    };
    vec![
        read("read_file", true),
        read("read_lines", true),
        read("file_info", true),
        Probe {
            tool: "write_file",
            attack: json!({"path": ".git/hooks/pre-commit", "content": hook}),
            token: "PATH_PROTECTED",
            twin: json!({"path": "fresh.txt", "content": hook}),
            needs_options: false,
        },
        Probe {
            tool: "write_file",
            attack: json!({"path": "guarded.txt", "content": "x"}),
            token: "PATH_PROTECTED",
            twin: json!({"path": "notes.txt", "content": "x"}),
            needs_options: true,
        },
        Probe {
            tool: "write_file",
            attack: json!({"path": "secret.txt", "content": "x"}),
            token: "PATH_DENIED",
            twin: json!({"path": "scratch.txt", "content": "x"}),
            needs_options: true,
        },
        Probe {
            tool: "edit_file",
            attack: json!({"path": "guarded.txt", "edits": [{"oldText": "guard", "newText": "x"}]}),
            token: "PATH_PROTECTED",
            twin: json!({"path": "draft.txt", "edits": [{"oldText": "draft", "newText": "final"}]}),
            needs_options: true,
        },
        Probe {
            tool: "create_directory",
            attack: json!({"path": ".git/hooks/pre-commit.d"}),
            token: "PATH_PROTECTED",
            twin: json!({"path": "made"}),
            needs_options: false,
        },
        Probe {
            tool: "move_file",
            attack: json!({"source": "scratch.txt", "destination": ".git/hooks/pre-push"}),
            token: "PATH_PROTECTED",
            twin: json!({"source": "movable.txt", "destination": "moved.txt"}),
            needs_options: false,
        },
        Probe {
            tool: "delete_file",
            attack: json!({"path": "guarded.txt"}),
            token: "PATH_PROTECTED",
            twin: json!({"path": "old.txt"}),
            needs_options: true,
        },
    ]
}

/// Run every probe whose tool `registry` has, in order: each attack refused with its token
/// and changing nothing, each twin served. The tools probed, in order.
fn attack(name: &str, root: &Path, registry: &ToolRegistry, lists: Lists) -> Vec<&'static str> {
    let rt = runtime();
    let mut probed = Vec::new();
    for probe in probes() {
        if registry.get(probe.tool).is_none() {
            continue;
        }
        if probe.needs_options && lists == Lists::Defaults {
            // Nothing of the options to honour; the twin still works.
            let twin = call_on(&rt, registry, probe.tool, &probe.twin);
            assert!(
                !twin.is_error,
                "{name} {}: twin: {}",
                probe.tool, twin.content
            );
            continue;
        }
        let hooks_before = entries(&root.join(".git/hooks"));
        let guarded_before = std::fs::read(root.join("guarded.txt")).ok();
        let result = call_on(&rt, registry, probe.tool, &probe.attack);
        assert!(result.is_error, "{name} {}: {}", probe.tool, result.content);
        let record: Value = serde_json::from_str(&result.content).unwrap();
        assert_eq!(
            record["error"]["message"], probe.token,
            "{name} {}: {record}",
            probe.tool
        );
        assert!(
            !result.content.contains("the secret"),
            "{name}: {}",
            result.content
        );
        assert_eq!(entries(&root.join(".git/hooks")), hooks_before, "{name}");
        assert_eq!(
            std::fs::read(root.join("guarded.txt")).ok(),
            guarded_before,
            "{name}"
        );
        let twin = call_on(&rt, registry, probe.tool, &probe.twin);
        assert!(
            !twin.is_error,
            "{name} {}: twin: {}",
            probe.tool, twin.content
        );
        probed.push(probe.tool);
    }
    assert_eq!(
        std::fs::read_to_string(root.join("secret.txt")).unwrap(),
        "the secret\n"
    );
    probed
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn one(tool: impl Tool + 'static) -> ToolRegistry {
    ToolRegistry::new(vec![Arc::new(tool) as Arc<dyn Tool>]).unwrap()
}

#[test]
fn create_coding_tools_honours_the_options_lists() {
    let dir = workspace();
    let registry = confine_tools::create_coding_tools(dir.path(), options()).unwrap();
    let probed = attack("create_coding_tools", dir.path(), &registry, Lists::Options);
    assert_eq!(
        probed,
        ["read_file", "write_file", "write_file", "write_file"]
    );
}

#[test]
fn create_coding_tools_with_default_options_protects_the_default_list() {
    // The README's "use it from Rust" example.
    let dir = workspace();
    let registry =
        confine_tools::create_coding_tools(dir.path(), ToolSetOptions::default()).unwrap();
    let probed = attack(
        "create_coding_tools",
        dir.path(),
        &registry,
        Lists::Defaults,
    );
    assert_eq!(probed, ["write_file"]);
}

#[test]
fn create_workspace_tools_honours_the_options_lists() {
    let dir = workspace();
    let registry = confine_tools::create_workspace_tools(dir.path(), options()).unwrap();
    let probed = attack(
        "create_workspace_tools",
        dir.path(),
        &registry,
        Lists::Options,
    );
    assert_eq!(probed.len(), probes().len(), "{probed:?}");
}

#[test]
fn create_selected_tools_honours_the_options_lists() {
    for names in [
        WORKSPACE_TOOLS,
        &["read_file", "write_file"],
        &["write_file"],
        &["read_lines", "edit_file", "delete_file"],
    ] {
        let dir = workspace();
        let registry = confine_tools::create_selected_tools(dir.path(), options(), names).unwrap();
        let probed = attack(
            "create_selected_tools",
            dir.path(),
            &registry,
            Lists::Options,
        );
        assert!(!probed.is_empty(), "{names:?}");
    }
}

#[test]
fn factories_without_options_apply_the_defaults() {
    let dir = workspace();
    let write = one(confine_tools::create_write_tool(dir.path()).unwrap());
    assert_eq!(
        attack("create_write_tool", dir.path(), &write, Lists::Defaults),
        ["write_file"]
    );
    let read = one(confine_tools::create_read_tool(dir.path()).unwrap());
    assert!(attack("create_read_tool", dir.path(), &read, Lists::Defaults).is_empty());
    let read_only = confine_tools::create_read_only_tools(dir.path()).unwrap();
    assert!(
        attack(
            "create_read_only_tools",
            dir.path(),
            &read_only,
            Lists::Defaults
        )
        .is_empty()
    );
    // Nothing is denied without options: the default list denies nothing.
    let rt = runtime();
    let secret = call_on(&rt, &read, "read_file", &json!({"path": "secret.txt"}));
    assert!(!secret.is_error, "{}", secret.content);
}
