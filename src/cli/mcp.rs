//! `confine mcp` (SPEC section 9). Lands with issue 6.

use std::process::ExitCode;

use super::common::ToolArgs;

/// Arguments of `confine mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Offer read_file alone.
    #[arg(long)]
    pub read_only: bool,
}

/// Run the subcommand.
pub fn run(_args: Args) -> ExitCode {
    super::common::usage("mcp: not implemented yet")
}
