//! Descriptors passed over a Unix socket pair (`SCM_RIGHTS`): one message of a tag byte and
//! at most [`MAX_FDS`] descriptors. The forked helpers that make a run's network namespace
//! and the sandbox's tmpfs send what they made this way; the server receives it.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

/// The most descriptors one message carries.
pub(crate) const MAX_FDS: usize = 3;

/// Send `tag` with `fds` (at most [`MAX_FDS`], else `ENOBUFS`). Stack buffers only, so a
/// forked child of a multi-threaded process may call it.
pub(crate) fn send<'a>(
    socket: BorrowedFd<'_>,
    tag: u8,
    fds: impl IntoIterator<Item = BorrowedFd<'a>>,
) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut borrowed = [socket; MAX_FDS];
    let mut n = 0;
    for fd in fds {
        if n == MAX_FDS {
            return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
        }
        borrowed[n] = fd;
        n += 1;
    }
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if n > 0 && !control.push(SendAncillaryMessage::ScmRights(&borrowed[..n])) {
        return Err(io::Error::from_raw_os_error(libc::ENOBUFS));
    }
    let tag = [tag];
    rustix::net::sendmsg(
        socket,
        &[io::IoSlice::new(&tag)],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// The message sent: its tag and descriptors, in the order sent (close-on-exec). A peer that
/// closed without sending is `UnexpectedEof`.
pub(crate) fn receive(socket: BorrowedFd<'_>) -> io::Result<(u8, Vec<OwnedFd>)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut tag = [0u8];
    let got = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [io::IoSliceMut::new(&mut tag)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other?,
        }
    };
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got.bytes == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok((tag[0], fds))
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn a_tag_and_descriptors_arrive_in_order_and_a_closed_peer_is_eof() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let one = tempfile::tempfile().unwrap();
        let two = tempfile::tempfile().unwrap();
        send(a.as_fd(), 7, [one.as_fd(), two.as_fd()]).unwrap();
        let (tag, fds) = receive(b.as_fd()).unwrap();
        assert_eq!(tag, 7);
        let id = |fd: BorrowedFd<'_>| {
            let st = rustix::fs::fstat(fd).unwrap();
            (st.st_dev, st.st_ino)
        };
        let got: Vec<_> = fds.iter().map(|fd| id(fd.as_fd())).collect();
        assert_eq!(got, vec![id(one.as_fd()), id(two.as_fd())]);
        let three = [one.as_fd(), two.as_fd(), one.as_fd()];
        send(a.as_fd(), 3, three).unwrap();
        let (tag, fds) = receive(b.as_fd()).unwrap();
        assert_eq!((tag, fds.len()), (3, MAX_FDS), "the bound itself");
        let four = [one.as_fd(), two.as_fd(), one.as_fd(), two.as_fd()];
        assert_eq!(
            send(a.as_fd(), 1, four).unwrap_err().raw_os_error(),
            Some(libc::ENOBUFS),
            "one over the bound"
        );
        send(a.as_fd(), 0, []).unwrap();
        let (tag, fds) = receive(b.as_fd()).unwrap();
        assert_eq!((tag, fds.len()), (0, 0));
        drop(a);
        assert_eq!(
            receive(b.as_fd()).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
