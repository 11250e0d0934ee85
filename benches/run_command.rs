//! run_command: an empty command (`true`) through the tool (validation, root re-verification,
//! the per-call `TMPDIR` made and removed beneath the root, `/bin/sh -c` through `nodeexec`
//! with its default containment, head-and-tail capture, reaping) beside `_baseline`, a bare
//! `sh -c true` spawn with piped output (std only). The target is under 2 ms of overhead.
//!
//! As in `node_process.rs`, alternating rounds run first (one tool call and one bare spawn a
//! round, the order swapped every round) and print the median of the per-round difference,
//! which a drifting machine load does not bias; then the same with a pause before each call
//! (calls that come alone, as an agent's do); then CPU per call; then criterion's lines.
//!
//! The network policy's cost at a run's start (`network` and the `run_command_network`
//! group): the same `true` through the tool with the default containment, beside the same
//! tool under a `NetworkPolicy` of an empty allow list made with the namespace mechanism (the
//! waiter joins the network namespace with `setns`; the program gets the proxy's variables, a
//! ticket and the seccomp socket rule) and with the Landlock mechanism (the Landlock TCP
//! layer and the seccomp rule, no namespace). Alternating rounds first (the order rotated
//! every round), then criterion's lines. Where a mechanism cannot be made here (no namespace,
//! no Landlock ABI 4), its line is NOT RUN and says so. `cargo bench --bench run_command --
//! run_command_network` runs these alone.

use std::time::Instant;

use std::sync::Arc;

use confine_cli::netpolicy::AllowList;
use confine_cli::nodeexec::NetworkMechanism;
use confine_cli::tools::{NetworkPolicy, ToolCall, execute_tool_call};
use criterion::{Criterion, criterion_group};
use tokio_util::sync::CancellationToken;

mod support;
use support::{median, node, node_options, runtime};

fn registry(dir: &std::path::Path) -> confine_cli::tools::ToolRegistry {
    registry_with(dir, None)
}

/// The `run_command` registry, under `network` where given (containment otherwise the same).
fn registry_with(
    dir: &std::path::Path,
    network: Option<Arc<NetworkPolicy>>,
) -> confine_cli::tools::ToolRegistry {
    let mut options = node_options(&node());
    options.commands = Some(Default::default());
    options.network = network;
    confine_cli::tools::create_selected_tools(dir, options, &["run_command"]).unwrap()
}

/// A policy of an empty allow list made with exactly `mechanism`, or `None` (printed as NOT
/// RUN) where this machine gives a weaker one or none.
fn policy(mechanism: NetworkMechanism) -> Option<Arc<NetworkPolicy>> {
    let policy = NetworkPolicy::start(AllowList::empty(), mechanism);
    if policy.mechanism() == Some(mechanism) {
        return Some(Arc::new(policy));
    }
    println!(
        "NOT RUN: the network policy's {} mechanism is not available here (got {:?}, {:?})",
        mechanism.describe(),
        policy.mechanism().map(NetworkMechanism::describe),
        policy.unavailable()
    );
    None
}

/// The three registries of the network lines: no policy, the namespace, Landlock (the last two
/// where this machine makes them).
fn network_registries(
    dir: &std::path::Path,
) -> Vec<(&'static str, confine_cli::tools::ToolRegistry)> {
    let mut registries = vec![("no_policy", registry_with(dir, None))];
    for (name, mechanism) in [
        ("namespace", NetworkMechanism::Namespace),
        ("landlock", NetworkMechanism::Landlock),
    ] {
        if let Some(policy) = policy(mechanism) {
            registries.push((name, registry_with(dir, Some(policy))));
        }
    }
    registries
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

    let mut group = c.benchmark_group("run_command_network");
    group.sample_size(50);
    for (name, registry) in network_registries(tmp.path()) {
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

/// The network policy at a run's start: 200 rounds of `true` through the tool without the
/// policy, under the namespace mechanism and under Landlock (the order rotated every round);
/// prints each line's median (ms) and the median per-round difference from the line without.
fn network() {
    const ROUNDS: usize = 200;
    let tmp = tempfile::tempdir().unwrap();
    let registries = network_registries(tmp.path());
    let (call, cancel, rt) = (call(), CancellationToken::new(), runtime());
    let mut times = vec![Vec::with_capacity(ROUNDS); registries.len()];
    for round in 0..ROUNDS {
        for k in 0..registries.len() {
            let i = (round + k) % registries.len();
            let start = Instant::now();
            let r = rt
                .block_on(execute_tool_call(&registries[i].1, &call, &cancel))
                .unwrap();
            assert!(!r.is_error, "{}", r.content);
            times[i].push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    for (i, (name, _)) in registries.iter().enumerate().skip(1) {
        let mut diffs: Vec<f64> = times[i].iter().zip(&times[0]).map(|(t, b)| t - b).collect();
        println!(
            "network {ROUNDS} rounds: run_command `true` under the policy ({name}) median \
             {:.3} ms, without it {:.3} ms, median per-round difference {:+.3} ms",
            median(&mut times[i].clone()),
            median(&mut times[0].clone()),
            median(&mut diffs)
        );
    }
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
    network();
    // Given the network group's name as the filter, the rest of the prelude is skipped.
    let network_only = std::env::args()
        .skip(1)
        .any(|a| a.starts_with("run_command_network"));
    if !network_only {
        alternating();
        spaced();
        cpu_per_call();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
