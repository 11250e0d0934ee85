//! Checkpoints: every change a call may make, recorded before it (the `confine-checkpoint`
//! crate's store), and the tools that list, diff and undo them: `checkpoint_list {}`,
//! `checkpoint_diff {id, path?}`, `checkpoint_restore {id, paths?, dryRun?}`.
//!
//! Built by the factories when [`ToolSetOptions::checkpoints`](crate::ToolSetOptions)
//! is set and the set holds a tool that changes the workspace: each such tool is wrapped
//! once, where the set is built, so no tool carries checkpoint code of its own. Before a file
//! tool's call (`write_file`, `edit_file`, `create_directory`, `move_file`, `delete_file`)
//! the checkpoint looks at the paths it names; before a run's (`node_process`,
//! `run_command`, `job_stop`, `job_input`) it walks the tree. After the call it looks again,
//! so the checkpoint's `changed` counts what the call changed. A background job's end takes
//! one more (`job_end`, summary `job-N: command`) once its processes are reaped, before the
//! job is seen ended. A call its tool refuses on
//! validation changes nothing and takes none. Should the store fail, the call still runs (the
//! failure is logged): checkpoints serve the user and never stand in the agent's way.
//!
//! The denied and protected paths of the set are never read nor written by a checkpoint or a
//! restore. While a job of the set runs, a restore changes nothing and reports every path
//! `skipped` with `a job is running` (stop the job, then restore).

use std::path::Path;
use std::sync::Arc;

use confine_checkpoint::{CallInfo, Checkpoints, Config, Exclude, Scope};
use confine_rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::deny::DeniedPaths;
use crate::error::{CallError, ErrorKind, ToolError};
use crate::jobs::JobTable;
use crate::protect::ProtectedPaths;
use crate::tool::{BoxFuture, Tool, ToolHints, TypedTool};
use crate::workspace::CheckpointOptions;

/// The checkpoint tools, in the order served (after the tools of the set).
pub const CHECKPOINT_TOOLS: &[&str] = &["checkpoint_list", "checkpoint_diff", "checkpoint_restore"];

/// The file tools whose checkpoint looks at the paths they name.
const FILE_TOOLS: &[&str] = &[
    "write_file",
    "edit_file",
    "create_directory",
    "delete_file",
    "move_file",
];

/// The tools whose checkpoint walks the tree (what runs may change anything).
/// The `call.name` of the checkpoint taken at a job's end (its summary: `job-N: command`).
const JOB_END: &str = "job_end";

const RUN_TOOLS: &[&str] = &["node_process", "run_command", "job_stop", "job_input"];

/// The set's denied and protected paths, as the store's exclusion.
struct Excluded {
    denied: Arc<DeniedPaths>,
    protected: Arc<ProtectedPaths>,
}

impl Exclude for Excluded {
    fn excluded(&self, path: &str) -> bool {
        let p = Path::new(path);
        self.denied.is_denied(p) || self.protected.is_protected(p)
    }
}

/// Open the store of `root` for a set.
pub(crate) fn open(
    root: Arc<WorkspaceRoot>,
    options: &CheckpointOptions,
    denied: Arc<DeniedPaths>,
    protected: Arc<ProtectedPaths>,
) -> Result<Arc<Checkpoints>, confine_checkpoint::Error> {
    let dir = match &options.dir {
        Some(dir) => dir.clone(),
        None => confine_checkpoint::default_dir(&root).ok_or_else(|| {
            confine_checkpoint::Error::Store(std::io::Error::other(
                "no state or home directory for the checkpoint store",
            ))
        })?,
    };
    let mut config = Config::new(dir);
    if let Some(n) = options.max_checkpoints {
        config.max_checkpoints = n;
    }
    if let Some(n) = options.max_bytes {
        config.max_bytes = n;
    }
    config.include_ignored = options.include_ignored;
    Ok(Arc::new(Checkpoints::open(
        root,
        config,
        Arc::new(Excluded { denied, protected }),
    )?))
}

