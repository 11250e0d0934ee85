//! Toolchains the user installed in the home, and the registry addresses of their clients,
//! as a sandboxed server's children see them.
//!
//! The sandbox keeps the home unreadable. Programs installed under it would then fail
//! (`cargo` from rustup, Node.js from nvm, Python from pyenv, what pipx puts in
//! `~/.local/bin`), and users would open whole trees with `--sandbox-read`. Instead,
//! [`HomeTools::discover`] finds, once per server, what the server's own environment runs
//! from the home, and opens exactly those trees, read-only and executable, at their real
//! paths:
//!
//! * each directory of the server's `PATH` that lies beneath the home (`~/.cargo/bin`,
//!   `~/.local/bin`, `~/.nvm/versions/node/v22/bin`, `~/bin`, …), and for each symbolic link
//!   in it that leads elsewhere beneath the home, the tree the link's target runs from (its
//!   directory, or the directory above a `bin`: a pipx virtual environment);
//! * `RUSTUP_HOME` (or `~/.rustup`): its toolchains, which the rustup proxies in
//!   `~/.cargo/bin` run; `CARGO_HOME/bin` (or `~/.cargo/bin`), and its package caches
//!   `registry` and `git` (read through the private cargo home's links, below);
//! * `NVM_DIR/versions` (or `~/.nvm/versions`) and `PYENV_ROOT` (or `~/.pyenv`).
//!
//! Never opened, whatever a link says: the home itself, a directory above one of the home's
//! usual secrets ([`SECRET_PLACES`]), or a secret place itself. Credential files within the
//! trees stay unreadable because the trees opened are the program trees, not their parents:
//! `$CARGO_HOME/credentials.toml` lies beside `bin`, not beneath it.
//!
//! The children's variables follow: `RUSTUP_HOME` and `PYENV_ROOT` name the real trees (the
//! children's `HOME` is private, so the defaults would miss them); `CARGO_HOME` names a
//! private one (`.cargo` in the private home) seeded from the user's ([`seed_cargo_home`]):
//! its `registry` and `git` caches are directories of the server's own whose entries are
//! links to the user's (read through them, read-only), so a crate cargo extracts or
//! downloads lands in the server's layer, never in the user's cache, and its `config.toml`
//! holds the user's registry addresses (source replacement, alternative registries' index)
//! and never a token. npm and pip get their registry addresses the same way
//! ([`registry_files`]): the private home's `.npmrc` holds `registry` and `@scope:registry`
//! lines only, and `PIP_INDEX_URL`/`PIP_EXTRA_INDEX_URL` carry pip's index addresses with
//! any user name and password removed.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// The home's usual secret places: never opened, nor anything in them, nor any directory
/// above them (so neither `~/.config` nor `~/.local` as a whole).
pub const SECRET_PLACES: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".docker",
    ".kube",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".config/gh",
    ".config/hub",
    ".config/gcloud",
    ".config/git/credentials",
    ".config/containers/auth.json",
    ".local/share/keyrings",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
];

/// The most entries of one `PATH` directory looked at for links, and the most entries
/// linked while seeding one cache directory.
const MAX_ENTRIES: usize = 20_000;

/// What a server's sandboxed children may run from the home (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HomeTools {
    /// The trees opened, read-only and executable, each with why.
    pub readable: Vec<(PathBuf, String)>,
    /// Variables the children get.
    pub env: Vec<(String, OsString)>,
    /// The user's `CARGO_HOME`, when it lies beneath the home (its caches are seeded).
    pub cargo_home: Option<PathBuf>,
}

