//! Filesystem work off the async worker threads.
//!
//! Opening, reading, `fsync` and `rename` block the thread that calls them, for as long as the
//! disk takes. Run on a worker thread of a multi-thread runtime (an MCP server with many calls
//! in flight) they would stall every other call that worker serves; so there each tool hands
//! its filesystem work to a pool of threads of its own and awaits it.
//!
//! On a current-thread runtime the work runs inline: such a runtime is chosen to run one call
//! at a time (`confine call`), where a hand-off to another thread protects nothing and costs
//! two thread wake-ups per step, which a loaded machine turns into milliseconds.
//!
//! **The pool is written here, not tokio's blocking pool**, for one property tokio's does not
//! have: it never runs more threads than jobs have been in flight at once. Tokio's pool starts
//! a thread whenever no thread is idle at the instant a job is handed over; a thread that has
//! just finished a job and is about to take the next is not idle yet, so under a steady load
//! of N calls in flight its thread count creeps above N and steps up now and then (a server's
//! thread count that is not flat under a steady load looks like a leak, and each thread costs
//! a stack and a malloc arena). Here a job is counted in flight from its hand-off until its
//! result is about to be delivered, and a thread is started only when the queued jobs
//! outnumber the idle threads *and* the threads are fewer than the jobs in flight. A thread
//! idle for ten seconds ends, as in tokio's pool; jobs are taken first come, first served.
//!
//! **Brief work runs where it is asked for** ([`brief`]): a `read_file` (at most 64 KiB, a
//! fixed dozen system calls) or a `file_info` (one stat) on a disk of this machine takes a few
//! microseconds, less than the two thread wake-ups a hand-off costs (on a 2-core machine a
//! hand-off doubled the server's CPU per read and halved the reads answered one at a time,
//! `docs/PERFORMANCE.md`). Such work runs inline on the async worker when the workspace's
//! file system is one whose calls the kernel answers from its own caches and disks
//! ([`local_filesystem`]: ext4, XFS, Btrfs, tmpfs, overlayfs, ZFS and the like), and goes to
//! the pool otherwise (NFS, SMB, FUSE, 9p, anything not on the list), where a call may wait on
//! a server for as long as it likes. A walk, a write with its `fsync`, a read that may skip
//! through a large file, always go to the pool. A `read_file` on the worker goes further and
//! never waits for the disk either: the name is resolved with `RESOLVE_CACHED` and the bytes
//! read with `RWF_NOWAIT`, and where the kernel would have to fetch either (or the read fails
//! in any way) the read is done again on the pool, which gives the answer
//! (`read::read_whole_cached`). What is left inline that may touch a disk: `file_info`'s stat
//! of a name the kernel let go of, and the root's check (its path walked at every call, so
//! held in the kernel's caches); while such a step waits, the calls the worker serves wait
//! with it.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tokio::runtime::{Handle, RuntimeFlavor};

use crate::error::{CallError, Cancelled};

/// Run `work` on the pool (on a multi-thread runtime; inline otherwise) and await it. A panic
/// in `work` is resumed here.
pub(crate) async fn off_reactor<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CallError> + Send + 'static,
) -> Result<T, CallError> {
    if !Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) {
        return work();
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    BlockingPool::shared().submit(Box::new(move || {
        let result = std::panic::catch_unwind(AssertUnwindSafe(work));
        Box::new(move || {
            // The caller may have stopped waiting (its call was cancelled): nothing to do.
            let _ = tx.send(result);
        })
    }));
    match rx.await {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        // Only if the job was dropped unrun, which the pool never does.
        Err(_) => Err(Cancelled.into()),
    }
}

/// Run `work`, brief by nature (bounded, a few system calls), inline where the workspace is on
/// a [`local_filesystem`], else as [`off_reactor`] does. See the module docs.
pub(crate) async fn brief<T: Send + 'static>(
    local: bool,
    work: impl FnOnce() -> Result<T, CallError> + Send + 'static,
) -> Result<T, CallError> {
    if local {
        return work();
    }
    off_reactor(work).await
}

