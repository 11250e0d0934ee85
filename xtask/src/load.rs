//! `cargo xtask load`: a pipelined JSON-RPC load generator for MCP file servers on stdio.
//!
//! Each session is a server process of its own, spawned with piped stdin and stdout and
//! initialized as any MCP client does. A session keeps `in flight` `tools/call` requests
//! outstanding: it writes that many at once, then one more for every answer, so the figure is
//! the server's throughput, not one client's round trip. All sessions of a run start
//! together; calls/s is every answered call over the run's wall time, and the latency of a
//! call is from its request's write to its answer's read (p50 and p99 over every call).
//! While a run goes on, each server's resident memory is sampled every 50 ms; the table gives
//! the largest sample of a session (the mean over the sessions of their peaks).
//!
//! Workloads: `read` (read a 1 KiB text file, 64 of them in turn), `write` (write 1 KiB to one
//! of 16 files of the session's own directory), `mixed` (three reads to one write).
//!
//! Servers: `confine` (this workspace's binary, built in release mode unless `--confine PATH`
//! names one), `reference` (the MCP reference filesystem server, `--reference PATH` to its
//! `dist/index.js`, run with `node`), `rmf` (rust-mcp-filesystem, `--rmf PATH` or found on
//! PATH, run with `--allow-write`). A server that cannot be found is reported and skipped.
//!
//! `--soak N` runs N mixed calls against confine in one session with 16 in flight, sampling
//! its descriptors, threads and resident memory every second, and fails unless they stay
//! flat after the warm-up.
//!
//! The workspaces are made under `target/` unless `--scratch DIR` names another directory
//! (a filesystem of another kind: the durable writes' cost depends on it).
//!
//! Run it optimized (`cargo run --release -p xtask -- load …`): an unoptimized generator spends
//! more CPU per call on its own JSON than a fast server does, and on a small machine the
//! figures then measure the generator (it says so when it is run unoptimized).
//!
//! ```sh
//! cargo run --release -p xtask -- load --servers confine,reference,rmf --calls 4000 \
//!     --reference node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
//! cargo run --release -p xtask -- load --servers confine --soak 200000
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The content written by every write call.
const WRITE_BYTES: usize = 1024;
/// Read files in the shared directory.
const READ_FILES: usize = 64;
/// Write targets per session.
const WRITE_FILES: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload {
    Read,
    Write,
    Mixed,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Mixed => "mixed",
        }
    }

    /// Whether call number `n` writes.
    fn writes(self, n: u64) -> bool {
        match self {
            Self::Read => false,
            Self::Write => true,
            Self::Mixed => n % 4 == 3,
        }
    }
}

/// How to start a server and how its tools are called.
#[derive(Clone, Debug)]
pub(crate) struct Server {
    pub(crate) name: &'static str,
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    pub(crate) read_tool: &'static str,
    pub(crate) write_tool: &'static str,
    /// Paths as the server wants them: relative to the root (confine) or absolute.
    pub(crate) absolute: bool,
}

impl Server {
    fn command(&self, root: &Path) -> Command {
        // A server under measurement, killed and reaped at the end of its session; not a
        // tool's child process.
        #[expect(
            clippy::disallowed_methods,
            reason = "the load generator spawns the servers it measures"
        )]
        let mut cmd = Command::new(&self.program);
        for arg in &self.args {
            if arg == "{root}" {
                cmd.arg(root);
            } else {
                cmd.arg(arg);
            }
        }
        // A server's own state (confine's checkpoint store) beside its workspace, under the
        // run's scratch directory, not in the user's home.
        cmd.env("XDG_STATE_HOME", root.with_extension("state"));
        cmd.current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    fn path(&self, root: &Path, rel: &str) -> String {
        if self.absolute {
            root.join(rel).to_string_lossy().into_owned()
        } else {
            rel.to_owned()
        }
    }

    /// The `tools/call` params of call number `n` of session `session`.
    fn call(&self, root: &Path, workload: Workload, session: usize, n: u64) -> Value {
        if workload.writes(n) {
            let rel = format!("w/s{session}/f{}.txt", n as usize % WRITE_FILES);
            let content = content_for(session, n);
            json!({"name": self.write_tool,
                "arguments": {"path": self.path(root, &rel), "content": content}})
        } else {
            let rel = format!("r/f{}.txt", n as usize % READ_FILES);
            json!({"name": self.read_tool, "arguments": {"path": self.path(root, &rel)}})
        }
    }
}

