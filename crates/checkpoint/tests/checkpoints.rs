//! The store, snapshots and restores, through the crate's API.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::sync::Arc;

use confine_checkpoint::{CallInfo, Checkpoints, Config, Error, Exclude, ExcludeNothing, Scope};
use confine_rootid::WorkspaceRoot;

/// A tree as the test sees it: path -> (kind, bytes or link target, mode).
type Tree = BTreeMap<String, (char, Vec<u8>, u32)>;

fn record(root: &Path) -> Tree {
    fn go(dir: &Path, prefix: &str, out: &mut Tree) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for name in names {
            let name = name.to_str().unwrap().to_owned();
            if name == ".git" {
                continue;
            }
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let full = dir.join(&name);
            let md = fs::symlink_metadata(&full).unwrap();
            let mode = md.permissions().mode() & 0o7777;
            if md.file_type().is_symlink() {
                let t = fs::read_link(&full).unwrap();
                out.insert(path, ('l', t.to_str().unwrap().as_bytes().to_vec(), 0));
            } else if md.is_dir() {
                out.insert(path.clone(), ('d', Vec::new(), mode));
                go(&full, &path, out);
            } else {
                out.insert(path, ('f', fs::read(&full).unwrap(), mode));
            }
        }
    }
    let mut out = Tree::new();
    go(root, "", &mut out);
    out
}

fn call(name: &str) -> CallInfo {
    CallInfo {
        name: name.into(),
        summary: name.into(),
    }
}

struct Fixture {
    ws: tempfile::TempDir,
    store: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Self {
            ws: tempfile::tempdir().unwrap(),
            store: tempfile::tempdir().unwrap(),
        }
    }

    fn open_with(&self, f: impl FnOnce(&mut Config), exclude: Arc<dyn Exclude>) -> Checkpoints {
        let root = Arc::new(WorkspaceRoot::capture(self.ws.path()).unwrap());
        let mut config = Config::new(self.store.path().join("store"));
        f(&mut config);
        Checkpoints::open(root, config, exclude).unwrap()
    }

    fn open(&self) -> Checkpoints {
        self.open_with(|_| {}, Arc::new(ExcludeNothing))
    }

    fn p(&self, rel: &str) -> std::path::PathBuf {
        self.ws.path().join(rel)
    }
}

