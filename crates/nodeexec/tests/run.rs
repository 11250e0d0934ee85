//! Integration tests of `nodeexec` with a real Node.js (one test binary).
//!
//! Liveness of descendants is checked two ways. By the pids a script prints: in cgroup mode
//! (the default here) they are host pids, and after the run each must be gone (`kill(pid, 0)`
//! is `ESRCH`, after a short bounded wait for the host's init to reap the orphans). And by a
//! census of `/proc`: every descendant carries a unique marker argument, and a process counts
//! as alive when its command line holds the marker and it is not a zombie; that is the check
//! in PID-namespace mode, where printed pids are the namespace's and mean nothing outside.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use std::path::Path;

use nodeexec::{Command, Containment, ErrorKind, LandlockSupport, Outcome, Sandbox};
use tokio_util::sync::CancellationToken;

mod support;
use support::node;

fn js(source: &str) -> Command {
    let mut cmd = Command::new(node());
    cmd.arg("-e").arg(source).current_dir("/");
    cmd
}

async fn run(cmd: Command) -> Result<Outcome, nodeexec::Error> {
    cmd.run(&CancellationToken::new()).await
}

fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "nodeexec-marker-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Pids of live (non-zombie) processes whose command line holds `marker`.
fn alive(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmdline).contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
        if !matches!(state, Some('Z') | Some('X') | None) {
            out.push(pid);
        }
    }
    out
}

