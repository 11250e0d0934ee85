//! write_file of 1 KiB through the registry with checkpoints (the store in a directory of its
//! own) beside without (`--no-checkpoints`).

use confine_cli::tools::{
    CheckpointOptions, ToolCall, ToolSetOptions, create_selected_tools, execute_tool_call,
};
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
    let mut group = c.benchmark_group("write_file_checkpoints");
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
        let name = if with { "with_checkpoints" } else { "without" };
        group.bench_function(name, |b| {
            b.iter(|| {
                let r = rt
                    .block_on(execute_tool_call(&registry, &call, &cancel))
                    .unwrap();
                assert!(!r.is_error, "{}", r.content);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
