//! The tools an LLM agent calls inside one workspace, and the layer that serves them.
//!
//! The tools: `read_file`, `write_file`, `node_process`, `edit_file`, `read_lines`,
//! `read_media`, `list_directory`, `find_files`, `grep`, `file_info`, `create_directory`,
//! `move_file`, `delete_file` ([`WORKSPACE_TOOLS`]; [`READ_ONLY_TOOLS`] are those that change
//! nothing), and, where the embedder enables commands ([`ToolSetOptions::commands`]),
//! `run_command` and the background-job tools `job_output`, `job_stop`, `job_list`,
//! `job_input` and `job_resize`
//! ([`COMMAND_TOOLS`]), which share one [`JobTable`] per registry, counted against a bound
//! that the registries of one embedder may share ([`JobSlots`]). Each tool's arguments,
//! record and tokens are described in `docs/TOOLS.md` (and in its tool type's
//! [`TypedTool::DESCRIPTION`] and schema, which the model sees).
//!
//! # Public surface
//!
//! What a user needs, and all that is public, each item under one path (the root, or
//! [`limits`] for the bounds):
//!
//! - **Building** (one way: factories, each capturing the root once): [`create_read_tool`],
//!   [`create_write_tool`] and [`create_node_process_tool`] for one tool;
//!   [`create_coding_tools`] (those three), [`create_workspace_tools`] (the whole set),
//!   [`create_read_only_tools`] and [`create_selected_tools`] (any subset by name) for a
//!   [`ToolRegistry`]. Every factory builds its tools through one path, which gives each tool
//!   the deny and protected lists of the options ([`ToolSetOptions::denied`],
//!   [`ToolSetOptions::protected`]); a factory that takes no options applies their
//!   defaults (nothing denied, [`DEFAULT_PROTECTED`] protected). Their options:
//!   [`ToolSetOptions`] (with [`NodeOptions`] for `node_process`), [`RunCommandOptions`] (with [`JobSlots`] to share one bound on
//!   running jobs between sets), [`ProtectedPaths`] ([`DEFAULT_PROTECTED`]), [`DeniedPaths`];
//!   their failures:
//!   [`BuildError`], [`SelectError`], [`PatternError`] (a deny or protected pattern), [`CoverError`],
//!   [`DuplicateToolName`].
//! - **Calling**: [`execute_tool_call`] (and [`execute_tool_call_record`]) with a [`ToolCall`],
//!   giving a [`ToolResult`] or [`Cancelled`]; [`ToolRegistry::definitions`] for the model's
//!   tool list ([`ToolDefinition`], [`ToolHints`]); progress through [`with_progress`],
//!   [`ProgressSink`] and [`ProgressReport`].
//! - **Writing a tool of your own**: the [`Tool`] trait (or [`TypedTool`] with
//!   [`parse_arguments`] and [`schema_of`]), [`BoxFuture`], and the error types [`ToolError`],
//!   [`CallError`], [`ErrorKind`] and [`ErrorCode`].
//! - **Each tool's type**, named after the tool ([`ReadFileTool`] serves `read_file`), made
//!   only by the factories; [`WriteInput`] for [`WriteFileTool::check_input`]. The bounds a
//!   caller meets: [`limits`] ([`limits::MAX_READ_BYTES`], [`limits::MAX_MEDIA_BYTES`], …).
//!
//! Inside, the crate has three levels: the factories (which assemble a set), the tools (one
//! module each, none using another's), and the shared parts below them (the trait and
//! tokens, the set's workspace and options, the deny and protected lists on one pattern
//! type, the file primitives, the walk, the process glue); `cargo xtask layers` holds it.
//!
//! The file tools do their filesystem work on a thread pool of their own (never on the
//! reactor), resolve every path on descriptors beneath the root (the `confine-beneath` crate), and check
//! cancellation before each effect. Where no crate does the job, the code is ours: the
//! line streaming of `read_lines` (bounded per line, so a file of any size and a line of any
//! length cost bounded memory) and the exact-text replacement of `edit_file`; its diff is
//! the `similar` crate's, its time format `chrono`'s; `read_media` takes an image's width and
//! height from the `imagesize` crate and encodes it with `base64`.
//!
//! A tool validates its arguments before any effect (serde types with
//! `deny_unknown_fields` that also give the JSON Schema, then the grammar and limits), and every
//! failure is a record `{"error": {"code", "message"}}` whose tokens are the stable contract
//! ([`ErrorKind::code`]). Cancellation is never a record: [`execute_tool_call`] returns
//! `Err(Cancelled)`.
//!
//! ```
//! use confine_tools::{ToolCall, execute_tool_call};
//! use tokio_util::sync::CancellationToken;
//!
//! let tmp = tempfile::tempdir()?;
//! std::fs::write(tmp.path().join("hello.txt"), "hi")?;
//! let registry = confine_tools::create_read_only_tools(tmp.path())?;
//! let call = ToolCall::new("1", "read_file", &serde_json::json!({"path": "hello.txt"}));
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! let result = rt.block_on(execute_tool_call(&registry, &call, &CancellationToken::new()))?;
//! assert!(!result.is_error);
//! assert_eq!(result.content, r#"{"path":"hello.txt","content":"hi","bytes":2}"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Threat model
//!
//! The model is the adversary, through arguments; a concurrent local process swapping
//! symlinks or directories is too. Paths pass the portable grammar (`pathgrammar`), then are
//! resolved only beneath the root's open handle (cap-std, which uses openat2
//! `RESOLVE_BENEATH` on Linux): `..`, absolute paths and symlinks leaving the root cannot be
//! followed whatever races run. An absolute symlink is refused even when it points inside the
//! root (cap-std's rule, kept on purpose: its meaning depends on where the root is mounted).
//! Messages never carry host paths. The embedder may deny paths to the model altogether
//! ([`DeniedPaths`] as [`ToolSetOptions::denied`]: `PATH_DENIED`) and
//! protect the files the host runs or obeys from writes ([`ProtectedPaths`]).
//!
//! # Platform support
//!
//! Linux is tested. The grammar is the same on every OS.

