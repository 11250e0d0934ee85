//! `confine call`: JSON Lines in, one flushed result line out per call, in order (SPEC section 9).
//!
//! Each input line is `{"id": any, "name": string, "arguments": object}`; each output line is
//! `{"id": <same>, "isError": bool, "content": <record>}`. A line that is not such an object
//! answers `{"id": null, "isError": true, "content": {"error": {"code": "INVALID_TOOL_CALL",
//! "message": "INVALID_TOOL_CALL"}}}` and the stream goes on. Blank lines are skipped. SIGINT or
//! SIGTERM cancels the running call (its processes die before we exit, status 130).

use std::io::Write;
use std::process::ExitCode;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;
use tools::{ToolCall, ToolRegistry, execute_tool_call};

use super::common::{ToolArgs, unusable};

/// Arguments of `confine call`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub tools: ToolArgs,
}

#[derive(Deserialize)]
struct Line {
    id: Value,
    name: String,
    arguments: Box<RawValue>,
}

/// The answer to one input line.
pub fn answer_line(line: &str) -> Result<(Value, ToolCall), Value> {
    let invalid = || {
        serde_json::json!({
            "id": null,
            "isError": true,
            "content": {"error": {"code": "INVALID_TOOL_CALL", "message": "INVALID_TOOL_CALL"}},
        })
    };
    let parsed: Line = serde_json::from_str(line).map_err(|_| invalid())?;
    if !line.trim_start().starts_with('{') || !parsed.arguments.get().starts_with('{') {
        return Err(invalid());
    }
    let call = ToolCall {
        id: parsed.id.to_string(),
        name: parsed.name,
        arguments: parsed.arguments,
    };
    Ok((parsed.id, call))
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    let registry = match tools::create_coding_tools(&args.tools.root, args.tools.node_options()) {
        Ok(r) => r,
        Err(e) => return unusable(&e),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return super::common::usage("cannot start the async runtime"),
    };
    runtime.block_on(serve(registry))
}

async fn serve(registry: ToolRegistry) -> ExitCode {
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
        on_signal.cancel();
    });

    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        let line = tokio::select! {
            line = lines.next_line() => line,
            _ = cancel.cancelled() => return ExitCode::from(130),
        };
        let line = match line {
            Ok(Some(line)) => line,
            Ok(None) => return ExitCode::SUCCESS,
            Err(_) => return super::common::usage("stdin is not readable UTF-8 text"),
        };
        if line.trim().is_empty() {
            continue;
        }
        let out = match answer_line(&line) {
            Err(invalid) => invalid,
            Ok((id, call)) => match execute_tool_call(&registry, &call, &cancel).await {
                Ok(result) => serde_json::json!({
                    "id": id,
                    "isError": result.is_error,
                    "content": result.record(),
                }),
                Err(_cancelled) => return ExitCode::from(130),
            },
        };
        let mut stdout = std::io::stdout().lock();
        if writeln!(stdout, "{out}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            // The reader went away: nothing more can be answered.
            return ExitCode::SUCCESS;
        }
    }
}
