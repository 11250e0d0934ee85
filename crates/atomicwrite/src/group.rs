//! Concurrent `fsync`s of one directory share one call (group commit).
//!
//! A rename is durable once an `fsync` of its directory that *started after the rename*
//! returned. When many installations commit into one directory at once (an agent writing
//! several files, a server with many calls in flight), each would otherwise issue its own
//! `fsync` of that directory, and each can cost a journal commit or a device cache flush.
//! Here the callers of [`sync_dir`] for one directory (by `(st_dev, st_ino)`, process-wide)
//! form rounds: at most one `fsync` of the directory runs at a time; a caller that arrives
//! while one runs waits for it to end, then the first waiter starts the next round, which
//! covers every caller that arrived before it started. A caller returns the result of the
//! first round that started after it arrived, never of one already running, so the promise
//! is exactly that of calling `fsync` itself: the directory's entries as they were when the
//! call began are on disk when it returns `Ok`. A failed round fails every caller it covered.
//!
//! Hand-written (a mutex and a condition variable per directory in use) because the rule that
//! makes it correct, a round covers only callers that arrived before it started, is the whole
//! of it; the registry entry of a directory goes away with its last caller.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use confine_beneath::FileId;

/// The rounds of one directory.
#[derive(Default)]
struct Group {
    state: Mutex<State>,
    ended: Condvar,
}

#[derive(Default)]
struct State {
    /// The number the next round to start will have.
    next_round: u64,
    /// Whether a round is running.
    running: bool,
    /// The last round that ended and its result (the OS error number of a failure, if any).
    last: Option<(u64, Result<(), Option<i32>>)>,
    /// Callers waiting for a round to end (what the tests wait for).
    waiting: usize,
}

/// The directories with callers in [`sync_dir`]: their rounds and their number of callers.
type Groups = HashMap<FileId, (Arc<Group>, usize)>;

static GROUPS: Mutex<Option<Groups>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic never happens with a lock held here; should one, the state stays consistent
    // (every field is written in one step), so a poisoned lock is used as it is.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Run `fsync` (the caller's `fsync` of the directory `id`) in a round that starts after this
/// call, shared with the other callers for the same directory; see the module docs.
pub(crate) fn sync_dir(id: FileId, fsync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    let group = {
        let mut groups = lock(&GROUPS);
        let entry = groups
            .get_or_insert_with(HashMap::new)
            .entry(id)
            .or_insert_with(|| (Arc::new(Group::default()), 0));
        entry.1 += 1;
        entry.0.clone()
    };
    let result = group.sync(fsync);
    let mut groups = lock(&GROUPS);
    if let Some(map) = groups.as_mut()
        && let Some(entry) = map.get_mut(&id)
    {
        entry.1 -= 1;
        if entry.1 == 0 {
            map.remove(&id);
        }
    }
    result
}

impl Group {
    fn sync(&self, fsync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut state = lock(&self.state);
        // Any round numbered from here on starts after this call began.
        let covering = state.next_round;
        loop {
            if let Some((round, result)) = &state.last
                && *round >= covering
            {
                return to_io(result);
            }
            if !state.running {
                let round = state.next_round;
                state.next_round += 1;
                state.running = true;
                drop(state);
                let outcome = fsync();
                let result = outcome.as_ref().map(|_| ()).map_err(|e| e.raw_os_error());
                let mut state = lock(&self.state);
                state.running = false;
                state.last = Some((round, result));
                self.ended.notify_all();
                return outcome;
            }
            state.waiting += 1;
            state = self
                .ended
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.waiting -= 1;
        }
    }
}

fn to_io(result: &Result<(), Option<i32>>) -> io::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(Some(errno)) => Err(io::Error::from_raw_os_error(*errno)),
        Err(None) => Err(io::Error::other("the shared directory fsync failed")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn id(ino: u64) -> FileId {
        FileId { dev: 0xfeed, ino }
    }

    /// A caller arriving while a round runs is not covered by it: it waits, and one round
    /// started after the running one ended covers every such caller.
    #[test]
    fn callers_arriving_during_a_round_share_the_next_one() {
        let calls = Arc::new(AtomicUsize::new(0));
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let first = {
            let calls = calls.clone();
            std::thread::spawn(move || {
                sync_dir(id(1), || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    entered_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(())
                })
            })
        };
        entered.recv().unwrap();
        // Eight callers arrive while the first round runs.
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let calls = calls.clone();
                std::thread::spawn(move || {
                    sync_dir(id(1), || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                })
            })
            .collect();
        wait_for_waiters(id(1), 8);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "no round covers a running one"
        );
        release.send(()).unwrap();
        first.join().unwrap().unwrap();
        for w in waiters {
            w.join().unwrap().unwrap();
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "the 8 waiters shared one round after the first"
        );
        assert!(
            lock(&GROUPS)
                .as_ref()
                .is_none_or(|m| !m.contains_key(&id(1)))
        );
    }

    /// A failed round fails the callers it covered, with its error; other directories are
    /// rounds of their own.
    #[test]
    fn a_failed_round_fails_its_callers_and_directories_are_separate() {
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let first = std::thread::spawn(move || {
            sync_dir(id(2), || {
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                Ok(())
            })
        });
        entered.recv().unwrap();
        // Another directory is not held up by the running round.
        sync_dir(id(3), || Ok(())).unwrap();
        let (started_tx, started) = mpsc::channel();
        let failing = std::thread::spawn(move || {
            started_tx.send(()).unwrap();
            sync_dir(id(2), || Err(io::Error::from_raw_os_error(libc_eio())))
        });
        started.recv().unwrap();
        wait_for_waiters(id(2), 1);
        release.send(()).unwrap();
        first.join().unwrap().unwrap();
        let err = failing.join().unwrap().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc_eio()));
    }

    /// Until `n` callers wait on the rounds of directory `dir` (polled: the callers are
    /// threads that may take a while to be scheduled on a loaded machine).
    fn wait_for_waiters(dir: FileId, n: usize) {
        loop {
            let group = lock(&GROUPS)
                .as_ref()
                .and_then(|m| m.get(&dir).map(|(g, _)| g.clone()));
            if group.is_some_and(|g| lock(&g.state).waiting == n) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn libc_eio() -> i32 {
        rustix::io::Errno::IO.raw_os_error()
    }
}
