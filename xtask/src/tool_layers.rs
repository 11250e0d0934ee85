//! The layers inside `confine-tools`: the shared parts (the tool trait, the workspace and its
//! lists, the walk, the readers and the installation, the process glue) stand below the
//! tools, and no tool reaches into another tool's module.
//!
//! A module of the crate is a file or directory under `crates/tools/src` (a directory's files
//! belong to it). Each is a *tool* module ([`TOOL_MODULES`], grouped in families served
//! together), the *assembly* ([`ASSEMBLY`]: what builds the set out of the tools), or
//! *shared* (every other one). Read from each module's `crate::…` paths outside its test
//! module (an item the root re-exports counts as its module's):
//!
//! - a tool module imports no tool module of another family;
//! - a shared module imports no tool module;
//! - nothing but the crate's root and the assembly itself imports the assembly.
//!
//! `cargo xtask layers` runs this beside the crate check.

use std::collections::BTreeMap;
use std::path::Path;

/// The tool modules, each with its family: the modules of one family (the command tool and
/// the job tools, served only together) may use each other.
pub const TOOL_MODULES: &[(&str, &str)] = &[
    ("read_file", "read_file"),
    ("write_file", "write_file"),
    ("edit_file", "edit_file"),
    ("read_lines", "read_lines"),
    ("read_media", "read_media"),
    ("list_directory", "list_directory"),
    ("find_files", "find_files"),
    ("grep", "grep"),
    ("file_info", "file_info"),
    ("create_directory", "create_directory"),
    ("move_file", "move_file"),
    ("delete_file", "delete_file"),
    ("node_process", "node_process"),
    ("run_command", "commands"),
    ("jobs", "commands"),
];

/// The modules that put the tools together (the factories, the public `limits`, the checkpoint
/// hook that wraps every changing tool and serves the checkpoint tools): above every
/// tool.
pub const ASSEMBLY: &[&str] = &["factory", "limits", "checkpoint"];

fn family(module: &str) -> Option<&'static str> {
    TOOL_MODULES
        .iter()
        .find(|(m, _)| *m == module)
        .map(|&(_, f)| f)
}

/// The module a file under `src` belongs to (`write_file/x.rs` → `write_file`).
fn module_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default();
    first.strip_suffix(".rs").unwrap_or(&first).to_owned()
}

