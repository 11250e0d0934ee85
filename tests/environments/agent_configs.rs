//! The agent configuration snippets of `docs/agents/` (and the README's copies of them) are
//! valid for their host and start a working `confine mcp`: each is parsed (JSON, TOML, the
//! shell line), its command must be `confine mcp …`, and its arguments, with the placeholder
//! workspace replaced by a real directory, are run against the built binary.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::support;

const PLACEHOLDER: &str = "/path/to/workspace";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn snippet(name: &str) -> String {
    std::fs::read_to_string(repo().join("docs/agents").join(name))
        .unwrap_or_else(|e| panic!("docs/agents/{name}: {e}"))
}

/// The (command, arguments) a host would run, checked to be `confine mcp --root …`.
fn check_invocation(source: &str, command: &str, args: &[String]) {
    assert_eq!(
        command, "confine",
        "{source}: the command is the confine binary"
    );
    assert_eq!(
        args.first().map(String::as_str),
        Some("mcp"),
        "{source}: {args:?}"
    );
    let root = args.iter().position(|a| a == "--root");
    assert!(
        root.is_some_and(|i| args.get(i + 1).is_some_and(|v| v == PLACEHOLDER)),
        "{source}: `--root {PLACEHOLDER}` in {args:?}"
    );
    run_against_binary(source, args);
}

/// Run the binary with the snippet's arguments over a real workspace; with no input, the
/// server must start (banner on stderr), print nothing on stdout, and exit 0 at end of input.
fn run_against_binary(source: &str, args: &[String]) {
    let workspace = tempfile::tempdir().expect("workspace");
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            if a == PLACEHOLDER {
                workspace.path().display().to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    let output = support::confine()
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("run confine");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{source}: {args:?} -> {} {stderr}",
        output.status
    );
    assert!(
        output.stdout.is_empty(),
        "{source}: stdout carries only the protocol"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("confine ") && l.contains(" mcp")),
        "{source}: the banner: {stderr}"
    );
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .expect("args is an array")
        .iter()
        .map(|v| v.as_str().expect("every argument is a string").to_owned())
        .collect()
}

#[test]
fn agent_config_claude_desktop_json_runs_confine_mcp() {
    let text = snippet("claude_desktop_config.json");
    let config: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let server = &config["mcpServers"]["confine"];
    assert!(server.is_object(), "mcpServers.confine: {config}");
    let command = server["command"].as_str().expect("command is a string");
    check_invocation(
        "claude_desktop_config.json",
        command,
        &strings(&server["args"]),
    );
}

#[test]
fn agent_config_codex_toml_runs_confine_mcp() {
    let text = snippet("codex_config.toml");
    let config: toml::Table = toml::from_str(&text).expect("valid TOML");
    let server = config
        .get("mcp_servers")
        .and_then(|t| t.get("confine"))
        .and_then(toml::Value::as_table)
        .expect("[mcp_servers.confine]");
    let command = server
        .get("command")
        .and_then(toml::Value::as_str)
        .expect("command");
    let args: Vec<String> = server
        .get("args")
        .and_then(toml::Value::as_array)
        .expect("args")
        .iter()
        .map(|v| v.as_str().expect("every argument is a string").to_owned())
        .collect();
    check_invocation("codex_config.toml", command, &args);
}

#[test]
fn agent_config_claude_code_command_runs_confine_mcp() {
    let text = snippet("claude_code.sh");
    let commands: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(commands.len(), 1, "one command: {commands:?}");
    let words: Vec<&str> = commands[0].split_whitespace().collect();
    assert_eq!(
        words[..5],
        ["claude", "mcp", "add", "confine", "--"],
        "{words:?}"
    );
    let args: Vec<String> = words[6..].iter().map(|w| (*w).to_owned()).collect();
    check_invocation("claude_code.sh", words[5], &args);
}

