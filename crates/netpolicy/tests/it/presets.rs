//! The presets, read from fake clients (scripts first on `PATH`, a made-up `CARGO_HOME`),
//! a missing client, and once from the real npm.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use confine_netpolicy::{AllowList, ClientEnv, Entry, EntryError};

fn host(name: &str, port: Option<u16>) -> Entry {
    Entry::Host {
        name: name.into(),
        port,
    }
}

/// A directory for fake clients and an environment whose `PATH` is that directory alone.
fn fake_env(tmp: &Path) -> ClientEnv {
    let bin = tmp.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mut env = ClientEnv::new();
    env.set("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .set("HOME", tmp.display().to_string());
    env
}

fn fake_client(tmp: &Path, name: &str, script: &str) {
    let path = tmp.join("bin").join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// An environment in which no client can be found.
fn bare_env(tmp: &Path) -> ClientEnv {
    let empty = tmp.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let mut env = ClientEnv::new();
    env.set("PATH", empty.display().to_string())
        .set("HOME", empty.display().to_string());
    env
}

const FAKE_NPM: &str = r#"case "$1 $2" in
"config get") [ "$3" = registry ] && echo "https://Registry.Example.Test/" ;;
"config list") echo '{"registry":"https://registry.example.test/","@corp:registry":"https://npm.corp.example.test:8443/x/","//npm.corp.example.test/:_authToken":"secret","cache":"/tmp"}' ;;
*) exit 3 ;;
esac"#;

#[test]
fn npm_preset_asks_npm_for_its_registry_and_scopes() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    fake_client(tmp.path(), "npm", FAKE_NPM);
    let list = AllowList::build_with_env(&["@npm", "other.example.test"], &env).unwrap();
    assert_eq!(
        list.entries(),
        [
            host("registry.example.test", None),
            host("npm.corp.example.test", Some(8443)),
            host("other.example.test", None),
        ]
    );
    assert_eq!(
        list.presets_resolved(),
        [(
            "@npm".to_owned(),
            vec![
                "registry.example.test".to_owned(),
                "npm.corp.example.test:8443".to_owned()
            ]
        )]
    );
    assert!(list.allows("registry.example.test", 443));
    assert!(list.allows("npm.corp.example.test", 8443));
}

#[test]
fn npm_preset_without_npm_names_the_preset() {
    let tmp = tempfile::tempdir().unwrap();
    let err = AllowList::build_with_env(&["@npm"], &bare_env(tmp.path())).unwrap_err();
    assert!(matches!(err, EntryError::ClientMissing { .. }), "{err:?}");
    assert_eq!(err.to_string(), "--allow-net @npm: npm is not installed");
}

#[test]
fn npm_preset_whose_client_fails_names_the_preset() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    fake_client(tmp.path(), "npm", "echo broken >&2; exit 1");
    let err = AllowList::build_with_env(&["@npm"], &env).unwrap_err();
    assert!(matches!(err, EntryError::Unreadable { .. }), "{err:?}");
    let line = err.to_string();
    assert!(line.starts_with("--allow-net @npm: "), "{line}");
    assert!(!line.contains(&tmp.path().display().to_string()), "{line}");
    // An npm that prints something that is not a registry.
    fake_client(
        tmp.path(),
        "npm",
        r#"case "$2" in get) echo undefined ;; list) echo '{}' ;; esac"#,
    );
    let err = AllowList::build_with_env(&["@npm"], &env).unwrap_err();
    assert_eq!(err.to_string(), "--allow-net @npm: npm reports no registry");
}

#[test]
fn pypi_preset_takes_the_index_variables_first() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = bare_env(tmp.path());
    env.set("PIP_INDEX_URL", "https://pypi.example.test/simple")
        .set(
            "PIP_EXTRA_INDEX_URL",
            "https://extra.example.test:8443/simple  https://more.example.test/",
        );
    let list = AllowList::build_with_env(&["@pypi"], &env).unwrap();
    assert_eq!(
        list.entries(),
        [
            host("pypi.example.test", None),
            host("extra.example.test", Some(8443)),
            host("more.example.test", None),
        ]
    );
}

#[test]
fn pypi_preset_reads_pips_configuration() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    fake_client(
        tmp.path(),
        "python3",
        r#"[ "$1 $2 $3 $4 $5" = "-I -m pip config list" ] || exit 5
echo "global.cert='/etc/ssl/cert.pem'"
echo "global.index-url='https://pypi.corp.example.test/simple'"
echo "install.extra-index-url='https://extra.example.test/simple'""#,
    );
    let list = AllowList::build_with_env(&["@pypi"], &env).unwrap();
    assert_eq!(
        list.entries(),
        [
            host("pypi.corp.example.test", None),
            host("extra.example.test", None)
        ]
    );
}