#[test]
fn restoring_each_checkpoint_gives_the_tree_of_that_moment() {
    let fx = Fixture::new();
    let cp = fx.open();
    fs::create_dir_all(fx.p("src/deep")).unwrap();
    fs::write(fx.p("src/a.txt"), "one\ntwo\n").unwrap();
    fs::write(fx.p("src/deep/b.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(fx.p("src/deep/b.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir(fx.p("empty")).unwrap();

    // Each step: a scope (as a file tool or a run would give) and a change.
    type Step = (Scope, Box<dyn Fn(&Fixture)>);
    let steps: Vec<Step> = vec![
        (
            Scope::Paths(vec!["src/a.txt".into()]),
            Box::new(|f: &Fixture| fs::write(f.p("src/a.txt"), "one\nTWO\n").unwrap()),
        ),
        (
            Scope::All,
            Box::new(|f: &Fixture| {
                fs::set_permissions(f.p("src/a.txt"), fs::Permissions::from_mode(0o600)).unwrap()
            }),
        ),
        (
            Scope::All,
            Box::new(|f: &Fixture| symlink("deep/b.sh", f.p("src/link")).unwrap()),
        ),
        (
            Scope::All,
            Box::new(|f: &Fixture| fs::rename(f.p("src/deep"), f.p("moved")).unwrap()),
        ),
        (
            Scope::All,
            Box::new(|f: &Fixture| {
                for i in 0..20 {
                    fs::create_dir_all(f.p(&format!("gen/{}", i % 4))).unwrap();
                    fs::write(f.p(&format!("gen/{}/f{i}", i % 4)), vec![i as u8; i * 100]).unwrap();
                }
            }),
        ),
        (
            Scope::All,
            Box::new(|f: &Fixture| fs::remove_dir_all(f.p("src")).unwrap()),
        ),
        (
            Scope::Paths(vec!["empty".into()]),
            Box::new(|f: &Fixture| fs::remove_dir(f.p("empty")).unwrap()),
        ),
        (
            Scope::All,
            Box::new(|f: &Fixture| {
                // A symlink where a file was, a file where a symlink was.
                fs::remove_file(f.p("moved/b.sh")).unwrap();
                symlink("../gen", f.p("moved/b.sh")).unwrap();
            }),
        ),
    ];
    let mut taken = Vec::new();
    for (scope, change) in &steps {
        let before = record(fx.ws.path());
        let id = cp.take(call("step"), scope).unwrap();
        taken.push((id, before));
        change(&fx);
        cp.after(Some(scope)).unwrap();
    }
    let end = record(fx.ws.path());
    for (id, tree) in taken.iter().rev().chain(taken.iter()) {
        let r = cp.restore(id, None, false, false).unwrap();
        assert!(r.skipped.is_empty(), "{r:?}");
        assert_eq!(&record(fx.ws.path()), tree, "checkpoint {id}");
    }
    // Every restore was checkpointed first: the newest undoes the last restore.
    let list = cp.list().unwrap();
    assert_eq!(list.len(), steps.len() * 3);
    assert_eq!(list[0].call.name, "checkpoint_restore");
    cp.restore(&list[0].id, None, false, false).unwrap();
    assert_eq!(record(fx.ws.path()), taken[taken.len() - 2].1);
    let _ = end;
}

#[test]
fn changed_counts_the_files_a_call_changed() {
    let fx = Fixture::new();
    let cp = fx.open();
    fs::write(fx.p("a"), "a").unwrap();
    let scope = Scope::Paths(vec!["a".into()]);
    cp.take(call("write_file"), &scope).unwrap();
    fs::write(fx.p("a"), "b").unwrap();
    cp.after(Some(&scope)).unwrap();
    assert_eq!(cp.list().unwrap()[0].changed, 1);
    cp.take(call("run_command"), &Scope::All).unwrap();
    for n in ["x", "y", "z"] {
        fs::write(fx.p(n), n).unwrap();
    }
    fs::create_dir(fx.p("d")).unwrap();
    cp.after(Some(&Scope::All)).unwrap();
    let list = cp.list().unwrap();
    assert_eq!((list[0].changed, list[1].changed), (3, 1));
}

#[test]
fn diff_shows_added_modified_deleted_and_text() {
    let fx = Fixture::new();
    let cp = fx.open();
    fs::write(fx.p("keep"), "k").unwrap();
    fs::write(fx.p("mod.txt"), "a\nb\n").unwrap();
    fs::write(fx.p("gone"), "g").unwrap();
    let id = cp.take(call("run_command"), &Scope::All).unwrap();
    fs::write(fx.p("mod.txt"), "a\nc\n").unwrap();
    fs::remove_file(fx.p("gone")).unwrap();
    fs::write(fx.p("new"), "n").unwrap();
    let d = cp.diff(&id, None).unwrap();
    assert_eq!(d.added, vec!["new"]);
    assert_eq!(d.modified, vec!["mod.txt"]);
    assert_eq!(d.deleted, vec!["gone"]);
    let m = d.diffs.iter().find(|t| t.path == "mod.txt").unwrap();
    assert!(m.diff.contains("-b\n+c\n"), "{}", m.diff);
    let only = cp.diff(&id, Some("gone")).unwrap();
    assert_eq!(
        (only.added.len(), only.modified.len(), only.deleted.len()),
        (0, 0, 1)
    );
    assert!(matches!(cp.diff("nope", None), Err(Error::NotFound)));
}

struct Secrets;
impl Exclude for Secrets {
    fn excluded(&self, path: &str) -> bool {
        path == "secret.env" || path.starts_with("keys")
    }
}

#[test]
fn excluded_paths_git_and_ignored_trees_are_never_recorded_nor_touched() {
    let fx = Fixture::new();
    let cp = fx.open_with(|_| {}, Arc::new(Secrets));
    fs::write(fx.p("secret.env"), "TOKEN=1").unwrap();
    fs::create_dir(fx.p("keys")).unwrap();
    fs::write(fx.p("keys/k"), "k").unwrap();
    fs::create_dir(fx.p(".git")).unwrap();
    fs::write(fx.p(".git/HEAD"), "ref").unwrap();
    fs::write(fx.p(".gitignore"), "target/\n").unwrap();
    fs::create_dir(fx.p("target")).unwrap();
    fs::write(fx.p("target/big"), "x").unwrap();
    fs::write(fx.p("plain"), "p").unwrap();
    let id = cp.take(call("run_command"), &Scope::All).unwrap();
    fs::write(fx.p("secret.env"), "TOKEN=2").unwrap();
    fs::write(fx.p("keys/k2"), "k").unwrap();
    fs::write(fx.p(".git/HEAD"), "changed").unwrap();
    fs::write(fx.p("target/big"), "y").unwrap();
    fs::write(fx.p("plain"), "q").unwrap();
    let d = cp.diff(&id, None).unwrap();
    assert_eq!(d.modified, vec!["plain"]);
    assert!(d.added.is_empty() && d.deleted.is_empty(), "{d:?}");
    cp.restore(&id, None, false, false).unwrap();
    assert_eq!(fs::read_to_string(fx.p("secret.env")).unwrap(), "TOKEN=2");
    assert!(fx.p("keys/k2").exists());
    assert_eq!(fs::read_to_string(fx.p(".git/HEAD")).unwrap(), "changed");
    assert_eq!(fs::read_to_string(fx.p("target/big")).unwrap(), "y");
    assert_eq!(fs::read_to_string(fx.p("plain")).unwrap(), "p");

    // The twin: with ignored trees included, target/ is recorded and restored.
    let fx = Fixture::new();
    let cp = fx.open_with(|c| c.include_ignored = true, Arc::new(Secrets));
    fs::write(fx.p(".gitignore"), "target/\n").unwrap();
    fs::create_dir(fx.p("target")).unwrap();
    fs::write(fx.p("target/big"), "x").unwrap();
    let id = cp.take(call("run_command"), &Scope::All).unwrap();
    fs::write(fx.p("target/big"), "y").unwrap();
    assert_eq!(cp.diff(&id, None).unwrap().modified, vec!["target/big"]);
}

#[test]
fn the_count_bound_at_n_and_n_plus_one() {
    for n in [3usize, 4] {
        let fx = Fixture::new();
        let cp = fx.open_with(|c| c.max_checkpoints = 3, Arc::new(ExcludeNothing));
        let mut ids = Vec::new();
        for i in 0..n {
            fs::write(fx.p("f"), format!("v{i}")).unwrap();
            ids.push(cp.take(call("run_command"), &Scope::All).unwrap());
        }
        let list = cp.list().unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list.last().unwrap().id, ids[n - 3]);
        // The oldest kept restores whole (its manifest was rewritten complete).
        cp.restore(&ids[n - 3], None, false, false).unwrap();
        assert_eq!(
            fs::read_to_string(fx.p("f")).unwrap(),
            format!("v{}", n - 3)
        );
        if n == 4 {
            assert!(matches!(cp.diff(&ids[0], None), Err(Error::NotFound)));
        }
        // Blobs no kept manifest names are gone: v0's content is not in the store.
        let blobs = count_blobs(&fx.store.path().join("store/blobs"));
        assert!(blobs <= 4, "{blobs}");
    }
}

fn count_blobs(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .map(|d| fs::read_dir(d.unwrap().path()).unwrap().count())
        .sum()
}

#[test]
fn the_byte_bound_at_n_and_n_plus_one() {
    // Each checkpoint adds one distinct 100,000-byte blob; manifests are small.
    let size = 100_000usize;
    for (bound, kept) in [(2 * size as u64 + 4096, 2usize), (2 * size as u64 - 1, 1)] {
        let fx = Fixture::new();
        let cp = fx.open_with(|c| c.max_bytes = bound, Arc::new(ExcludeNothing));
        for i in 0..3u8 {
            fs::write(fx.p("f"), vec![i; size]).unwrap();
            cp.take(call("run_command"), &Scope::All).unwrap();
        }
        assert_eq!(cp.list().unwrap().len(), kept, "bound {bound}");
    }
}

#[test]
fn a_file_over_64_mib_is_skipped_and_one_of_64_mib_is_stored() {
    let fx = Fixture::new();
    let cp = fx.open();
    let max = confine_checkpoint::MAX_FILE_BYTES;
    let at = fs::File::create(fx.p("at")).unwrap();
    at.set_len(max).unwrap();
    let over = fs::File::create(fx.p("over")).unwrap();
    over.set_len(max + 1).unwrap();
    let id = cp.take(call("run_command"), &Scope::All).unwrap();
    assert_eq!(cp.list().unwrap()[0].skipped, vec!["over"]);
    fs::write(fx.p("at"), "small").unwrap();
    fs::write(fx.p("over"), "small").unwrap();
    let r = cp.restore(&id, None, false, false).unwrap();
    assert_eq!(fs::metadata(fx.p("at")).unwrap().len(), max);
    assert_eq!(r.skipped.len(), 1);
    assert_eq!(
        (r.skipped[0].path.as_str(), r.skipped[0].reason.as_str()),
        ("over", "not stored")
    );
}

#[test]
fn a_later_server_lists_and_restores_what_an_earlier_one_recorded() {
    let fx = Fixture::new();
    fs::write(fx.p("f"), "before").unwrap();
    let id = {
        let cp = fx.open();
        let id = cp
            .take(call("write_file"), &Scope::Paths(vec!["f".into()]))
            .unwrap();
        fs::write(fx.p("f"), "after").unwrap();
        id
    };
    let cp = fx.open();
    assert_eq!(cp.list().unwrap()[0].id, id);
    cp.restore(&id, None, false, false).unwrap();
    assert_eq!(fs::read_to_string(fx.p("f")).unwrap(), "before");
}

#[test]
fn restore_of_chosen_paths_dry_runs_and_running_jobs() {
    let fx = Fixture::new();
    let cp = fx.open();
    fs::write(fx.p("a"), "a").unwrap();
    fs::write(fx.p("b"), "b").unwrap();
    let id = cp.take(call("run_command"), &Scope::All).unwrap();
    fs::write(fx.p("a"), "A").unwrap();
    fs::write(fx.p("b"), "B").unwrap();
    fs::write(fx.p("c"), "C").unwrap();
    let dry = cp.restore(&id, None, true, false).unwrap();
    assert_eq!(
        (dry.restored.clone(), dry.removed.clone()),
        (vec!["a".into(), "b".into()], vec!["c".to_owned()])
    );
    assert_eq!(fs::read_to_string(fx.p("a")).unwrap(), "A");
    let jobs = cp.restore(&id, None, false, true).unwrap();
    assert!(jobs.restored.is_empty() && jobs.removed.is_empty());
    assert!(jobs.skipped.iter().all(|s| s.reason == "a job is running"));
    assert_eq!(jobs.skipped.len(), 3);
    assert_eq!(fs::read_to_string(fx.p("b")).unwrap(), "B");
    let r = cp.restore(&id, Some(&["a".into()]), false, false).unwrap();
    assert_eq!(r.restored, vec!["a"]);
    assert_eq!(fs::read_to_string(fx.p("a")).unwrap(), "a");
    assert_eq!(fs::read_to_string(fx.p("b")).unwrap(), "B");
}

#[test]
fn a_store_inside_the_root_is_refused_and_one_beside_it_is_not() {
    let fx = Fixture::new();
    let root = Arc::new(WorkspaceRoot::capture(fx.ws.path()).unwrap());
    let inside = Config::new(fx.ws.path().join("sub/store"));
    let e = Checkpoints::open(root.clone(), inside, Arc::new(ExcludeNothing)).unwrap_err();
    assert!(matches!(e, Error::InsideRoot), "{e:?}");
    assert!(!fx.p("sub").exists());
    let beside = Config::new(fx.store.path().join("s"));
    assert!(Checkpoints::open(root, beside, Arc::new(ExcludeNothing)).is_ok());
}

#[test]
fn a_restore_racing_a_symlink_swapper_writes_nothing_outside() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    let cp = fx.open();
    fs::create_dir(fx.p("sub")).unwrap();
    for i in 0..20 {
        fs::write(fx.p(&format!("sub/f{i}")), format!("v{i}")).unwrap();
    }
    let id = cp.take(call("run_command"), &Scope::All).unwrap();
    for i in 0..20 {
        fs::remove_file(fx.p(&format!("sub/f{i}"))).unwrap();
    }
    // `swap` points outside; the swapper exchanges it with `sub` again and again.
    symlink(outside.path(), fx.p("swap")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (a, b) = (fx.p("sub"), fx.p("swap"));
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < 50_000_000 {
                let _ = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &a,
                    rustix::fs::CWD,
                    &b,
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                n += 1;
            }
        })
    };
    let mut restored = 0;
    for _ in 0..30 {
        let r = cp
            .restore(&id, Some(&["sub".into()]), false, false)
            .unwrap();
        restored += r.restored.len();
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(
        fs::read_dir(outside.path()).unwrap().count(),
        0,
        "a restore wrote outside"
    );
    // The twin: the same restore without the swapper writes every file back.
    if fs::symlink_metadata(fx.p("sub"))
        .unwrap()
        .file_type()
        .is_symlink()
    {
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            fx.p("sub"),
            rustix::fs::CWD,
            fx.p("swap"),
            rustix::fs::RenameFlags::EXCHANGE,
        )
        .unwrap();
    }
    let r = cp
        .restore(&id, Some(&["sub".into()]), false, false)
        .unwrap();
    let _ = restored;
    for i in 0..20 {
        assert_eq!(
            fs::read_to_string(fx.p(&format!("sub/f{i}"))).unwrap(),
            format!("v{i}"),
            "{r:?}"
        );
    }
}

