//! `resolve_in_sandbox`: every attack family, as one table, plus the twins that show what the
//! reference implementation's algorithm would have let through.

use std::path::{Path, PathBuf};

use confine_jail::resolve_in_sandbox;

use crate::sandbox;

const FILES: &[(&str, &str)] = &[("ok.txt", "ok"), ("sub/deep.txt", "deep")];
const DIRS: &[&str] = &["sub/inner", "~"];
const SYMLINKS: &[(&str, &str)] = &[
    ("link_etc", "/etc"),
    ("link_in_rel", "sub"),
    ("link_in_abs", "$ROOT/sub"),
    ("link_out_rel", "../cc-task-abc-evil"),
    ("link_out_abs", "$OUTSIDE"),
    ("link_secret", "$OUTSIDE/secret.txt"),
    ("sub/up", ".."),
    ("sub/up2", "../.."),
    ("chain1", "chain2"),
    ("chain2", "link_in_rel"),
    ("dangle_in", "missing.txt"),
    ("dangle_in_dir", "missing_dir"),
    ("dangle_out", "$OUTSIDE/new.txt"),
    ("dangle_out_rel", "../cc-task-abc-evil/new.txt"),
    ("dangle_out_dir", "/nonexistent-confine-dir"),
    ("dangle_to_dangle_out", "dangle_out"),
    (
        "dangle_via_missing",
        "missing_dir/../../cc-task-abc-evil/new.txt",
    ),
    ("loop_a", "loop_b"),
    ("loop_b", "loop_a"),
    ("self_loop", "self_loop"),
    ("out_and_back", "../cc-task-abc/ok.txt"),
];

/// `(path, ok)`: the reference implementation's five example paths first, then one family per block.
const CASES: &[(&str, bool)] = &[
    // The document's five.
    ("ok.txt", true),
    ("sub/deep.txt", true),
    ("sub/../ok.txt", true),
    ("../escape", false),
    ("/etc/passwd", false),
    // `..` traversal, collapsed lexically like node's path.resolve.
    ("..", false),
    ("../../../../../../etc/passwd", false),
    ("sub/../../escape", false),
    ("sub/inner/../../ok.txt", true),
    ("../cc-task-abc/ok.txt", true),
    ("./././ok.txt", true),
    ("", true),
    (".", true),
    ("sub/", true),
    // Absolute paths, in and out.
    ("$ROOT", true),
    ("$ROOT/ok.txt", true),
    ("$ROOT/sub/new.txt", true),
    ("$ROOT/../escape", false),
    ("/", false),
    ("/tmp", false),
    ("//etc/passwd", false),
    ("/../../etc", false),
    // The prefix-sharing sibling.
    ("../cc-task-abc-evil", false),
    ("../cc-task-abc-evil/secret.txt", false),
    ("$OUTSIDE/secret.txt", false),
    ("$ROOT-evil/secret.txt", false),
    ("$ROOT/../cc-task-abc-evil/secret.txt", false),
    // Files that do not exist yet (create targets).
    ("new.txt", true),
    ("newdir/deeper/new.txt", true),
    ("ok.txt/beneath-a-file", true),
    // Symlinks pointing inside, relative and absolute, chained.
    ("link_in_rel", true),
    ("link_in_rel/deep.txt", true),
    ("link_in_abs/deep.txt", true),
    ("link_in_abs/new.txt", true),
    ("chain1/deep.txt", true),
    ("sub/up/ok.txt", true),
    ("out_and_back", true),
    // Symlinks pointing outside, relative and absolute.
    ("link_etc", false),
    ("link_etc/passwd", false),
    ("link_etc/new-file", false),
    ("link_out_rel", false),
    ("link_out_rel/secret.txt", false),
    ("link_out_abs/secret.txt", false),
    ("link_secret", false),
    ("sub/up2", false),
    ("sub/up2/cc-task-abc-evil/secret.txt", false),
    // `..` after a symlink is collapsed before resolution, so it never climbs the target.
    ("link_etc/../ok.txt", true),
    // Dangling symlinks are judged by where they point.
    ("dangle_in", true),
    ("dangle_in_dir/new.txt", true),
    ("dangle_out", false),
    ("dangle_out_rel", false),
    ("dangle_out_dir/x", false),
    ("dangle_to_dangle_out", false),
    ("dangle_via_missing", false),
    // Loops are errors.
    ("loop_a", false),
    ("loop_a/x", false),
    ("self_loop", false),
    // Names are literal: no home expansion, no percent decoding, no backslash separator.
    ("~", true),
    ("~/x", true),
    ("~root", true),
    ("%2e%2e", true),
    ("%2e%2e/%2e%2e/etc/passwd", true),
    ("..%2fescape", true),
    ("..\\escape", true),
    ("$HOME", true),
];

#[test]
fn guard_attack_families_table() {
    let s = sandbox(FILES, DIRS, SYMLINKS);
    let mut wrong = Vec::new();
    for &(path, ok) in CASES {
        let r = resolve_in_sandbox(s.root(), s.substitute(path));
        assert_eq!(r.ok, r.resolved.is_some(), "{path}");
        assert_eq!(r.ok, r.error.is_none(), "{path}");
        if r.ok != ok {
            wrong.push((path, r.ok, r.error.map(|e| e.code())));
        }
        if let Some(resolved) = r.resolved {
            assert!(resolved.starts_with(s.root()), "{path}: {resolved:?}");
        }
    }
    assert!(wrong.is_empty(), "wrong verdicts: {wrong:?}");
    s.close().unwrap();
}

