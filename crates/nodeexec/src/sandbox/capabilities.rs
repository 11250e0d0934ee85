//! Dropping every capability before `exec`.
//!
//! Hand-written (`capset` and `PR_CAPBSET_DROP` are two system calls) because the child may
//! only make raw system calls; rustix's `capset` wrapper is not in the features this crate
//! uses and would be no simpler.

use std::io;

/// The highest capability number tried when emptying the bounding set (the kernel refuses
/// numbers above its last with `EINVAL`, which ends the loop).
const LAST_CAPABILITY: libc::c_ulong = 63;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empty the bounding set where permitted (`CAP_SETPCAP`), then set the effective, permitted
/// and inheritable sets to nothing (always permitted); the ambient set follows.
///
/// # Safety
///
/// Async-signal-safe; for the child between fork and exec.
#[expect(unsafe_code, reason = "prctl and capset between fork and exec")]
pub(super) unsafe fn drop_all() -> io::Result<()> {
    // SAFETY: prctl and capset on this process with stack values of the kernel's layout.
    unsafe {
        for cap in 0..=LAST_CAPABILITY {
            // EPERM (no CAP_SETPCAP: then we hold nothing to drop from it either) and EINVAL
            // (past the kernel's last capability) are both fine.
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                break;
            }
        }
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let none = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, none.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
