//! run_command: an empty command (`true`) through the tool (validation, root re-verification,
//! the per-call `TMPDIR` made and removed beneath the root, `/bin/sh -c` through `nodeexec`
//! with its default containment, head-and-tail capture, reaping) beside `_baseline`, a bare
//! `sh -c true` spawn with piped output (std only). The target is under 2 ms of overhead.
//!
//! As in `node_process.rs`, alternating rounds run first (one tool call and one bare spawn a
//! round, the order swapped every round) and print the median of the per-round difference,
//! which a drifting machine load does not bias; then the same with a pause before each call
//! (calls that come alone, as an agent's do); then CPU per call; then criterion's lines.

use std::time::Instant;

use confine_cli::tools::{ToolCall, execute_tool_call};
use criterion::{Criterion, criterion_group};
use tokio_util::sync::CancellationToken;

mod support;
use support::{median, node, node_options, runtime};

fn registry(dir: &std::path::Path) -> confine_cli::tools::ToolRegistry {
    let mut options = node_options(&node());
    options.commands = Some(Default::default());
    confine_cli::tools::create_selected_tools(dir, options, &["run_command"]).unwrap()
}

fn call() -> ToolCall {
    ToolCall::new("b", "run_command", &serde_json::json!({"command": "true"}))
}

/// The bare spawn the tool is measured against: `sh -c true`, output piped, in `dir`.
fn baseline(dir: &std::path::Path) {
    // The baseline is the bare spawn nodeexec is measured against.
    #[allow(clippy::disallowed_methods)]
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", "true"])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let registry = registry(tmp.path());
    let (call, cancel, rt) = (call(), CancellationToken::new(), runtime());
    let mut group = c.benchmark_group("run_command_true");
    group.sample_size(50);
    group.bench_function("run_command", |b| {
        b.iter(|| {
            let r = rt
                .block_on(execute_tool_call(&registry, &call, &cancel))
                .unwrap();
            assert!(!r.is_error, "{}", r.content);
        })
    });
    group.bench_function("run_command_baseline", |b| b.iter(|| baseline(tmp.path())));
    group.finish();
}

/// Alternating rounds; prints medians (ms) and the median per-round overhead.
fn alternating() {
    rounds(200, None, "alternating 200 rounds");
}

/// Calls that come alone, as an agent's do (seconds apart; here 30 ms, enough for the kernel
/// to settle between calls): 40 alternating rounds with a pause before each call; prints
/// the medians (ms) and the median per-round overhead.
fn spaced() {
    let pause = std::time::Duration::from_millis(30);
    rounds(40, Some(pause), "spaced 40 rounds (30 ms before each call)");
}

/// `n` rounds of one tool call and one bare spawn in alternating order, each after `pause`;
/// prints the medians (ms) and the median per-round overhead under `label`.
fn rounds(n: usize, pause: Option<std::time::Duration>, label: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let registry = registry(tmp.path());
    let (call, cancel, rt) = (call(), CancellationToken::new(), runtime());
    let (mut tool, mut bare) = (Vec::new(), Vec::new());
    for round in 0..n {
        for k in 0..2 {
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            let start = Instant::now();
            if (round + k) % 2 == 0 {
                let r = rt
                    .block_on(execute_tool_call(&registry, &call, &cancel))
                    .unwrap();
                assert!(!r.is_error, "{}", r.content);
                tool.push(start.elapsed().as_secs_f64() * 1e3);
            } else {
                baseline(tmp.path());
                bare.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let mut diffs: Vec<f64> = tool.iter().zip(&bare).map(|(t, b)| t - b).collect();
    let overhead = median(&mut diffs);
    println!(
        "{label}: run_command `true` median {:.3} ms, bare `sh -c true` median {:.3} ms, \
         median overhead {overhead:+.3} ms",
        median(&mut tool),
        median(&mut bare)
    );
}

/// This process's CPU time and that of its reaped descendants (every process a run starts
/// is reaped, by us or by a reaped descendant), in seconds, from `/proc/self/stat`.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name, which ends with the last ')': utime, stime, cutime and
    // cstime are fields 14 to 17 of the line, 12 to 15 after it.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let ticks: u64 = rest
        .split(' ')
        .skip(11)
        .take(4)
        .map(|f| f.parse::<u64>().unwrap())
        .sum();
    ticks as f64 / 100.0
}

/// CPU per call (of every process involved), which a loaded machine inflates far less than
/// wall time: 300 tool calls in a row, then 300 bare spawns.
fn cpu_per_call() {
    const CALLS: usize = 300;
    let tmp = tempfile::tempdir().unwrap();
    let registry = registry(tmp.path());
    let (call, cancel, rt) = (call(), CancellationToken::new(), runtime());
    let start = cpu_seconds();
    for _ in 0..CALLS {
        let r = rt
            .block_on(execute_tool_call(&registry, &call, &cancel))
            .unwrap();
        assert!(!r.is_error, "{}", r.content);
    }
    let tool = (cpu_seconds() - start) / CALLS as f64 * 1e3;
    let start = cpu_seconds();
    for _ in 0..CALLS {
        baseline(tmp.path());
    }
    let bare = (cpu_seconds() - start) / CALLS as f64 * 1e3;
    println!(
        "CPU per call over {CALLS} calls each: run_command `true` {tool:.3} ms, bare `sh -c \
         true` {bare:.3} ms, overhead {:+.3} ms",
        tool - bare
    );
}

criterion_group!(benches, bench);

fn main() {
    alternating();
    spaced();
    cpu_per_call();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
