//! A sandboxed server's private directories: the `/tmp`, `/dev/shm` and `HOME` its children
//! see, shared by all of the server's runs and jobs, removed with it.
//!
//! [`PrivateDirs::create`] makes one directory of mode 0700 outside any workspace (beneath
//! `$XDG_RUNTIME_DIR` where it is set and exists, else the system's temporary directory),
//! `confine-<pid>-<n>/`, holding:
//!
//! * `tmp/` and `shm/` (mode 01777, as the real ones), shown at `/tmp` and `/dev/shm` only
//!   where the server's bounded tmpfs cannot be made. Normally, at the first sandboxed run
//!   ([`PrivateDirs::furnish`]), the server makes one tmpfs of its own (`tmpfs.rs`: detached,
//!   held by a descriptor, bounded by [`PrivateDirs::bound_tmp`], freed with the server even
//!   when it is killed), whose `tmp` and `shm` directories each sandboxed run clones over
//!   `/tmp` and `/dev/shm` in its mount namespace; so `mktemp`, Python's multiprocessing
//!   (POSIX semaphores in `/dev/shm`) and the many programs that write `/tmp` work, the
//!   server's runs and jobs share what they write there, and nothing reaches the host's
//!   `/tmp`. Where the tmpfs cannot be made (no user namespace for the helper, a kernel
//!   before 6.15; [`PrivateDirs::tmpfs_error`] says why), these directories are shown
//!   instead, bounded only by the file system they live on;
//! * `home/` (mode 0700), the children's `HOME` unless the embedder names its own
//!   ([`PrivateDirs::create`]'s `home`), writable, holding (from the first sandboxed run on,
//!   [`PrivateDirs::furnish`]) a `.gitconfig` with the user's git
//!   identity and nothing else of the user's configuration: `user.name`, `user.email` and
//!   `init.defaultBranch` as the user's own `git config --global --get` reports them (no
//!   credential helper, no `url.*.insteadOf`, no include, no alias). git runs once, then,
//!   through this crate (contained, bounded, an allowlisted environment with the
//!   server's `HOME`), in `/`.
//!
//! * the toolchains of the user's home and their registry addresses
//!   ([`PrivateDirs::tools`], see [`HomeTools`](super::HomeTools)): found once, at creation;
//!   `.npmrc` and `.cargo/` of the private home written then.
//!
//! Dropping the last handle removes the directory and everything beneath it (but a home the
//! embedder named). A server killed by SIGKILL leaves it behind (0700, its user's own).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The git settings copied into the private home's `.gitconfig`.
pub const GIT_IDENTITY: &[&str] = &["user.name", "user.email", "init.defaultBranch"];

/// A server's private directories (see the module docs); removed on drop.
#[derive(Debug)]
pub struct PrivateDirs {
    root: PathBuf,
    home: PathBuf,
    /// Whether `home` is ours (beneath `root`), not the embedder's.
    own_home: bool,
    /// What the children run from the user's home, and their variables.
    tools: super::HomeTools,
    /// Whether the home holds its `.gitconfig` and the private CARGO_HOME yet
    /// ([`PrivateDirs::furnish`]): done once, at the first sandboxed run, so that a server
    /// that never runs a command never pays for it.
    furnished: std::sync::Mutex<bool>,
    /// The bound of the private tmpfs: bytes, entries.
    bound: (u64, u64),
    /// The private tmpfs, made at the first sandboxed run ([`PrivateDirs::furnish`]), or
    /// why none could be.
    tmpfs: std::sync::OnceLock<Result<super::tmpfs::Tmpfs, i32>>,
}