#[test]
fn two_servers_on_one_root_interleave_and_each_restores_exact() {
    // Each server keeps the index it wrote in memory; the other's checkpoints in between
    // must be seen, kept and restorable (with and without drops by the count bound).
    for max in [100usize, 4] {
        let fx = Fixture::new();
        let a = fx.open_with(|c| c.max_checkpoints = max, Arc::new(ExcludeNothing));
        let b = fx.open_with(|c| c.max_checkpoints = max, Arc::new(ExcludeNothing));
        let mut taken = Vec::new();
        for i in 0..12 {
            let cp = if i % 2 == 0 { &a } else { &b };
            let name = format!("f{}", i % 3);
            let scope = if i % 3 == 2 {
                Scope::All
            } else {
                Scope::Paths(vec![name.clone()])
            };
            let before = record(fx.ws.path());
            let id = cp.take(call("write_file"), &scope).unwrap();
            taken.push((id, before));
            fs::write(fx.p(&name), format!("v{i}")).unwrap();
            cp.after(Some(&scope)).unwrap();
        }
        let kept: Vec<String> = taken
            .iter()
            .rev()
            .take(max)
            .map(|(id, _)| id.clone())
            .collect();
        for cp in [&a, &b] {
            let ids: Vec<String> = cp.list().unwrap().into_iter().map(|c| c.id).collect();
            assert_eq!(ids, kept, "max {max}");
        }
        let end = record(fx.ws.path());
        // Each restore by the server that did not take it, the oldest kept first.
        let first = taken.len() - kept.len();
        for (k, (id, tree)) in taken.iter().enumerate().skip(first) {
            let cp = if k % 2 == 0 { &b } else { &a };
            cp.restore(id, None, false, false).unwrap();
            assert_eq!(&record(fx.ws.path()), tree, "max {max}, checkpoint {k}");
        }
        if max == 100 {
            // The restores' own checkpoints are there too, the newest (taken before the last
            // restore) gives back the tree before it.
            let list = a.list().unwrap();
            assert_eq!(list.len(), taken.len() * 2);
            b.restore(&list[0].id, None, false, false).unwrap();
            assert_eq!(record(fx.ws.path()), taken[taken.len() - 2].1);
        }
        let _ = end;
    }
}

