//! The presets: `@npm`, `@pypi`, `@crates`, `@github`, each read from where the ecosystem's
//! own client is configured to go, once, when the list is built.
//!
//! No registry's host name is written here: npm and pip are asked (through
//! [`confine_nodeexec::Command`], bounded to 10 s and 1 MiB of output), cargo's configuration
//! and registry cache are read (bounded too). Only GitHub's hosts are written down: GitHub is
//! a forge, not a package registry, and has no client to ask.
//!
//! # The user's configuration, never the workspace's
//!
//! The server is often started inside the workspace, whose files the model writes. The
//! presets read only the user's and the system's configuration:
//!
//! - A client runs with `/` as its working directory ([`CLIENT_DIR`]), never the server's:
//!   Python puts its working directory first on the module path (a `pip/__init__.py` there
//!   would run as the server's user, unsandboxed), npm takes the nearest directory holding a
//!   `package.json` or `node_modules` at or above it as the project and reads its `.npmrc`,
//!   and version managers (pyenv's shims) pick an interpreter from a `.python-version` at or
//!   above it. `/` has no directory above it and only root writes in it; a fresh temporary
//!   directory would not do, as `/tmp` above it is writable by anyone.
//! - Python runs isolated (`python3 -I`): no working or script directory on the path, no
//!   `PYTHON*` variable, no user site directory.
//! - npm runs with `--global`, under which it never reads a project's `.npmrc`, whatever the
//!   working directory; its user and global configuration (`~/.npmrc`, `$PREFIX/etc/npmrc`)
//!   and the embedder's `npm_config_*` variables still count. When the embedder was itself
//!   started by npm (`npm exec`, `npx`, `npm run`: `npm_config_local_prefix` is set), those
//!   variables are npm's export of the project's configuration, `.npmrc` included, and none
//!   of them is passed: npm reads the user's and the global files itself.
//! - cargo is not run: its configuration is read from `$CARGO_HOME` (else `~/.cargo`) alone,
//!   never from a `.cargo/config.toml` at or above a working directory. A relative
//!   `CARGO_HOME` or `HOME` (which would name a directory under the server's working
//!   directory) is not used.
//!
//! The hosts a preset yields are the allow list's like any entry's, but an IP literal among
//! them is not the embedder's word for an address inside: the proxy still refuses it when it
//! is loopback, private, link-local or any other refused class, unless the embedder listed
//! that literal itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::entry::{Entry, EntryError};

/// How long a preset's client may run.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of a client's output (or of a configuration file) is read.
const CLIENT_OUTPUT: usize = 1 << 20;
/// How many registry cache directories are looked at.
const MAX_CACHE_DIRS: usize = 64;
/// The working directory of every preset client: outside any workspace, nothing above it.
pub(crate) const CLIENT_DIR: &str = "/";

/// GitHub's web, API, archive and raw-content hosts.
const GITHUB_HOSTS: &[&str] = &[
    "github.com",
    "api.github.com",
    "codeload.github.com",
    "raw.githubusercontent.com",
    "objects.githubusercontent.com",
];

/// The environment the preset clients are looked up in (`PATH`) and run with, and the
/// variables the presets read themselves (`PIP_INDEX_URL`, `PIP_EXTRA_INDEX_URL`,
/// `CARGO_HOME`, `HOME`).
///
/// A client gets only the variables it needs to find its configuration: `PATH`, `HOME`,
/// `USER`, `LANG`, `LC_*`, `TZ`, `XDG_CONFIG_HOME`, `npm_config_*` / `NPM_CONFIG_*` (none of
/// them when `npm_config_local_prefix` says npm started the embedder and exported a
/// project's configuration through them), `PIP_*`, `PYENV_*`, `VIRTUAL_ENV`.
#[derive(Clone, Debug, Default)]
pub struct ClientEnv {
    vars: Vec<(String, String)>,
}

impl ClientEnv {
    /// No variable at all.
    pub fn new() -> Self {
        Self::default()
    }

