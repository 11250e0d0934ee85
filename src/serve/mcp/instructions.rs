//! The instructions the server sends at initialization, for the model: which tools it
//! offers, how paths are written, what each tool family does, and what is confined and what
//! is not, for the flags in force ([`Setting`]).

use confine_tools::ToolRegistry;

/// How the server was started, as far as the instructions tell the model.
#[derive(Clone, Copy, Debug, Default)]
pub struct Setting {
    /// `--read-only`: only the tools that change nothing.
    pub read_only: bool,
    /// `--timeout-ms`: node_process's time bound (default 500).
    pub timeout_ms: Option<u64>,
    /// node_process and run_command run under the kernel sandbox (the CLI's default; off
    /// with `--no-sandbox`).
    pub sandbox: bool,
    /// `--command-timeout-ms`: run_command's default bound (default 120,000).
    pub command_timeout_ms: Option<u64>,
    /// `--command-max-timeout-ms`: the most a run_command call may ask for (default 600,000).
    pub command_max_timeout_ms: Option<u64>,
    /// `--allow-net` was given (some host is listed for the network policy).
    pub allow_net: bool,
    /// `--deny` was given: some paths of the workspace are refused (`PATH_DENIED`).
    pub denied: bool,
}

/// The instructions sent to the client at initialization, for the model. They claim
/// confinement only for what is confined: with `--no-sandbox`, node_process and run_command
/// run with the server's own access to the machine, and the text says so.
pub(super) fn instructions(registry: &ToolRegistry, setting: Setting) -> String {
    let offered = |name: &str| registry.get(name).is_some();
    let runners: Vec<&str> = ["node_process", confine_tools::RUN_COMMAND]
        .into_iter()
        .filter(|name| offered(name))
        .collect();
    let mut text = String::from(if runners.is_empty() {
        "These tools work inside one directory, the workspace, and cannot reach outside it."
    } else {
        "The file tools work inside one directory, the workspace, and cannot reach outside it."
    });
    let names: Vec<&str> = registry.tools().map(|t| t.name()).collect();
    text.push_str(&format!(" This server offers: {}.", names.join(", ")));
    text.push_str(
        " Paths are relative to the workspace root with `/` separators (for example \
         `src/index.js`); absolute paths, `..` segments and symlinks that leave the workspace \
         are refused. Every result is a JSON object; a failure is \
         {\"error\": {\"code\", \"message\"}} with isError true, and its message is a stable \
         token such as FILE_NOT_FOUND or INVALID_RELATIVE_PATH.",
    );
    if offered("read_file") {
        text.push_str(" read_file reads a UTF-8 text file of at most 65,536 bytes");
        text.push_str(if offered("read_lines") {
            "; for a larger file use read_lines, a window of lines of a file of any size."
        } else {
            " (FILE_TOO_LARGE beyond)."
        });
    } else if offered("read_lines") {
        text.push_str(" read_lines reads a window of lines of a file of any size.");
    }
    if offered("write_file") {
        text.push_str(
            " write_file replaces or creates a UTF-8 text file of at most 65,536 bytes \
             atomically, creating missing parent directories.",
        );
    }
    if offered("edit_file") {
        text.push_str(
            " edit_file replaces exact text: each oldText must match the file exactly, once \
             unless replaceAll; a miss changes nothing.",
        );
    }
    if offered("node_process") {
        let ms = setting.timeout_ms.unwrap_or(500);
        text.push_str(&format!(
            " node_process runs CommonJS source with Node.js in the workspace root as working \
             directory, with no stdin and a time bound of {ms} ms; stdout and stderr are each \
             kept up to 32,768 bytes. Use it for short computations and checks, not for \
             servers or long jobs."
        ));
    }
    if offered(confine_tools::RUN_COMMAND) {
        let max = setting.command_max_timeout_ms.unwrap_or(600_000);
        let default = setting.command_timeout_ms.unwrap_or(120_000).min(max);
        text.push_str(&format!(
            " run_command runs a shell command (/bin/sh -c) in the workspace root, for the \
             project's tests and builds, with a time bound of {default} ms unless timeoutMs \
             asks for another, at most {max} ms; each output stream keeps its first and last \
             16 KiB."
        ));
    }
    if offered("job_output") {
        text.push_str(
            " For a dev server, a watcher or a long build, run_command with background: true \
             starts a job and answers its jobId at once; job_output {jobId, waitMs} reads what \
             it wrote since the last look (64 KiB a stream at most)",
        );
        if offered("job_stop") {
            text.push_str(", job_stop ends it");
        }
        if offered("job_list") {
            text.push_str(", job_list lists them");
        }
        text.push_str(
            ". Jobs share the loopback with later run_command calls and end when this server \
             ends.",
        );
    }
    if offered("job_input") {
        text.push_str(
            " A job can take input: run_command with background: true and stdin: true gives it \
             a stdin pipe, with tty: {cols, rows} a terminal of its own (one output stream, \
             returned as stdout); job_input {jobId, text, waitMs} types into it and answers \
             like job_output once the output settles, so one call is one turn of a REPL \
             (bytesBase64 \"Aw==\" is Ctrl-C; closeStdin ends the input). For a persistent \
             shell whose cd and variables last, start bash on a terminal (command \"bash\", \
             tty) and send it one command per job_input.",
        );
    }
    if offered("job_resize") {
        text.push_str(" job_resize {jobId, cols, rows} resizes a terminal job's window.");
    }
    if offered("checkpoint_restore") {
        text.push_str(
            " Before every call that may change the workspace (the file tools' and the \
             commands') the server takes a checkpoint: checkpoint_list shows them newest \
             first, checkpoint_diff {id, path?} what changed since one, and \
             checkpoint_restore {id, paths?, dryRun?} brings the workspace back to it (itself \
             undoable). Denied and protected paths, .git and gitignored trees are not covered.",
        );
    }
    if !runners.is_empty() {
        let which = runners.join(" and ");
        let (run, are) = if runners.len() == 1 {
            ("runs", "is")
        } else {
            ("run", "are")
        };
        // The network policy: on under the sandbox (the default) or with --allow-net.
        let hosts = if setting.allow_net {
            "only the hosts this server allows"
        } else {
            "no host"
        };
        let network = format!(
            " Their network goes only through this server's proxy (HTTPS_PROXY is set; npm, \
             pip, cargo, git and curl use it), to {hosts}; each record's network field lists \
             the hosts asked for and why one was refused. They share one loopback \
             (127.0.0.1) of this server's own."
        );
        if setting.sandbox {
            text.push_str(&format!(
                " {which} {run} under a kernel sandbox: what they run reads only the workspace \
                 and what a program needs to run, writes only inside the workspace; a call the \
                 kernel cannot confine is refused with NODE_SANDBOX_UNAVAILABLE."
            ));
            text.push_str(&network);
        } else {
            text.push_str(&format!(
                " {which} {are} not confined to the workspace: what they run has this server's \
                 own access to the machine (every file and process its user can reach{}); the \
                 workspace is only their working directory.",
                if setting.allow_net {
                    ""
                } else {
                    ", and its network"
                }
            ));
            if setting.allow_net {
                text.push_str(&network);
            }
        }
    }
    if setting.denied {
        text.push_str(
            " Some paths of this workspace are denied by the server's configuration: a tool \
             given one (or a symlink to one) refuses it with PATH_DENIED and reads or changes \
             nothing of it, and listings and searches leave denied entries out, counting them \
             in `denied`.",
        );
        if !runners.is_empty() {
            let which = runners.join(" and ");
            text.push_str(&if setting.sandbox {
                format!(
                    " What {which} run{} cannot read them either.",
                    if runners.len() == 1 { "s" } else { "" }
                )
            } else {
                format!(
                    " What {which} run{} is not held to this.",
                    if runners.len() == 1 { "s" } else { "" }
                )
            });
        }
    }
    if registry.get("read_media").is_some() {
        text.push_str(
            " read_media shows you an image of the workspace (PNG, JPEG, GIF or WebP, at most \
             5 MiB).",
        );
    }
    if setting.read_only {
        text.push_str(" This server is read-only: only tools that change nothing are offered.");
    }
    text
}
