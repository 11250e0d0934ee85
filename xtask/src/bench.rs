//! `cargo xtask bench`: every criterion bench of the workspace, with short default times.

use std::process::ExitCode;

/// Run `cargo bench --workspace`, passing extra arguments to criterion.
pub fn run(extra: &[String]) -> ExitCode {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut criterion_args = vec![
        "--warm-up-time".to_owned(),
        "1".into(),
        "--measurement-time".into(),
        "3".into(),
    ];
    criterion_args.extend(extra.iter().cloned());
    // xtask is a chore runner, not a tool: it may start cargo directly.
    #[allow(clippy::disallowed_methods)]
    let status = std::process::Command::new(cargo)
        .args(["bench", "--workspace", "--"])
        .args(&criterion_args)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
