//! Progress of a long call, reported while it runs: the embedder (an MCP server, for instance)
//! installs a sink around the call's future with [`with_progress`], and a tool that knows how
//! (today `run_command`) calls it about once a second. Without a sink nothing is reported and
//! nothing is spent.
//!
//! The sink travels as a task-local value rather than as a parameter of [`Tool::execute`], so
//! that the tool trait, and every tool that has nothing to report, stays as it is.
//!
//! [`Tool::execute`]: crate::Tool::execute

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// One report about a running call.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProgressReport {
    /// Time since the call's process started.
    pub elapsed: Duration,
    /// Bytes of output (stdout and stderr together) so far.
    pub output_bytes: u64,
    /// The last line of output so far (without its line end, at most 200 bytes of it).
    pub last_line: String,
}

/// Where reports go: called from the call's own task, so it must be quick (send on a channel).
pub type ProgressSink = Arc<dyn Fn(ProgressReport) + Send + Sync>;

tokio::task_local! {
    static SINK: ProgressSink;
}

/// Run `call` (a tool call's future) with `sink` receiving its progress reports. Every report
/// is made before `call` completes; none after.
pub async fn with_progress<F: Future>(sink: ProgressSink, call: F) -> F::Output {
    SINK.scope(sink, call).await
}

/// The sink of the running call, if its embedder installed one.
pub(crate) fn current_sink() -> Option<ProgressSink> {
    SINK.try_with(Arc::clone).ok()
}
