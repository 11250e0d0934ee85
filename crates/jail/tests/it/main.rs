//! Integration tests of the `jail` crate (one binary): the guard's attack families, the
//! jail's, descriptor-based opens, race tests with their naive twins, and the conformance
//! case files run through the case runner.

mod conformance;
mod filejail;
mod guard;
mod race;

use jail::grading::{CaseTree, Sandbox};

/// A fresh sandbox (root `cc-task-abc`, sibling `cc-task-abc-evil/secret.txt`) with `tree`
/// built inside it.
pub fn sandbox(files: &[(&str, &str)], dirs: &[&str], symlinks: &[(&str, &str)]) -> Sandbox {
    let s = Sandbox::new().expect("sandbox");
    let tree = CaseTree {
        files: files
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        dirs: dirs.iter().map(|d| d.to_string()).collect(),
        symlinks: symlinks
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    s.build(&tree).expect("build");
    s
}
