//! `cargo xtask test`: the project's one test command. It sets up what the suites need, then
//! runs them all, so that nothing passes on a fresh machine by skipping:
//!
//! 1. the MCP TypeScript SDK client of `tests/interop` and the official MCP conformance suite
//!    of `tests/interop/conformance` with the Node.js 22 it needs (`npm ci` in each, when its
//!    `node_modules` is missing or older than its lock file; Node.js and npm must be on
//!    PATH), and the MCP Python SDK client's virtual environment `tests/interop/py/.venv`
//!    (made with `python3 -m venv` and `pip install -r requirements.txt` when missing or
//!    older than `requirements.txt`; Python 3 must be on PATH);
//! 2. `cargo test --workspace` (extra arguments are passed to it), with a fresh
//!    `CONFINE_CENSUS_RUN` id, then the process census: once the tests have ended, no process
//!    holding that id (every test process, every `confine` a test starts and every child a
//!    lifetime suite starts carries it, see `testkit::census`) may be alive;
//! 3. `cargo xtask conformance`, the case corpus;
//! 4. the table of what did not run and why (see [`crate::skips`]), failing when a test that
//!    must run in this environment did not.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use testkit::census;

use crate::skips;

/// How long processes the tests killed get to be reaped before they count as survivors.
const CENSUS_GRACE: Duration = Duration::from_secs(2);

/// Run the three steps in order; the first failure stops and fails.
pub fn run(root: &Path, extra: &[String]) -> ExitCode {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for dir in ["tests/interop", "tests/interop/conformance"] {
        let interop = root.join(dir);
        if needs_install(&interop) {
            eprintln!("xtask test: installing the MCP interop clients (npm ci in {dir})");
            if !step("npm", &["ci", "--no-audit", "--no-fund"], &interop) {
                eprintln!("xtask test: `npm ci` failed in {dir} (are Node.js and npm on PATH?)");
                return ExitCode::FAILURE;
            }
        }
    }
    if !python_client(&root.join("tests/interop/py")) {
        return ExitCode::FAILURE;
    }
    let env = match skips::environment() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("xtask test: {e}");
            return ExitCode::from(2);
        }
    };
    let mut args: Vec<&str> = vec!["test", "--workspace"];
    args.extend(extra.iter().map(String::as_str));
    let run = fresh_run_id();
    let log = root.join(format!("target/not-run-{run}.tsv"));
    if let Err(e) =
        std::fs::create_dir_all(root.join("target")).and_then(|()| std::fs::write(&log, ""))
    {
        eprintln!("xtask test: cannot create {}: {e}", log.display());
        return ExitCode::FAILURE;
    }
    let log_str = log.to_string_lossy().into_owned();
    let tested = step_with(
        &cargo,
        &args,
        root,
        &[(census::RUN_VAR, &run), (testkit::skip::LOG_VAR, &log_str)],
    );
    // The census runs whether the tests passed or not: a survivor is reported either way.
    let counted = census_after(&run);
    // So does the table: what did not run is part of every report.
    eprintln!("xtask test: the {env} environment");
    let all_ran = skips::check(root, &log, &env);
    if !tested || !counted || !all_ran {
        return ExitCode::FAILURE;
    }
    if !step(&cargo, &["xtask", "conformance"], root) {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The Python SDK client's virtual environment, made or brought up to `requirements.txt`.
fn python_client(dir: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let stamp = dir.join(".venv/installed");
    let fresh = match (modified(&stamp), modified(&dir.join("requirements.txt"))) {
        (Some(installed), Some(wanted)) => installed >= wanted,
        _ => false,
    };
    if fresh {
        return true;
    }
    eprintln!("xtask test: installing the MCP Python SDK client (tests/interop/py/.venv)");
    let pip = dir.join(".venv/bin/pip");
    let made = step("python3", &["-m", "venv", ".venv"], dir)
        && step(
            &pip.to_string_lossy(),
            &["install", "--quiet", "-r", "requirements.txt"],
            dir,
        )
        && std::fs::write(&stamp, b"").is_ok();
    if !made {
        eprintln!(
            "xtask test: the Python client could not be installed (is python3 with venv on PATH?)"
        );
    }
    made
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

/// `cargo xtask census <run id>`: the census of a run whose tests were started with
/// `CONFINE_CENSUS_RUN=<run id>` by hand (`.ci/run` does so for the runs as another user).
pub fn census(args: &[String]) -> ExitCode {
    match args {
        [run] if !run.is_empty() => {
            if census_after(run) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        _ => {
            eprintln!("usage: cargo xtask census <run id>");
            ExitCode::from(2)
        }
    }
}

/// A run id no other run on this machine has: `xtask-<pid>-<nanoseconds>`.
fn fresh_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("xtask-{}-{nanos}", std::process::id())
}

/// The census of run `run`, printed; whether nothing of it is alive.
fn census_after(run: &str) -> bool {
    match census::check(run, CENSUS_GRACE) {
        Ok(()) => {
            eprintln!("xtask test: process census of run {run}: nothing left alive");
            true
        }
        Err(survivors) => {
            eprintln!("xtask test: PROCESS CENSUS FAILED (run {run}): {survivors}");
            false
        }
    }
}

fn step(program: &str, args: &[&str], dir: &Path) -> bool {
    step_with(program, args, dir, &[])
}

fn step_with(program: &str, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> bool {
    // xtask is a chore runner, not a tool: it may start programs directly.
    #[allow(clippy::disallowed_methods)]
    let status = std::process::Command::new(program)
        .args(args)
        .envs(env.iter().copied())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The census step fails while a process of the run lives, and passes once it is gone.
    #[test]
    fn census_step_fails_on_a_planted_survivor() {
        let run = fresh_run_id();
        // The planted survivor: a process started as a test would, with the run's id.
        #[allow(clippy::disallowed_methods)]
        let mut planted = std::process::Command::new("sleep")
            .arg("1000")
            .env(census::RUN_VAR, &run)
            .spawn()
            .expect("sleep runs");
        // `spawn` returns once the exec has closed its descriptors, a moment before the kernel
        // sets the new image's command line and environment in /proc: wait until they show.
        census::wait_alive_blocking(&run, 1);
        assert!(
            !census_after(&run),
            "the census missed pid {}",
            planted.id()
        );
        planted.kill().unwrap();
        planted.wait().unwrap();
        assert!(census_after(&run));
    }
}
