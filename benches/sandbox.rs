//! The opt-in kernel sandbox's cost per call: an empty `node_process` call through the tool
//! with `ToolSetOptions::sandbox` beside `_baseline`, the same call without it. Two more
//! pairs isolate the parts: `node -e ""` through `nodeexec` with and without the sandbox's
//! pre-exec step (no-new-privs, capabilities, the Landlock ruleset made in the child and
//! enforced, rlimits, the seccomp filter, and whatever Node.js pays at startup under them),
//! and `build_rules` alone, the parent-side work each sandboxed call repeats (opening the
//! thirty-odd paths of the read and write rules, building a throw-away ruleset from them).
//!
//! Criterion measures one line after the other, so on a shared, loaded machine the load can
//! change between a line and its baseline. Before criterion, `alternating` therefore runs the
//! empty call unsandboxed, sandboxed, and sandboxed without the seccomp filter (Landlock,
//! rlimits and capabilities only) in alternating rounds (the order rotated every round) and
//! prints the medians and the medians of the per-round differences from the unsandboxed call,
//! which such drift does not bias.

use std::time::Duration;

use confine_cli::nodeexec::{Command, Sandbox};
use confine_cli::tools::{create_coding_tools, execute_tool_call};
use criterion::{Criterion, criterion_group};
use tokio_util::sync::CancellationToken;

mod support;
use support::{empty_call, median, node, node_options, runtime};

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let node = node();
    let cancel = CancellationToken::new();
    let rt = runtime();
    let call = empty_call();

    let mut group = c.benchmark_group("sandbox_empty_call");
    group.sample_size(40);
    for (name, sandbox) in [
        ("node_process_baseline", None),
        ("node_process_sandboxed", Some(Sandbox::new())),
    ] {
        let mut options = node_options(&node);
        options.sandbox = sandbox;
        let registry = create_coding_tools(tmp.path(), options).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| {
                let r = rt
                    .block_on(execute_tool_call(&registry, &call, &cancel))
                    .unwrap();
                assert!(!r.is_error, "{}", r.content);
            })
        });
    }
    let dir = std::fs::File::open(tmp.path()).unwrap();
    let rules = Sandbox::new().build(&dir).unwrap();
    for (name, sandboxed) in [("nodeexec_baseline", false), ("nodeexec_sandboxed", true)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut cmd = Command::new(&node);
                cmd.args(["-e", ""])
                    .current_dir(tmp.path())
                    .timeout(Duration::from_secs(10));
                if sandboxed {
                    cmd.sandbox(&rules);
                }
                let o = rt.block_on(cmd.run(&cancel)).unwrap();
                assert_eq!(o.exit_code, Some(0));
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("sandbox_rules");
    group.bench_function("build_rules", |b| {
        b.iter(|| Sandbox::new().build(&dir).unwrap())
    });
    group.finish();
}

/// Alternating rounds of the unsandboxed call, the sandboxed call and the sandboxed call
/// without the seccomp filter; prints medians (ms).
fn alternating() {
    const ROUNDS: usize = 60;
    let tmp = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let rt = runtime();
    let call = empty_call();
    let mut unfiltered = Sandbox::new();
    unfiltered.socket_filter(false).metadata_filter(false);
    let registries = [None, Some(Sandbox::new()), Some(unfiltered)].map(|sandbox| {
        let mut options = node_options(&node());
        options.sandbox = sandbox;
        create_coding_tools(tmp.path(), options).unwrap()
    });
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for k in 0..3 {
            let i = (round + k) % 3;
            let start = std::time::Instant::now();
            let r = rt
                .block_on(execute_tool_call(&registries[i], &call, &cancel))
                .unwrap();
            times[i].push(start.elapsed().as_secs_f64() * 1e3);
            assert!(!r.is_error, "{}", r.content);
        }
    }
    let diff = |i: usize| {
        let mut d: Vec<f64> = times[i].iter().zip(&times[0]).map(|(s, b)| s - b).collect();
        median(&mut d)
    };
    let (sandboxed_diff, unfiltered_diff) = (diff(1), diff(2));
    let [base, sandboxed, unfiltered] = times.map(|mut t| median(&mut t));
    println!(
        "alternating {ROUNDS} rounds: node_process_baseline {base:.2} ms, \
         node_process_sandboxed {sandboxed:.2} ms ({sandboxed_diff:+.2} ms), \
         without the seccomp filter {unfiltered:.2} ms ({unfiltered_diff:+.2} ms)"
    );
}

criterion_group!(benches, bench);

fn main() {
    alternating();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
