//! edit_file of a 1 KiB file beside write_file of the same 1 KiB, both through
//! `execute_tool_call` on one registry: edit_file reads the file, applies one exact
//! replacement, builds the unified diff, and installs the result through the same guarded
//! atomic installation as write_file (plus its conflict check: identity and bytes read again
//! before the rename).
//!
//! Two groups, as for write_file: `edit_file_1k` on the default temporary directory (a real
//! disk, where the two fsyncs of any durable write dominate) and `edit_file_1k_tmpfs` on
//! `/dev/shm` (fsync is free there, so the ratio shows the CPU and syscall overhead alone).
//!
//! A third group, `edit_file_64k_miss`, times what a miss costs on a file of 65,536 bytes (the
//! largest an edit takes; 1,170 lines of code-like text): `hit_dry_run` finds a 5-line
//! `oldText` and builds the diff, writing nothing; `miss_5_lines` and `miss_50_lines` send the
//! same lines without their indentation, so the call fails with `EDIT_TEXT_NOT_FOUND` and
//! searches the closest region (every run of 5 or 50 lines) for its `closest` diagnostics.
//! Both sides write nothing, so the ratio is the search's cost against the work of a hit.

use std::path::Path;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, criterion_group, criterion_main};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use confine_cli::tools::{ToolCall, ToolRegistry, execute_tool_call};

fn run(rt: &tokio::runtime::Runtime, registry: &ToolRegistry, call: &ToolCall) {
    let result = rt
        .block_on(execute_tool_call(registry, call, &CancellationToken::new()))
        .unwrap();
    assert!(!result.is_error, "{}", result.content);
}

fn pair(group: &mut BenchmarkGroup<'_, WallTime>, base: &Path) {
    let root = base.join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    // 1 KiB: 32 lines of 32 bytes, one of them holding the token that is edited.
    let mut content: String = (0..32)
        .map(|i| format!("line {i:02} of the benched file.   \n"))
        .collect();
    content.replace_range(0..4, "AAAA");
    assert_eq!(content.len(), 1024);
    std::fs::write(root.join("src/edit.txt"), &content).unwrap();
    let registry = confine_cli::tools::create_selected_tools(
        &root,
        Default::default(),
        &["write_file", "edit_file"],
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();

    let write = ToolCall::new(
        "w",
        "write_file",
        &json!({"path": "src/write.txt", "content": content}),
    );
    group.bench_function("write_file", |b| b.iter(|| run(&rt, &registry, &write)));

    // Alternate the token so that every edit finds exactly one occurrence.
    let edit = |old: &str, new: &str| {
        ToolCall::new(
            "e",
            "edit_file",
            &json!({"path": "src/edit.txt", "edits": [{"oldText": old, "newText": new}]}),
        )
    };
    let (forth, back) = (edit("AAAA", "BBBB"), edit("BBBB", "AAAA"));
    let mut flip = false;
    group.bench_function("edit_file", |b| {
        b.iter(|| {
            flip = !flip;
            run(&rt, &registry, if flip { &forth } else { &back })
        })
    });
}

/// A 65,536-byte file of indented code-like lines.
fn code_64k() -> String {
    let mut content = String::from("fn main() {\n");
    let mut i = 0;
    loop {
        let line = format!("    let value_{i:05} = compute({i}, \"name {i}\", &table);\n");
        if content.len() + line.len() + 2 > 65_536 {
            break;
        }
        content.push_str(&line);
        i += 1;
    }
    let pad = 65_536 - content.len() - 2;
    content.push_str(&"/".repeat(pad));
    content.push_str("\n}");
    assert_eq!(content.len(), 65_536);
    content
}

fn misses(group: &mut BenchmarkGroup<'_, WallTime>, base: &Path) {
    let root = base.join("ws64");
    std::fs::create_dir_all(&root).unwrap();
    let content = code_64k();
    std::fs::write(root.join("big.rs"), &content).unwrap();
    let registry =
        confine_cli::tools::create_selected_tools(&root, Default::default(), &["edit_file"])
            .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let lines: Vec<&str> = content.split_inclusive('\n').collect();
    let block = |n: usize| lines[700..700 + n].concat();
    let call = |old: &str| {
        ToolCall::new(
            "e",
            "edit_file",
            &json!({"path": "big.rs", "edits": [{"oldText": old, "newText": "x"}], "dryRun": true}),
        )
    };
    let hit = call(&block(5));
    group.bench_function("hit_dry_run", |b| b.iter(|| run(&rt, &registry, &hit)));
    for n in [5, 50] {
        let flat: String = block(n)
            .lines()
            .map(|l| format!("{}\n", l.trim_start()))
            .collect();
        let miss = call(&flat);
        let check = rt
            .block_on(execute_tool_call(
                &registry,
                &miss,
                &CancellationToken::new(),
            ))
            .unwrap();
        let record = check.record();
        assert_eq!(
            record["error"]["closest"]["hint"], "indentation",
            "{record}"
        );
        assert_eq!(record["error"]["closest"]["startLine"], 701, "{record}");
        group.bench_function(format!("miss_{n}_lines"), |b| {
            b.iter(|| {
                let r = rt
                    .block_on(execute_tool_call(
                        &registry,
                        &miss,
                        &CancellationToken::new(),
                    ))
                    .unwrap();
                assert!(r.is_error);
            })
        });
    }
}

fn bench(c: &mut Criterion) {
    let disk = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("edit_file_1k");
    group.sampling_mode(SamplingMode::Flat).sample_size(30);
    pair(&mut group, disk.path());
    group.finish();

    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let fast = tempfile::tempdir_in(shm).unwrap();
        let mut group = c.benchmark_group("edit_file_1k_tmpfs");
        pair(&mut group, fast.path());
        group.finish();
    }

    let tmp = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("edit_file_64k_miss");
    misses(&mut group, tmp.path());
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