async fn wait_alive(marker: &str, count: usize) {
    let until = Instant::now() + Duration::from_secs(10);
    while alive(marker).len() < count {
        assert!(
            Instant::now() < until,
            "descendants of {marker} never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

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
    // This machine and CI run as root with a writable cgroup2 hierarchy: the cgroup must be
    // there.
    assert_eq!(o.containment, Containment::Cgroup);
}

/// Each cap on containment gives that mode here (root, cgroup2, PID namespaces all present),
/// and the script's own pid is a host pid exactly in cgroup mode.
#[tokio::test]
async fn run_containment_cap_selects_each_mode() {
    for mode in [
        Containment::Cgroup,
        Containment::PidNamespace,
        Containment::ProcessGroup,
    ] {
        let marker = marker();
        let mut cmd = js(&format!(
            "const argv = require('fs').readFileSync('/proc/' + process.pid + '/cmdline', 'latin1');
             process.stdout.write(String(argv.split('\\0').includes('{marker}')))"
        ));
        cmd.arg(&marker).containment(mode);
        let o = run(cmd).await.unwrap();
        assert_eq!(o.containment, mode);
        let host_pid = mode != Containment::PidNamespace;
        assert_eq!(
            o.stdout.text,
            host_pid.to_string(),
            "{mode:?}: {}",
            o.stderr.text
        );
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
    let o = run(js(
        "process.stdout.write('a'.repeat(32768)); process.stderr.write('b'.repeat(32769))",
    ))
    .await
    .unwrap();
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
        let allowed =
            ["PATH", "LANG", "TZ", "EXTRA"].contains(&name.as_str()) || name.starts_with("LC_");
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
    assert!(took < Duration::from_millis(800), "{took:?}");
}

#[tokio::test]
async fn run_descendant_holding_stdout_turns_exit_into_timeout() {
    let m = marker();
    let source = format!(
        "require('child_process').spawn(process.execPath,
            ['-e', 'setInterval(() => {{}}, 1000)', '{m}'],
            {{ stdio: ['ignore', 'inherit', 'ignore'], detached: true }}).unref();
         process.stdout.write('parent done')"
    );
    let mut cmd = js(&source);
    let bound = Duration::from_millis(1500);
    cmd.timeout(bound);
    let start = Instant::now();
    let e = run(cmd).await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(
        took >= bound && took < bound + Duration::from_millis(500),
        "{took:?}"
    );
    assert!(alive(&m).is_empty(), "the descendant outlived the run");
}

#[tokio::test]
async fn run_descendants_die_after_exit() {
    let m = marker();
    let o = run(with_descendants(&m, "process.stdout.write('bye')"))
        .await
        .unwrap();
    assert_eq!((o.exit_code, o.stdout.text.as_str()), (Some(0), "bye"));
    assert_eq!(o.containment, Containment::Cgroup);
    assert!(alive(&m).is_empty(), "{:?} outlived the run", alive(&m));
}

/// The twin: without the namespace, the process group's kill misses the session leader. (The
/// group member got SIGKILL, which is final, but it may take a moment to finish dying: nobody
/// of ours reaps it in this mode.)
#[tokio::test]
async fn run_without_namespace_misses_the_detached_descendant() {
    let m = marker();
    let mut cmd = with_descendants(&m, "");
    cmd.pid_namespace(false);
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
    let m = marker();
    let mut cmd = with_descendants(&m, "setInterval(() => {}, 1000)");
    cmd.timeout(Duration::from_millis(1500));
    let probe = m.clone();
    let during = tokio::spawn(async move {
        wait_alive(&probe, 2).await;
    });
    let e = run(cmd).await.unwrap_err();
    during.await.unwrap();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(alive(&m).is_empty(), "{:?} outlived the run", alive(&m));
}

#[tokio::test]
async fn run_cancellation_kills_everything_before_returning() {
    let m = marker();
    let cmd = with_descendants(&m, "setInterval(() => {}, 1000)");
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let probe = m.clone();
    tokio::spawn(async move {
        wait_alive(&probe, 2).await;
        trigger.cancel();
    });
    let e = cmd.run(&cancel).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert!(alive(&m).is_empty(), "{:?} outlived the run", alive(&m));
}

#[tokio::test]
async fn run_dropped_future_kills_and_reaps() {
    let m = marker();
    let cmd = with_descendants(&m, "setInterval(() => {}, 1000)");
    let cancel = CancellationToken::new();
    let mut fut = Box::pin(cmd.run(&cancel));
    tokio::select! {
        _ = &mut fut => panic!("the run ended by itself"),
        () = wait_alive(&m, 2) => {}
    }
    drop(fut);
    assert!(
        alive(&m).is_empty(),
        "{:?} outlived the dropped run",
        alive(&m)
    );
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

/// What a reporting script said about itself and its two descendants.
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

/// A script that starts a descendant in the process group and one in its own session
/// (`detached: true`), prints their pids, its own and what it sees of them (one line on
/// stdout, and the same line to `file`, renamed into place, for runs that end without
/// output), then runs `tail`.
fn reporting(marker: &str, file: &Path, tail: &str) -> Command {
    let file = file.to_str().unwrap();
    let source = format!(
        "const fs = require('fs'), {{ spawn }} = require('child_process');
         const keep = ['-e', 'setInterval(() => {{}}, 1000)'];
         const g = spawn(process.execPath, [...keep, '{marker}-group'], {{ stdio: 'ignore' }});
         const s = spawn(process.execPath, [...keep, '{marker}-session'], {{ stdio: 'ignore', detached: true }});
         g.unref(); s.unref();
         const read = (f) => {{ try {{ return fs.readFileSync(f, 'latin1'); }} catch (e) {{ return ''; }} }};
         const cg = (pid) => (read('/proc/' + pid + '/cgroup').split('\\n').find((l) => l.startsWith('0::')) || '0::none').slice(3);
         const seen = (pid, arg) => read('/proc/' + pid + '/cmdline').split('\\0').includes(arg);
         const line = 'node=' + process.pid + ' group=' + g.pid + ' session=' + s.pid +
           ' cgroup=' + cg('self') + ' groupCgroup=' + cg(g.pid) + ' sessionCgroup=' + cg(s.pid) +
           ' groupSeen=' + seen(g.pid, '{marker}-group') + ' sessionSeen=' + seen(s.pid, '{marker}-session');
         fs.writeFileSync('{file}.tmp', line);
         fs.renameSync('{file}.tmp', '{file}');
         process.stdout.write(line);
         {tail}"
    );
    let mut cmd = js(&source);
    cmd.timeout(Duration::from_secs(10));
    cmd
}

async fn wait_report(file: &Path) -> Report {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            return Report::parse(&text);
        }
        assert!(Instant::now() < until, "the script never reported");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The mount point of the (first) cgroup2 hierarchy.
fn cgroup2_mount() -> PathBuf {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mountinfo
        .lines()
        .find_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            (fields[dash + 1] == "cgroup2").then(|| PathBuf::from(fields[4]))
        })
        .expect("a cgroup2 mount")
}

/// The host's command line of `pid`, split into arguments (empty for a zombie or no process).
fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split('\0')
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// While the run lasts: what the script printed names, on the host, exactly its descendants,
/// in the run's cgroup (cgroup mode); the census finds both (namespace mode).
async fn check_live(mode: Containment, report: &Report, m: &str) {
    match mode {
        Containment::Cgroup => {
            assert!(cmdline(report.group).contains(&format!("{m}-group")));
            assert!(cmdline(report.session).contains(&format!("{m}-session")));
            assert!(report.group_seen && report.session_seen, "{report:?}");
            let own = format!("/confine-{}-", std::process::id());
            assert!(report.cgroup.starts_with(&own), "{report:?}");
            assert_eq!(report.group_cgroup, report.cgroup);
            assert_eq!(report.session_cgroup, report.cgroup);
        }
        _ => {
            wait_alive(&format!("{m}-group"), 1).await;
            wait_alive(&format!("{m}-session"), 1).await;
            // The printed pids are the namespace's: on the host they name something else.
            assert!(report.node < 10 && report.group < 10, "{report:?}");
            assert!(!report.group_seen && !report.session_seen, "{report:?}");
        }
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

/// After the run: every process it started is dead. In cgroup mode, by the printed pids
/// (allowing the host's init a bounded moment to reap the orphans) and the cgroup is gone; in
/// namespace mode, by the census.
async fn check_dead(mode: Containment, report: &Report, m: &str) {
    assert!(alive(m).is_empty(), "{:?} outlived the run", alive(m));
    if mode != Containment::Cgroup {
        return;
    }
    let dir = cgroup2_mount().join(report.cgroup.trim_start_matches('/'));
    assert!(!dir.exists(), "{} was left behind", dir.display());
    let pids = [
        (report.node, m.to_owned()),
        (report.group, format!("{m}-group")),
        (report.session, format!("{m}-session")),
    ];
    let until = Instant::now() + Duration::from_secs(5);
    for (pid, arg) in &pids {
        while !gone(*pid, arg) {
            assert!(Instant::now() < until, "pid {pid} ({arg}) outlived the run");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// One run under `mode` that ends by `end`, with the checks during and after.
async fn scenario(mode: Containment, end: End) {
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
    if end == End::Timeout {
        cmd.timeout(Duration::from_millis(1500));
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
            if mode == Containment::Cgroup {
                assert!(report.group_seen && report.session_seen, "{report:?}");
            }
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
    check_dead(mode, &report, &m).await;
}

#[tokio::test]
async fn run_cgroup_printed_pids_dead_after_exit() {
    scenario(Containment::Cgroup, End::Exit).await;
}

#[tokio::test]
async fn run_cgroup_printed_pids_dead_after_timeout() {
    scenario(Containment::Cgroup, End::Timeout).await;
}

#[tokio::test]
async fn run_cgroup_printed_pids_dead_after_cancellation() {
    scenario(Containment::Cgroup, End::Cancel).await;
}

#[tokio::test]
async fn run_cgroup_printed_pids_dead_after_drop() {
    scenario(Containment::Cgroup, End::Drop).await;
}

#[tokio::test]
async fn run_namespace_descendants_dead_after_exit() {
    scenario(Containment::PidNamespace, End::Exit).await;
}

#[tokio::test]
async fn run_namespace_descendants_dead_after_timeout() {
    scenario(Containment::PidNamespace, End::Timeout).await;
}

#[tokio::test]
async fn run_namespace_descendants_dead_after_cancellation() {
    scenario(Containment::PidNamespace, End::Cancel).await;
}

#[tokio::test]
async fn run_namespace_descendants_dead_after_drop() {
    scenario(Containment::PidNamespace, End::Drop).await;
}

/// The documented limit of cgroup mode without the sandbox: a root script can move itself
/// out of the run's cgroup (into the parent's `cgroup.procs`); with the sandbox, Landlock
/// refuses that write. The twin shows the refusal is the sandbox's doing.
#[tokio::test]
async fn run_cgroup_escape_refused_by_the_sandbox_only() {
    assert!(
        LandlockSupport::probe().abi().is_some_and(|abi| abi >= 4),
        "this machine has Landlock"
    );
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
    assert_eq!(confined.stdout.text, "EACCES", "{}", confined.stderr.text);
    // The unconfined twin escapes (as root); it then exits by itself, leaving nothing.
    let open = run(attempt(false)).await.unwrap();
    assert_eq!(open.containment, Containment::Cgroup);
    assert_eq!(open.stdout.text, "ok", "{}", open.stderr.text);
}
