//! Project chores as code (`cargo xtask <command>`): `test` sets up and runs every suite (the
//! README's test command), `conformance` runs the case corpus, `layers` checks that crate
//! dependencies point down, `bench` runs every criterion bench, `load` drives MCP servers with
//! pipelined calls (see `load.rs`), `perf-mcp` compares the stdio serving path with an earlier
//! revision's (see `perf_mcp.rs`), `hot-symbols` writes the linker's list of the functions a
//! session of reads runs (see `hot_symbols.rs`), `census` checks that nothing of a test run is alive, `skips` prints and checks what did not
//! run (see `skips.rs`).
//! Each check that can also runs as a `#[test]`, so `cargo test --workspace` catches drift.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod bench;
mod conformance;
mod hot_symbols;
mod layers;
mod load;
mod perf_mcp;
mod skips;
mod test;
mod tool_layers;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    if let Err(e) = std::env::set_current_dir(&root) {
        eprintln!("xtask: cannot enter the workspace root: {e}");
        return ExitCode::from(2);
    }
    match args.first().map(String::as_str) {
        Some("conformance") => conformance::run(&root.join("tests/conformance")),
        Some("layers") => layers::run(&root),
        Some("bench") => bench::run(&args[1..]),
        Some("test") => test::run(&root, &args[1..]),
        Some("load") => load::run(&args[1..]),
        Some("perf-mcp") => perf_mcp::run(&args[1..]),
        Some("hot-symbols") => hot_symbols::run(),
        Some("census") => test::census(&args[1..]),
        Some("skips") => skips::run(&root, &args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask <test [cargo test args…]|conformance|layers|bench [criterion args…]|load [options]|perf-mcp --base REV [--pairs N] [--calls N]|hot-symbols|census <run id>|skips <env> <log>>"
            );
            ExitCode::from(2)
        }
    }
}

/// The workspace root: the parent of this crate's manifest directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}
