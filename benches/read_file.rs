//! read_file of a 1 KiB file through the tool (grammar, root re-verification, open beneath the
//! root, type and identity checks, bounded read, UTF-8) beside `_baseline`, a plain
//! `std::fs::read` of the same file.

use criterion::{Criterion, criterion_group, criterion_main};
use tokio_util::sync::CancellationToken;

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("src")).unwrap();
    let path = tmp.path().join("src/file.txt");
    std::fs::write(&path, "x".repeat(1024)).unwrap();
    let tool = confine_cli::tools::create_read_tool(tmp.path()).unwrap();
    let cancel = CancellationToken::new();
    let mut group = c.benchmark_group("read_file_1k");
    group.bench_function("read_file", |b| {
        b.iter(|| {
            let rel = confine_cli::pathgrammar::normalize("src/file.txt").unwrap();
            tool.read(&rel, &cancel).unwrap()
        })
    });
    group.bench_function("read_file_baseline", |b| {
        b.iter(|| std::fs::read(&path).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
