//! `cargo xtask conformance`: run `tests/conformance/*.json` through the real crates.
//!
//! The format is documented in `tests/conformance/README.md`. Prints a table of files, cases,
//! passed and failed, then every mismatch; exits non-zero on any.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use confine_tools::{ToolCall, ToolSetOptions, execute_tool_call};
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The outcome of one file.
#[derive(Debug, Default)]
pub struct FileReport {
    /// The file name.
    pub file: String,
    /// The runner.
    pub kind: String,
    /// Cases run.
    pub cases: usize,
    /// Cases that matched.
    pub passed: usize,
    /// One line per mismatch.
    pub failures: Vec<String>,
}

impl FileReport {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.cases += 1;
        if ok {
            self.passed += 1;
        } else {
            self.failures.push(what());
        }
    }
}

/// Run every case file in `dir`, in name order.
pub fn run_corpus(dir: &Path) -> Vec<FileReport> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    files.iter().map(|p| run_file(p)).collect()
}

fn run_file(path: &Path) -> FileReport {
    let mut report = FileReport {
        file: path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        ..FileReport::default()
    };
    let parsed = std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()));
    let doc = match parsed {
        Ok(d) => d,
        Err(e) => {
            report.check(false, || format!("unreadable case file: {e}"));
            return report;
        }
    };
    report.kind = doc["kind"].as_str().unwrap_or("?").to_owned();
    let result = match report.kind.as_str() {
        "grammar" => serde_json::from_value(doc).map(|c| run_grammar(c, &mut report)),
        "calls" => serde_json::from_value(doc).map(|c| run_calls(c, &mut report)),
        "guard" => serde_json::from_value(doc).map(|c| run_guard(c, &mut report)),
        "jail" => serde_json::from_value(doc).map(|c| run_jail(c, &mut report)),
        other => {
            let other = other.to_owned();
            report.check(false, || format!("unknown kind {other:?}"));
            Ok(())
        }
    };
    if let Err(e) = result {
        report.check(false, || format!("malformed case file: {e}"));
    }
    report
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrammarFile {
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    cases: Vec<GrammarCase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrammarCase {
    input: String,
    expect: Option<String>,
}

fn run_grammar(file: GrammarFile, report: &mut FileReport) {
    for case in file.cases {
        let got = confine_pathgrammar::normalize(&case.input)
            .ok()
            .map(|p| p.as_str().to_owned());
        report.check(got == case.expect, || {
            format!(
                "normalize({:?}) = {:?}, expected {:?}",
                case.input, got, case.expect
            )
        });
    }
}

fn run_guard(case: confine_grading::GuardCase, report: &mut FileReport) {
    let Some(expect) = case.expect.clone() else {
        return report.check(false, || "a guard case file needs \"expect\"".into());
    };
    if expect.len() != case.paths.len() {
        return report.check(false, || "\"expect\" and \"paths\" differ in length".into());
    }
    match confine_grading::run_guard_case(&case) {
        Err(e) => report.check(false, || format!("cannot run the case: {e}")),
        Ok(outcomes) => {
            for (outcome, want) in outcomes.iter().zip(expect) {
                report.check(outcome.ok == want, || {
                    format!(
                        "guard {:?}: ok {} ({:?}), expected {want}",
                        outcome.path, outcome.ok, outcome.code
                    )
                });
            }
        }
    }
}

fn run_jail(case: confine_grading::JailCase, report: &mut FileReport) {
    if case.checks.iter().any(|c| c.ok.is_none()) {
        return report.check(false, || "every jail check needs \"ok\"".into());
    }
    match confine_grading::run_jail_case(&case) {
        Err(e) => report.check(false, || format!("cannot run the case: {e}")),
        Ok(outcomes) => {
            for (outcome, check) in outcomes.iter().zip(&case.checks) {
                let want = check.ok.unwrap_or_default();
                report.check(outcome.ok == want, || {
                    format!(
                        "jail {:?} {:?}: ok {} ({:?}), expected {want}",
                        outcome.op, outcome.path, outcome.ok, outcome.code
                    )
                });
            }
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Options {
    timeout_ms: Option<u64>,
    /// `--deny` globs: the registry refuses and leaves out what they match.
    #[serde(default)]
    deny: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct After {
    #[serde(default)]
    files: BTreeMap<String, Option<String>>,
    #[serde(default)]
    outside_files: BTreeMap<String, Option<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallsFile {
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    options: Options,
    #[serde(default)]
    setup: confine_grading::CaseTree,
    #[serde(default)]
    outside: confine_grading::CaseTree,
    cases: Vec<CallCase>,
    #[serde(default)]
    after: After,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CallCase {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    arguments_raw: Option<String>,
    is_error: bool,
    #[serde(default)]
    expect: Option<Value>,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
}

struct Places {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Places {
    fn substitute(&self, text: &str) -> String {
        text.replace("$ROOT", &self.root.to_string_lossy())
            .replace("$OUTSIDE", &self.outside.to_string_lossy())
    }
}

/// `actual` holds everything `expected` names (objects recursively; the rest exactly).
pub fn subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, ev)| a.get(k).is_some_and(|av| subset(ev, av))),
        _ => expected == actual,
    }
}

fn leftovers(dir: &Path, found: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains(".pify-") {
            found.push(entry.path().display().to_string());
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            leftovers(&entry.path(), found);
        }
    }
}

fn run_calls(file: CallsFile, report: &mut FileReport) {
    let setup = || -> std::io::Result<Places> {
        let tmp = tempfile::tempdir()?;
        let base = tmp.path().canonicalize()?;
        let root = base.join("ws");
        let outside = base.join("ws-outside");
        std::fs::create_dir(&root)?;
        std::fs::create_dir(&outside)?;
        Ok(Places {
            _tmp: tmp,
            root,
            outside,
        })
    };
    let places = match setup() {
        Ok(p) => p,
        Err(e) => return report.check(false, || format!("cannot make the workspace: {e}")),
    };
    let substitute = |s: &str| places.substitute(s);
    if let Err(e) = (file.setup.build_at(&places.root, substitute))
        .and_then(|()| file.outside.build_at(&places.outside, substitute))
    {
        return report.check(false, || format!("cannot build the case tree: {e}"));
    }
    let mut options = ToolSetOptions::default();
    options.node.timeout = file.options.timeout_ms.map(Duration::from_millis);
    match confine_tools::DeniedPaths::new(&file.options.deny) {
        Ok(denied) => options.denied = std::sync::Arc::new(denied),
        Err(e) => return report.check(false, || format!("a deny glob is refused: {e}")),
    }
    let registry = match confine_tools::create_workspace_tools(&places.root, options) {
        Ok(r) => r,
        Err(e) => return report.check(false, || format!("cannot build the tools: {}", e.code())),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    for (i, case) in file.cases.iter().enumerate() {
        let call = match (&case.arguments_raw, &case.arguments) {
            (Some(raw), _) => ToolCall::from_json(i.to_string(), &case.name, raw.clone()),
            (None, Some(args)) => ToolCall::new(i.to_string(), &case.name, args),
            (None, None) => ToolCall::new(
                i.to_string(),
                &case.name,
                &Value::Object(Default::default()),
            ),
        };
        let outcome = runtime.block_on(execute_tool_call(
            &registry,
            &call,
            &CancellationToken::new(),
        ));
        let (ok, got) = match outcome {
            Err(_) => (false, "cancelled".to_owned()),
            Ok(result) => {
                let record = result.record();
                let ok = result.is_error == case.is_error
                    && case.expect.as_ref().is_none_or(|e| subset(e, &record));
                (
                    ok,
                    format!("isError {} {}", result.is_error, result.content),
                )
            }
        };
        report.check(ok, || {
            let mut got = got;
            got.truncate(400);
            format!(
                "case {i} {} {}: got {got}; expected isError {} {}",
                case.name,
                case.arguments_raw.clone().unwrap_or_else(|| {
                    let mut a = case.arguments.clone().unwrap_or_default().to_string();
                    a.truncate(120);
                    a
                }),
                case.is_error,
                case.expect.clone().unwrap_or_default()
            )
        });
    }
    let mut mismatches = Vec::new();
    for (base, files) in [
        (&places.root, &file.after.files),
        (&places.outside, &file.after.outside_files),
    ] {
        for (rel, want) in files {
            let got = std::fs::read_to_string(base.join(rel)).ok();
            let exists = std::fs::symlink_metadata(base.join(rel)).is_ok();
            let ok = match want {
                None => !exists,
                Some(w) => got.as_deref() == Some(w.as_str()),
            };
            if !ok {
                mismatches.push(format!("after: {rel} is {got:?}, expected {want:?}"));
            }
        }
    }
    let mut left = Vec::new();
    leftovers(
        places.root.parent().expect("the temporary parent"),
        &mut left,
    );
    if !left.is_empty() {
        mismatches.push(format!("after: .pify- leftovers {left:?}"));
    }
    let ok = mismatches.is_empty();
    report.check(ok, || mismatches.join("; "));
}

/// Print the table; non-zero on any mismatch.
pub fn run(dir: &Path) -> ExitCode {
    let reports = run_corpus(dir);
    println!(
        "{:<28} {:<8} {:>6} {:>7} {:>7}",
        "file", "kind", "cases", "passed", "failed"
    );
    let (mut cases, mut passed) = (0, 0);
    for r in &reports {
        println!(
            "{:<28} {:<8} {:>6} {:>7} {:>7}",
            r.file,
            r.kind,
            r.cases,
            r.passed,
            r.cases - r.passed
        );
        cases += r.cases;
        passed += r.passed;
    }
    println!(
        "{:<28} {:<8} {:>6} {:>7} {:>7}",
        "total",
        "",
        cases,
        passed,
        cases - passed
    );
    let mut failed = false;
    for r in &reports {
        for f in &r.failures {
            failed = true;
            println!("FAIL {}: {f}", r.file);
        }
    }
    if failed || reports.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_passes() {
        let reports = run_corpus(&crate::workspace_root().join("tests/conformance"));
        assert!(!reports.is_empty(), "no case files");
        let failures: Vec<String> = reports
            .iter()
            .flat_map(|r| r.failures.iter().map(move |f| format!("{}: {f}", r.file)))
            .collect();
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn subset_requires_every_named_key() {
        let actual = serde_json::json!({"a": 1, "b": {"c": 2, "d": 3}});
        assert!(subset(&serde_json::json!({"b": {"c": 2}}), &actual));
        assert!(!subset(&serde_json::json!({"b": {"c": 3}}), &actual));
        assert!(!subset(&serde_json::json!({"e": null}), &actual));
    }

    #[test]
    fn a_wrong_expectation_fails() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("bad.json"),
            r#"{"kind": "grammar", "cases": [{"input": "../x", "expect": "x"}]}"#,
        )
        .unwrap();
        let reports = run_corpus(tmp.path());
        assert_eq!(reports[0].cases, 1);
        assert_eq!(reports[0].passed, 0);
    }
}
