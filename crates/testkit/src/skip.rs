//! Tests that cannot run where they run, recorded where a reader sees them.
//!
//! `cargo test` hides what a passing test prints, so a test that returns early because this
//! environment cannot hold its premise (no mount namespace as an ordinary user, a rule the
//! kernel waives for root) calls [`not_run`]: it prints `!!! TEST: NOT RUN, WHY` and appends
//! `TEST<TAB>WHY` to the file named by [`LOG_VAR`] when that is set. `cargo xtask test` sets
//! it, ends with a table of every line, and fails when a test that must run in its
//! environment (root, an ordinary user, the container-like setup) did not: the allowed skips
//! of each environment are listed with their reasons in `xtask/allowed-skips.toml`.

use std::io::Write;
use std::path::Path;

/// The variable naming the file where [`not_run`] records a skip.
pub const LOG_VAR: &str = "CONFINE_NOT_RUN_LOG";

/// Say that `test` did not run here, and why; the caller then returns.
///
/// `test` is the test's stable name (the allowed-skips list matches it whole); `why` is one
/// line saying what this environment lacks and, where one exists, which test covers it.
pub fn not_run(test: &str, why: &str) {
    eprintln!("!!! {test}: NOT RUN, {why}");
    if let Some(path) = std::env::var_os(LOG_VAR) {
        record(Path::new(&path), test, why);
    }
}

/// Append the skip of `test` to the log at `path`.
fn record(path: &Path, test: &str, why: &str) {
    let one_line = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    let line = format!("{}\t{}\n", one_line(test), one_line(why));
    // One write of a short line to a file opened for appending: lines from test processes
    // running at once do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("cannot record that {test} did not run in {path:?}: {e}");
    }
}

/// The skips recorded in `text` (a log [`not_run`] wrote): `(test, why)` in order.
pub fn parse_log(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once('\t') {
            Some((test, why)) => (test.to_owned(), why.to_owned()),
            None => (l.to_owned(), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_recorded_on_one_line_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("not-run.tsv");
        record(&log, "some_test", "no\tmount\nnamespace");
        record(&log, "other_test (mode v1)", "root");
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            parse_log(&text),
            [
                ("some_test".to_owned(), "no mount namespace".to_owned()),
                ("other_test (mode v1)".to_owned(), "root".to_owned()),
            ]
        );
    }
}
