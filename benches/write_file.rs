//! write_file of 1 KiB through the tool (grammar and size check, root re-verification, parent
//! opened beneath the root, per-target lock, exclusive 0600 temporary, write, fsync, identity
//! check, fchmod, rename, installed-identity check, directory fsync) beside `_baseline`, the
//! same durable replacement done plainly with `std::fs`: create a temporary, write, fsync,
//! rename over the target, fsync the directory.
//!
//! Two groups: `write_file_1k` on the default temporary directory (a real disk, where the two
//! fsyncs dominate, as they do for any durable write) and `write_file_1k_tmpfs` on
//! `/dev/shm` (fsync is free there, so the ratio shows the guard's CPU and syscall overhead
//! alone).

use std::io::Write;
use std::path::Path;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, criterion_group, criterion_main};
use tokio_util::sync::CancellationToken;

use confine_cli::tools::{WriteFileTool, WriteInput};

fn pair(group: &mut BenchmarkGroup<'_, WallTime>, base: &Path) {
    let root = base.join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    let content = "x".repeat(1024);
    let tool = confine_cli::tools::create_write_tool(&root).unwrap();
    let cancel = CancellationToken::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    group.bench_function("write_file", |b| {
        b.iter(|| {
            let valid = WriteFileTool::check_input(WriteInput {
                path: "src/file.txt".into(),
                content: content.clone(),
            })
            .unwrap();
            rt.block_on(tool.write(&valid, &cancel)).unwrap()
        })
    });

    let dir = root.join("src");
    let target = dir.join("plain.txt");
    let temp = dir.join(".plain.txt.tmp");
    group.bench_function("write_file_baseline", |b| {
        b.iter(|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
                .unwrap();
            file.write_all(content.as_bytes()).unwrap();
            file.sync_all().unwrap();
            drop(file);
            std::fs::rename(&temp, &target).unwrap();
            std::fs::File::open(&dir).unwrap().sync_all().unwrap();
        })
    });
}

fn bench(c: &mut Criterion) {
    let disk = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("write_file_1k");
    // Each iteration waits for the disk: equal-sized samples keep the run short.
    group.sampling_mode(SamplingMode::Flat).sample_size(30);
    pair(&mut group, disk.path());
    group.finish();

    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let fast = tempfile::tempdir_in(shm).unwrap();
        let mut group = c.benchmark_group("write_file_1k_tmpfs");
        pair(&mut group, fast.path());
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
