//! The walking tools on a generated tree of 55,000 files (50,000 searched, 5,000 under an
//! ignored `target/`), beside ripgrep on the same tree and the same files:
//! - `grep` (a pattern found on about 500 lines) beside `rg --no-require-git --hidden -n`;
//! - `find_files` (`**/*.rs`, about 500 paths) beside `rg --files --no-require-git --hidden -g
//!   '*.rs'`.
//!
//! The ripgrep runs include its process start (a few milliseconds), as an agent pays it too.
//! `rg` must be on PATH (Debian package `ripgrep`); without it the bench stops with a message.

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// 25 × 20 directories of 100 files; one file in 100 is `.rs`, one in 100 holds the needle.
fn tree(root: &Path) {
    std::fs::write(root.join(".gitignore"), "target/\n*.tmp\n").unwrap();
    let body: String = (0..30)
        .map(|i| format!("line {i} of some ordinary text, nothing to see here\n"))
        .collect();
    let mut n = 0;
    for a in 0..25 {
        for b in 0..20 {
            let dir = root.join(format!("pkg{a:02}/mod{b:02}"));
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..100 {
                let ext = if f == 7 { "rs" } else { "txt" };
                let mut text = body.clone();
                if n % 100 == 42 {
                    text.push_str("here is the needle_xyzzy we look for\n");
                }
                std::fs::write(dir.join(format!("f{f:03}.{ext}")), text).unwrap();
                n += 1;
            }
        }
    }
    let ignored = root.join("target/debug");
    std::fs::create_dir_all(&ignored).unwrap();
    for f in 0..5_000 {
        std::fs::write(ignored.join(format!("i{f}.rs")), "needle_xyzzy\n").unwrap();
    }
}

fn rg(args: &[&str], root: &Path) {
    #[allow(clippy::disallowed_methods)]
    let status = std::process::Command::new("rg")
        .args(args)
        .arg(root)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("rg on PATH (apt-get install ripgrep)");
    assert!(status.success());
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    tree(&root);
    let registry = confine_cli::tools::create_read_only_tools(&root).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cancel = CancellationToken::new();
    let call = |name: &str, args: serde_json::Value| {
        let call = confine_cli::tools::ToolCall::new("b", name, &args);
        let r = rt
            .block_on(confine_cli::tools::execute_tool_call(
                &registry, &call, &cancel,
            ))
            .unwrap();
        assert!(!r.is_error, "{}", r.content);
        r
    };
    // The same answers: 500 matching lines, 500 paths.
    let g = call(
        "grep",
        json!({"pattern": "needle_xyzzy", "maxMatches": 1000}),
    );
    assert_eq!(g.record()["matches"].as_array().unwrap().len(), 500);
    let f = call("find_files", json!({"pattern": "**/*.rs"}));
    assert_eq!(f.record()["paths"].as_array().unwrap().len(), 500);

    let mut group = c.benchmark_group("walk_55k");
    group.sample_size(10);
    group.bench_function("grep", |b| {
        b.iter(|| {
            call(
                "grep",
                json!({"pattern": "needle_xyzzy", "maxMatches": 1000}),
            )
        })
    });
    group.bench_function("grep_baseline_rg", |b| {
        b.iter(|| {
            rg(
                &["--no-require-git", "--hidden", "-n", "needle_xyzzy"],
                &root,
            )
        })
    });
    group.bench_function("find_files", |b| {
        b.iter(|| call("find_files", json!({"pattern": "**/*.rs"})))
    });
    group.bench_function("find_files_baseline_rg", |b| {
        b.iter(|| {
            rg(
                &["--files", "--no-require-git", "--hidden", "-g", "*.rs"],
                &root,
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
