//! Integration tests of the `confine-jail` crate (one binary): the guard's attack families, the
//! jail's, descriptor-based opens, and race tests with their naive twins. (The conformance
//! case files run through `cargo xtask conformance`, and its `#[test]`.)

mod filejail;
mod guard;
mod race;

use std::path::Path;

/// A temporary parent holding the root `cc-task-abc` and its prefix-sharing sibling
/// `cc-task-abc-evil` (with `secret.txt`), both by canonical path. Removed on drop.
pub use testkit::Sibling as Sandbox;

/// A fresh sandbox with `files`, `dirs` and `symlinks` built in the root (names and targets
/// substituted, so `$OUTSIDE/x` builds in the sibling).
pub fn sandbox(files: &[(&str, &str)], dirs: &[&str], symlinks: &[(&str, &str)]) -> Sandbox {
    let parent = tempfile::Builder::new()
        .prefix("jail-test-")
        .tempdir()
        .expect("temporary parent");
    let s = Sandbox::named(
        parent,
        "cc-task-abc",
        "cc-task-abc-evil",
        "secret outside the sandbox\n",
    );
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