/// Wrap the changing tools of `tools` and add the checkpoint tools (when the set changes
/// anything at all).
pub(crate) fn hook(
    tools: Vec<Arc<dyn Tool>>,
    checkpoints: Arc<Checkpoints>,
    jobs: Arc<JobTable>,
) -> Vec<Arc<dyn Tool>> {
    let changes = tools
        .iter()
        .any(|t| FILE_TOOLS.contains(&t.name()) || RUN_TOOLS.contains(&t.name()));
    if !changes {
        return tools;
    }
    let mut out: Vec<Arc<dyn Tool>> = tools
        .into_iter()
        .map(|tool| {
            if FILE_TOOLS.contains(&tool.name()) || RUN_TOOLS.contains(&tool.name()) {
                Arc::new(Checkpointed {
                    inner: tool,
                    checkpoints: checkpoints.clone(),
                    jobs: jobs.clone(),
                }) as Arc<dyn Tool>
            } else {
                tool
            }
        })
        .collect();
    // A job's end: what it changed, recorded once its processes are reaped.
    let at_end = checkpoints.clone();
    // The job slots, not the table: the table holds this hook, and must still drop.
    let slots = jobs.slots().clone();
    jobs.on_end(Arc::new(move |id: &str, command: &str| {
        let call = CallInfo {
            name: JOB_END.to_owned(),
            summary: first_chars(&format!("{id}: {command}"), 80),
        };
        if let Err(e) = at_end.take(call, &Scope::All) {
            tracing::warn!(job = id, error = %e, "checkpoint of a job's end not taken");
            return;
        }
        // Another job still running may change anything: the next checkpoint walks again.
        let after = (slots.running() == 0).then_some(Scope::All);
        if let Err(e) = at_end.after(after.as_ref()) {
            tracing::warn!(job = id, error = %e, "checkpoint of a job's end not updated");
        }
    }));
    let shared = Shared { checkpoints, jobs };
    out.push(Arc::new(CheckpointListTool(shared.clone())));
    out.push(Arc::new(CheckpointDiffTool(shared.clone())));
    out.push(Arc::new(CheckpointRestoreTool(shared)));
    out
}

/// A changing tool, checkpointed before each call.
struct Checkpointed {
    inner: Arc<dyn Tool>,
    checkpoints: Arc<Checkpoints>,
    jobs: Arc<JobTable>,
}

/// The first `n` characters of `s`, on one line.
fn first_chars(s: &str, n: usize) -> String {
    s.chars()
        .take(n)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// What a call is, for the list, and what its checkpoint looks at.
fn describe(name: &str, arguments: &RawValue) -> (CallInfo, Option<Vec<String>>) {
    let args: Value = serde_json::from_str(arguments.get()).unwrap_or(Value::Null);
    let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
    let paths: Vec<String> = match name {
        "move_file" => vec![text("source").to_owned(), text("destination").to_owned()],
        _ if FILE_TOOLS.contains(&name) => vec![text("path").to_owned()],
        _ => Vec::new(),
    };
    let summary = match name {
        "node_process" => first_chars(text("source"), 80),
        "run_command" => first_chars(text("command"), 80),
        "job_stop" | "job_input" => first_chars(text("jobId"), 80),
        _ => first_chars(&paths.join(" -> "), 200),
    };
    let call = CallInfo {
        name: name.to_owned(),
        summary,
    };
    if !FILE_TOOLS.contains(&name) {
        return (call, None);
    }
    let normal: Option<Vec<String>> = paths
        .iter()
        .map(|p| {
            confine_pathgrammar::normalize(p)
                .ok()
                .map(|r| r.into_string())
        })
        .collect();
    (call, normal)
}

impl Tool for Checkpointed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn description(&self) -> &'static str {
        self.inner.description()
    }

    fn parameters(&self) -> Value {
        self.inner.parameters()
    }

    fn hints(&self) -> ToolHints {
        self.inner.hints()
    }

    fn validate(&self, arguments: &RawValue) -> Result<(), ToolError> {
        self.inner.validate(arguments)
    }

    fn execute<'a>(
        &'a self,
        arguments: &'a RawValue,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async move {
            if self.inner.validate(arguments).is_err() || cancel.is_cancelled() {
                return self.inner.execute(arguments, cancel).await;
            }
            let name = self.inner.name();
            let (call, paths) = describe(name, arguments);
            let jobs_before = self.jobs.slots().running() > 0;
            // A job running may change anything: the whole tree is looked at.
            let scope = match paths {
                Some(paths) if !jobs_before => Scope::Paths(paths),
                _ => Scope::All,
            };
            let cp = self.checkpoints.clone();
            let take_scope = scope.clone();
            match store_work(move || cp.take(call, &take_scope)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(tool = name, error = %e, "checkpoint not taken"),
                Err(()) => tracing::warn!(tool = name, "checkpoint not taken: it panicked"),
            }
            let out = self.inner.execute(arguments, cancel).await;
            let after = if self.jobs.slots().running() > 0 {
                None
            } else {
                Some(scope)
            };
            let cp = self.checkpoints.clone();
            match store_work(move || cp.after(after.as_ref())).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(tool = name, error = %e, "checkpoint not updated"),
                Err(()) => tracing::warn!(tool = name, "checkpoint not updated: it panicked"),
            }
            out
        })
    }
}

