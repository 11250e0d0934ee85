//! Filesystem work off the async worker threads.
//!
//! Opening, reading, `fsync` and `rename` block the thread that calls them, for as long as the
//! disk takes. Run on a worker thread of a multi-thread runtime (an MCP server with many calls
//! in flight) they would stall every other call that worker serves; so there each tool hands
//! its filesystem work to tokio's blocking pool and awaits it. The pool grows with the calls
//! in flight (up to tokio's bound) and idle threads go away after a while.
//!
//! On a current-thread runtime the work runs inline: such a runtime is chosen to run one call
//! at a time (`confine call`), where a hand-off to another thread protects nothing and costs
//! two thread wake-ups per step, which a loaded machine turns into milliseconds.

use tokio::runtime::{Handle, RuntimeFlavor};

use crate::error::{CallError, Cancelled};

/// Run `work` on the blocking pool (on a multi-thread runtime; inline otherwise) and await it.
/// A panic in `work` is resumed here; a runtime shutting down (the task never ran to its end)
/// is a cancellation.
pub(crate) async fn off_reactor<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CallError> + Send + 'static,
) -> Result<T, CallError> {
    if !Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) {
        return work();
    }
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(Cancelled.into()),
    }
}