fn content_for(session: usize, n: u64) -> String {
    let head = format!("session {session} call {n}\n");
    let mut text = head.clone();
    while text.len() < WRITE_BYTES {
        text.push('x');
    }
    text.truncate(WRITE_BYTES - 1);
    text.push('\n');
    text
}

/// Options from the command line.
struct Options {
    servers: Vec<String>,
    calls: u64,
    soak: Option<u64>,
    confine: Option<PathBuf>,
    reference: Option<PathBuf>,
    rmf: Option<PathBuf>,
    /// Where the workspaces are made (default `target/`).
    scratch: Option<PathBuf>,
    /// `(sessions, in flight per session)` rows.
    matrix: Vec<(usize, usize)>,
    workloads: Vec<Workload>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        servers: vec!["confine".into(), "reference".into(), "rmf".into()],
        calls: 4000,
        soak: None,
        confine: None,
        reference: None,
        rmf: None,
        scratch: None,
        matrix: vec![(1, 1), (1, 16), (1, 64), (8, 4), (32, 2)],
        workloads: vec![Workload::Read, Workload::Write, Workload::Mixed],
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--servers" => o.servers = value()?.split(',').map(str::to_owned).collect(),
            "--calls" => o.calls = value()?.parse().map_err(|_| "--calls N")?,
            "--soak" => o.soak = Some(value()?.parse().map_err(|_| "--soak N")?),
            // Absolute: each server runs with its workspace as current directory.
            "--confine" => o.confine = Some(absolute(value()?)?),
            "--reference" => o.reference = Some(absolute(value()?)?),
            "--rmf" => o.rmf = Some(absolute(value()?)?),
            "--scratch" => o.scratch = Some(absolute(value()?)?),
            "--matrix" => {
                o.matrix = value()?
                    .split(',')
                    .map(|cell| {
                        let (s, f) = cell.split_once('x').ok_or("--matrix SxF,SxF…")?;
                        Ok((
                            s.parse().map_err(|_| "sessions")?,
                            f.parse().map_err(|_| "in flight")?,
                        ))
                    })
                    .collect::<Result<_, &str>>()?;
            }
            "--workloads" => {
                o.workloads = value()?
                    .split(',')
                    .map(|w| match w {
                        "read" => Ok(Workload::Read),
                        "write" => Ok(Workload::Write),
                        "mixed" => Ok(Workload::Mixed),
                        _ => Err(format!("unknown workload {w}")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(o)
}

fn absolute(path: String) -> Result<PathBuf, String> {
    std::path::absolute(&path).map_err(|e| format!("{path}: {e}"))
}

/// Run `cargo xtask load …`.
pub fn run(args: &[String]) -> ExitCode {
    let options = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask load: {e}");
            return ExitCode::from(2);
        }
    };
    if cfg!(debug_assertions) {
        // Every server meets the same generator, but an unoptimized one spends several times
        // a server's CPU per call on its own JSON: on a small machine it is then the generator
        // that the figures measure.
        eprintln!(
            "xtask load: WARNING: the load generator is an unoptimized build; its own CPU \
             per call is then larger than a fast server's and the figures compress. Run \
             `cargo run --release -p xtask -- load ...` for figures worth recording."
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(main(options))
}

async fn main(options: Options) -> ExitCode {
    let mut servers = Vec::new();
    for name in &options.servers {
        match find_server(name, &options) {
            Ok(server) => servers.push(server),
            Err(e) => eprintln!("xtask load: SKIPPED {name}: {e}"),
        }
    }
    if servers.is_empty() {
        eprintln!("xtask load: no server to drive");
        return ExitCode::from(2);
    }
    let scratch = tempfile::Builder::new()
        .prefix("confine-load-")
        .tempdir_in(
            options
                .scratch
                .clone()
                .unwrap_or_else(|| crate::workspace_root().join("target")),
        )
        .expect("a scratch directory (under target/ or --scratch)");
    println!(
        "machine: {} CPUs; workspace on {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        filesystem_of(scratch.path())
    );
    if let Some(calls) = options.soak {
        let Some(confine) = servers.iter().find(|s| s.name == "confine") else {
            eprintln!("xtask load: the soak drives confine; it is not among the servers");
            return ExitCode::from(2);
        };
        return soak(confine, scratch.path(), calls).await;
    }
    println!(
        "\n| server | workload | sessions | in flight per session | calls | calls/s | p50 ms | p99 ms | server CPU µs/call | peak RSS per session MiB | errors |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut failed = false;
    for &workload in &options.workloads {
        for &(sessions, in_flight) in &options.matrix {
            for server in &servers {
                let root = scratch.path().join(format!(
                    "{}-{}-{sessions}x{in_flight}",
                    server.name,
                    workload.name()
                ));
                prepare(&root, sessions);
                let calls = (options.calls / sessions as u64).max(in_flight as u64);
                match drive(server, &root, workload, sessions, in_flight, calls).await {
                    Ok(r) => {
                        println!(
                            "| {} | {} | {sessions} | {in_flight} | {} | {:.0} | {:.3} | {:.3} | {:.0} | {:.1} | {} |",
                            server.name,
                            workload.name(),
                            r.calls,
                            r.calls as f64 / r.elapsed.as_secs_f64(),
                            ms(r.p50),
                            ms(r.p99),
                            // Clock ticks are 1/100 s on Linux (USER_HZ).
                            r.cpu_ticks as f64 * 10_000.0 / r.calls.max(1) as f64,
                            r.peak_rss_kib as f64 / 1024.0,
                            r.errors
                        );
                        failed |= r.errors > 0;
                    }
                    Err(e) => {
                        println!(
                            "| {} | {} | {sessions} | {in_flight} | failed: {e} |",
                            server.name,
                            workload.name()
                        );
                        failed = true;
                    }
                }
                let _ = std::fs::remove_dir_all(&root);
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn filesystem_of(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, mount, fstype) = (f.next()?, f.next()?, f.next()?);
            path.starts_with(mount)
                .then(|| (mount.len(), fstype.to_owned()))
        })
        .max()
        .map_or_else(|| "unknown".into(), |(_, t)| t)
}

fn find_server(name: &str, o: &Options) -> Result<Server, String> {
    match name {
        "confine" => {
            let program = match &o.confine {
                Some(p) => p.clone(),
                None => build_confine()?,
            };
            Ok(Server {
                name: "confine",
                program,
                args: vec!["mcp".into(), "--root".into(), "{root}".into()],
                read_tool: "read_file",
                write_tool: "write_file",
                absolute: false,
            })
        }
        "reference" => {
            let script = o
                .reference
                .clone()
                .ok_or("give --reference PATH/TO/server-filesystem/dist/index.js")?;
            if !script.is_file() {
                return Err(format!("{} is not a file", script.display()));
            }
            Ok(Server {
                name: "reference",
                program: "node".into(),
                args: vec![script.to_string_lossy().into_owned(), "{root}".into()],
                read_tool: "read_text_file",
                write_tool: "write_file",
                absolute: true,
            })
        }
        "rmf" => {
            let program = match &o.rmf {
                Some(p) => p.clone(),
                None => on_path("rust-mcp-filesystem").ok_or("rust-mcp-filesystem not on PATH")?,
            };
            Ok(Server {
                name: "rmf",
                program,
                args: vec!["--allow-write".into(), "{root}".into()],
                read_tool: "read_text_file",
                write_tool: "write_file",
                absolute: true,
            })
        }
        _ => Err("unknown server (confine, reference, rmf)".into()),
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

pub(crate) fn build_confine() -> Result<PathBuf, String> {
    let root = crate::workspace_root();
    #[expect(
        clippy::disallowed_methods,
        reason = "a build step of the xtask, not a tool's child"
    )]
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--release", "--bin", "confine"])
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("cargo build --release --bin confine failed".into());
    }
    Ok(root.join("target/release/confine"))
}

/// The workspace of one run: `r/f*.txt` to read, `w/s<n>/` to write in.
pub(crate) fn prepare(root: &Path, sessions: usize) {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root.join("r")).unwrap();
    for i in 0..READ_FILES {
        std::fs::write(root.join(format!("r/f{i}.txt")), content_for(0, i as u64)).unwrap();
    }
    for s in 0..sessions {
        std::fs::create_dir_all(root.join(format!("w/s{s}"))).unwrap();
    }
}

/// One session: a server process, initialized.
struct Session {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pid: u32,
}

impl Session {
    async fn start(server: &Server, root: &Path) -> Result<Self, String> {
        let mut child = server
            .command(root)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", server.program.display()))?;
        let pid = child.id().ok_or("no pid")?;
        let stdin = BufWriter::new(child.stdin.take().ok_or("stdin")?);
        let stdout = BufReader::new(child.stdout.take().ok_or("stdout")?);
        let mut s = Self {
            child,
            stdin,
            stdout,
            pid,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "confine-load", "version": "0"}}});
        s.send(&init).await?;
        let answer = s.recv().await?;
        if answer.get("result").is_none() {
            return Err(format!("initialize: {answer}"));
        }
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        s.stdin.flush().await.map_err(|e| e.to_string())?;
        Ok(s)
    }

    async fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).expect("JSON");
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .await
            .map_err(|e| format!("write: {e}"))?;
        self.stdin.flush().await.map_err(|e| format!("flush: {e}"))
    }

    async fn recv(&mut self) -> Result<Value, String> {
        loop {
            let mut line = String::new();
            let n = self
                .stdout
                .read_line(&mut line)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("the server closed its output".into());
            }
            let value: Value =
                serde_json::from_str(&line).map_err(|e| format!("not JSON ({e}): {line}"))?;
            // Notifications and server requests (logging, roots) are not answers.
            if value.get("id").is_some() && value.get("method").is_none() {
                return Ok(value);
            }
        }
    }
}

