//! A reader that cancels a token when its input ends.
//!
//! rmcp notices end of input and then waits up to five seconds for running handlers to answer
//! before it cancels them. A client that closes our stdin is gone, so the server cancels every
//! running call the moment the input ends: a `node_process` child dies at once instead of
//! running on towards its time bound.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// Wraps `R`; a read that reports end of input (or fails) cancels `token`.
#[derive(Debug)]
pub struct CancelOnEof<R> {
    inner: R,
    token: CancellationToken,
}

impl<R> CancelOnEof<R> {
    /// Watch `inner`, cancel `token` at its end.
    pub fn new(inner: R, token: CancellationToken) -> Self {
        Self { inner, token }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CancelOnEof<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                tracing::info!("end of input: cancelling running calls");
                self.token.cancel();
            }
            Poll::Ready(Err(e)) => {
                tracing::warn!(error = %e, "input failed: cancelling running calls");
                self.token.cancel();
            }
            _ => {}
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn eof_cancels_the_token_only_at_the_end() {
        let token = CancellationToken::new();
        let mut reader = CancelOnEof::new(&b"line\n"[..], token.clone());
        let mut buf = [0u8; 3];
        reader.read_exact(&mut buf).await.unwrap();
        assert!(!token.is_cancelled(), "a partial read is not the end");
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"e\n");
        assert!(token.is_cancelled());
    }
}