/// Whether the file system of `dir` answers from this machine's own caches and disks, so that
/// a brief call on it never waits on another machine or a user-space server: the types of
/// `statfs` listed here (the kernel's `magic.h` and the file systems' own headers). Anything
/// else, or a `statfs` that fails, is not.
pub(crate) fn local_filesystem(dir: impl std::os::fd::AsFd) -> bool {
    #[cfg(target_os = "linux")]
    {
        const LOCAL: &[i64] = &[
            0xEF53,      // ext2, ext3, ext4
            0x5846_5342, // XFS
            0x9123_683E, // Btrfs
            0x0102_1994, // tmpfs
            0x8584_58F6, // ramfs
            0x794C_7630, // overlayfs
            0x2FC1_2FC1, // ZFS
            0xF2F5_2010, // F2FS
            0xCA45_1A4E, // bcachefs
            0x3153_464A, // JFS
            0x5265_4973, // ReiserFS
        ];
        rustix::fs::fstatfs(dir).is_ok_and(|st| {
            #[allow(
                clippy::useless_conversion,
                reason = "the type's width varies by target"
            )]
            let kind = i64::from(st.f_type);
            LOCAL.contains(&kind)
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        false
    }
}

/// A job does its work and returns what delivers the result; the pool counts the job out of
/// flight between the two, so that the caller's next job (which the delivery may prompt at
/// once) never finds this one still counted. The delivery must not block: its job is no longer
/// counted, so no thread would be started for a job queued behind it.
type Job = Box<dyn FnOnce() -> Box<dyn FnOnce() + Send> + Send>;

/// The threads that run the jobs. See the module docs for when a thread is started.
pub(crate) struct BlockingPool {
    state: Mutex<State>,
    work: Condvar,
    idle_for: Duration,
    name: &'static str,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Threads started and not ended.
    threads: usize,
    /// Threads waiting for a job (a thread that was woken counts until it runs again).
    idle: usize,
    /// Jobs handed over whose result is not yet being delivered.
    in_flight: usize,
    /// The most threads alive at once, for the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    peak: usize,
}

/// As tokio's blocking pool: far above any number of calls a server has in flight.
const MAX_THREADS: usize = 512;