#[test]
fn a_checkpoint_is_one_journal_record_until_folded_and_survives_a_kill() {
    let fx = Fixture::new();
    fs::write(fx.p("f"), "v0").unwrap();
    let scope = Scope::Paths(vec!["f".into()]);
    let cp = fx.open();
    let mut ids = Vec::new();
    for i in 1..=2 {
        ids.push(cp.take(call("write_file"), &scope).unwrap());
        fs::write(fx.p("f"), format!("v{i}")).unwrap();
        cp.after(Some(&scope)).unwrap();
    }
    // No manifest file per checkpoint: the records wait in the journal.
    let store = fx.store.path().join("store");
    assert_eq!(fs::read_dir(store.join("manifests")).unwrap().count(), 0);
    assert!(fs::metadata(store.join("journal")).unwrap().len() > 0);
    // Killed right after the calls returned: no clean end folds the journal.
    std::mem::forget(cp);
    let cp = fx.open();
    let list = cp.list().unwrap();
    let listed: Vec<&str> = list.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(listed, vec![ids[1].as_str(), ids[0].as_str()]);
    assert_eq!(list[1].changed, 1);
    // Folded by the list: the journal is empty, the manifests are files.
    assert_eq!(fs::metadata(store.join("journal")).unwrap().len(), 0);
    assert_eq!(fs::read_dir(store.join("manifests")).unwrap().count(), 2);
    cp.restore(&ids[0], None, false, false).unwrap();
    assert_eq!(fs::read_to_string(fx.p("f")).unwrap(), "v0");
}

