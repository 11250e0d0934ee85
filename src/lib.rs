//! `confine`: coding tools for LLM agents that cannot reach outside one directory.
//!
//! This facade re-exports the workspace's crates, each usable alone:
//! [`pathgrammar`] (the portable relative-path grammar), [`rootid`] (workspace root identity),
//! [`atomicwrite`] (identity-checked atomic installation), [`nodeexec`] (bounded child
//! processes), [`jail`] (the path guard and `FileJail`) and [`tools`] (the tool layer and the
//! `read_file`, `write_file` and `node_process` tools). The `confine` binary serves the tools
//! over MCP (`confine mcp`) and JSON Lines (`confine call`).

pub use atomicwrite;
pub use jail;
pub use nodeexec;
pub use pathgrammar;
pub use rootid;
pub use tools;

/// The README's Rust examples, compiled as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