#![deny(missing_docs)]

mod blocking;
mod checkpoint;
mod child;
mod create_directory;
mod delete_file;
mod deny;
mod edit_file;
mod entry;
mod error;
mod factory;
mod file_info;
mod find_files;
mod fsmap;
mod glob;
mod grep;
mod install;
mod jobs;
pub mod limits;
mod list_directory;
mod move_file;
mod network;
mod node_process;
mod parent;
mod patterns;
mod progress;
mod protect;
mod protect_watch;
mod read;
mod read_file;
mod read_lines;
mod read_media;
mod run_command;
mod scan;
mod target_lock;
mod temp_names;
mod tool;
mod traverse;
mod workspace;
mod write_file;

pub use checkpoint::CHECKPOINT_TOOLS;
pub use create_directory::CreateDirectoryTool;
pub use delete_file::DeleteFileTool;
pub use deny::{CoverError, DeniedPaths};
pub use edit_file::EditFileTool;
pub use error::{CallError, Cancelled, ErrorCode, ErrorKind, ToolError};
pub use factory::{
    COMMAND_TOOLS, READ_ONLY_TOOLS, RUN_COMMAND, SelectError, WORKSPACE_TOOLS, create_coding_tools,
    create_node_process_tool, create_read_only_tools, create_read_tool, create_selected_tools,
    create_workspace_tools, create_write_tool,
};
pub use file_info::FileInfoTool;
pub use find_files::FindFilesTool;
pub use grep::GrepTool;
pub use jobs::{JobInputTool, JobListTool, JobOutputTool, JobResizeTool, JobStopTool, JobTable};
pub use list_directory::ListDirectoryTool;
pub use move_file::MoveFileTool;
pub use network::NetworkPolicy;
pub use node_process::NodeProcessTool;
pub use patterns::PatternError;
pub use progress::{ProgressReport, ProgressSink, with_progress};
pub use protect::{DEFAULT_PROTECTED, ProtectedPaths};
pub use read_file::ReadFileTool;
pub use read_lines::ReadLinesTool;
pub use read_media::ReadMediaTool;
pub use run_command::RunCommandTool;
pub use tool::{
    BoxFuture, DuplicateToolName, Tool, ToolCall, ToolDefinition, ToolHints, ToolRegistry,
    ToolResult, TypedTool, execute_tool_call, execute_tool_call_record, parse_arguments, schema_of,
};
pub use workspace::{
    BuildError, CheckpointOptions, JobSlots, NodeOptions, RunCommandOptions, ToolSetOptions,
};
pub use write_file::{WriteFileTool, WriteInput};