#[test]
fn pypi_preset_falls_back_to_pips_own_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    fake_client(
        tmp.path(),
        "python3",
        r#"[ "$1" = -I ] || exit 6
case "$2" in
-m) echo ":env:.timeout='60'" ;;
-c) echo "https://index.example.test/simple"; echo "files.example.test" ;;
*) exit 5 ;;
esac"#,
    );
    let list = AllowList::build_with_env(&["@pypi"], &env).unwrap();
    assert_eq!(
        list.entries(),
        [
            host("index.example.test", None),
            host("files.example.test", None)
        ]
    );
}

#[test]
fn pypi_preset_without_python_or_pip_names_the_preset() {
    let tmp = tempfile::tempdir().unwrap();
    let err = AllowList::build_with_env(&["@pypi"], &bare_env(tmp.path())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--allow-net @pypi: python3 is not installed"
    );
    let env = fake_env(tmp.path());
    fake_client(
        tmp.path(),
        "python3",
        "echo 'No module named pip' >&2; exit 1",
    );
    let err = AllowList::build_with_env(&["@pypi"], &env).unwrap_err();
    assert_eq!(err.to_string(), "--allow-net @pypi: pip is not installed");
}

fn cargo_home(tmp: &Path) -> (std::path::PathBuf, ClientEnv) {
    let home = tmp.join("cargo-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut env = bare_env(tmp);
    env.set("CARGO_HOME", home.display().to_string());
    (home, env)
}

fn cache_dir(home: &Path, dir: &str, config: &str) {
    let dir = home.join("registry/index").join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
}

#[test]
fn crates_preset_reads_the_registry_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, env) = cargo_home(tmp.path());
    cache_dir(
        &home,
        "index.example.test-0123456789abcdef",
        r#"{"dl": "https://dl.example.test/crates", "api": "https://api.example.test:8443/"}"#,
    );
    let list = AllowList::build_with_env(&["@crates"], &env).unwrap();
    assert_eq!(
        list.entries(),
        [
            host("index.example.test", None),
            host("dl.example.test", None),
            host("api.example.test", Some(8443)),
        ]
    );
}

#[test]
fn crates_preset_follows_configured_registries_and_source_replacement() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, env) = cargo_home(tmp.path());
    std::fs::write(
        home.join("config.toml"),
        r#"
[source.crates-io]
replace-with = "mirror"
[source.mirror]
registry = "sparse+https://mirror.example.test/index/"
[registries.corp]
index = "https://git.corp.example.test/index.git"
"#,
    )
    .unwrap();
    // The cache of the mirror names its download host; another cached index is not used.
    cache_dir(
        &home,
        "mirror.example.test-0123456789abcdef",
        r#"{"dl": "https://files.mirror.example.test/dl"}"#,
    );
    cache_dir(
        &home,
        "unused.example.test-fedcba9876543210",
        r#"{"dl": "https://dl.unused.example.test/"}"#,
    );
    let list = AllowList::build_with_env(&["@crates"], &env).unwrap();
    let mut entries = list.entries().to_vec();
    entries.sort_by_key(Entry::display);
    assert_eq!(
        entries,
        [
            host("files.mirror.example.test", None),
            host("git.corp.example.test", None),
            host("mirror.example.test", None),
        ]
    );
}

#[test]
fn crates_preset_without_cargo_or_registries_names_the_preset() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = bare_env(tmp.path());
    env.set(
        "CARGO_HOME",
        tmp.path().join("nowhere").display().to_string(),
    );
    let err = AllowList::build_with_env(&["@crates"], &env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--allow-net @crates: cargo is not installed"
    );

    let (home, env) = cargo_home(tmp.path());
    let err = AllowList::build_with_env(&["@crates"], &env).unwrap_err();
    assert!(matches!(err, EntryError::Unreadable { .. }), "{err:?}");
    assert!(err.to_string().starts_with("--allow-net @crates: "));

    std::fs::write(home.join("config.toml"), "[source\n").unwrap();
    let err = AllowList::build_with_env(&["@crates"], &env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--allow-net @crates: cargo's config.toml is not valid TOML"
    );
    assert!(!err.to_string().contains(&tmp.path().display().to_string()));
}

#[test]
fn github_preset_names_githubs_hosts() {
    let tmp = tempfile::tempdir().unwrap();
    let list = AllowList::build_with_env(&["@github", "@github"], &bare_env(tmp.path())).unwrap();
    for h in [
        "github.com",
        "api.github.com",
        "codeload.github.com",
        "raw.githubusercontent.com",
    ] {
        assert!(list.allows(h, 443), "{h}");
    }
    assert!(!list.allows("gist.example.test", 443));
    assert_eq!(
        list.presets_resolved().len(),
        1,
        "a preset given twice is read once"
    );
}

