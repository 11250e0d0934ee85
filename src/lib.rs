//! `confine-cli`: coding tools for LLM agents that cannot reach outside one directory.
//!
//! This package builds the `confine` binary and is a facade that re-exports the workspace's
//! library crates under short names, each also usable alone as its own package:
//! [`pathgrammar`] (`confine-pathgrammar`, the portable relative-path grammar), [`rootid`]
//! (`confine-rootid`, workspace root identity), [`beneath`] (`confine-beneath`, descriptor
//! primitives for staying beneath a directory), [`atomicwrite`] (`confine-atomicwrite`,
//! identity-checked atomic installation), [`nodeexec`] (`confine-nodeexec`, bounded child
//! processes), [`jail`] (`confine-jail`, the path guard and `FileJail`), [`netpolicy`]
//! (`confine-netpolicy`, the `--allow-net` list and the proxy that enforces it), [`checkpoint`]
//! (`confine-checkpoint`, the store that records, diffs and restores the workspace) and [`tools`]
//! (`confine-tools`, the tool layer and every tool the server offers: files, edits, walks,
//! search, images, commands, background jobs and JavaScript). The `confine` binary serves the tools
//! over MCP (`confine mcp`) and JSON Lines (`confine call`).

#![deny(missing_docs)]

pub use confine_atomicwrite as atomicwrite;
pub use confine_beneath as beneath;
pub use confine_checkpoint as checkpoint;
pub use confine_jail as jail;
pub use confine_netpolicy as netpolicy;
pub use confine_nodeexec as nodeexec;
pub use confine_pathgrammar as pathgrammar;
pub use confine_rootid as rootid;
pub use confine_tools as tools;

mod cli;
pub mod serve;

/// The `confine` binary's entry point: parse the command line and run the subcommand.
#[doc(hidden)]
pub fn main() -> std::process::ExitCode {
    cli::main()
}

/// The README's Rust examples, compiled as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
