//! The `guard` and `jail` conformance files, run through the case runner here too, so that
//! `cargo test -p jail` catches a verdict drifting from its file.

use std::path::PathBuf;

use jail::grading::{GuardCase, JailCase, run_guard_case, run_jail_case};

fn corpus(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/conformance")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A conformance file holds one case object or a `cases` array of them.
fn cases<T: serde::de::DeserializeOwned>(text: &str) -> Vec<T> {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    match v.get("cases") {
        Some(list) => serde_json::from_value(list.clone()).unwrap(),
        None => vec![serde_json::from_value(v).unwrap()],
    }
}

#[test]
fn guard_conformance_file_passes() {
    let all: Vec<GuardCase> = cases(&corpus("guard.json"));
    assert!(!all.is_empty());
    for (i, case) in all.iter().enumerate() {
        let expect = case
            .expect
            .clone()
            .expect("every guard case has an expect array");
        assert_eq!(
            expect.len(),
            case.paths.len(),
            "case {i}: expect and paths differ in length"
        );
        let got = run_guard_case(case).unwrap();
        let wrong: Vec<_> = got
            .iter()
            .zip(&expect)
            .filter(|(o, e)| o.ok != **e)
            .map(|(o, e)| (o.path.clone(), o.ok, *e, o.code))
            .collect();
        assert!(
            wrong.is_empty(),
            "guard case {i}: (path, got, expected, code) {wrong:#?}"
        );
    }
}

#[test]
fn jail_conformance_file_passes() {
    let all: Vec<JailCase> = cases(&corpus("jail.json"));
    assert!(!all.is_empty());
    for (i, case) in all.iter().enumerate() {
        let got = run_jail_case(case).unwrap();
        let wrong: Vec<_> = got
            .iter()
            .zip(&case.checks)
            .filter(|(o, c)| Some(o.ok) != c.ok)
            .map(|(o, c)| (o.op, o.path.clone(), o.ok, c.ok, o.code))
            .collect();
        assert!(
            wrong.is_empty(),
            "jail case {i}: (op, path, got, expected, code) {wrong:#?}"
        );
    }
}
