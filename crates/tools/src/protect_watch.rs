//! Protected paths that do not exist yet, kept from being created by a sandboxed run.
//!
//! A read-only mount covers what exists; a name that does not exist cannot carry a mount, and
//! the directory that would hold it must stay writable (the root's `.git` holds git's lock
//! files, index and `HEAD`). No kernel mechanism available to an unprivileged process refuses
//! one name in a writable directory (Landlock's rights are per directory, seccomp cannot read
//! a path), so the run is watched instead: before the child starts, an inotify watch is put
//! on the nearest existing directory of each missing protected path (`.git` for
//! `.git/commondir`), and for the run's whole life a thread of the server's removes whatever
//! appears at a protected path (recursively, beneath the root's descriptor, nothing
//! followed), and any symbolic link or other non-directory put on the way to one. A
//! directory made on the way (`deploy/` for a protected `deploy/run.sh`) is watched in turn,
//! then looked into once more (what the child made in it before the watch existed raised no
//! event).
//! When the run ends the watch stops and every path is looked at once more.
//!
//! What this does not give: the instant between the child's creation and the removal (the
//! watcher wakes on the kernel's event: microseconds to a few milliseconds under load), in
//! which the user's own `git` running at that moment could read a planted `commondir`. The
//! existing paths, the hooks and the repository's other directories are mounts, with no
//! such instant; see `docs/SECURITY.md`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use confine_beneath::Symlinks;
use confine_rootid::WorkspaceRoot;
use rustix::event::{PollFd, PollFlags};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;

/// The most entries one removal takes away; a bigger tree at a protected path is left and
/// logged (the run made it under a path it may not create: the user sees it).
const MAX_REMOVED: usize = 100_000;

/// The most directories watched for one run (missing paths and directories made on the way).
const MAX_WATCHES: usize = 256;

/// A running watch; dropping it stops the watch and waits for the last sweep.
///
/// The watch's thread makes that sweep and owns the inotify descriptor to its end: closing
/// the last descriptor of an inotify instance waits for the kernel to retire its watches (an
/// SRCU grace period: 10 to 20 ms on a loaded machine, measured as most of what the sandbox
/// added to a run's answer), so it is closed after the sweep is reported, off the caller's
/// path.
#[derive(Debug)]
pub(crate) struct ProtectWatch {
    stop: Option<OwnedFd>,
    /// Receives once the thread's last sweep is done (or the thread is gone).
    swept: Option<std::sync::mpsc::Receiver<()>>,
}

#[derive(Debug)]
struct State {
    root: Arc<WorkspaceRoot>,
    targets: Vec<PathBuf>,
    inotify: OwnedFd,
    /// Each watch's directory, by identity (a directory removed and made again is a new
    /// one); a watch the kernel dropped (its directory removed) is forgotten.
    watches: HashMap<i32, confine_beneath::FileId>,
}

