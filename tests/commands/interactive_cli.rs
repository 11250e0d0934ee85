//! Interactive jobs through the binary (`confine call`, one JSON line in, one out, jobs
//! numbered `job-1`, `job-2`… in the order started): `run_command {…, background: true,
//! stdin: true}` (a pipe) and `{…, tty: {cols, rows}}` (a terminal of the job's own),
//! `job_input` and `job_resize`. A Python REPL keeps its state between inputs on a terminal and
//! on a pipe, so does Node.js's on a terminal (Ctrl-C stopping a loop, the REPL alive), a
//! prompt is answered, `isatty(0)` tells the two apart, Ctrl-C interrupts a loop
//! while the REPL lives, `cat` ends on `closeStdin`, `stty size` sees a resize, a terminal job
//! works under `--sandbox` and reaches no other terminal, a write the job never reads is
//! bounded, the limits hold at N and N+1, and nothing is left after `job_stop` or the server's
//! end (a census by mark).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support;
use support::{census_flags, marker, spawn_call};

/// One `confine call --allow-commands <flags>` server, driven a line at a time.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    fn start(root: &Path, flags: &[&str]) -> Self {
        let census = census_flags();
        let mut all = vec!["--allow-commands"];
        all.extend(census.iter().map(|s| &**s));
        all.extend_from_slice(flags);
        let mut child = spawn_call(root, &all);
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// Call `name`: `Ok(record)` or `Err(token)`.
    fn call(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        let line = json!({"id": 1, "name": name, "arguments": arguments});
        let stdin = self.stdin.as_mut().expect("the server's input is open");
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        let answer: Value = serde_json::from_str(&answer).unwrap_or_else(|_| panic!("{answer}"));
        let content = answer["content"].clone();
        match answer["isError"].as_bool() {
            Some(false) => Ok(content),
            _ => Err(content["error"]["message"]
                .as_str()
                .unwrap_or_else(|| panic!("{answer}"))
                .to_owned()),
        }
    }

    fn ok(&mut self, name: &str, arguments: Value) -> Value {
        let args = arguments.to_string();
        self.call(name, arguments)
            .unwrap_or_else(|e| panic!("{name} {args}: {e}"))
    }

    /// The token `name` refuses `arguments` with.
    fn refused(&mut self, name: &str, arguments: Value) -> String {
        let args = arguments.to_string();
        match self.call(name, arguments) {
            Ok(record) => panic!("{name} {args} answered {record}"),
            Err(token) => token,
        }
    }

    /// Start `command` as a job with `extra` arguments (`stdin`, `tty`): its id.
    fn start_job(&mut self, command: &str, extra: Value) -> String {
        let mut arguments = json!({"command": command, "background": true});
        for (k, v) in extra.as_object().unwrap() {
            arguments[k] = v.clone();
        }
        let record = self.ok("run_command", arguments);
        record["jobId"].as_str().expect("a job id").to_owned()
    }

    /// `job_input` of `text` with a wait, then `job_output` until what was read holds
    /// `needle` (bounded): all stdout read.
    fn turn(&mut self, id: &str, text: &str, needle: &str) -> String {
        let record = self.ok(
            "job_input",
            json!({"jobId": id, "text": text, "waitMs": 5000}),
        );
        assert_eq!(record["written"], text.len(), "{record}");
        let mut seen = record["stdout"].as_str().unwrap().to_owned();
        self.read_until(id, &mut seen, needle);
        seen
    }

    /// Read the job's stdout into `seen` until it holds `needle` (at most 60 s).
    fn read_until(&mut self, id: &str, seen: &mut String, needle: &str) {
        let until = Instant::now() + Duration::from_secs(60);
        while !seen.contains(needle) {
            assert!(Instant::now() < until, "{needle:?} never came: {seen:?}");
            let record = self.ok("job_output", json!({"jobId": id, "waitMs": 1000}));
            seen.push_str(record["stdout"].as_str().unwrap());
            if record["status"] != "running" && !seen.contains(needle) {
                panic!("the job ended without {needle:?}: {seen:?} {record}");
            }
        }
    }

    /// End the server's input and wait for it to exit.
    fn end(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

const TTY: fn() -> Value = || json!({"tty": {"cols": 80, "rows": 24}});
const PIPE: fn() -> Value = || json!({"stdin": true});

fn census_clear(m: &str) {
    // Within a second by the contract; five allow for a loaded machine.
    testkit::census::check(m, Duration::from_secs(5)).unwrap();
}

#[test]
fn a_python_repl_on_a_terminal_keeps_its_state_and_survives_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let m = marker();
    let mut s = Session::start(dir.path(), &[]);
    // Not `exec`: the shell stays the session's leader, so the terminal is the session's
    // controlling terminal only by the server's doing (a leader that opens a terminal takes
    // it by itself).
    let id = s.start_job(&format!("JOB_MARK={m} python3 -u -i -q"), TTY());
    assert_eq!(id, "job-1");
    s.turn(&id, "x = 41\n", ">>> ");
    let out = s.turn(&id, "print(x + 1)\n", "42\r\n");
    assert!(out.contains("print(x + 1)"), "the terminal echoes: {out:?}");
    s.turn(
        &id,
        "import os; print('tty', os.isatty(0))\n",
        "tty True\r\n",
    );
    // A loop that never ends, then Ctrl-C: the statement is interrupted, the REPL lives.
    let record = s.ok(
        "job_input",
        json!({"jobId": id, "text": "while True: pass\n\n", "waitMs": 300}),
    );
    assert_eq!(record["status"], "running", "{record}");
    let ctrl_c = base64::engine::general_purpose::STANDARD.encode([3u8]);
    let record = s.ok(
        "job_input",
        json!({"jobId": id, "bytesBase64": ctrl_c, "waitMs": 5000}),
    );
    assert_eq!(record["written"], 1, "{record}");
    let mut seen = record["stdout"].as_str().unwrap().to_owned();
    s.read_until(&id, &mut seen, "KeyboardInterrupt");
    let out = s.turn(&id, "print(x * 2)\n", "82\r\n");
    assert!(!out.contains("Traceback"), "{out:?}");
    assert_eq!(
        s.ok("job_output", json!({"jobId": id}))["status"],
        "running"
    );
    support::wait_alive_blocking(&m, 1);
    let record = s.ok("job_stop", json!({"jobId": id}));
    assert_eq!(record["status"], "killed", "{record}");
    census_clear(&m);
    // The job's input went with it.
    assert_eq!(
        s.refused("job_input", json!({"jobId": id, "text": "1\n"})),
        "JOB_INPUT_CLOSED"
    );
    s.end();
}