/// What one session measured.
#[derive(Default)]
struct SessionResult {
    latencies: Vec<Duration>,
    errors: u64,
}

/// What one run measured.
pub(crate) struct RunResult {
    pub(crate) calls: u64,
    pub(crate) elapsed: Duration,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) peak_rss_kib: u64,
    pub(crate) errors: u64,
    /// The servers' CPU time (user and system) over the calls (after their initialization),
    /// in clock ticks.
    pub(crate) cpu_ticks: u64,
}

/// Keep `in_flight` calls outstanding until `calls` are answered.
#[expect(clippy::too_many_arguments, reason = "one run's plain parameters")]
async fn pump(
    session: &mut Session,
    server: &Server,
    root: &Path,
    workload: Workload,
    index: usize,
    in_flight: usize,
    calls: u64,
    done: &AtomicU64,
) -> Result<SessionResult, String> {
    let mut result = SessionResult {
        latencies: Vec::with_capacity(calls as usize),
        errors: 0,
    };
    let mut sent_at: HashMap<u64, Instant> = HashMap::new();
    let mut next: u64 = 1;
    let request = |n: u64| {
        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": server.call(root, workload, index, n)})
    };
    while next <= (in_flight as u64).min(calls) {
        let message = request(next);
        sent_at.insert(next, Instant::now());
        let mut line = serde_json::to_vec(&message).expect("JSON");
        line.push(b'\n');
        session
            .stdin
            .write_all(&line)
            .await
            .map_err(|e| e.to_string())?;
        next += 1;
    }
    session.stdin.flush().await.map_err(|e| e.to_string())?;
    let mut answered = 0;
    while answered < calls {
        let answer = session.recv().await?;
        let id = answer["id"]
            .as_u64()
            .ok_or(format!("answer id: {answer}"))?;
        let started = sent_at
            .remove(&id)
            .ok_or(format!("an answer to no request: {answer}"))?;
        result.latencies.push(started.elapsed());
        if answer.get("error").is_some() || answer["result"]["isError"] == true {
            result.errors += 1;
            if result.errors == 1 {
                eprintln!("xtask load: {} error: {answer}", server.name);
            }
        }
        answered += 1;
        done.fetch_add(1, Ordering::Relaxed);
        if next <= calls {
            session.send(&request(next)).await?;
            sent_at.insert(next, Instant::now());
            next += 1;
        }
    }
    Ok(result)
}

