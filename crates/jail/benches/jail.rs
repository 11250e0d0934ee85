//! What the guard and the jail cost beside the plain std operation each one replaces:
//!
//! - `resolve_in_sandbox` (root canonicalized, path walked with `lstat`) beside
//!   `resolve_in_sandbox_baseline`: `std::fs::canonicalize` of the same path;
//! - `resolve_for_read` (path walked from `/`, bounds judged) beside
//!   `resolve_for_read_baseline`: `std::fs::canonicalize` of the same path;
//! - `open_for_read` (decision, `openat` beneath the bound's directory, identity and procfs
//!   checks) beside `open_for_read_baseline`: `std::fs::File::open` of the same path.
//!
//! The tree: `cc-task-abc/sub/deep.txt` (1 KiB) in a fresh temporary directory, read and
//! write bound the root, one deny bound beside the file. Run with
//! `cargo bench -p confine-jail --bench jail`.

use std::hint::black_box;
use std::path::Path;

use confine_jail::{FileJail, JailPolicy, resolve_in_sandbox};
use criterion::{Criterion, criterion_group, criterion_main};

fn benches(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap().join("cc-task-abc");
    std::fs::create_dir_all(root.join("sub/secret")).unwrap();
    std::fs::write(root.join("sub/deep.txt"), vec![b'x'; 1024]).unwrap();
    let rel = Path::new("sub/deep.txt");
    let abs = root.join(rel);

    let mut g = c.benchmark_group("jail");
    g.bench_function("resolve_in_sandbox", |b| {
        b.iter(|| {
            let r = resolve_in_sandbox(black_box(&root), black_box(rel));
            assert!(r.ok);
            r
        })
    });
    g.bench_function("resolve_in_sandbox_baseline", |b| {
        b.iter(|| std::fs::canonicalize(black_box(&abs)).unwrap())
    });

    let policy = JailPolicy {
        allow_read: vec![root.clone()],
        allow_write: vec![root.clone()],
        deny: vec![root.join("sub/secret")],
    };
    let jail = FileJail::new(&root, policy).unwrap();
    g.bench_function("resolve_for_read", |b| {
        b.iter(|| jail.resolve_for_read(black_box(rel)).unwrap())
    });
    g.bench_function("resolve_for_read_baseline", |b| {
        b.iter(|| std::fs::canonicalize(black_box(&abs)).unwrap())
    });
    g.bench_function("open_for_read", |b| {
        b.iter(|| jail.open_for_read(black_box(rel)).unwrap())
    });
    g.bench_function("open_for_read_baseline", |b| {
        b.iter(|| std::fs::File::open(black_box(&abs)).unwrap())
    });
    g.finish();
}

criterion_group!(jail_benches, benches);
criterion_main!(jail_benches);
