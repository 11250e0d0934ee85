//! Tool factories: capture the root once, build the tools over it.
//!
//! Every public factory, of one tool or of a set, builds through [`Parts`]: the set's
//! [`Workspace`] (the captured root with the options' deny and protected lists), the options,
//! the set's run slots and job table.
//! A tool is made nowhere else, so no factory can build one without the lists (the coding
//! tools once were). A factory that takes no options builds with the defaults of
//! [`ToolSetOptions`]: nothing denied, [`crate::DEFAULT_PROTECTED`] protected.

use std::path::Path;
use std::sync::Arc;

use confine_rootid::WorkspaceRoot;

use crate::create_directory::CreateDirectoryTool;
use crate::delete_file::DeleteFileTool;
use crate::edit_file::EditFileTool;
use crate::file_info::FileInfoTool;
use crate::find_files::FindFilesTool;
use crate::grep::GrepTool;
use crate::jobs::{JobInputTool, JobListTool, JobOutputTool, JobResizeTool, JobStopTool, JobTable};
use crate::list_directory::ListDirectoryTool;
use crate::move_file::MoveFileTool;
use crate::node_process::NodeProcessTool;
use crate::read_file::ReadFileTool;
use crate::read_lines::ReadLinesTool;
use crate::read_media::ReadMediaTool;
use crate::run_command::RunCommandTool;
use crate::tool::{Tool, ToolRegistry};
use crate::workspace::{BuildError, DEFAULT_MAX_JOBS, JobSlots, ToolSetOptions, Workspace};
use crate::write_file::WriteFileTool;

/// Capture `root` for tools (shared by all tools built from it).
pub(crate) fn capture_root(root: impl AsRef<Path>) -> Result<Arc<WorkspaceRoot>, BuildError> {
    Ok(Arc::new(WorkspaceRoot::capture(root)?))
}

/// The `read_file` tool over `root`, with nothing denied (the defaults of
/// [`ToolSetOptions`]). For a deny list, build it as a set:
/// `create_selected_tools(root, options, &["read_file"])`.
pub fn create_read_tool(root: impl AsRef<Path>) -> Result<ReadFileTool, BuildError> {
    Ok(Parts::new(root, ToolSetOptions::default())?.read_file())
}

/// The `write_file` tool over `root`, refusing the default protected paths
/// ([`crate::DEFAULT_PROTECTED`]) as every set built with default options does. For other
/// lists, build it as a set: `create_selected_tools(root, options, &["write_file"])`.
pub fn create_write_tool(root: impl AsRef<Path>) -> Result<WriteFileTool, BuildError> {
    Ok(Parts::new(root, ToolSetOptions::default())?.write_file())
}

/// The `node_process` tool over `root`, with the deny and protected lists of `options` for
/// its sandboxed children.
pub fn create_node_process_tool(
    root: impl AsRef<Path>,
    options: ToolSetOptions,
) -> Result<NodeProcessTool, BuildError> {
    Parts::new(root, options)?.node_process()
}

/// The names of the coding tools, in the order [`create_coding_tools`] serves them.
const CODING_TOOLS: &[&str] = &["read_file", "write_file", "node_process"];

/// The three coding tools (`read_file`, `write_file`, `node_process`) over one captured root,
/// as a registry: [`create_selected_tools`] with those names, so the deny and protected lists
/// of `options` hold for all three, as for every set.
pub fn create_coding_tools(
    root: impl AsRef<Path>,
    options: ToolSetOptions,
) -> Result<ToolRegistry, BuildError> {
    create_selected_tools(root, options, CODING_TOOLS).map_err(|e| match e {
        SelectError::Build(e) => e,
        SelectError::Unknown(_) => unreachable!("every coding tool name is known"),
    })
}

/// The names of the workspace tool set, in the order they are served: the three coding tools,
/// then the file tools.
pub const WORKSPACE_TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "node_process",
    "edit_file",
    "read_lines",
    "read_media",
    "list_directory",
    "find_files",
    "grep",
    "file_info",
    "create_directory",
    "move_file",
    "delete_file",
];

/// The tools of [`WORKSPACE_TOOLS`] that change nothing, in the same order.
pub const READ_ONLY_TOOLS: &[&str] = &[
    "read_file",
    "read_lines",
    "read_media",
    "list_directory",
    "find_files",
    "grep",
    "file_info",
];

