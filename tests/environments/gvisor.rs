//! Where hosted agents run: the same tool battery through `confine call` on the host and under
//! gVisor (`runsc --network=none do`, Debian's `runsc`), every record compared. gVisor is a
//! kernel of its own: `openat2` is missing (`ENOSYS`), `pidfd_open` too, `SIGCHLD` arrives
//! late, `setsid` answers 0, `close_range` refuses a bound above `INT_MAX`, `readlinkat(fd,
//! "")` answers `EINVAL`; each once broke a tool there (a panic in `run_command`, a read that
//! failed, a walk that answered empty).
//!
//! The battery: every file tool on a tree with a subdirectory, `run_command` (exit codes,
//! output, a background job read and stopped), `node_process`, and an interactive shell on a
//! terminal of its own (a line typed, its answer read, the job stopped). `confine doctor`
//! under gVisor says Landlock is missing there and the sandbox (the default) unusable, with
//! `--no-sandbox` as the way to start. Durations are left out of
//! the comparison; nothing else is. `runsc do` needs root: as an ordinary user this suite
//! says so and does not run (the root pass of CI runs it, with `runsc` installed).

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const TEST: &str = "the_tool_battery_answers_under_gvisor_as_on_the_host";

/// The fixture: files at the root and below, as the judge's tree had them.
fn fixture(root: &Path) {
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(root.join("sub/b.txt"), "sub line\nalpha too\n").unwrap();
    std::fs::write(root.join("sub/deeper/c.txt"), "deep alpha\n").unwrap();
    std::fs::write(root.join("sub/d.md"), "# title\n").unwrap();
    std::os::unix::fs::symlink("b.txt", root.join("sub/link.txt")).unwrap();
    // One time for every file, so that both trees answer `file_info` alike.
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    for file in ["a.txt", "sub/b.txt", "sub/deeper/c.txt", "sub/d.md"] {
        let f = std::fs::File::options()
            .write(true)
            .open(root.join(file))
            .unwrap();
        f.set_modified(when).unwrap();
    }
}

fn battery() -> Vec<(&'static str, Value)> {
    vec![
        ("read_file", json!({"path": "sub/b.txt"})),
        ("read_file", json!({"path": "sub/deeper/c.txt"})),
        ("read_file", json!({"path": "sub/link.txt"})),
        ("read_file", json!({"path": "sub/missing.txt"})),
        ("read_lines", json!({"path": "sub/b.txt", "startLine": 2})),
        ("file_info", json!({"path": "sub/deeper/c.txt"})),
        ("list_directory", json!({"path": "sub"})),
        ("list_directory", json!({"path": "sub/deeper"})),
        ("find_files", json!({"pattern": "**/*.txt"})),
        ("find_files", json!({"pattern": "*.txt", "path": "sub"})),
        ("grep", json!({"pattern": "alpha"})),
        ("grep", json!({"pattern": "alpha", "path": "sub"})),
        (
            "write_file",
            json!({"path": "sub/new/e.txt", "content": "new\n"}),
        ),
        (
            "edit_file",
            json!({"path": "sub/b.txt", "edits": [{"oldText": "sub line", "newText": "edited"}]}),
        ),
        ("read_file", json!({"path": "sub/b.txt"})),
        ("create_directory", json!({"path": "sub/made/here"})),
        (
            "move_file",
            json!({"source": "sub/d.md", "destination": "sub/made/d.md"}),
        ),
        ("delete_file", json!({"path": "sub/new/e.txt"})),
        ("find_files", json!({"pattern": "**/*"})),
        // A shell glob, not `ls`: Debian's gVisor refuses coreutils' `statx` of a
        // subdirectory (`EINVAL`), which is gVisor's own answer to every program there.
        (
            "run_command",
            json!({"command": "echo out; echo err >&2; echo sub/*; exit 3"}),
        ),
        (
            "run_command",
            json!({"command": "(sleep 0.1 &); cat sub/b.txt | wc -l"}),
        ),
        // Containment: what a run leaves behind (a daemon in a session of its own) is dead
        // once the run has answered, on both kernels.
        (
            "run_command",
            json!({"command": "(setsid sleep 301 &); echo spawned"}),
        ),
        (
            "run_command",
            // Counted until none is left, for at most two seconds (the kill of what a run
            // leaves may finish just after its answer); a survivor lives 301 s.
            json!({"command": "for i in $(seq 20); do n=$(for p in /proc/[0-9]*; do tr '\\0' ' ' 2>/dev/null < $p/cmdline; echo; done | grep -c '^sleep 301'); [ $n = 0 ] && break; sleep 0.1; done; echo $n"}),
        ),
        (
            "run_command",
            json!({"command": "echo job; sleep 30", "background": true}),
        ),
        ("job_output", json!({"jobId": "job-1", "waitMs": 5000})),
        ("job_stop", json!({"jobId": "job-1"})),
        (
            "node_process",
            json!({"source": "const fs = require('fs'); console.log(fs.readdirSync('sub').sort().join(','))"}),
        ),
        // An interactive job on a terminal of its own: a shell, its prompt read first (so that
        // the answer to the input holds the echo, the output and the next prompt, whatever the
        // timing), a line typed, stopped.
        (
            "run_command",
            json!({"command": "sh", "background": true, "tty": {"cols": 80, "rows": 24}}),
        ),
        ("job_output", json!({"jobId": "job-2", "waitMs": 5000})),
        (
            "job_input",
            json!({"jobId": "job-2", "text": "echo hi\n", "waitMs": 5000}),
        ),
        ("job_stop", json!({"jobId": "job-2"})),
    ]
}