impl HomeTools {
    /// What `var` (the server's environment) runs from the home `$HOME`.
    pub fn discover(var: &dyn Fn(&str) -> Option<OsString>) -> Self {
        let mut tools = Self::default();
        let Some(home) = var("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .and_then(|h| std::fs::canonicalize(h).ok())
        else {
            return tools;
        };
        let place = |name: &str, default: &str| -> Option<PathBuf> {
            let path = var(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .unwrap_or_else(|| home.join(default));
            std::fs::canonicalize(path)
                .ok()
                .filter(|p| p.is_dir() && p.starts_with(&home))
        };
        if let Some(rustup) = place("RUSTUP_HOME", ".rustup") {
            tools.open(&home, &rustup, "rustup's toolchains (RUSTUP_HOME)");
            tools.env.push(("RUSTUP_HOME".into(), rustup.into()));
        }
        if let Some(cargo) = place("CARGO_HOME", ".cargo") {
            let bin = cargo.join("bin");
            if bin.is_dir() {
                tools.open(&home, &bin, "cargo's programs (CARGO_HOME/bin)");
            }
            // Read through the links of the private cargo home's caches (`seed_cargo_home`).
            for cache in ["registry", "git"] {
                let tree = cargo.join(cache);
                if tree.is_dir() {
                    tools.open(&home, &tree, "cargo's package cache, read-only");
                }
            }
            tools.cargo_home = Some(cargo);
        }
        if let Some(nvm) = place("NVM_DIR", ".nvm") {
            let versions = nvm.join("versions");
            if versions.is_dir() {
                tools.open(
                    &home,
                    &versions,
                    "nvm's Node.js versions (NVM_DIR/versions)",
                );
            }
        }
        if let Some(pyenv) = place("PYENV_ROOT", ".pyenv") {
            tools.open(&home, &pyenv, "pyenv's Python versions (PYENV_ROOT)");
            tools.env.push(("PYENV_ROOT".into(), pyenv.into()));
        }
        if let Some(path) = var("PATH") {
            for dir in std::env::split_paths(&path).filter(|d| d.is_absolute()) {
                let Ok(dir) = std::fs::canonicalize(&dir) else {
                    continue;
                };
                if !dir.starts_with(&home) || !dir.is_dir() {
                    continue;
                }
                tools.open(&home, &dir, "a PATH directory in the home");
                tools.follow_links(&home, &dir);
            }
        }
        tools
    }

    /// Open `tree` unless it is already, or it is not safe to.
    fn open(&mut self, home: &Path, tree: &Path, why: &str) {
        if !safe_to_open(home, tree) || self.readable.iter().any(|(p, _)| tree.starts_with(p)) {
            return;
        }
        self.readable.retain(|(p, _)| !p.starts_with(tree));
        self.readable.push((tree.to_owned(), why.to_owned()));
    }

    /// Open the trees that the links in `dir` lead to, beneath the home.
    fn follow_links(&mut self, home: &Path, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten().take(MAX_ENTRIES) {
            if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            let Ok(target) = std::fs::canonicalize(entry.path()) else {
                continue;
            };
            if !target.starts_with(home) || target.starts_with(dir) {
                continue;
            }
            let Some(parent) = target.parent() else {
                continue;
            };
            // A program in a `bin` runs from the prefix above it (a virtual environment).
            let tree = match (parent.file_name(), parent.parent()) {
                (Some(name), Some(prefix)) if name == "bin" => prefix,
                _ => parent,
            };
            self.open(home, tree, "the tree a PATH program in the home runs from");
        }
    }
}

/// Whether `tree` may be opened: beneath `home`, not the home, no secret place above, in or
/// beneath it.
fn safe_to_open(home: &Path, tree: &Path) -> bool {
    let Ok(rel) = tree.strip_prefix(home) else {
        return false;
    };
    if rel.as_os_str().is_empty() {
        return false;
    }
    SECRET_PLACES.iter().all(|secret| {
        let secret = Path::new(secret);
        !secret.starts_with(rel) && !rel.starts_with(secret)
    })
}

/// Make `private` (the children's `CARGO_HOME`, in the private home) from the user's `real`
/// one: `registry` and `git` as directories of our own whose entries, two levels down
/// (`registry/src/<index>/<crate>`, `git/db/<repository>`), are links to the user's; a
/// `config.toml` with the user's registry addresses and no token. Bounded: past
/// [`MAX_ENTRIES`] links in one directory the rest is left out (cargo then fetches or
/// fails offline, into the private layer either way).
pub fn seed_cargo_home(private: &Path, real: &Path) -> io::Result<()> {
    std::fs::create_dir_all(private)?;
    for cache in ["registry", "git"] {
        let from = real.join(cache);
        if from.is_dir() {
            link_entries(&from, &private.join(cache), 2)?;
        }
    }
    let config = ["config.toml", "config"]
        .iter()
        .find_map(|name| std::fs::read_to_string(real.join(name)).ok());
    if let Some(text) = config {
        let kept = cargo_registry_config(&text);
        if !kept.is_empty() {
            std::fs::write(private.join("config.toml"), kept)?;
        }
    }
    Ok(())
}

/// `to` made as a directory mirroring `from`: `depth` levels of directories, then links.
fn link_entries(from: &Path, to: &Path, depth: u32) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)?.flatten().take(MAX_ENTRIES) {
        let source = entry.path();
        let target = to.join(entry.file_name());
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if depth > 0 && is_dir {
            link_entries(&source, &target, depth - 1)?;
        } else if !target.exists() {
            std::os::unix::fs::symlink(&source, &target)?;
        }
    }
    Ok(())
}

