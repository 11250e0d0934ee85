//! Integration tests of `nodeexec` with a real Node.js (one test binary).
//!
//! Every lifetime test runs in each containment mode this machine offers ([`MODES`]: cgroup,
//! PID namespace, subreaper; forced with `Command::containment`), and prints loudly which of
//! them it could not run here (an ordinary user has no writable cgroup, a container may refuse
//! namespaces). Liveness of descendants is checked by a census of `/proc` (`testkit::census`):
//! every descendant a test checks carries a unique marker argument, and a process counts as
//! alive when it holds the marker and is not a zombie; every child of the suite also carries
//! the suite's census mark, checked after the suite by `cargo xtask test`. Where the script sees host pids (no PID namespace), the
//! pids it printed are checked as well (`kill(pid, 0)` is `ESRCH` once the run is over).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::path::Path;

use confine_nodeexec::{Command, Containment, ErrorKind, LandlockSupport, Sandbox};
use tokio_util::sync::CancellationToken;

mod support;
use support::{
    MODES, alive, assert_dead, available, command, fork_bomb, js, marker, offered, run,
    run_until_killed, wait_alive,
};
use testkit::fixture::cmdline;

/// A script that starts two lingering descendants, one in the process group and one in its own
/// session (`detached: true`, i.e. setsid), neither holding the output pipes, then runs `tail`.
fn with_descendants(marker: &str, tail: &str) -> Command {
    let source = format!(
        "const {{ spawn }} = require('child_process');
         const keep = ['-e', 'setInterval(() => {{}}, 1000)'];
         spawn(process.execPath, [...keep, '{marker}-group'], {{ stdio: 'ignore' }}).unref();
         spawn(process.execPath, [...keep, '{marker}-session'], {{ stdio: 'ignore', detached: true }}).unref();
         {tail}"
    );
    let mut cmd = js(&source);
    cmd.timeout(Duration::from_secs(5));
    cmd
}

#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "checks std's own ordering with a bare Command"
)]
#[allow(
    unsafe_code,
    reason = "pre_exec and getpgid, as the crate itself uses them"
)]
fn std_sets_the_group_before_pre_exec() {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new("/bin/true");
    cmd.process_group(0).current_dir("/");
    // SAFETY: getpgid/getpid/getcwd-free checks only.
    unsafe {
        cmd.pre_exec(|| {
            if libc::getpgid(0) != libc::getpid() {
                return Err(std::io::Error::from_raw_os_error(libc::EPROTO));
            }
            Ok(())
        });
    }
    let status = cmd.status().expect("pre_exec ran after setpgid");
    assert!(status.success());
}

#[tokio::test]
async fn run_reports_exit_output_and_containment() {
    let o = run(js(
        "process.stdout.write('out'); process.stderr.write('err'); process.exitCode = 7",
    ))
    .await
    .unwrap();
    assert_eq!(o.exit_code, Some(7));
    assert_eq!(o.signal, None);
    assert_eq!((o.stdout.text.as_str(), o.stdout.truncated), ("out", false));
    assert_eq!((o.stderr.text.as_str(), o.stderr.truncated), ("err", false));
}

/// Each cap on containment gives that mode where the machine offers it, and the script's own
/// pid is a host pid exactly when the outcome says there was no PID namespace.
#[tokio::test]
async fn run_containment_cap_selects_each_mode() {
    let mut ran = 0;
    let modes = MODES.into_iter().chain([Containment::ProcessGroup]);
    for mode in offered(modes, "run_containment_cap_selects_each_mode").await {
        ran += 1;
        let marker = marker();
        let mut cmd = js(&format!(
            "const argv = require('fs').readFileSync('/proc/' + process.pid + '/cmdline', 'latin1');
             process.stdout.write(String(argv.split('\\0').includes('{marker}')))"
        ));
        cmd.arg(&marker).containment(mode);
        let o = run(cmd).await.unwrap();
        assert_eq!(o.containment, mode);
        assert_eq!(
            o.stdout.text,
            (!o.pid_namespace).to_string(),
            "{mode:?}: {}",
            o.stderr.text
        );
        if matches!(mode, Containment::Subreaper | Containment::ProcessGroup) {
            assert!(!o.pid_namespace && !o.user_namespace, "{o:?}");
        }
    }
    // The subreaper and the process group need no privilege at all.
    assert!(ran >= 2);
}

/// Where this process's own cgroup directory is writable (root on a host, a delegated
/// subtree), the default is a cgroup, with a PID namespace inside it where one can be made
/// here (as it can where the namespace mode is available); opted out, no namespace is made
/// (host pids).
#[tokio::test]
async fn run_default_is_the_strongest_here() {
    let o = run(js("")).await.unwrap();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/");
    let dir = cgroup2_mount().join(own.trim_start_matches('/'));
    let writable = rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).is_ok();
    let mut probe = js("");
    probe.containment(Containment::PidNamespace);
    let namespaces = run(probe).await.unwrap().containment == Containment::PidNamespace;
    eprintln!(
        "default containment here: {} (PID namespace: {}, user namespace: {}; own cgroup writable: {writable}; namespaces can be made: {namespaces})",
        o.containment.name(),
        o.pid_namespace,
        o.user_namespace
    );
    if writable {
        assert_eq!(o.containment, Containment::Cgroup, "{o:?}");
        assert_eq!(o.pid_namespace, namespaces, "{o:?}");
        let mut cmd = js("");
        cmd.pid_namespace(false);
        let o = run(cmd).await.unwrap();
        assert_eq!(o.containment, Containment::Cgroup, "{o:?}");
        assert!(!o.pid_namespace && !o.user_namespace, "{o:?}");
    } else {
        assert_ne!(o.containment, Containment::Cgroup, "{o:?}");
    }
}

#[tokio::test]
async fn run_death_by_signal_is_data() {
    let o = run(js(
        "process.stdout.write('before'); process.kill(process.pid, 'SIGKILL')",
    ))
    .await
    .unwrap();
    assert_eq!(o.exit_code, None);
    assert_eq!(o.signal, Some(libc::SIGKILL));
    assert_eq!(o.signal_name().as_deref(), Some("SIGKILL"));
    assert_eq!(o.stdout.text, "before");
    let o = run(js(
        "process.kill(process.pid, 'SIGTERM'); setTimeout(() => {}, 5000)",
    ))
    .await
    .unwrap();
    assert_eq!(o.signal_name().as_deref(), Some("SIGTERM"));
}

#[tokio::test]
async fn run_caps_both_streams_on_character_boundaries() {
    let o = run(js(
        "process.stdout.write('é'.repeat(20000)); process.stderr.write('€'.repeat(20000))",
    ))
    .await
    .unwrap();
    assert_eq!(o.stdout.text.len(), 32_768);
    assert!(o.stdout.text.chars().all(|c| c == 'é'));
    assert!(o.stdout.truncated);
    assert_eq!(o.stdout.bytes, 40_000);
    assert_eq!(o.stderr.text.len(), 32_766);
    assert!(o.stderr.text.chars().all(|c| c == '€'));
    assert!(o.stderr.truncated);
    assert_eq!(o.stderr.bytes, 60_000);
}

