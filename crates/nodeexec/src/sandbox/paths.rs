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

/// The whole of `/etc`, readable where the run has the read-only view (its mount namespace
/// covers the secrets, [`etc_secrets`]): programs read many small files there
/// (`/etc/debian_version`, `/etc/mime.types`, `/etc/gitconfig`, `/etc/pip.conf`, …). Where no
/// mount namespace can be made nothing could cover them, so the run keeps the allow-list
/// [`ETC`] alone.
pub(super) const ETC_TREE: &str = "/etc";

/// Entries of `/etc` covered by name, whatever their mode (relative to `/etc`; `ssh/` host
/// keys by [`named_secret`]'s pattern): password hashes, the sudo rules, old passwords, TLS
/// and Kerberos private keys, VPN and Wi-Fi secrets, systemd's credentials.
pub(super) const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "security/opasswd",
    "ssl/private",
    "pki/tls/private",
    "krb5.keytab",
    "ipsec.secrets",
    "ipsec.d/private",
    "ppp/chap-secrets",
    "ppp/pap-secrets",
    "NetworkManager/system-connections",
    "wireguard",
    "letsencrypt",
    "credstore",
    "credstore.encrypted",
];

/// At most this many entries of `/etc` are examined, and at most [`MAX_ETC_COVERS`] covered:
/// beyond either the run keeps the allow-list (one mount per cover, made for every run).
pub(super) const MAX_ETC_ENTRIES: usize = 50_000;
/// See [`MAX_ETC_ENTRIES`].
pub(super) const MAX_ETC_COVERS: usize = 256;

/// Whether `rel` (relative to `/etc`) is a secret by name: one of [`ETC_SECRETS`], or an SSH
/// host's private key (`ssh/ssh_host_*`, not `*.pub`).
pub(super) fn named_secret(rel: &std::path::Path) -> bool {
    if ETC_SECRETS.iter().any(|s| rel == std::path::Path::new(s)) {
        return true;
    }
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name().and_then(|n| n.to_str()))
    else {
        return false;
    };
    parent == std::path::Path::new("ssh")
        && name.starts_with("ssh_host_")
        && !name.ends_with(".pub")
}

/// The entries of `etc` a run's mount namespace covers, each with whether it is a directory:
/// those named by [`named_secret`], and every file or directory the system keeps from other
/// users (a file others may not read, a directory others may not list or enter: `shadow`,
/// `ssl/private`, `sudoers`, a database's `pg_hba.conf`, …), which a root program, owner of
/// most of them, could otherwise read. Symbolic links are not followed (what one names is
/// covered where it lies, when that is here; elsewhere other rules govern it); a covered
/// directory is not entered; one that cannot be listed is covered. `None` past the bounds.
#[cfg(test)]
pub(super) fn etc_secrets(etc: &std::path::Path) -> Option<Vec<(std::path::PathBuf, bool)>> {
    etc_secrets_watched(etc, None).0
}

/// [`etc_secrets`], with each directory it lists put under `watch` (an inotify descriptor)
/// before it is listed, so that any later change of what the walk depends on raises an
/// event. The second value says whether every listed directory is watched.
fn etc_secrets_watched(
    etc: &std::path::Path,
    watch: Option<&std::os::fd::OwnedFd>,
) -> (Option<Vec<(std::path::PathBuf, bool)>>, bool) {
    use rustix::fs::inotify::{self, WatchFlags};
    use std::os::unix::fs::PermissionsExt;
    let mut covers = Vec::new();
    let mut stack = vec![etc.to_path_buf()];
    let mut seen = 0usize;
    let mut watched_all = watch.is_some();
    while let Some(dir) = stack.pop() {
        if let Some(fd) = watch {
            // Names made, removed or moved in or out, and a mode or owner changed on the
            // directory or on any entry in it: everything a cover depends on.
            let flags = WatchFlags::CREATE
                | WatchFlags::DELETE
                | WatchFlags::MOVED_FROM
                | WatchFlags::MOVED_TO
                | WatchFlags::ATTRIB
                | WatchFlags::DELETE_SELF
                | WatchFlags::MOVE_SELF
                | WatchFlags::DONT_FOLLOW
                | WatchFlags::ONLYDIR;
            watched_all &= inotify::add_watch(fd, dir.as_path(), flags).is_ok();
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            if dir != etc {
                covers.push((dir, true));
            }
            continue;
        };
        for entry in entries {
            seen += 1;
            if seen > MAX_ETC_ENTRIES {
                return (None, watched_all);
            }
            let Ok(entry) = entry else { continue };
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let kind = meta.file_type();
            if !kind.is_dir() && !kind.is_file() {
                continue;
            }
            let mode = meta.permissions().mode();
            let hidden_from_others = match kind.is_dir() {
                true => mode & 0o005 != 0o005,
                false => mode & 0o004 == 0,
            };
            let rel = path.strip_prefix(etc).unwrap_or(&path);
            if hidden_from_others || named_secret(rel) {
                covers.push((path, kind.is_dir()));
                if covers.len() > MAX_ETC_COVERS {
                    return (None, watched_all);
                }
            } else if kind.is_dir() {
                stack.push(path);
            }
        }
    }
    covers.sort();
    (Some(covers), watched_all)
}