/// Whether `node` is on PATH; the test that needs it says loudly when it is not.
fn have_node(test: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("node").is_file()));
    if !found {
        testkit::not_run(test, "no node on PATH");
    }
    found
}

#[test]
fn a_node_repl_on_a_terminal_keeps_its_state_and_survives_ctrl_c() {
    if !have_node("a_node_repl_on_a_terminal_keeps_its_state_and_survives_ctrl_c") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let m = marker();
    let mut s = Session::start(dir.path(), &[]);
    // Node's REPL on the job's terminal, without colours (the answers read plain) and without
    // a history file. Not `exec`, as for Python.
    let id = s.start_job(
        &format!("JOB_MARK={m} NODE_DISABLE_COLORS=1 NODE_REPL_HISTORY= node -i"),
        TTY(),
    );
    assert_eq!(id, "job-1");
    s.turn(&id, "let a = 41\n", "undefined\r\n");
    let out = s.turn(&id, "a + 1\n", "42\r\n");
    assert!(out.contains("a + 1"), "the REPL echoes: {out:?}");
    s.turn(&id, "process.stdin.isTTY\n", "true\r\n");
    // A loop that never ends, then Ctrl-C: Node's REPL interrupts the script (an error of
    // its own, ERR_SCRIPT_EXECUTION_INTERRUPTED) and prompts again; the state is kept.
    let record = s.ok(
        "job_input",
        json!({"jobId": id, "text": "while (true) {}\n", "waitMs": 300}),
    );
    assert_eq!(record["status"], "running", "{record}");
    let mut seen = record["stdout"].as_str().unwrap().to_owned();
    // The REPL echoes the line as it takes it, then evaluates it: Ctrl-C after the echo (and
    // a moment for the evaluation to begin) stops the loop, not the line being typed.
    s.read_until(&id, &mut seen, "while (true) {}");
    std::thread::sleep(Duration::from_millis(300));
    let record = s.ok(
        "job_input",
        json!({"jobId": id, "bytesBase64": "Aw==", "waitMs": 5000}),
    );
    assert_eq!(record["written"], 1, "{record}");
    let mut seen = record["stdout"].as_str().unwrap().to_owned();
    s.read_until(&id, &mut seen, "ERR_SCRIPT_EXECUTION_INTERRUPTED");
    assert!(
        seen.contains("Script execution was interrupted by `SIGINT`"),
        "{seen:?}"
    );
    let out = s.turn(&id, "a * 2\n", "82\r\n");
    assert!(!out.contains("Uncaught"), "{out:?}");
    assert_eq!(
        s.ok("job_output", json!({"jobId": id}))["status"],
        "running"
    );
    support::wait_alive_blocking(&m, 1);
    let record = s.ok("job_stop", json!({"jobId": id}));
    assert_eq!(record["status"], "killed", "{record}");
    census_clear(&m);
    assert_eq!(
        s.refused("job_input", json!({"jobId": id, "text": "1\n"})),
        "JOB_INPUT_CLOSED"
    );
    s.end();
}