#[tokio::test]
async fn run_caps_exactly_at_the_limit() {
    let mut cmd =
        js("process.stdout.write('a'.repeat(32768)); process.stderr.write('b'.repeat(32769))");
    // A cold Node.js on a loaded machine overran the default 500 ms once; the bound is not
    // what this test is about.
    cmd.timeout(Duration::from_secs(20));
    let o = run(cmd).await.unwrap();
    assert_eq!((o.stdout.text.len(), o.stdout.truncated), (32_768, false));
    assert_eq!((o.stderr.text.len(), o.stderr.truncated), (32_768, true));
}

#[tokio::test]
async fn run_drains_past_the_cap_so_the_child_never_blocks() {
    let mut cmd = js(
        "const b = Buffer.alloc(1 << 20, 120); for (let i = 0; i < 8; i++) process.stdout.write(b)",
    );
    cmd.output_cap(16).timeout(Duration::from_secs(10));
    let o = run(cmd).await.unwrap();
    assert_eq!(o.exit_code, Some(0));
    assert_eq!(o.stdout.text, "x".repeat(16));
    assert_eq!(o.stdout.bytes, 8 << 20);
}

#[tokio::test]
async fn run_invalid_utf8_becomes_replacement() {
    let o = run(js("process.stdout.write(Buffer.from([0x61, 0xff, 0x62]))"))
        .await
        .unwrap();
    assert_eq!(o.stdout.text, "a\u{FFFD}b");
}

#[tokio::test]
async fn run_stdin_is_the_null_device() {
    let o = run(js(
        "process.stdout.write(String(require('fs').readFileSync(0).length))",
    ))
    .await
    .unwrap();
    assert_eq!(o.stdout.text, "0");
}

#[tokio::test]
async fn run_environment_is_an_allowlist() {
    let mut cmd = js("process.stdout.write(JSON.stringify(process.env))");
    cmd.env("EXTRA", "yes");
    let o = run(cmd).await.unwrap();
    let env: std::collections::BTreeMap<String, String> = serde_json_lite(&o.stdout.text);
    for name in env.keys() {
        // The census mark is the test's own, set as EXTRA is (see the support module).
        let allowed = ["PATH", "LANG", "TZ", "EXTRA", testkit::census::MARK_VAR]
            .contains(&name.as_str())
            || name.starts_with("LC_");
        assert!(allowed, "{name} leaked into the child");
    }
    assert_eq!(env.get("EXTRA").map(String::as_str), Some("yes"));
    if let Ok(path) = std::env::var("PATH") {
        assert_eq!(env.get("PATH"), Some(&path));
    }
}

/// A flat JSON object of strings, parsed without a JSON dependency.
fn serde_json_lite(text: &str) -> std::collections::BTreeMap<String, String> {
    let inner = text.trim().trim_start_matches('{').trim_end_matches('}');
    let mut out = std::collections::BTreeMap::new();
    let mut rest = inner;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let end = after.find('"').unwrap();
        let key = after[..end].to_owned();
        let after = &after[end + 1..];
        let vstart = after.find('"').unwrap();
        let vafter = &after[vstart + 1..];
        let mut vend = 0;
        let bytes = vafter.as_bytes();
        while bytes[vend] != b'"' {
            vend += if bytes[vend] == b'\\' { 2 } else { 1 };
        }
        out.insert(key, vafter[..vend].to_owned());
        rest = &vafter[vend + 1..];
    }
    out
}

#[tokio::test]
async fn run_busy_loop_times_out() {
    let mut cmd = js("for (;;) {}");
    cmd.timeout(Duration::from_millis(300));
    let start = Instant::now();
    let e = run(cmd).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300));
    // Ends, and long before a loop left running would: the margin covers Node.js's start and
    // the kill on a machine loaded by the rest of the suite (800 ms failed once so).
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// A run ends when its program exits, whatever it left holding its output: a descendant
/// holding stdout, one holding stderr, one in its own session holding both; in every mode
/// (the process-group twin included: the end kills its group, and the session leader, which
/// left it, is the one it misses, as documented). The program's own status is kept, what it
/// wrote before exiting is there, the answer comes long before the bound, and the descendant
/// is dead once the run is over.
#[tokio::test]
async fn run_ends_when_its_program_exits_whatever_holds_its_output() {
    let modes = offered(MODES, "run_ends_when_its_program_exits").await;
    assert!(modes.contains(&Containment::Subreaper), "{modes:?}");
    let holders = [
        ("stdout", "(exec sleep 30 {m} 2>/dev/null) &"),
        ("stderr", "(exec sleep 30 {m} >/dev/null) &"),
        ("session", "setsid sleep 30 {m} &"),
    ];
    for mode in modes {
        for (what, holder) in holders {
            for code in [0, 1, 3, 255] {
                let m = marker();
                let script = format!(
                    "{} echo spawned; echo to-stderr >&2; exit {code}",
                    holder.replace("{m}", &m)
                );
                let mut cmd = command("/bin/sh");
                // `sleep 30 MARKER` would fail on the marker: it is the sleep's `$0` instead.
                cmd.arg("-c")
                    .arg(script.replace(&format!("sleep 30 {m}"), &format!("sh -c 'sleep 30' {m}")))
                    .current_dir("/")
                    .containment(mode)
                    .timeout(Duration::from_secs(20));
                let start = Instant::now();
                let o = run(cmd)
                    .await
                    .unwrap_or_else(|e| panic!("{mode:?} {what} {code}: {e}"));
                let took = start.elapsed();
                assert_eq!(
                    (o.exit_code, o.signal),
                    (Some(code), None),
                    "{mode:?} {what}"
                );
                assert_eq!(o.stdout.text, "spawned\n", "{mode:?} {what}");
                assert_eq!(o.stderr.text, "to-stderr\n", "{mode:?} {what}");
                assert!(took < Duration::from_secs(5), "{mode:?} {what}: {took:?}");
                assert_dead(
                    mode,
                    &m,
                    &format!("the exit of a program whose {what} was held"),
                );
            }
        }
    }
}

/// A program killed by a signal while a descendant holds its output: the signal is the
/// outcome (not a timeout), at once.
#[tokio::test]
async fn run_ends_when_its_program_dies_by_a_signal_whatever_holds_its_output() {
    for mode in offered(MODES, "run_ends_when_its_program_dies_by_a_signal").await {
        let m = marker();
        let mut cmd = command("/bin/sh");
        cmd.arg("-c")
            .arg(format!(
                "setsid sh -c 'sleep 30' {m} & echo spawned; kill -TERM $$"
            ))
            .current_dir("/")
            .containment(mode)
            .timeout(Duration::from_secs(20));
        let start = Instant::now();
        let o = run(cmd).await.unwrap();
        assert_eq!(
            (o.exit_code, o.signal),
            (None, Some(libc::SIGTERM)),
            "{mode:?}"
        );
        assert_eq!(o.stdout.text, "spawned\n", "{mode:?}");
        assert!(start.elapsed() < Duration::from_secs(5), "{mode:?}");
        assert_dead(mode, &m, "a program's death by a signal");
    }
}

/// Node.js: `spawn(…, {stdio: 'inherit', detached: true})` then exit 3 answers at once with 3.
#[tokio::test]
async fn run_ends_when_the_script_exits_while_a_detached_child_inherits_stdio() {
    for mode in offered(MODES, "run_ends_when_the_script_exits").await {
        let m = marker();
        let source = format!(
            "require('child_process').spawn(process.execPath,
                ['-e', 'setInterval(() => {{}}, 1000)', '{m}'],
                {{ stdio: 'inherit', detached: true }}).unref();
             process.stdout.write('parent done'); process.exitCode = 3;"
        );
        let mut cmd = js(&source);
        cmd.containment(mode).timeout(Duration::from_secs(20));
        let start = Instant::now();
        let o = run(cmd).await.unwrap();
        assert_eq!(
            (o.exit_code, o.stdout.text.as_str()),
            (Some(3), "parent done"),
            "{mode:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(5), "{mode:?}");
        assert_dead(mode, &m, "the script's exit");
    }
}

