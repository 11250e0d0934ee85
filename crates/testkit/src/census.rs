//! The process census: which processes holding a marker are still alive.
//!
//! A process counts when it is not a zombie (nor dead) and its command line, its environment
//! (as it was at its last `exec`) or its working directory holds the marker, read from
//! `/proc`. Processes this user cannot inspect are passed over (as root: none).
//!
//! The marks a suite gives its children:
//!
//! - [`unique`]: a marker for one test, put in the command line of the descendants it checks
//!   by name (`node -e … <marker>-group`); it begins with the suite's marker;
//! - [`env`]: `CONFINE_CENSUS=<the suite's marker>`, set in every child a suite starts (through
//!   `confine_nodeexec::Command::env`, `ToolSetOptions::env` or `confine call --env`); every
//!   descendant inherits it unless it clears its environment.
//!
//! After the suites: `cargo xtask test` runs the tests with `CONFINE_CENSUS_RUN=<run>` (a fresh
//! id), which every test process and every `confine` a test starts inherits, and which every
//! suite's marker holds ([`suite`]). Once `cargo test` has ended, nothing of the run may be
//! alive: xtask calls [`check`] for the id and fails the run naming each survivor. A plain
//! `cargo test` has no run id; the markers then hold the test process's pid.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The variable that gives a whole test run its id (set by `cargo xtask test`).
pub const RUN_VAR: &str = "CONFINE_CENSUS_RUN";
/// The variable that carries a suite's marker into the processes it starts.
pub const MARK_VAR: &str = "CONFINE_CENSUS";

/// The id of this test run: [`RUN_VAR`] when set, else `pid<this process's id>`.
pub fn run_id() -> String {
    std::env::var(RUN_VAR)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| format!("pid{}", std::process::id()))
}

/// The marker of suite `name` in this run: `census-<name>-<run id>`.
pub fn suite(name: &str) -> String {
    format!("census-{name}-{}", run_id())
}

/// `(CONFINE_CENSUS, <the suite's marker>)`, the variable every child of the suite gets.
pub fn env(name: &str) -> (String, String) {
    (MARK_VAR.to_owned(), suite(name))
}

/// A marker for one test of suite `name`: the suite's marker, this process's id, a counter
/// and the clock's nanoseconds (so no marker is a prefix of another's).
pub fn unique(name: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}-{}-{}-{nanos}",
        suite(name),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A live process that holds a marker, as the census saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Survivor {
    /// Its pid.
    pub pid: i32,
    /// Where the marker was seen: `"cmdline"`, `"environ"` or `"cwd"`.
    pub seen_in: &'static str,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
    /// Its working directory, when readable.
    pub cwd: Option<PathBuf>,
}

impl std::fmt::Display for Survivor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} (marker in its {}): {:?} in {:?}",
            self.pid, self.seen_in, self.cmdline, self.cwd
        )
    }
}

/// Every live process but this one whose command line, environment or working directory
/// holds `marker`.
pub fn survivors(marker: &str) -> Vec<Survivor> {
    let needle = marker.as_bytes();
    let own = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == own {
            continue;
        }
        let dir = entry.path();
        let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
        let cwd = std::fs::read_link(dir.join("cwd")).ok();
        let seen_in = if contains(&cmdline, needle) {
            "cmdline"
        } else if std::fs::read(dir.join("environ")).is_ok_and(|e| contains(&e, needle)) {
            "environ"
        } else if cwd
            .as_ref()
            .is_some_and(|c| contains(c.as_os_str().as_encoded_bytes(), needle))
        {
            "cwd"
        } else {
            continue;
        };
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
        if matches!(state, Some('Z') | Some('X') | None) {
            continue;
        }
        let cmdline = String::from_utf8_lossy(&cmdline)
            .trim_end_matches('\0')
            .replace('\0', " ");
        out.push(Survivor {
            pid,
            seen_in,
            cmdline,
            cwd,
        });
    }
    out
}

/// The pids of [`survivors`] of `marker`.
pub fn alive(marker: &str) -> Vec<i32> {
    survivors(marker).iter().map(|s| s.pid).collect()
}