    /// The embedding process's environment (variables that are not UTF-8 are left out).
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    /// Sets one variable (replacing an earlier value).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut Self {
        let name = name.into();
        self.vars.retain(|(k, _)| *k != name);
        self.vars.push((name, value.into()));
        self
    }

    /// Removes one variable.
    pub fn remove(&mut self, name: &str) -> &mut Self {
        self.vars.retain(|(k, _)| k != name);
        self
    }

    /// One variable's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn for_client(&self) -> impl Iterator<Item = &(String, String)> {
        // npm exports its whole configuration, a project's `.npmrc` included, as
        // `npm_config_*` to what it starts, with `npm_config_local_prefix` naming the project.
        let npm_exported = self
            .vars
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("npm_config_local_prefix"));
        self.vars.iter().filter(move |(k, _)| {
            let npm = k
                .get(..11)
                .is_some_and(|p| p.eq_ignore_ascii_case("npm_config_"));
            matches!(
                k.as_str(),
                "PATH" | "HOME" | "USER" | "LANG" | "TZ" | "XDG_CONFIG_HOME" | "VIRTUAL_ENV"
            ) || (npm && !npm_exported)
                || ["LC_", "PIP_", "PYENV_"].iter().any(|p| k.starts_with(p))
        })
    }

    /// An absolute path from variable `name`; a relative one would be read from the server's
    /// working directory, which may be the workspace.
    fn absolute(&self, name: &str) -> Option<PathBuf> {
        self.get(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// The absolute path of `program` in `PATH`, if it is there as an executable file.
    fn find(&self, program: &str) -> Option<PathBuf> {
        confine_nodeexec::find_on_path(program, self.get("PATH")?)
    }
}

/// Expands `@name`.
pub(crate) fn resolve(name: &str, env: &ClientEnv) -> Result<Vec<Entry>, EntryError> {
    let entries = match name {
        "npm" => npm(env)?,
        "pypi" => pypi(env)?,
        "crates" => crates(env)?,
        "github" => GITHUB_HOSTS
            .iter()
            .map(|h| Entry::Host {
                name: (*h).to_owned(),
                port: None,
            })
            .collect(),
        _ => return Err(EntryError::UnknownPreset(format!("@{name}"))),
    };
    let mut unique: Vec<Entry> = Vec::new();
    for e in entries {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    if unique.is_empty() {
        return Err(unreadable(name, "no registry host could be read"));
    }
    Ok(unique)
}

fn unreadable(preset: &str, why: impl Into<String>) -> EntryError {
    EntryError::Unreadable {
        preset: preset.to_owned(),
        why: why.into(),
    }
}

fn missing(preset: &str, client: &str) -> EntryError {
    EntryError::ClientMissing {
        preset: preset.to_owned(),
        client: client.to_owned(),
    }
}

/// The host (and explicit port) of a registry URL: `https://host[:port]/…`, also with cargo's
/// `sparse+` / `registry+` and git's `git+` prefixes. Other schemes have no host for the proxy.
pub(crate) fn url_entry(url: &str) -> Option<Entry> {
    let url = url.trim();
    let url = ["sparse+", "registry+", "git+"]
        .iter()
        .find_map(|p| url.strip_prefix(p))
        .unwrap_or(url);
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    match Entry::parse(authority).ok()? {
        Entry::Suffix { .. } => None,
        e => Some(e),
    }
}

/// Runs a preset's client (through nodeexec: contained, bounded, an allowlisted environment)
/// and returns its stdout, or `None` when it did not exit 0 in time with its whole output.
fn run_client(program: &Path, args: &[&str], env: &ClientEnv) -> Option<String> {
    let mut cmd = confine_nodeexec::Command::new(program);
    cmd.args(args)
        .current_dir(CLIENT_DIR)
        .inherit_no_env()
        .timeout(CLIENT_TIMEOUT)
        .output_cap(CLIENT_OUTPUT);
    for (k, v) in env.for_client() {
        cmd.env(k, v);
    }
    // The list is built once, maybe inside the embedder's runtime, maybe outside any.
    let outcome = cmd.run_blocking()?.ok()?;
    (outcome.exit_code == Some(0) && !outcome.stdout.truncated).then_some(outcome.stdout.text)
}

fn npm(env: &ClientEnv) -> Result<Vec<Entry>, EntryError> {
    let npm = env.find("npm").ok_or_else(|| missing("npm", "npm"))?;
    // One start of npm where its list names the registry (it does, npm 7 on): starting npm
    // costs most of a second, paid by every server that asks for the preset.
    // `--global`: npm reads no project `.npmrc` then, only the user's and the global one.
    let list = run_client(&npm, &["config", "list", "--json", "--global"], env)
        .ok_or_else(|| unreadable("npm", "`npm config list --json` failed"))?;
    let list: serde_json::Value = serde_json::from_str(&list)
        .map_err(|_| unreadable("npm", "`npm config list --json` is not JSON"))?;
    let mut found = Vec::new();
    match list.get("registry").and_then(serde_json::Value::as_str) {
        Some(registry) => found.extend(url_entry(registry.trim())),
        None => {
            let registry = run_client(&npm, &["config", "get", "registry", "--global"], env)
                .ok_or_else(|| unreadable("npm", "`npm config get registry` failed"))?;
            found.extend(url_entry(registry.trim()));
        }
    }
    if let Some(object) = list.as_object() {
        for (key, value) in object {
            if key.starts_with('@')
                && key.ends_with(":registry")
                && let Some(url) = value.as_str()
            {
                found.extend(url_entry(url));
            }
        }
    }
    if found.is_empty() {
        return Err(unreadable("npm", "npm reports no registry"));
    }
    Ok(found)
}

fn pypi(env: &ClientEnv) -> Result<Vec<Entry>, EntryError> {
    let mut found = Vec::new();
    for var in ["PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"] {
        for url in env.get(var).unwrap_or_default().split_whitespace() {
            found.extend(url_entry(url));
        }
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let python = env
        .find("python3")
        .ok_or_else(|| missing("pypi", "python3"))?;
    let config = run_client(&python, &["-I", "-m", "pip", "config", "list"], env)
        .ok_or_else(|| missing("pypi", "pip"))?;
    for line in config.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.ends_with(".index-url") || key.ends_with(".extra-index-url") {
            for url in value.trim().trim_matches(['\'', '"']).split_whitespace() {
                found.extend(url_entry(url));
            }
        }
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let defaults = run_client(
        &python,
        &[
            "-I",
            "-c",
            "from pip._internal.models.index import PyPI\n\
             print(PyPI.simple_url)\nprint(PyPI.file_storage_domain)",
        ],
        env,
    )
    .ok_or_else(|| unreadable("pypi", "pip's default index cannot be read"))?;
    let mut lines = defaults.lines();
    found.extend(lines.next().and_then(url_entry));
    if let Some(Ok(Entry::Host { name, port })) = lines.next().map(|d| Entry::parse(d.trim())) {
        found.push(Entry::Host { name, port });
    }
    Ok(found)
}

/// Reads at most [`CLIENT_OUTPUT`] bytes of a file that may be missing.
fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(CLIENT_OUTPUT as u64)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

fn crates(env: &ClientEnv) -> Result<Vec<Entry>, EntryError> {
    let home = match env.get("CARGO_HOME") {
        Some(_) => env.absolute("CARGO_HOME"),
        None => env.absolute("HOME").map(|h| h.join(".cargo")),
    };
    let home = home
        .filter(|p| p.is_dir())
        .ok_or_else(|| missing("crates", "cargo"))?;
    // Configured registries and source replacement.
    let mut configured = Vec::new();
    for file in ["config.toml", "config"] {
        let Some(text) = read_bounded(&home.join(file)) else {
            continue;
        };
        let doc: toml::Table = text
            .parse()
            .map_err(|_| unreadable("crates", format!("cargo's {file} is not valid TOML")))?;
        for (table, key) in [("registries", "index"), ("source", "registry")] {
            let Some(tables) = doc.get(table).and_then(toml::Value::as_table) else {
                continue;
            };
            for value in tables.values() {
                if let Some(url) = value.get(key).and_then(toml::Value::as_str) {
                    configured.extend(url_entry(url));
                }
            }
        }
    }
    // The registry cache: `index/HOST-HASH/config.json` names the download and API hosts.
    let mut cached: Vec<(Entry, Vec<Entry>)> = Vec::new();
    if let Ok(dirs) = std::fs::read_dir(home.join("registry/index")) {
        for dir in dirs.filter_map(Result::ok).take(MAX_CACHE_DIRS) {
            let name = dir.file_name().to_string_lossy().into_owned();
            let Some((host, _hash)) = name.rsplit_once('-') else {
                continue;
            };
            let Ok(index @ Entry::Host { .. }) = Entry::parse(host) else {
                continue;
            };
            let mut hosts = Vec::new();
            if let Some(text) = read_bounded(&dir.path().join("config.json"))
                && let Ok(config) = serde_json::from_str::<serde_json::Value>(&text)
            {
                for key in ["dl", "api"] {
                    if let Some(url) = config.get(key).and_then(serde_json::Value::as_str) {
                        hosts.extend(url_entry(url));
                    }
                }
            }
            cached.push((index, hosts));
        }
    }
    let same_host = |a: &Entry, b: &Entry| match (a, b) {
        (Entry::Host { name: x, .. }, Entry::Host { name: y, .. }) => x == y,
        _ => false,
    };
    let mut found = Vec::new();
    if configured.is_empty() {
        for (index, hosts) in cached {
            found.push(index);
            found.extend(hosts);
        }
    } else {
        for entry in configured {
            let extra: Vec<Entry> = cached
                .iter()
                .filter(|(index, _)| same_host(index, &entry))
                .flat_map(|(_, hosts)| hosts.iter().cloned())
                .collect();
            found.push(entry);
            found.extend(extra);
        }
    }
    if found.is_empty() {
        return Err(unreadable(
            "crates",
            "no registry in cargo's configuration or its registry cache",
        ));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_entry_takes_the_authority_of_http_urls_only() {
        let host = |n: &str, p: Option<u16>| {
            Some(Entry::Host {
                name: n.into(),
                port: p,
            })
        };
        assert_eq!(
            url_entry("https://Registry.Example.Test/"),
            host("registry.example.test", None)
        );
        assert_eq!(
            url_entry("sparse+https://index.example.test:8443/x/"),
            host("index.example.test", Some(8443))
        );
        assert_eq!(
            url_entry("https://user:pw@r.example.test/a"),
            host("r.example.test", None)
        );
        assert_eq!(url_entry("ssh://git@r.example.test/a"), None);
        assert_eq!(url_entry("file:///srv/index"), None);
        assert_eq!(url_entry("not a url"), None);
    }
}