/// What a descendant writes within the drain after the program's exit is kept; it is killed
/// once the drain is over, so a descendant writing forever cannot hold the run.
#[tokio::test]
async fn run_drains_briefly_after_the_exit_then_kills() {
    let m = marker();
    let mut cmd = command("/bin/sh");
    cmd.arg("-c")
        .arg(format!(
            "sh -c 'while :; do echo more; sleep 0.01; done' {m} & echo first; exit 0"
        ))
        .current_dir("/")
        .timeout(Duration::from_secs(20));
    let start = Instant::now();
    let o = run(cmd).await.unwrap();
    assert_eq!(o.exit_code, Some(0));
    assert!(o.stdout.text.starts_with("first\n"), "{:?}", o.stdout.text);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_dead(Containment::Subreaper, &m, "the drain");
}

#[tokio::test]
async fn run_descendants_die_after_exit() {
    for mode in offered(MODES, "run_descendants_die_after_exit").await {
        let m = marker();
        let mut cmd = with_descendants(&m, "process.stdout.write('bye')");
        cmd.containment(mode);
        let o = run(cmd).await.unwrap();
        assert_eq!((o.exit_code, o.stdout.text.as_str()), (Some(0), "bye"));
        assert_eq!(o.containment, mode);
        assert_dead(mode, &m, "the run");
    }
}

/// The twin: the process group alone (never chosen unless asked for) kills the group but
/// misses the session leader. (The group member got SIGKILL, which is final, but it may take a
/// moment to finish dying: nobody of ours reaps it in this mode.)
#[tokio::test]
async fn run_process_group_alone_misses_the_detached_descendant() {
    let m = marker();
    let mut cmd = with_descendants(&m, "");
    cmd.containment(Containment::ProcessGroup);
    let o = run(cmd).await.unwrap();
    assert_eq!(o.containment, Containment::ProcessGroup);
    let until = Instant::now() + Duration::from_secs(5);
    while !alive(&format!("{m}-group")).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let group = alive(&format!("{m}-group"));
    let session = alive(&format!("{m}-session"));
    for pid in &session {
        let pid = rustix::process::Pid::from_raw(*pid).expect("a pid");
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).ok();
    }
    assert!(group.is_empty(), "the group kill missed {group:?}");
    assert_eq!(
        session.len(),
        1,
        "the setsid descendant escapes the group kill"
    );
}

#[tokio::test]
async fn run_descendants_die_after_timeout() {
    for mode in offered(MODES, "run_descendants_die_after_timeout").await {
        let m = marker();
        let mut cmd = with_descendants(&m, "setInterval(() => {}, 1000)");
        cmd.timeout(Duration::from_millis(1500)).containment(mode);
        let probe = m.clone();
        let during = tokio::spawn(async move {
            wait_alive(&probe, 2).await;
        });
        let e = run(cmd).await.unwrap_err();
        during.await.unwrap();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        let left: Vec<String> = alive(&m)
            .iter()
            .map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default())
            .collect();
        assert!(left.is_empty(), "{mode:?}: {left:?} outlived the run");
    }
}

#[tokio::test]
async fn run_cancellation_kills_everything_before_returning() {
    for mode in offered(MODES, "run_cancellation_kills_everything_before_returning").await {
        let m = marker();
        let mut cmd = with_descendants(&m, "setInterval(() => {}, 1000)");
        cmd.containment(mode);
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let probe = m.clone();
        tokio::spawn(async move {
            wait_alive(&probe, 2).await;
            trigger.cancel();
        });
        let e = cmd.run(&cancel).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled);
        assert_dead(mode, &m, "the run");
    }
}

#[tokio::test]
async fn run_dropped_future_kills_and_reaps() {
    for mode in offered(MODES, "run_dropped_future_kills_and_reaps").await {
        let m = marker();
        let mut cmd = with_descendants(&m, "setInterval(() => {}, 1000)");
        cmd.containment(mode);
        let cancel = CancellationToken::new();
        let mut fut = Box::pin(cmd.run(&cancel));
        tokio::select! {
            _ = &mut fut => panic!("the run ended by itself"),
            () = wait_alive(&m, 2) => {}
        }
        drop(fut);
        assert_dead(mode, &m, "the dropped run");
    }
}

#[tokio::test]
async fn run_already_cancelled_starts_nothing() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let e = js("").run(&cancel).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
}

#[tokio::test]
async fn run_missing_program_is_start_failed() {
    let e = run(Command::new("/nonexistent/node")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::StartFailed);
    assert_eq!(
        e.io_error().and_then(|e| e.raw_os_error()),
        Some(libc::ENOENT)
    );
}

#[tokio::test]
#[allow(unsafe_code, reason = "pre_exec steps are unsafe to add, as std's are")]
async fn run_pre_exec_steps_run_in_the_program() {
    let mut cmd = js("process.stdout.write(process.umask().toString(8))");
    // SAFETY: umask is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o027);
            Ok(())
        });
    }
    let o = run(cmd).await.unwrap();
    assert_eq!(o.stdout.text, "27");

    let mut cmd = js("");
    // SAFETY: returns an error without any call.
    unsafe {
        cmd.pre_exec(|| Err(std::io::Error::from_raw_os_error(libc::EACCES)));
    }
    let e = run(cmd).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::StartFailed);
    assert_eq!(
        e.io_error().and_then(|e| e.raw_os_error()),
        Some(libc::EACCES)
    );
}

#[tokio::test]
async fn run_passes_a_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.txt");
    std::fs::write(&path, "through fd 3").unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let mut cmd = js("process.stdout.write(require('fs').readFileSync(3, 'utf8'))");
    cmd.pass_fd(&file, 3).unwrap();
    let o = run(cmd).await.unwrap();
    assert_eq!(o.stdout.text, "through fd 3");
}

#[tokio::test]
async fn run_working_directory_is_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = js("process.stdout.write(process.cwd())");
    cmd.current_dir(dir.path());
    let o = run(cmd).await.unwrap();
    assert_eq!(
        o.stdout.text,
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
}

/// How a scenario ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Exit,
    Timeout,
    Cancel,
    Drop,
}

/// What a reporting script said about itself and its descendants.
#[derive(Debug, Default, PartialEq, Eq)]
struct Report {
    /// `process.pid` and the two descendants' `child.pid`, as the script saw them.
    node: i32,
    group: i32,
    session: i32,
    /// The script's `0::` line of `/proc/self/cgroup`, and its descendants' as read by it.
    cgroup: String,
    group_cgroup: String,
    session_cgroup: String,
    /// Whether `/proc/<pid>/cmdline`, read by the script, holds the marker argument of each
    /// descendant: true when the pids it sees are host pids.
    group_seen: bool,
    session_seen: bool,
}

