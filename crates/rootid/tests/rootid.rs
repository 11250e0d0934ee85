//! Root capture and re-verification, each replacement as an attack.

use std::os::unix::fs::symlink;

use confine_rootid::{RootErrorKind, WorkspaceRoot};

fn kind(r: Result<WorkspaceRoot, confine_rootid::RootError>) -> RootErrorKind {
    r.expect_err("capture must fail").kind()
}

#[test]
fn capture_accepts_a_directory_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let root = WorkspaceRoot::capture(tmp.path()).unwrap();
    root.verify().unwrap();
    assert_eq!(root.canonical(), tmp.path().canonicalize().unwrap());
    assert!(root.dir().metadata(".").unwrap().is_dir());
}

#[test]
fn capture_through_symlink_is_canonicalized() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    symlink(&real, &link).unwrap();
    let root = WorkspaceRoot::capture(&link).unwrap();
    assert_eq!(root.canonical(), real.canonicalize().unwrap());
    assert_eq!(root.original(), link);
    root.verify().unwrap();
}

#[test]
fn capture_relative_path_is_made_absolute() {
    let root = WorkspaceRoot::capture(".").unwrap();
    assert!(root.original().is_absolute());
    root.verify().unwrap();
}

#[test]
fn capture_refuses_unusable_roots_with_their_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    assert_eq!(kind(WorkspaceRoot::capture("")), RootErrorKind::Invalid);
    assert_eq!(kind(WorkspaceRoot::capture("a\0b")), RootErrorKind::Invalid);
    assert_eq!(
        kind(WorkspaceRoot::capture(tmp.path().join("missing"))),
        RootErrorKind::NotFound
    );
    assert_eq!(
        kind(WorkspaceRoot::capture(&file)),
        RootErrorKind::NotDirectory
    );
    assert_eq!(
        kind(WorkspaceRoot::capture(file.join("below"))),
        RootErrorKind::NotDirectory
    );
    let dangling = tmp.path().join("dangling");
    symlink(tmp.path().join("nowhere"), &dangling).unwrap();
    assert_eq!(
        kind(WorkspaceRoot::capture(&dangling)),
        RootErrorKind::NotFound
    );
    assert_eq!(RootErrorKind::Invalid.code(), "INVALID_WORKSPACE_ROOT");
}

#[test]
fn error_message_carries_no_host_path() {
    let tmp = tempfile::tempdir().unwrap();
    let err = WorkspaceRoot::capture(tmp.path().join("secret-name")).unwrap_err();
    let text = err.to_string();
    assert_eq!(text, "WORKSPACE_ROOT_NOT_FOUND");
    assert!(!text.contains("secret-name"));
}

#[test]
fn verify_detects_deleted_and_recreated_root() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let root = WorkspaceRoot::capture(&ws).unwrap();
    std::fs::remove_dir(&ws).unwrap();
    assert_eq!(root.verify().unwrap_err().kind(), RootErrorKind::Changed);
    std::fs::create_dir(&ws).unwrap();
    assert_eq!(root.verify().unwrap_err().kind(), RootErrorKind::Changed);
}

#[test]
fn verify_detects_renamed_root_replaced_by_another() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let other = tmp.path().join("other");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&other).unwrap();
    let root = WorkspaceRoot::capture(&ws).unwrap();
    std::fs::rename(&ws, tmp.path().join("moved")).unwrap();
    std::fs::rename(&other, &ws).unwrap();
    assert_eq!(root.verify().unwrap_err().kind(), RootErrorKind::Changed);
}

#[test]
fn verify_detects_repointed_root_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let link = tmp.path().join("link");
    symlink(&a, &link).unwrap();
    let root = WorkspaceRoot::capture(&link).unwrap();
    root.verify().unwrap();
    let tmp_link = tmp.path().join("link.new");
    symlink(&b, &tmp_link).unwrap();
    std::fs::rename(&tmp_link, &link).unwrap();
    assert_eq!(root.verify().unwrap_err().kind(), RootErrorKind::Changed);
    // Pointing it back makes the root whole again: the same directory, not a replacement.
    let back = tmp.path().join("link.back");
    symlink(&a, &back).unwrap();
    std::fs::rename(&back, &link).unwrap();
    root.verify().unwrap();
}

#[test]
fn verify_detects_deleted_root() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let root = WorkspaceRoot::capture(&ws).unwrap();
    std::fs::remove_dir(&ws).unwrap();
    assert_eq!(root.verify().unwrap_err().code(), "WORKSPACE_ROOT_CHANGED");
}

#[test]
fn verify_detects_an_ancestor_replaced_by_a_symlink_to_the_same_directory() {
    // The root is still the same inode, reached through a symlink: its path no longer
    // canonicalizes to the captured one, so it is not adopted.
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let parent = base.join("parent");
    std::fs::create_dir_all(parent.join("ws")).unwrap();
    let root = WorkspaceRoot::capture(parent.join("ws")).unwrap();
    assert_eq!(root.original(), root.canonical());
    root.verify().unwrap();
    std::fs::rename(&parent, base.join("moved")).unwrap();
    symlink(base.join("moved"), &parent).unwrap();
    assert_eq!(
        std::fs::canonicalize(parent.join("ws")).unwrap(),
        base.join("moved/ws")
    );
    assert_eq!(root.verify().unwrap_err().kind(), RootErrorKind::Changed);
}

#[test]
fn verify_detects_the_root_itself_replaced_by_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let ws = base.join("ws");
    std::fs::create_dir(&ws).unwrap();
    let root = WorkspaceRoot::capture(&ws).unwrap();
    std::fs::rename(&ws, base.join("real")).unwrap();
    symlink(base.join("real"), &ws).unwrap();
    assert_eq!(root.verify().unwrap_err().kind(), RootErrorKind::Changed);
}