/// The README shows each snippet verbatim, so the text a reader copies is the text tested.
#[test]
fn agent_config_readme_shows_every_snippet_verbatim() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let section = readme
        .split("\n## Use it from an agent\n")
        .nth(1)
        .expect("a README section `## Use it from an agent`");
    let section = section.split("\n## ").next().unwrap_or(section);
    for (name, fence) in [
        ("claude_code.sh", "sh"),
        ("claude_desktop_config.json", "json"),
        ("codex_config.toml", "toml"),
        ("claude_code_http.sh", "sh"),
        ("mcp_http.json", "json"),
    ] {
        let block = format!("```{fence}\n{}```", snippet(name));
        assert!(
            section.contains(&block),
            "README shows docs/agents/{name} verbatim:\n{block}"
        );
        assert!(
            section.contains(&format!("docs/agents/{name}")),
            "README names {name}"
        );
    }
    for flag in ["--read-only", "--tools", "--sandbox", "--allow-commands"] {
        assert!(section.contains(flag), "README explains {flag}");
    }
    let offered = confine_cli::tools::WORKSPACE_TOOLS.iter();
    for tool in offered.chain(confine_cli::tools::COMMAND_TOOLS) {
        assert!(
            section.contains(&format!("\n| `{tool}` |")),
            "README's table of tools has a row for {tool}"
        );
    }
}

/// The port the HTTP snippets name; the tests serve on a free one and put it in its place.
const SNIPPET_PORT: &str = "8765";

