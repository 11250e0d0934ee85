//! Cancellation on drop: a session request whose response stream the client drops has its
//! call cancelled, as an explicit `notifications/cancelled` would.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame};
use rmcp::transport::streamable_http_server::SessionId;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;

/// A session request's response body that, dropped before its end (the client closed the
/// stream), hands the session a `notifications/cancelled` for the request.
pub(super) struct CancelOnDrop {
    pub(super) inner: BoxBody<Bytes, Infallible>,
    pub(super) ended: bool,
    pub(super) cancel: Option<(Arc<LocalSessionManager>, SessionId, Value)>,
}

impl Body for CancelOnDrop {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.ended || self.inner.is_end_stream() {
            return;
        }
        let Some((sessions, session, id)) = self.cancel.take() else {
            return;
        };
        let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the client closed the request's stream"}});
        let Ok(message) = serde_json::from_value(note) else {
            return;
        };
        tracing::info!("a request's stream was dropped: cancelling its call");
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = sessions.accept_message(&session, message).await;
            });
        }
    }
}
