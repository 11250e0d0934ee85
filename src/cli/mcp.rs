//! `confine mcp`: the tools served to any agent over the Model Context Protocol on stdio,
//! with rmcp, the official Rust MCP SDK.
//!
//! - `tools/list` gives every tool of the registry (the whole workspace tool set by default;
//!   `--read-only` the tools that change nothing; `--tools a,b` a chosen subset) with its
//!   model-facing description, the JSON Schema derived from the type that validates its
//!   arguments, and its annotations (read-only, destructive, idempotent, open-world hints,
//!   from [`confine_tools::Tool::hints`]).
//! - `tools/call` runs [`confine_tools::execute_tool_call`] and answers with one text content item
//!   holding the JSON record, `structuredContent` holding the same object, and `isError`.
//!   Argument and execution errors are tool results (`isError: true`), never protocol errors;
//!   only a tool name that is not served is a JSON-RPC error (`-32602`, invalid params, as the
//!   MCP specification shows for unknown tools).
//! - `tools/call` whose `params` do not have the shape of a call (`arguments` that is not an
//!   object, a `name` that is not a string) is the JSON-RPC error `-32602`, invalid params.
//! - Every request is answered exactly once, whatever the line holds (see [`crate::serve::mcp::gate`] and
//!   [`crate::serve::mcp::triage`]): a line that is not JSON (invalid UTF-8 included) is `-32700` with `id: null`;
//!   JSON that is not a JSON-RPC request is `-32600` with its `id` where it is a string or a
//!   number; nesting deeper than 128 levels is `-32600` with its `id`; a message longer than
//!   [`crate::serve::lines::MAX_LINE_BYTES`] (4 MiB, see [`crate::serve::lines`] for why) is never read into
//!   memory and is `-32600` with the `id` found in it; a second request with the `id` of one
//!   still in flight is `-32600`, and the first is answered as usual. Notifications and blank
//!   lines get no answer. The session goes on after each.
//! - At most 64 calls run at once per connection and at most 16 MiB of answers wait for the
//!   client; beyond either, the server stops reading input until the client reads.
//! - `notifications/cancelled` cancels the call's token: the node process group is killed and
//!   reaped and the script removed before the call's future completes; no response is sent
//!   for a cancelled request (the protocol says so). Requests run concurrently (one async
//!   worker, their blocking work on the tools' pool), each with its own token, so a
//!   cancelled call disturbs no other.
//! - End of input cancels every running call at once (their processes die), then the server
//!   exits 0. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 or SIGALRM does the same,
//!   also before the session is initialized and while answers wait for a client that does
//!   not read (those are dropped after 200 ms), and exits 0 within a second.
//! - One banner line goes to stderr at start; logs (tracing, filtered by `CONFINE_LOG`, default
//!   `warn`) go to stderr; stdout carries nothing but the protocol.
//!
//! `--node`, `--timeout-ms` and the sandbox (on unless `--no-sandbox`) reach the node_process
//! tool through [`ToolArgs::node_options`], the same path `confine call` uses.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::common::{ToolArgs, usage};
use crate::serve::http;
use crate::serve::mcp::server;
pub use server::ConfineServer;

/// Arguments of `confine mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub http: HttpArgs,
}

