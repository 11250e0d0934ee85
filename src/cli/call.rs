//! `confine call`: JSON Lines in, one flushed result line out per call, in order.
//!
//! Each input line is `{"id": any, "name": string, "arguments": object}`; each output line is
//! `{"id": <same>, "isError": bool, "content": <record>}`. A line that is not such an object
//! answers `{"id": null, "isError": true, "content": {"error": {"code": "INVALID_TOOL_CALL",
//! "message": "INVALID_TOOL_CALL"}}}` and the stream goes on. Blank lines are skipped. SIGINT or
//! SIGTERM cancels the running call (its processes die before we exit, status 130).
//!
//! The whole workspace tool set is served by default; `--read-only` and `--tools a,b` narrow
//! it as for `confine mcp`.

use std::io::Write;
use std::process::ExitCode;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::AsyncBufReadExt;
use tokio_util::sync::CancellationToken;
use tools::{ToolCall, ToolRegistry, execute_tool_call};

use super::common::ToolArgs;

/// Arguments of `confine call`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub tools: ToolArgs,
}

#[derive(Deserialize)]
struct Line {
    // Raw, so the id is echoed exactly as given (an integer beyond 64 bits included).
    id: Box<RawValue>,
    name: String,
    arguments: Box<RawValue>,
}

/// One output line: `{"id", "isError", "content"}` in that order.
#[derive(Serialize)]
struct Answer<'a> {
    id: &'a RawValue,
    #[serde(rename = "isError")]
    is_error: bool,
    content: Value,
}

/// The call one input line holds, or the `INVALID_TOOL_CALL` line to answer.
fn parse_line(line: &str) -> Result<(Box<RawValue>, ToolCall), Value> {
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
        id: parsed.id.get().to_owned(),
        name: parsed.name,
        arguments: parsed.arguments,
    };
    Ok((parsed.id, call))
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
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

    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        let read = tokio::select! {
            read = stdin.read_until(b'\n', &mut bytes) => read,
            _ = cancel.cancelled() => return ExitCode::from(130),
        };
        match read {
            Ok(0) => return ExitCode::SUCCESS,
            Ok(_) => {}
            Err(_) => return super::common::usage("stdin cannot be read"),
        }
        // A line that is not UTF-8 is not a call: it is answered, and the stream goes on.
        let line = std::str::from_utf8(&bytes).unwrap_or("\u{0}");
        if line.trim().is_empty() {
            continue;
        }
        let out = match parse_line(line.trim_end_matches(['\n', '\r'])) {
            Err(invalid) => invalid.to_string(),
            Ok((id, call)) => match execute_tool_call(&registry, &call, &cancel).await {
                Ok(result) => serde_json::to_string(&Answer {
                    id: &id,
                    is_error: result.is_error,
                    content: result.record(),
                })
                .expect("an answer serializes"),
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