impl PartialEq for PrivateDirs {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for PrivateDirs {}

impl PrivateDirs {
    /// Make the directories, with `home` as the children's home when given (an existing
    /// directory, kept on drop; its `.gitconfig` is written only if it has none), else a
    /// private one. The user's git identity is read, and the home's files written, at the
    /// first sandboxed run ([`PrivateDirs::furnish`]).
    pub fn create(home: Option<&Path>) -> io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let base = std::fs::canonicalize(base)?;
        let mut tries = 0;
        let root = loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let root = base.join(format!("confine-{}-{n}-{nanos:x}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&root) {
                Ok(()) => break root,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 16 => tries += 1,
                Err(e) => return Err(e),
            }
        };
        let mut dirs = Self {
            home: root.join("home"),
            root,
            own_home: home.is_none(),
            tools: super::HomeTools::discover(&|name| std::env::var_os(name)),
            furnished: std::sync::Mutex::new(false),
            bound: (super::tmpfs::default_bytes(), super::tmpfs::DEFAULT_INODES),
            tmpfs: std::sync::OnceLock::new(),
        };
        for (name, mode) in [("tmp", 0o1777), ("shm", 0o1777), ("home", 0o700)] {
            let path = dirs.root.join(name);
            std::fs::DirBuilder::new().mode(mode).create(&path)?;
            // The mode as asked, whatever the umask.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        }
        if let Some(home) = home {
            dirs.home = std::fs::canonicalize(home)?;
        }
        // The registry addresses of the user's npm and pip, never their tokens; a CARGO_HOME
        // of our own whose caches link to the user's (`toolchains.rs`).
        if let Some(user_home) = std::env::var_os("HOME").map(PathBuf::from) {
            let (npmrc, pip) = super::toolchains::registry_files(&user_home);
            let path = dirs.home.join(".npmrc");
            if !npmrc.is_empty() && (dirs.own_home || !path.exists()) {
                std::fs::write(path, npmrc)?;
            }
            dirs.tools.env.extend(pip);
        }
        if dirs.tools.cargo_home.is_some() {
            let private = dirs.home.join(".cargo");
            dirs.tools.env.push(("CARGO_HOME".into(), private.into()));
        }
        Ok(dirs)
    }

    /// Write what the home holds, once (later calls return at once): the `.gitconfig` with
    /// the user's git identity (git runs once, here) and the private CARGO_HOME whose caches
    /// link to the user's (`toolchains.rs`; a link per crate of the user's cache, which takes
    /// a few hundred milliseconds for a large one). [`Sandbox::build`](super::Sandbox::build)
    /// calls it, so it happens at a server's first sandboxed run, not at its start. A home
    /// the embedder named keeps a `.gitconfig` and a `.cargo` it already has.
    pub fn furnish(&self) -> io::Result<()> {
        let mut done = self.furnished.lock().unwrap_or_else(|e| e.into_inner());
        if *done {
            return Ok(());
        }
        // Its error is kept for reports: the runs then see the directories.
        let _ = self.make_tmp();
        let config = self.home.join(".gitconfig");
        if self.own_home || !config.exists() {
            std::fs::write(&config, git_identity())?;
        }
        if let Some(real) = &self.tools.cargo_home {
            let private = self.home.join(".cargo");
            if self.own_home || !private.exists() {
                super::toolchains::seed_cargo_home(&private, real)?;
            }
        }
        *done = true;
        Ok(())
    }

    /// Bound the private `/tmp` and `/dev/shm` together to `bytes` (rounded up to whole
    /// pages) and `inodes` entries, in place of the default (a quarter of the machine's
    /// memory, at most 2 GiB and at least 64 MiB; 262,144 entries). Before the first run;
    /// zero is refused (`InvalidInput`).
    pub fn bound_tmp(&mut self, bytes: u64, inodes: u64) -> io::Result<&mut Self> {
        if bytes == 0 || inodes == 0 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        self.bound = (bytes, inodes);
        Ok(self)
    }

    /// The bound (bytes, entries) of the private `/tmp` and `/dev/shm` once the first
    /// sandboxed run made them one tmpfs ([`PrivateDirs::furnish`]); `None` before, and where
    /// none could be made ([`PrivateDirs::tmpfs_error`]): the runs then see the directories
    /// [`PrivateDirs::tmp`] and [`PrivateDirs::shm`], bounded only by the file system they
    /// live on.
    pub fn tmp_bound(&self) -> Option<(u64, u64)> {
        let fs = self.tmpfs()?;
        Some((fs.bytes(), fs.inodes()))
    }

    /// Why the private tmpfs could not be made (the failing step's error: user namespaces
    /// refused, a kernel that cannot clone a detached mount), once the first sandboxed run
    /// tried.
    pub fn tmpfs_error(&self) -> Option<io::Error> {
        match self.tmpfs.get()? {
            Ok(_) => None,
            Err(errno) => Some(io::Error::from_raw_os_error(*errno)),
        }
    }

