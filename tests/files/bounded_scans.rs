//! Scans bounded in memory, measured from outside: the built `confine call` greps a 100 GiB
//! sparse file of one line, a file holding a 200 MiB line, and lists, finds and greps a
//! directory of 200,000 entries; the server's peak resident memory (`VmHWM` of
//! `/proc/<pid>/status`, read once the answer is in) must stay well under 200 MiB (a call's
//! own 64 MiB plus the process), and over the peak of a server that answered one trivial call
//! by less than 64 MiB. A watcher kills a server whose resident memory passes 1 GiB,
//! so a regression fails the test instead of the machine. Each case starts its own server, so
//! each peak is that case's; the figures are printed (`--nocapture`) for
//! `docs/PERFORMANCE.md`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::fs::{AtFlags, Mode, OFlags};
use serde_json::{Value, json};

use crate::support;
use support::spawn_call;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The peak a server may reach in any of these cases.
const PEAK_BOUND_KIB: u64 = 200 * 1024;
/// What one call may hold of its own: the peak over that of a server that answered a
/// trivial call.
const CALL_BOUND_KIB: u64 = 64 * 1024;
/// Past this resident size the watcher kills the server (a regression, not a measurement).
const KILL_AT_KIB: u64 = 1024 * 1024;

/// One field (`VmRSS`, `VmHWM`) of `/proc/<pid>/status`, in KiB; `None` once the process is
/// gone.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A `confine call --read-only` server on `root`, watched: killed if it passes
/// [`KILL_AT_KIB`].
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    done: Arc<AtomicBool>,
    killed: Arc<AtomicBool>,
    watcher: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(root: &Path) -> Self {
        let mut child = spawn_call(root, &["--read-only"]);
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let done = Arc::new(AtomicBool::new(false));
        let killed = Arc::new(AtomicBool::new(false));
        let pid = child.id();
        let watcher = {
            let (done, killed) = (Arc::clone(&done), Arc::clone(&killed));
            std::thread::spawn(move || {
                // Bounded: ends with the server (the test ends it) or once it is killed.
                while !done.load(Ordering::Relaxed) {
                    match status_kib(pid, "VmRSS") {
                        Some(rss) if rss > KILL_AT_KIB => {
                            killed.store(true, Ordering::Relaxed);
                            let pid = rustix::process::Pid::from_raw(pid.cast_signed())
                                .expect("a child's pid");
                            let _ =
                                rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                            return;
                        }
                        Some(_) => std::thread::sleep(Duration::from_millis(5)),
                        None => return,
                    }
                }
            })
        };
        Self {
            child,
            stdin,
            stdout,
            done,
            killed,
            watcher: Some(watcher),
        }
    }

    /// Call `name` with `arguments`: the result's record, and the server's peak so far (KiB).
    fn call(&mut self, name: &str, arguments: Value) -> (Value, u64) {
        let line = json!({"id": 1, "name": name, "arguments": arguments}).to_string();
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        assert!(
            !self.killed.load(Ordering::Relaxed),
            "{name}: the server passed {} MiB resident and was killed",
            KILL_AT_KIB / 1024
        );
        let v: Value =
            serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{name}: {e}: {answer:?}"));
        assert_eq!(v["isError"], false, "{name}: {v}");
        let peak = status_kib(self.child.id(), "VmHWM").expect("the server is alive");
        (v["content"].clone(), peak)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        drop(self.stdin.take());
        let _ = self.child.wait();
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
    }
}

/// The peak of a server that answered one trivial call: the process itself.
fn baseline_kib(root: &Path) -> u64 {
    let mut s = Server::start(root);
    s.call("list_directory", json!({})).1
}

fn check(case: &str, peak: u64, base: u64) {
    eprintln!(
        "bounded_scans: {case}: peak {:.1} MiB (the process alone {:.1} MiB)",
        peak as f64 / 1024.0,
        base as f64 / 1024.0
    );
    assert!(
        peak < PEAK_BOUND_KIB,
        "{case}: peak {peak} KiB, the bound {PEAK_BOUND_KIB} KiB"
    );
    assert!(
        peak.saturating_sub(base) < CALL_BOUND_KIB,
        "{case}: the call took {} KiB over the process's {base} KiB, its bound {CALL_BOUND_KIB} KiB",
        peak.saturating_sub(base)
    );
}

