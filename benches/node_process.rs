//! node_process: an empty call through the tool (validation, root re-verification, the script
//! created 0600, fsynced and identity-checked, the loader, the PID namespace, capture, reaping,
//! removal) beside `_baseline`, a bare spawn of the same Node.js (`node -e ""` with piped
//! output, std only) given the same environment as the tool's child (PATH, LANG, LC_*, TZ):
//! host variables such as `NODE_EXTRA_CA_CERTS` change Node.js's own start-up time (loading a
//! CA bundle costs tens of milliseconds), which is no cost of ours. Two more lines isolate `nodeexec`: the same `node -e ""` through
//! `nodeexec` with the PID namespace and with the process group alone; their difference is
//! the namespace's cost. The group `spawn_true` does the same with `/bin/true`, whose own
//! start-up is short enough for the spawn machinery (fork chain, namespace, capture, reaping)
//! to stand out of the noise.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tokio_util::sync::CancellationToken;

fn node() -> std::path::PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    let found = std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .expect("Node.js on PATH");
    std::fs::canonicalize(found).unwrap()
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let node = node();
    let mut options = confine::tools::NodeProcessOptions::default();
    options.node = Some(node.clone());
    options.timeout = Some(Duration::from_secs(10));
    let registry = confine::tools::create_coding_tools(tmp.path(), options).unwrap();
    let call =
        confine::tools::ToolCall::new("b", "node_process", &serde_json::json!({"source": ""}));
    let cancel = CancellationToken::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut group = c.benchmark_group("node_process_empty");
    group.sample_size(30);
    group.bench_function("node_process", |b| {
        b.iter(|| {
            let r = rt
                .block_on(confine::tools::execute_tool_call(&registry, &call, &cancel))
                .unwrap();
            assert!(!r.is_error, "{}", r.content);
        })
    });
    for (name, namespace) in [
        ("nodeexec_pid_namespace", true),
        ("nodeexec_process_group", false),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut cmd = confine::nodeexec::Command::new(&node);
                cmd.args(["-e", ""])
                    .current_dir(tmp.path())
                    .timeout(Duration::from_secs(10))
                    .pid_namespace(namespace);
                let o = rt.block_on(cmd.run(&cancel)).unwrap();
                assert_eq!(o.exit_code, Some(0));
            })
        });
    }
    group.bench_function("node_process_baseline", |b| {
        b.iter(|| {
            // The baseline is the bare spawn nodeexec is measured against.
            #[allow(clippy::disallowed_methods)]
            let out = std::process::Command::new(&node)
                .args(["-e", ""])
                .env_clear()
                .envs(std::env::vars_os().filter(|(k, _)| {
                    let k = k.to_string_lossy();
                    confine::nodeexec::DEFAULT_INHERITED_ENV.contains(&k.as_ref())
                        || k.starts_with("LC_")
                }))
                .current_dir(tmp.path())
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success());
        })
    });
    group.finish();

    let mut group = c.benchmark_group("spawn_true");
    for (name, namespace) in [
        ("nodeexec_pid_namespace", true),
        ("nodeexec_process_group", false),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut cmd = confine::nodeexec::Command::new("/bin/true");
                cmd.current_dir(tmp.path()).pid_namespace(namespace);
                let o = rt.block_on(cmd.run(&cancel)).unwrap();
                assert_eq!(o.exit_code, Some(0));
            })
        });
    }
    group.bench_function("baseline", |b| {
        b.iter(|| {
            // The bare spawn nodeexec is measured against.
            #[allow(clippy::disallowed_methods)]
            let out = std::process::Command::new("/bin/true")
                .current_dir(tmp.path())
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success());
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
