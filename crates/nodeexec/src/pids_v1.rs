//! A per-run process bound from a cgroup v1 `pids` hierarchy, where the cgroup v2 hierarchy
//! has no `pids` controller (cgroup v1, or hybrid mode with `pids` bound to v1).
//!
//! Why: where the run's v2 cgroup cannot bound its processes, the crate falls back to
//! `RLIMIT_NPROC`, which the kernel never applies to root (the initial user namespace's uid 0
//! is exempt), so a root embedder there would have no process bound at all. A writable v1
//! `pids` hierarchy (root on such a host) gives each run a bound of its own instead.
//!
//! Discovery runs once per process ([`parent`]): our own cgroup in the `pids` hierarchy from
//! `/proc/self/cgroup` (`<n>:pids:<path>`, the controller possibly co-mounted with others), a
//! `cgroup` (v1) mount with the `pids` option whose root lies above it, and the directory
//! `<mount><own path>`. Before it is trusted, a probe cgroup is made there, its `pids.max`
//! written, and a child that does nothing but write `0` to its `tasks` and exit is forked (a
//! hierarchy we may create in but not move into is found out now, not in a run).
//! Stale `confine-<owner>-<n>` cgroups of owners that died are emptied and removed then, and
//! by [`remove_stale`].
//!
//! A run ([`RunPids`]): the embedding process makes `<dir>/confine-<owner>-<n>`, writes the
//! bound to `pids.max` and opens its `tasks` for writing (close-on-exec). The process that
//! becomes the program writes `0` there ([`join`], one `write`: async-signal-safe) before
//! anything else it does after the fork chain, so it and everything it starts count against
//! `pids.max` (threads included), and a `fork` past it fails with `EAGAIN`. The waiter and a
//! namespace's init stay outside: they are the crate's, not the program's. v1 cannot create a
//! process inside a cgroup (`CLONE_INTO_CGROUP` is v2 only), so this migration is the one way
//! in.
//!
//! Why `tasks` and not `cgroup.procs`: the process is single-threaded at that point (a fresh
//! clone, not a thread of its parent), so moving its one thread moves the whole process, and
//! the kernel moves the calling thread alone without taking the lock that stabilises thread
//! groups for writing. Taking that lock (what a `cgroup.procs` write does) waits for an RCU
//! grace period unless another writer passed moments before: 7 to 15 ms for a call that comes
//! alone, against about 40 microseconds through `tasks` (`docs/PERFORMANCE.md`). A kernel that
//! takes the lock for this write too would only be as slow as `cgroup.procs`.
//!
//! The cgroup kills nothing (v1 has no `cgroup.kill`): the run's containment does. Once the
//! waiter is reaped the cgroup is empty and the embedding process removes it; the waiter
//! removes it when the embedder died first.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::process::{Pid, Signal, WaitOptions};

use crate::cgroup::{
    RunsDir, make_run_dir, parent_for_run, relative, remove_run_dir, stale_owner, unescape,
};

/// How long the end of a run waits for the emptied cgroup to be removable before leaving it
/// to a later sweep.
const REMOVE_LIMIT: Duration = Duration::from_secs(1);

static PARENT: OnceLock<Option<RunsDir>> = OnceLock::new();

/// The directory of the v1 `pids` hierarchy beneath which runs get their cgroups, when this
/// process can use one; discovered (and probed) once per process.
pub(crate) fn parent() -> Option<&'static RunsDir> {
    PARENT.get_or_init(discover).as_ref()
}

fn discover() -> Option<RunsDir> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own_pids_cgroup(&own)?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for (root, mountpoint) in pids_mounts(&mountinfo) {
        let Some(rel) = relative(own, &root) else {
            continue;
        };
        let dir = mountpoint.join(rel);
        sweep_stale(&dir);
        if let Ok(runs) = RunsDir::open(dir)
            && probe(&runs)
        {
            return Some(runs);
        }
    }
    None
}

