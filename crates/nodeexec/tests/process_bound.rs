//! A run's process bound as root, whom the kernel exempts from `RLIMIT_NPROC`: a cgroup's
//! `pids.max`, the run's v2 cgroup's, or, on a host whose cgroup v2 hierarchy has no `pids`
//! controller (cgroup v1, or hybrid mode with `pids` bound to v1), that of a cgroup of the
//! run's own in the v1 `pids` hierarchy. As an ordinary user the bound is `RLIMIT_NPROC`,
//! which `run.rs`'s fork bomb test covers; this file then says loudly that it did not run.
//!
//! Processes are counted by a census of `/proc` (`testkit::census`): each carries a unique
//! marker argument (a shell's `$0`, which its forks keep); every child also carries the
//! suite's census mark, checked after the suite by `cargo xtask test`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nodeexec::{Command, Containment, ErrorKind, Outcome, ProcessBound};
use tokio_util::sync::CancellationToken;

mod support;
use support::{alive, command, fork_bomb, marker, run};

/// The directory of this process's own cgroup in the v1 `pids` hierarchy, if there is one.
fn v1_pids_dir() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "pids")
            .then(|| path.to_owned())
    })?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        let dash = fields.iter().position(|f| *f == "-")?;
        let pids = fields.get(dash + 1) == Some(&"cgroup")
            && fields.get(dash + 3)?.split(',').any(|o| o == "pids");
        (pids && fields[3] == "/")
            .then(|| PathBuf::from(fields[4]).join(own.trim_start_matches('/')))
    })
}

/// This process's run cgroups in the v1 `pids` hierarchy (`confine-<pid>-…`).
fn own_v1_cgroups(dir: &std::path::Path) -> Vec<String> {
    let prefix = format!("confine-{}-", std::process::id());
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// A shell that starts `sleep`s in the background until a fork fails (or `limit` are
/// started), printing the count after each: the last line is how many it started.
fn counting_shell(marker: &str, limit: u32) -> Command {
    let mut cmd = command("/bin/sh");
    cmd.arg("-c")
        .arg(format!(
            "i=0; while [ $i -lt {limit} ]; do sleep 30 >/dev/null 2>&1 & i=$((i+1)); echo $i; done"
        ))
        .arg(marker)
        .current_dir("/")
        .timeout(Duration::from_secs(10));
    cmd
}

fn last_line(o: &Outcome) -> &str {
    o.stdout.text.lines().last().unwrap_or("")
}

/// As root (whom the kernel exempts from `RLIMIT_NPROC`), in every containment mode whose
/// process bound here is a cgroup's `pids.max` (v2, or a v1 `pids` hierarchy where v2 has no
/// `pids` controller): a bound of N lets the run hold exactly N processes (the shell, N - 1
/// `sleep`s, less one for a namespace's init where it is born in the v2 cgroup) and refuses
/// the next fork, where the same shell without a bound starts more; a fork bomb under a
/// bound of 32 never has more than 32 processes alive, ends at its time bound as a clean
/// failure with nothing left, and the next run works; no v1 cgroup of the runs is left.
#[tokio::test]
async fn fork_bomb_as_root_is_bounded_by_a_cgroup() {
    const N: u64 = 12;
    const TEST: &str = "fork_bomb_as_root_is_bounded_by_a_cgroup";
    if !rustix::process::getuid().is_root() {
        eprintln!(
            "!!! {TEST}: NOT RUN as an ordinary user (run.rs's fork bomb test covers the \
             RLIMIT_NPROC bound there)"
        );
        return;
    }
    let mut ran = Vec::new();
    for mode in [
        Containment::Cgroup,
        Containment::PidNamespace,
        Containment::Subreaper,
    ] {
        let got = {
            let mut cmd = command("/bin/true");
            cmd.containment(mode);
            run(cmd).await.unwrap()
        };
        if got.containment != mode {
            eprintln!("!!! {TEST}: mode {} NOT AVAILABLE here", mode.name());
            continue;
        }
        let bound = got.process_bound;
        let expected = match bound {
            ProcessBound::CgroupV1 => N - 1,
            // The init is born in the v2 cgroup too.
            ProcessBound::Cgroup => N - 1 - u64::from(got.pid_namespace),
            other => {
                eprintln!(
                    "!!! {TEST}: mode {} NOT RUN, its process bound as root here is {} \
                     (neither a v2 nor a v1 `pids` cgroup)",
                    mode.name(),
                    other.name()
                );
                continue;
            }
        };
        ran.push((mode.name(), bound.name()));

        // N processes, not N + 1.
        let m = marker();
        let mut cmd = counting_shell(&m, 1000);
        cmd.containment(mode).max_processes(Some(N));
        let o = run(cmd).await.unwrap();
        assert_eq!(o.process_bound, bound, "{mode:?}");
        assert_eq!(last_line(&o), expected.to_string(), "{mode:?}: {o:?}");
        assert_eq!(
            o.exit_code,
            Some(2),
            "{mode:?}: the shell's fork failed: {o:?}"
        );
        assert!(o.stderr.text.contains("fork"), "{mode:?}: {o:?}");
        assert!(alive(&m).is_empty(), "{mode:?}: {:?} left", alive(&m));

        // The naive twin: no bound of ours, and the same shell (stopped at N + 4) starts them
        // all (root ignores RLIMIT_NPROC).
        let m = marker();
        let mut cmd = counting_shell(&m, N as u32 + 4);
        cmd.containment(mode).max_processes(None);
        let o = run(cmd).await.unwrap();
        assert_eq!(o.process_bound, ProcessBound::Unbounded, "{mode:?}");
        assert_eq!(last_line(&o), (N + 4).to_string(), "{mode:?}: {o:?}");
        assert!(alive(&m).is_empty(), "{mode:?}: {:?} left", alive(&m));

        // A fork bomb: never more than the bound alive, a clean end, nothing left.
        let m = marker();
        let cmd = fork_bomb(&m, mode);
        let peak = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let counter = {
            let (m, peak, stop) = (m.clone(), peak.clone(), stop.clone());
            tokio::task::spawn_blocking(move || {
                while !stop.is_cancelled() {
                    peak.fetch_max(alive(&m).len(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let e = run(cmd).await.unwrap_err();
        stop.cancel();
        counter.await.unwrap();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{mode:?}");
        let peak = peak.load(Ordering::Relaxed);
        assert!((1..=32).contains(&peak), "{mode:?}: peak {peak}");
        assert!(alive(&m).is_empty(), "{mode:?}: {} left", alive(&m).len());
        let mut after = command("/bin/echo");
        after.arg("after").containment(mode);
        let o = run(after).await.unwrap();
        assert_eq!(o.stdout.text, "after\n");
        if bound == ProcessBound::CgroupV1 {
            let dir = v1_pids_dir().expect("a v1 pids hierarchy, since the bound came from one");
            assert_eq!(own_v1_cgroups(&dir), Vec::<String>::new(), "{mode:?}");
        }
    }
    eprintln!("{TEST}: ran in {ran:?}");
    assert!(
        !ran.is_empty(),
        "{TEST}: no mode has a cgroup process bound for root here"
    );
}
