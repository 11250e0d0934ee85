//! What a sandboxed program may read by default: what Node.js and a POSIX shell need to start
//! and run, and nothing that holds a secret.
//!
//! Each entry names why it is there. A path that does not exist on this system is skipped (a
//! Landlock rule needs an open file); a symbolic link is followed, so the rule lands on what
//! it names (`/lib` on a merged-`/usr` system is `/usr/lib`). Reading is reading file contents
//! and listing directories: looking a path up, `stat` and `readlink` are not governed by
//! Landlock, so a program can learn that `/root/.ssh/id_ed25519` exists and its size, never
//! its bytes.

/// Directory trees readable and executable: programs and the libraries they load.
pub(super) const SYSTEM_TREES: &[&str] = &[
    // Programs, shared libraries, locales, time zones, the dynamic loader (`/usr/lib`),
    // Node.js when packaged by the distribution (`/usr/bin/node`, `/usr/share/nodejs`).
    "/usr", // On a system without merged `/usr`, the programs and libraries outside it.
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Parts of `/etc`, each a file or a directory that holds no secret, read-only.
pub(super) const ETC: &[&str] = &[
    // The dynamic loader's cache of library locations: without it every program that loads
    // a shared library searches the default directories only, and some fail.
    "/etc/ld.so.cache",
    // Libraries the dynamic loader must preload, where the system has them: unreadable, they
    // would silently not be loaded.
    "/etc/ld.so.preload",
    // Debian's alternatives: symbolic links such as `/usr/bin/awk -> /etc/alternatives/awk`.
    "/etc/alternatives",
    // User and group names (no password hashes: those are in `/etc/shadow`, which is not
    // here): `os.userInfo()`, `os.homedir()` without HOME, `ls -l`, `id`.
    "/etc/passwd",
    "/etc/group",
    // How the C library looks those names and host names up.
    "/etc/nsswitch.conf",
    // Host name resolution: `localhost` from `/etc/hosts`; the resolver's configuration
    // (the network itself is refused, but a lookup must fail as a lookup, not as EACCES).
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/hostname",
    // The local time zone (a link into `/usr/share/zoneinfo`).
    "/etc/localtime",
    "/etc/timezone",
    // TLS: OpenSSL's configuration (Node.js reads it at startup) and the public CA
    // certificates. Not all of `/etc/ssl`: `/etc/ssl/private` holds private keys.
    "/etc/ssl/openssl.cnf",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/pki/tls/openssl.cnf",
    "/etc/pki/tls/certs",
    "/etc/pki/ca-trust",
];

/// Devices readable (`/dev/null` is also writable, see `mod.rs`).
pub(super) const DEVICES: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

/// The device every program may write and truncate.
pub(super) const DEV_NULL: &str = "/dev/null";

/// System-wide `/proc` files without a secret in them: memory size (`os.totalmem()`,
/// `os.freemem()`, and V8 sizes its heap from it), CPU times and models (`os.cpus()`).
/// The program's own `/proc/<pid>` is added in the child (see `ruleset.rs`); other
/// processes' entries, whose command lines may hold secrets, are not readable.
pub(super) const PROC_FILES: &[&str] = &["/proc/meminfo", "/proc/stat", "/proc/cpuinfo"];

/// The installation an executable belongs to: the directory above `bin/` when it sits in a
/// `bin` directory (`/opt/node-v22/bin/node` gives `/opt/node-v22`, with its `lib/` and
/// `include/`), else its own directory.
pub(super) fn installation(executable: &std::path::Path) -> Option<&std::path::Path> {
    let dir = executable.parent()?;
    match dir.file_name() {
        Some(name) if name == "bin" => dir.parent().filter(|p| p.parent().is_some()).or(Some(dir)),
        _ => Some(dir),
    }
}

#[cfg(test)]
mod tests {
    use super::installation;
    use std::path::Path;

    #[test]
    fn installation_is_the_prefix_above_bin() {
        let of = |p: &str| installation(Path::new(p)).map(|p| p.to_str().unwrap().to_owned());
        assert_eq!(of("/usr/bin/node").as_deref(), Some("/usr"));
        assert_eq!(
            of("/home/u/.nvm/versions/node/v22.1.0/bin/node").as_deref(),
            Some("/home/u/.nvm/versions/node/v22.1.0")
        );
        assert_eq!(of("/opt/node/node").as_deref(), Some("/opt/node"));
        // `/bin/node`: the prefix would be `/`, everything; its own directory instead.
        assert_eq!(of("/bin/node").as_deref(), Some("/bin"));
    }
}
