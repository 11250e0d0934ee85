//! `cargo xtask layers`: dependencies point down.
//!
//! L0 `confine-pathgrammar` and `confine-beneath` (the descriptor layer), and `testkit` (the
//! tests' helpers, which depend on no crate of ours); L1 `confine-rootid`, `confine-atomicwrite`,
//! `confine-nodeexec`; L2 `confine-jail`, `confine-netpolicy` (which runs the presets' clients
//! through `confine-nodeexec`), `confine-checkpoint` (the store of undo); L3 `confine-tools` (which may use both); 3 also the repository's
//! tooling (`confine-grading`). A crate may depend
//! (normally, for building, or for its tests) only on crates of a strictly lower layer, and
//! every crate under `crates/` must have a layer (`ARCHITECTURE.md` has the map). A test-support
//! crate ([`TEST_SUPPORT`]) is a dev-dependency only, of every crate and of the root package.

use std::path::Path;
use std::process::ExitCode;

/// The layer of each library crate.
pub const LAYERS: &[(&str, u8)] = &[
    ("confine-pathgrammar", 0),
    ("confine-beneath", 0),
    ("confine-rootid", 1),
    ("confine-atomicwrite", 1),
    ("confine-nodeexec", 1),
    ("confine-jail", 2),
    ("confine-netpolicy", 2),
    ("confine-checkpoint", 2),
    ("confine-tools", 3),
    // The tests' helpers (`publish = false`, a dev-dependency only): below every crate whose
    // tests use it, so it depends on none of them.
    ("testkit", 0),
    // Repository tooling: the case runner of the binary and the xtask (published only so that
    // the binary's package installs alone).
    ("confine-grading", 3),
];

/// Crates of test support: a dev-dependency only, never a normal or build dependency of any
/// crate (the root package included), so that nothing the binary links holds test code.
pub const TEST_SUPPORT: &[&str] = &["testkit"];

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
        found.extend(test_support_in_product(&name, &doc));
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
    // The root package (the binary) too.
    if let Ok(text) = std::fs::read_to_string(root.join("Cargo.toml")) {
        match text.parse::<toml::Table>() {
            Ok(doc) => found.extend(test_support_in_product("the root package", &doc)),
            Err(e) => found.push(format!("Cargo.toml: {e}")),
        }
    }
    found
}

/// A test-support crate among `doc`'s normal or build dependencies.
fn test_support_in_product(name: &str, doc: &toml::Table) -> Vec<String> {
    let mut found = Vec::new();
    for table in ["dependencies", "build-dependencies"] {
        let Some(deps) = doc.get(table).and_then(|d| d.as_table()) else {
            continue;
        };
        for dep in deps.keys().filter(|d| TEST_SUPPORT.contains(&d.as_str())) {
            found.push(format!(
                "{name} has the test-support crate {dep} in [{table}]: test code would ship \
                 in the product (a dev-dependency only)"
            ));
        }
    }
    found
}

/// Print the violations; non-zero on any.
pub fn run(root: &Path) -> ExitCode {
    let mut found = violations(root);
    found.extend(crate::tool_layers::violations(root));
    if found.is_empty() {
        println!(
            "layers: ok ({} crates; the tools crate's modules)",
            LAYERS.len()
        );
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
            "[package]\nname = \"confine-pathgrammar\"\n[dev-dependencies]\nconfine-tools = \"0.1\"\n",
        )
        .unwrap();
        let found = violations(tmp.path());
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("confine-tools"));
    }

    #[test]
    fn test_support_in_a_normal_dependency_is_caught() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("crates/grading");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            "[package]\nname = \"confine-grading\"\n[dependencies]\ntestkit = \"0.1\"\n",
        )
        .unwrap();
        std::fs::write(
            tmp.path().join("Cargo.toml"),
            "[package]\nname = \"confine-cli\"\n[build-dependencies]\ntestkit = \"0.1\"\n\
             [dev-dependencies]\ntestkit = \"0.1\"\n",
        )
        .unwrap();
        let found = violations(tmp.path());
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0]
                .contains("confine-grading has the test-support crate testkit in [dependencies]")
        );
        assert!(found[1].contains("the root package has the test-support crate testkit"));
    }

    /// What the manifests promise, as cargo resolves it: the binary's normal dependency tree
    /// holds no test-support crate.
    #[test]
    fn the_binary_links_no_test_support() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // cargo itself, run by the repository's tooling: no tool's child process.
        #[allow(clippy::disallowed_methods)]
        let out = std::process::Command::new(cargo)
            .args([
                "tree",
                "-e",
                "normal",
                "-p",
                "confine-cli",
                "--prefix",
                "none",
                "--offline",
            ])
            .current_dir(crate::workspace_root())
            .output()
            .expect("cargo tree");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tree = String::from_utf8_lossy(&out.stdout);
        assert!(
            tree.contains("confine-grading v"),
            "the tree names the binary's crates: {tree}"
        );
        for name in TEST_SUPPORT {
            assert!(
                !tree.lines().any(|l| l.starts_with(&format!("{name} v"))),
                "{name} in the binary's tree:\n{tree}"
            );
        }
    }
}