#[test]
fn guard_resolved_paths_are_canonical() {
    let s = sandbox(FILES, DIRS, SYMLINKS);
    let root = s.root();
    let cases: &[(&str, PathBuf)] = &[
        ("ok.txt", root.join("ok.txt")),
        ("sub/../ok.txt", root.join("ok.txt")),
        ("link_in_abs/deep.txt", root.join("sub/deep.txt")),
        ("chain1/new.txt", root.join("sub/new.txt")),
        ("dangle_in", root.join("missing.txt")),
        ("dangle_in_dir/a/b", root.join("missing_dir/a/b")),
        ("", root.to_path_buf()),
        ("~", root.join("~")),
    ];
    for (path, expect) in cases {
        let r = resolve_in_sandbox(root, path);
        assert_eq!(r.resolved.as_deref(), Some(expect.as_path()), "{path}");
    }
    s.close().unwrap();
}

#[test]
fn guard_error_codes() {
    let s = sandbox(FILES, DIRS, SYMLINKS);
    let code = |task: &Path, p: &str| resolve_in_sandbox(task, p).error.map(|e| e.code());
    assert_eq!(code(s.root(), "../escape"), Some("PATH_OUTSIDE_SANDBOX"));
    assert_eq!(
        code(s.root(), "link_etc/passwd"),
        Some("PATH_OUTSIDE_SANDBOX")
    );
    assert_eq!(code(s.root(), "loop_a"), Some("SYMLINK_LOOP"));
    assert_eq!(code(s.root(), "self_loop/x"), Some("SYMLINK_LOOP"));
    assert_eq!(code(s.root(), "a\0b"), Some("INVALID_PATH"));
    assert_eq!(
        code(&s.root().join("missing"), "x"),
        Some("SANDBOX_ROOT_INVALID")
    );
    assert_eq!(
        code(&s.root().join("ok.txt"), "x"),
        Some("SANDBOX_ROOT_INVALID")
    );
    assert_eq!(code(s.root(), "ok.txt"), None);
    let err = resolve_in_sandbox(s.root(), "../escape")
        .into_result()
        .unwrap_err();
    assert_eq!(err.kind(), confine_jail::ErrorKind::OutsideSandbox);
    s.close().unwrap();
}

#[test]
fn guard_root_given_through_a_symlink_is_canonicalized() {
    let s = sandbox(FILES, DIRS, SYMLINKS);
    let alias = s.outside().join("alias-of-root");
    std::os::unix::fs::symlink(s.root(), &alias).unwrap();
    let r = resolve_in_sandbox(&alias, "ok.txt");
    assert_eq!(r.resolved, Some(s.root().join("ok.txt")));
    // An absolute path through the alias lands inside once resolved: accepted.
    let r = resolve_in_sandbox(&alias, alias.join("ok.txt"));
    assert_eq!(r.resolved, Some(s.root().join("ok.txt")));
    // The alias's own directory is outside.
    assert!(!resolve_in_sandbox(&alias, s.outside().join("secret.txt")).ok);
    assert!(resolve_in_sandbox(&alias, s.root().join("ok.txt")).ok);
    s.close().unwrap();
}

/// The reference implementation's algorithm, transcribed: resolve lexically, walk up to the deepest
/// ancestor that exists (following symlinks, as `existsSync` does), realpath it, re-append.
fn document_algorithm(root: &Path, p: &str) -> (bool, PathBuf) {
    let root = root.canonicalize().unwrap();
    let mut full = PathBuf::from("/");
    for c in root.join(p).components() {
        match c {
            std::path::Component::ParentDir => {
                full.pop();
            }
            std::path::Component::Normal(n) => full.push(n),
            _ => {}
        }
    }
    let mut existing = full.clone();
    let mut tail = Vec::new();
    while !existing.exists() {
        tail.push(existing.file_name().unwrap().to_owned());
        existing.pop();
    }
    let mut real = existing.canonicalize().unwrap();
    for t in tail.iter().rev() {
        real.push(t);
    }
    (real.starts_with(&root), real)
}

#[test]
fn guard_dangling_symlink_twin_escapes_with_document_algorithm() {
    let s = sandbox(FILES, DIRS, SYMLINKS);
    for link in ["dangle_out", "dangle_out_rel", "dangle_to_dangle_out"] {
        // The document's algorithm accepts the dangling link (it sees a missing leaf) ...
        let (ok, resolved) = document_algorithm(s.root(), link);
        assert!(ok, "{link}");
        // ... and a create through what it returned lands outside the tree.
        std::fs::write(&resolved, "escaped").unwrap();
        assert_eq!(
            std::fs::read_to_string(s.outside().join("new.txt")).unwrap(),
            "escaped"
        );
        std::fs::remove_file(s.outside().join("new.txt")).unwrap();
        // The guard refuses it.
        assert!(!resolve_in_sandbox(s.root(), link).ok, "{link}");
    }
    // A loop: the document's algorithm accepts it too, the guard does not.
    assert!(document_algorithm(s.root(), "loop_a/x").0);
    assert!(!resolve_in_sandbox(s.root(), "loop_a/x").ok);
    s.close().unwrap();
}

#[test]
fn guard_string_prefix_twin_would_accept_the_sibling() {
    let s = sandbox(FILES, DIRS, SYMLINKS);
    let sibling = s.outside().join("secret.txt");
    // A string-prefix check is fooled by the sibling that shares the root's prefix ...
    assert!(
        sibling
            .to_string_lossy()
            .starts_with(&*s.root().to_string_lossy())
    );
    // ... the guard compares components.
    assert!(!resolve_in_sandbox(s.root(), &sibling).ok);
    s.close().unwrap();
}
