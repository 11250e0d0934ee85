//! Integration tests of the `jail` crate (one binary): the guard's attack families, the
//! jail's, descriptor-based opens, and race tests with their naive twins. (The conformance
//! case files run through `cargo xtask conformance`, and its `#[test]`.)

mod filejail;
mod guard;
mod race;

use std::path::{Path, PathBuf};

/// A temporary parent holding the root `cc-task-abc` and its prefix-sharing sibling
/// `cc-task-abc-evil` (with `secret.txt`), both by canonical path. Removed on drop.
pub struct Sandbox {
    parent: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Sandbox {
    /// The root's canonical path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The sibling's canonical path.
    pub fn outside(&self) -> &Path {
        &self.outside
    }

    /// `$ROOT` and `$OUTSIDE` replaced by the canonical paths.
    pub fn substitute(&self, s: &str) -> String {
        s.replace("$ROOT", &self.root.to_string_lossy())
            .replace("$OUTSIDE", &self.outside.to_string_lossy())
    }

    /// Remove the parent now.
    pub fn close(self) -> std::io::Result<()> {
        self.parent.close()
    }
}

/// A fresh sandbox with `files`, `dirs` and `symlinks` built in the root (names and targets
/// substituted, so `$OUTSIDE/x` builds in the sibling).
pub fn sandbox(files: &[(&str, &str)], dirs: &[&str], symlinks: &[(&str, &str)]) -> Sandbox {
    let parent = tempfile::Builder::new()
        .prefix("jail-test-")
        .tempdir()
        .expect("temporary parent");
    let (root, outside) = (
        parent.path().join("cc-task-abc"),
        parent.path().join("cc-task-abc-evil"),
    );
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret outside the sandbox\n").unwrap();
    let s = Sandbox {
        root: root.canonicalize().unwrap(),
        outside: outside.canonicalize().unwrap(),
        parent,
    };
    let makeparent = |p: &Path| std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    for d in dirs {
        std::fs::create_dir_all(s.root.join(s.substitute(d))).unwrap();
    }
    for (f, content) in files {
        let at = s.root.join(s.substitute(f));
        makeparent(&at);
        std::fs::write(at, content).unwrap();
    }
    for (l, target) in symlinks {
        let at = s.root.join(s.substitute(l));
        makeparent(&at);
        std::os::unix::fs::symlink(s.substitute(target), at).unwrap();
    }
    s
}
