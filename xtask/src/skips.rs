//! What did not run, in plain sight: the table that ends `cargo xtask test`, and the check
//! that fails it when a test that must run in this environment did not.
//!
//! A test that cannot run where it runs calls `testkit::not_run`, which appends a line to the
//! file named by `CONFINE_NOT_RUN_LOG` (set here). The environments are those CI runs the
//! suites in: `root` (a bare host, with cgroup delegation), `user` (an ordinary user, none)
//! and `container` (root in a private mount namespace with a read-only cgroup mount and
//! without CAP_SYS_ADMIN). `xtask/allowed-skips.toml` lists, per environment, every test
//! allowed not to run there with the reason; a recorded skip not on the list fails the run.
//! The environment is `CONFINE_TEST_ENV` when set, else `root` or `user` by the effective user.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use testkit::skip::parse_log;

/// The variable naming the environment whose allowed skips apply.
pub const ENV_VAR: &str = "CONFINE_TEST_ENV";

/// The environments CI runs the suites in.
pub const ENVIRONMENTS: &[&str] = &["root", "user", "container"];

/// The environment of this run: [`ENV_VAR`], else by the effective user.
pub fn environment() -> Result<String, String> {
    match std::env::var(ENV_VAR) {
        Ok(env) if ENVIRONMENTS.contains(&env.as_str()) => Ok(env),
        Ok(env) => Err(format!(
            "{ENV_VAR}={env:?} is none of {}",
            ENVIRONMENTS.join(", ")
        )),
        Err(_) if rustix::process::geteuid().is_root() => Ok("root".into()),
        Err(_) => Ok("user".into()),
    }
}

/// The allowed skips of every environment: environment -> test -> reason.
pub fn allowed(text: &str) -> Result<BTreeMap<String, BTreeMap<String, String>>, String> {
    let doc: toml::Table = text
        .parse()
        .map_err(|e| format!("allowed-skips.toml: {e}"))?;
    let mut all = BTreeMap::new();
    for (env, tests) in doc {
        if !ENVIRONMENTS.contains(&env.as_str()) {
            return Err(format!("allowed-skips.toml: unknown environment [{env}]"));
        }
        let tests = tests
            .as_table()
            .ok_or_else(|| format!("allowed-skips.toml: [{env}] is not a table"))?;
        let mut listed = BTreeMap::new();
        for (test, why) in tests {
            let why = why
                .as_str()
                .filter(|w| !w.trim().is_empty())
                .ok_or_else(|| format!("allowed-skips.toml: [{env}] {test:?} needs a reason"))?;
            listed.insert(test.clone(), why.to_owned());
        }
        all.insert(env, listed);
    }
    Ok(all)
}

/// The table of what did not run (each test once, with its first reason), and the skips of
/// `env` that its list does not allow.
pub fn report(log: &str, allowed: &BTreeMap<String, String>) -> (String, Vec<String>) {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (test, why) in parse_log(log) {
        seen.entry(test).or_insert(why);
    }
    let mut table = String::new();
    if seen.is_empty() {
        table.push_str("xtask test: every test ran\n");
    } else {
        table.push_str(&format!("xtask test: {} did not run here:\n", seen.len()));
        for (test, why) in &seen {
            let mark = if allowed.contains_key(test) { " " } else { "!" };
            table.push_str(&format!("  {mark} {test}\n      {why}\n"));
        }
    }
    let refused = seen
        .keys()
        .filter(|t| !allowed.contains_key(*t))
        .cloned()
        .collect();
    (table, refused)
}

/// Print the table of `log_path`'s skips and check them against `env`'s list.
pub fn check(root: &Path, log_path: &Path, env: &str) -> bool {
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    let list = match std::fs::read_to_string(root.join("xtask/allowed-skips.toml"))
        .map_err(|e| format!("xtask/allowed-skips.toml: {e}"))
        .and_then(|t| allowed(&t))
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("xtask test: {e}");
            return false;
        }
    };
    let empty = BTreeMap::new();
    let (table, refused) = report(&log, list.get(env).unwrap_or(&empty));
    eprint!("{table}");
    if refused.is_empty() {
        return true;
    }
    eprintln!(
        "xtask test: FAILED: {} test(s) must run in the {env} environment and did not (marked !); \
         make them run here, or list them under [{env}] in xtask/allowed-skips.toml with the reason",
        refused.len()
    );
    false
}

/// `cargo xtask skips ENV LOG`: the table and the check for a log written by suites run
/// without `cargo xtask test` (`.ci/run`'s container-like pass).
pub fn run(root: &Path, args: &[String]) -> ExitCode {
    match args {
        [env, log] if ENVIRONMENTS.contains(&env.as_str()) => {
            if check(root, Path::new(log), env) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        _ => {
            eprintln!(
                "usage: cargo xtask skips <{}> <log>",
                ENVIRONMENTS.join("|")
            );
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str, env: &str) -> BTreeMap<String, String> {
        allowed(text).unwrap().remove(env).unwrap_or_default()
    }

    #[test]
    fn an_unlisted_skip_fails_and_a_listed_one_passes() {
        let text = "[user]\nneeds_root = \"root only\"\n";
        let log = "needs_root\tas an ordinary user\nother\tno git\nneeds_root\tagain\n";
        let (table, refused) = report(log, &list(text, "user"));
        assert_eq!(refused, ["other"]);
        assert!(table.contains("2 did not run"), "{table}");
        assert!(table.contains("  ! other\n      no git\n"), "{table}");
        assert!(
            table.contains("    needs_root\n      as an ordinary user\n"),
            "{table}"
        );
        // The same log as root: neither is allowed there.
        let (_, refused) = report(log, &list(text, "root"));
        assert_eq!(refused, ["needs_root", "other"]);
        let (table, refused) = report("", &list(text, "user"));
        assert!(refused.is_empty() && table.contains("every test ran"));
    }

    #[test]
    fn the_list_needs_known_environments_and_reasons() {
        assert!(allowed("[laptop]\na = \"b\"\n").is_err());
        assert!(allowed("[user]\na = \"\"\n").is_err());
        assert!(allowed("[user]\na = 1\n").is_err());
        assert!(allowed("[root]\na = \"why\"\n").is_ok());
    }

    /// The checked-in list parses, and every test it names exists in the sources (a renamed
    /// test cannot leave a stale allowance behind).
    #[test]
    fn the_checked_in_list_names_tests_that_exist() {
        let root = crate::workspace_root();
        let text = std::fs::read_to_string(root.join("xtask/allowed-skips.toml")).unwrap();
        let all = allowed(&text).unwrap();
        let mut sources = String::new();
        for dir in ["crates", "tests", "src"] {
            collect_rs(&root.join(dir), &mut sources);
        }
        for (env, tests) in &all {
            for test in tests.keys() {
                let name = test.split(' ').next().unwrap();
                assert!(
                    sources.contains(&format!("fn {name}("))
                        || sources.contains(&format!("\"{name}")),
                    "[{env}] {test}: no such test in the sources"
                );
            }
        }
    }

    fn collect_rs(dir: &Path, into: &mut String) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("target") && !p.ends_with("node_modules") {
                collect_rs(&p, into);
            } else if p.extension().is_some_and(|x| x == "rs") {
                into.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
}