/// The registry addresses of a cargo configuration: every `[source.*]` and
/// `[registries.*]` table's address keys, never `token` nor a credential provider.
pub fn cargo_registry_config(text: &str) -> String {
    const KEPT: &[&str] = &[
        "registry",
        "replace-with",
        "local-registry",
        "directory",
        "git",
        "branch",
        "tag",
        "rev",
        "index",
        "protocol",
    ];
    let mut out = String::new();
    let mut keep_section = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            let name = trimmed.trim_matches(|c| c == '[' || c == ']').trim();
            keep_section = (name.starts_with("source.") || name.starts_with("registries."))
                && !name.contains('[');
            if keep_section {
                out.push_str(trimmed);
                out.push('\n');
            }
            continue;
        }
        if !keep_section {
            continue;
        }
        if let Some((key, value)) = trimmed.split_once('=')
            && KEPT.contains(&key.trim())
        {
            out.push_str(&format!(
                "{} = {}\n",
                key.trim(),
                strip_userinfo(value.trim())
            ));
        }
    }
    out
}

/// The private home's `.npmrc` (its `registry` and `@scope:registry` lines, no credential)
/// and pip's variables (`PIP_INDEX_URL`, `PIP_EXTRA_INDEX_URL`), from the user's
/// configuration in `home`.
pub fn registry_files(home: &Path) -> (String, Vec<(String, OsString)>) {
    let mut npmrc = String::new();
    if let Ok(text) = std::fs::read_to_string(home.join(".npmrc")) {
        for line in text.lines() {
            if let Some((key, value)) = line.trim().split_once('=') {
                let key = key.trim();
                if key == "registry" || (key.starts_with('@') && key.ends_with(":registry")) {
                    npmrc.push_str(&format!("{key}={}\n", strip_userinfo(value.trim())));
                }
            }
        }
    }
    let mut env = Vec::new();
    for conf in [".config/pip/pip.conf", ".pip/pip.conf"] {
        let Ok(text) = std::fs::read_to_string(home.join(conf)) else {
            continue;
        };
        for line in text.lines() {
            if let Some((key, value)) = line.trim().split_once('=') {
                let var = match key.trim() {
                    "index-url" => "PIP_INDEX_URL",
                    "extra-index-url" => "PIP_EXTRA_INDEX_URL",
                    _ => continue,
                };
                if !env.iter().any(|(v, _): &(String, OsString)| v == var) {
                    env.push((var.to_owned(), strip_userinfo(value.trim()).into()));
                }
            }
        }
        break;
    }
    (npmrc, env)
}