#[test]
fn a_journal_torn_mid_record_is_read_without_that_record_and_without_error() {
    let fx = Fixture::new();
    fs::write(fx.p("f"), "v0").unwrap();
    let scope = Scope::Paths(vec!["f".into()]);
    let cp = fx.open();
    let mut ids = Vec::new();
    for i in 1..=3 {
        ids.push(cp.take(call("write_file"), &scope).unwrap());
        fs::write(fx.p("f"), format!("v{i}")).unwrap();
        if i < 3 {
            cp.after(Some(&scope)).unwrap();
        }
    }
    std::mem::forget(cp);
    // The last record (the third checkpoint) cut short, as a write cut by a crash leaves it.
    let journal = fx.store.path().join("store/journal");
    let len = fs::metadata(&journal).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .unwrap()
        .set_len(len - 7)
        .unwrap();
    let cp = fx.open();
    let listed: Vec<String> = cp.list().unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(listed, vec![ids[1].clone(), ids[0].clone()]);
    // What follows the torn record is not hidden behind it.
    fs::write(fx.p("f"), "v4").unwrap();
    let next = cp.take(call("write_file"), &scope).unwrap();
    fs::write(fx.p("f"), "v5").unwrap();
    cp.after(Some(&scope)).unwrap();
    std::mem::forget(cp);
    let cp = fx.open();
    let listed: Vec<String> = cp.list().unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(listed, vec![next.clone(), ids[1].clone(), ids[0].clone()]);
    cp.restore(&next, None, false, false).unwrap();
    assert_eq!(fs::read_to_string(fx.p("f")).unwrap(), "v4");
    cp.restore(&ids[1], None, false, false).unwrap();
    assert_eq!(fs::read_to_string(fx.p("f")).unwrap(), "v1");
}