/// [`etc_secrets`] kept between runs: the walk costs about two milliseconds a run (a
/// thousand entries on a Debian system), and its answer changes only when `/etc` does. The
/// walk puts an inotify watch on every directory it lists before listing it; the kept answer
/// is used while that descriptor has no event to read, and any event (a name made, removed
/// or moved, a mode or owner changed, the queue overflowing) makes the next run walk again.
/// Where a watch cannot be had (the user's inotify limits), every run walks, as without the
/// cache. What no event reports is a file system mounted over a path in `/etc` while the
/// server runs: its entries are walked only when something else changes. Clones of a
/// [`Sandbox`](super::Sandbox) share one.
#[derive(Debug, Default)]
pub(super) struct EtcSecrets {
    kept: std::sync::Mutex<Option<Kept>>,
    /// Walks made (for tests).
    walks: std::sync::atomic::AtomicUsize,
}

/// A cache, not a policy: two sandboxes that differ only in it are the same.
impl PartialEq for EtcSecrets {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for EtcSecrets {}

#[derive(Debug)]
struct Kept {
    watch: std::os::fd::OwnedFd,
    covers: Option<Vec<(std::path::PathBuf, bool)>>,
}

impl EtcSecrets {
    /// The covers of `etc`, as [`etc_secrets`] gives them now.
    pub(super) fn get(&self, etc: &std::path::Path) -> Option<Vec<(std::path::PathBuf, bool)>> {
        use rustix::fs::inotify;
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = kept.as_ref() {
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 256];
            if let Err(rustix::io::Errno::AGAIN) = inotify::Reader::new(&k.watch, &mut buf).next() {
                return k.covers.clone();
            }
        }
        if let Some(old) = kept.take() {
            // Closing an inotify instance waits for the kernel to retire its watches (an SRCU
            // grace period, milliseconds): done on a thread of its own, off the run's start.
            let closer = move || drop(old);
            let _ = std::thread::Builder::new()
                .name("confine-etc-watch-close".into())
                .spawn(closer);
        }
        self.walks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let watch =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok();
        let (covers, watched_all) = etc_secrets_watched(etc, watch.as_ref());
        if let (Some(watch), true) = (watch, watched_all) {
            *kept = Some(Kept {
                watch,
                covers: covers.clone(),
            });
        }
        covers
    }