/// Nothing holding `marker` alive, allowing `grace` for processes already killed to be reaped;
/// else an error naming each survivor.
pub fn check(marker: &str, grace: Duration) -> Result<(), String> {
    let until = Instant::now() + grace;
    loop {
        let left = survivors(marker);
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= until {
            let names: Vec<String> = left.iter().map(ToString::to_string).collect();
            return Err(format!(
                "{} process(es) holding {marker:?} outlived their test:\n  {}",
                left.len(),
                names.join("\n  ")
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (blocking) until at least `count` processes hold `marker`; panics after 10 s.
pub fn wait_alive_blocking(marker: &str, count: usize) {
    let until = Instant::now() + Duration::from_secs(10);
    while alive(marker).len() < count {
        assert!(
            Instant::now() < until,
            "descendants of {marker} never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait until at least `count` processes hold `marker`; panics after 10 s.
pub async fn wait_alive(marker: &str, count: usize) {
    let until = Instant::now() + Duration::from_secs(10);
    while alive(marker).len() < count {
        assert!(
            Instant::now() < until,
            "descendants of {marker} never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Child, Command};

    /// A planted survivor: a shell waiting for its input (which never comes), its `$0` (the
    /// argument after its program) and everything else as `mark` sets them.
    // The census's own test starts the process it must find; it is no tool's child.
    #[allow(clippy::disallowed_methods)]
    fn plant(mark: impl FnOnce(&mut Command) -> &mut Command) -> Child {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "read _"])
            .stdin(std::process::Stdio::piped());
        let child = mark(&mut cmd).spawn().expect("sh runs");
        let until = Instant::now() + Duration::from_secs(5);
        let ready = |c: &Child| {
            std::fs::read(format!("/proc/{}/cmdline", c.id()))
                .is_ok_and(|b| b.starts_with(b"/bin/sh"))
        };
        while !ready(&child) {
            assert!(Instant::now() < until, "the planted shell never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        child
    }

    fn reap(mut child: Child) {
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_planted_survivor_is_found_by_each_mark_and_named() {
        let tmp = tempfile::Builder::new()
            .prefix(&unique("kit-cwd"))
            .tempdir()
            .unwrap();
        let by_cwd = tmp
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let by_arg = unique("kit-arg");
        let by_env = unique("kit-env");
        let cases: [(&str, &str, Child); 3] = [
            ("cmdline", &by_arg, plant(|c| c.arg(&by_arg))),
            ("environ", &by_env, plant(|c| c.env(MARK_VAR, &by_env))),
            ("cwd", &by_cwd, plant(|c| c.current_dir(tmp.path()))),
        ];
        for (seen_in, marker, child) in cases {
            let found = survivors(marker);
            assert_eq!(found.len(), 1, "{seen_in}: {found:?}");
            assert_eq!(found[0].pid, child.id() as i32);
            assert_eq!(found[0].seen_in, seen_in);
            let err = check(marker, Duration::from_millis(100)).unwrap_err();
            assert!(err.contains(&format!("pid {}", child.id())), "{err}");
            assert!(err.contains("read _"), "{err}");
            reap(child);
            assert_eq!(check(marker, Duration::from_secs(5)), Ok(()));
        }
    }

    #[test]
    fn a_killed_unreaped_zombie_does_not_count() {
        let marker = unique("kit-zombie");
        let mut child = plant(|c| c.arg(&marker));
        child.kill().unwrap();
        // Killed but not reaped: a zombie until `wait`.
        let until = Instant::now() + Duration::from_secs(5);
        while !alive(&marker).is_empty() {
            assert!(Instant::now() < until, "the killed sleep never died");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(std::fs::metadata(format!("/proc/{}", child.id())).is_ok());
        child.wait().unwrap();
    }

    #[test]
    fn markers_hold_the_suite_and_the_run() {
        let a = unique("s");
        let b = unique("s");
        assert_ne!(a, b);
        assert!(a.starts_with(&suite("s")) && a.contains(&run_id()));
        assert!(!b.starts_with(&a) && !a.starts_with(&b));
        assert_eq!(env("s"), (MARK_VAR.to_owned(), suite("s")));
    }
}
