//! The waiter's sweep: SIGKILL every descendant of this process, found through `/proc`.
//!
//! The waiter is the child subreaper of the run (`PR_SET_CHILD_SUBREAPER`): an orphan of the
//! run, whatever session, group or cgroup it moved to, is re-parented to the waiter rather
//! than to the system's init, so every process the run started stays a descendant of the
//! waiter for as long as the waiter lives. [`kill_descendants`] scans `/proc` for processes
//! whose parent is the waiter or one already killed, SIGKILLs each as it is found, and scans
//! again until a scan finds nothing new. A process is killed before its own children are
//! looked for, and a process with a fatal signal pending can no longer complete a `fork`, so
//! a fork racing the scan is either seen by a later scan or never happens. The waiter reaps
//! nothing during a sweep, so no pid it has killed can be reused by an unrelated process
//! meanwhile (a killed process's own killed children stay zombies until the waiter reaps
//! them after they are re-parented to it).
//!
//! `/proc/<pid>/task/<tid>/children` would be cheaper but needs `CONFIG_PROC_CHILDREN`, which
//! many kernels lack (this machine's does): the scan of `/proc` works everywhere `/proc` is
//! mounted. The waiter is a fork of a multi-threaded process, so this allocates nothing:
//! rustix's `open`, `getdents64` (its `RawDir`, over a buffer on the stack), `read` and `kill`
//! are raw system calls on Linux, and no `unsafe` is needed.

use std::mem::MaybeUninit;

use rustix::fs::{Mode, OFlags, RawDir};
use rustix::process::{Pid, Signal};

use crate::privilege::{parse_usize, read_file};

/// How many killed pids one sweep remembers (as parents to look for); past that, the
/// children of the later ones are found by a later sweep, once re-parented to the waiter.
const REMEMBERED: usize = 4096;

/// SIGKILL every descendant of `me` (the calling process); returns how many were signalled.
/// Async-signal-safe.
///
/// The caller must reap none of its children while this runs (it does not return to the
/// caller until the scan is over, so that holds for a single thread): a pid is signalled only
/// while it is known to be an unreaped descendant, which the kernel cannot give to another
/// process.
pub(crate) fn kill_descendants(me: Pid) -> usize {
    let me = me.as_raw_pid();
    let mut killed = [0 as libc::pid_t; REMEMBERED];
    let mut count = 0usize;
    let mut signalled = 0usize;
    loop {
        let mut added = false;
        let each = |pid: libc::pid_t, ppid: libc::pid_t| {
            if pid == me || killed[..count].contains(&pid) {
                return;
            }
            if ppid == me || killed[..count].contains(&ppid) {
                if let Some(pid) = Pid::from_raw(pid) {
                    rustix::process::kill_process(pid, Signal::KILL).ok();
                }
                signalled += 1;
                added = true;
                if count < REMEMBERED {
                    killed[count] = pid;
                    count += 1;
                }
            }
        };
        if !scan(each) || !added {
            return signalled;
        }
    }
}

/// Call `each(pid, ppid)` for every process listed in `/proc`; false when `/proc` cannot be
/// read. Async-signal-safe.
fn scan(mut each: impl FnMut(libc::pid_t, libc::pid_t)) -> bool {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(dir) = rustix::fs::open(c"/proc", flags, Mode::empty()) else {
        return false;
    };
    let mut buf = [MaybeUninit::<u8>::uninit(); 8192];
    let mut entries = RawDir::new(dir, &mut buf);
    while let Some(Ok(entry)) = entries.next() {
        let name = entry.file_name().to_bytes();
        if let Some(pid) = parse_usize(name)
            && let Some(ppid) = parent_of(name)
        {
            each(pid as libc::pid_t, ppid);
        }
    }
    true
}

/// The parent pid of the process whose decimal pid is `digits` (field 4 of its `stat`).
fn parent_of(digits: &[u8]) -> Option<libc::pid_t> {
    let mut path = [0u8; 40];
    let prefix = b"/proc/";
    let suffix = b"/stat\0";
    let len = prefix.len() + digits.len() + suffix.len();
    if len > path.len() {
        return None;
    }
    path[..prefix.len()].copy_from_slice(prefix);
    path[prefix.len()..prefix.len() + digits.len()].copy_from_slice(digits);
    path[prefix.len() + digits.len()..len].copy_from_slice(suffix);
    let path = std::ffi::CStr::from_bytes_with_nul(&path[..len]).ok()?;
    let mut stat = [0u8; 512];
    let n = read_file(path, &mut stat)?;
    let text = &stat[..n];
    // "pid (comm) S ppid ...": the command name may hold anything, so parse after the last ')'.
    let close = text.iter().rposition(|&b| b == b')')?;
    let mut fields = text[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let _state = fields.next()?;
    parse_usize(fields.next()?).map(|p| p as libc::pid_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_reads_our_parent() {
        let me = std::process::id().to_string();
        let parent = parent_of(me.as_bytes()).unwrap();
        assert_eq!(parent as u32, std::os::unix::process::parent_id());
        assert_eq!(parent_of(b"0"), None);
    }
}