    /// Make the private tmpfs now if no run made it yet (the first sandboxed run does), and
    /// return its bound (bytes, entries) or why it could not be made (the runs then see the
    /// directories [`PrivateDirs::tmp`] and [`PrivateDirs::shm`]). Tried once.
    pub fn make_tmp(&self) -> io::Result<(u64, u64)> {
        let made = self.tmpfs.get_or_init(|| {
            let (bytes, inodes) = self.bound;
            super::tmpfs::Tmpfs::make(bytes, inodes)
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
        });
        match made {
            Ok(fs) => Ok((fs.bytes(), fs.inodes())),
            Err(errno) => Err(io::Error::from_raw_os_error(*errno)),
        }
    }

    /// The private tmpfs, where it was made.
    pub(super) fn tmpfs(&self) -> Option<&super::tmpfs::Tmpfs> {
        self.tmpfs.get()?.as_ref().ok()
    }

    /// The directory shown at `/tmp` where no tmpfs could be made.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The directory shown at `/dev/shm` where no tmpfs could be made.
    pub fn shm(&self) -> PathBuf {
        self.root.join("shm")
    }

    /// The children's `HOME`.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// What the children run from the user's home (opened read-only) and the variables
    /// they get for it (`RUSTUP_HOME`, `CARGO_HOME`, `PYENV_ROOT`, pip's index).
    pub fn tools(&self) -> &super::HomeTools {
        &self.tools
    }

    /// The directory that holds them all.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for PrivateDirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The `.gitconfig` of the private home: the user's identity settings, each quoted.
fn git_identity() -> String {
    let mut text = String::new();
    let mut section = "";
    for key in GIT_IDENTITY {
        let Some(value) = git_global(key) else {
            continue;
        };
        let (name, field) = key.split_once('.').expect("section.key");
        if name != section {
            text.push_str(&format!("[{name}]\n"));
            section = name;
        }
        text.push_str(&format!("\t{field} = {}\n", quote(&value)));
    }
    text
}

/// A value as a git configuration file quotes it (one line: a value with a line break is
/// not copied).
fn quote(value: &str) -> String {
    let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// `git config --global --get KEY` as the server's user has it, or `None`.
fn git_global(key: &str) -> Option<String> {
    // Found on the server's PATH by the run itself (the command names no PATH of its own).
    let mut cmd = crate::Command::new("git");
    cmd.args(["config", "--global", "--get", key])
        .current_dir("/")
        .inherit_no_env()
        .timeout(Duration::from_secs(5))
        .output_cap(4096);
    for name in ["HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"] {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    // Maybe inside the embedder's runtime, maybe outside any.
    let outcome = cmd.run_blocking()?.ok()?;
    let value = outcome.stdout.text.trim_end_matches('\n');
    (outcome.exit_code == Some(0) && !outcome.stdout.truncated && !value.contains('\n'))
        .then(|| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_a_value_whole() {
        assert_eq!(quote("Ada Lovelace"), "\"Ada Lovelace\"");
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn the_directories_are_private_and_gone_with_the_handle() {
        use std::os::unix::fs::PermissionsExt;
        let dirs = PrivateDirs::create(None).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(dirs.root()), 0o700);
        assert_eq!(mode(&dirs.tmp()), 0o1777);
        assert_eq!(mode(&dirs.shm()), 0o1777);
        assert_eq!(mode(dirs.home()), 0o700);
        // The home's files come with the first run, once.
        assert!(!dirs.home().join(".gitconfig").exists());
        dirs.furnish().unwrap();
        assert!(dirs.home().join(".gitconfig").is_file());
        dirs.furnish().unwrap();
        let root = dirs.root().to_owned();
        drop(dirs);
        assert!(!root.exists());
        // An embedder's home is kept.
        let mine = tempfile::tempdir().unwrap();
        let dirs = PrivateDirs::create(Some(mine.path())).unwrap();
        assert_eq!(dirs.home(), mine.path().canonicalize().unwrap());
        dirs.furnish().unwrap();
        drop(dirs);
        assert!(mine.path().join(".gitconfig").is_file());
    }
}
