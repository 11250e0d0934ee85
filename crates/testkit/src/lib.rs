//! Helpers shared by this repository's tests, one copy each: the process census
//! ([`census`]), the workspace beside a prefix-sharing sibling and leftover scans
//! ([`fixture`]), the Node.js executable ([`node`], [`node_on_path`]), small images of each
//! format `read_media` serves ([`media`]), unique names ([`unique`]), and the record of tests
//! that could not run where they ran ([`not_run`], [`skip`]).
//!
//! A dev-dependency only (and a dependency of `xtask`, which runs the census after the test
//! suites); never published. It depends on no crate of this workspace, so every crate's tests
//! may use it.

#![deny(missing_docs)]

pub mod census;
pub mod fixture;
pub mod media;
pub mod skip;

pub use fixture::{Sibling, assert_no_pify, pify_entries};
pub use skip::not_run;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// The Node.js executable for the `nodeexec` tests: `/usr/bin/node` when present (an ordinary
/// user can run it wherever the tests are copied), else the first `node` on `PATH`.
pub fn node() -> PathBuf {
    let fixed = PathBuf::from("/usr/bin/node");
    if fixed.exists() {
        return fixed;
    }
    node_on_path()
}

/// The first `node` on `PATH` (what the `node_process` tool finds when it is given none).
pub fn node_on_path() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("node"))
                .find(|p| p.is_file())
        })
        .expect("Node.js on PATH")
}

/// `<prefix>-<pid>-<n>`: unique within this test process, and between test processes.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The kernel's Landlock ABI, as the caller probed it (`confine_nodeexec::LandlockSupport`, which this
/// crate cannot depend on): the sandbox suites need one and fail loudly on a kernel without.
pub fn landlock_abi(probed: Option<u32>) -> u32 {
    probed
        .expect("these tests need a kernel with Landlock (5.13 or later, enabled in the LSM list)")
}
