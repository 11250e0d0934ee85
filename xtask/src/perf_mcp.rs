//! `cargo xtask perf-mcp --base REV`: the serving path of `confine mcp` over stdio, the working
//! tree beside an earlier revision, measured by one client (the `load` generator's) and
//! reported as ratios.
//!
//! The base revision is checked out in a git worktree under `target/perf-mcp/` and its
//! `confine` built there in release mode (a target directory of its own, kept between runs);
//! the working tree's is built as `cargo xtask load` builds it. Each pair runs the base and the
//! working tree one after the other, in alternating order (base first in even pairs), each
//! with a fresh server on a fresh workspace: `sequential` (one call in flight: the round trip)
//! and `pipelined` (16 in flight: the throughput), both reading 1 KiB files. Per run: calls/s,
//! the server's CPU time per call (utime + stime from `/proc/<pid>/stat`, read once the
//! session is initialized and again before it is killed, so the server's start is not counted)
//! and its peak resident memory (sampled every 50 ms). Each server's `XDG_STATE_HOME` is
//! beside its workspace under the scratch directory. The table gives each pair's
//! ratios, working tree over base (above 1 is faster for calls/s, more for CPU and memory),
//! then their median and spread: on a shared machine one pair says little.
//!
//! ```sh
//! cargo run --release -p xtask -- perf-mcp --base d5c61fc --pairs 5 --calls 4000
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::load::{RunResult, Server, Workload, build_confine, drive, prepare};

struct Options {
    base: String,
    pairs: usize,
    calls: u64,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        base: String::new(),
        pairs: 3,
        calls: 4000,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--base" => o.base = value()?,
            "--pairs" => o.pairs = value()?.parse().map_err(|e| format!("--pairs: {e}"))?,
            "--calls" => o.calls = value()?.parse().map_err(|e| format!("--calls: {e}"))?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.base.is_empty() {
        return Err("give --base REV (a commit, tag or branch)".into());
    }
    if o.pairs == 0 || o.calls == 0 {
        return Err("--pairs and --calls must be at least 1".into());
    }
    Ok(o)
}

/// Build `confine` of revision `rev` in a worktree under `target/perf-mcp/`.
fn build_base(rev: &str) -> Result<PathBuf, String> {
    let root = crate::workspace_root();
    let dir = root.join("target/perf-mcp");
    let tree = dir.join("src");
    let run = |program: &str, args: &[&str], at: &Path, target: Option<&Path>| {
        #[expect(
            clippy::disallowed_methods,
            reason = "a build step of the xtask, not a tool's child"
        )]
        let mut cmd = std::process::Command::new(program);
        cmd.args(args).current_dir(at);
        if let Some(target) = target {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        match cmd.status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("`{program} {}` failed ({s})", args.join(" "))),
            Err(e) => Err(format!("cannot run {program}: {e}")),
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if tree.exists() {
        run(
            "git",
            &["checkout", "--detach", "--quiet", rev],
            &tree,
            None,
        )?;
    } else {
        let tree_arg = tree.to_string_lossy().into_owned();
        run(
            "git",
            &["worktree", "add", "--detach", "--quiet", &tree_arg, rev],
            &root,
            None,
        )?;
    }
    let target = dir.join("target");
    run(
        env!("CARGO"),
        &["build", "--release", "--bin", "confine"],
        &tree,
        Some(&target),
    )?;
    Ok(target.join("release/confine"))
}

fn server(name: &'static str, program: PathBuf) -> Server {
    Server {
        name,
        program,
        args: vec!["mcp".into(), "--root".into(), "{root}".into()],
        read_tool: "read_file",
        write_tool: "write_file",
        absolute: false,
    }
}

/// What the table compares of one run.
#[derive(Clone, Copy)]
struct Figures {
    calls_per_s: f64,
    cpu_us_per_call: f64,
    peak_mib: f64,
}

impl Figures {
    fn of(r: &RunResult) -> Figures {
        // Clock ticks are 1/100 s on Linux (USER_HZ).
        let cpu_us = r.cpu_ticks as f64 * 10_000.0;
        Figures {
            calls_per_s: r.calls as f64 / r.elapsed.as_secs_f64(),
            cpu_us_per_call: cpu_us / r.calls.max(1) as f64,
            peak_mib: r.peak_rss_kib as f64 / 1024.0,
        }
    }
}

