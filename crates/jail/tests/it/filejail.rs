//! `FileJail`: one table of checks run through both code paths (`resolve_for_*` and
//! `open_for_*`), each on a fresh tree, plus the cases that only descriptors can decide.

use std::io::{Read, Write};
use std::path::PathBuf;

use crate::Sandbox;
use confine_jail::{ErrorKind, FileJail, JailPolicy};

use crate::sandbox;

const FILES: &[(&str, &str)] = &[
    ("pub/a.txt", "a"),
    ("pub/deny/s.txt", "denied"),
    ("pub/deny/pub2/p.txt", "denied too"),
    ("ro/r.txt", "r"),
];
const DIRS: &[&str] = &["pub/sub"];
const SYMLINKS: &[(&str, &str)] = &[
    ("pub/in", "a.txt"),
    ("pub/in_abs", "$ROOT/pub/a.txt"),
    ("pub/in_ro", "../ro/r.txt"),
    ("pub/out", "$OUTSIDE/secret.txt"),
    ("pub/out_rel", "../../cc-task-abc-evil/secret.txt"),
    ("pub/outdir", "$OUTSIDE"),
    ("pub/todeny", "deny/s.txt"),
    ("pub/todenydir", "deny"),
    ("pub/dangle_in", "new_in.txt"),
    ("pub/dangle_out", "$OUTSIDE/new.txt"),
    ("pub/dangle_deny", "deny/new.txt"),
    ("pub/loop1", "loop2"),
    ("pub/loop2", "loop1"),
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Read,
    Write,
}

/// `(op, path, expected)`: `Ok(())` or the error kind. Policy: read `$ROOT`, write
/// `$ROOT/pub`, deny `$ROOT/pub/deny`; cwd `$ROOT`.
const CASES: &[(Op, &str, Result<(), ErrorKind>)] = &[
    // Plain reads, relative and absolute.
    (Op::Read, "pub/a.txt", Ok(())),
    (Op::Read, "ro/r.txt", Ok(())),
    (Op::Read, "$ROOT/ro/r.txt", Ok(())),
    (Op::Read, "pub/sub/../a.txt", Ok(())),
    // Symlinks inside that stay inside.
    (Op::Read, "pub/in", Ok(())),
    (Op::Read, "pub/in_abs", Ok(())),
    (Op::Read, "pub/in_ro", Ok(())),
    // Outside: `..`, absolute, the prefix-sharing sibling, symlinks out.
    (
        Op::Read,
        "../cc-task-abc-evil/secret.txt",
        Err(ErrorKind::OutsideReadBounds),
    ),
    (
        Op::Read,
        "$OUTSIDE/secret.txt",
        Err(ErrorKind::OutsideReadBounds),
    ),
    (Op::Read, "/etc/passwd", Err(ErrorKind::OutsideReadBounds)),
    (Op::Read, "pub/out", Err(ErrorKind::OutsideReadBounds)),
    (Op::Read, "pub/out_rel", Err(ErrorKind::OutsideReadBounds)),
    (
        Op::Read,
        "pub/outdir/secret.txt",
        Err(ErrorKind::OutsideReadBounds),
    ),
    (
        Op::Read,
        "pub/dangle_out",
        Err(ErrorKind::OutsideReadBounds),
    ),
    // Deny beats allow, directly and through symlinks planted inside the allow root.
    (Op::Read, "pub/deny/s.txt", Err(ErrorKind::Denied)),
    (Op::Read, "pub/deny/pub2/p.txt", Err(ErrorKind::Denied)),
    (Op::Read, "pub/todeny", Err(ErrorKind::Denied)),
    (Op::Read, "pub/todenydir/s.txt", Err(ErrorKind::Denied)),
    // Missing, dangling, loops.
    (Op::Read, "pub/missing.txt", Err(ErrorKind::NotFound)),
    (Op::Read, "pub/dangle_in", Err(ErrorKind::NotFound)),
    (Op::Read, "pub/loop1", Err(ErrorKind::SymlinkLoop)),
    (Op::Read, "a\0b", Err(ErrorKind::InvalidPath)),
    // Writes.
    (Op::Write, "pub/new.txt", Ok(())),
    (Op::Write, "pub/a.txt", Ok(())),
    (Op::Write, "pub/sub/new.txt", Ok(())),
    (Op::Write, "$ROOT/pub/abs.txt", Ok(())),
    (Op::Write, "pub/in", Ok(())),
    (Op::Write, "pub/dangle_in", Ok(())),
    (Op::Write, "ro/r.txt", Err(ErrorKind::OutsideWriteBounds)),
    (Op::Write, "ro/new.txt", Err(ErrorKind::OutsideWriteBounds)),
    (
        Op::Write,
        "new-at-root.txt",
        Err(ErrorKind::OutsideWriteBounds),
    ),
    (
        Op::Write,
        "pub/../ro/x.txt",
        Err(ErrorKind::OutsideWriteBounds),
    ),
    (
        Op::Write,
        "$OUTSIDE/new.txt",
        Err(ErrorKind::OutsideWriteBounds),
    ),
    // Leaf symlinks cannot smuggle a write out, dangling or not.
    (Op::Write, "pub/in_ro", Err(ErrorKind::OutsideWriteBounds)),
    (Op::Write, "pub/out", Err(ErrorKind::OutsideWriteBounds)),
    (
        Op::Write,
        "pub/dangle_out",
        Err(ErrorKind::OutsideWriteBounds),
    ),
    (
        Op::Write,
        "pub/outdir/new.txt",
        Err(ErrorKind::OutsideWriteBounds),
    ),
    (Op::Write, "pub/todeny", Err(ErrorKind::Denied)),
    (Op::Write, "pub/dangle_deny", Err(ErrorKind::Denied)),
    (Op::Write, "pub/deny/new.txt", Err(ErrorKind::Denied)),
    (Op::Write, "pub/todenydir/new.txt", Err(ErrorKind::Denied)),
    // Parents.
    (Op::Write, "pub/nodir/x.txt", Err(ErrorKind::ParentNotFound)),
    (Op::Write, "pub/a.txt/x", Err(ErrorKind::ParentNotDirectory)),
    (Op::Write, "pub/loop1", Err(ErrorKind::SymlinkLoop)),
];

