//! write_file of 1 KiB through the registry with checkpoints (the store in a directory of its
//! own) beside without (`--no-checkpoints`).
//!
//! On a shared machine the two rows, measured one after the other, see different loads. With
//! `CHECKPOINT_PAIRS=N` the bench first runs N pairs of calls, one with and one without
//! (which goes first alternating), and prints the median time of each and the quartiles of
//! the ratio within a pair: both calls of a pair see nearly the same load.

use confine_cli::tools::{
    CheckpointOptions, ToolCall, ToolSetOptions, create_selected_tools, execute_tool_call,
};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use tokio_util::sync::CancellationToken;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let content = "x".repeat(1024);
    let call = ToolCall::new(
        "1",
        "write_file",
        &serde_json::json!({"path": "src/file.txt", "content": content}),
    );
    let cancel = CancellationToken::new();
    let mut sets = Vec::new();
    for with in [false, true] {
        let ws = tempfile::tempdir().unwrap();
        let store = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        let mut options = ToolSetOptions::default();
        if with {
            let mut c = CheckpointOptions::new();
            c.dir = Some(store.path().join("s"));
            options.checkpoints = Some(c);
        }
        let registry = create_selected_tools(ws.path(), options, &["write_file"]).unwrap();
        sets.push((with, registry, ws, store));
    }
    let one = |registry| {
        let r = rt
            .block_on(execute_tool_call(registry, &call, &cancel))
            .unwrap();
        assert!(!r.is_error, "{}", r.content);
    };
    if let Some(n) = std::env::var("CHECKPOINT_PAIRS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    {
        let time = |registry| {
            let t = Instant::now();
            one(registry);
            t.elapsed().as_secs_f64() * 1e3
        };
        let (mut without, mut with, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..n {
            let (a, b) = if k % 2 == 0 {
                let a = time(&sets[0].1);
                (a, time(&sets[1].1))
            } else {
                let b = time(&sets[1].1);
                (time(&sets[0].1), b)
            };
            without.push(a);
            with.push(b);
            ratio.push(b / a);
        }
        let q = |v: &mut Vec<f64>, f: f64| {
            v.sort_by(f64::total_cmp);
            v[((v.len() - 1) as f64 * f) as usize]
        };
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        eprintln!(
            "{n} pairs: means with {:.3} ms, without {:.3} ms ({:.2}x)",
            mean(&with),
            mean(&without),
            mean(&with) / mean(&without),
        );
        eprintln!(
            "{n} pairs: with {:.3} ms, without {:.3} ms (medians); with/without per pair: median \
             {:.2}x, quartiles {:.2}x to {:.2}x",
            q(&mut with, 0.5),
            q(&mut without, 0.5),
            q(&mut ratio, 0.5),
            q(&mut ratio, 0.25),
            q(&mut ratio, 0.75),
        );
    }
    let mut group = c.benchmark_group("write_file_checkpoints");
    for (with, registry, _, _) in &sets {
        let name = if *with { "with_checkpoints" } else { "without" };
        group.bench_function(name, |b| b.iter(|| one(registry)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
