//! Helpers shared by the `nodeexec` integration tests (`run.rs`, `sandbox.rs`); each file is
//! its own test binary and uses `mod support;`.

// Each test binary uses a subset of these helpers; the rest would warn as dead code there.
#![allow(dead_code)]

use std::path::PathBuf;

/// The Node.js executable: `/usr/bin/node` when present, else the first `node` on `PATH`.
pub fn node() -> PathBuf {
    let fixed = PathBuf::from("/usr/bin/node");
    if fixed.exists() {
        return fixed;
    }
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("node"))
                .find(|p| p.exists())
        })
        .expect("Node.js on PATH")
}
