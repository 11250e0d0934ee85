//! `confine guard CASE.json`: the grading program of the path guard.
//!
//! Builds the case in a fresh temporary parent (`cc-task-abc` and its prefix-sharing sibling
//! `cc-task-abc-evil`), maps every path through `confine_jail::resolve_in_sandbox`, prints
//! `[{"path", "ok"}, …]` on one line and removes the parent. See the `confine-grading` crate.

use std::path::PathBuf;
use std::process::ExitCode;

use confine_grading::{GuardCase, run_guard_case};

/// Arguments of `confine guard`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The case file: {"files": {…}, "dirs": […], "symlinks": {…}, "paths": […]}.
    pub case: PathBuf,
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    let case: GuardCase = match super::jail::load_case(&args.case) {
        Ok(case) => case,
        Err(reason) => return super::common::usage(&format!("guard: {reason}")),
    };
    match run_guard_case(&case) {
        Ok(outcomes) => super::jail::print_json(&outcomes),
        Err(e) => super::common::usage(&format!("guard: {e}")),
    }
}