#[test]
fn grep_of_a_100_gib_sparse_file_of_one_line_stays_small() {
    const TEST: &str = "grep_of_a_100_gib_sparse_file_of_one_line_stays_small";
    let tmp = tempfile::tempdir().unwrap();
    // 16 KiB of text, then a hole to 100 GiB: one line, as `truncate` makes it.
    let f = std::fs::File::create(tmp.path().join("huge.txt")).unwrap();
    f.write_all_at("w".repeat(16 * 1024).as_bytes(), 0).unwrap();
    f.set_len(100 * GIB).unwrap();
    f.sync_all().unwrap();
    let st = rustix::fs::fstat(&f).unwrap();
    if (st.st_blocks as u64) * 512 > 100 * MIB {
        testkit::not_run(TEST, "this filesystem keeps no holes");
        return;
    }
    let base = baseline_kib(tmp.path());
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call("grep", json!({"pattern": "^w", "path": "huge.txt"}));
    assert_eq!(v["matches"][0]["line"], 1, "{v}");
    check("grep, 100 GiB sparse file, one line", peak, base);
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call("grep", json!({"pattern": "nothing"}));
    assert_eq!(v["filesSearched"], 1, "{v}");
    check("grep of the directory holding it", peak, base);
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call("read_lines", json!({"path": "huge.txt", "offset": 2}));
    assert_eq!(v["endLine"], 1, "{v}");
    check("read_lines past its end", peak, base);
}

#[test]
fn grep_of_a_200_mib_line_stays_small() {
    let tmp = tempfile::tempdir().unwrap();
    let mut f =
        std::io::BufWriter::new(std::fs::File::create(tmp.path().join("long.txt")).unwrap());
    let block = vec![b'a'; MIB as usize];
    for _ in 0..200 {
        f.write_all(&block).unwrap();
    }
    f.write_all(b"needle past the cut\nneedle\n").unwrap();
    f.into_inner().unwrap().sync_all().unwrap();
    let base = baseline_kib(tmp.path());
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call("grep", json!({"pattern": "needle", "path": "long.txt"}));
    assert_eq!(
        (v["matches"][0]["line"].as_u64(), v["longLinesCut"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    check("grep, one 200 MiB line", peak, base);
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call(
        "grep",
        json!({"pattern": "needle", "path": "long.txt", "contextLines": 10}),
    );
    assert_eq!(v["matches"][0]["before"].as_array().unwrap().len(), 1);
    check("grep, one 200 MiB line, 10 lines of context", peak, base);
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call("read_lines", json!({"path": "long.txt", "offset": 2}));
    assert_eq!(v["text"], "needle\n", "{v}");
    check("read_lines after a 200 MiB line", peak, base);
}

/// A 247-byte name.
///
/// `count` entries of such names in `dir`, hard links to a few empty files (each inode
/// takes at most 50,000): 200,000 of them are some 50 MB of names, far more than a call may
/// hold in several copies.
fn long_name(i: usize) -> String {
    format!("f{i:06}{}", "x".repeat(240))
}

/// See [`long_name`].
fn many_long_names(dir: &Path, count: usize) {
    let name = long_name;
    std::fs::create_dir_all(dir).unwrap();
    let fd = rustix::fs::open(dir, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
    for i in 0..count {
        if i % 50_000 == 0 {
            rustix::fs::openat(
                &fd,
                name(i).as_str(),
                OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .unwrap();
        } else {
            let first = name(i - i % 50_000);
            rustix::fs::linkat(&fd, first.as_str(), &fd, name(i).as_str(), AtFlags::empty())
                .unwrap();
        }
    }
}

#[test]
fn list_find_and_grep_of_200_000_entries_stay_small() {
    let tmp = tempfile::tempdir().unwrap();
    many_long_names(&tmp.path().join("big"), 200_000);
    let name = long_name;
    let base = baseline_kib(tmp.path());
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call("list_directory", json!({"path": "big"}));
    assert_eq!(v["entries"].as_array().unwrap().len(), 1000);
    assert_eq!(v["entries"][999]["name"], name(999));
    check("list_directory, 200,000 entries", peak, base);
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call("find_files", json!({"pattern": "big/f19999*"}));
    let want: Vec<String> = (199_990..200_000)
        .map(|i| format!("big/{}", name(i)))
        .collect();
    assert_eq!(v["paths"], json!(want));
    check("find_files, 200,000 entries", peak, base);
    let mut s = Server::start(tmp.path());
    let (v, peak) = s.call("grep", json!({"pattern": "x"}));
    assert_eq!(v["filesSearched"], 200_000, "{v}");
    check("grep, 200,000 entries", peak, base);
}