fn fixture() -> (Sandbox, FileJail) {
    let s = sandbox(FILES, DIRS, SYMLINKS);
    let policy = JailPolicy {
        allow_read: vec![s.root().to_path_buf()],
        allow_write: vec![s.root().join("pub")],
        deny: vec![s.root().join("pub/deny")],
    };
    let jail = FileJail::new(s.root(), policy).unwrap();
    (s, jail)
}

fn kind<T>(r: Result<T, confine_jail::Error>) -> Result<(), ErrorKind> {
    r.map(|_| ()).map_err(|e| e.kind())
}

#[test]
fn jail_table_through_resolve() {
    let (s, jail) = fixture();
    let mut wrong = Vec::new();
    for &(op, path, expect) in CASES {
        let p = s.substitute(path);
        let got = match op {
            Op::Read => jail.resolve_for_read(&p),
            Op::Write => jail.resolve_for_write(&p),
        };
        if let Ok(resolved) = &got {
            assert!(resolved.starts_with(s.root()), "{path}: {resolved:?}");
        }
        let got = kind(got);
        if got != expect {
            wrong.push((op, path, got, expect));
        }
    }
    assert!(wrong.is_empty(), "wrong verdicts: {wrong:#?}");
    drop(jail);
    s.close().unwrap();
}

#[test]
fn jail_table_through_open() {
    let (s, jail) = fixture();
    let mut wrong = Vec::new();
    for &(op, path, expect) in CASES {
        let p = s.substitute(path);
        let got = match op {
            Op::Read => jail.open_for_read(&p),
            Op::Write => jail.open_for_write(&p),
        };
        let got = kind(got);
        if got != expect {
            wrong.push((op, path, got, expect));
        }
    }
    assert!(wrong.is_empty(), "wrong verdicts: {wrong:#?}");
    // Nothing was created outside or in the deny bound.
    assert!(!s.outside().join("new.txt").exists());
    assert!(!s.root().join("pub/deny/new.txt").exists());
    drop(jail);
    s.close().unwrap();
}

