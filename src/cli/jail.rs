//! `confine jail CASE.json`: the grading program of `FileJail`.
//!
//! Builds the case like `confine guard`, makes the `FileJail` from the case's `cwd` (relative
//! to the root) and `policy`, decides every check with `resolve_for_read` /
//! `resolve_for_write`, prints `[{"op", "path", "ok"}, …]` on one line and removes the parent.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use confine_grading::{JailCase, run_jail_case};

/// Arguments of `confine jail`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The case file: the guard's tree plus "cwd", "policy" {"allowRead", "allowWrite",
    /// "deny"} and "checks" [{"op": "read"|"write", "path"}].
    pub case: PathBuf,
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    let case: JailCase = match load_case(&args.case) {
        Ok(case) => case,
        Err(reason) => return super::common::usage(&format!("jail: {reason}")),
    };
    match run_jail_case(&case) {
        Ok(outcomes) => print_json(&outcomes),
        Err(e) => super::common::usage(&format!("jail: {e}")),
    }
}

/// Read and parse a case file; the error is a one-line reason.
pub(super) fn load_case<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("invalid case {}: {e}", path.display()))
}

/// Print `value` as one JSON line on stdout.
pub(super) fn print_json<T: serde::Serialize>(value: &T) -> ExitCode {
    let line = match serde_json::to_string(value) {
        Ok(line) => line,
        Err(e) => return super::common::usage(&format!("cannot serialize the outcome: {e}")),
    };
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