/// Run `cargo xtask perf-mcp`.
pub fn run(args: &[String]) -> ExitCode {
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask perf-mcp: {e}");
            return ExitCode::from(2);
        }
    };
    if cfg!(debug_assertions) {
        eprintln!(
            "xtask perf-mcp: WARNING: an unoptimized client; run `cargo run --release -p \
             xtask -- perf-mcp ...` for figures worth recording"
        );
    }
    let (base, head) = match (build_base(&o.base), build_confine()) {
        (Ok(b), Ok(h)) => (server("base", b), server("head", h)),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("xtask perf-mcp: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(compare(&o, &base, &head))
}

async fn compare(o: &Options, base: &Server, head: &Server) -> ExitCode {
    let scratch = tempfile::Builder::new()
        .prefix("confine-perf-mcp-")
        .tempdir_in(crate::workspace_root().join("target"))
        .expect("a scratch directory under target/");
    let modes = [("sequential", 1usize), ("pipelined", 16usize)];
    // ratios[mode] = per pair (calls/s, CPU per call, peak memory), head over base.
    let mut ratios: Vec<Vec<[f64; 3]>> = vec![Vec::new(); modes.len()];
    println!(
        "base {} against the working tree, {} pairs of {} calls\n",
        o.base, o.pairs, o.calls
    );
    println!(
        "| pair | mode | base calls/s | head calls/s | base CPU µs/call | head CPU µs/call | base peak MiB | head peak MiB |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for pair in 0..o.pairs {
        for (m, &(mode, in_flight)) in modes.iter().enumerate() {
            let order = if pair % 2 == 0 {
                [base, head]
            } else {
                [head, base]
            };
            let mut got = [None, None];
            for server in order {
                let root = scratch
                    .path()
                    .join(format!("{}-{mode}-{pair}", server.name));
                prepare(&root, 1);
                match drive(server, &root, Workload::Read, 1, in_flight, o.calls).await {
                    Ok(r) if r.errors == 0 => {
                        got[usize::from(server.name == "head")] = Some(Figures::of(&r));
                    }
                    Ok(r) => {
                        eprintln!(
                            "xtask perf-mcp: {} answered {} errors",
                            server.name, r.errors
                        );
                        return ExitCode::FAILURE;
                    }
                    Err(e) => {
                        eprintln!("xtask perf-mcp: {}: {e}", server.name);
                        return ExitCode::FAILURE;
                    }
                }
                let _ = std::fs::remove_dir_all(&root);
            }
            let [Some(b), Some(h)] = got else {
                unreachable!("both ran")
            };
            println!(
                "| {pair} | {mode} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} |",
                b.calls_per_s,
                h.calls_per_s,
                b.cpu_us_per_call,
                h.cpu_us_per_call,
                b.peak_mib,
                h.peak_mib
            );
            ratios[m].push([
                h.calls_per_s / b.calls_per_s,
                h.cpu_us_per_call / b.cpu_us_per_call.max(f64::MIN_POSITIVE),
                h.peak_mib / b.peak_mib,
            ]);
        }
    }
    println!("\n| mode | calls/s head/base | CPU per call head/base | peak memory head/base |");
    println!("| --- | --- | --- | --- |");
    for (m, &(mode, _)) in modes.iter().enumerate() {
        let cell = |k: usize| {
            let mut v: Vec<f64> = ratios[m].iter().map(|r| r[k]).collect();
            v.sort_by(f64::total_cmp);
            format!("{:.2}x ({:.2}–{:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
        };
        println!("| {mode} | {} | {} | {} |", cell(0), cell(1), cell(2));
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let args = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let o = parse(&args("--base d5c61fc --pairs 5 --calls 100")).unwrap();
        assert_eq!((o.base.as_str(), o.pairs, o.calls), ("d5c61fc", 5, 100));
        assert!(parse(&args("--pairs 2")).is_err());
        assert!(parse(&args("--base x --pairs 0")).is_err());
        assert!(parse(&args("--base x --bogus 1")).is_err());
    }
}