#[test]
fn a_python_repl_on_a_pipe_keeps_its_state_and_ends_on_close_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(dir.path(), &[]);
    let id = s.start_job("python3 -u -i -q", PIPE());
    s.turn(&id, "x = 41\n", "");
    // No echo, no terminal: stdout holds the answers alone (prompts go to stderr).
    s.turn(&id, "print(x + 1)\n", "42\n");
    s.turn(
        &id,
        "import os; print('tty', os.isatty(0))\n",
        "tty False\n",
    );
    let record = s.ok(
        "job_input",
        json!({"jobId": id, "text": "print(x * 2)\n", "closeStdin": true, "waitMs": 10000}),
    );
    // `text` is written before the input closes: the REPL answers, then reads its end.
    let mut seen = record["stdout"].as_str().unwrap().to_owned();
    s.read_until(&id, &mut seen, "82\n");
    let mut status = record["status"].clone();
    for _ in 0..100 {
        if status != "running" {
            break;
        }
        status = s.ok("job_output", json!({"jobId": id, "waitMs": 500}))["status"].clone();
    }
    assert_eq!(status, "exited");
    assert_eq!(
        s.refused("job_input", json!({"jobId": id, "text": "1\n"})),
        "JOB_INPUT_CLOSED"
    );
    s.end();
}

#[test]
fn a_prompt_is_answered_and_an_ended_job_takes_no_more_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(dir.path(), &[]);
    let id = s.start_job("sh -c 'read x; echo got $x'", PIPE());
    let record = s.ok(
        "job_input",
        json!({"jobId": id, "text": "hello\n", "waitMs": 10000}),
    );
    let mut seen = record["stdout"].as_str().unwrap().to_owned();
    s.read_until(&id, &mut seen, "got hello\n");
    assert_eq!(seen, "got hello\n");
    let until = Instant::now() + Duration::from_secs(30);
    while s.ok("job_output", json!({"jobId": id, "waitMs": 500}))["status"] == "running" {
        assert!(Instant::now() < until, "the job never ended");
    }
    assert_eq!(
        s.refused("job_input", json!({"jobId": id, "text": "again\n"})),
        "JOB_INPUT_CLOSED"
    );
    // The same prompt on a terminal: the answer follows the echo of the typed line.
    let id = s.start_job("sh -c 'read x; echo got $x'", TTY());
    let out = s.turn(&id, "there\n", "got there\r\n");
    assert!(out.starts_with("there\r\n"), "{out:?}");
    s.end();
}

