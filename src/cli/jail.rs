//! `confine jail CASE.json` (SPEC section 9). Lands with issue 5.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `confine jail`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The case file.
    pub case: PathBuf,
}

/// Run the subcommand.
pub fn run(_args: Args) -> ExitCode {
    super::common::usage("jail: not implemented yet")
}