#[test]
fn jail_resolved_paths_follow_symlinks() {
    let (s, jail) = fixture();
    let root = s.root();
    assert_eq!(
        jail.resolve_for_read("pub/in").unwrap(),
        root.join("pub/a.txt")
    );
    assert_eq!(
        jail.resolve_for_read("pub/in_ro").unwrap(),
        root.join("ro/r.txt")
    );
    assert_eq!(
        jail.resolve_for_write("pub/in").unwrap(),
        root.join("pub/a.txt")
    );
    assert_eq!(
        jail.resolve_for_write("pub/dangle_in").unwrap(),
        root.join("pub/new_in.txt")
    );
    assert_eq!(
        jail.resolve_for_write("pub/x.txt").unwrap(),
        root.join("pub/x.txt")
    );
    drop(jail);
    s.close().unwrap();
}

#[test]
fn open_for_write_through_inner_leaf_symlink_writes_the_target_and_keeps_the_link() {
    let (s, jail) = fixture();
    jail.open_for_write("pub/in")
        .unwrap()
        .write_all(b"via link")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(s.root().join("pub/a.txt")).unwrap(),
        "via link"
    );
    assert!(s.root().join("pub/in").is_symlink());
    jail.open_for_write("pub/dangle_in")
        .unwrap()
        .write_all(b"new")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(s.root().join("pub/new_in.txt")).unwrap(),
        "new"
    );
    assert!(s.root().join("pub/dangle_in").is_symlink());
    drop(jail);
    s.close().unwrap();
}

#[test]
fn open_for_write_truncates_only_after_the_checks() {
    let (s, jail) = fixture();
    std::fs::write(s.root().join("pub/long.txt"), "a long old content").unwrap();
    jail.open_for_write("pub/long.txt")
        .unwrap()
        .write_all(b"x")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(s.root().join("pub/long.txt")).unwrap(),
        "x"
    );
    // A refused write leaves the denied file as it was.
    assert_eq!(
        jail.open_for_write("pub/todeny").unwrap_err().kind(),
        ErrorKind::Denied
    );
    assert_eq!(
        std::fs::read_to_string(s.root().join("pub/deny/s.txt")).unwrap(),
        "denied"
    );
    drop(jail);
    s.close().unwrap();
}

#[test]
fn open_refuses_fifos_and_directories_without_blocking() {
    let (s, jail) = fixture();
    let fifo = s.root().join("pub/fifo");
    testkit::fixture::mkfifo(&fifo);
    assert_eq!(
        jail.open_for_read("pub/fifo").unwrap_err().kind(),
        ErrorKind::NotRegular
    );
    assert_eq!(
        jail.open_for_write("pub/fifo").unwrap_err().kind(),
        ErrorKind::NotRegular
    );
    assert_eq!(
        jail.open_for_read("pub/sub").unwrap_err().kind(),
        ErrorKind::NotRegular
    );
    assert_eq!(
        jail.open_for_write("pub/sub").unwrap_err().kind(),
        ErrorKind::NotRegular
    );
    assert_eq!(
        jail.open_for_write("pub").unwrap_err().kind(),
        ErrorKind::NotRegular
    );
    // The path decisions themselves allow them: they are inside the bounds.
    assert!(jail.resolve_for_read("pub/fifo").is_ok());
    assert!(jail.resolve_for_read("pub/sub").is_ok());
    drop(jail);
    s.close().unwrap();
}

#[test]
fn open_for_read_returns_the_content() {
    let (s, jail) = fixture();
    let mut text = String::new();
    jail.open_for_read("pub/in_abs")
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "a");
    drop(jail);
    s.close().unwrap();
}