/// A name that `--tools` or [`create_selected_tools`] was given and no tool has.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// No workspace tool has this name.
    #[error("unknown tool {0:?}")]
    Unknown(String),
    /// The tools could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// What every tool of one set is built over: the captured root, the options (with their deny
/// and protected lists) and the set's job table. Every factory, of one tool or of a set,
/// builds its tools here and only here, so that no factory can leave a list out.
struct Parts {
    ws: Workspace,
    options: ToolSetOptions,
    jobs: Arc<JobTable>,
}

impl Parts {
    /// Capture `root`; the process tools of the set share one bound on concurrent runs,
    /// whether the embedder gave one ([`ToolSetOptions::slots`]) or not, and one job
    /// table counted against the embedder's [`JobSlots`] if it gave one, else one of the
    /// set's own.
    fn new(root: impl AsRef<Path>, options: ToolSetOptions) -> Result<Self, BuildError> {
        let root = capture_root(root)?;
        let mut options = options;
        options.slots.get_or_insert_with(Default::default);
        let job_slots = match &options.commands {
            Some(c) => c
                .job_slots
                .clone()
                .unwrap_or_else(|| Arc::new(JobSlots::new(c.max_jobs.unwrap_or(DEFAULT_MAX_JOBS)))),
            None => Arc::new(JobSlots::default()),
        };
        Ok(Self {
            ws: Workspace::new(root, &options),
            options,
            jobs: Arc::new(JobTable::new(job_slots)),
        })
    }

    fn read_file(&self) -> ReadFileTool {
        ReadFileTool::new(self.ws.clone())
    }

    fn write_file(&self) -> WriteFileTool {
        WriteFileTool::new(self.ws.clone())
    }

    /// `node_process` alone needs a Node.js executable.
    fn node_process(&self) -> Result<NodeProcessTool, BuildError> {
        NodeProcessTool::new(&self.ws, &self.options)
    }

    /// One tool of the set by name; `None` for an unknown name, or a command tool where the
    /// options enable no commands. `run_command` accepts `background` only `with_job_tools`.
    fn tool(&self, name: &str, with_job_tools: bool) -> Option<Result<Arc<dyn Tool>, BuildError>> {
        let ws = || self.ws.clone();
        let options = &self.options;
        let jobs = &self.jobs;
        let tool: Arc<dyn Tool> = match name {
            "read_file" => Arc::new(self.read_file()),
            "write_file" => Arc::new(self.write_file()),
            "node_process" => {
                return Some(self.node_process().map(|t| Arc::new(t) as Arc<dyn Tool>));
            }
            "edit_file" => Arc::new(EditFileTool::new(ws())),
            "read_lines" => Arc::new(ReadLinesTool::new(ws())),
            "read_media" => Arc::new(ReadMediaTool::new(ws())),
            "file_info" => Arc::new(FileInfoTool::new(ws())),
            "create_directory" => Arc::new(CreateDirectoryTool::new(ws())),
            "move_file" => Arc::new(MoveFileTool::new(ws())),
            "delete_file" => Arc::new(DeleteFileTool::new(ws())),
            "list_directory" => Arc::new(ListDirectoryTool::new(ws())),
            "find_files" => Arc::new(FindFilesTool::new(ws())),
            "grep" => Arc::new(GrepTool::new(ws())),
            RUN_COMMAND => {
                let commands = options.commands.as_ref()?;
                let tool = RunCommandTool::with_jobs(&self.ws, options, commands, jobs.clone());
                Arc::new(if with_job_tools {
                    tool
                } else {
                    tool.without_jobs()
                })
            }
            "job_output" => {
                options.commands.as_ref()?;
                Arc::new(JobOutputTool::new(jobs.clone()))
            }
            "job_stop" => {
                options.commands.as_ref()?;
                Arc::new(JobStopTool::new(jobs.clone()))
            }
            "job_list" => {
                options.commands.as_ref()?;
                Arc::new(JobListTool::new(jobs.clone()))
            }
            "job_input" => {
                options.commands.as_ref()?;
                Arc::new(JobInputTool::new(jobs.clone()))
            }
            "job_resize" => {
                options.commands.as_ref()?;
                Arc::new(JobResizeTool::new(jobs.clone()))
            }
            _ => return None,
        };
        Some(Ok(tool))
    }
}