/// One run: `sessions` servers, each kept `in_flight` deep, `calls` calls each.
pub(crate) async fn drive(
    server: &Server,
    root: &Path,
    workload: Workload,
    sessions: usize,
    in_flight: usize,
    calls: u64,
) -> Result<RunResult, String> {
    let mut started = Vec::new();
    for _ in 0..sessions {
        started.push(Session::start(server, root).await?);
    }
    let pids: Vec<u32> = started.iter().map(|s| s.pid).collect();
    let done = Arc::new(AtomicU64::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = {
        let stop = stop.clone();
        let pids = pids.clone();
        tokio::spawn(async move {
            let mut peaks = vec![0u64; pids.len()];
            loop {
                for (peak, pid) in peaks.iter_mut().zip(&pids) {
                    *peak = (*peak).max(proc_status(*pid, "VmRSS:").unwrap_or(0));
                }
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
            peaks
        })
    };
    let begin = Instant::now();
    let mut tasks = Vec::new();
    for (index, mut session) in started.into_iter().enumerate() {
        let server = server.clone();
        let root = root.to_owned();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            // The server's start and its initialization are not the calls' cost.
            let before = cpu_ticks(session.pid).unwrap_or(0);
            let r = pump(
                &mut session,
                &server,
                &root,
                workload,
                index,
                in_flight,
                calls,
                &done,
            )
            .await;
            let ticks = cpu_ticks(session.pid).unwrap_or(0).saturating_sub(before);
            let _ = session.child.start_kill();
            let _ = session.child.wait().await;
            r.map(|r| (r, ticks))
        }));
    }
    let mut all = SessionResult::default();
    let mut first_error = None;
    let mut ticks = 0;
    for task in tasks {
        match task.await.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok((r, t)) => {
                ticks += t;
                all.latencies.extend(r.latencies);
                all.errors += r.errors;
            }
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    let elapsed = begin.elapsed();
    stop.cancel();
    let peaks = sampler.await.unwrap_or_default();
    if let Some(e) = first_error {
        return Err(e);
    }
    all.latencies.sort_unstable();
    let at = |q: f64| {
        let i = ((all.latencies.len() as f64 * q) as usize).min(all.latencies.len() - 1);
        all.latencies[i]
    };
    Ok(RunResult {
        calls: all.latencies.len() as u64,
        elapsed,
        p50: at(0.50),
        p99: at(0.99),
        peak_rss_kib: peaks.iter().sum::<u64>() / peaks.len().max(1) as u64,
        errors: all.errors,
        cpu_ticks: ticks,
    })
}