/// The real npm, where it is installed: the preset resolves to hosts (which ones is npm's
/// configuration, never written here).
#[test]
fn npm_preset_asks_the_real_npm() {
    const TEST: &str = "npm_preset_asks_the_real_npm";
    let env = ClientEnv::from_process();
    let on_path = env
        .get("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| !d.is_empty() && Path::new(d).join("npm").is_file());
    if !on_path {
        testkit::not_run(
            TEST,
            "npm is not installed here (the fake-client tests cover the preset)",
        );
        return;
    }
    let list = AllowList::build(&["@npm"]).expect("the real npm's registries");
    assert!(!list.entries().is_empty());
    for entry in list.entries() {
        assert!(
            matches!(entry, Entry::Host { name, .. } if name.contains('.'))
                || matches!(entry, Entry::Ip { .. }),
            "{entry:?}"
        );
    }
    let resolved = list.presets_resolved();
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].0, "@npm");
    assert!(!resolved[0].1.is_empty());
}

/// A client's output is read up to 1 MiB: a registry printed in exactly 1 MiB is read, one
/// byte more is refused (not cut).
#[test]
fn client_output_is_read_up_to_1_mib() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    for (extra, ok) in [(0, true), (1, false)] {
        // The URL, spaces, a newline: 1 MiB + extra bytes in all.
        let url = "https://big.example.test/";
        let pad = (1 << 20) - url.len() - 1 + extra;
        fake_client(
            tmp.path(),
            "npm",
            &format!(
                r#"case "$2" in
get) printf '%s' '{url}'; head -c {pad} /dev/zero | tr '\0' ' '; echo ;;
list) echo '{{}}' ;;
esac"#
            ),
        );
        let built = AllowList::build_with_env(&["@npm"], &env);
        if ok {
            assert_eq!(built.unwrap().entries(), [host("big.example.test", None)]);
        } else {
            let err = built.unwrap_err();
            assert_eq!(
                err.to_string(),
                "--allow-net @npm: `npm config get registry` failed"
            );
        }
    }
}

/// A client that does not finish is killed at its 10 s bound and the preset refused.
#[test]
fn client_that_hangs_is_stopped_at_its_time_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    fake_client(tmp.path(), "npm", "sleep 120");
    let started = std::time::Instant::now();
    let err = AllowList::build_with_env(&["@npm"], &env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--allow-net @npm: `npm config list --json` failed"
    );
    // The contract's own bound, with a generous margin.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

/// The list may be built inside the embedder's runtime (either flavour) as well as outside.
#[test]
fn presets_resolve_inside_a_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    fake_client(tmp.path(), "npm", FAKE_NPM);
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    for rt in [current, multi] {
        let list = rt.block_on(async { AllowList::build_with_env(&["@npm"], &env).unwrap() });
        assert!(list.allows("registry.example.test", 443));
    }
}

/// npm is started once where its list names the registry (npm 7 on): `config get` is never
/// asked then (here it would fail).
#[test]
fn npm_preset_reads_the_registry_from_one_config_list() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    fake_client(
        tmp.path(),
        "npm",
        r#"[ "$2" = list ] || exit 1
echo '{"registry": "https://list.example.test/", "@a:registry": "https://scoped.example.test/"}'"#,
    );
    let built = AllowList::build_with_env(&["@npm"], &env).unwrap();
    assert_eq!(
        built.entries(),
        [
            host("list.example.test", None),
            host("scoped.example.test", None)
        ]
    );
}

/// An npm whose list names a registry on this machine's loopback, `port` on 127.0.0.1.
fn loopback_npm(tmp: &Path, port: u16) {
    fake_client(
        tmp,
        "npm",
        &format!(
            r#"[ "$2" = list ] || exit 1
echo '{{"registry": "https://registry.example.test/", "@x:registry": "http://127.0.0.1:{port}/"}}'"#
        ),
    );
}

/// `CONNECT authority` through a proxy on `policy`: the status code, and whether the target
/// listener saw a connection.
fn connect_through(
    policy: AllowList,
    authority: &str,
    target: &std::net::TcpListener,
) -> (u16, String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = confine_netpolicy::Proxy::start(listener, policy, Default::default()).unwrap();
        let mut s = tokio::net::TcpStream::connect(proxy.local_addr())
            .await
            .unwrap();
        s.write_all(format!("CONNECT {authority} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = vec![0u8; 4096];
        let n = tokio::time::timeout(std::time::Duration::from_secs(20), s.read(&mut answer))
            .await
            .unwrap()
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
        target.set_nonblocking(true).unwrap();
        // The proxy connects before it answers `200`, and answers a refusal before any
        // connection: by now the target has its connection or never will.
        let reached = target.accept().is_ok();
        (answer[9..12].parse().unwrap(), answer, reached)
    })
}