#[test]
fn isatty_is_true_on_a_terminal_job_only_and_only_it_has_a_controlling_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(dir.path(), &[]);
    let probe = "python3 -c 'import os; print(\"isatty\", os.isatty(0), os.isatty(1), os.isatty(2))'; \
                 (exec 3<>/dev/tty && echo ctty) 2>/dev/null || echo no-ctty";
    let tty = s.start_job(probe, TTY());
    let pipe = s.start_job(probe, PIPE());
    let plain = s.start_job(probe, json!({}));
    let mut seen = String::new();
    s.read_until(&tty, &mut seen, "ctty");
    assert!(seen.contains("isatty True True True\r\n"), "{seen:?}");
    assert!(seen.contains("\r\nctty\r\n"), "{seen:?}");
    for id in [pipe, plain] {
        let mut seen = String::new();
        s.read_until(&id, &mut seen, "ctty");
        assert_eq!(seen, "isatty False False False\nno-ctty\n", "{id}");
    }
    s.end();
}

#[test]
fn cat_ends_on_close_stdin_with_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(dir.path(), &[]);
    for (extra, expected) in [(PIPE(), "meow\npurr"), (TTY(), "purr")] {
        let id = s.start_job("cat; echo cat-ended", extra);
        // A whole line, then an unfinished one given with closeStdin in the same call.
        s.ok("job_input", json!({"jobId": id, "text": "meow\n"}));
        let record = s.ok(
            "job_input",
            json!({"jobId": id, "text": "purr", "closeStdin": true, "waitMs": 10000}),
        );
        let mut seen = record["stdout"].as_str().unwrap().to_owned();
        s.read_until(&id, &mut seen, "cat-ended");
        assert!(seen.contains(expected), "{seen:?}");
        assert_eq!(
            s.refused("job_input", json!({"jobId": id, "text": "more"})),
            "JOB_INPUT_CLOSED"
        );
        assert_eq!(
            s.refused("job_input", json!({"jobId": id, "closeStdin": true})),
            "JOB_INPUT_CLOSED"
        );
    }
    s.end();
}

#[test]
fn a_resize_is_seen_by_stty_size() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(dir.path(), &[]);
    let id = s.start_job("sh", TTY());
    s.turn(&id, "stty size\n", "24 80\r\n");
    let record = s.ok("job_resize", json!({"jobId": id, "cols": 132, "rows": 50}));
    assert_eq!(record, json!({"jobId": id, "cols": 132, "rows": 50}));
    s.turn(&id, "stty size\n", "50 132\r\n");
    // The limits, at N and N+1.
    s.ok("job_resize", json!({"jobId": id, "cols": 1000, "rows": 1}));
    s.turn(&id, "stty size\n", "1 1000\r\n");
    for (cols, rows) in [(1001, 24), (80, 1001), (0, 24), (80, 0)] {
        assert_eq!(
            s.refused(
                "job_resize",
                json!({"jobId": id, "cols": cols, "rows": rows})
            ),
            "INVALID_JOB_INPUT",
            "{cols}x{rows}"
        );
    }
    let id = s.start_job("stty size", json!({"tty": {"cols": 1000, "rows": 1000}}));
    let mut seen = String::new();
    s.read_until(&id, &mut seen, "1000 1000\r\n");
    for tty in [
        json!({"cols": 1001, "rows": 24}),
        json!({"cols": 80, "rows": 0}),
    ] {
        assert_eq!(
            s.refused(
                "run_command",
                json!({"command": "sh", "background": true, "tty": tty})
            ),
            "INVALID_RUN_COMMAND_INPUT"
        );
    }
    s.end();
}