/// The HTTP options of `confine mcp`.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpArgs {
    /// Serve MCP over Streamable HTTP at http://ADDR:PORT/mcp instead of stdio (PORT 0 picks
    /// a free port). Loopback only unless --http-public. Requests need
    /// `Authorization: Bearer TOKEN`: the token is CONFINE_HTTP_TOKEN, else read from
    /// --http-token-file.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,
    /// Allow --http on an address that is not loopback (put TLS in front of such a server).
    #[arg(long, requires = "http")]
    pub http_public: bool,
    /// The file holding the bearer token; created with mode 0600 and a new random token when
    /// missing. Must not be beneath the workspace root.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub http_token_file: Option<PathBuf>,
    /// Serve without authentication (only on a loopback address).
    #[arg(long, requires = "http", conflicts_with_all = ["http_token_file", "http_public"])]
    pub http_no_auth: bool,
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    super::common::hide_environment(&args.tools);
    super::common::init_logging();
    if let Some(addr) = args.http.http {
        return http::run(&args.tools, &args.http, addr, setting(&args.tools));
    }
    let registry = match args.tools.registry() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let server = ConfineServer::new(registry, setting(&args.tools));
    // A multi-thread runtime with one worker. The worker only reads, dispatches and
    // serializes; what may block (walks, writes and their fsync, processes' setup) goes to
    // the tools' pool (`off_reactor`), which a multi-thread runtime selects, so calls still
    // run concurrently. A second worker bought nothing but cross-thread wake-ups: every
    // request hops through rmcp's service loop, a handler task and a send task, and with two
    // workers those hops woke the other one (one worker: sequential reads about 1.5x as
    // fast, a third less CPU per call, docs/PERFORMANCE.md). Brief reads run on the worker
    // only on a local file system (`confine_tools`' `blocking` module).
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("confine-mcp")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return usage("cannot start the async runtime"),
    };
    eprintln!(
        "confine {} mcp: serving {} on stdio (root {})",
        env!("CARGO_PKG_VERSION"),
        server.tool_names().join(", "),
        std::path::absolute(&args.tools.root)
            .unwrap_or_else(|_| args.tools.root.clone())
            .display(),
    );
    let code = runtime.block_on(crate::serve::mcp::serve_stdio(server));
    // Every call has ended when `serve` returns; what may still run is a blocking read of
    // stdin (a terminal or a file), which must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

