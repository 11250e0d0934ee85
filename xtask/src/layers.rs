//! `cargo xtask layers`: dependencies point down.
//!
//! L0 `pathgrammar` and `beneath` (the descriptor layer), and `testkit` (the tests' helpers,
//! which depend on no crate of ours); L1 `rootid`, `atomicwrite`,
//! `nodeexec`; L2 `jail`, `tools`; 3 the repository's tooling (`grading`). A crate may depend
//! (normally, for building, or for its tests) only on crates of a strictly lower layer, and
//! every crate under `crates/` must have a layer (`ARCHITECTURE.md` has the map).

use std::path::Path;
use std::process::ExitCode;

/// The layer of each library crate.
pub const LAYERS: &[(&str, u8)] = &[
    ("pathgrammar", 0),
    ("beneath", 0),
    ("rootid", 1),
    ("atomicwrite", 1),
    ("nodeexec", 1),
    ("jail", 2),
    ("tools", 2),
    // The tests' helpers (`publish = false`, a dev-dependency only): below every crate whose
    // tests use it, so it depends on none of them.
    ("testkit", 0),
    // Repository tooling (`publish = false`): the case runner of the binary and the xtask.
    ("grading", 3),
];

fn layer_of(name: &str) -> Option<u8> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|&(_, l)| l)
}

/// Every violation found under `root/crates`.
pub fn violations(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(root.join("crates")) {
        Ok(e) => e,
        Err(e) => return vec![format!("cannot list crates/: {e}")],
    };
    let mut dirs: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let manifest = dir.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let doc: toml::Table = match text.parse() {
            Ok(d) => d,
            Err(e) => {
                found.push(format!("{}: {e}", manifest.display()));
                continue;
            }
        };
        let name = doc
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_owned();
        let Some(own) = layer_of(&name) else {
            found.push(format!(
                "crate {name:?} has no layer in xtask/src/layers.rs"
            ));
            continue;
        };
        for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let Some(deps) = doc.get(table).and_then(|d| d.as_table()) else {
                continue;
            };
            for dep in deps.keys() {
                if let Some(theirs) = layer_of(dep)
                    && theirs >= own
                {
                    found.push(format!(
                        "{name} (L{own}) has {dep} (L{theirs}) in [{table}]: dependencies must point down"
                    ));
                }
            }
        }
    }
    found
}

/// Print the violations; non-zero on any.
pub fn run(root: &Path) -> ExitCode {
    let found = violations(root);
    if found.is_empty() {
        println!("layers: ok ({} crates)", LAYERS.len());
        ExitCode::SUCCESS
    } else {
        for v in &found {
            eprintln!("layers: {v}");
        }
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_layers_point_down() {
        let found = violations(&crate::workspace_root());
        assert!(found.is_empty(), "{found:#?}");
    }

    #[test]
    fn an_upward_dependency_is_caught() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("crates/pathgrammar");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            "[package]\nname = \"pathgrammar\"\n[dev-dependencies]\ntools = \"0.1\"\n",
        )
        .unwrap();
        let found = violations(tmp.path());
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("tools"));
    }
}