impl Report {
    fn parse(text: &str) -> Self {
        let mut r = Report::default();
        for field in text.split_whitespace() {
            let (key, value) = field.split_once('=').unwrap();
            match key {
                "node" => r.node = value.parse().unwrap(),
                "group" => r.group = value.parse().unwrap(),
                "session" => r.session = value.parse().unwrap(),
                "cgroup" => r.cgroup = value.to_owned(),
                "groupCgroup" => r.group_cgroup = value.to_owned(),
                "sessionCgroup" => r.session_cgroup = value.to_owned(),
                "groupSeen" => r.group_seen = value == "true",
                "sessionSeen" => r.session_seen = value == "true",
                _ => panic!("unknown field {key}"),
            }
        }
        r
    }
}

/// The orphan's program: it leaves the run's cgroup for the cgroup `argv[1]` names (the
/// parent of the run's, where the embedder lives) when it may, says where it ended up in the
/// file `argv[2]`, and lingers.
const ORPHAN: &str = "const fs = require('fs');
    let moved; try { fs.writeFileSync(process.argv[1] + '/cgroup.procs', String(process.pid)); moved = 'moved'; } catch (e) { moved = e.code; }
    fs.writeFileSync(process.argv[2], moved);
    setInterval(() => {}, 1000)";

/// A script that starts a descendant in the process group, one in its own session
/// (`detached: true`), and an orphan (double-forked: started by a short-lived intermediate, in
/// a session of its own, and moved to another cgroup where the user may), prints its pid and
/// its first two descendants' pids and what it sees of them (one line on stdout, and the same
/// line to `file`, renamed into place once the orphan has said where it is, for runs that end
/// without output), then runs `tail`.
fn reporting(marker: &str, file: &Path, tail: &str) -> Command {
    let file = file.to_str().unwrap();
    let source = format!(
        "const fs = require('fs'), path = require('path'), {{ spawn }} = require('child_process');
         const keep = ['-e', 'setInterval(() => {{}}, 1000)'];
         const g = spawn(process.execPath, [...keep, '{marker}-group'], {{ stdio: 'ignore' }});
         const s = spawn(process.execPath, [...keep, '{marker}-session'], {{ stdio: 'ignore', detached: true }});
         g.unref(); s.unref();
         const read = (f) => {{ try {{ return fs.readFileSync(f, 'latin1'); }} catch (e) {{ return ''; }} }};
         const cg = (pid) => (read('/proc/' + pid + '/cgroup').split('\\n').find((l) => l.startsWith('0::')) || '0::none').slice(3);
         const seen = (pid, arg) => read('/proc/' + pid + '/cmdline').split('\\0').includes(arg);
         const away = path.join(process.argv[1], path.dirname(cg('self')));
         const middle = 'require(\"child_process\").spawn(process.execPath, process.argv.slice(1), ' +
           '{{ stdio: \"ignore\", detached: true }}).unref()';
         spawn(process.execPath, ['-e', middle, '--', '-e', {orphan:?}, '--', away, '{file}.orphan', '{marker}-orphan'],
           {{ stdio: 'ignore' }}).unref();
         const line = 'node=' + process.pid + ' group=' + g.pid + ' session=' + s.pid +
           ' cgroup=' + cg('self') + ' groupCgroup=' + cg(g.pid) + ' sessionCgroup=' + cg(s.pid) +
           ' groupSeen=' + seen(g.pid, '{marker}-group') + ' sessionSeen=' + seen(s.pid, '{marker}-session');
         const done = () => {{
           fs.writeFileSync('{file}.tmp', line);
           fs.renameSync('{file}.tmp', '{file}');
           process.stdout.write(line);
           {tail}
         }};
         const wait = () => fs.existsSync('{file}.orphan') ? done() : setTimeout(wait, 5);
         wait();",
        orphan = ORPHAN,
    );
    let mut cmd = js(&source);
    cmd.arg("--")
        .arg(cgroup2_mount())
        .timeout(Duration::from_secs(10));
    cmd
}

async fn wait_report(file: &Path) -> Report {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            return Report::parse(&text);
        }
        assert!(Instant::now() < until, "the script never reported");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The mount point of the (first) cgroup2 hierarchy, or `/nonexistent`.
fn cgroup2_mount() -> PathBuf {
    testkit::fixture::cgroup2_mount().unwrap_or_else(|| PathBuf::from("/nonexistent"))
}

/// While the run lasts: every descendant is alive (the census finds each); in cgroup mode
/// the script and its descendants are in the run's cgroup; where the script sees host pids,
/// what it printed names exactly its descendants.
async fn check_live(mode: Containment, report: &Report, m: &str) {
    for who in ["group", "session", "orphan"] {
        wait_alive(&format!("{m}-{who}"), 1).await;
    }
    if mode == Containment::Cgroup {
        let own = format!("/confine-{}-", std::process::id());
        assert!(report.cgroup.starts_with(&own), "{report:?}");
    }
    assert_eq!(report.group_seen, report.session_seen, "{report:?}");
    if report.group_seen {
        // Host pids: the script could read its descendants' cgroups.
        assert_eq!(report.group_cgroup, report.cgroup);
        assert_eq!(report.session_cgroup, report.cgroup);
        assert!(cmdline(report.group).contains(&format!("{m}-group")));
        assert!(cmdline(report.session).contains(&format!("{m}-session")));
    } else {
        // The printed pids are the namespace's: on the host they name something else.
        assert!(report.node < 10 && report.group < 10, "{report:?}");
    }
}