    /// How many walks [`EtcSecrets::get`] made.
    #[cfg(test)]
    pub(super) fn walks(&self) -> usize {
        self.walks.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Devices readable (`/dev/null` is also writable, see `mod.rs`).
pub(super) const DEVICES: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

/// The device every program may write and truncate.
pub(super) const DEV_NULL: &str = "/dev/null";

/// The process's own controlling terminal, read and written like `/dev/null`: opening it
/// reaches the terminal of the program's own session (a terminal job's pty) or fails with
/// `ENXIO` (every other run is a session without one); never another terminal.
pub(super) const DEV_TTY: &str = "/dev/tty";

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
    use super::{etc_secrets, installation, named_secret};
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

    #[test]
    fn secrets_of_etc_are_named_or_kept_from_others() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let etc = t.path();
        let file = |rel: &str, mode: u32| {
            let p = etc.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        file("debian_version", 0o644);
        file("mime.types", 0o644);
        file("shadow", 0o640);
        file("ssh/ssh_host_ed25519_key", 0o644);
        file("ssh/ssh_host_ed25519_key.pub", 0o644);
        file("ssh/sshd_config", 0o644);
        file("sudoers.d/README", 0o644);
        file("deep/er/db.conf", 0o600);
        file("ssl/private/k.pem", 0o600);
        std::fs::set_permissions(
            etc.join("ssl/private"),
            std::fs::Permissions::from_mode(0o710),
        )
        .unwrap();
        std::os::unix::fs::symlink("shadow", etc.join("shadow.link")).unwrap();
        let got: Vec<(String, bool)> = etc_secrets(etc)
            .unwrap()
            .into_iter()
            .map(|(p, d)| (p.strip_prefix(etc).unwrap().to_str().unwrap().to_owned(), d))
            .collect();
        let want = [
            ("deep/er/db.conf", false),
            ("shadow", false),
            ("ssh/ssh_host_ed25519_key", false),
            ("ssl/private", true),
            ("sudoers.d", true),
        ];
        let want: Vec<(String, bool)> = want.iter().map(|(p, d)| ((*p).to_owned(), *d)).collect();
        assert_eq!(got, want);
        assert!(named_secret(std::path::Path::new("ssh/ssh_host_rsa_key")));
        assert!(!named_secret(std::path::Path::new(
            "ssh/ssh_host_rsa_key.pub"
        )));
        assert!(!named_secret(std::path::Path::new("x/ssh_host_rsa_key")));
        assert!(named_secret(std::path::Path::new("gshadow-")));
    }

    /// The kept walk is used while `/etc` is unchanged, and walked again after each kind of
    /// change a cover depends on: a file's mode (reported on its directory's watch only as
    /// an attribute event, which a cache keyed on the directories' times would miss), a new
    /// directory others may not enter, a file removed, a directory moved in, and a change
    /// deep in the tree.
    #[test]
    fn the_kept_walk_follows_every_change_a_cover_depends_on() {
        use super::EtcSecrets;
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let etc = t.path().join("etc");
        std::fs::create_dir_all(etc.join("app/conf.d")).unwrap();
        std::fs::write(etc.join("hostname"), "h").unwrap();
        std::fs::write(etc.join("app/conf.d/db.conf"), "x").unwrap();
        std::fs::write(etc.join("shadow"), "x").unwrap();
        let cache = EtcSecrets::default();
        let rel = |covers: Option<Vec<(std::path::PathBuf, bool)>>| -> Vec<String> {
            covers
                .unwrap()
                .into_iter()
                .map(|(p, _)| p.strip_prefix(&etc).unwrap().to_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(rel(cache.get(&etc)), ["shadow"]);
        assert_eq!(rel(cache.get(&etc)), ["shadow"]);
        assert_eq!(cache.walks(), 1, "the second build walked again");
        let mode = |p: &str, m: u32| {
            std::fs::set_permissions(etc.join(p), std::fs::Permissions::from_mode(m)).unwrap()
        };
        // A file's mode, deep in the tree.
        mode("app/conf.d/db.conf", 0o600);
        assert_eq!(rel(cache.get(&etc)), ["app/conf.d/db.conf", "shadow"]);
        assert_eq!(cache.walks(), 2);
        assert_eq!(rel(cache.get(&etc)), ["app/conf.d/db.conf", "shadow"]);
        assert_eq!(cache.walks(), 2);
        // A new directory others may not enter.
        std::fs::create_dir(etc.join("vault")).unwrap();
        mode("vault", 0o700);
        assert_eq!(
            rel(cache.get(&etc)),
            ["app/conf.d/db.conf", "shadow", "vault"]
        );
        // A file removed.
        std::fs::remove_file(etc.join("shadow")).unwrap();
        assert_eq!(rel(cache.get(&etc)), ["app/conf.d/db.conf", "vault"]);
        // A directory moved in, holding a secret by name.
        let staged = t.path().join("staged");
        std::fs::create_dir_all(staged.join("private")).unwrap();
        std::fs::rename(&staged, etc.join("ssl")).unwrap();
        assert_eq!(
            rel(cache.get(&etc)),
            ["app/conf.d/db.conf", "ssl/private", "vault"]
        );
        let walks = cache.walks();
        assert_eq!(
            rel(cache.get(&etc)),
            ["app/conf.d/db.conf", "ssl/private", "vault"]
        );
        assert_eq!(cache.walks(), walks, "an unchanged tree is walked once");
    }
}
