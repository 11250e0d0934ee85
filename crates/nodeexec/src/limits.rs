//! Resource limits lowered before `exec`: one implementation for the run's own bounds
//! (`RLIMIT_DATA`, `RLIMIT_NPROC`: [`Command::max_memory`](crate::Command::max_memory),
//! [`Command::max_processes`](crate::Command::max_processes)) and the sandbox's
//! (`RLIMIT_AS`, `RLIMIT_NOFILE`, `RLIMIT_DATA`).
//!
//! rustix's `getrlimit` and `setrlimit` are used: on Linux they are the raw `prlimit64`
//! system call on values on the stack (no allocation, no lock), so they may run in the child
//! between `fork` and `exec`.

use std::io;

pub(crate) use rustix::process::Resource;
use rustix::process::Rlimit;

/// Set both the soft and the hard limit of `resource` to `value` (`u64::MAX`: unlimited), or
/// to the current hard limit if that is lower (raising a hard limit would need
/// `CAP_SYS_RESOURCE`). Both alike, so the program cannot raise the soft limit again.
/// Async-signal-safe.
pub(crate) fn lower(resource: Resource, value: u64) -> io::Result<()> {
    let hard = rustix::process::getrlimit(resource).maximum;
    // `None` is unlimited in rustix's terms.
    let wanted = (value != u64::MAX).then_some(value);
    let value = match (wanted, hard) {
        (Some(wanted), Some(hard)) => Some(wanted.min(hard)),
        (wanted, hard) => wanted.or(hard),
    };
    rustix::process::setrlimit(
        resource,
        Rlimit {
            current: value,
            maximum: value,
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On this test process's POSIX message-queue limit, which nothing here uses: the limit
    /// is lowered (soft and hard alike), never raised past the hard limit, and an unlimited
    /// request keeps the hard limit.
    #[test]
    fn lower_sets_soft_and_hard_and_never_raises() {
        let resource = Resource::Msgqueue;
        let limit = |r| {
            let l = rustix::process::getrlimit(r);
            (l.current, l.maximum)
        };
        lower(resource, 4096).unwrap();
        assert_eq!(limit(resource), (Some(4096), Some(4096)));
        lower(resource, 8192).unwrap();
        assert_eq!(limit(resource), (Some(4096), Some(4096)), "never raised");
        lower(resource, u64::MAX).unwrap();
        assert_eq!(
            limit(resource),
            (Some(4096), Some(4096)),
            "unlimited keeps it"
        );
        lower(resource, 1024).unwrap();
        assert_eq!(limit(resource), (Some(1024), Some(1024)));
    }
}