#[test]
fn input_is_bounded_at_64_kib_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(dir.path(), &[]);
    let sink = s.start_job("cat > /dev/null", PIPE());
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![b'b'; n]);
    let text = |n: usize| "t".repeat(n);
    // N: 65,536 bytes, as text, as base64, and the two together.
    for arguments in [
        json!({"jobId": sink, "text": text(65_536)}),
        json!({"jobId": sink, "bytesBase64": b64(65_536)}),
        json!({"jobId": sink, "text": text(65_000), "bytesBase64": b64(536)}),
    ] {
        let record = s.ok("job_input", arguments);
        assert_eq!(record["written"], 65_536, "{record}");
    }
    // N + 1.
    for arguments in [
        json!({"jobId": sink, "text": text(65_537)}),
        json!({"jobId": sink, "bytesBase64": b64(65_537)}),
        json!({"jobId": sink, "text": text(65_000), "bytesBase64": b64(537)}),
        json!({"jobId": sink, "bytesBase64": "not base64!"}),
        json!({"jobId": sink, "bytesBase64": "AAA"}),
        json!({"jobId": sink, "text": "x", "waitMs": 30_001}),
        json!({"jobId": "", "text": "x"}),
        json!({"jobId": sink, "text": 3}),
        json!({"jobId": sink, "text": "x", "extra": 1}),
    ] {
        let args = arguments.to_string();
        assert_eq!(
            s.refused("job_input", arguments),
            "INVALID_JOB_INPUT",
            "{}",
            &args[..args.len().min(120)]
        );
    }
    // waitMs at N, to a job that answers at once.
    let echo = s.start_job("cat", PIPE());
    let record = s.ok(
        "job_input",
        json!({"jobId": echo, "text": "x\n", "waitMs": 30_000}),
    );
    let mut seen = record["stdout"].as_str().unwrap().to_owned();
    s.read_until(&echo, &mut seen, "x\n");
    assert_eq!(
        s.refused("job_input", json!({"jobId": "job-99", "text": "x"})),
        "JOB_NOT_FOUND"
    );
    // A job without input, and job_resize on a job without a terminal.
    let plain = s.start_job("exec sleep 60", json!({}));
    assert_eq!(
        s.refused("job_input", json!({"jobId": plain, "text": "x"})),
        "JOB_NOT_INTERACTIVE"
    );
    for id in [&plain, &sink] {
        assert_eq!(
            s.refused("job_resize", json!({"jobId": id, "cols": 80, "rows": 24})),
            "JOB_NOT_INTERACTIVE"
        );
    }
    // Input is for jobs.
    for extra in [PIPE(), TTY()] {
        let mut arguments = json!({"command": "cat"});
        for (k, v) in extra.as_object().unwrap() {
            arguments[k] = v.clone();
        }
        assert_eq!(
            s.refused("run_command", arguments),
            "INVALID_RUN_COMMAND_INPUT"
        );
    }
    s.end();
}

#[test]
fn a_write_the_job_never_reads_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(dir.path(), &[]);
    for extra in [PIPE(), TTY()] {
        let id = s.start_job("exec sleep 60", extra);
        let began = Instant::now();
        let mut written = 0;
        // Whole lines: a terminal in line-editing mode drops what goes past 4,095 bytes of
        // one unfinished line rather than wait for it to be read.
        let text = format!("{}\n", "z".repeat(63)).repeat(1024);
        for _ in 0..4 {
            let record = s.ok("job_input", json!({"jobId": id, "text": text, "waitMs": 0}));
            written += record["written"].as_u64().unwrap();
        }
        // Nothing reads: the pipe's or the terminal's buffer fills, and each call still
        // answers (within its bound of one second; generous margin).
        assert!(written < 4 * 65_536, "{written}");
        assert!(began.elapsed() < Duration::from_secs(30));
        s.ok("job_stop", json!({"jobId": id}));
    }
    s.end();
}

#[test]
fn a_terminal_job_works_under_the_sandbox_and_reaches_no_other_terminal() {
    let dir = tempfile::tempdir().unwrap();
    // A terminal of the host's (this test's own pair), which a job must not open.
    let host = HostTerminal::open();
    let attack = format!(
        "python3 -c 'import os; fd = os.open(\"{}\", os.O_RDWR | os.O_NOCTTY); print(\"opened\", fd)'",
        host.path
    );
    // The twin: without the sandbox the same job opens it.
    let mut open = Session::start(dir.path(), &["--no-sandbox"]);
    let id = open.start_job(&attack, TTY());
    let mut seen = String::new();
    open.read_until(&id, &mut seen, "opened");
    open.end();

    let mut s = Session::start(dir.path(), &["--sandbox"]);
    let id = s.start_job(&attack, TTY());
    let mut seen = String::new();
    s.read_until(&id, &mut seen, "Error");
    assert!(seen.contains("PermissionError"), "{seen:?}");
    assert!(!seen.contains("opened"), "{seen:?}");
    // The job's own terminal works: a REPL keeps its state, sees a terminal, takes Ctrl-C.
    let id = s.start_job("python3 -u -i -q", TTY());
    s.turn(&id, "x = 41\n", ">>> ");
    s.turn(
        &id,
        "import os; print(x + 1, os.isatty(0))\n",
        "42 True\r\n",
    );
    s.ok(
        "job_input",
        json!({"jobId": id, "text": "while True: pass\n\n", "waitMs": 300}),
    );
    let record = s.ok(
        "job_input",
        json!({"jobId": id, "bytesBase64": "Aw==", "waitMs": 5000}),
    );
    let mut seen = record["stdout"].as_str().unwrap().to_owned();
    s.read_until(&id, &mut seen, "KeyboardInterrupt");
    s.ok("job_resize", json!({"jobId": id, "cols": 100, "rows": 30}));
    s.turn(
        &id,
        "print(os.get_terminal_size())\n",
        "columns=100, lines=30",
    );
    // The shell's `cd` and variables last between inputs, confined as ever.
    let sh = s.start_job("sh", TTY());
    s.turn(&sh, "mkdir -p sub && cd sub && X=7\n", "");
    s.turn(&sh, "echo \"$X at $(pwd)\"\n", "7 at ");
    // /etc/shadow is covered (it reads empty) or unreadable: not one of its lines comes out.
    let out = s.turn(
        &sh,
        "cat /etc/shadow 2>/dev/null | grep -c '^root:'; echo done\n",
        "done\r\n",
    );
    assert!(out.contains("\r\n0\r\n"), "{out:?}");
    s.end();
    drop(host);
}