/// What the instructions say of the flags.
fn setting(args: &ToolArgs) -> server::Setting {
    server::Setting {
        read_only: args.read_only,
        timeout_ms: args.timeout_ms,
        sandbox: args.sandboxed(),
        command_timeout_ms: args.command_timeout_ms,
        command_max_timeout_ms: args.command_max_timeout_ms,
        allow_net: !args.allow_net.is_empty(),
        denied: !args.deny.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;
    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::serve::mcp::gate;
    use crate::serve::mcp::server::{test_session, until_id};

    fn message() -> impl Strategy<Value = Vec<u8>> {
        let id = prop_oneof![
            Just("1"),
            Just("\"s\""),
            Just("null"),
            Just("{}"),
            Just("1.5")
        ];
        let method = prop::sample::select(vec![
            "tools/call",
            "tools/list",
            "ping",
            "initialize",
            "notifications/cancelled",
            "resources/list",
            "",
        ]);
        let params = prop_oneof![
            Just("{\"name\":\"read_file\",\"arguments\":{\"path\":\"a.txt\"}}"),
            Just("{\"name\":\"read_file\",\"arguments\":\"a.txt\"}"),
            Just("{\"name\":7}"),
            Just("{\"requestId\":1}"),
            Just("[]"),
            Just("null"),
        ];
        prop_oneof![
            3 => (id, method, params).prop_map(|(i, m, p)| {
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"{m}\",\"params\":{p}}}")
                    .into_bytes()
            }),
            // Over the line bound of the session below.
            1 => (600usize..2000).prop_map(|n| {
                format!("{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"x\":\"{}\"}}", "a".repeat(n))
                    .into_bytes()
            }),
            1 => proptest::collection::vec(any::<u8>(), 0..80),
        ]
    }

    /// The twin of the `mcp_messages` fuzz target: one session over an in-memory pipe with a
    /// 512-byte line bound; after any messages, a `ping` is answered, and every line the server
    /// writes is JSON-RPC 2.0.
    #[test]
    fn the_session_survives_any_messages() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "alpha").unwrap();
        let registry = confine_tools::create_read_only_tools(tmp.path()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let handler = ConfineServer::new(registry, server::Setting::default());
        let limits = gate::Limits {
            line_bytes: 512,
            ..gate::Limits::SERVED
        };
        let io = runtime.block_on(test_session(handler, limits));
        let io = std::cell::RefCell::new(io);
        let next = std::cell::Cell::new(0u64);
        proptest!(ProptestConfig::with_cases(256), |(messages in proptest::collection::vec(message(), 1..5))| {
            let n = next.get();
            next.set(n + 1);
            let id = Value::from(format!("sync-{n}"));
            let ping = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
            let mut bytes = messages.join(&b'\n');
            bytes.extend_from_slice(format!("\n{ping}\n").as_bytes());
            let (write, lines) = &mut *io.borrow_mut();
            let answered = runtime.block_on(async {
                write.write_all(&bytes).await.unwrap();
                tokio::time::timeout(std::time::Duration::from_secs(20), until_id(lines, &id)).await
            });
            prop_assert_eq!(answered, Ok(Ok(())), "the ping after the messages is answered");
        });
    }

    /// The instructions for the flags `flags`, through the real flag parser and registry.
    fn instructions_for(flags: &[&str]) -> String {
        use rmcp::ServerHandler as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            tools: ToolArgs,
        }
        use clap::Parser as _;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_str().unwrap();
        let cli = Cli::parse_from(["confine", "--root", root].iter().chain(flags));
        let registry = cli.tools.registry().expect("a registry");
        let server = ConfineServer::new(registry, setting(&cli.tools));
        server
            .get_info()
            .instructions
            .expect("instructions")
            .to_string()
    }

    /// The names `tools/list` gives for `flags`, through the real flag parser and registry.
    fn listed_for(flags: &[&str]) -> Vec<String> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            tools: ToolArgs,
        }
        use clap::Parser as _;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_str().unwrap();
        let cli = Cli::parse_from(["confine", "--root", root].iter().chain(flags));
        let registry = cli.tools.registry().expect("a registry");
        registry.tools().map(|t| t.name().to_owned()).collect()
    }

    #[test]
    fn instructions_name_exactly_the_tools_offered_and_the_bounds_in_force() {
        let every: Vec<&str> = confine_tools::WORKSPACE_TOOLS
            .iter()
            .chain(confine_tools::COMMAND_TOOLS)
            .copied()
            .collect();
        let sets: [&[&str]; 6] = [
            &[],
            &["--read-only"],
            &["--tools", "read_file,grep"],
            &["--tools", "read_lines,write_file"],
            &["--allow-commands"],
            &[
                "--allow-commands",
                "--tools",
                "run_command,job_output,edit_file",
            ],
        ];
        for flags in sets {
            let text = instructions_for(flags);
            let listed = listed_for(flags);
            assert!(
                text.contains(&format!("This server offers: {}.", listed.join(", "))),
                "{flags:?}: {text}"
            );
            // Every tool it does not offer goes unnamed, anywhere in the text.
            for name in &every {
                let named = text
                    .match_indices(name)
                    .any(|(i, _)| !text[i + name.len()..].starts_with('_'));
                assert_eq!(
                    named,
                    listed.iter().any(|l| l == name),
                    "{flags:?}: {name} in {text}"
                );
            }
        }
        let default = instructions_for(&[]);
        assert!(default.contains("at most 65,536 bytes; for a larger file use read_lines"));
        assert!(default.contains("a time bound of 500 ms"), "{default}");
        let no_lines = instructions_for(&["--tools", "read_file"]);
        assert!(no_lines.contains("(FILE_TOO_LARGE beyond)"), "{no_lines}");
        let bounds = instructions_for(&[
            "--allow-commands",
            "--timeout-ms",
            "900",
            "--command-timeout-ms",
            "5000",
            "--command-max-timeout-ms",
            "9000",
        ]);
        assert!(bounds.contains("a time bound of 900 ms"), "{bounds}");
        assert!(
            bounds.contains(
                "a time bound of 5000 ms unless timeoutMs asks for another, at most 9000 ms"
            ),
            "{bounds}"
        );
        let commands = instructions_for(&["--allow-commands"]);
        assert!(
            commands.contains("120000 ms unless timeoutMs asks for another, at most 600000 ms"),
            "{commands}"
        );
    }

    #[test]
    fn instructions_say_denied_paths_exist_only_when_some_are() {
        const DENIED: &str = "Some paths of this workspace are denied";
        for flags in [
            &[][..],
            &["--read-only"],
            &["--allow-commands", "--sandbox"],
        ] {
            let text = instructions_for(flags);
            assert!(
                !text.contains(DENIED) && !text.contains("PATH_DENIED"),
                "{flags:?}: {text}"
            );
        }
        let read_only = instructions_for(&["--read-only", "--deny", "**/.env"]);
        assert!(read_only.contains(DENIED), "{read_only}");
        assert!(
            read_only.contains("refuses it with PATH_DENIED"),
            "{read_only}"
        );
        assert!(
            read_only.contains("counting them in `denied`"),
            "{read_only}"
        );
        assert!(!read_only.contains("node_process"), "{read_only}");
        let default =
            instructions_for(&["--no-sandbox", "--deny", "*.pem", "--deny", "secrets/**"]);
        assert!(default.contains(DENIED), "{default}");
        assert!(
            default.contains("What node_process runs is not held to this."),
            "{default}"
        );
        let sandboxed = instructions_for(&["--allow-commands", "--sandbox", "--deny", "*.pem"]);
        assert!(
            sandboxed.contains("What node_process and run_command run cannot read them either."),
            "{sandboxed}"
        );
        assert!(!sandboxed.contains("not held"), "{sandboxed}");
    }

    #[test]
    fn instructions_never_claim_confinement_for_unsandboxed_runners() {
        const UNCONFINED: &str = "not confined to the workspace: what they run has this \
                                  server's own access to the machine";
        const ALL_CONFINED: &str = "These tools work inside one directory, the workspace, and \
                                    cannot reach outside it.";
        const SANDBOXED: &str = "under a kernel sandbox";

        // The default: the runners are sandboxed.
        let default = instructions_for(&[]);
        assert!(
            default.contains(&format!("node_process runs {SANDBOXED}")),
            "{default}"
        );
        assert!(!default.contains("not confined"), "{default}");
        let default_commands = instructions_for(&["--allow-commands"]);
        assert!(
            default_commands.contains(&format!("node_process and run_command run {SANDBOXED}")),
            "{default_commands}"
        );

        let unconfined = instructions_for(&["--no-sandbox"]);
        assert!(
            unconfined.contains(&format!("node_process is {UNCONFINED}")),
            "{unconfined}"
        );
        assert!(!unconfined.contains(ALL_CONFINED), "{unconfined}");
        assert!(!unconfined.contains(SANDBOXED), "{unconfined}");
        assert!(unconfined.starts_with("The file tools work inside one directory"));

        let commands = instructions_for(&["--allow-commands", "--no-sandbox"]);
        assert!(
            commands.contains(&format!("node_process and run_command are {UNCONFINED}")),
            "{commands}"
        );
        assert!(commands.contains("run_command runs a shell command"));
        assert!(
            commands.contains("background: true starts a job"),
            "{commands}"
        );
        assert!(!default.contains("job_output"), "{default}");
        let no_jobs =
            instructions_for(&["--allow-commands", "--no-sandbox", "--tools", "run_command"]);
        assert!(!no_jobs.contains("job_output"), "{no_jobs}");
        assert!(!commands.contains(ALL_CONFINED), "{commands}");

        let sandboxed = instructions_for(&["--sandbox", "--allow-commands"]);
        assert!(
            sandboxed.contains(&format!("node_process and run_command run {SANDBOXED}")),
            "{sandboxed}"
        );
        assert!(sandboxed.contains("NODE_SANDBOX_UNAVAILABLE"));
        assert!(!sandboxed.contains("not confined"), "{sandboxed}");
        assert!(!sandboxed.contains(ALL_CONFINED), "{sandboxed}");

        let only_node = instructions_for(&["--sandbox"]);
        assert!(
            only_node.contains(&format!("node_process runs {SANDBOXED}")),
            "{only_node}"
        );
        assert!(!only_node.contains("run_command"), "{only_node}");

        let read_only = instructions_for(&["--read-only"]);
        assert!(read_only.starts_with(ALL_CONFINED), "{read_only}");
        assert!(read_only.contains("This server is read-only"));
        assert!(!read_only.contains("node_process"), "{read_only}");
        assert!(!read_only.contains("run_command"), "{read_only}");

        // A chosen subset without runners is wholly confined; with node_process it is not.
        assert!(instructions_for(&["--tools", "read_file,grep"]).starts_with(ALL_CONFINED));
        assert!(
            instructions_for(&["--no-sandbox", "--tools", "read_file,node_process"])
                .contains(UNCONFINED)
        );
    }
}
