//! cgroup v2 containment: a fresh cgroup per run, killed whole with `cgroup.kill`.
//!
//! Discovery runs once per process ([`parent`]): our own cgroup from `/proc/self/cgroup`
//! (`0::<path>`), a `cgroup2` mount from `/proc/self/mountinfo` whose root lies above it, and
//! the directory `<mount><own path>` beneath which each run gets `confine-<pid>-<n>`. Before it
//! is trusted, a probe cgroup is made there, checked for `cgroup.kill` (Linux 5.14), and a
//! child that does nothing but exit is created in it with `clone3(CLONE_INTO_CGROUP)` (so a
//! hierarchy we may create in but not migrate into, as with an undelegated subtree, or a
//! kernel without `clone3`, is found out now, not in a run). Stale cgroups of embedders that
//! died without cleaning up (`confine-<pid>-*` whose pid is gone) are killed and removed then.
//!
//! A run ([`RunCgroup`]): `mkdir` and a directory descriptor, relative to a descriptor of the
//! parent that the process keeps ([`RunsDir`]); the program's process is created in the
//! cgroup (see `contain.rs`), so the program and every descendant are born inside; at the end
//! `1` goes to `cgroup.kill` (the kernel kills every member, forks in flight included), the
//! caller reaps its waiter, [`RunCgroup::settle`] removes the directory, retrying while the
//! kernel refuses because the last members are still leaving. The embedding process never
//! joins the cgroup, and the `pids.max` and `memory.max` of a controller the parent does not
//! give its children are not tried.

use std::ffi::{CStr, CString};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::owner::Owner;

/// Every cgroup this crate makes is named `confine-<embedder pid>-<counter>`.
pub(crate) const PREFIX: &str = "confine-";

/// How long the end of a run waits for the killed cgroup to empty before leaving it behind
/// (only a process stuck in an uninterruptible sleep takes that long).
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

/// How often the kill is repeated while waiting (the kernel's kill is already atomic with
/// respect to forks; this is insurance, and cheap).
const REKILL_EVERY: Duration = Duration::from_millis(50);

static PARENT: OnceLock<Option<RunsDir>> = OnceLock::new();
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The directory beneath which runs get their cgroups, when this process can use cgroup
/// containment; discovered (and probed) once per process.
pub(crate) fn parent() -> Option<&'static RunsDir> {
    PARENT.get_or_init(discover).as_ref()
}

/// A directory beneath which runs get their cgroups (in the v2 hierarchy, or the v1 `pids`
/// one), with a descriptor of it that the process keeps: each run's cgroup is made, opened
/// and removed relative to it, without walking the path again.
#[derive(Debug)]
pub(crate) struct RunsDir {
    pub(crate) path: PathBuf,
    pub(crate) fd: OwnedFd,
    /// v2: whether the runs' cgroups get the `pids` controller (it is in the directory's
    /// `cgroup.subtree_control`, as read when the directory was opened).
    pids: bool,
    /// v2: the same for the `memory` controller.
    memory: bool,
}

impl RunsDir {
    /// Open `path` (and, in v2, read which controllers its children get: a controller
    /// enabled there later is used from the next process on).
    pub(crate) fn open(path: PathBuf) -> io::Result<RunsDir> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(&path, flags, Mode::empty())?;
        let control =
            std::fs::read_to_string(path.join("cgroup.subtree_control")).unwrap_or_default();
        let enabled = |name: &str| control.split_whitespace().any(|c| c == name);
        Ok(RunsDir {
            pids: enabled("pids"),
            memory: enabled("memory"),
            path,
            fd,
        })
    }
}

