//! C's PID namespace: a bare one where allowed, else one owned by a user namespace of the
//! run's own with C's ids mapped to themselves.
//!
//! Invariants: the mode gained is reported as flags, never guessed; a refused namespace is
//! not an error (the run goes on in a weaker mode and says which).

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;

use super::*;

/// C, where asked for a PID namespace: `unshare(CLONE_NEWPID)`, or where that is refused
/// (no `CAP_SYS_ADMIN`) `unshare(CLONE_NEWUSER | CLONE_NEWPID)` with our own ids mapped to
/// themselves. Returns the `MODE_*` flags gained (none where both are refused).
/// `in_shared_user` (C joined the network policy's user namespace, where it holds every
/// capability): skip the bare namespace, so the run still gets a user namespace of its own
/// (nested in that one) and its process bound counts its own processes alone.
#[expect(unsafe_code, reason = "unshare in a forked child")]
pub(super) fn unshare_pid_namespace(in_shared_user: bool) -> io::Result<u8> {
    use rustix::thread::UnshareFlags;
    let (uid, gid) = (rustix::process::geteuid(), rustix::process::getegid());
    // SAFETY: no `CLONE_FILES` (the call's only hazard, a descriptor table other threads
    // stop sharing); C is single-threaded anyway.
    if !in_shared_user && unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWPID) }.is_ok() {
        return Ok(MODE_PID_NAMESPACE);
    }
    // A process that is not dumpable (an embedder that hid its environment) may not open
    // its own `/proc/self/uid_map`: dumpable until the maps are written (nothing of the run
    // exists yet), hidden again by the caller.
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable).ok();
    let both = UnshareFlags::NEWUSER | UnshareFlags::NEWPID;
    // SAFETY: as above.
    if unsafe { rustix::thread::unshare_unsafe(both) }.is_err() {
        return Ok(0);
    }
    // Now in a user namespace with no mapping: map our ids to themselves, or nothing we
    // create would have an owner.
    map_own_ids(uid.as_raw(), gid.as_raw())?;
    Ok(MODE_PID_NAMESPACE | MODE_USER_NAMESPACE)
}

/// C, under the network policy: `setns` into the network's user namespace (where it has one:
/// a process may join a user namespace its own user owns, and holds every capability there
/// then), then into its network namespace. Returns whether a user namespace was joined.
/// Any failure fails the start: the run never goes on with the host's network.
#[expect(unsafe_code, reason = "borrows descriptors P opened for the run")]
pub(super) fn join_network(net: RawFd, user: Option<RawFd>) -> io::Result<bool> {
    use rustix::thread::LinkNameSpaceType;
    let borrow = |fd: RawFd| {
        // SAFETY: descriptors P opened for the run and keeps open until the spawn returns.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
    };
    if let Some(user) = user {
        rustix::thread::move_into_link_name_space(borrow(user), Some(LinkNameSpaceType::User))?;
    }
    rustix::thread::move_into_link_name_space(borrow(net), Some(LinkNameSpaceType::Network))?;
    Ok(user.is_some())
}

/// After `unshare(CLONE_NEWUSER)`: map our own user and group ids (of the parent namespace)
/// to themselves, which an unprivileged process may do for itself. `setgroups` must be denied
/// first for the group map. Async-signal-safe.
pub(crate) fn map_own_ids(uid: u32, gid: u32) -> io::Result<()> {
    let mut line = [0u8; 40];
    write_file(c"/proc/self/uid_map", id_map_line(&mut line, uid))?;
    // Older kernels have no setgroups file; the gid map then works without it.
    write_file(c"/proc/self/setgroups", b"deny").ok();
    write_file(c"/proc/self/gid_map", id_map_line(&mut line, gid))
}

/// `"<id> <id> 1"` in `buf`.
pub(super) fn id_map_line(buf: &mut [u8; 40], id: u32) -> &[u8] {
    let mut digits = [0u8; 10];
    let mut n = 0;
    let mut v = id;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = 0;
    for _ in 0..2 {
        for i in (0..n).rev() {
            buf[len] = digits[i];
            len += 1;
        }
        buf[len] = b' ';
        len += 1;
    }
    buf[len] = b'1';
    &buf[..len + 1]
}

/// Write `bytes` to the file at `path` in one `write` (async-signal-safe).
pub(super) fn write_file(path: &CStr, bytes: &[u8]) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    if rustix::io::write(&fd, bytes)? != bytes.len() {
        return Err(io::ErrorKind::WriteZero.into());
    }
    Ok(())
}