/// `value` with the user name and password of any URL in it removed
/// (`https://u:p@host/` is `https://host/`).
pub fn strip_userinfo(value: &str) -> String {
    value
        .split(' ')
        .map(|word| match word.split_once("://") {
            Some((scheme, rest)) => {
                let end = rest.find('/').unwrap_or(rest.len());
                let authority = &rest[..end];
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                format!("{scheme}://{host}{}", &rest[end..])
            }
            None => word.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_os_str().to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn the_program_trees_open_and_the_secrets_beside_them_do_not() {
        let home = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(home.path()).unwrap();
        for dir in [
            ".cargo/bin",
            ".rustup/toolchains/stable/bin",
            ".local/bin",
            ".local/share/pipx/venvs/black/bin",
            ".ssh",
            "bin",
        ] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        std::fs::write(home.join(".cargo/credentials.toml"), "token").unwrap();
        // A pipx program: a link into a virtual environment under .local/share.
        std::os::unix::fs::symlink(
            home.join(".local/share/pipx/venvs/black/bin/black"),
            home.join(".local/bin/black"),
        )
        .unwrap();
        std::fs::write(home.join(".local/share/pipx/venvs/black/bin/black"), "").unwrap();
        // A link that would open the secrets' parent: refused.
        std::fs::write(home.join(".ssh/tool"), "").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh/tool"), home.join("bin/tool")).unwrap();
        std::fs::write(home.join("plain"), "").unwrap();
        std::os::unix::fs::symlink(home.join("plain"), home.join("bin/plain")).unwrap();
        let path = std::env::join_paths([
            home.join(".cargo/bin"),
            home.join(".local/bin"),
            home.join("bin"),
            PathBuf::from("/usr/bin"),
        ])
        .unwrap();
        let path = PathBuf::from(path);
        let tools = HomeTools::discover(&env_of(&[("HOME", &home), ("PATH", &path)]));
        let opened: Vec<&Path> = tools.readable.iter().map(|(p, _)| p.as_path()).collect();
        assert!(
            opened.contains(&home.join(".rustup").as_path()),
            "{opened:?}"
        );
        assert!(
            opened.contains(&home.join(".cargo/bin").as_path()),
            "{opened:?}"
        );
        assert!(
            opened.contains(&home.join(".local/bin").as_path()),
            "{opened:?}"
        );
        assert!(
            opened.contains(&home.join(".local/share/pipx/venvs/black").as_path()),
            "{opened:?}"
        );
        assert!(opened.contains(&home.join("bin").as_path()), "{opened:?}");
        // Never the home, a secret place, the credentials' directory or a parent of secrets.
        for path in &opened {
            assert!(safe_to_open(&home, path), "{path:?}");
            assert!(!home.join(".cargo/credentials.toml").starts_with(path));
            assert!(!home.join(".ssh/tool").starts_with(path));
        }
        assert!(!opened.contains(&home.as_path()));
        assert_eq!(
            tools.cargo_home.as_deref(),
            Some(home.join(".cargo").as_path())
        );
        assert!(
            tools
                .env
                .contains(&("RUSTUP_HOME".into(), home.join(".rustup").into()))
        );
    }

    #[test]
    fn nothing_opens_outside_the_home_or_at_it() {
        let home = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(home.path()).unwrap();
        assert!(!safe_to_open(&home, &home));
        assert!(!safe_to_open(&home, Path::new("/usr")));
        assert!(!safe_to_open(&home, &home.join(".local")));
        assert!(!safe_to_open(&home, &home.join(".config/gh")));
        assert!(safe_to_open(&home, &home.join(".local/bin")));
        let tools = HomeTools::discover(&env_of(&[("HOME", &home), ("PATH", &home)]));
        assert!(tools.readable.is_empty(), "{tools:?}");
    }

    #[test]
    fn registry_addresses_pass_and_tokens_do_not() {
        let cargo = "[source.crates-io]\nreplace-with = \"mirror\"\n\
                     [source.mirror]\nregistry = \"sparse+https://u:SECRET@mirror.invalid/idx/\"\n\
                     [registries.corp]\nindex = \"https://corp.invalid/git/index\"\ntoken = \"SECRET\"\n\
                     [registry]\ntoken = \"SECRET\"\nglobal-credential-providers = [\"x\"]\n\
                     [build]\njobs = 2\n";
        let kept = cargo_registry_config(cargo);
        assert!(!kept.contains("SECRET"), "{kept}");
        assert!(!kept.contains("jobs"), "{kept}");
        assert!(kept.contains("replace-with = \"mirror\""), "{kept}");
        assert!(
            kept.contains("registry = \"sparse+https://mirror.invalid/idx/\""),
            "{kept}"
        );
        assert!(kept.contains("[registries.corp]\nindex ="), "{kept}");

        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(".npmrc"),
            "registry=https://npm.invalid/\n@corp:registry=https://corp.invalid/npm/\n\
             //npm.invalid/:_authToken=SECRET\nemail=a@b.invalid\n_auth=SECRET\n",
        )
        .unwrap();
        std::fs::create_dir_all(home.path().join(".config/pip")).unwrap();
        std::fs::write(
            home.path().join(".config/pip/pip.conf"),
            "[global]\nindex-url = https://me:SECRET@pypi.invalid/simple\n",
        )
        .unwrap();
        let (npmrc, env) = registry_files(home.path());
        assert_eq!(
            npmrc,
            "registry=https://npm.invalid/\n@corp:registry=https://corp.invalid/npm/\n"
        );
        assert_eq!(
            env,
            vec![(
                "PIP_INDEX_URL".to_owned(),
                OsString::from("https://pypi.invalid/simple")
            )]
        );
    }

    #[test]
    fn the_private_cargo_home_links_the_caches_and_writes_land_in_it() {
        let real = tempfile::tempdir().unwrap();
        let private = tempfile::tempdir().unwrap();
        let src = real.path().join("registry/src/idx/serde-1.0.0");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("lib.rs"), "// serde").unwrap();
        std::fs::write(real.path().join("credentials.toml"), "SECRET").unwrap();
        let cargo = private.path().join(".cargo");
        seed_cargo_home(&cargo, real.path()).unwrap();
        let linked = cargo.join("registry/src/idx/serde-1.0.0");
        assert!(std::fs::symlink_metadata(&linked).unwrap().is_symlink());
        assert_eq!(
            std::fs::read_to_string(linked.join("lib.rs")).unwrap(),
            "// serde"
        );
        // The index directory is ours: a new crate lands beside the links, not in the user's.
        assert!(
            !std::fs::symlink_metadata(cargo.join("registry/src/idx"))
                .unwrap()
                .is_symlink()
        );
        std::fs::create_dir(cargo.join("registry/src/idx/new-0.1.0")).unwrap();
        assert!(!real.path().join("registry/src/idx/new-0.1.0").exists());
        assert!(!cargo.join("credentials.toml").exists());
    }
}
