//! Resource limits lowered before `exec`.

use std::io;

#[cfg(target_env = "gnu")]
pub(super) type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub(super) type Resource = libc::c_int;

/// Set both the soft and the hard limit of `resource` to `value`, or to the current hard
/// limit if that is lower (raising a hard limit would need `CAP_SYS_RESOURCE`).
///
/// # Safety
///
/// Async-signal-safe; for the child between fork and exec.
#[expect(unsafe_code, reason = "getrlimit and setrlimit between fork and exec")]
pub(super) unsafe fn lower(resource: Resource, value: u64) -> io::Result<()> {
    // SAFETY: getrlimit/setrlimit on this process with a stack value.
    unsafe {
        let mut current: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(resource, &mut current) != 0 {
            return Err(io::Error::last_os_error());
        }
        let value = value.min(current.rlim_max);
        let new = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        if libc::setrlimit(resource, &new) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
