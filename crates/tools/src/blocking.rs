//! Filesystem work off the async worker threads.
//!
//! Opening, reading, `fsync` and `rename` block the thread that calls them, for as long as the
//! disk takes. Run on a reactor thread they would stall every other call the server is
//! running concurrently (an MCP client may have many in flight); so each tool hands its
//! filesystem work to tokio's blocking pool and awaits it. The pool grows with the calls in
//! flight (up to tokio's bound) and idle threads go away after a while.

use crate::error::{CallError, Cancelled};

/// Run `work` on the blocking pool and await it. A panic in `work` is resumed here; a runtime
/// shutting down (the task never ran to its end) is a cancellation.
pub(crate) async fn off_reactor<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CallError> + Send + 'static,
) -> Result<T, CallError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(Cancelled.into()),
    }
}