/// The user and system CPU time of process `pid` so far, in clock ticks (`/proc/<pid>/stat`).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// A field of `/proc/<pid>/status` in its unit (kB for memory).
fn proc_status(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn fd_count(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// The soak: `calls` mixed calls in one session, 16 in flight, sampled every second.
async fn soak(server: &Server, scratch: &Path, calls: u64) -> ExitCode {
    let root = scratch.join("soak");
    prepare(&root, 1);
    let mut session = match Session::start(server, &root).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xtask load: soak: {e}");
            return ExitCode::FAILURE;
        }
    };
    let pid = session.pid;
    let done = Arc::new(AtomicU64::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = {
        let (stop, done) = (stop.clone(), done.clone());
        tokio::spawn(async move {
            let begin = Instant::now();
            let mut samples = Vec::new();
            loop {
                samples.push((
                    begin.elapsed(),
                    done.load(Ordering::Relaxed),
                    fd_count(pid).unwrap_or(0),
                    proc_status(pid, "Threads:").unwrap_or(0),
                    proc_status(pid, "VmRSS:").unwrap_or(0),
                ));
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
            samples
        })
    };
    let begin = Instant::now();
    let result = pump(
        &mut session,
        server,
        &root,
        Workload::Mixed,
        0,
        16,
        calls,
        &done,
    )
    .await;
    let elapsed = begin.elapsed();
    // One last sample with every call answered and the server idle.
    stop.cancel();
    let mut samples = sampler.await.unwrap_or_default();
    samples.push((
        elapsed,
        done.load(Ordering::Relaxed),
        fd_count(pid).unwrap_or(0),
        proc_status(pid, "Threads:").unwrap_or(0),
        proc_status(pid, "VmRSS:").unwrap_or(0),
    ));
    let _ = session.child.start_kill();
    let _ = session.child.wait().await;
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("xtask load: soak: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "\nsoak: {} mixed calls (3 reads : 1 write), 1 session, 16 in flight, {:.1} s, {:.0} calls/s, {} errors",
        result.latencies.len(),
        elapsed.as_secs_f64(),
        result.latencies.len() as f64 / elapsed.as_secs_f64(),
        result.errors
    );
    println!("\n| t s | calls answered | open fds | threads | RSS MiB |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    let step = (samples.len() / 12).max(1);
    for (i, (t, n, fds, threads, rss)) in samples.iter().enumerate() {
        if i % step == 0 || i + 1 == samples.len() {
            println!(
                "| {:.0} | {n} | {fds} | {threads} | {:.1} |",
                t.as_secs_f64(),
                *rss as f64 / 1024.0
            );
        }
    }
    // Flat: with 16 calls in flight the descriptors and threads in use move with the calls
    // of the moment, so flatness is judged by growth, not by spread. After the first tenth
    // (warm-up): the second half's highest descriptor count is no higher than the first
    // half's, its highest thread count at most an eighth higher (tokio's blocking pool
    // starts a thread when all are busy and lets it go after ten idle seconds, so it breathes
    // by a few threads; a leak grows with the calls); once every call is answered the
    // descriptors are back to what
    // the server held before the first call; resident memory grows by at most a quarter.
    let warm: Vec<_> = samples.iter().skip(samples.len() / 10).collect();
    let (early, late) = warm.split_at(warm.len() / 2);
    let max_of = |part: &[&(Duration, u64, u64, u64, u64)],
                  f: fn(&(Duration, u64, u64, u64, u64)) -> u64| {
        part.iter().map(|s| f(s)).max().unwrap_or(0)
    };
    let (fd_early, fd_late) = (max_of(early, |s| s.2), max_of(late, |s| s.2));
    let (th_early, th_late) = (max_of(early, |s| s.3), max_of(late, |s| s.3));
    let fd_start = samples.first().map_or(0, |s| s.2);
    let fd_end = samples.last().map_or(0, |s| s.2);
    let first_rss = warm.first().map_or(0, |s| s.4);
    let last_rss = warm.last().map_or(0, |s| s.4);
    println!(
        "\nafter warm-up: highest fds {fd_early} then {fd_late}, highest threads {th_early} then {th_late} \
         (first half, second half); fds {fd_start} before the first call, {fd_end} after the last; \
         RSS first {:.1} MiB, last {:.1} MiB",
        first_rss as f64 / 1024.0,
        last_rss as f64 / 1024.0
    );
    let flat = fd_late <= fd_early
        && th_late <= th_early + th_early / 8
        && fd_end <= fd_start
        && last_rss <= first_rss + first_rss / 4;
    if result.errors == 0 && flat && result.latencies.len() as u64 == calls {
        println!("soak: flat");
        ExitCode::SUCCESS
    } else {
        println!("soak: NOT flat or not clean");
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_is_three_reads_to_one_write_and_content_is_exact() {
        let writes = (0..400).filter(|&n| Workload::Mixed.writes(n)).count();
        assert_eq!(writes, 100);
        assert_eq!(content_for(3, 12345).len(), WRITE_BYTES);
    }

    #[test]
    fn options_parse() {
        let args: Vec<String> = [
            "--matrix",
            "1x1,4x16",
            "--workloads",
            "read",
            "--calls",
            "10",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let o = parse(&args).unwrap();
        assert_eq!(o.matrix, [(1, 1), (4, 16)]);
        assert_eq!(o.workloads, [Workload::Read]);
        assert_eq!(o.calls, 10);
        assert!(parse(&["--bogus".to_string()]).is_err());
    }
}
