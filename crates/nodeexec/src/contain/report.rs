//! The report pipe from the child chain to P: the messages, their writing (child side) and
//! their parsing (P's side).
//!
//! Invariants: each message is at most five bytes, written with one `write`, so it is atomic
//! on a pipe whoever of C, G and N writes it; a reader that has part of a message keeps it
//! for the next read ([`parse_messages`] returns what it consumed).

use std::io;
use std::os::fd::BorrowedFd;

use rustix::io::Errno;

/// C: which containment it set up; one byte of [`MODE_CGROUP`]... flags follows.
pub(crate) const MSG_MODE: u8 = b'M';
/// G (or C without a namespace): N was reaped; four bytes of wait status follow (native endian).
pub(crate) const MSG_STATUS: u8 = b'S';
/// G or N: N could not be started (creating it, its setup or its `exec` failed); four bytes
/// of errno follow.
pub(crate) const MSG_START_FAILED: u8 = b'E';

/// Mode flag: N is in the run's cgroup.
pub(crate) const MODE_CGROUP: u8 = 1;
/// Mode flag: N is in a PID namespace of its own.
pub(crate) const MODE_PID_NAMESPACE: u8 = 2;
/// Mode flag: that namespace is owned by a user namespace of its own.
pub(crate) const MODE_USER_NAMESPACE: u8 = 4;
/// Mode flag: C is the child subreaper of the run and sweeps its descendants at the end.
pub(crate) const MODE_SUBREAPER: u8 = 8;

/// The error number to report for `e` (`EINVAL` where it has none, as std's `Command`
/// reports a pre-exec step's error).
pub(super) fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EINVAL)
}

/// Write one message to the report pipe, if there is one (a message of at most five bytes is
/// atomic on a pipe).
pub(super) fn send(fd: Option<BorrowedFd<'_>>, bytes: &[u8]) {
    let Some(fd) = fd else { return };
    while rustix::io::write(fd, bytes) == Err(Errno::INTR) {}
}

/// A message of a tag and a 32-bit value.
pub(super) fn send_value(fd: Option<BorrowedFd<'_>>, tag: u8, value: i32) {
    let v = value.to_ne_bytes();
    send(fd, &[tag, v[0], v[1], v[2], v[3]]);
}

/// A message of the report pipe, parsed in the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Message {
    /// `MODE_*` flags.
    Mode(u8),
    Status(i32),
    StartFailed(i32),
}

/// Parse as many whole messages as `bytes` holds; returns them and the bytes consumed.
pub(crate) fn parse_messages(bytes: &[u8]) -> (Vec<Message>, usize) {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let tag = bytes[i];
        let value = || -> Option<i32> {
            let b = bytes.get(i + 1..i + 5)?;
            Some(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (message, len) = match tag {
            MSG_MODE => match bytes.get(i + 1) {
                None => break,
                Some(&mode) => (Message::Mode(mode), 2),
            },
            MSG_STATUS | MSG_START_FAILED => match value() {
                None => break,
                Some(v) if tag == MSG_STATUS => (Message::Status(v), 5),
                Some(v) => (Message::StartFailed(v), 5),
            },
            // Unknown byte: nothing of ours writes it; skip.
            _ => {
                i += 1;
                continue;
            }
        };
        out.push(message);
        i += len;
    }
    (out, i)
}