impl BlockingPool {
    fn new(idle_for: Duration, name: &'static str) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            idle_for,
            name,
        })
    }

    /// The process's pool for the tools' filesystem work.
    fn shared() -> &'static Arc<Self> {
        static POOL: OnceLock<Arc<BlockingPool>> = OnceLock::new();
        POOL.get_or_init(|| Self::new(Duration::from_secs(10), "confine-fs"))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A job runs outside the lock and its panic is caught: a poisoned lock can only come
        // from a bug in these few lines, and the state stays consistent between statements.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn submit(self: &Arc<Self>, job: Job) {
        let mut s = self.lock();
        s.in_flight += 1;
        s.queue.push_back(job);
        let start = s.queue.len() > s.idle && s.threads < s.in_flight.min(MAX_THREADS);
        if !start {
            drop(s);
            self.work.notify_one();
            return;
        }
        s.threads += 1;
        s.peak = s.peak.max(s.threads);
        drop(s);
        let pool = Arc::clone(self);
        let started = std::thread::Builder::new()
            .name(self.name.to_owned())
            .spawn(move || pool.run());
        if started.is_err() {
            // The system refuses a thread (its thread limit). The job stays queued for a
            // thread the pool already has; with none, it runs here, on the caller's thread:
            // slower for the calls beside it, but done.
            let mut s = self.lock();
            s.threads -= 1;
            if s.threads == 0 {
                let jobs: Vec<Job> = s.queue.drain(..).collect();
                s.in_flight -= jobs.len();
                drop(s);
                for job in jobs {
                    job()();
                }
            }
        }
    }

    fn run(&self) {
        let mut s = self.lock();
        loop {
            if let Some(job) = s.queue.pop_front() {
                drop(s);
                let deliver = job();
                self.lock().in_flight -= 1;
                deliver();
                s = self.lock();
                continue;
            }
            s.idle += 1;
            let (guard, waited) = self
                .work
                .wait_timeout(s, self.idle_for)
                .unwrap_or_else(PoisonError::into_inner);
            s = guard;
            s.idle -= 1;
            if waited.timed_out() && s.queue.is_empty() {
                s.threads -= 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Instant;

    use super::*;

    /// A job whose work is `f` (its delivery does nothing).
    fn job(f: impl FnOnce() + Send + 'static) -> Job {
        Box::new(move || {
            f();
            Box::new(|| {})
        })
    }

    fn snapshot(pool: &BlockingPool) -> (usize, usize, usize) {
        let s = pool.lock();
        (s.threads, s.in_flight, s.peak)
    }

    /// The soak's load: `n` callers, each handing over a job and waiting for it, again and
    /// again. The threads never outnumber the callers, however the jobs and the wake-ups
    /// interleave (under the same kind of load, the server's soak, tokio's pool stepped above
    /// the calls in flight).
    #[test]
    fn threads_never_outnumber_the_jobs_in_flight() {
        let pool = BlockingPool::new(Duration::from_secs(10), "test-pool");
        let callers = 4;
        std::thread::scope(|scope| {
            for _ in 0..callers {
                let pool = Arc::clone(&pool);
                scope.spawn(move || {
                    for i in 0..3000u32 {
                        let (tx, rx) = mpsc::channel();
                        pool.submit(Box::new(move || {
                            let v = std::hint::black_box(i).wrapping_mul(3);
                            Box::new(move || tx.send(v).unwrap())
                        }));
                        assert_eq!(rx.recv().unwrap(), i.wrapping_mul(3));
                    }
                });
            }
        });
        let (threads, in_flight, peak) = snapshot(&pool);
        assert_eq!(in_flight, 0);
        assert!(
            threads >= 1 && peak <= callers,
            "peak {peak} threads for {callers} callers"
        );
    }

    /// A job that never ends does not hold up the next: it gets a thread of its own.
    #[test]
    fn a_stalled_job_does_not_hold_up_the_next() {
        let pool = BlockingPool::new(Duration::from_secs(10), "test-pool");
        let (release, stalled) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel();
        pool.submit(job(move || {
            started_tx.send(()).unwrap();
            let _ = stalled.recv_timeout(Duration::from_secs(60));
        }));
        started.recv().unwrap();
        let (done_tx, done) = mpsc::channel();
        pool.submit(job(move || done_tx.send(7).unwrap()));
        assert_eq!(done.recv_timeout(Duration::from_secs(30)), Ok(7));
        assert_eq!(snapshot(&pool).0, 2);
        release.send(()).unwrap();
    }

    /// Queued jobs beyond the idle threads start threads up to the jobs in flight, and run
    /// first come, first served on one thread.
    #[test]
    fn jobs_run_in_order_and_idle_threads_end() {
        let pool = BlockingPool::new(Duration::from_millis(50), "test-pool");
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            pool.submit(Box::new(move || Box::new(move || tx.send(i).unwrap())));
            // One at a time: each job is done before the next is handed over.
            assert_eq!(rx.recv().unwrap(), i);
        }
        assert_eq!(
            snapshot(&pool).2,
            1,
            "one caller at a time needs one thread"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while snapshot(&pool).0 != 0 {
            assert!(Instant::now() < deadline, "an idle thread never ended");
            std::thread::sleep(Duration::from_millis(10));
        }
        // An ended pool starts again.
        pool.submit(job(move || tx.send(100).unwrap()));
        assert_eq!(rx.recv().unwrap(), 100);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn brief_work_runs_inline_only_on_a_local_filesystem() {
        let worker = std::thread::current().id();
        let here = brief(true, move || Ok(std::thread::current().id() == worker)).await;
        assert_eq!(here, Ok(true), "inline on the worker");
        let elsewhere = brief(false, move || Ok(std::thread::current().id() != worker)).await;
        assert_eq!(elsewhere, Ok(true), "handed to the pool");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn local_filesystems_are_told_from_others() {
        let disk = tempfile::tempdir().unwrap();
        let disk = std::fs::File::open(disk.path()).unwrap();
        assert!(
            local_filesystem(&disk),
            "a temporary directory is on a disk or tmpfs"
        );
        let shm = std::fs::File::open("/dev/shm").unwrap();
        assert!(local_filesystem(&shm), "tmpfs");
        // procfs answers from the kernel too, but it is not a file system a workspace is on:
        // not on the list, so handed to the pool like any file system not listed.
        let proc = std::fs::File::open("/proc/self").unwrap();
        assert!(!local_filesystem(&proc), "procfs is not listed");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn off_reactor_delivers_results_and_panics() {
        let worker = std::thread::current().id();
        let elsewhere = off_reactor(move || Ok(std::thread::current().id() != worker)).await;
        assert_eq!(elsewhere, Ok(true));
        let panicked = tokio::spawn(off_reactor(|| -> Result<(), CallError> {
            panic!("inside the job")
        }))
        .await
        .unwrap_err();
        assert!(panicked.is_panic());
    }
}