/// A checkpoint of a changing call, off the reactor as the tools' own filesystem work is: on
/// their pool (threads kept warm, one hand-off each way) on a multi-thread runtime, inline on
/// a current-thread one (`confine call`). A panic is caught (`Err`): the call still runs.
async fn store_work<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ()> {
    let caught = crate::blocking::off_reactor(move || {
        Ok(std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
    })
    .await;
    match caught {
        Ok(Ok(v)) => Ok(v),
        _ => Err(()),
    }
}

/// What the checkpoint tools of a set share.
#[derive(Clone)]
struct Shared {
    checkpoints: Arc<Checkpoints>,
    jobs: Arc<JobTable>,
}

/// Run a store operation off the reactor, mapping its failures.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, confine_checkpoint::Error> + Send + 'static,
    failed: ErrorKind,
) -> Result<T, CallError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(confine_checkpoint::Error::NotFound)) => Err(CallError::Failed(ToolError::failed(
            ErrorKind::CheckpointNotFound,
        ))),
        Ok(Err(e)) => Err(CallError::Failed(ToolError::failed(failed).with_source(e))),
        Err(e) => Err(CallError::Failed(ToolError::failed(failed).with_source(e))),
    }
}

/// An id as the list gives them: at most 64 letters and digits.
fn check_id(id: &str) -> Result<(), ToolError> {
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ToolError::invalid(ErrorKind::InvalidCheckpointInput));
    }
    Ok(())
}

fn check_path(p: &str) -> Result<String, ToolError> {
    confine_pathgrammar::normalize(p)
        .map(|r| r.into_string())
        .map_err(|_| ToolError::invalid(ErrorKind::InvalidCheckpointInput))
}

/// The arguments of `checkpoint_list`: none.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListInput {}

// Written by hand: an object with no property, closed (hosts want `properties` present).
impl JsonSchema for ListInput {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ListInput".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object", "properties": {}, "additionalProperties": false})
    }
}

/// The record of `checkpoint_list`.
#[derive(Clone, Debug, Serialize)]
pub struct ListOutput {
    /// Newest first.
    pub checkpoints: Vec<confine_checkpoint::Checkpoint>,
}

/// `checkpoint_list`.
struct CheckpointListTool(Shared);

impl TypedTool for CheckpointListTool {
    type Input = ListInput;
    type Valid = ();
    type Output = ListOutput;
    const NAME: &'static str = "checkpoint_list";
    const DESCRIPTION: &'static str = "List the checkpoints taken before each call that may \
        have changed the workspace (file tools and commands), newest first: {checkpoints: \
        [{id, at, call: {name, summary}, changed, skipped}]}. `at` is RFC 3339 UTC, `changed` \
        counts the files that call changed, `skipped` lists paths the checkpoint could not \
        store. Pass an id to checkpoint_diff or checkpoint_restore.";
    const HINTS: ToolHints = ToolHints::read_only("List checkpoints");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidCheckpointInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, _input: ListInput) -> Result<(), ToolError> {
        Ok(())
    }

    async fn run(&self, _valid: (), _cancel: &CancellationToken) -> Result<ListOutput, CallError> {
        let cp = self.0.checkpoints.clone();
        let checkpoints = blocking(move || cp.list(), ErrorKind::ReadFailed).await?;
        Ok(ListOutput { checkpoints })
    }
}

