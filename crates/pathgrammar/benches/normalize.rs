//! What this measures: `confine_pathgrammar::normalize` on typical model-supplied paths (a 30-byte clean
//! relative path, the same with `./`, `\` and `//` noise that forces a rebuilt output, and a
//! rejected `..` path), each beside a `_baseline` that does the least a caller would do anyway:
//! `std::path::Path::new(p).components().count()` (splitting on `/` and classifying components,
//! no allocation). The ratio normalize / baseline is what `docs/PERFORMANCE.md` records; the
//! The target is under 100 ns for the typical 30-byte path.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};

/// A typical path of 30 bytes, already in normal form.
const TYPICAL: &str = "src/components/button/index.ts";
/// The same path with noise: a leading `./`, a backslash and a doubled separator.
const NOISY: &str = r"./src\components//button/index.ts";
/// A rejected traversal.
const TRAVERSAL: &str = "src/../../etc/passwd/shadow.txt";

fn bench(c: &mut Criterion) {
    assert_eq!(TYPICAL.len(), 30);
    let mut g = c.benchmark_group("normalize");
    g.bench_function("typical_30b", |b| {
        b.iter(|| confine_pathgrammar::normalize(black_box(TYPICAL)))
    });
    g.bench_function("typical_30b_baseline", |b| {
        b.iter(|| Path::new(black_box(TYPICAL)).components().count())
    });
    g.bench_function("noisy", |b| {
        b.iter(|| confine_pathgrammar::normalize(black_box(NOISY)))
    });
    g.bench_function("noisy_baseline", |b| {
        b.iter(|| Path::new(black_box(NOISY)).components().count())
    });
    g.bench_function("traversal_rejected", |b| {
        b.iter(|| confine_pathgrammar::normalize(black_box(TRAVERSAL)))
    });
    g.bench_function("traversal_rejected_baseline", |b| {
        b.iter(|| Path::new(black_box(TRAVERSAL)).components().count())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