/// The battery's records through `confine call` in `root`, run under `prefix` (nothing for
/// the host), durations removed.
fn records(prefix: &[&str], root: &Path) -> Vec<Value> {
    let input: String = battery()
        .iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            format!(
                "{}\n",
                json!({"id": i, "name": name, "arguments": arguments})
            )
        })
        .collect();
    let mut argv: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
    argv.push(env!("CARGO_BIN_EXE_confine").to_owned());
    argv.extend(["call", "--root"].map(str::to_owned));
    argv.push(root.display().to_string());
    // gVisor starts Node.js slower than the 500 ms default: the same bound on both sides.
    // gVisor offers no Landlock, so the default (the sandbox) refuses to start there (checked
    // below); the battery compares the tools themselves, unsandboxed on both sides.
    argv.extend(["--allow-commands", "--no-sandbox", "--timeout-ms", "20000"].map(str::to_owned));
    argv.extend(support::census_flags());
    #[allow(clippy::disallowed_methods)]
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        records.len(),
        battery().len(),
        "{prefix:?}: {text}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for record in &mut records {
        if let Some(content) = record["content"].as_object_mut() {
            content.remove("durationMs");
        }
    }
    records
}

/// Whether `runsc do` runs a program here.
fn runsc_works() -> Result<(), String> {
    #[allow(clippy::disallowed_methods)]
    let out = Command::new("runsc")
        .args(["--network=none", "do", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("no runsc here: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "runsc do fails here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

#[test]
fn the_tool_battery_answers_under_gvisor_as_on_the_host() {
    if !rustix::process::geteuid().is_root() {
        testkit::not_run(TEST, "runsc do needs root; the root pass runs it");
        return;
    }
    if let Err(why) = runsc_works() {
        testkit::not_run(TEST, &why);
        return;
    }
    let host = tempfile::tempdir().unwrap();
    fixture(host.path());
    let host_records = records(&[], host.path());
    let gvisor = tempfile::tempdir().unwrap();
    fixture(gvisor.path());
    let gvisor_records = records(&["runsc", "--network=none", "do"], gvisor.path());
    // The default under gVisor: one line naming what is missing and the way out, exit 2.
    #[allow(clippy::disallowed_methods)]
    let out = Command::new("runsc")
        .args([
            "--network=none",
            "do",
            env!("CARGO_BIN_EXE_confine"),
            "call",
            "--root",
        ])
        .arg(gvisor.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("Landlock") && stderr.contains("--no-sandbox"),
        "{stderr}"
    );
    // `confine doctor` there: it reports (exit 0) what is missing and what the default does
    // about it, line by line (host paths, the containment and the rest left out).
    #[allow(clippy::disallowed_methods)]
    let out = Command::new("runsc")
        .args([
            "--network=none",
            "do",
            env!("CARGO_BIN_EXE_confine"),
            "doctor",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |label: &str| {
        report
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} line: {report}"))
            .to_owned()
    };
    assert_eq!(line("landlock:"), "landlock:      not in this kernel");
    assert_eq!(
        line("sandbox:"),
        format!(
            "sandbox:       unusable (SANDBOX_UNAVAILABLE): a server offering node_process or \
             run_command refuses to start unless --no-sandbox is given (the sandbox needs \
             Landlock ABI {} or newer)",
            confine_nodeexec::DEFAULT_MIN_ABI
        )
    );
    assert_eq!(
        line("sandbox check:"),
        "sandbox check: not run (\"NODE_SANDBOX_UNAVAILABLE\")"
    );
    let mut disagreements = Vec::new();
    for ((h, g), (name, args)) in host_records.iter().zip(&gvisor_records).zip(battery()) {
        if h != g {
            disagreements.push(format!("{name} {args}:\n  host   {h}\n  gVisor {g}"));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} calls answer otherwise under gVisor:\n{}",
        disagreements.len(),
        battery().len(),
        disagreements.join("\n")
    );
    // The battery is not vacuous: the host's answers are the expected ones.
    assert_eq!(
        host_records[0]["content"]["content"],
        "sub line\nalpha too\n"
    );
    assert_eq!(host_records[19]["content"]["exitCode"], 3);
    assert_eq!(host_records[21]["content"]["stdout"], "spawned\n");
    assert_eq!(host_records[22]["content"]["stdout"], "0\n");
    assert_eq!(host_records[24]["content"]["stdout"], "job\n");
    // The terminal job: its shell answered the line typed, and was stopped.
    let typed = host_records[29]["content"]["stdout"].as_str().unwrap();
    assert!(typed.contains("echo hi\r\nhi\r\n"), "{typed:?}");
    assert_eq!(host_records[30]["content"]["status"], "killed");
}