/// The text of a file without its test module (a top-level `#[cfg(test)]` followed by a
/// `mod` item) and without comments; a file named `tests.rs` is all test.
fn product_text(rel: &Path, text: &str) -> String {
    if rel.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if *line == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|next| next.starts_with("mod ") || next.starts_with("pub(crate) mod "))
        {
            break;
        }
        let code = line.split("//").next().unwrap_or_default();
        out.push_str(code);
        out.push('\n');
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first names after every `crate::` in `code` (each name of a `crate::{…}` group).
fn crate_names(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The top-level items of the group.
            let mut depth = 0usize;
            let mut start = 0usize;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        names.push(ident_at(group[start..i].trim_start()).to_owned());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.push(ident_at(group[start..i].trim_start()).to_owned());
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            names.push(ident_at(rest).to_owned());
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// What the crate's root re-exports: each item's module (`pub use read_file::{A, B};`).
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(at) = stmt.find("pub use ") else {
            continue;
        };
        let path = stmt[at + "pub use ".len()..].trim();
        let module = ident_at(path).to_owned();
        let Some(items) = path
            .strip_prefix(&module)
            .and_then(|p| p.strip_prefix("::"))
        else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.split(" as ").last().unwrap_or_default().trim();
            let name = name.rsplit("::").next().unwrap_or_default();
            if !name.is_empty() {
                map.insert(name.to_owned(), module.clone());
            }
        }
    }
    map
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every violation of the tools crate's layers under `root` (the workspace root).
pub fn violations(root: &Path) -> Vec<String> {
    let src = root.join("crates/tools/src");
    let lib = match std::fs::read_to_string(src.join("lib.rs")) {
        Ok(t) => t,
        Err(e) => return vec![format!("crates/tools/src/lib.rs: {e}")],
    };
    let exports = root_exports(&product_text(Path::new("lib.rs"), &lib));
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let modules: Vec<String> = files
        .iter()
        .filter_map(|f| f.strip_prefix(&src).ok())
        .map(module_of)
        .collect();
    let mut found = Vec::new();
    for file in &files {
        let Ok(rel) = file.strip_prefix(&src) else {
            continue;
        };
        let own = module_of(rel);
        if own == "lib" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(file) else {
            found.push(format!("cannot read {}", rel.display()));
            continue;
        };
        let mut seen = Vec::new();
        for name in crate_names(&product_text(rel, &text)) {
            let target = match modules.contains(&name) {
                true => name.clone(),
                false => match exports.get(&name) {
                    Some(m) => m.clone(),
                    None => continue,
                },
            };
            if target == own || seen.contains(&target) {
                continue;
            }
            seen.push(target.clone());
            let why = match (family(&own), family(&target)) {
                _ if ASSEMBLY.contains(&target.as_str()) && !ASSEMBLY.contains(&own.as_str()) => {
                    Some("only the crate's root uses the assembly")
                }
                (Some(a), Some(b)) if a != b => Some("a tool imports another tool's module"),
                (None, Some(_)) if !ASSEMBLY.contains(&own.as_str()) => {
                    Some("a shared module imports a tool's module")
                }
                _ => None,
            };
            if let Some(why) = why {
                found.push(format!(
                    "crates/tools/src/{}: uses crate::{name} (module {target}): {why}",
                    rel.display()
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_crate_keeps_its_layers() {
        let found = violations(&crate::workspace_root());
        assert!(found.is_empty(), "{found:#?}");
    }

    fn plant(files: &[(&str, &str)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("crates/tools/src");
        for (name, text) in files {
            let path = src.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        tmp
    }

    const LIB: &str = "mod read_file;\nmod write_file;\nmod tool;\nmod factory;\n\
                       pub use read_file::ReadFileTool;\n";

    #[test]
    fn a_planted_violation_of_each_rule_is_caught() {
        let tmp = plant(&[
            ("lib.rs", LIB),
            ("tool.rs", "use crate::read_file::read_whole;\n"),
            (
                "write_file/parent.rs",
                "use crate::{tool::Tool, read_file::{read_whole, X}};\n",
            ),
            ("read_file.rs", "use crate::factory::capture_root;\n"),
            ("factory.rs", "use crate::read_file::ReadFileTool;\n"),
        ]);
        let found = violations(tmp.path());
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(
            found[0].contains("read_file.rs: uses crate::factory"),
            "{found:#?}"
        );
        assert!(
            found[1].contains("tool.rs: uses crate::read_file"),
            "{found:#?}"
        );
        assert!(found[1].contains("a shared module imports"), "{found:#?}");
        assert!(found[2].contains("write_file/parent.rs"), "{found:#?}");
        assert!(found[2].contains("another tool's module"), "{found:#?}");
    }

    #[test]
    fn a_root_reexport_test_code_and_comments_are_judged_as_they_are() {
        let tmp = plant(&[
            ("lib.rs", LIB),
            // Through the root's re-export: still read_file's.
            (
                "write_file.rs",
                "fn f() { let _ = crate::ReadFileTool::NAME; }\n",
            ),
            // A test module and a comment use what they like; the family may share.
            (
                "tool.rs",
                "// crate::read_file::x\nfn g() {}\n#[cfg(test)]\nmod tests {\n    use crate::read_file::x;\n}\n",
            ),
            ("jobs.rs", "use crate::run_command::RunCommandTool;\n"),
            ("run_command.rs", "use crate::jobs::JobTable;\n"),
        ]);
        let found = violations(tmp.path());
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("write_file.rs: uses crate::ReadFileTool (module read_file)"));
    }
}
