//! Standard input and output as async halves driven by the IO reactor where they allow it.
//!
//! Agent hosts start stdio servers with pipes: FIFOs from most, but Node.js hosts (its
//! `child_process`, so the official TypeScript SDK) hand over Unix socket pairs. rmcp's
//! `stdio_pipes` runs FIFOs on the reactor and falls back to tokio's blocking stdin and stdout
//! for everything else, which costs two thread hand-offs per message. Here a socket pair is
//! served on the reactor too: stdin and stdout are duplicated, set non-blocking and wrapped as
//! tokio `UnixStream`s. That is done only when standard error is not the same socket, so that
//! a write to stderr never meets a non-blocking descriptor. Anything else (FIFOs, a terminal,
//! a file, `/dev/null`) goes to rmcp's `stdio_pipes`.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use tokio::io::{AsyncRead, AsyncWrite};

/// The reading half.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;
/// The writing half.
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// Standard input and output for the transport.
pub fn stdio() -> (Input, Output) {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    if let (Some(input), Some(output)) = (
        socket(stdin.as_fd(), None),
        socket(stdout.as_fd(), Some(stderr.as_fd())),
    ) {
        tracing::debug!("stdio: Unix socket pair on the reactor");
        return (Box::new(input), Box::new(output));
    }
    let (input, output) = rmcp::transport::io::stdio_pipes();
    (Box::new(input), Box::new(output))
}

/// A non-blocking duplicate of `fd` when it is a socket (and not the same socket as `other`).
fn socket(fd: BorrowedFd<'_>, other: Option<BorrowedFd<'_>>) -> Option<tokio::net::UnixStream> {
    let identity = |fd: BorrowedFd<'_>| -> Option<(bool, u64, u64)> {
        let file = File::from(fd.try_clone_to_owned().ok()?);
        let meta = file.metadata().ok()?;
        Some((meta.file_type().is_socket(), meta.dev(), meta.ino()))
    };
    let (is_socket, dev, ino) = identity(fd)?;
    if !is_socket {
        return None;
    }
    if let Some(other) = other
        && identity(other).is_some_and(|(_, d, i)| (d, i) == (dev, ino))
    {
        return None;
    }
    let owned: OwnedFd = fd.try_clone_to_owned().ok()?;
    let stream = std::os::unix::net::UnixStream::from(owned);
    stream.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(stream).ok()
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn socket_pairs_are_wrapped_and_other_files_are_not() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut wrapped = socket(a.as_fd(), None).expect("a socket is wrapped");
        let mut peer = tokio::net::UnixStream::from_std({
            b.set_nonblocking(true).unwrap();
            b
        })
        .unwrap();
        peer.write_all(b"ping\n").await.unwrap();
        let mut buf = [0u8; 5];
        wrapped.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping\n");

        assert!(
            socket(a.as_fd(), Some(a.as_fd())).is_none(),
            "not when shared with stderr"
        );
        let file = tempfile::tempfile().unwrap();
        assert!(
            socket(file.as_fd(), None).is_none(),
            "a file is not a socket"
        );
    }
}