#[test]
fn deny_beats_allow_whatever_the_nesting() {
    let (s, _) = fixture();
    let root = s.root();
    let policy = JailPolicy {
        allow_read: vec![root.join("pub/deny/pub2"), root.join("pub/deny")],
        allow_write: vec![root.join("pub/deny")],
        deny: vec![root.join("pub/deny")],
    };
    let jail = FileJail::new(root, policy).unwrap();
    for p in ["pub/deny/s.txt", "pub/deny/pub2/p.txt"] {
        assert_eq!(
            jail.resolve_for_read(p).unwrap_err().kind(),
            ErrorKind::Denied
        );
        assert_eq!(jail.open_for_read(p).unwrap_err().kind(), ErrorKind::Denied);
    }
    assert_eq!(
        jail.open_for_write("pub/deny/n.txt").unwrap_err().kind(),
        ErrorKind::Denied
    );
    assert!(!root.join("pub/deny/n.txt").exists());
    drop(jail);
    s.close().unwrap();
}

#[test]
fn deny_bound_that_is_a_file_is_denied_also_through_a_hard_link() {
    let (s, _) = fixture();
    let root = s.root();
    std::fs::hard_link(root.join("pub/deny/s.txt"), root.join("pub/hard.txt")).unwrap();
    let policy = JailPolicy {
        allow_read: vec![root.to_path_buf()],
        allow_write: vec![],
        deny: vec![root.join("pub/deny/s.txt")],
    };
    let jail = FileJail::new(root, policy).unwrap();
    assert_eq!(
        jail.resolve_for_read("pub/deny/s.txt").unwrap_err().kind(),
        ErrorKind::Denied
    );
    // By path the hard link is allowed; the descriptor check knows the inode.
    assert!(jail.resolve_for_read("pub/hard.txt").is_ok());
    assert_eq!(
        jail.open_for_read("pub/hard.txt").unwrap_err().kind(),
        ErrorKind::Denied
    );
    drop(jail);
    s.close().unwrap();
}

#[test]
fn deny_directory_exchanged_into_an_allowed_name_stays_denied_on_open() {
    let (s, jail) = fixture();
    let root = s.root();
    std::fs::write(root.join("pub/sub/s.txt"), "allowed").unwrap();
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        root.join("pub/sub"),
        rustix::fs::CWD,
        root.join("pub/deny"),
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap();
    // `pub/sub` is now the directory that was the deny bound.
    assert_eq!(
        std::fs::read_to_string(root.join("pub/sub/s.txt")).unwrap(),
        "denied"
    );
    // Judged by path it is an allowed name; judged by the opened object it is the deny bound.
    assert!(jail.resolve_for_read("pub/sub/s.txt").is_ok());
    assert_eq!(
        jail.open_for_read("pub/sub/s.txt").unwrap_err().kind(),
        ErrorKind::Denied
    );
    assert_eq!(
        jail.open_for_write("pub/sub/n.txt").unwrap_err().kind(),
        ErrorKind::Denied
    );
    assert!(!root.join("pub/sub/n.txt").exists());
    // And the name of the deny bound still denies by path.
    assert_eq!(
        jail.resolve_for_read("pub/deny/s.txt").unwrap_err().kind(),
        ErrorKind::Denied
    );
    drop(jail);
    s.close().unwrap();
}

#[test]
fn relative_paths_and_bounds_resolve_against_cwd() {
    let (s, _) = fixture();
    let root = s.root();
    let policy = JailPolicy {
        allow_read: vec![PathBuf::from("."), PathBuf::from("../ro")],
        allow_write: vec![PathBuf::from("sub")],
        deny: vec![PathBuf::from("deny")],
    };
    let jail = FileJail::new(root.join("pub"), policy).unwrap();
    assert_eq!(jail.cwd(), root.join("pub"));
    assert_eq!(
        jail.resolve_for_read("a.txt").unwrap(),
        root.join("pub/a.txt")
    );
    assert_eq!(
        jail.resolve_for_read("../ro/r.txt").unwrap(),
        root.join("ro/r.txt")
    );
    assert_eq!(
        jail.resolve_for_read("deny/s.txt").unwrap_err().kind(),
        ErrorKind::Denied
    );
    assert_eq!(
        jail.resolve_for_write("a.txt").unwrap_err().kind(),
        ErrorKind::OutsideWriteBounds
    );
    assert!(jail.open_for_write("sub/w.txt").is_ok());
    drop(jail);
    s.close().unwrap();
}

