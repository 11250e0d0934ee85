//! node_process: an empty call through the tool (validation, root re-verification, the script
//! created 0600, fsynced and identity-checked, the loader, the containment (a cgroup of its own here), capture, reaping,
//! removal) beside `_baseline`, a bare spawn of the same Node.js (`node -e ""` with piped
//! output, std only) given the same environment as the tool's child (PATH, LANG, LC_*, TZ):
//! host variables such as `NODE_EXTRA_CA_CERTS` change Node.js's own start-up time (loading a
//! CA bundle costs tens of milliseconds), which is no cost of ours. Four more lines isolate
//! `nodeexec`: the same `node -e ""` through `nodeexec` in each containment mode (a cgroup of
//! its own with a PID namespace inside, the default; the cgroup without the namespace; a PID
//! namespace; the process group alone); the difference to the
//! group line is each mode's cost. The group `spawn_true` does the same with `/bin/true`,
//! whose own start-up is short enough for the spawn machinery (cgroup mkdir, join, kill and
//! rmdir; or fork chain and namespace; capture, reaping) to stand out of the noise.
//!
//! On a shared machine the load drifts between criterion's lines by more than these
//! differences, so the bench first runs alternating rounds (each round one `/bin/true` run in
//! every mode, the order rotated every round) and prints each mode's median and the median of
//! its per-round difference to the process group, which such drift does not bias.

use std::time::Duration;

use confine_cli::nodeexec::Containment;
use criterion::{Criterion, criterion_group};
use tokio_util::sync::CancellationToken;

mod support;
use support::{empty_call, median, node, node_options, runtime};

/// Each containment mode, as a bench line (each must be available on the measuring machine),
/// with the PID namespace choice (`None`: the default, a namespace inside the cgroup too).
const MODES: [(&str, Containment, Option<bool>); 4] = [
    ("nodeexec_cgroup", Containment::Cgroup, None),
    (
        "nodeexec_cgroup_host_pids",
        Containment::Cgroup,
        Some(false),
    ),
    ("nodeexec_pid_namespace", Containment::PidNamespace, None),
    ("nodeexec_process_group", Containment::ProcessGroup, None),
];

/// The process-group line's index in [`MODES`], the one the others are compared with.
const GROUP: usize = 3;

/// `cmd` capped at `mode`, with the namespace choice.
fn contained(
    cmd: &mut confine_cli::nodeexec::Command,
    mode: Containment,
    namespace: Option<bool>,
) -> &mut confine_cli::nodeexec::Command {
    cmd.containment(mode);
    if let Some(namespace) = namespace {
        cmd.pid_namespace(namespace);
    }
    cmd
}

/// A baseline: `cmd` run in `dir` with stdin on the null device and its output captured;
/// it must succeed.
fn bare_run(mut cmd: std::process::Command, dir: &std::path::Path) {
    let out = cmd
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let node = node();
    let registry =
        confine_cli::tools::create_coding_tools(tmp.path(), node_options(&node)).unwrap();
    let call = empty_call();
    let cancel = CancellationToken::new();
    let rt = runtime();

    let mut group = c.benchmark_group("node_process_empty");
    group.sample_size(30);
    group.bench_function("node_process", |b| {
        b.iter(|| {
            let r = rt
                .block_on(confine_cli::tools::execute_tool_call(
                    &registry, &call, &cancel,
                ))
                .unwrap();
            assert!(!r.is_error, "{}", r.content);
        })
    });
    for (name, mode, namespace) in MODES {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut cmd = confine_cli::nodeexec::Command::new(&node);
                cmd.args(["-e", ""])
                    .current_dir(tmp.path())
                    .timeout(Duration::from_secs(10));
                contained(&mut cmd, mode, namespace);
                let o = rt.block_on(cmd.run(&cancel)).unwrap();
                assert_eq!((o.exit_code, o.containment), (Some(0), mode));
            })
        });
    }
    group.bench_function("node_process_baseline", |b| {
        b.iter(|| {
            // The baseline is the bare spawn nodeexec is measured against.
            #[allow(clippy::disallowed_methods)]
            let mut cmd = std::process::Command::new(&node);
            cmd.args(["-e", ""])
                .env_clear()
                .envs(std::env::vars_os().filter(|(k, _)| {
                    let k = k.to_string_lossy();
                    confine_cli::nodeexec::DEFAULT_INHERITED_ENV.contains(&k.as_ref())
                        || k.starts_with("LC_")
                }));
            bare_run(cmd, tmp.path());
        })
    });
    group.finish();

    let mut group = c.benchmark_group("spawn_true");
    for (name, mode, namespace) in MODES {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut cmd = confine_cli::nodeexec::Command::new("/bin/true");
                contained(cmd.current_dir(tmp.path()), mode, namespace);
                let o = rt.block_on(cmd.run(&cancel)).unwrap();
                assert_eq!((o.exit_code, o.containment), (Some(0), mode));
            })
        });
    }
    group.bench_function("baseline", |b| {
        b.iter(|| {
            // The bare spawn nodeexec is measured against.
            #[allow(clippy::disallowed_methods)]
            let cmd = std::process::Command::new("/bin/true");
            bare_run(cmd, tmp.path());
        })
    });
    group.finish();
}

/// Alternating rounds of `/bin/true` in every mode; prints medians (ms).
fn alternating() {
    const ROUNDS: usize = 300;
    let tmp = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let rt = runtime();
    let mut times: [Vec<f64>; MODES.len()] = Default::default();
    for round in 0..ROUNDS {
        for k in 0..MODES.len() {
            let i = (round + k) % MODES.len();
            let mut cmd = confine_cli::nodeexec::Command::new("/bin/true");
            contained(cmd.current_dir(tmp.path()), MODES[i].1, MODES[i].2);
            let start = std::time::Instant::now();
            let o = rt.block_on(cmd.run(&cancel)).unwrap();
            times[i].push(start.elapsed().as_secs_f64() * 1e3);
            assert_eq!((o.exit_code, o.containment), (Some(0), MODES[i].1));
        }
    }
    let group = times[GROUP].clone();
    for (i, (name, _, _)) in MODES.iter().enumerate() {
        let mut diffs: Vec<f64> = times[i].iter().zip(&group).map(|(t, g)| t - g).collect();
        let diff = median(&mut diffs);
        println!(
            "alternating {ROUNDS} rounds, spawn_true/{name}: median {:.3} ms, \
             median difference to the group {diff:+.3} ms",
            median(&mut times[i])
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    alternating();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