/// `confine mcp <args>` (an HTTP server) started with `env`: the child and its port.
fn start_http(args: &[String], env: &[(&str, &str)]) -> (std::process::Child, u16) {
    use std::io::BufRead as _;
    let mut command = support::confine();
    command
        .args(args)
        .env_remove("CONFINE_HTTP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("run confine");
    let mut reader = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    for _ in 0..8 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
        if let Some(rest) = line.strip_prefix("listening on http://127.0.0.1:") {
            let port = rest.split('/').next().unwrap().parse().unwrap();
            std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
            return (child, port);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{args:?}: no listening line: {seen}");
}

/// The status of an `initialize` POSTed to `url` with `authorization`.
fn initialize_status(url: &str, authorization: Option<&str>) -> u16 {
    use std::io::{Read as _, Write as _};
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (authority, path) = rest.split_once('/').expect("a path");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"agent_configs","version":"0"}}}"#;
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    write!(
        stream,
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n{auth}\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

#[test]
fn agent_config_claude_code_http_starts_a_server_its_add_line_reaches() {
    let text = snippet("claude_code_http.sh");
    let commands: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        commands.len(),
        2,
        "the server, then the registration: {commands:?}"
    );
    let words: Vec<&str> = commands[0].split_whitespace().collect();
    assert_eq!(words[..2], ["confine", "mcp"], "{words:?}");
    let http = format!("127.0.0.1:{SNIPPET_PORT}");
    let token_file = "~/.confine-http-token";
    assert!(
        words.windows(2).any(|w| w == ["--http", http.as_str()]),
        "{words:?}"
    );
    assert!(
        words
            .windows(2)
            .any(|w| w == ["--http-token-file", token_file]),
        "{words:?}"
    );
    assert!(
        words.windows(2).any(|w| w == ["--root", PLACEHOLDER]),
        "{words:?}"
    );
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let file = home.path().join("token");
    let args: Vec<String> = words[1..]
        .iter()
        .map(|w| match *w {
            PLACEHOLDER => workspace.path().display().to_string(),
            w if w == token_file => file.display().to_string(),
            w if w == http => "127.0.0.1:0".to_owned(),
            w => w.to_owned(),
        })
        .collect();
    let (mut child, port) = start_http(&args, &[]);
    let token = std::fs::read_to_string(&file).expect("the token file was made");
    let add = commands[1];
    let prefix = format!(
        "claude mcp add --transport http confine http://127.0.0.1:{SNIPPET_PORT}/mcp --header "
    );
    let header = add.strip_prefix(&prefix).unwrap_or_else(|| panic!("{add}"));
    let header = header
        .trim_matches('"')
        .replace(&format!("$(cat {token_file})"), token.trim());
    let value = header
        .strip_prefix("Authorization: ")
        .expect("an Authorization header");
    let url = format!("http://127.0.0.1:{port}/mcp");
    assert_eq!(initialize_status(&url, Some(value)), 200);
    assert_eq!(initialize_status(&url, None), 401);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn agent_config_mcp_http_json_reaches_a_server_with_the_token() {
    let text = snippet("mcp_http.json");
    let config: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let server = &config["mcpServers"]["confine"];
    assert_eq!(server["type"], "http", "{config}");
    let url = server["url"].as_str().expect("url");
    assert_eq!(url, format!("http://127.0.0.1:{SNIPPET_PORT}/mcp"));
    let header = server["headers"]["Authorization"]
        .as_str()
        .expect("the header");
    let token = "agent-config-token-5b0f6f2f9c2a4d7e8b1a3c5d7e9f1a2b";
    let workspace = tempfile::tempdir().unwrap();
    let args: Vec<String> = ["mcp", "--root"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([workspace.path().display().to_string()])
        .chain(["--http".to_owned(), "127.0.0.1:0".to_owned()])
        .collect();
    let (mut child, port) = start_http(&args, &[("CONFINE_HTTP_TOKEN", token)]);
    let value = header.replace("${CONFINE_HTTP_TOKEN}", token);
    let url = url.replace(SNIPPET_PORT, &port.to_string());
    assert_eq!(initialize_status(&url, Some(&value)), 200);
    assert_eq!(
        initialize_status(&url, Some("Bearer ${CONFINE_HTTP_TOKEN}")),
        401
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn agent_config_files_are_all_tested() {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("docs/agents"))
        .expect("docs/agents")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "claude_code.sh",
            "claude_code_http.sh",
            "claude_desktop_config.json",
            "codex_config.toml",
            "mcp_http.json"
        ],
        "a new snippet needs a test here"
    );
    assert!(Path::new(PLACEHOLDER).is_absolute());
}

#[test]
fn tools_reference_has_a_section_per_tool_and_names_every_token() {
    let text = std::fs::read_to_string(repo().join("docs/TOOLS.md")).expect("docs/TOOLS.md");
    let offered = confine_cli::tools::WORKSPACE_TOOLS.iter();
    for tool in offered.chain(confine_cli::tools::COMMAND_TOOLS) {
        assert!(
            text.contains(&format!("\n## {tool}\n")),
            "docs/TOOLS.md has a section for {tool}"
        );
    }
    for kind in confine_cli::tools::ErrorKind::ALL {
        assert!(
            text.contains(&format!("`{}`", kind.code())),
            "docs/TOOLS.md names the token {}",
            kind.code()
        );
    }
}

/// The flags of `confine mcp --help`, and those the README's table of options names: the same
/// set, so a flag added or dropped changes both.
#[test]
fn readme_flag_table_matches_mcp_help() {
    #[allow(clippy::disallowed_methods)] // reason: the test runs the built binary's --help
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_confine"))
        .args(["mcp", "--help"])
        .output()
        .expect("confine mcp --help");
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let flag_at = |text: &str| -> Option<String> {
        let at = text.find("--")?;
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        (!name.is_empty()).then(|| format!("--{name}"))
    };
    let mut helped: Vec<String> = help
        .lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .filter_map(|l| flag_at(l.trim_start().trim_start_matches("-h, ")))
        .filter(|f| f != "--help")
        .collect();
    helped.sort();
    helped.dedup();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let table = readme
        .split_once("Options, after `confine mcp`:")
        .expect("the README's options table")
        .1;
    let mut listed: Vec<String> = Vec::new();
    for row in table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
    {
        let first = row.split('|').nth(1).unwrap_or_default();
        for part in first.split(" / ") {
            // A flag is written `--name …` (the header's `---` is none).
            if let Some(flag) = part.trim().strip_prefix('`').and_then(flag_at) {
                listed.push(flag);
            }
        }
    }
    listed.sort();
    listed.dedup();
    assert!(helped.len() > 10, "{helped:?}");
    assert_eq!(
        listed, helped,
        "README's options table against confine mcp --help"
    );
}