#[test]
fn bounds_that_do_not_exist_stay_paths() {
    let (s, _) = fixture();
    let root = s.root();
    let policy = JailPolicy {
        allow_read: vec![root.join("later")],
        allow_write: vec![root.join("later")],
        deny: vec![root.join("later/no")],
    };
    let jail = FileJail::new(root, policy).unwrap();
    assert_eq!(
        jail.resolve_for_write("later/x").unwrap_err().kind(),
        ErrorKind::ParentNotFound
    );
    // Created later as a real directory: it grants, and its missing deny bound denies.
    std::fs::create_dir(root.join("later")).unwrap();
    jail.open_for_write("later/x")
        .unwrap()
        .write_all(b"x")
        .unwrap();
    assert!(jail.open_for_read("later/x").is_ok());
    assert_eq!(
        jail.open_for_write("later/no").unwrap_err().kind(),
        ErrorKind::Denied
    );
    std::fs::create_dir(root.join("later/no")).unwrap();
    assert_eq!(
        jail.open_for_write("later/no/y").unwrap_err().kind(),
        ErrorKind::Denied
    );
    // Replaced by a symlink elsewhere: the bound does not follow it.
    std::fs::remove_dir_all(root.join("later")).unwrap();
    std::os::unix::fs::symlink(root.join("pub"), root.join("later")).unwrap();
    assert_eq!(
        jail.resolve_for_read("later/a.txt").unwrap_err().kind(),
        ErrorKind::OutsideReadBounds
    );
    assert_eq!(
        jail.open_for_write("later/new.txt").unwrap_err().kind(),
        ErrorKind::OutsideWriteBounds
    );
    drop(jail);
    s.close().unwrap();
}

#[test]
fn bound_that_is_a_file_allows_that_file_alone() {
    let (s, _) = fixture();
    let root = s.root();
    let policy = JailPolicy {
        allow_read: vec![root.join("ro/r.txt")],
        allow_write: vec![root.join("pub/a.txt")],
        deny: vec![],
    };
    let jail = FileJail::new(root, policy).unwrap();
    assert!(jail.open_for_read("ro/r.txt").is_ok());
    assert_eq!(
        jail.open_for_read("pub/a.txt").unwrap_err().kind(),
        ErrorKind::OutsideReadBounds
    );
    jail.open_for_write("pub/a.txt")
        .unwrap()
        .write_all(b"w")
        .unwrap();
    assert_eq!(
        jail.open_for_write("pub/b.txt").unwrap_err().kind(),
        ErrorKind::OutsideWriteBounds
    );
    drop(jail);
    s.close().unwrap();
}

#[test]
fn unresolvable_bound_fails_construction() {
    let (s, _) = fixture();
    let root = s.root();
    let policy = JailPolicy {
        allow_read: vec![root.join("pub/loop1")],
        ..JailPolicy::default()
    };
    assert_eq!(
        FileJail::new(root, policy).unwrap_err().kind(),
        ErrorKind::InvalidBound
    );
    s.close().unwrap();
}

#[test]
fn naive_use_of_a_decided_path_follows_a_later_symlink() {
    // The deterministic half of the race: a path decided, then a directory swapped for a
    // symlink. The path is stale; `open_for_*` decides again and opens by descriptor.
    let (s, jail) = fixture();
    let root = s.root();
    std::fs::write(root.join("pub/sub/f.txt"), "inside").unwrap();
    std::fs::create_dir(s.outside().join("sub")).unwrap();
    std::fs::write(s.outside().join("sub/f.txt"), "outside").unwrap();
    let decided = jail.resolve_for_read("pub/sub/f.txt").unwrap();
    std::fs::rename(root.join("pub/sub"), root.join("pub/sub.old")).unwrap();
    std::os::unix::fs::symlink(s.outside().join("sub"), root.join("pub/sub")).unwrap();
    // The naive use of the decided path escapes ...
    assert_eq!(std::fs::read_to_string(&decided).unwrap(), "outside");
    // ... the jail's open refuses.
    assert_eq!(
        jail.open_for_read("pub/sub/f.txt").unwrap_err().kind(),
        ErrorKind::OutsideReadBounds
    );
    let mut text = String::new();
    jail.open_for_read("pub/sub.old/f.txt")
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "inside");
    drop(jail);
    s.close().unwrap();
}
