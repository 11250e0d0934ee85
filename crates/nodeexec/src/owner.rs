//! Which process owns a left-over resource, by identity rather than by pid alone.
//!
//! A cgroup or a temporary file named after the process that made it can be removed once
//! that process is gone. A pid alone cannot say so: pids are reused, and a later, unrelated
//! process with the same pid would keep the resource forever, or worse, a resource of a live
//! process could be taken for stale once its pid names another. So an [`Owner`] is the pid
//! *and* the process's start time (field 22 of `/proc/<pid>/stat`, in clock ticks since
//! boot): the pair names one process for the life of the system.

use std::fmt;
use std::sync::OnceLock;

/// A process, named by its pid and its start time; written `<pid>-<start>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    pid: u32,
    start: u64,
}

impl Owner {
    /// This process.
    pub fn current() -> Self {
        static CURRENT: OnceLock<Owner> = OnceLock::new();
        *CURRENT.get_or_init(|| {
            let pid = std::process::id();
            Owner {
                pid,
                start: start_time("self").unwrap_or(0),
            }
        })
    }

    /// Parse `<pid>-<start>` (the whole of `text`).
    pub fn parse(text: &str) -> Option<Self> {
        let (pid, start) = text.split_once('-')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(pid) || !digits(start) {
            return None;
        }
        Some(Owner {
            pid: pid.parse().ok()?,
            start: start.parse().ok()?,
        })
    }

    /// The pid.
    pub fn pid(self) -> u32 {
        self.pid
    }

    /// Whether this very process still exists: its pid is in use *and* by a process that
    /// started when this one did. (A zombie still counts: it has not been reaped.) Processes
    /// are looked up in this process's `/proc`, so embedders that share resources are assumed
    /// to share a PID namespace; across namespaces a live owner may look gone.
    pub fn is_alive(self) -> bool {
        self == Self::current() || start_time(&self.pid.to_string()) == Some(self.start)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.pid, self.start)
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`.
fn start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ...": the name may hold anything, so count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_is_alive_and_round_trips() {
        let me = Owner::current();
        assert_eq!(me.pid(), std::process::id());
        assert!(me.start > 0);
        assert_eq!(Owner::parse(&me.to_string()), Some(me));
        assert!(me.is_alive());
    }

    #[test]
    fn another_start_time_is_another_process() {
        let me = Owner::current();
        let reused = Owner {
            pid: me.pid,
            start: me.start + 1,
        };
        assert!(!reused.is_alive());
        // The parent is alive (the test harness), with its own start time.
        let parent = std::os::unix::process::parent_id();
        let parent = Owner {
            pid: parent,
            start: start_time(&parent.to_string()).unwrap(),
        };
        assert!(parent.is_alive());
        // A pid above the largest pid_max cannot exist.
        assert!(!Owner::parse("4194305-1").unwrap().is_alive());
    }

    #[test]
    fn parse_refuses_anything_else() {
        for bad in ["", "1", "1-", "-1", "a-1", "1-b", "1-2-3", "+1-2", "1- 2"] {
            assert_eq!(Owner::parse(bad), None, "{bad}");
        }
    }
}