#[test]
fn content_a_call_left_survives_another_server_s_fold_until_the_next_checkpoint_names_it() {
    // A call brings back content only the oldest checkpoint names; another server's list
    // folds and drops that checkpoint before this server's next checkpoint (which names the
    // content without reading it again) is taken.
    let fx = Fixture::new();
    let a = fx.open_with(|c| c.max_checkpoints = 2, Arc::new(ExcludeNothing));
    let b = fx.open_with(|c| c.max_checkpoints = 2, Arc::new(ExcludeNothing));
    let scope = Scope::Paths(vec!["f".into()]);
    fs::write(fx.p("f"), "a").unwrap();
    for next in ["b", "c", "a"] {
        a.take(call("write_file"), &scope).unwrap();
        fs::write(fx.p("f"), next).unwrap();
        a.after(Some(&scope)).unwrap();
    }
    assert_eq!(b.list().unwrap().len(), 2);
    let id = a.take(call("write_file"), &scope).unwrap();
    fs::write(fx.p("f"), "z").unwrap();
    a.after(Some(&scope)).unwrap();
    let r = a.restore(&id, None, false, false).unwrap();
    assert!(r.skipped.is_empty(), "{r:?}");
    assert_eq!(fs::read_to_string(fx.p("f")).unwrap(), "a");
}
