//! A run's checkpoint (a whole-tree stat walk, 10 files changed since the last one) on a
//! 50,000-file tree, beside `git status` on the same tree (timed as a whole command); and the
//! store's growth beside the bytes changed (printed).

use std::path::Path;
use std::sync::Arc;

use confine_checkpoint::{CallInfo, Checkpoints, Config, ExcludeNothing, Scope};
use confine_rootid::WorkspaceRoot;
use criterion::{Criterion, criterion_group, criterion_main};

const FILES: usize = 50_000;

fn tree(root: &Path) {
    for i in 0..FILES {
        let dir = root.join(format!("d{}/e{}", i % 50, (i / 50) % 20));
        if i < 1000 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
}

#[allow(clippy::disallowed_methods)]
fn git(root: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn store_bytes(dir: &Path) -> u64 {
    walk(dir)
}

fn walk(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let md = e.metadata().unwrap();
        n += if md.is_dir() {
            walk(&e.path())
        } else {
            md.len()
        };
    }
    n
}

fn bench(c: &mut Criterion) {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    tree(ws.path());
    git(ws.path(), &["init", "-q"]);
    git(ws.path(), &["add", "-A"]);
    git(
        ws.path(),
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "t",
        ],
    );
    let root = Arc::new(WorkspaceRoot::capture(ws.path()).unwrap());
    let cp = Checkpoints::open(
        root,
        Config::new(store.path().join("s")),
        Arc::new(ExcludeNothing),
    )
    .unwrap();
    let call = || CallInfo {
        name: "run_command".into(),
        summary: "bench".into(),
    };
    cp.take(call(), &Scope::All).unwrap();
    // Measured in the store's regular form: a list folds the journal.
    cp.list().unwrap();
    let before = store_bytes(&store.path().join("s"));
    let mut round = 0u64;
    let mut group = c.benchmark_group("run_checkpoint_50k");
    group.sample_size(10);
    group.bench_function("checkpoint_10_changed", |b| {
        b.iter(|| {
            round += 1;
            for i in 0..10 {
                std::fs::write(
                    ws.path().join(format!("d{i}/e0/f{i}.txt")),
                    format!("round {round}\n"),
                )
                .unwrap();
            }
            cp.take(call(), &Scope::All).unwrap()
        })
    });
    group.bench_function("git_status", |b| {
        b.iter(|| git(ws.path(), &["status", "--porcelain"]))
    });
    group.finish();
    cp.list().unwrap();
    let after = store_bytes(&store.path().join("s"));
    eprintln!(
        "store growth: {} bytes over {} checkpoints of 10 changed files each ({} bytes changed)",
        after - before,
        round,
        round * 10 * 10
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
