//! Workspace fixtures: a temporary workspace beside a prefix-sharing sibling that holds a
//! secret (the place an escape would reach: `ws-outside` starts with `ws`), leftover `.pify-`
//! temporaries, special files, and what `/proc` says of a process.

use std::path::{Path, PathBuf};

/// The secret's file name in the sibling.
pub const SECRET_NAME: &str = "secret.txt";

/// A temporary base holding the workspace `root` and its prefix-sharing sibling `outside`
/// (which holds [`SECRET_NAME`]), both by canonical path. Removed on drop.
#[derive(Debug)]
pub struct Sibling {
    /// The temporary base (removed on drop).
    pub tmp: tempfile::TempDir,
    /// The base's canonical path.
    pub base: PathBuf,
    /// The workspace.
    pub root: PathBuf,
    /// The sibling, outside the workspace.
    pub outside: PathBuf,
    /// What the sibling's secret holds.
    pub secret: String,
}

impl Sibling {
    /// `ws` and `ws-outside` on the default temporary directory (a real disk here: fsync
    /// costs milliseconds).
    pub fn disk(secret: &str) -> Self {
        Self::within(tempfile::tempdir().unwrap(), secret)
    }

    /// `ws` and `ws-outside` on tmpfs when there is one (for the tests that write thousands
    /// of times), else the default temporary directory.
    pub fn fast(secret: &str) -> Self {
        let shm = Path::new("/dev/shm");
        let tmp = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        Self::within(tmp, secret)
    }

    /// `ws` and `ws-outside` in `tmp`.
    pub fn within(tmp: tempfile::TempDir, secret: &str) -> Self {
        Self::named(tmp, "ws", "ws-outside", secret)
    }

    /// `root` and `outside` (names) in `tmp`, the secret in `outside`.
    pub fn named(tmp: tempfile::TempDir, root: &str, outside: &str, secret: &str) -> Self {
        Self::try_named(tmp, root, outside, secret).unwrap()
    }

    /// [`Sibling::named`], failing instead of panicking.
    pub fn try_named(
        tmp: tempfile::TempDir,
        root: &str,
        outside: &str,
        secret: &str,
    ) -> std::io::Result<Self> {
        let base = tmp.path().canonicalize()?;
        let (root, outside) = (base.join(root), base.join(outside));
        std::fs::create_dir(&root)?;
        std::fs::create_dir(&outside)?;
        std::fs::write(outside.join(SECRET_NAME), secret)?;
        Ok(Self {
            tmp,
            base,
            root,
            outside,
            secret: secret.to_owned(),
        })
    }

    /// The workspace's canonical path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The sibling's canonical path.
    pub fn outside(&self) -> &Path {
        &self.outside
    }

    /// Remove the base now, reporting a failure (drop ignores it).
    pub fn close(self) -> std::io::Result<()> {
        self.tmp.close()
    }

    /// `rel` beneath the workspace.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// `$ROOT` and `$OUTSIDE` in `s` replaced by the canonical paths.
    pub fn substitute(&self, s: &str) -> String {
        s.replace("$ROOT", &self.root.to_string_lossy())
            .replace("$OUTSIDE", &self.outside.to_string_lossy())
    }

    /// The sibling holds its secret, unchanged, and nothing else.
    pub fn assert_outside_intact(&self) {
        let secret = std::fs::read_to_string(self.outside.join(SECRET_NAME)).unwrap();
        assert_eq!(secret, self.secret, "the secret outside changed");
        let entries = std::fs::read_dir(&self.outside).unwrap().count();
        assert_eq!(entries, 1, "something appeared outside");
    }

    /// No `.pify-` entry anywhere under the base.
    pub fn assert_no_leftovers(&self) {
        assert_no_pify(&self.base);
    }
}

/// Every `.pify-` entry beneath `dir` (symlinks not followed).
pub fn pify_entries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().contains(".pify-") {
            found.push(e.path());
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            found.extend(pify_entries(&e.path()));
        }
    }
    found
}

/// No `.pify-` temporary left in `root` (or beneath it).
pub fn assert_no_pify(root: &Path) {
    let found = pify_entries(root);
    assert!(found.is_empty(), "left behind: {found:?}");
}

/// A FIFO at `path`, mode 0600.
pub fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

/// The command line of `pid`, split into arguments (empty for a zombie or no process).
pub fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split('\0')
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The mount point of the (first) cgroup2 hierarchy, if there is one.
pub fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        let dash = fields.iter().position(|f| *f == "-")?;
        (fields.get(dash + 1) == Some(&"cgroup2")).then(|| PathBuf::from(fields[4]))
    })
}

/// Kind, size, modification and change time of every node under `dir`, one line per node,
/// sorted: two stamps of a tree are equal only if nothing in it was made, removed, renamed or
/// written between them (any such change moves a directory's or a file's times).
pub fn tree_stamp(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            out.push(format!(
                "{} {:?} {} {}.{} {}.{}",
                path.display(),
                meta.file_type(),
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec()
            ));
            if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The small workspace that arbitrary arguments are thrown at: `root/a.txt`, `root/dir/b.txt`,
/// `root/link` (to `a.txt`) and `secret` beside the root. Returns the base (removed on drop)
/// and the root.
pub fn argument_target() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::write(root.join("a.txt"), "alpha").unwrap();
    std::fs::write(root.join("dir/b.txt"), "beta").unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    std::fs::write(tmp.path().join("secret"), "outside").unwrap();
    (tmp, root)
}

/// The tools' own property names (so that most generated objects get past the unknown-field
/// check) and near misses.
pub const TOOL_KEYS: &[&str] = &[
    "path",
    "content",
    "source",
    "arguments",
    "id",
    "",
    "PATH",
    "path ",
    "edits",
    "oldText",
    "newText",
    "replaceAll",
    "dryRun",
    "startLine",
    "endLine",
    "offset",
    "limit",
    "pattern",
    "glob",
    "ignoreCase",
    "includeIgnored",
    "contextLines",
    "maxMatches",
    "destination",
    "command",
    "timeoutMs",
    "recursive",
    "old_text",
];