impl ProtectWatch {
    /// Watch `targets` (paths relative to the root that do not exist) until dropped. The
    /// watches exist when this returns, so a child started afterwards is watched from its
    /// first instant. `Err` when inotify cannot be had: a caller must not start the child.
    pub(crate) fn start(root: Arc<WorkspaceRoot>, mut targets: Vec<PathBuf>) -> io::Result<Self> {
        // What exists is never this watch's to remove (the plan lists missing paths; one made
        // meanwhile by someone else is left alone).
        targets.retain(|t| {
            matches!(
                rustix::fs::statat(root.dir(), t.as_path(), AtFlags::SYMLINK_NOFOLLOW),
                Err(Errno::NOENT | Errno::NOTDIR)
            )
        });
        let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let mut state = State {
            root,
            targets,
            inotify,
            watches: HashMap::new(),
        };
        state.sweep()?;
        let (stop_read, stop_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (done, swept) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("confine-protect-watch".into())
            .spawn(move || {
                watch(&mut state, &stop_read);
                // The run's processes are reaped: the last look at every path.
                if let Err(e) = state.sweep() {
                    tracing::warn!(error = %e, "protected paths: the last sweep failed");
                }
                let _ = done.send(());
                // `state`, with the inotify instance, is dropped here, after the report.
            })?;
        Ok(Self {
            stop: Some(stop_write),
            swept: Some(swept),
        })
    }
}

impl Drop for ProtectWatch {
    fn drop(&mut self) {
        // Closing the pipe's write end wakes the thread for its last sweep.
        drop(self.stop.take());
        if let Some(swept) = self.swept.take() {
            // An error is the thread gone without sending (a panic): nothing to wait for.
            let _ = swept.recv();
        }
    }
}

/// The thread: wait for events or the stop pipe; sweep after every batch of events.
fn watch(state: &mut State, stop: &OwnedFd) {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let Ok(inotify_fd) = state.inotify.try_clone() else {
        return;
    };
    loop {
        let mut fds = [
            PollFd::new(&inotify_fd, PollFlags::IN),
            PollFd::new(stop, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => return,
        }
        if !fds[1].revents().is_empty() {
            return;
        }
        // Drain what is there. The events' names are not relied on (every target is looked
        // at); a dropped watch is forgotten.
        let mut reader = inotify::Reader::new(&inotify_fd, &mut buf);
        loop {
            match reader.next() {
                Ok(event) => {
                    if event.events().contains(inotify::ReadFlags::IGNORED) {
                        state.watches.remove(&event.wd());
                    }
                }
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => break,
            }
        }
        if let Err(e) = state.sweep() {
            tracing::warn!(error = %e, "protected paths: a sweep failed");
        }
    }
}

impl State {
    /// Look at every target: remove what exists at it or stands in the way as a
    /// non-directory, and watch the deepest existing directory on its way.
    fn sweep(&mut self) -> io::Result<()> {
        let root = self.root.clone();
        let targets = self.targets.clone();
        for target in &targets {
            self.sweep_one(root.dir().as_fd(), target)?;
        }
        Ok(())
    }

    /// One target, looked at again whenever a watch was just added: what was made in a
    /// directory before its watch existed (`mkdir -p deploy && echo > deploy/run.sh`) raised
    /// no event, so the second look is what finds it. Bounded: each pass that asks for another
    /// adds a watch, and the watches are bounded.
    fn sweep_one(&mut self, root: BorrowedFd<'_>, target: &Path) -> io::Result<()> {
        for _ in 0..=MAX_WATCHES {
            if !self.sweep_one_pass(root, target)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// One look at `target`; `true` when a new watch was added (look again).
    fn sweep_one_pass(&mut self, root: BorrowedFd<'_>, target: &Path) -> io::Result<bool> {
        let parts: Vec<&OsStr> = target.iter().collect();
        let mut dir: OwnedFd = open_dir(root, Path::new(""))?;
        let mut at = PathBuf::new();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            match rustix::fs::statat(&dir, *part, AtFlags::SYMLINK_NOFOLLOW) {
                Err(Errno::NOENT) => {
                    // The deepest existing directory on the way: watched.
                    return self.watch_dir(&dir);
                }
                Err(e) => return Err(e.into()),
                Ok(st) => {
                    let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
                    if last || !is_dir {
                        tracing::info!(
                            path = %at.join(part).display(),
                            "protected paths: removed what a sandboxed run made"
                        );
                        return match confine_beneath::remove_entry_tree(&dir, part, MAX_REMOVED) {
                            Ok(()) => self.watch_dir(&dir),
                            Err(e) => Err(e),
                        };
                    }
                    at.push(part);
                    dir = match rustix::fs::openat(
                        &dir,
                        *part,
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        rustix::fs::Mode::empty(),
                    ) {
                        Ok(fd) => fd,
                        // Gone or swapped meanwhile: the next event looks again.
                        Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(false),
                        Err(e) => return Err(e.into()),
                    };
                }
            }
        }
        Ok(false)
    }

    /// Watch the directory `dir` for names made or moved in, once; `true` when the watch is
    /// new.
    fn watch_dir(&mut self, dir: &OwnedFd) -> io::Result<bool> {
        let id = confine_beneath::FileId::of_fd(dir)?;
        if self.watches.values().any(|w| *w == id) {
            return Ok(false);
        }
        if self.watches.len() >= MAX_WATCHES {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        // The descriptor's own inode, whatever its path names now.
        let proc_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(dir));
        let wd = inotify::add_watch(
            &self.inotify,
            OsStr::from_bytes(proc_path.as_bytes()),
            WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::ONLYDIR,
        )?;
        self.watches.insert(wd, id);
        Ok(true)
    }
}

/// `rel` beneath `root` as an `O_PATH` directory handle, no symlink followed.
fn open_dir(root: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    confine_beneath::open_beneath(
        root,
        rel,
        OFlags::PATH | OFlags::DIRECTORY,
        Symlinks::Refuse,
    )
}