/// Whether `pid` is gone from the host: `kill(pid, 0)` fails with ESRCH (or the pid already
/// names another live process, one without `arg`: reused).
fn gone(pid: i32, arg: &str) -> bool {
    // kill(pid, 0): sends nothing, only asks whether `pid` exists.
    if let Err(e) = rustix::process::test_kill_process(rustix::process::Pid::from_raw(pid).unwrap())
    {
        return e == rustix::io::Errno::SRCH;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z'));
    !zombie && !cmdline(pid).is_empty() && !cmdline(pid).iter().any(|a| a == arg)
}

/// After the run: every process it started is dead, by the census and, where the script saw
/// host pids, by the printed pids; in cgroup mode the cgroup is gone.
async fn check_dead(mode: Containment, report: &Report, m: &str) {
    assert_dead(mode, m, "the run");
    if mode == Containment::Cgroup {
        let dir = cgroup2_mount().join(report.cgroup.trim_start_matches('/'));
        assert!(!dir.exists(), "{} was left behind", dir.display());
    }
    if !report.group_seen {
        return;
    }
    let pids = [
        (report.node, m.to_owned()),
        (report.group, format!("{m}-group")),
        (report.session, format!("{m}-session")),
    ];
    for (pid, arg) in &pids {
        assert!(
            gone(*pid, arg),
            "{mode:?}: pid {pid} ({arg}) outlived the run: {:?} {:?}",
            std::fs::read_to_string(format!("/proc/{pid}/stat")),
            std::fs::read_to_string(format!("/proc/{pid}/status")).map(|s| s
                .lines()
                .take(9)
                .collect::<Vec<_>>()
                .join("|"))
        );
    }
}

/// One run under `mode` that ends by `end`, with the checks during and after; false when the
/// mode is not available here (said loudly).
async fn scenario(mode: Containment, namespace: Option<bool>, end: End) -> bool {
    if !available(mode, &format!("scenario {end:?}")).await {
        return false;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let m = marker();
    let tail = match end {
        End::Exit => "",
        _ => "setInterval(() => {}, 1000)",
    };
    let mut cmd = reporting(&m, &file, tail);
    // The node pid check needs the marker in the script's own arguments.
    cmd.arg(&m).containment(mode);
    // A root program that drops its capabilities finds the cgroup file systems read-only
    // (`process_bound.rs` tests that); one that keeps them can still leave the run's cgroup,
    // and that is the orphan whose death these scenarios check.
    if rustix::process::geteuid().is_root() {
        cmd.drop_privileges(false);
    }
    if let Some(namespace) = namespace {
        cmd.pid_namespace(namespace);
    }
    if end == End::Timeout {
        // Long enough for three cold Node.js starts and the report on a loaded machine (2.5 s
        // was overrun once as an ordinary user beside other builds); the bound still ends it.
        cmd.timeout(Duration::from_secs(6));
    }
    let cancel = CancellationToken::new();
    let mut fut = Box::pin(cmd.run(&cancel));
    let report = match end {
        End::Exit => {
            let o = fut.await.unwrap();
            assert_eq!((o.exit_code, o.containment), (Some(0), mode), "{o:?}");
            let report = Report::parse(&o.stdout.text);
            assert_eq!(
                report,
                Report::parse(&std::fs::read_to_string(&file).unwrap())
            );
            assert_eq!(report.group_seen, !o.pid_namespace, "{report:?}");
            report
        }
        End::Timeout | End::Cancel => {
            let during = async {
                let report = wait_report(&file).await;
                check_live(mode, &report, &m).await;
                if end == End::Cancel {
                    cancel.cancel();
                }
                report
            };
            let (result, report) = tokio::join!(fut, during);
            let expected = match end {
                End::Timeout => ErrorKind::TimedOut,
                _ => ErrorKind::Cancelled,
            };
            assert_eq!(result.unwrap_err().kind(), expected);
            report
        }
        End::Drop => {
            let report = tokio::select! {
                _ = &mut fut => panic!("the run ended by itself"),
                r = wait_report(&file) => r,
            };
            check_live(mode, &report, &m).await;
            drop(fut);
            report
        }
    };
    let orphan = std::fs::read_to_string(format!("{}.orphan", file.display())).unwrap();
    if rustix::process::geteuid().is_root() && mode == Containment::Cgroup {
        // Root may move a process out of the run's cgroup: the attack really happened.
        assert_eq!(orphan, "moved", "{mode:?}");
    }
    check_dead(mode, &report, &m).await;
    true
}

/// Each end in each mode (and in a cgroup without the PID namespace inside, opted out, where
/// the script sees host pids): the group member, the session leader and the double-forked,
/// cgroup-hopping orphan are all alive during the run and dead when it is over.
async fn every_mode(end: End) {
    let mut ran = Vec::new();
    for mode in MODES {
        if scenario(mode, None, end).await {
            ran.push(mode.name());
        }
    }
    if scenario(Containment::Cgroup, Some(false), end).await {
        ran.push("cgroup without a PID namespace");
    }
    eprintln!("{end:?}: ran in {ran:?}");
    assert!(
        ran.contains(&"subreaper"),
        "the subreaper needs no privilege"
    );
}

#[tokio::test]
async fn run_descendants_dead_after_exit_in_every_mode() {
    every_mode(End::Exit).await;
}

#[tokio::test]
async fn run_descendants_dead_after_timeout_in_every_mode() {
    every_mode(End::Timeout).await;
}

#[tokio::test]
async fn run_descendants_dead_after_cancellation_in_every_mode() {
    every_mode(End::Cancel).await;
}

#[tokio::test]
async fn run_descendants_dead_after_drop_in_every_mode() {
    every_mode(End::Drop).await;
}

/// Without the sandbox, a root script that kept its capabilities (an embedder's opt-out) may
/// write another cgroup's `cgroup.procs` and leave the run's cgroup (with them dropped, the
/// default, the cgroup file systems are read-only for it: `EROFS`); with the sandbox,
/// Landlock refuses that write. Either way nothing outlives the run (the moved orphan is in
/// the scenarios above).
#[tokio::test]
async fn run_cgroup_escape_refused_by_the_sandbox() {
    assert!(
        LandlockSupport::probe().abi().is_some_and(|abi| abi >= 4),
        "this machine has Landlock"
    );
    if !available(
        Containment::Cgroup,
        "run_cgroup_escape_refused_by_the_sandbox",
    )
    .await
    {
        return;
    }
    let workspace = tempfile::tempdir().unwrap();
    let source = "const fs = require('fs'), path = require('path');
        const own = fs.readFileSync('/proc/self/cgroup', 'utf8').split('\\n').find((l) => l.startsWith('0::')).slice(3);
        const procs = path.join(process.argv[1], path.dirname(own), 'cgroup.procs');
        let r; try { fs.writeFileSync(procs, String(process.pid)); r = 'ok'; } catch (e) { r = e.code; }
        process.stdout.write(r)";
    let attempt = |sandboxed: bool| {
        let mut cmd = js(source);
        cmd.arg("--")
            .arg(cgroup2_mount())
            .current_dir(workspace.path())
            .timeout(Duration::from_secs(10));
        if sandboxed {
            let dir = std::fs::File::open(workspace.path()).unwrap();
            cmd.sandbox(&Sandbox::new().build(&dir).unwrap());
        }
        cmd
    };
    let confined = run(attempt(true)).await.unwrap();
    assert_eq!(confined.containment, Containment::Cgroup);
    // Refused by the sandbox's read-only view of everything outside the workspace (EROFS)
    // where a mount namespace can be made, else by Landlock (EACCES).
    assert!(
        ["EROFS", "EACCES"].contains(&confined.stdout.text.as_str()),
        "{}: {}",
        confined.stdout.text,
        confined.stderr.text
    );
    if rustix::process::geteuid().is_root() {
        let mut open = attempt(false);
        open.drop_privileges(false);
        let open = run(open).await.unwrap();
        assert_eq!(open.stdout.text, "ok", "{}", open.stderr.text);
        let covered = run(attempt(false)).await.unwrap();
        assert_eq!(covered.stdout.text, "EROFS", "{}", covered.stderr.text);
    }
}

/// What the script says about its own privileges: session leader, controlling terminal,
/// no new privileges, capabilities (effective, permitted, bounding).
const PRIVILEGES: &str = "const fs = require('fs');
    const stat = fs.readFileSync('/proc/self/stat', 'latin1');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const status = fs.readFileSync('/proc/self/status', 'latin1');
    const field = (name) => new RegExp(name + ':\\\\s*(\\\\w+)').exec(status)[1];
    process.stdout.write(JSON.stringify({
      ownSession: f[3] === String(require('fs').readlinkSync('/proc/self')),
      tty: f[4],
      noNewPrivs: field('NoNewPrivs'),
      capEff: field('CapEff'), capPrm: field('CapPrm'), capBnd: field('CapBnd'),
    }))";

/// Every child, in every mode and without a sandbox: its own session with no controlling
/// terminal, no new privileges, no capabilities (as root too); the embedder may opt out.
#[tokio::test]
async fn run_child_has_less_privilege_than_the_embedder() {
    for mode in offered(MODES, "run_child_has_less_privilege_than_the_embedder").await {
        let mut cmd = js(PRIVILEGES);
        cmd.containment(mode);
        let o = run(cmd).await.unwrap();
        let said = serde_json_lite(
            &o.stdout
                .text
                .replace(":true", ":\"true\"")
                .replace(":false", ":\"false\""),
        );
        assert_eq!(said["ownSession"], "true", "{mode:?}: {}", o.stdout.text);
        assert_eq!(said["tty"], "0", "{mode:?}");
        assert_eq!(said["noNewPrivs"], "1", "{mode:?}");
        assert_eq!(said["capEff"], "0000000000000000", "{mode:?}");
        assert_eq!(said["capPrm"], "0000000000000000", "{mode:?}");
        if rustix::process::geteuid().is_root() && !o.user_namespace {
            assert_eq!(said["capBnd"], "0000000000000000", "{mode:?}");
        }
    }
    // The opt-out: the embedder's session and privileges.
    let mut cmd = js(PRIVILEGES);
    cmd.new_session(false).drop_privileges(false);
    let o = run(cmd).await.unwrap();
    let said = serde_json_lite(
        &o.stdout
            .text
            .replace(":true", ":\"true\"")
            .replace(":false", ":\"false\""),
    );
    assert_eq!(said["ownSession"], "false", "{}", o.stdout.text);
    assert_eq!(said["noNewPrivs"], "0");
    if rustix::process::geteuid().is_root() && !o.user_namespace {
        assert_ne!(said["capEff"], "0000000000000000");
    }
}

/// The waiter is a fork of the embedder: its `/proc/<pid>/environ` would show the
/// embedder's whole environment (this test process's `CARGO_*` variables). It is unreadable
/// (not dumpable) and, even to a reader with the embedder's own privileges, empty of it. The
/// twin: the embedder's own environment is readable with those privileges.
#[tokio::test]
async fn run_waiter_environment_holds_nothing_of_the_embedder() {
    assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
    let source = "const fs = require('fs');
        const read = (pid) => { try { return fs.readFileSync('/proc/' + pid + '/environ', 'latin1').includes('CARGO') ? 'leaked' : 'clean'; } catch (e) { return e.code; } };
        process.stdout.write(read(process.ppid) + ' ' + read(process.argv[1]))";
    let modes = [Containment::Cgroup, Containment::Subreaper];
    for mode in offered(
        modes,
        "run_waiter_environment_holds_nothing_of_the_embedder",
    )
    .await
    {
        for keep in [false, true] {
            let mut cmd = js(source);
            // Host pids, so that the parent is the waiter.
            cmd.arg(std::process::id().to_string())
                .containment(mode)
                .pid_namespace(false)
                .drop_privileges(!keep);
            let o = run(cmd).await.unwrap();
            eprintln!("{mode:?} keep={keep}: {}", o.stdout.text);
            let (waiter, embedder) = o.stdout.text.split_once(' ').unwrap();
            assert_ne!(waiter, "leaked", "{mode:?} keep={keep}");
            if keep {
                assert_eq!(embedder, "leaked", "the twin: {mode:?}");
            }
        }
    }
}

/// The namespace's init runs on the waiter's memory (one copy of the embedder fewer per run)
/// and, in cgroup mode, outside the run's cgroup, where the program is born. Checked from
/// outside while the program sleeps: the program's parent is the init, the init's parent is
/// the waiter, and `kcmp(KCMP_VM)` says whether two processes share their memory. The same
/// check tells a copy apart: the waiter (a fork of this process) shares nothing with it, nor
/// does the program once it has executed. `kcmp` needs read access for ptrace to the waiter,
/// which is not dumpable: root only; an ordinary user's run prints that it did not run.
#[tokio::test]
#[allow(unsafe_code, reason = "kcmp, which no safe wrapper offers")]
async fn run_init_shares_the_waiter_memory_and_stays_out_of_the_cgroup() {
    const TEST: &str = "run_init_shares_the_waiter_memory_and_stays_out_of_the_cgroup";
    if !rustix::process::geteuid().is_root() {
        testkit::not_run(TEST, "as an ordinary user (kcmp of a not-dumpable waiter)");
        return;
    }
    let same_memory = |a: i32, b: i32| {
        const KCMP_VM: libc::c_long = 1;
        // SAFETY: kcmp reads nothing of ours; it compares two processes' memory descriptors.
        let r = unsafe { libc::syscall(libc::SYS_kcmp, a, b, KCMP_VM, 0, 0) };
        assert!(
            r >= 0,
            "kcmp({a}, {b}): {}",
            std::io::Error::last_os_error()
        );
        r == 0
    };
    let parent_of = |pid: i32| -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(1).unwrap().parse().unwrap()
    };
    let cgroup_of = |pid: i32| -> String {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("0::"))
            .unwrap_or_default()
            .to_owned()
    };
    for mode in offered([Containment::Cgroup, Containment::PidNamespace], TEST).await {
        let m = marker();
        let mut cmd = command("/bin/sh");
        cmd.arg("-c")
            .arg("sleep 2; true")
            .arg(&m)
            .current_dir("/")
            .timeout(Duration::from_secs(20))
            .containment(mode);
        let running = tokio::spawn(run(cmd));
        let until = Instant::now() + Duration::from_secs(5);
        let program = loop {
            let found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
                let pid: i32 = e.file_name().to_str()?.parse().ok()?;
                cmdline(pid).iter().any(|a| a == &m).then_some(pid)
            });
            if let Some(pid) = found {
                break pid;
            }
            assert!(Instant::now() < until, "{mode:?}: the program never showed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let init = parent_of(program);
        let waiter = parent_of(init);
        assert_eq!(parent_of(waiter), std::process::id() as i32, "{mode:?}");
        assert!(
            same_memory(waiter, init),
            "{mode:?}: the init runs on the waiter's memory"
        );
        assert!(
            !same_memory(init, program),
            "{mode:?}: the program executed"
        );
        let me = std::process::id() as i32;
        assert!(
            !same_memory(me, waiter),
            "{mode:?}: the waiter is a copy (the twin)"
        );
        if mode == Containment::Cgroup {
            let run_cgroup = cgroup_of(program);
            assert!(run_cgroup.contains("confine-"), "{mode:?}: {run_cgroup}");
            assert_ne!(cgroup_of(init), run_cgroup, "{mode:?}: the init is outside");
            assert_ne!(
                cgroup_of(waiter),
                run_cgroup,
                "{mode:?}: the waiter is outside"
            );
        }
        let o = running.await.unwrap().unwrap();
        assert_eq!(o.exit_code, Some(0), "{mode:?}: {o:?}");
        assert!(o.pid_namespace, "{mode:?}");
    }
}

