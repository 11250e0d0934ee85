//! One module per subcommand, plus the options they share.

pub mod call;
pub mod common;
pub mod doctor;
pub mod guard;
pub mod jail;
pub mod mcp;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Mcp(mcp::Args),
    /// Execute tool calls read as JSON Lines from stdin, one result line per call.
    Call(call::Args),
    /// Grade resolve_in_sandbox against a case file; prints [{"path", "ok"}, …].
    Guard(guard::Args),
    /// Grade FileJail against a case file; prints [{"op", "path", "ok"}, …].
    Jail(jail::Args),
    /// Report what this machine gives the tools: Landlock and its ABI, the sandbox, the
    /// process containment, the Node.js found.
    Doctor(doctor::Args),
}

/// Parse the command line and run the subcommand.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Mcp(args) => mcp::run(args),
        Command::Call(args) => call::run(args),
        Command::Guard(args) => guard::run(args),
        Command::Jail(args) => jail::run(args),
        Command::Doctor(args) => doctor::run(args),
    }
}
