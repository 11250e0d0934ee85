//! The workspace's shape as a dependent meets it: every published crate named under the one
//! `confine-` prefix, every library crate refusing undocumented public items, the facade
//! re-exporting every library crate under its short name, and the tools crate's docs naming
//! every tool it builds.

use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Manifest {
    dir: String,
    name: String,
    published: bool,
}

fn crate_manifests() -> Vec<Manifest> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(repo().join("crates")).expect("crates/") {
        let dir = entry.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let doc: toml::Table = text.parse().expect("a manifest");
        let package = doc["package"].as_table().expect("[package]");
        found.push(Manifest {
            dir: dir.file_name().unwrap().to_string_lossy().into_owned(),
            name: package["name"].as_str().expect("name").to_owned(),
            published: package.get("publish").and_then(toml::Value::as_bool) != Some(false),
        });
    }
    found.sort_by(|a, b| a.dir.cmp(&b.dir));
    assert!(found.len() >= 8, "the crates were found");
    found
}

#[test]
fn every_published_package_is_named_under_the_prefix() {
    let root: toml::Table = std::fs::read_to_string(repo().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(root["package"]["name"].as_str(), Some("confine-cli"));
    assert_eq!(root["bin"][0]["name"].as_str(), Some("confine"));
    for m in crate_manifests() {
        if m.published {
            assert_eq!(m.name, format!("confine-{}", m.dir), "crates/{}", m.dir);
        } else {
            assert_eq!(m.dir, "testkit", "only the tests' helpers stay unpublished");
        }
    }
}

#[test]
fn every_library_crate_denies_missing_docs() {
    let mut libs: Vec<PathBuf> = crate_manifests()
        .iter()
        .map(|m| repo().join("crates").join(&m.dir).join("src/lib.rs"))
        .collect();
    libs.push(repo().join("src/lib.rs"));
    for lib in libs {
        let text = std::fs::read_to_string(&lib).expect("lib.rs");
        let attrs: String = text
            .lines()
            .skip_while(|l| !l.starts_with("#![deny("))
            .take_while(|l| !l.is_empty())
            .collect();
        assert!(
            attrs.contains("missing_docs"),
            "{} has #![deny(missing_docs)]",
            lib.strip_prefix(repo()).unwrap().display()
        );
    }
}

#[test]
fn the_facade_re_exports_every_library_crate() {
    let facade = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    for m in crate_manifests() {
        // The tests' helpers and the graders' case runner are not libraries for dependents.
        if !m.published || m.dir == "grading" {
            continue;
        }
        let line = format!("pub use confine_{} as {};", m.dir, m.dir);
        assert!(facade.contains(&line), "src/lib.rs has `{line}`");
        assert!(
            facade.contains(&format!("`confine-{}`", m.dir)),
            "the facade's docs name confine-{}",
            m.dir
        );
    }
    // And the re-exports are the crates themselves, usable through the facade.
    let _: fn(&str) -> _ = confine_cli::pathgrammar::normalize;
    let _ = confine_cli::tools::WORKSPACE_TOOLS;
}

#[test]
fn the_tools_crate_docs_name_every_tool_it_builds() {
    let lib = std::fs::read_to_string(repo().join("crates/tools/src/lib.rs")).unwrap();
    let opening: String = lib
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let tools = confine_cli::tools::WORKSPACE_TOOLS
        .iter()
        .chain(confine_cli::tools::COMMAND_TOOLS);
    for tool in tools {
        assert!(
            opening.contains(&format!("`{tool}`")),
            "the tools crate's docs name {tool}"
        );
    }
    let manifest = std::fs::read_to_string(repo().join("crates/tools/Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("read_file, write_file and node_process tools"),
        "the crate description is not the three-tool one"
    );
}

#[test]
fn readme_shows_the_published_names() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    for needle in [
        "confine-tools = \"0.1\"",
        "cargo install confine-cli",
        "use confine_tools::",
    ] {
        assert!(readme.contains(needle), "README shows {needle}");
    }
}

fn description(manifest: &str) -> String {
    let doc: toml::Table = std::fs::read_to_string(repo().join(manifest))
        .unwrap()
        .parse()
        .unwrap();
    doc["package"]["description"].as_str().unwrap().to_owned()
}

/// What each description promises is what the crate holds: the tools crate names the family
/// of every tool it builds, `beneath` its every primitive, the binary's package both transports.
#[test]
fn crate_descriptions_name_what_the_crates_hold() {
    let family = |tool: &str| match tool {
        "read_file" | "write_file" | "file_info" | "create_directory" | "move_file"
        | "delete_file" | "read_lines" => "files",
        "edit_file" => "edits",
        "list_directory" | "find_files" => "walks",
        "grep" => "grep",
        "read_media" => "images",
        "run_command" => "commands",
        "job_output" | "job_stop" | "job_list" | "job_input" | "job_resize" => "background jobs",
        "node_process" => "JavaScript",
        other => panic!("{other}: a tool the description test does not place in a family"),
    };
    let tools = description("crates/tools/Cargo.toml");
    for tool in confine_cli::tools::WORKSPACE_TOOLS
        .iter()
        .chain(confine_cli::tools::COMMAND_TOOLS)
    {
        assert!(
            tools.contains(family(tool)),
            "confine-tools' description covers {tool}"
        );
    }
    let beneath = description("crates/beneath/Cargo.toml");
    for item in [
        "identity",
        "RESOLVE_BENEATH",
        "climb",
        "remove-if-same",
        "temporaries",
        "walk",
        "regular-file open",
        "resolution of host paths",
    ] {
        assert!(
            beneath.contains(item),
            "confine-beneath's description names {item}"
        );
    }
    let cli = description("Cargo.toml");
    for item in ["stdio", "Streamable HTTP", "JSON Lines", "facade"] {
        assert!(cli.contains(item), "confine-cli's description names {item}");
    }
}

/// The README's opening names the tools it promises, and the binary's two transports.
#[test]
fn readme_opening_names_the_tools_and_transports() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let opening = readme
        .split("\n## ")
        .next()
        .expect("an opening before the first section");
    for needle in [
        "`read_file`",
        "`write_file`",
        "`node_process`",
        "`run_command`",
        "`FileJail`",
        "MCP",
        "HTTP",
    ] {
        assert!(
            opening.contains(needle),
            "the README's opening names {needle}"
        );
    }
}
