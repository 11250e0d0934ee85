//! The `confine` binary: wires the crates to the command line. Each subcommand lives in
//! `src/cli/<name>.rs`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// Coding tools for LLM agents that cannot reach outside one directory.
#[derive(Debug, Parser)]
#[command(name = "confine", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the tools to an agent over the Model Context Protocol on stdio.
    Mcp(cli::mcp::Args),
    /// Execute tool calls read as JSON Lines from stdin, one result line per call.
    Call(cli::call::Args),
    /// Grade resolve_in_sandbox against a case file; prints [{"path", "ok"}, …].
    Guard(cli::guard::Args),
    /// Grade FileJail against a case file; prints [{"op", "path", "ok"}, …].
    Jail(cli::jail::Args),
    /// Report what this machine gives the tools: Landlock and its ABI, the sandbox, the
    /// process containment, the Node.js found.
    Doctor(cli::doctor::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Mcp(args) => cli::mcp::run(args),
        Command::Call(args) => cli::call::run(args),
        Command::Guard(args) => cli::guard::run(args),
        Command::Jail(args) => cli::jail::run(args),
        Command::Doctor(args) => cli::doctor::run(args),
    }
}