/// The helper for the next test, run as a separate process: runs a script with lingering
/// descendants in the mode the environment names, until it is killed.
#[test]
#[ignore = "run by run_embedder_killed_kills_everything_within_a_second, in its own process"]
fn helper_embedder_runs_until_killed() {
    let (Ok(mode), Ok(m)) = (
        std::env::var("NODEEXEC_HELPER_MODE"),
        std::env::var("NODEEXEC_HELPER_MARKER"),
    ) else {
        eprintln!("helper_embedder_runs_until_killed: only a helper; nothing to do");
        return;
    };
    let mode = MODES.into_iter().find(|c| c.name() == mode).unwrap();
    let mut cmd = with_descendants(&m, "setInterval(() => {}, 1000)");
    cmd.arg(&m)
        .containment(mode)
        .timeout(Duration::from_secs(60));
    run_until_killed(cmd)
}

/// SIGKILL of the embedding process in the middle of a run: within a second nothing the run
/// started is alive, in every mode, and (cgroup mode) its cgroup is gone.
#[tokio::test]
#[allow(
    clippy::disallowed_methods,
    reason = "the embedder itself must be a bare process the test can SIGKILL"
)]
async fn run_embedder_killed_kills_everything_within_a_second() {
    for mode in offered(
        MODES,
        "run_embedder_killed_kills_everything_within_a_second",
    )
    .await
    {
        let m = marker();
        let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "helper_embedder_runs_until_killed",
                "--ignored",
                "--nocapture",
            ])
            .env("NODEEXEC_HELPER_MODE", mode.name())
            .env("NODEEXEC_HELPER_MARKER", &m)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The script itself and its two descendants.
        wait_alive(&m, 3).await;
        let helper_pid = helper.id();
        helper.kill().unwrap();
        helper.wait().unwrap();
        let within_a_second = testkit::census::check(&m, Duration::from_secs(1));
        if let Err(left) = within_a_second {
            panic!("{mode:?}: outlived the embedder by a second: {left}");
        }
        if mode == Containment::Cgroup {
            let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
            let own = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
            let dir = cgroup2_mount().join(own.trim_start_matches('/'));
            let prefix = format!("confine-{helper_pid}-");
            let until = Instant::now() + Duration::from_secs(1);
            loop {
                let left: Vec<_> = std::fs::read_dir(&dir)
                    .unwrap()
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .collect();
                if left.is_empty() {
                    break;
                }
                assert!(Instant::now() < until, "{left:?} left behind");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// A 2 GiB allocation fails cleanly inside the script (the default memory bound is 1 GiB),
/// in every mode; the next run works. At the bound: an allocation under it succeeds.
#[tokio::test]
async fn run_memory_bound_refuses_a_2_gib_allocation() {
    let source = "let r; try { const b = Buffer.alloc(Number(process.argv[1])); r = 'allocated ' + b.length; } \
        catch (e) { r = e.name; } process.stdout.write(r)";
    for mode in offered(MODES, "run_memory_bound_refuses_a_2_gib_allocation").await {
        let mut cmd = js(source);
        cmd.arg((2u64 << 30).to_string())
            .containment(mode)
            .timeout(Duration::from_secs(10));
        let o = run(cmd).await.unwrap();
        assert_eq!(o.stdout.text, "RangeError", "{mode:?}: {o:?}");
        // Under the bound (with room for Node.js itself).
        let mut cmd = js(source);
        cmd.arg((256u64 << 20).to_string())
            .containment(mode)
            .timeout(Duration::from_secs(10));
        let o = run(cmd).await.unwrap();
        assert_eq!(
            o.stdout.text,
            format!("allocated {}", 256u64 << 20),
            "{mode:?}"
        );
        // Without our bound, the twin allocates it.
        let mut cmd = js(source);
        cmd.arg((2u64 << 30).to_string())
            .containment(mode)
            .max_memory(None)
            .timeout(Duration::from_secs(10));
        let o = run(cmd).await.unwrap();
        assert_eq!(
            o.stdout.text,
            format!("allocated {}", 2u64 << 30),
            "{mode:?}"
        );
    }
}

/// A shell fork bomb under a bound of 32 processes: forks past it fail, the run ends at its
/// time bound with nothing left, and the next run works. Root gets no `RLIMIT_NPROC` from the
/// kernel: there (without the cgroup `pids` controller) the test says so and does not run.
#[tokio::test]
async fn run_fork_bomb_is_bounded_and_cleaned_up() {
    if rustix::process::geteuid().is_root() {
        testkit::not_run(
            "run_fork_bomb_is_bounded_and_cleaned_up",
            "as root (the kernel exempts root \
             from RLIMIT_NPROC; the ordinary-user CI run covers it)",
        );
        return;
    }
    for mode in offered(MODES, "run_fork_bomb_is_bounded_and_cleaned_up").await {
        let m = marker();
        let cmd = fork_bomb(&m, mode);
        let e = run(cmd).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{mode:?}");
        assert!(alive(&m).is_empty(), "{mode:?}: {} left", alive(&m).len());
        let o = run(js("process.stdout.write('after')")).await.unwrap();
        assert_eq!(o.stdout.text, "after");
    }
}

/// Runs sharing one `RunSlots` of 2: never more than 2 alive at once, all complete, in order
/// of asking; one cancelled while queued ends as cancelled without starting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_slots_bound_concurrent_runs() {
    let slots = std::sync::Arc::new(confine_nodeexec::RunSlots::new(2));
    let m = marker();
    let source = "setTimeout(() => process.stdout.write('done'), 300)";
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let counter = {
        let (m, peak, stop) = (m.clone(), peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                peak.fetch_max(alive(&m).len(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut runs = Vec::new();
    for _ in 0..6 {
        let mut cmd = js(source);
        cmd.arg(&m)
            .slots(slots.clone())
            .timeout(Duration::from_secs(5));
        runs.push(tokio::spawn(async move { run(cmd).await }));
    }
    let queued_cancel = CancellationToken::new();
    let mut queued = js(source);
    queued.arg(&m).slots(slots.clone());
    let cancel = queued_cancel.clone();
    let waiting = tokio::spawn(async move { queued.run(&cancel).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    queued_cancel.cancel();
    assert_eq!(
        waiting.await.unwrap().unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    for r in runs {
        assert_eq!(r.await.unwrap().unwrap().stdout.text, "done");
    }
    stop.cancel();
    counter.await.unwrap();
    let peak = peak.load(Ordering::Relaxed);
    assert!((1..=2).contains(&peak), "peak {peak}");
    assert_eq!(slots.available(), 2);
}

/// Where `close_range` is refused (a kernel before 5.9, or a seccomp policy that answers it
/// `EPERM`, as container runtimes' older default profiles did), the waiter closes its
/// descriptors one by one, thousands of calls, at the moment the program starts on the memory
/// the waiter shares with it (in the namespace modes the init and the program run on the
/// waiter's memory, errno included). A program that cannot be executed must still be reported
/// with its own error, every time. A close loop that writes errno (the C library's `close`)
/// fails this: a run now and then reports `EBADF`.
#[test]
fn run_start_failure_keeps_its_error_where_close_range_is_refused() {
    // The filter applies to the thread that installs it and to what it forks (the waiter),
    // not to the rest of the test binary.
    std::thread::spawn(|| {
        refuse_close_range();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let test = "run_start_failure_keeps_its_error_where_close_range_is_refused";
            for mode in MODES {
                if !available(mode, test).await {
                    continue;
                }
                for _ in 0..50 {
                    let mut cmd = command("/nonexistent/node");
                    cmd.containment(mode);
                    let e = run(cmd).await.unwrap_err();
                    assert_eq!(e.kind(), ErrorKind::StartFailed, "{mode:?}");
                    assert_eq!(
                        e.io_error().and_then(|e| e.raw_os_error()),
                        Some(libc::ENOENT),
                        "{mode:?}: {e}"
                    );
                }
            }
        });
    })
    .join()
    .expect("the test thread");
}

/// Install, on the calling thread, a seccomp filter that answers `close_range` with `EPERM`
/// and allows every other call; check that it took.
#[expect(unsafe_code, reason = "prctl and seccomp(2) with a filter of our own")]
fn refuse_close_range() {
    const CLOSE_RANGE: u32 = libc::SYS_close_range as u32;
    let statement = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let filter = [
        // The system call's number: offset 0 of `struct seccomp_data`.
        statement(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        jump(CLOSE_RANGE, 0, 1),
        statement(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
        statement(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: sets this thread's no_new_privs flag, which a filter needs without privilege.
    let set = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(set, 0, "no_new_privs: {}", std::io::Error::last_os_error());
    // SAFETY: `program` points at `filter`, both alive for the call; the filter only refuses
    // close_range, which nothing in this thread needs.
    let installed = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &raw const program,
        )
    };
    assert_eq!(installed, 0, "seccomp: {}", std::io::Error::last_os_error());
    // SAFETY: closes nothing (no descriptor has this number).
    let refused = unsafe { libc::syscall(libc::SYS_close_range, u32::MAX, u32::MAX, 0) };
    assert_eq!(
        (refused, std::io::Error::last_os_error().raw_os_error()),
        (-1, Some(libc::EPERM)),
        "close_range is refused on this thread"
    );
}

/// Two descriptors onto files outside any workspace, left open without close-on-exec the way
/// a launcher's `exec 7>>outside/leak.txt 8<outside/secret.txt` leaves them: (the leak file's
/// path, its descriptor open for appending, the secret's descriptor open for reading).
fn launcher_descriptors(dir: &Path) -> (PathBuf, std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use rustix::io::{FdFlags, fcntl_getfd, fcntl_setfd};
    let leak = dir.join("leak.txt");
    std::fs::write(&leak, "").unwrap();
    std::fs::write(dir.join("secret.txt"), "TOP-SECRET-VALUE\n").unwrap();
    let open = |path: &Path, append: bool| {
        let file = std::fs::OpenOptions::new()
            .read(!append)
            .append(append)
            .open(path)
            .unwrap();
        // High numbers, as a shell's redirections are: distinct from anything the run places.
        let fd = rustix::io::fcntl_dupfd_cloexec(&file, 40).unwrap();
        fcntl_setfd(&fd, FdFlags::empty()).unwrap();
        assert!(!fcntl_getfd(&fd).unwrap().contains(FdFlags::CLOEXEC));
        fd
    };
    let w = open(&leak, true);
    let r = open(&dir.join("secret.txt"), false);
    (leak, w, r)
}

/// The time bound of a descriptor probe: a shell, two subshells and a pipeline of three
/// programs, which the default 500 ms does not always cover on a loaded machine.
const PROBE_TIME: Duration = Duration::from_secs(30);

/// The probe, for bash (dash redirects only single-digit descriptors): write through the first
/// descriptor, read through the second, then list the descriptors the shell holds (`ls` opens
/// one of its own, the lowest free number: 3).
fn descriptor_probe(w: i32, r: i32) -> String {
    format!(
        "(echo PWNED >&{w}) 2>/dev/null && echo wrote; \
         (cat <&{r}) 2>/dev/null; echo fds: $(ls /proc/self/fd | sort -n | tr '\\n' ' ')"
    )
}

#[tokio::test]
async fn run_inherits_no_descriptor_the_embedder_left_open_in_every_mode() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let (leak, w, r) = launcher_descriptors(dir.path());
    let probe = descriptor_probe(w.as_raw_fd(), r.as_raw_fd());

    // The twin: a plain child of the same process inherits both and uses them.
    #[allow(
        clippy::disallowed_methods,
        reason = "the naive twin is a bare std child"
    )]
    let plain = std::process::Command::new("/bin/bash")
        .arg("-c")
        .arg(&probe)
        .output()
        .unwrap();
    let plain = String::from_utf8_lossy(&plain.stdout).into_owned();
    assert!(
        plain.contains("wrote") && plain.contains("TOP-SECRET-VALUE"),
        "{plain}"
    );
    assert_eq!(std::fs::read_to_string(&leak).unwrap(), "PWNED\n");
    std::fs::write(&leak, "").unwrap();

    let modes = offered(
        MODES.into_iter().chain([Containment::ProcessGroup]),
        "run_inherits_no_descriptor",
    )
    .await;
    assert!(modes.contains(&Containment::Subreaper), "{modes:?}");
    for mode in modes {
        for drop_privileges in [true, false] {
            let mut cmd = command("/bin/bash");
            cmd.arg("-c")
                .arg(&probe)
                .current_dir("/")
                .containment(mode)
                .drop_privileges(drop_privileges)
                .timeout(PROBE_TIME);
            let o = run(cmd).await.unwrap();
            let said = &o.stdout.text;
            assert!(
                !said.contains("wrote"),
                "{mode:?}: wrote through it: {said}"
            );
            assert!(
                !said.contains("TOP-SECRET"),
                "{mode:?}: read through it: {said}"
            );
            assert!(said.ends_with("fds: 0 1 2 3\n"), "{mode:?}: {said:?}");
            assert_eq!(std::fs::read_to_string(&leak).unwrap(), "", "{mode:?}");
        }
    }
}

#[tokio::test]
async fn run_passed_descriptors_survive_the_sealing() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let (_leak, w, r) = launcher_descriptors(dir.path());
    let file = std::fs::File::open(dir.path().join("secret.txt")).unwrap();
    let mut cmd = command("/bin/sh");
    // The leaked ones stay closed; the one handed on 5 (and 9, out of order) is readable.
    cmd.arg("-c")
        .arg(format!(
            "cat <&5; cat <&9; (cat <&{}) 2>/dev/null || echo sealed; ls /proc/self/fd | sort -n | tr '\\n' ' '",
            r.as_raw_fd()
        ))
        .current_dir("/")
        .timeout(PROBE_TIME);
    cmd.pass_fd(&file, 9).unwrap();
    let file5 = std::fs::File::open(dir.path().join("secret.txt")).unwrap();
    cmd.pass_fd(&file5, 5).unwrap();
    let o = run(cmd).await.unwrap();
    drop(w);
    assert_eq!(
        o.stdout.text, "TOP-SECRET-VALUE\nTOP-SECRET-VALUE\nsealed\n0 1 2 3 5 9 ",
        "{o:?}"
    );
}

/// Where `close_range` is refused (a kernel before 5.11 lacks its close-on-exec form; a seccomp
/// policy may refuse it whole), the program's process seals what it inherited by reading
/// `/proc/self/fd`: the launcher's descriptors are still out of the program's reach.
#[test]
fn run_inherits_no_descriptor_where_close_range_is_refused() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let (leak, w, r) = launcher_descriptors(dir.path());
    let probe = descriptor_probe(w.as_raw_fd(), r.as_raw_fd());
    std::thread::spawn(move || {
        refuse_close_range();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            for mode in offered(
                MODES,
                "run_inherits_no_descriptor_where_close_range_is_refused",
            )
            .await
            {
                let mut cmd = command("/bin/bash");
                cmd.arg("-c")
                    .arg(&probe)
                    .current_dir("/")
                    .containment(mode)
                    .timeout(PROBE_TIME);
                let o = run(cmd).await.unwrap();
                let said = &o.stdout.text;
                assert!(
                    !said.contains("wrote") && !said.contains("TOP-SECRET"),
                    "{mode:?}: {said}"
                );
                assert!(said.ends_with("fds: 0 1 2 3\n"), "{mode:?}: {said:?}");
            }
        });
    })
    .join()
    .expect("the test thread");
    assert_eq!(std::fs::read_to_string(&leak).unwrap(), "");
    drop((w, r));
}
