//! Real clients through the network policy: `npm install` of a real package from the npm
//! registry through `run_command` under `--sandbox --allow-net @npm`, and the same command
//! refused under `--sandbox --allow-net @crates` with the record naming the refusal; `cargo
//! fetch` of a real crate through `--allow-net @crates`, and refused under `@npm`.
//!
//! These reach the package registries through their ordinary clients (nothing else: every
//! other host is refused by the proxy, and the registry's host is asked of the client, never
//! written here). Each run starts from an empty cache inside the workspace.

use std::path::Path;

use serde_json::{Value, json};

use crate::support;
use support::census_flags;

fn run_command(root: &Path, flags: &[&str], command: &str) -> Value {
    let line = json!({"id": 1, "name": "run_command",
        "arguments": {"command": command, "timeoutMs": 240_000}})
    .to_string();
    let mut cmd = support::confine();
    cmd.args([
        "call",
        "--allow-commands",
        "--command-max-timeout-ms",
        "240000",
        "--root",
    ])
    .arg(root)
    .args(census_flags())
    .args(flags)
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let out = support::finish_with_input(cmd.spawn().unwrap(), &(line + "\n"));
    let answer: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    answer["content"].clone()
}

/// The host of npm's configured registry, as npm names it.
fn npm_registry_host() -> String {
    #[allow(clippy::disallowed_methods)] // asks the client, outside any tool
    let out = std::process::Command::new("npm")
        .args(["config", "get", "registry"])
        .output()
        .expect("npm runs");
    let url = String::from_utf8(out.stdout).unwrap();
    let rest = url.trim().split("://").nth(1).unwrap().to_owned();
    rest.split(['/', ':']).next().unwrap().to_lowercase()
}

const NPM: &str = "export HOME=$PWD/.home npm_config_cache=$PWD/.npm-cache; \
    npm install --no-audit --no-fund --no-update-notifier is-number@7.0.0 >npm.log 2>&1; s=$?; \
    tail -5 npm.log; exit $s";

#[test]
fn npm_install_goes_through_the_npm_preset_and_is_refused_under_crates() {
    let host = npm_registry_host();
    let ws = tempfile::tempdir().unwrap();
    let out = run_command(ws.path(), &["--sandbox", "--allow-net", "@npm"], NPM);
    assert_eq!(out["exitCode"], 0, "{out}");
    assert!(
        ws.path()
            .join("node_modules/is-number/package.json")
            .exists()
    );
    let network = out["network"].as_array().unwrap();
    assert!(
        network
            .iter()
            .any(|d| d["host"] == host.as_str() && d["allowed"] == true),
        "{out}"
    );
    assert!(network.iter().all(|d| d["allowed"] == true), "{out}");

    let ws = tempfile::tempdir().unwrap();
    let out = run_command(ws.path(), &["--sandbox", "--allow-net", "@crates"], NPM);
    assert_ne!(out["exitCode"], 0, "{out}");
    assert!(!ws.path().join("node_modules/is-number").exists());
    assert_eq!(
        out["network"][0],
        json!({"host": host, "port": 443, "allowed": false, "reason": "not on the allow list"}),
        "{out}"
    );
}

const CARGO: &str = "export CARGO_HOME=$PWD/.cargo-home; \
    cargo init -q --vcs none --name probe . || exit 9; \
    echo 'itoa = \"1\"' >> Cargo.toml; \
    cargo fetch >cargo.log 2>&1; s=$?; tail -5 cargo.log; ls .cargo-home/registry/cache/*/ 2>/dev/null; exit $s";

#[test]
fn cargo_fetch_goes_through_the_crates_preset_and_is_refused_under_npm() {
    let ws = tempfile::tempdir().unwrap();
    let out = run_command(ws.path(), &["--allow-net", "@crates"], CARGO);
    assert_eq!(out["exitCode"], 0, "{out}");
    assert!(out["stdout"].as_str().unwrap().contains("itoa-1."), "{out}");
    let network = out["network"].as_array().unwrap();
    assert!(
        !network.is_empty() && network.iter().all(|d| d["allowed"] == true),
        "{out}"
    );

    let ws = tempfile::tempdir().unwrap();
    let out = run_command(ws.path(), &["--allow-net", "@npm"], CARGO);
    assert_ne!(out["exitCode"], 0, "{out}");
    let network = out["network"].as_array().unwrap();
    assert!(
        network
            .iter()
            .any(|d| d["allowed"] == false && d["reason"] == "not on the allow list"),
        "{out}"
    );
}
