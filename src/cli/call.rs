//! `confine call`: JSON Lines in, one flushed result line out per call, in order.
//!
//! Each input line is `{"id": any, "name": string, "arguments": object}`; each output line is
//! `{"id": <same>, "isError": bool, "content": <record>}`. A line that is not such an object
//! answers `{"id": null, "isError": true, "content": {"error": {"code": "INVALID_TOOL_CALL",
//! "message": "INVALID_TOOL_CALL"}}}` and the stream goes on. A line longer than
//! [`MAX_LINE_BYTES`] (4 MiB, see [`crate::serve::lines`] for why) is answered the same way with the
//! message `LINE_TOO_LONG`, without being read into memory: its bytes are dropped up to the
//! next newline, and the stream goes on. Blank lines are skipped. SIGINT or
//! SIGTERM (or another ending signal, see [`super::common::ending_signal`]) cancels the
//! running call and ends the command with status 0 once its processes are dead, within a
//! second, also while it waits for input.
//!
//! The whole workspace tool set is served by default; `--read-only` and `--tools a,b` narrow
//! it as for `confine mcp`.

use std::io::Write;
use std::process::ExitCode;

use confine_tools::{ToolRegistry, execute_tool_call};
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;

use super::common::ToolArgs;
use crate::serve::callline::{Decoded, LINE_TOO_LONG, answer, decode, invalid};
use crate::serve::lines::{Frame, Framer, MAX_LINE_BYTES};

/// Arguments of `confine call`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub tools: ToolArgs,
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    super::common::hide_environment(&args.tools);
    super::common::init_logging();
    let registry = match args.tools.registry() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return super::common::usage("cannot start the async runtime"),
    };
    let code = runtime.block_on(serve(registry));
    // A signal can end `serve` while a blocking read of stdin is in progress; dropping the
    // runtime would wait for that read, that is for the client's next line. Every call has
    // ended by now, so nothing else is left behind.
    runtime.shutdown_background();
    code
}

async fn serve(registry: ToolRegistry) -> ExitCode {
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        super::common::ending_signal().await;
        on_signal.cancel();
    });

    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut framer = Framer::new(MAX_LINE_BYTES);
    loop {
        let frame = loop {
            let pushed = tokio::select! {
                read = stdin.fill_buf() => match read {
                    Ok([]) => None,
                    Ok(bytes) => Some(framer.push(bytes)),
                    Err(_) => return super::common::usage("stdin cannot be read"),
                },
                _ = cancel.cancelled() => return ExitCode::SUCCESS,
            };
            match pushed {
                None => break framer.finish(),
                Some((taken, frame)) => {
                    stdin.consume(taken);
                    if frame.is_some() {
                        break frame;
                    }
                }
            }
        };
        let bytes = match frame {
            None => return ExitCode::SUCCESS,
            Some(Frame::Line(bytes)) => bytes,
            Some(Frame::Oversized { .. }) => {
                if write_line(&invalid(LINE_TOO_LONG)).is_err() {
                    return ExitCode::SUCCESS;
                }
                continue;
            }
        };
        let out = match decode(&bytes) {
            Decoded::Blank => continue,
            Decoded::Invalid(invalid) => invalid,
            Decoded::Call(id, call) => match execute_tool_call(&registry, &call, &cancel).await {
                Ok(result) => answer(&id, &result),
                Err(_cancelled) => return ExitCode::SUCCESS,
            },
        };
        if write_line(&out).is_err() {
            // The reader went away: nothing more can be answered.
            return ExitCode::SUCCESS;
        }
    }
}

/// Write one answer line and flush it.
fn write_line(line: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}").and_then(|()| stdout.flush())
}
