//! The top-level suites of `confine-cli`, one integration test binary: `cargo test -p
//! confine-cli --test suite` runs them all, `cargo test -p confine-cli --test suite files::`
//! one group, `… --test suite files::deny_cli::` one suite (libtest filters on the test's
//! path, `group::suite::test_name`). They drive the built `confine` binary from outside, or
//! the crates together as an embedder would; each crate's own tests stay in that crate.
//!
//! A suite is a module of one group below, in `tests/<group>/<suite>.rs`, named so that it
//! does not repeat a crate's own test module (`deny_cli`, not `deny`). `support` holds the
//! helpers every suite shares (the built binary, workspaces, the process census). A new suite
//! is one file in its group's directory and one `mod` line in its group here.
//!
//! Table of contents:
//!
//! - `files`: the file tools through the binary (deny and protect lists, ownership, special
//!   files, races, full and read-only file systems, bounded scans, the kernel as judge);
//! - `commands`: `node_process`, `run_command`, background and interactive jobs, the sandbox,
//!   the everyday battery;
//! - `network`: the network policy and real clients through it;
//! - `serving`: `confine mcp` over stdio and HTTP, `confine call`, `confine guard`/`jail`,
//!   bounded input, clients nobody here wrote;
//! - `redteam`: attacks from outside, each beside the legitimate twin;
//! - `environments`: where the binary is deployed (gVisor, the container image, manifests,
//!   agent configurations, the published crates' shape).

mod support;

/// The file tools through the binary.
mod files {
    // Scans bounded in memory: a 100 GiB sparse file, a 200 MiB line.
    mod bounded_scans;
    // Checkpoints of every change, listed, diffed and restored to the exact tree.
    mod checkpoints_cli;
    // Denied paths: refused by name, through symlinks, left out of walks.
    mod deny_cli;
    // edit_file's diagnostics on the wire of `confine call`.
    mod edit_diagnostics_cli;
    // edit_file racing an appending writer: an answer never hides an effect.
    mod edit_race;
    // ENOSPC, EROFS and a server out of descriptors.
    mod faults;
    // Every path-taking tool answers as openat2(RESOLVE_BENEATH) resolves.
    mod kernel_judge;
    // A replaced file keeps its owner, group and permission bits.
    mod ownership;
    // Protected paths (git hooks, fsmonitor…) refused before any effect.
    mod protected;
    // read_media through `confine call` and `confine mcp`.
    mod read_media_cli;
    // read_file never opens a FIFO or a device it refuses.
    mod read_special;
    // write_file across crates and through the binary, as attacks.
    mod write_file_cli;
    // Racing writers with the name watched.
    mod write_race;
}

/// Running programs: node_process, run_command, jobs, the sandbox.
mod commands {
    // The everyday battery, sandboxed and not, as root and as an ordinary user.
    mod everyday;
    // Interactive jobs through `confine call`.
    mod interactive_cli;
    // Background jobs through the tools and the binary.
    mod jobs_cli;
    // node_process across crates and through the binary, with a real Node.js.
    mod node_process_cli;
    // run_command across crates and through the binary.
    mod run_command_cli;
    // A call ends with its program, whatever holds its output.
    mod run_ends;
    // The kernel sandbox (on by default), end to end.
    mod sandbox_cli;
    // git clone and fetch over HTTP from an allowed host, under the default sandbox.
    mod sandbox_git;
}

/// The network policy of `--allow-net` and `--sandbox`.
mod network {
    // The policy end to end, as attacks on the host's loopback.
    mod netpolicy_cli;
    // Real clients (npm, git, pip…) through the policy.
    mod netpolicy_clients;
}

/// The binary's front ends: `confine mcp` (stdio and HTTP), `confine call`, the graders.
mod serving {
    // Lines at the bound and one byte over, to `confine call` and `confine mcp`.
    mod bounded_input;
    // `confine call`: JSON Lines in, one flushed line out per call.
    mod call_cli;
    // `confine guard` and `confine jail` through the binary.
    mod guard_jail_cli;
    // `confine mcp --http`, every status and header seen.
    mod http_front;
    // `confine mcp --http` judged by the SDK clients and the conformance suite.
    mod http_interop;
    // `confine mcp` over stdio with raw bytes: one answer per request line.
    mod mcp_answers;
    // `confine mcp` judged by the official TypeScript SDK client.
    mod mcp_interop;
    // run_command's progress over MCP, judged by the TypeScript SDK client.
    mod mcp_progress;
    // `confine mcp` over stdio, spoken to by rmcp's client.
    mod mcp_stdio;
}

/// Red team: attacks from outside, each beside a twin that shows the legitimate path works.
mod redteam {
    // A model after denied secrets (`--deny`).
    mod denied_secrets;
    // `confine call` attacked from outside.
    mod from_outside;
    // Stalls against `confine mcp --http` by unauthenticated connections.
    mod http_stalls;
    // A launcher's descriptors onto outside files are not handed to children.
    mod inherited_fds;
    // An embedder's deny and protect lists through a public factory.
    mod library_embedder;
    // The network policy's presets and address classes.
    mod net_presets;
    // Planted git hooks and fsmonitor commands.
    mod protected_hooks;
    // Regex crawls and huge skips, bounded in time and memory.
    mod scan_attacks;
}

/// Where the binary runs and how it is deployed.
mod environments {
    // The agent configuration snippets start a working `confine mcp`.
    mod agent_configs;
    // The deployment manifests, checked without a cluster.
    mod deploy;
    // The same battery on the host and under gVisor.
    mod gvisor;
    // The container image run as a cluster runs it (ignored: see its docs).
    mod image;
    // The workspace's shape as a dependent meets it.
    mod published_crates;
}