/// The path of the `pids` line of `/proc/<pid>/cgroup` text (v1: `<n>:<controllers>:<path>`).
fn own_pids_cgroup(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == "pids").then_some(path)
        })
        .filter(|p| p.starts_with('/'))
}

/// `(root, mount point)` of every cgroup v1 mount with the `pids` controller in mountinfo
/// text.
fn pids_mounts(text: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if dash < 5 || fields.get(dash + 1) != Some(&"cgroup") {
            continue;
        }
        let options = fields.get(dash + 3).copied().unwrap_or("");
        if options.split(',').any(|o| o == "pids") {
            out.push((unescape(fields[3]), PathBuf::from(unescape(fields[4]))));
        }
    }
    out
}

/// Whether runs can be bounded beneath `dir`: a cgroup can be made there, bounded, and a
/// process can move itself into it.
fn probe(dir: &RunsDir) -> bool {
    let Ok(mut cgroup) = RunPids::create_in(dir, 8) else {
        return false;
    };
    let joined = join_and_exit(cgroup.tasks.as_fd());
    cgroup.remove_blocking();
    joined && cgroup.removed
}

/// Fork a child that moves itself into the cgroup whose `tasks` is `tasks` and exits;
/// whether that worked.
#[expect(unsafe_code, reason = "forks a child that only writes and exits")]
fn join_and_exit(tasks: BorrowedFd<'_>) -> bool {
    // SAFETY: the child makes only async-signal-safe calls (one write, `_exit`).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = if join(tasks).is_ok() { 0 } else { 1 };
        // SAFETY: ends the child at once, running nothing of the parent's.
        unsafe { libc::_exit(code) };
    }
    let Some(pid) = Pid::from_raw(pid) else {
        return false;
    };
    loop {
        match rustix::process::waitpid(Some(pid), WaitOptions::empty()) {
            Ok(Some((_, status))) => return status.exit_status() == Some(0),
            Err(rustix::io::Errno::INTR) => {}
            _ => return false,
        }
    }
}

/// Move the calling thread into the cgroup whose `tasks` is `tasks` (async-signal-safe: one
/// `write`). The whole process moves when it is single-threaded, as the program's process is
/// before `exec`.
pub(crate) fn join(tasks: BorrowedFd<'_>) -> io::Result<()> {
    rustix::io::write(tasks, b"0")?;
    Ok(())
}