/// An IP literal a preset yields (a scope's registry on the host's loopback) is on the list
/// by name, but the address classes still refuse it: only the embedder's own literal lifts
/// them. The twin lists the same literal itself, and the tunnel opens.
#[test]
fn a_loopback_literal_from_a_preset_is_refused_unless_listed_by_the_embedder() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = target.local_addr().unwrap().port();
    loopback_npm(tmp.path(), port);
    let authority = format!("127.0.0.1:{port}");

    let policy = AllowList::build_with_env(&["@npm"], &env).unwrap();
    assert!(policy.allows("127.0.0.1", port), "on the list by name");
    let (code, answer, reached) = connect_through(policy, &authority, &target);
    assert_eq!(code, 403, "{answer}");
    assert!(
        answer.ends_with(&format!(
            "confine: {authority} refused: resolves to a loopback address\n"
        )),
        "{answer}"
    );
    assert!(!reached, "a refused tunnel reached the target");

    // The twin: the embedder lists the literal, before or after the preset.
    for entries in [[authority.as_str(), "@npm"], ["@npm", authority.as_str()]] {
        let policy = AllowList::build_with_env(&entries, &env).unwrap();
        let (code, answer, reached) = connect_through(policy, &authority, &target);
        assert_eq!(code, 200, "{entries:?}: {answer}");
        assert!(reached, "{entries:?}");
    }
}

/// Every client runs in `/`, whatever the embedder's working directory, with npm in global
/// mode (no project `.npmrc`) and Python isolated.
#[test]
fn clients_run_in_the_root_directory_with_npm_global_and_python_isolated() {
    let tmp = tempfile::tempdir().unwrap();
    let env = fake_env(tmp.path());
    let log = tmp.path().join("log");
    fake_client(
        tmp.path(),
        "npm",
        &format!(
            r#"echo "npm $(pwd) $*" >> {log}
echo '{{"registry": "https://registry.example.test/"}}'"#,
            log = log.display()
        ),
    );
    fake_client(
        tmp.path(),
        "python3",
        &format!(
            r#"echo "python3 $(pwd) $*" >> {log}
echo "global.index-url='https://pypi.example.test/simple'""#,
            log = log.display()
        ),
    );
    AllowList::build_with_env(&["@npm", "@pypi"], &env).unwrap();
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "npm / config list --json --global\npython3 / -I -m pip config list\n"
    );
}

/// The embedder's `npm_config_*` variables reach npm, unless npm started the embedder
/// (`npm_config_local_prefix` set): then they are npm's export of a project's configuration,
/// `.npmrc` included, and none is passed.
#[test]
fn npm_config_variables_exported_by_npm_are_not_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut env = fake_env(tmp.path());
    fake_client(
        tmp.path(),
        "npm",
        r#"[ "$2" = list ] || exit 1
if [ -n "$npm_config_registry" ]; then r=$npm_config_registry; else r=https://user.example.test/; fi
echo "{\"registry\": \"$r\"}""#,
    );
    env.set("npm_config_registry", "https://mirror.example.test/");
    let list = AllowList::build_with_env(&["@npm"], &env).unwrap();
    assert_eq!(list.entries(), [host("mirror.example.test", None)]);
    env.set("npm_config_local_prefix", "/somewhere/project");
    let list = AllowList::build_with_env(&["@npm"], &env).unwrap();
    assert_eq!(list.entries(), [host("user.example.test", None)]);
}

/// A relative `CARGO_HOME` would be read from the server's working directory: it is not
/// used (and `HOME` is not tried in its place).
#[test]
fn a_relative_cargo_home_is_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, mut env) = cargo_home(tmp.path());
    cache_dir(
        &home,
        "index.example.test-0123456789abcdef",
        r#"{"dl": "https://dl.example.test/crates"}"#,
    );
    assert!(AllowList::build_with_env(&["@crates"], &env).is_ok());
    // The same directory, named relative to this process's working directory.
    let cwd = std::env::current_dir().unwrap();
    let up = "../".repeat(cwd.components().count());
    let relative = format!("{up}{}", home.display().to_string().trim_start_matches('/'));
    assert!(Path::new(&relative).join("registry/index").is_dir());
    env.set("CARGO_HOME", relative);
    let err = AllowList::build_with_env(&["@crates"], &env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--allow-net @crates: cargo is not installed"
    );
}
