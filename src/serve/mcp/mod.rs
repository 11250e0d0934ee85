//! The MCP server over a tool registry ([`ConfineServer`]) and its stdio transport ([`Gate`]:
//! the bounded line framing, the triage of malformed lines, the in-flight bound).

pub(crate) mod eof;
pub mod gate;
mod instructions;
pub mod server;
pub(crate) mod stdio;
pub(crate) mod triage;

pub use gate::{Gate, Limits};
pub use server::{ConfineServer, Setting};

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

/// Serve until end of input or a signal; both end with status 0.
pub(crate) async fn serve_stdio(server: ConfineServer) -> ExitCode {
    use rmcp::ServiceExt;

    let shutdown = server.shutdown_token();
    let signalled = CancellationToken::new();
    // Watched from the start, so that a signal during the initialization ends the server too.
    let watcher = tokio::spawn({
        let signalled = signalled.clone();
        let calls = shutdown.clone();
        async move {
            crate::cli::common::ending_signal().await;
            tracing::info!("signal received: cancelling running calls");
            signalled.cancel();
            calls.cancel();
        }
    });
    let (stdin, stdout) = stdio::stdio();
    // End of input cancels every running call at once, instead of after rmcp's drain delay.
    let stdin = eof::CancelOnEof::new(stdin, shutdown.clone());
    let transport = gate::Gate::new(stdin, stdout, gate::Limits::SERVED, signalled.clone());
    let running = tokio::select! {
        served = server.serve(transport) => served,
        () = signalled.cancelled() => return ExitCode::SUCCESS,
    };
    let running = match running {
        Ok(running) => running,
        // The input ended before the session began: nothing to serve, a clean end.
        Err(e) if shutdown.is_cancelled() => {
            tracing::info!(error = %e, "end of input before initialization");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            tracing::error!(error = %e, "MCP initialization failed");
            shutdown.cancel();
            return ExitCode::from(1);
        }
    };
    let stop = running.cancellation_token();
    let on_signal = tokio::spawn({
        let signalled = signalled.clone();
        async move {
            signalled.cancelled().await;
            stop.cancel();
        }
    });
    let quit = running.waiting().await;
    watcher.abort();
    on_signal.abort();
    shutdown.cancel();
    tracing::info!(?quit, "MCP server stopped");
    ExitCode::SUCCESS
}