/// The tools named in `names` (in the order of [`WORKSPACE_TOOLS`], a name given twice served
/// once) over one captured root. An unknown name fails before the root is captured.
pub fn create_selected_tools<S: AsRef<str>>(
    root: impl AsRef<Path>,
    options: ToolSetOptions,
    names: &[S],
) -> Result<ToolRegistry, SelectError> {
    if let Some(unknown) = names
        .iter()
        .find(|n| !WORKSPACE_TOOLS.contains(&n.as_ref()) && !offers_commands(&options, n.as_ref()))
    {
        return Err(SelectError::Unknown(unknown.as_ref().to_owned()));
    }
    // One job table per registry: run_command starts jobs in it, the job tools read it.
    let parts = Parts::new(root, options)?;
    // Jobs are started only where their output can be read.
    let with_job_tools = names.iter().any(|n| n.as_ref() == "job_output");
    let mut tools = Vec::new();
    for name in WORKSPACE_TOOLS {
        if names.iter().any(|n| n.as_ref() == *name) {
            let tool = parts
                .tool(name, with_job_tools)
                .expect("every listed name builds")?;
            tools.push(tool);
        }
    }
    for name in COMMAND_TOOLS {
        if names.iter().any(|n| n.as_ref() == *name)
            && let Some(tool) = parts.tool(name, with_job_tools)
        {
            tools.push(tool?);
        }
    }
    // Checkpoints: the changing tools wrapped, the checkpoint tools added (one place).
    if let Some(c) = &parts.options.checkpoints {
        match crate::checkpoint::open(
            parts.ws.root.clone(),
            c,
            parts.ws.denied.clone(),
            parts.ws.protected.clone(),
        ) {
            Ok(store) => tools = crate::checkpoint::hook(tools, store, parts.jobs.clone()),
            // The default store cannot be made (no home, a read-only one): the set is served
            // without checkpoints rather than not at all. A store the embedder named must work.
            Err(confine_checkpoint::Error::Store(e)) if c.dir.is_none() => {
                tracing::warn!(error = %e, "checkpoints off: the default store cannot be used");
            }
            Err(e) => return Err(BuildError::Checkpoints(e).into()),
        }
    }
    Ok(ToolRegistry::new(tools).expect("the listed names are distinct"))
}

/// The whole workspace tool set ([`WORKSPACE_TOOLS`]) over one captured root.
pub fn create_workspace_tools(
    root: impl AsRef<Path>,
    options: ToolSetOptions,
) -> Result<ToolRegistry, BuildError> {
    let mut names = WORKSPACE_TOOLS.to_vec();
    if options.commands.is_some() {
        names.extend_from_slice(COMMAND_TOOLS);
    }
    create_selected_tools(root, options, &names).map_err(|e| match e {
        SelectError::Build(e) => e,
        SelectError::Unknown(_) => unreachable!("every workspace tool name is known"),
    })
}

/// The read-only tools ([`READ_ONLY_TOOLS`]) over one captured root, as a registry
/// (`--read-only`). No Node.js is needed.
pub fn create_read_only_tools(root: impl AsRef<Path>) -> Result<ToolRegistry, BuildError> {
    create_selected_tools(root, ToolSetOptions::default(), READ_ONLY_TOOLS).map_err(|e| match e {
        SelectError::Build(e) => e,
        SelectError::Unknown(_) => unreachable!("every read-only tool name is known"),
    })
}

/// The name of the command tool: served (last) only where the embedder enabled it
/// ([`ToolSetOptions::commands`]), never among the read-only tools.
pub const RUN_COMMAND: &str = "run_command";

/// The command tool and the background-job tools that come with it, in the order served
/// (after the workspace tools), only where the embedder enabled commands.
pub const COMMAND_TOOLS: &[&str] = &[
    RUN_COMMAND,
    "job_output",
    "job_stop",
    "job_list",
    "job_input",
    "job_resize",
];

/// Whether `name` is a command tool and `options` enable them.
fn offers_commands(options: &ToolSetOptions, name: &str) -> bool {
    COMMAND_TOOLS.contains(&name) && options.commands.is_some()
}