/// The arguments of `checkpoint_diff`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffInput {
    /// A checkpoint id from checkpoint_list.
    pub id: String,
    /// Only this path (and what lies beneath it), relative to the workspace root.
    pub path: Option<String>,
}

/// `checkpoint_diff`.
struct CheckpointDiffTool(Shared);

impl TypedTool for CheckpointDiffTool {
    type Input = DiffInput;
    type Valid = (String, Option<String>);
    type Output = confine_checkpoint::Diff;
    const NAME: &'static str = "checkpoint_diff";
    const DESCRIPTION: &'static str = "What differs between a checkpoint and the workspace \
        now: {added, modified, deleted, diffs}. added/modified/deleted are paths (files, \
        symlinks, directories); diffs holds a unified diff (checkpoint to now) for each text \
        file of at most 64 KiB among them. `path` narrows it to one path and what lies \
        beneath it.";
    const HINTS: ToolHints = ToolHints::read_only("Diff a checkpoint");
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidCheckpointInput;
    const FAILED: ErrorKind = ErrorKind::ReadFailed;

    fn check(&self, input: DiffInput) -> Result<Self::Valid, ToolError> {
        check_id(&input.id)?;
        let path = input.path.as_deref().map(check_path).transpose()?;
        Ok((input.id, path))
    }

    async fn run(
        &self,
        (id, path): Self::Valid,
        _cancel: &CancellationToken,
    ) -> Result<Self::Output, CallError> {
        let cp = self.0.checkpoints.clone();
        blocking(move || cp.diff(&id, path.as_deref()), ErrorKind::ReadFailed).await
    }
}

/// The arguments of `checkpoint_restore`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RestoreInput {
    /// A checkpoint id from checkpoint_list.
    pub id: String,
    /// Only these paths (each with what lies beneath it), relative to the workspace root;
    /// at most 1,024.
    pub paths: Option<Vec<String>>,
    /// Answer what would be done, and change nothing.
    pub dry_run: Option<bool>,
}

/// `checkpoint_restore`.
struct CheckpointRestoreTool(Shared);

/// The most paths one restore names.
const MAX_RESTORE_PATHS: usize = 1024;

impl TypedTool for CheckpointRestoreTool {
    type Input = RestoreInput;
    type Valid = (String, Option<Vec<String>>, bool);
    type Output = confine_checkpoint::Restored;
    const NAME: &'static str = "checkpoint_restore";
    const DESCRIPTION: &'static str = "Bring the workspace (or the listed `paths`) back to a \
        checkpoint: files changed or deleted since are written back, files created since are \
        removed, modes and symlinks restored. Answers {restored, removed, skipped: [{path, \
        reason}]}; a path changed by something else meanwhile is skipped (`changed during \
        restore`), and nothing is restored while a background job runs (`a job is \
        running`). The workspace is checkpointed first, so a restore can itself be undone. \
        `dryRun: true` answers what would be done and changes nothing.";
    const HINTS: ToolHints = ToolHints::writes("Restore a checkpoint", true, false);
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidCheckpointInput;
    const FAILED: ErrorKind = ErrorKind::WriteFailed;

    fn check(&self, input: RestoreInput) -> Result<Self::Valid, ToolError> {
        check_id(&input.id)?;
        let paths = match input.paths {
            Some(paths) => {
                if paths.len() > MAX_RESTORE_PATHS {
                    return Err(ToolError::invalid(ErrorKind::InvalidCheckpointInput));
                }
                Some(
                    paths
                        .iter()
                        .map(|p| check_path(p))
                        .collect::<Result<_, _>>()?,
                )
            }
            None => None,
        };
        Ok((input.id, paths, input.dry_run.unwrap_or(false)))
    }

    async fn run(
        &self,
        (id, paths, dry_run): Self::Valid,
        _cancel: &CancellationToken,
    ) -> Result<Self::Output, CallError> {
        let cp = self.0.checkpoints.clone();
        let running = self.0.jobs.slots().running() > 0;
        blocking(
            move || cp.restore(&id, paths.as_deref(), dry_run, running),
            ErrorKind::WriteFailed,
        )
        .await
    }
}
