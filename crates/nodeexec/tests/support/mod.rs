//! Helpers shared by the `nodeexec` integration tests (`run.rs`, `sandbox.rs`); each file is
//! its own test binary and uses `mod support;`. The process census and the Node.js executable
//! come from the repository's `testkit`.
//!
//! Every child these suites start carries the suite's census mark (`CONFINE_CENSUS` in its
//! environment, see `testkit::census`), so that `cargo xtask test` can check, once the suites
//! have ended, that none of them is left alive.

// Each test binary uses a subset of these helpers; the rest would warn as dead code there.
#![allow(dead_code)]

use confine_nodeexec::{Command, Containment, Outcome};
use tokio_util::sync::CancellationToken;

// Re-exported for the files that use them (not every one does).
#[allow(unused_imports)]
pub use testkit::census::{alive, wait_alive};
pub use testkit::node;

/// This suite's name in the census: `nodeexec-<test file>`.
pub fn suite() -> String {
    format!("nodeexec-{}", env!("CARGO_CRATE_NAME"))
}

/// A marker for one test's descendants (see `testkit::census::unique`).
pub fn marker() -> String {
    testkit::census::unique(&suite())
}

/// `program` with the suite's census mark in its environment.
pub fn command(program: impl AsRef<std::path::Path>) -> Command {
    let mut cmd = Command::new(program);
    let (name, value) = testkit::census::env(&suite());
    cmd.env(name, value);
    cmd
}

/// `node -e <source>` in `/`, carrying the census mark.
pub fn js(source: &str) -> Command {
    let mut cmd = command(node());
    cmd.arg("-e").arg(source).current_dir("/");
    cmd
}

/// A fork bomb (`b() { b | b & }; b` in a shell whose `$0` is `marker`) in `mode`, bounded to
/// 32 processes and 2 seconds. A `sleep` started first (the marker in its environment, so the
/// census counts it) and the shell's builtin `wait` for it (no fork needed, so no fork the
/// bound refuses can end the shell) keep the program running: the run lasts until its time
/// bound even where the bomb dies out before it (every process's fork refused at once, under
/// the bound), since a run ends when its program exits. The bomb starts in a subshell of its
/// own, the shell's second and last fork: a shell whose fork is refused exits, and the shell's
/// own forks of a pipeline (one per element) could otherwise meet the bound its first
/// element's descendants filled meanwhile (seen on a loaded machine: the run ended at once).
pub fn fork_bomb(marker: &str, mode: Containment) -> Command {
    let mut cmd = command("/bin/sh");
    cmd.arg("-c")
        .arg("sleep 30 & (b() { b | b & }; b) & wait")
        .arg(marker)
        .env("FORK_BOMB_MARKER", marker)
        .current_dir("/")
        .containment(mode)
        .max_processes(Some(32))
        .timeout(std::time::Duration::from_secs(2));
    cmd
}

/// Run `cmd` with a token nobody cancels.
pub async fn run(cmd: Command) -> Result<Outcome, confine_nodeexec::Error> {
    cmd.run(&CancellationToken::new()).await
}

/// The modes every lifetime test loops over, strongest first.
pub const MODES: [Containment; 3] = [
    Containment::Cgroup,
    Containment::PidNamespace,
    Containment::Subreaper,
];

/// Whether `mode` can be had here (a trivial run under that cap reports it); prints loudly
/// when not, so a run as an ordinary user or in a container says what it left out.
pub async fn available(mode: Containment, test: &str) -> bool {
    let mut cmd = command("/bin/true");
    cmd.containment(mode);
    let got = run(cmd).await.expect("/bin/true runs").containment;
    if got != mode {
        // Recorded once per mode (the table lists each name once), naming the first test.
        testkit::not_run(
            &format!("containment mode {} in the lifetime tests", mode.name()),
            &format!(
                "not available here (a run asking for it got {}); {test} and the other \
                 tests looping over modes ran without it",
                got.name()
            ),
        );
    }
    got == mode
}

/// The modes of `modes` this machine offers, in order (each left out is printed loudly).
pub async fn offered(modes: impl IntoIterator<Item = Containment>, test: &str) -> Vec<Containment> {
    let mut out = Vec::new();
    for mode in modes {
        if available(mode, test).await {
            out.push(mode);
        }
    }
    out
}

/// No process holding `marker` is alive after a run in `mode` ended as `how`.
pub fn assert_dead(mode: Containment, marker: &str, how: &str) {
    let left = testkit::census::survivors(marker);
    assert!(left.is_empty(), "{mode:?}: outlived {how}: {left:#?}");
}

/// A helper embedder's body (a test runs it in a process of its own, then SIGKILLs that
/// process mid-run): run `cmd` on a runtime of its own; it must not end first.
pub fn run_until_killed(cmd: Command) -> ! {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _ = rt.block_on(cmd.run(&CancellationToken::new()));
    panic!("the run ended before the helper was killed");
}

/// Whether this process holds `CAP_SYS_ADMIN` (bit 21 of its effective set). Root without it
/// (the container-like setup CI reproduces) gets a user namespace of its own for a run, as an
/// ordinary user does: another owner is not mapped there, and other processes' secrets are
/// out of reach even unconfined.
pub fn has_cap_sys_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}