fn discover() -> Option<RunsDir> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own_cgroup(&own)?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for (root, mountpoint) in cgroup2_mounts(&mountinfo) {
        let Some(rel) = relative(own, &root) else {
            continue;
        };
        let dir = mountpoint.join(rel);
        sweep_stale(&dir);
        // Per-run bounds need the controllers in the runs' cgroups. The kernel refuses this
        // for a cgroup that holds processes (ours holds us), unless it is the root: best
        // effort, each on its own.
        for controller in ["+pids", "+memory"] {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.subtree_control"))
                .and_then(|mut f| f.write_all(controller.as_bytes()))
                .ok();
        }
        if let Ok(runs) = RunsDir::open(dir)
            && probe(&runs)
        {
            return Some(runs);
        }
    }
    None
}

/// The cgroup v2 path of `/proc/self/cgroup` (the `0::` line).
fn own_cgroup(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .filter(|p| p.starts_with('/'))
}

/// `(root, mount point)` of every `cgroup2` mount in mountinfo text.
fn cgroup2_mounts(text: &str) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if fields.get(dash + 1) != Some(&"cgroup2") || dash < 5 {
            continue;
        }
        out.push((unescape(fields[3]), PathBuf::from(unescape(fields[4]))));
    }
    out
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
pub(crate) fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `own` relative to the mount's `root`, when `own` lies beneath it (no `..`: a cgroup
/// outside our cgroup namespace is not ours to use).
pub(crate) fn relative(own: &str, root: &str) -> Option<PathBuf> {
    let rest = Path::new(own).strip_prefix(root).ok()?;
    rest.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| rest.to_owned())
}

/// Kill and remove `confine-<owner>-*` cgroups whose embedder is gone (killed before it
/// could clean up; its waiter, which outlives it, removes the cgroup itself unless it was
/// killed too). The owner is a pid *and* its start time ([`Owner`]), so a cgroup of a live
/// embedder is never taken for stale, and one whose pid was reused is still found stale.
/// Names without a start time (an older release) count as stale once their pid is unused.
fn sweep_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(alive) = stale_owner(&name.to_string_lossy()) else {
            continue;
        };
        if alive {
            continue;
        }
        let mut stale = RunCgroup {
            dir: entry.path(),
            fd: None,
            kill_fd: None,
            parent: None,
            controllers: (false, false),
            settled: false,
        };
        stale.kill().ok();
        stale.settle_blocking_for(Duration::from_millis(500));
    }
}

/// Remove what embedders that died left beneath the directory where this process's runs get
/// their cgroups (see [`sweep_stale`]); nothing where cgroup containment is unavailable.
pub(crate) fn remove_stale() {
    if let Some(runs) = parent() {
        sweep_stale(&runs.path);
    }
}

/// For a name of ours, `confine-<pid>-<start>-<n>` (or an older release's
/// `confine-<pid>-<n>`), whether its owner is alive; `None` for any other name.
pub(crate) fn stale_owner(name: &str) -> Option<bool> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut parts = rest.splitn(3, '-');
    let pid = parts.next()?;
    let second = parts.next()?;
    match parts.next() {
        Some(_) => Some(Owner::parse(&format!("{pid}-{second}"))?.is_alive()),
        None => {
            let pid: u32 = pid.parse().ok()?;
            Some(pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists())
        }
    }
}

/// Whether runs can be contained beneath `dir`: a cgroup can be made there, it has
/// `cgroup.kill`, and a child can be created in it.
fn probe(dir: &RunsDir) -> bool {
    let Ok(mut cgroup) = RunCgroup::create_in(dir) else {
        return false;
    };
    let created = exit_in(cgroup.raw_fd());
    cgroup.settle_blocking_for(Duration::from_secs(1));
    created && cgroup.settled
}

/// Create a child in the cgroup `fd` names, the way a run's program is created, that exits at
/// once; whether that worked.
fn exit_in(fd: RawFd) -> bool {
    let Ok(pid) = crate::contain::spawn_exiting_in(fd) else {
        return false;
    };
    loop {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
            Ok(Some((_, status))) => return status.exit_status() == Some(0),
            Err(rustix::io::Errno::INTR) => {}
            _ => return false,
        }
    }
}