/// A pseudo-terminal pair opened by the test (standing for a terminal of the host's): its
/// slave's path.
struct HostTerminal {
    _master: std::fs::File,
    path: String,
}

impl HostTerminal {
    #[allow(unsafe_code, reason = "grantpt, unlockpt and ptsname_r of libc")]
    fn open() -> Self {
        use std::os::fd::AsRawFd as _;
        let master = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/ptmx")
            .unwrap();
        let fd = master.as_raw_fd();
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: a descriptor of /dev/ptmx this test owns, and a buffer of the given length.
        let ok = unsafe {
            libc::grantpt(fd) == 0
                && libc::unlockpt(fd) == 0
                && libc::ptsname_r(fd, name.as_mut_ptr(), name.len()) == 0
        };
        assert!(ok, "{}", std::io::Error::last_os_error());
        // SAFETY: ptsname_r wrote a NUL-terminated string into the buffer.
        let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Self {
            _master: master,
            path,
        }
    }
}

#[test]
fn nothing_of_a_terminal_job_outlives_job_stop_or_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let m = marker();
    // A shell on a terminal with a descendant in the background and one in the foreground,
    // each marked.
    let start = |s: &mut Session| {
        let id = s.start_job(&format!("JOB_MARK={m} exec sh"), TTY());
        s.turn(
            &id,
            &format!("JOB_MARK={m} sleep 60 & JOB_MARK={m} sleep 61\n"),
            "sleep 61",
        );
        id
    };
    let mut s = Session::start(dir.path(), &[]);
    let id = start(&mut s);
    support::wait_alive_blocking(&m, 3);
    s.ok("job_stop", json!({"jobId": id}));
    census_clear(&m);
    // The server's end of input.
    start(&mut s);
    let id = s.start_job(&format!("JOB_MARK={m} exec cat"), PIPE());
    s.ok("job_input", json!({"jobId": id, "text": "x\n"}));
    support::wait_alive_blocking(&m, 4);
    s.end();
    census_clear(&m);
    // The server's SIGKILL.
    let mut s = Session::start(dir.path(), &[]);
    start(&mut s);
    support::wait_alive_blocking(&m, 3);
    let _ = s.child.kill();
    let _ = s.child.wait();
    census_clear(&m);
}

#[test]
fn the_answer_is_not_the_terminals_own_echo() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Session::start(dir.path(), &[]);
    // A program slow to read: the terminal echoes the line at once, the answer comes a second
    // later. One job_input with a wait answers with both.
    let id = s.start_job("sleep 1; read x; echo got $x", TTY());
    let record = s.ok(
        "job_input",
        json!({"jobId": id, "text": "hi\n", "waitMs": 20000}),
    );
    let out = record["stdout"].as_str().unwrap();
    assert!(out.starts_with("hi\r\n"), "{record}");
    assert!(out.contains("got hi\r\n"), "{record}");
    s.end();
}
