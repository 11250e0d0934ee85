//! The stable error vocabulary of tool results (listed per tool in `docs/TOOLS.md`).

use std::fmt;

/// The outer `code` of an error record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// No tool of that name is registered.
    ToolNotFound,
    /// The arguments were refused by validation, before any effect.
    ToolArgumentsInvalid,
    /// The tool ran and failed.
    ToolExecutionFailed,
}

impl ErrorCode {
    /// The stable string; never renamed once released.
    pub const fn code(self) -> &'static str {
        match self {
            Self::ToolNotFound => "TOOL_NOT_FOUND",
            Self::ToolArgumentsInvalid => "TOOL_ARGUMENTS_INVALID",
            Self::ToolExecutionFailed => "TOOL_EXECUTION_FAILED",
        }
    }
}

macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident => $token:literal,)*) => {
        /// The `message` token of an error record. The string of [`ErrorKind::code`] is the
        /// stable contract; callers branch on the variant, never on text.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorKind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [ErrorKind] = &[$(Self::$variant,)*];

            /// The stable token; never renamed once released, never holding a host path.
            pub const fn code(self) -> &'static str {
                match self {
                    $(Self::$variant => $token,)*
                }
            }
        }
    };
}

kinds! {
    /// read_file arguments are not exactly `{ "path": string }`.
    InvalidReadInput => "INVALID_READ_INPUT",
    /// write_file arguments are not exactly `{ "path": string, "content": string }`.
    InvalidWriteInput => "INVALID_WRITE_INPUT",
    /// node_process arguments are not exactly `{ "source": string, "arguments"?: string[] }`.
    InvalidNodeProcessInput => "INVALID_NODE_PROCESS_INPUT",
    /// The path failed the portable grammar.
    InvalidRelativePath => "INVALID_RELATIVE_PATH",
    /// A file (read) or content (write) is over 65,536 bytes; an image (read_media) over
    /// 5,242,880.
    FileTooLarge => "FILE_TOO_LARGE",
    /// The node source is over 32,768 bytes.
    NodeSourceTooLarge => "NODE_SOURCE_TOO_LARGE",
    /// More than 32 node arguments.
    TooManyNodeArguments => "TOO_MANY_NODE_ARGUMENTS",
    /// One node argument is over 2,048 bytes.
    NodeArgumentTooLarge => "NODE_ARGUMENT_TOO_LARGE",
    /// The node arguments total over 8,192 bytes, or the Windows command line over 30,000 units.
    NodeArgumentsTooLarge => "NODE_ARGUMENTS_TOO_LARGE",
    /// The workspace root is no longer the captured directory.
    WorkspaceRootChanged => "WORKSPACE_ROOT_CHANGED",
    /// Resolution would leave the workspace.
    PathOutsideWorkspace => "PATH_OUTSIDE_WORKSPACE",
    /// Nothing exists at the path.
    FileNotFound => "FILE_NOT_FOUND",
    /// The object is not a regular file.
    FileNotRegular => "FILE_NOT_REGULAR",
    /// The file is not valid UTF-8.
    FileNotUtf8 => "FILE_NOT_UTF8",
    /// The opened file is no longer what the path names.
    PathChangedDuringRead => "PATH_CHANGED_DURING_READ",
    /// Another read error.
    ReadFailed => "READ_FAILED",
    /// A parent component exists and is not a directory.
    WriteParentNotDirectory => "WRITE_PARENT_NOT_DIRECTORY",
    /// The target is a symlink.
    WriteTargetSymlink => "WRITE_TARGET_SYMLINK",
    /// The target is a directory, FIFO, socket or device.
    WriteTargetNotRegular => "WRITE_TARGET_NOT_REGULAR",
    /// The temporary is not a regular file.
    WriteTempNotRegular => "WRITE_TEMP_NOT_REGULAR",
    /// The temporary's name no longer names the file this operation created.
    WriteTempIdentityChanged => "WRITE_TEMP_IDENTITY_CHANGED",
    /// The temporary could not be removed.
    WriteTempCleanupFailed => "WRITE_TEMP_CLEANUP_FAILED",
    /// After the rename the target's name held another writer's file (it replaced ours in
    /// between): the call fails and removes nothing.
    WriteTargetReplaced => "WRITE_TARGET_REPLACED",
    /// Another write error.
    WriteFailed => "WRITE_FAILED",
    /// The script is not a regular file.
    NodeScriptNotRegular => "NODE_SCRIPT_NOT_REGULAR",
    /// The script's name no longer names the file this call created.
    NodeScriptIdentityChanged => "NODE_SCRIPT_IDENTITY_CHANGED",
    /// The script could not be removed.
    NodeScriptCleanupFailed => "NODE_SCRIPT_CLEANUP_FAILED",
    /// Node.js could not be started.
    NodeProcessStartFailed => "NODE_PROCESS_START_FAILED",
    /// The child's output could not be read.
    NodeProcessOutputFailed => "NODE_PROCESS_OUTPUT_FAILED",
    /// The program did not exit within the bound.
    NodeProcessTimeout => "NODE_PROCESS_TIMEOUT",
    /// Another process failure.
    NodeProcessFailed => "NODE_PROCESS_FAILED",
    /// The opt-in kernel sandbox was requested and cannot be fully enforced here.
    NodeSandboxUnavailable => "NODE_SANDBOX_UNAVAILABLE",
    /// edit_file arguments are not `{path, edits: [{oldText, newText, replaceAll?}], dryRun?}`
    /// with at least one edit and no empty `oldText`.
    InvalidEditInput => "INVALID_EDIT_INPUT",
    /// read_lines arguments are not `{path, offset?, limit?}` with offset from 1 and limit 1 to
    /// 2,000.
    InvalidReadLinesInput => "INVALID_READ_LINES_INPUT",
    /// file_info arguments are not exactly `{path}`.
    InvalidInfoInput => "INVALID_INFO_INPUT",
    /// create_directory arguments are not exactly `{path}`.
    InvalidMkdirInput => "INVALID_MKDIR_INPUT",
    /// move_file arguments are not exactly `{source, destination}`.
    InvalidMoveInput => "INVALID_MOVE_INPUT",
    /// delete_file arguments are not exactly `{path}`.
    InvalidDeleteInput => "INVALID_DELETE_INPUT",
    /// An edit's `oldText` does not occur in the text the previous edits left.
    EditTextNotFound => "EDIT_TEXT_NOT_FOUND",
    /// An edit's `oldText` occurs more than once and `replaceAll` is not set.
    EditTextNotUnique => "EDIT_TEXT_NOT_UNIQUE",
    /// The file changed between the edit's read and its installation; nothing was written.
    EditConflict => "EDIT_CONFLICT",
    /// Something already exists at the move's destination.
    MoveDestinationExists => "MOVE_DESTINATION_EXISTS",
    /// The directory to delete is not empty (deletion is never recursive).
    DeleteDirectoryNotEmpty => "DELETE_DIRECTORY_NOT_EMPTY",
    /// list_directory arguments are not exactly `{ "path"?: string }`.
    InvalidListInput => "INVALID_LIST_INPUT",
    /// find_files arguments are not exactly `{ "pattern": string, "path"?, "includeIgnored"? }`.
    InvalidFindInput => "INVALID_FIND_INPUT",
    /// grep arguments are not of the documented shape, or a number is out of its range.
    InvalidGrepInput => "INVALID_GREP_INPUT",
    /// A glob pattern that does not parse.
    InvalidGlob => "INVALID_GLOB",
    /// A regular expression that does not parse (or would match a line end).
    InvalidRegex => "INVALID_REGEX",
    /// A directory was needed and the path names something else.
    NotADirectory => "NOT_A_DIRECTORY",
    /// run_command arguments are not exactly `{ "command": string, "timeoutMs"?: integer }`,
    /// or the command is empty or holds NUL.
    InvalidRunCommandInput => "INVALID_RUN_COMMAND_INPUT",
    /// The command is over 32,768 bytes.
    RunCommandTooLarge => "RUN_COMMAND_TOO_LARGE",
    /// `timeoutMs` is 0 or over the server's maximum.
    RunCommandTimeoutOutOfRange => "RUN_COMMAND_TIMEOUT_OUT_OF_RANGE",
    /// The shell could not be started.
    RunCommandStartFailed => "RUN_COMMAND_START_FAILED",
    /// The command's output could not be read.
    RunCommandOutputFailed => "RUN_COMMAND_OUTPUT_FAILED",
    /// Another failure of run_command (its temporary directory could not be made).
    RunCommandFailed => "RUN_COMMAND_FAILED",
    /// `run_command` with `background: true` while the most jobs allowed already run.
    JobLimitReached => "JOB_LIMIT_REACHED",
    /// No job has that id (never given, or an ended job forgotten since).
    JobNotFound => "JOB_NOT_FOUND",
    /// job_output, job_stop, job_list, job_input or job_resize arguments are not what the tool
    /// takes, `waitMs` is over 30,000, job_input's bytes are over 64 KiB or not base64, or a
    /// terminal size is out of range.
    InvalidJobInput => "INVALID_JOB_INPUT",
    /// job_input to a job started without `stdin` or `tty`, or job_resize to a job without a
    /// terminal.
    JobNotInteractive => "JOB_NOT_INTERACTIVE",
    /// job_input to a job whose input was closed (`closeStdin`) or that has ended.
    JobInputClosed => "JOB_INPUT_CLOSED",
    /// The path is protected (a file programs on the host run or obey, such as a git hook or
    /// `.git/config`): no tool changes it, moves it, or creates beneath it.
    PathProtected => "PATH_PROTECTED",
    /// read_media arguments are not exactly `{ "path": string }`.
    InvalidReadMediaInput => "INVALID_READ_MEDIA_INPUT",
    /// The file is not a PNG, JPEG, GIF or WebP whose width and height can be read.
    FileNotMedia => "FILE_NOT_MEDIA",
    /// The path is denied (it, a directory above it, or where a symlink leads matches the
    /// embedder's deny list): no tool reads, changes or lists it.
    PathDenied => "PATH_DENIED",
    /// The network policy is on (`--sandbox` or `--allow-net`) and no mechanism of this
    /// system can enforce it: nothing runs.
    NetworkPolicyUnavailable => "NETWORK_POLICY_UNAVAILABLE",
    /// Resolving the path met a symlink loop, or a chain of more than 40 symlinks (the
    /// kernel's limit), with `openat2` or without it.
    SymlinkLoop => "SYMLINK_LOOP",
    /// checkpoint_list, checkpoint_diff or checkpoint_restore arguments are not what the tool
    /// takes, or a path among them fails the grammar.
    InvalidCheckpointInput => "INVALID_CHECKPOINT_INPUT",
    /// No checkpoint has that id (never taken, or dropped by the bounds since).
    CheckpointNotFound => "CHECKPOINT_NOT_FOUND",
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The operating-system (or other) error behind a token, kept for diagnosis.
type Cause = std::sync::Arc<dyn std::error::Error + Send + Sync>;

/// A recoverable tool error: serialized as `{"error": {"code", "message"}}` with `is_error`,
/// plus `edit` and further members where set ([`ToolError::with_edit`],
/// [`ToolError::with_field`]).
///
/// It may keep the error that caused it ([`ToolError::with_source`], reachable through
/// [`std::error::Error::source`]): that cause may name host paths, so it is never serialized
/// into the record a model reads; [`execute_tool_call`](crate::execute_tool_call) logs it
/// with `tracing` at debug level (`CONFINE_LOG=debug` in the binary). Equality ignores it.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{}: {}", .code.code(), .message)]
pub struct ToolError {
    code: ErrorCode,
    kind: Option<ErrorKind>,
    message: String,
    edit: Option<usize>,
    /// Further members of the error object, after `edit`, in order (see [`ToolError::with_field`]).
    fields: Vec<(&'static str, serde_json::Value)>,
    #[source]
    cause: Option<Cause>,
}

impl PartialEq for ToolError {
    fn eq(&self, other: &Self) -> bool {
        (self.code, self.kind, &self.message, self.edit, &self.fields)
            == (
                other.code,
                other.kind,
                &other.message,
                other.edit,
                &other.fields,
            )
    }
}

impl Eq for ToolError {}

impl ToolError {
    /// A validation refusal (`TOOL_ARGUMENTS_INVALID`).
    pub fn invalid(kind: ErrorKind) -> Self {
        Self {
            code: ErrorCode::ToolArgumentsInvalid,
            kind: Some(kind),
            message: kind.code().to_owned(),
            edit: None,
            fields: Vec::new(),
            cause: None,
        }
    }

    /// An execution failure (`TOOL_EXECUTION_FAILED`).
    pub fn failed(kind: ErrorKind) -> Self {
        Self {
            code: ErrorCode::ToolExecutionFailed,
            kind: Some(kind),
            message: kind.code().to_owned(),
            edit: None,
            fields: Vec::new(),
            cause: None,
        }
    }

    /// `TOOL_NOT_FOUND`, with a sentence naming the tool.
    pub fn not_found(name: &str) -> Self {
        let shown: String = name.chars().take(128).collect();
        Self {
            code: ErrorCode::ToolNotFound,
            kind: None,
            message: format!("Tool {shown:?} is not registered."),
            edit: None,
            fields: Vec::new(),
            cause: None,
        }
    }

    /// The same error naming the edit (its index in `edits`, from 0) that caused it; the
    /// record then holds `"edit": index` beside `code` and `message`.
    pub fn with_edit(mut self, index: usize) -> Self {
        self.edit = Some(index);
        self
    }

    /// The same error with one more member `name: value` in its record's error object, after
    /// `code`, `message` and `edit` (edit_file's diagnostics: `closest`, `lines`). The value is
    /// built by the tool from what the model may read (never a host path). A name given twice
    /// keeps the last value.
    pub fn with_field(mut self, name: &'static str, value: serde_json::Value) -> Self {
        debug_assert!(
            !["code", "message", "edit"].contains(&name),
            "reserved: {name}"
        );
        self.fields.retain(|(n, _)| *n != name);
        self.fields.push((name, value));
        self
    }

    /// The member `name` added by [`ToolError::with_field`], if any.
    pub fn field(&self, name: &str) -> Option<&serde_json::Value> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The same error keeping `cause` (an `io::Error`, say) as its source, for logs. Never
    /// part of the record.
    pub fn with_source(
        mut self,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        self.cause = Some(Cause::from(cause.into()));
        self
    }

    /// The index of the edit that failed, for edit_file's errors.
    pub fn edit(&self) -> Option<usize> {
        self.edit
    }

    /// The outer code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The token, when the message is one.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.kind
    }

    /// The message: the token, or the not-found sentence.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error record `{"error": {"code": …, "message": …}}`, with `"edit"` and the members
    /// of [`ToolError::with_field`] after them where set.
    pub fn to_record(&self) -> serde_json::Value {
        let mut error = serde_json::Map::new();
        error.insert("code".into(), self.code.code().into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(edit) = self.edit {
            error.insert("edit".into(), edit.into());
        }
        for (name, value) in &self.fields {
            error.insert((*name).into(), value.clone());
        }
        serde_json::json!({ "error": error })
    }
}

/// The call was cancelled: not a result, a rejection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the tool call was cancelled")]
pub struct Cancelled;

/// How a tool's execution can end other than with its result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// Cancelled through the token; never dressed as a tool error.
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
    /// A recoverable tool error.
    #[error(transparent)]
    Failed(#[from] ToolError),
}

/// The one constructor of a failure record as a call's error: `kind`'s token and message.
pub(crate) fn failed(kind: ErrorKind) -> CallError {
    CallError::Failed(ToolError::failed(kind))
}

impl CallError {
    /// A failure keeping `cause` as its source (see [`ToolError::with_source`]); a
    /// cancellation is returned unchanged.
    pub fn with_source(self, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        match self {
            Self::Failed(e) => Self::Failed(e.with_source(cause)),
            cancelled => cancelled,
        }
    }
}

impl From<confine_rootid::RootError> for ToolError {
    fn from(e: confine_rootid::RootError) -> Self {
        // Any failure to re-verify the root during a call means it changed.
        ToolError::failed(ErrorKind::WorkspaceRootChanged).with_source(e)
    }
}

impl From<confine_rootid::RootError> for CallError {
    fn from(e: confine_rootid::RootError) -> Self {
        CallError::Failed(e.into())
    }
}

/// The one mapping of an installation's failure (`confine-atomicwrite`) to this crate's
/// tokens: each kind to the token of the same name. A name the installation refuses cannot
/// reach it (every name passed the grammar first), so it is `WRITE_FAILED` like any other
/// failure. A tool that reads a kind otherwise (a symlink at the target) matches it first.
impl From<confine_atomicwrite::ErrorKind> for ErrorKind {
    fn from(kind: confine_atomicwrite::ErrorKind) -> Self {
        use confine_atomicwrite::ErrorKind as K;
        match kind {
            K::TargetSymlink => Self::WriteTargetSymlink,
            K::TargetNotRegular => Self::WriteTargetNotRegular,
            K::TempNotRegular => Self::WriteTempNotRegular,
            K::TempIdentityChanged => Self::WriteTempIdentityChanged,
            K::TempCleanupFailed => Self::WriteTempCleanupFailed,
            K::TargetReplaced => Self::WriteTargetReplaced,
            _ => Self::WriteFailed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installations_kinds_keep_their_tokens() {
        use confine_atomicwrite::ErrorKind as K;
        for kind in [
            K::TargetSymlink,
            K::TargetNotRegular,
            K::TempNotRegular,
            K::TempIdentityChanged,
            K::TempCleanupFailed,
            K::TargetReplaced,
            K::Failed,
        ] {
            assert_eq!(ErrorKind::from(kind).code(), kind.code());
        }
        assert_eq!(ErrorKind::from(K::InvalidName), ErrorKind::WriteFailed);
    }

    #[test]
    fn the_cause_is_kept_as_source_and_never_serialized() {
        let cause = std::io::Error::other("open /home/someone/secret: permission denied");
        let e = ToolError::failed(ErrorKind::ReadFailed).with_source(cause);
        let source = std::error::Error::source(&e).expect("the cause is the source");
        assert!(source.to_string().contains("permission denied"));
        let record = e.to_record().to_string();
        assert_eq!(
            record,
            r#"{"error":{"code":"TOOL_EXECUTION_FAILED","message":"READ_FAILED"}}"#
        );
        // Equality is the record's: a cause does not make two errors differ.
        assert_eq!(e, ToolError::failed(ErrorKind::ReadFailed));
        let call = CallError::from(ToolError::failed(ErrorKind::WriteFailed))
            .with_source(std::io::Error::from_raw_os_error(28));
        let CallError::Failed(inner) = call else {
            panic!("still a failure")
        };
        assert!(std::error::Error::source(&inner).is_some());
        assert_eq!(
            CallError::Cancelled(Cancelled).with_source(std::io::Error::other("x")),
            CallError::Cancelled(Cancelled)
        );
    }

    #[test]
    fn every_token_is_pinned() {
        let expected = [
            "INVALID_READ_INPUT",
            "INVALID_WRITE_INPUT",
            "INVALID_NODE_PROCESS_INPUT",
            "INVALID_RELATIVE_PATH",
            "FILE_TOO_LARGE",
            "NODE_SOURCE_TOO_LARGE",
            "TOO_MANY_NODE_ARGUMENTS",
            "NODE_ARGUMENT_TOO_LARGE",
            "NODE_ARGUMENTS_TOO_LARGE",
            "WORKSPACE_ROOT_CHANGED",
            "PATH_OUTSIDE_WORKSPACE",
            "FILE_NOT_FOUND",
            "FILE_NOT_REGULAR",
            "FILE_NOT_UTF8",
            "PATH_CHANGED_DURING_READ",
            "READ_FAILED",
            "WRITE_PARENT_NOT_DIRECTORY",
            "WRITE_TARGET_SYMLINK",
            "WRITE_TARGET_NOT_REGULAR",
            "WRITE_TEMP_NOT_REGULAR",
            "WRITE_TEMP_IDENTITY_CHANGED",
            "WRITE_TEMP_CLEANUP_FAILED",
            "WRITE_TARGET_REPLACED",
            "WRITE_FAILED",
            "NODE_SCRIPT_NOT_REGULAR",
            "NODE_SCRIPT_IDENTITY_CHANGED",
            "NODE_SCRIPT_CLEANUP_FAILED",
            "NODE_PROCESS_START_FAILED",
            "NODE_PROCESS_OUTPUT_FAILED",
            "NODE_PROCESS_TIMEOUT",
            "NODE_PROCESS_FAILED",
            "NODE_SANDBOX_UNAVAILABLE",
            "INVALID_EDIT_INPUT",
            "INVALID_READ_LINES_INPUT",
            "INVALID_INFO_INPUT",
            "INVALID_MKDIR_INPUT",
            "INVALID_MOVE_INPUT",
            "INVALID_DELETE_INPUT",
            "EDIT_TEXT_NOT_FOUND",
            "EDIT_TEXT_NOT_UNIQUE",
            "EDIT_CONFLICT",
            "MOVE_DESTINATION_EXISTS",
            "DELETE_DIRECTORY_NOT_EMPTY",
            "INVALID_LIST_INPUT",
            "INVALID_FIND_INPUT",
            "INVALID_GREP_INPUT",
            "INVALID_GLOB",
            "INVALID_REGEX",
            "NOT_A_DIRECTORY",
            "INVALID_RUN_COMMAND_INPUT",
            "RUN_COMMAND_TOO_LARGE",
            "RUN_COMMAND_TIMEOUT_OUT_OF_RANGE",
            "RUN_COMMAND_START_FAILED",
            "RUN_COMMAND_OUTPUT_FAILED",
            "RUN_COMMAND_FAILED",
            "JOB_LIMIT_REACHED",
            "JOB_NOT_FOUND",
            "INVALID_JOB_INPUT",
            "JOB_NOT_INTERACTIVE",
            "JOB_INPUT_CLOSED",
            "PATH_PROTECTED",
            "INVALID_READ_MEDIA_INPUT",
            "FILE_NOT_MEDIA",
            "PATH_DENIED",
            "NETWORK_POLICY_UNAVAILABLE",
            "SYMLINK_LOOP",
            "INVALID_CHECKPOINT_INPUT",
            "CHECKPOINT_NOT_FOUND",
        ];
        let got: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(got, expected);
        assert_eq!(ErrorCode::ToolNotFound.code(), "TOOL_NOT_FOUND");
        assert_eq!(
            ErrorCode::ToolArgumentsInvalid.code(),
            "TOOL_ARGUMENTS_INVALID"
        );
        assert_eq!(
            ErrorCode::ToolExecutionFailed.code(),
            "TOOL_EXECUTION_FAILED"
        );
    }

    #[test]
    fn record_has_exactly_code_and_message() {
        let rec = ToolError::failed(ErrorKind::FileNotFound).to_record();
        assert_eq!(
            rec.to_string(),
            r#"{"error":{"code":"TOOL_EXECUTION_FAILED","message":"FILE_NOT_FOUND"}}"#
        );
        let rec = ToolError::invalid(ErrorKind::FileTooLarge).to_record();
        assert_eq!(rec["error"]["code"], "TOOL_ARGUMENTS_INVALID");
        let rec = ToolError::failed(ErrorKind::EditTextNotFound)
            .with_edit(2)
            .to_record();
        assert_eq!(
            rec.to_string(),
            r#"{"error":{"code":"TOOL_EXECUTION_FAILED","message":"EDIT_TEXT_NOT_FOUND","edit":2}}"#
        );
        let with = |e: ToolError| {
            e.with_field("lines", serde_json::json!([1]))
                .with_field("closest", serde_json::json!({"startLine": 1}))
                .with_field("lines", serde_json::json!([3, 4]))
        };
        let e = with(ToolError::failed(ErrorKind::EditTextNotUnique).with_edit(0));
        assert_eq!(
            e.to_record().to_string(),
            r#"{"error":{"code":"TOOL_EXECUTION_FAILED","message":"EDIT_TEXT_NOT_UNIQUE","edit":0,"closest":{"startLine":1},"lines":[3,4]}}"#
        );
        assert_eq!(e.field("lines"), Some(&serde_json::json!([3, 4])));
        assert_eq!(e.field("nope"), None);
        // Fields take part in equality, as they do in the record.
        assert_ne!(
            e,
            ToolError::failed(ErrorKind::EditTextNotUnique).with_edit(0)
        );
    }

    #[test]
    fn not_found_names_the_tool() {
        let e = ToolError::not_found("rm_rf");
        assert_eq!(e.code(), ErrorCode::ToolNotFound);
        assert!(e.message().contains("rm_rf"));
    }
}