/// Make a fresh `confine-<owner>-<n>` directory beneath `parent` (a cgroup of a v2 or v1
/// hierarchy); its path and its name there.
pub(crate) fn make_run_dir(parent: &RunsDir) -> io::Result<(PathBuf, CString)> {
    let me = Owner::current();
    let mut tries = 0;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = CString::new(format!("{PREFIX}{me}-{n}"))
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        match rustix::fs::mkdirat(&parent.fd, &name, rustix::fs::Mode::from_raw_mode(0o777)) {
            Ok(()) => return Ok((parent.path.join(name.to_str().unwrap_or_default()), name)),
            // Left by an earlier process with our pid: take the next number.
            Err(rustix::io::Errno::EXIST) if tries < 8 => tries += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

/// A descriptor of `parent`'s directory for a run (close-on-exec): a duplicate, so the waiter
/// can remove the run's cgroup when the embedder died first.
pub(crate) fn parent_for_run(parent: &RunsDir) -> Option<OwnedFd> {
    rustix::io::fcntl_dupfd_cloexec(&parent.fd, 3).ok()
}

/// Remove the cgroup `name` of `parent` (or, without them, the directory `dir`): true once it
/// is gone. The kernel refuses (`EBUSY`) while a process is still in it.
pub(crate) fn remove_run_dir(dir: &Path, parent: Option<&(OwnedFd, CString)>) -> bool {
    let removed = match parent {
        Some((fd, name)) => {
            rustix::fs::unlinkat(fd, name.as_c_str(), rustix::fs::AtFlags::REMOVEDIR)
                .map_err(io::Error::from)
        }
        None => std::fs::remove_dir(dir),
    };
    !matches!(removed, Err(e) if e.kind() != io::ErrorKind::NotFound)
}

/// The cgroup of one run. Dropped without [`settle`](RunCgroup::settle), it kills, waits
/// and removes synchronously.
#[derive(Debug)]
pub(crate) struct RunCgroup {
    dir: PathBuf,
    /// The directory, open, for `CLONE_INTO_CGROUP` (close-on-exec); `None` for a stale
    /// cgroup being swept.
    fd: Option<OwnedFd>,
    /// Its `cgroup.kill`, open for writing (close-on-exec), for the waiter; `None` for a
    /// stale cgroup.
    kill_fd: Option<OwnedFd>,
    /// The parent directory, open (close-on-exec), and the cgroup's name in it: for the
    /// waiter to remove the cgroup when the embedder died first, and for removing it here.
    parent: Option<(OwnedFd, CString)>,
    /// Whether the cgroup has the `pids` and the `memory` controller ([`RunsDir`]).
    controllers: (bool, bool),
    /// Emptied and removed (or given up on).
    settled: bool,
}

impl RunCgroup {
    /// A fresh cgroup for a run, or `None` where cgroup containment is unavailable.
    pub(crate) fn create() -> Option<Self> {
        Self::create_in(parent()?).ok()
    }

    fn create_in(parent: &RunsDir) -> io::Result<Self> {
        let (dir, name) = make_run_dir(parent)?;
        let opened = rustix::fs::openat(
            &parent.fd,
            &name,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .and_then(|dir| {
            let kill_flags = rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC;
            let kill =
                rustix::fs::openat(&dir, "cgroup.kill", kill_flags, rustix::fs::Mode::empty())?;
            Ok((dir, kill))
        });
        let mut cgroup = Self {
            dir,
            fd: None,
            kill_fd: None,
            parent: parent_for_run(parent).map(|fd| (fd, name)),
            controllers: (parent.pids, parent.memory),
            settled: false,
        };
        match opened {
            Ok((fd, kill)) => {
                cgroup.fd = Some(fd);
                cgroup.kill_fd = Some(kill);
                Ok(cgroup)
            }
            // No `cgroup.kill` (before Linux 5.14), or no descriptor: unusable.
            other => {
                cgroup.settle_blocking_for(Duration::ZERO);
                Err(other
                    .err()
                    .map_or(io::ErrorKind::Unsupported.into(), io::Error::from))
            }
        }
    }

    /// The directory's descriptor, for `CLONE_INTO_CGROUP`.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }

    /// Bound the run: `pids.max` and `memory.max` where the cgroup has those controllers
    /// (enabled in its parent's `cgroup.subtree_control` at discovery, where that is
    /// allowed). Whether `pids.max` now bounds the run's processes.
    pub(crate) fn bound(&self, processes: Option<u64>, memory: Option<u64>) -> bool {
        let set = |file: &str, value: u64| {
            let Some(dir) = &self.fd else { return false };
            let flags = rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC;
            rustix::fs::openat(dir, file, flags, rustix::fs::Mode::empty())
                .and_then(|f| rustix::io::write(&f, value.to_string().as_bytes()))
                .is_ok()
        };
        let (pids, has_memory) = self.controllers;
        if let Some(bytes) = memory
            && has_memory
        {
            set("memory.max", bytes);
        }
        processes.is_some_and(|count| pids && set("pids.max", count))
    }

    /// `cgroup.kill`, open for writing, for the waiter.
    pub(crate) fn kill_fd(&self) -> RawFd {
        self.kill_fd.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }

    /// The parent directory's descriptor and the cgroup's name in it, for the waiter.
    pub(crate) fn removal(&self) -> Option<(RawFd, &CStr)> {
        self.parent
            .as_ref()
            .map(|(fd, name)| (fd.as_raw_fd(), name.as_c_str()))
    }

    /// Kill every process in the cgroup (`1` to `cgroup.kill`).
    pub(crate) fn kill(&self) -> io::Result<()> {
        if let Some(fd) = &self.kill_fd {
            rustix::io::write(fd, b"1")?;
            return Ok(());
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))?
            .write_all(b"1")
    }

    /// One attempt at removing the cgroup (refused while it is populated). True once it is
    /// gone.
    fn try_remove(&mut self) -> bool {
        if !self.settled && remove_run_dir(&self.dir, self.parent.as_ref()) {
            self.settled = true;
        }
        self.settled
    }

    /// Wait (asynchronously, with short sleeps) until the cgroup is empty, then remove it.
    /// Call after [`kill`](RunCgroup::kill) and after reaping the run's direct child.
    pub(crate) async fn settle(&mut self) {
        let start = Instant::now();
        let mut last_kill = start;
        let mut spins = 0u32;
        while !self.try_remove() {
            if start.elapsed() >= SETTLE_LIMIT {
                // Left behind; a later embedder's discovery sweeps it once we are gone.
                self.settled = true;
                return;
            }
            if last_kill.elapsed() >= REKILL_EVERY {
                self.kill().ok();
                last_kill = Instant::now();
            }
            // The kill usually takes effect within microseconds: yield a few times before
            // paying the timer's millisecond.
            if spins < 16 {
                spins += 1;
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// [`settle`](RunCgroup::settle) for synchronous callers (a dropped future).
    pub(crate) fn settle_blocking(&mut self) {
        self.settle_blocking_for(SETTLE_LIMIT);
    }

    fn settle_blocking_for(&mut self, limit: Duration) {
        let start = Instant::now();
        let mut last_kill = start;
        while !self.try_remove() {
            if start.elapsed() >= limit {
                self.settled = true;
                return;
            }
            if last_kill.elapsed() >= REKILL_EVERY {
                self.kill().ok();
                last_kill = Instant::now();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if !self.settled {
            self.kill().ok();
            self.settle_blocking();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cgroup_takes_the_v2_line() {
        let text = "4:memory:/x\n0::/user.slice/a.scope\n";
        assert_eq!(own_cgroup(text), Some("/user.slice/a.scope"));
        assert_eq!(own_cgroup("4:memory:/x\n"), None);
    }

    #[test]
    fn cgroup2_mounts_parse_and_unescape() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:38 /a\\040b /mnt/my\\040cg rw shared:5 - cgroup2 cgroup2 rw
";
        assert_eq!(
            cgroup2_mounts(text),
            vec![
                ("/".to_owned(), PathBuf::from("/sys/fs/cgroup/unified")),
                ("/a b".to_owned(), PathBuf::from("/mnt/my cg")),
            ]
        );
    }

    #[test]
    fn relative_stays_beneath_the_mount_root() {
        assert_eq!(relative("/", "/"), Some(PathBuf::new()));
        assert_eq!(relative("/a/b", "/"), Some(PathBuf::from("a/b")));
        assert_eq!(relative("/a/b", "/a"), Some(PathBuf::from("b")));
        assert_eq!(relative("/ab", "/a"), None);
        assert_eq!(relative("/../x", "/"), None);
    }

    #[test]
    fn stale_owner_judges_by_identity() {
        let me = Owner::current();
        assert_eq!(stale_owner(&format!("confine-{me}-4")), Some(true));
        let reused = format!("confine-{}-1-4", me.pid());
        assert_eq!(stale_owner(&reused), Some(false), "same pid, other start");
        assert_eq!(stale_owner("confine-4194305-1-4"), Some(false));
        assert_eq!(stale_owner(&format!("confine-{}-4", me.pid())), Some(true));
        assert_eq!(stale_owner("confine-4194305-4"), Some(false));
        assert_eq!(stale_owner("confine-x-4"), None);
        assert_eq!(stale_owner("confine-1-x-4"), None);
        assert_eq!(stale_owner("other-123-4"), None);
    }

    /// A cgroup named for a pid that cannot exist (above the largest `pid_max`) is swept,
    /// a live process inside it killed first; one named for our own pid is kept.
    #[test]
    fn sweep_removes_cgroups_of_dead_embedders() {
        let Some(runs) = parent() else {
            testkit::not_run(
                "sweep_removes_cgroups_of_dead_embedders",
                "no writable cgroup here",
            );
            return;
        };
        let dir = &runs.path;
        let stale = dir.join(format!("{PREFIX}4194305-1-0"));
        std::fs::create_dir(&stale).unwrap();
        let fd = std::fs::File::open(&stale).unwrap();
        // A child in the stale cgroup that sleeps, as an orphan of a killed embedder.
        let pid = sleeping_child_in(fd.as_raw_fd());
        drop(fd);
        assert!(pid > 0);
        let until = Instant::now() + Duration::from_secs(5);
        while !std::fs::read_to_string(stale.join("cgroup.procs"))
            .unwrap()
            .contains(&pid.to_string())
        {
            assert!(Instant::now() < until, "the child never joined");
            std::thread::sleep(Duration::from_millis(1));
        }
        let mine = RunCgroup::create_in(runs).unwrap();
        sweep_stale(dir);
        assert!(!stale.exists(), "the stale cgroup was swept");
        assert!(mine.dir.exists(), "our own cgroup was kept");
        let (_, status) = rustix::process::waitpid(
            rustix::process::Pid::from_raw(pid),
            rustix::process::WaitOptions::empty(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(status.terminating_signal(), Some(libc::SIGKILL));
        drop(mine);
    }

    /// A child created in the cgroup `fd` names that waits for a signal.
    #[expect(unsafe_code, reason = "creates a child that only pauses")]
    fn sleeping_child_in(fd: RawFd) -> libc::pid_t {
        // SAFETY: the child makes only async-signal-safe calls (`pause`, `_exit`).
        let pid = unsafe { crate::contain::clone_into_cgroup(fd) };
        if pid == 0 {
            // SAFETY: waits for a signal; nothing shared is touched.
            unsafe { libc::pause() };
            // SAFETY: ends the child at once, running nothing of the parent's.
            unsafe { libc::_exit(0) };
        }
        pid
    }
}
