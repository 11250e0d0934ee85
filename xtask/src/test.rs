//! `cargo xtask test`: the project's one test command. It sets up what the suites need, then
//! runs them all, so that nothing passes on a fresh machine by skipping:
//!
//! 1. the MCP TypeScript SDK client of `tests/interop` (`npm ci`, when its `node_modules` is
//!    missing or older than its lock file; Node.js and npm must be on PATH);
//! 2. `cargo test --workspace` (extra arguments are passed to it);
//! 3. `cargo xtask conformance`, the case corpus.

use std::path::Path;
use std::process::ExitCode;

/// Run the three steps in order; the first failure stops and fails.
pub fn run(root: &Path, extra: &[String]) -> ExitCode {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let interop = root.join("tests/interop");
    if needs_install(&interop) {
        eprintln!("xtask test: installing the MCP interop client (npm ci in tests/interop)");
        if !step("npm", &["ci", "--no-audit", "--no-fund"], &interop) {
            eprintln!(
                "xtask test: `npm ci` failed in tests/interop (are Node.js and npm on PATH?)"
            );
            return ExitCode::FAILURE;
        }
    }
    let mut args: Vec<&str> = vec!["test", "--workspace"];
    args.extend(extra.iter().map(String::as_str));
    if !step(&cargo, &args, root) {
        return ExitCode::FAILURE;
    }
    if !step(&cargo, &["xtask", "conformance"], root) {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The client is missing, or its lock file changed since it was installed.
fn needs_install(interop: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (
        modified(&interop.join("node_modules/.package-lock.json")),
        modified(&interop.join("package-lock.json")),
    ) {
        (Some(installed), Some(lock)) => installed < lock,
        _ => true,
    }
}

fn step(program: &str, args: &[&str], dir: &Path) -> bool {
    // xtask is a chore runner, not a tool: it may start programs directly.
    #[allow(clippy::disallowed_methods)]
    let status = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .status();
    match status {
        Ok(s) if s.success() => true,
        Ok(s) => {
            eprintln!("xtask test: `{program} {}` failed ({s})", args.join(" "));
            false
        }
        Err(e) => {
            eprintln!("xtask test: cannot run `{program}`: {e}");
            false
        }
    }
}
