//! Background jobs: a job's start (`true` in the background, to its first `job_output`
//! showing it ended) beside a plain `run_command true`, in alternating rounds (the median of
//! each and of the per-round difference), then criterion's lines; and the server's memory per
//! running job whose two rings are full (64 jobs each writing 70,000 bytes to stdout and to
//! stderr, then sleeping: the bench process's VmRSS before and after, divided by 64). The
//! goal: the rings' 128 KiB plus under 64 KiB.

use std::time::{Duration, Instant};

use confine_cli::tools::{ToolCall, ToolRegistry, execute_tool_call_record};
use criterion::{Criterion, criterion_group};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod support;
use support::{median, node, node_options, runtime};

fn registry(dir: &std::path::Path, max_jobs: usize) -> ToolRegistry {
    let mut options = node_options(&node());
    let mut commands = confine_cli::tools::RunCommandOptions::default();
    commands.max_jobs = Some(max_jobs);
    options.commands = Some(commands);
    confine_cli::tools::create_selected_tools(dir, options, &["run_command", "job_output"]).unwrap()
}

async fn call(
    registry: &ToolRegistry,
    name: &str,
    arguments: serde_json::Value,
) -> serde_json::Value {
    let call = ToolCall::new("b", name, &arguments);
    let (record, is_error) = execute_tool_call_record(registry, &call, &CancellationToken::new())
        .await
        .unwrap();
    assert!(!is_error, "{record}");
    record
}

/// `true` as a job, to the first `job_output` that shows it ended.
async fn job_true(registry: &ToolRegistry) {
    let started = call(
        registry,
        "run_command",
        json!({"command": "true", "background": true}),
    )
    .await;
    let id = &started["jobId"];
    loop {
        let out = call(
            registry,
            "job_output",
            json!({"jobId": id, "waitMs": 30_000}),
        )
        .await;
        if out["status"] == "exited" {
            return;
        }
    }
}

async fn run_true(registry: &ToolRegistry) {
    call(registry, "run_command", json!({"command": "true"})).await;
}

fn alternating() {
    let tmp = tempfile::tempdir().unwrap();
    let registry = registry(tmp.path(), 4);
    let rt = runtime();
    let (mut job, mut run) = (Vec::new(), Vec::new());
    for round in 0..200 {
        for k in 0..2 {
            let start = Instant::now();
            if (round + k) % 2 == 0 {
                rt.block_on(job_true(&registry));
                job.push(start.elapsed().as_secs_f64() * 1e3);
            } else {
                rt.block_on(run_true(&registry));
                run.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let mut diffs: Vec<f64> = job.iter().zip(&run).map(|(j, r)| j - r).collect();
    let difference = median(&mut diffs);
    println!(
        "alternating 200 rounds: job `true` to its first exited job_output median {:.3} ms, \
         run_command `true` median {:.3} ms, median difference {difference:+.3} ms",
        median(&mut job),
        median(&mut run)
    );
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn memory_per_job() {
    const JOBS: usize = 64;
    let tmp = tempfile::tempdir().unwrap();
    let registry = registry(tmp.path(), JOBS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // A first job and its end, so the runtime's and the tools' one-time allocations are in.
    rt.block_on(job_true(&registry));
    std::thread::sleep(Duration::from_millis(200));
    let before = rss_kib();
    let fill = "head -c 70000 /dev/zero | tr '\\0' a; head -c 70000 /dev/zero | tr '\\0' b >&2; \
                exec sleep 60";
    for _ in 0..JOBS {
        rt.block_on(call(
            &registry,
            "run_command",
            json!({"command": fill, "background": true}),
        ));
    }
    // Long enough for every job to have written both streams.
    std::thread::sleep(Duration::from_secs(3));
    let after = rss_kib();
    println!(
        "memory: {JOBS} running jobs with full rings: VmRSS {before} KiB before, {after} KiB \
         after, {:.1} KiB per job (rings: 128 KiB)",
        (after - before) as f64 / JOBS as f64
    );
    drop(registry);
    drop(rt);
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let registry = registry(tmp.path(), 4);
    let rt = runtime();
    let mut group = c.benchmark_group("job_start");
    group.sample_size(50);
    group.bench_function("job_true_to_exited", |b| {
        b.iter(|| rt.block_on(job_true(&registry)))
    });
    group.bench_function("run_command_true", |b| {
        b.iter(|| rt.block_on(run_true(&registry)))
    });
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    memory_per_job();
    alternating();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
