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

use confine_cli::nodeexec::{Command, PrivateDirs, Sandbox};
use confine_cli::tools::{
    RunCommandOptions, ToolCall, create_coding_tools, create_workspace_tools, execute_tool_call,
};
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

/// What the sandbox as `confine` sets it up by default (the read-only view in a mount
/// namespace of the run's own, the server's private `/tmp`, `/dev/shm` and HOME, the home's
/// toolchains, a `/proc` of the run's PID namespace) adds to a run's start: `run_command
/// true` unsandboxed and sandboxed in alternating rounds (the order swapped every round);
/// prints the medians and the median of the per-round differences (ms).
fn alternating_run_start() {
    const ROUNDS: usize = 80;
    let tmp = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let rt = runtime();
    let call = ToolCall::new("b", "run_command", &serde_json::json!({"command": "true"}));
    let dirs = std::sync::Arc::new(PrivateDirs::create(None).unwrap());
    let mut default = Sandbox::new();
    default.private_dirs(dirs);
    let registries = [None, Some(default)].map(|sandbox| {
        let mut options = node_options(&node());
        options.sandbox = sandbox;
        options.commands = Some(RunCommandOptions::default());
        create_workspace_tools(tmp.path(), options).unwrap()
    });
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for k in 0..2 {
            let i = (round + k) % 2;
            let start = std::time::Instant::now();
            let r = rt
                .block_on(execute_tool_call(&registries[i], &call, &cancel))
                .unwrap();
            times[i].push(start.elapsed().as_secs_f64() * 1e3);
            assert!(!r.is_error, "{}", r.content);
        }
    }
    let mut d: Vec<f64> = times[1].iter().zip(&times[0]).map(|(s, b)| s - b).collect();
    let diff = median(&mut d);
    let [base, sandboxed] = times.map(|mut t| median(&mut t));
    println!(
        "alternating {ROUNDS} rounds: run_command true unsandboxed {base:.2} ms, \
         sandboxed as by default {sandboxed:.2} ms ({diff:+.2} ms, ratio {:.2})",
        sandboxed / base
    );
}

/// Everyday commands under the default sandbox beside the same commands unsandboxed:
/// `cargo build --offline` of a small crate (one source file touched first, so each round
/// compiles it again) and `npm test` of a small package, each through `run_command` of two
/// workspace tool sets over one workspace, in alternating rounds (the order swapped every
/// round, two warm-up rounds each); prints the medians and the median of the per-round
/// ratios. Runs only with `CONFINE_BENCH_EVERYDAY=1` (it takes about a minute and needs
/// `cargo` and `npm` on `PATH`).
fn alternating_everyday() {
    const ROUNDS: usize = 20;
    if std::env::var("CONFINE_BENCH_EVERYDAY").as_deref() != Ok("1") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path();
    std::fs::create_dir_all(ws.join("small/src")).unwrap();
    std::fs::write(
        ws.join("small/Cargo.toml"),
        "[package]\nname = \"small\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("small/src/main.rs"),
        "mod util;\nfn main() { println!(\"{}\", util::words(\"a b a\")); }\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("small/src/util.rs"),
        "use std::collections::HashMap;\npub fn words(s: &str) -> usize {\n    \
         let mut m: HashMap<&str, usize> = HashMap::new();\n    \
         for w in s.split_whitespace() { *m.entry(w).or_default() += 1; }\n    m.len()\n}\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("package.json"),
        r#"{"name":"everyday","version":"1.0.0","private":true,"scripts":{"test":"node test.js"}}"#,
    )
    .unwrap();
    std::fs::write(
        ws.join("test.js"),
        "const assert = require('node:assert');\n\
         const fib = (n) => (n < 2 ? n : fib(n - 1) + fib(n - 2));\n\
         assert.strictEqual(fib(20), 6765);\n",
    )
    .unwrap();
    let cancel = CancellationToken::new();
    let rt = runtime();
    let dirs = std::sync::Arc::new(PrivateDirs::create(None).unwrap());
    let mut default = Sandbox::new();
    default.private_dirs(dirs);
    let registries = [None, Some(default)].map(|sandbox| {
        let mut options = node_options(&node());
        options.sandbox = sandbox;
        options.commands = Some(RunCommandOptions::default());
        create_workspace_tools(ws, options).unwrap()
    });
    for (name, command) in [
        (
            "cargo build --offline",
            "cd small && touch src/util.rs && cargo build --offline -q",
        ),
        ("npm test", "npm test --silent"),
    ] {
        let call = ToolCall::new(
            "b",
            "run_command",
            &serde_json::json!({"command": command, "timeoutMs": 120_000}),
        );
        let run = |i: usize| {
            let start = std::time::Instant::now();
            let r = rt
                .block_on(execute_tool_call(&registries[i], &call, &cancel))
                .unwrap();
            assert!(!r.is_error, "{}", r.content);
            assert_eq!(r.record()["exitCode"], 0, "{name}: {}", r.content);
            start.elapsed().as_secs_f64() * 1e3
        };
        for i in [0, 1, 0, 1] {
            run(i);
        }
        let mut times = [Vec::new(), Vec::new()];
        for round in 0..ROUNDS {
            for k in 0..2 {
                let i = (round + k) % 2;
                times[i].push(run(i));
            }
        }
        let mut ratios: Vec<f64> = times[1].iter().zip(&times[0]).map(|(s, b)| s / b).collect();
        let ratio = median(&mut ratios);
        let [base, sandboxed] = times.map(|mut t| median(&mut t));
        println!(
            "alternating {ROUNDS} rounds: {name} unsandboxed {base:.0} ms, sandboxed as by \
             default {sandboxed:.0} ms (median ratio {ratio:.3}, {:.2} to {:.2})",
            ratios[0],
            ratios[ratios.len() - 1]
        );
    }
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
    alternating_run_start();
    alternating_everyday();
    alternating();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