/// Empty and remove the `confine-<owner>-*` cgroups beneath `dir` whose owner is gone.
fn sweep_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if stale_owner(&name) != Some(false) {
            continue;
        }
        let path = entry.path();
        let until = Instant::now() + Duration::from_millis(500);
        while std::fs::remove_dir(&path).is_err() && Instant::now() < until {
            kill_members(&path, &name);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// SIGKILL every process listed in the stale cgroup `dir` (named `name`), each through a
/// pidfd opened first and used only once `/proc/<pid>/cgroup` still names that cgroup, so a
/// pid reused meanwhile by another process is never signalled.
fn kill_members(dir: &Path, name: &str) {
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    let suffix = format!("/{name}");
    for pid in procs.lines().filter_map(|l| l.trim().parse().ok()) {
        let Some(pid) = Pid::from_raw(pid) else {
            continue;
        };
        let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
        else {
            continue;
        };
        let member = std::fs::read_to_string(format!("/proc/{}/cgroup", pid.as_raw_pid()))
            .ok()
            .is_some_and(|t| own_pids_cgroup(&t).is_some_and(|p| p.ends_with(&suffix)));
        if member {
            rustix::process::pidfd_send_signal(&pidfd, Signal::KILL).ok();
        }
    }
}

/// Remove what owners that died left beneath the v1 `pids` directory this process uses
/// (nothing where it uses none).
pub(crate) fn remove_stale() {
    if let Some(dir) = parent() {
        sweep_stale(&dir.path);
    }
}

/// The v1 `pids` cgroup of one run. Dropped without [`remove`](RunPids::remove), it is
/// removed synchronously.
#[derive(Debug)]
pub(crate) struct RunPids {
    dir: PathBuf,
    /// Its `tasks`, open for writing (close-on-exec), for the program's process.
    tasks: OwnedFd,
    /// The parent directory, open (close-on-exec), and the cgroup's name in it: for the
    /// waiter to remove the cgroup when the embedder died first.
    parent: Option<(OwnedFd, CString)>,
    /// Removed (or given up on).
    removed: bool,
}

impl RunPids {
    /// A fresh cgroup bounding a run to `max` processes, or `None` where no v1 `pids`
    /// hierarchy can be used.
    pub(crate) fn create(max: u64) -> Option<Self> {
        Self::create_in(parent()?, max).ok()
    }

    fn create_in(parent: &RunsDir, max: u64) -> io::Result<Self> {
        let (dir, name) = make_run_dir(parent)?;
        // Relative to the parent's descriptor: `<name>/pids.max`, `<name>/tasks`.
        let inside = |file: &str| {
            let mut path = name.as_bytes().to_vec();
            path.push(b'/');
            path.extend_from_slice(file.as_bytes());
            CString::new(path).map_err(|_| rustix::io::Errno::INVAL)
        };
        let flags = OFlags::WRONLY | OFlags::CLOEXEC;
        let opened = inside("pids.max")
            .and_then(|limit| rustix::fs::openat(&parent.fd, &limit, flags, Mode::empty()))
            .and_then(|limit| {
                if rustix::io::write(&limit, max.to_string().as_bytes())? == 0 {
                    return Err(rustix::io::Errno::IO);
                }
                rustix::fs::openat(&parent.fd, &inside("tasks")?, flags, Mode::empty())
            });
        let parent = parent_for_run(parent).map(|fd| (fd, name));
        let tasks = match opened {
            Ok(tasks) => tasks,
            Err(e) => {
                remove_run_dir(&dir, parent.as_ref());
                return Err(e.into());
            }
        };
        Ok(Self {
            dir,
            tasks,
            parent,
            removed: false,
        })
    }

    /// `tasks`, for the program's process to write `0` to.
    pub(crate) fn tasks_fd(&self) -> RawFd {
        self.tasks.as_raw_fd()
    }

    /// The parent directory's descriptor and the cgroup's name in it, for the waiter.
    pub(crate) fn removal(&self) -> Option<(RawFd, &CStr)> {
        self.parent
            .as_ref()
            .map(|(fd, name)| (fd.as_raw_fd(), name.as_c_str()))
    }

    /// One attempt at removing the cgroup (refused while a process is still in it); true
    /// once it is gone.
    fn try_remove(&mut self) -> bool {
        if !self.removed && remove_run_dir(&self.dir, self.parent.as_ref()) {
            self.removed = true;
        }
        self.removed
    }

    /// Remove the cgroup, waiting (asynchronously) while the last processes of the run are
    /// released. Call after reaping the run's waiter.
    pub(crate) async fn remove(&mut self) {
        let start = Instant::now();
        while !self.try_remove() {
            if start.elapsed() >= REMOVE_LIMIT {
                // Left behind; a later embedder's discovery sweeps it once we are gone.
                self.removed = true;
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// [`remove`](RunPids::remove) for synchronous callers.
    pub(crate) fn remove_blocking(&mut self) {
        let start = Instant::now();
        while !self.try_remove() {
            if start.elapsed() >= REMOVE_LIMIT {
                self.removed = true;
                return;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Drop for RunPids {
    fn drop(&mut self) {
        self.remove_blocking();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_pids_cgroup_takes_the_pids_line() {
        let text = "9:name=systemd:/\n8:pids:/a/b\n4:memory:/x\n0::/\n";
        assert_eq!(own_pids_cgroup(text), Some("/a/b"));
        assert_eq!(own_pids_cgroup("3:cpu,pids:/c\n"), Some("/c"));
        assert_eq!(own_pids_cgroup("4:memory:/x\n0::/\n"), None);
        assert_eq!(own_pids_cgroup("4:pidsx:/x\n"), None);
    }

    #[test]
    fn pids_mounts_take_v1_pids_only() {
        let text = "\
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:39 /a\\040b /mnt/cpu\\040pids rw shared:5 - cgroup cgroup rw,cpu,pids
";
        assert_eq!(
            pids_mounts(text),
            vec![
                ("/".to_owned(), PathBuf::from("/sys/fs/cgroup/pids")),
                ("/a b".to_owned(), PathBuf::from("/mnt/cpu pids")),
            ]
        );
    }

    /// A v1 cgroup named for a pid that cannot exist (above the largest `pid_max`) is
    /// emptied (its live member killed) and removed; one named for our own pid is kept.
    #[test]
    fn sweep_removes_cgroups_of_dead_owners() {
        let Some(runs) = parent() else {
            testkit::not_run(
                "sweep_removes_cgroups_of_dead_owners",
                "no writable cgroup v1 \
                 `pids` hierarchy here",
            );
            return;
        };
        let dir = &runs.path;
        // Another process's discovery may sweep this stale-looking cgroup first (it is stale to
        // every owner): then make it again.
        let mut tries = 0;
        let (stale, pid) = loop {
            tries += 1;
            assert!(tries <= 20, "the stale cgroup kept vanishing");
            let stale = dir.join(format!(
                "{}4194305-{}-{tries}",
                crate::cgroup::PREFIX,
                std::process::id()
            ));
            if std::fs::create_dir(&stale).is_err() {
                continue;
            }
            let flags = OFlags::WRONLY | OFlags::CLOEXEC;
            let Ok(tasks) = rustix::fs::open(stale.join("tasks"), flags, Mode::empty()) else {
                continue;
            };
            // A member that sleeps, as a survivor of a killed embedder (it exits at once if
            // the cgroup vanished before it joined).
            let pid = sleeping_child_in(tasks.as_fd());
            drop(tasks);
            let until = Instant::now() + Duration::from_secs(5);
            let joined = loop {
                match std::fs::read_to_string(stale.join("cgroup.procs")) {
                    Ok(text) if text.contains(&pid.as_raw_pid().to_string()) => break true,
                    Ok(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(1)),
                    _ => break false,
                }
            };
            if joined {
                break (stale, pid);
            }
            rustix::process::kill_process(pid, Signal::KILL).ok();
            rustix::process::waitpid(Some(pid), WaitOptions::empty()).ok();
        };
        let mine = RunPids::create_in(runs, 4).unwrap();
        sweep_stale(dir);
        assert!(!stale.exists(), "the stale cgroup was swept");
        assert!(mine.dir.exists(), "our own cgroup was kept");
        let (_, status) = rustix::process::waitpid(Some(pid), WaitOptions::empty())
            .unwrap()
            .unwrap();
        assert_eq!(status.terminating_signal(), Some(libc::SIGKILL));
        drop(mine);
    }

    /// A child that moves itself into the cgroup of `tasks` and waits for a signal.
    #[expect(unsafe_code, reason = "forks a child that only writes and pauses")]
    fn sleeping_child_in(tasks: BorrowedFd<'_>) -> Pid {
        // SAFETY: the child makes only async-signal-safe calls (a write, `pause`, `_exit`).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            if join(tasks).is_err() {
                // SAFETY: ends the child at once, running nothing of the parent's.
                unsafe { libc::_exit(1) };
            }
            // SAFETY: waits for a signal; nothing shared is touched.
            unsafe { libc::pause() };
            // SAFETY: ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(0) };
        }
        Pid::from_raw(pid).expect("fork succeeded")
    }
}
