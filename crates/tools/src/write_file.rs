//! `write_file`: replace one file beneath the workspace atomically, through an
//! identity-checked temporary.
//!
//! Validation, pure and before any effect, in this order: the shape (exactly
//! `{"path": string, "content": string}`, else `INVALID_WRITE_INPUT`), the path grammar
//! (`INVALID_RELATIVE_PATH`), the content's UTF-8 size (at most [`MAX_WRITE_BYTES`], else
//! `FILE_TOO_LARGE`). A `content` holding NUL is text like any other and is written.
//!
//! Execution: verify the root; open the parent beneath it, creating missing directories one
//! checked step at a time (see the `parent` module: a symlinked parent that stays inside the root is
//! followed, one that leaves it is `PATH_OUTSIDE_WORKSPACE`, a non-directory in the way is
//! `WRITE_PARENT_NOT_DIRECTORY`); take the process-wide lock of the target (its parent's
//! identity and its name, shared by every tool instance); then [`confine_atomicwrite::install_with`],
//! whose hooks re-check cancellation before each effect, and before the rename also the root,
//! the parent's identity at its path, and (after the rename) that the parent is still beneath
//! the root. Cancellation is never honoured after the rename: the call then reports what
//! happened.
//!
//! After the commit:
//! - if the parent directory was moved out of the workspace between the last check and the
//!   commit, the call fails with `PATH_OUTSIDE_WORKSPACE` and the commit is undone: the file
//!   it replaced out there is put back (the commit exchanged it aside, see `atomicwrite`);
//! - if the target's name then holds another writer's file (an editor saving by
//!   temp-and-rename renamed over ours in between), the call fails with
//!   `WRITE_TARGET_REPLACED` and removes nothing: the name keeps that writer's whole file.
//!
//! The directory work, the writing, both fsyncs and the rename run on the tools' own thread
//! pool, never on the async worker threads, so a slow disk stalls only the calls that wait
//! for it.

use confine_pathgrammar::RelPath;
use confine_rootid::WorkspaceRoot;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::error::{CallError, Cancelled, ErrorKind, ToolError};
use crate::protect::ProtectedPaths;
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::Workspace;

use crate::install::install_checked;
use crate::parent::{Missing, Parent, open_parent, symlink_target_kind};
use crate::target_lock::{TargetKey, lock_target, try_lock_target};

/// The most UTF-8 bytes `write_file` accepts as content.
pub const MAX_WRITE_BYTES: usize = 65_536;

/// The arguments of `write_file`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    /// Relative path of the file inside the workspace, with `/` separators (for example
    /// `src/main.js`). Missing parent directories are created. No `..`, no absolute path, no
    /// drive letter.
    pub path: String,
    /// The complete new text of the file (UTF-8, at most 65,536 bytes). It replaces the old
    /// content entirely.
    pub content: String,
}

/// The record `write_file` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WriteOutput {
    /// The normalized relative path.
    pub path: String,
    /// Bytes written.
    pub bytes: usize,
}

/// Arguments that passed validation. The only way to make one is [`WriteFileTool::check_input`],
/// so [`WriteFileTool::write`] never sees an unchecked path or an oversized content.
#[derive(Clone, Debug)]
pub struct ValidWrite {
    path: RelPath,
    content: String,
}

impl ValidWrite {
    /// The normalized path.
    pub fn path(&self) -> &RelPath {
        &self.path
    }

    /// The content, at most [`MAX_WRITE_BYTES`].
    pub fn content(&self) -> &str {
        &self.content
    }
}

/// The `write_file` tool over one workspace.
#[derive(Debug, Clone)]
pub struct WriteFileTool {
    ws: Workspace,
}

impl WriteFileTool {
    /// A write tool over an already captured root, refusing the default protected paths.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }

    /// Validate arguments: the grammar, then the size. Pure.
    pub fn check_input(input: WriteInput) -> Result<ValidWrite, ToolError> {
        let path = confine_pathgrammar::normalize(&input.path)
            .map_err(|e| ToolError::invalid(ErrorKind::InvalidRelativePath).with_source(e))?;
        if input.content.len() > MAX_WRITE_BYTES {
            return Err(ToolError::invalid(ErrorKind::FileTooLarge));
        }
        Ok(ValidWrite {
            path,
            content: input.content,
        })
    }

    /// Write validated arguments.
    pub async fn write(
        &self,
        valid: &ValidWrite,
        cancel: &CancellationToken,
    ) -> Result<WriteOutput, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        self.ws.protected.check_written(&valid.path)?;
        // Verifying the root, creating directories, writing, the two fsyncs and the rename
        // block: they run off the async workers (see the `blocking` module), in one job when
        // no other writer of this process holds the target (the common case), else in two,
        // with the lock awaited on the async side between them.
        let (root, path, stop) = (self.ws.root.clone(), valid.path.clone(), cancel.clone());
        let content = valid.content.clone();
        let protected = self.ws.protected.clone();
        let denied = self.ws.denied.clone();
        let first = off_reactor(move || {
            root.verify()?;
            denied.check_path(&root, &path)?;
            let (parent, name) = open_parent(
                &root,
                &path,
                Missing::Create {
                    protected: &protected,
                    cancel: &stop,
                },
            )?;
            protected.check_in(&root, &parent.dir, name, false)?;
            denied.check_in(&root, &parent.dir, name, false)?;
            let name = name.to_owned();
            let key = TargetKey {
                dir: parent.id,
                name: name.clone(),
            };
            match try_lock_target(&key) {
                Some(held) => {
                    install_held(&root, &protected, held, &parent, &name, &content, &stop)
                        .map(First::Installed)
                }
                None => Ok(First::Busy(parent, name, content)),
            }
        })
        .await?;
        let installed = match first {
            First::Installed(installed) => installed,
            First::Busy(parent, name, content) => {
                let key = TargetKey {
                    dir: parent.id,
                    name: name.clone(),
                };
                let held = lock_target(key, cancel).await?;
                let (root, stop) = (self.ws.root.clone(), cancel.clone());
                let protected = self.ws.protected.clone();
                off_reactor(move || {
                    install_held(&root, &protected, held, &parent, &name, &content, &stop)
                })
                .await?
            }
        };
        Ok(WriteOutput {
            path: valid.path.as_str().to_owned(),
            bytes: installed.len,
        })
    }
}

/// What the first blocking job of a write did: installed the file, or found the target's lock
/// held by another writer (the parent, the name and the content are handed back).
enum First {
    Installed(confine_atomicwrite::Installed),
    Busy(Parent, String, String),
}

/// Install `content` as `name` in `parent`, holding the target's lock `held` until the
/// installation has ended (should the call's future be dropped meanwhile, no other writer of
/// the target starts before that).
fn install_held(
    root: &WorkspaceRoot,
    protected: &ProtectedPaths,
    held: tokio::sync::OwnedMutexGuard<()>,
    parent: &Parent,
    name: &str,
    content: &str,
    cancel: &CancellationToken,
) -> Result<confine_atomicwrite::Installed, CallError> {
    let _held = held;
    install_checked(
        root,
        protected,
        parent,
        name,
        content.as_bytes(),
        cancel,
        &|_, _| Ok(()),
        &|e| token(root, e, parent, name),
    )
}

/// The token of an installation error.
fn token(
    root: &WorkspaceRoot,
    e: &confine_atomicwrite::Error,
    parent: &Parent,
    name: &str,
) -> ErrorKind {
    match e.kind() {
        confine_atomicwrite::ErrorKind::TargetSymlink => symlink_target_kind(root, parent, name),
        kind => kind.into(),
    }
}

impl TypedTool for WriteFileTool {
    type Input = WriteInput;
    type Valid = ValidWrite;
    type Output = WriteOutput;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Create or replace a UTF-8 text file inside the \
        workspace. `path` is relative to the workspace root (for example `src/index.js`); \
        missing parent directories are created; absolute paths, `..` and symlinks that leave \
        the workspace are refused. `content` is the complete new text (at most 65,536 UTF-8 \
        bytes) and replaces the file atomically. Returns {path, bytes}. A target that is a \
        symlink, a directory or another non-regular file is refused with an error record.";
    const HINTS: ToolHints = ToolHints::writes("Write a workspace file", true, true);
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidWriteInput;
    const FAILED: ErrorKind = ErrorKind::WriteFailed;

    fn check(&self, input: WriteInput) -> Result<ValidWrite, ToolError> {
        Self::check_input(input)
    }

    async fn run(
        &self,
        valid: ValidWrite,
        cancel: &CancellationToken,
    ) -> Result<WriteOutput, CallError> {
        self.write(&valid, cancel).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::install::gates::gate;
    use confine_atomicwrite::Step;

    /// On a multi-thread runtime with a single worker, the worst case: a write stalled inside
    /// its filesystem work (as on a slow disk) must not keep a concurrent read from
    /// completing. Were the write's work done on the worker thread, the read could only run
    /// after the stall ended (a minute later), when the write has finished: the check below
    /// would fail (it does, with the hand-off removed).
    #[test]
    fn a_stalled_write_does_not_delay_a_concurrent_read() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("r.txt"), "read me").unwrap();
        let root = crate::factory::capture_root(tmp.path()).unwrap();
        let ws = Workspace::with_defaults(root);
        let writer = WriteFileTool::new(ws.clone());
        let reader = crate::ReadFileTool::new(ws);
        let (reached_tx, reached) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        gate("stalled.txt", Step::SyncTemp, move || {
            reached_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(Duration::from_secs(60));
        });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let cancel = CancellationToken::new();
            let valid = WriteFileTool::check_input(input("stalled.txt", "new".into())).unwrap();
            let write = tokio::spawn(async move {
                let cancel = CancellationToken::new();
                writer.write(&valid, &cancel).await
            });
            tokio::task::spawn_blocking(move || reached.recv().unwrap())
                .await
                .unwrap();
            // On the runtime's one worker, as the write is.
            let path = confine_pathgrammar::normalize("r.txt").unwrap();
            let read = tokio::spawn(async move { reader.run(path, &cancel).await })
                .await
                .unwrap()
                .unwrap();
            assert_eq!(read.content, "read me");
            assert!(
                !write.is_finished(),
                "the read had to wait for the stalled write to finish"
            );
            release.send(()).unwrap();
            let written = write.await.unwrap().unwrap();
            assert_eq!(written.bytes, 3);
        });
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("stalled.txt")).unwrap(),
            "new"
        );
    }

    /// The parent directory is moved out of the workspace after the last check and before
    /// the rename, so the commit lands outside, over a file there. The write must fail
    /// (`PATH_OUTSIDE_WORKSPACE`) and leave that file as it was: the commit exchanged it
    /// aside, and the refusal exchanges it back. (A plain rename, then removing our file,
    /// would lose it: that is what this closes.)
    #[test]
    fn a_parent_moved_out_before_the_rename_loses_nothing_there() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/moved.txt"), "precious").unwrap();
        let root = crate::factory::capture_root(&ws).unwrap();
        let writer = WriteFileTool::new(Workspace::with_defaults(root));
        let (from, to) = (ws.join("sub"), tmp.path().join("away"));
        let to2 = to.clone();
        gate("moved.txt", Step::Rename, move || {
            std::fs::rename(&from, &to2).unwrap();
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let valid =
            WriteFileTool::check_input(input("sub/moved.txt", "overwritten".into())).unwrap();
        let got = rt.block_on(writer.write(&valid, &CancellationToken::new()));
        match got {
            Err(CallError::Failed(e)) => {
                assert_eq!(e.kind(), Some(ErrorKind::PathOutsideWorkspace))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            std::fs::read_to_string(to.join("moved.txt")).unwrap(),
            "precious"
        );
        let left: Vec<_> = std::fs::read_dir(&to).unwrap().flatten().collect();
        assert_eq!(left.len(), 1, "no temporary left: {left:?}");
    }

    /// The race of a directory rename: the parent passes every check, then (between the last
    /// check and the commit) a concurrent process renames it over the empty `.git/hooks`, so
    /// the commit lands in the hooks. The check after the commit sees where the parent stands
    /// now: the commit is undone and the call refused, nothing left there. The twin without
    /// the list shows the race is real: the file stays installed as a hook.
    #[test]
    fn a_parent_renamed_into_the_hooks_before_the_commit_is_undone() {
        for (protected, name) in [
            (ProtectedPaths::default(), "guarded-hook"),
            (ProtectedPaths::none(), "naive-hook"),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let ws = tmp.path().join("ws");
            std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
            std::fs::create_dir_all(ws.join("staging")).unwrap();
            let root = crate::factory::capture_root(&ws).unwrap();
            let options = crate::ToolSetOptions {
                protected: std::sync::Arc::new(protected.clone()),
                ..Default::default()
            };
            let writer = WriteFileTool::new(Workspace::new(root, &options));
            let (from, to) = (ws.join("staging"), ws.join(".git/hooks"));
            gate(name, Step::Rename, move || {
                std::fs::rename(&from, &to).unwrap()
            });
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let path = format!("staging/{name}");
            let valid = WriteFileTool::check_input(input(
                &path,
                "#!/bin/sh
"
                .into(),
            ))
            .unwrap();
            let got = rt.block_on(writer.write(&valid, &CancellationToken::new()));
            let left: Vec<_> = std::fs::read_dir(ws.join(".git/hooks"))
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            if protected.is_empty() {
                assert!(got.is_ok(), "{got:?}");
                assert_eq!(left, [name], "the naive twin installs the hook");
            } else {
                match got {
                    Err(CallError::Failed(e)) => {
                        assert_eq!(e.kind(), Some(ErrorKind::PathProtected))
                    }
                    other => panic!("{other:?}"),
                }
                assert!(left.is_empty(), "left in the hooks: {left:?}");
            }
        }
    }

    fn input(path: &str, content: String) -> WriteInput {
        WriteInput {
            path: path.into(),
            content,
        }
    }

    fn refusal(r: Result<ValidWrite, ToolError>) -> ErrorKind {
        r.unwrap_err().kind().unwrap()
    }

    #[test]
    fn check_size_at_n_and_n_plus_one() {
        let ok = WriteFileTool::check_input(input("a", "a".repeat(MAX_WRITE_BYTES))).unwrap();
        assert_eq!(ok.content.len(), MAX_WRITE_BYTES);
        let over = WriteFileTool::check_input(input("a", "a".repeat(MAX_WRITE_BYTES + 1)));
        assert_eq!(refusal(over), ErrorKind::FileTooLarge);
    }

    #[test]
    fn check_path_before_size() {
        let both = WriteFileTool::check_input(input("../a", "a".repeat(MAX_WRITE_BYTES + 1)));
        assert_eq!(refusal(both), ErrorKind::InvalidRelativePath);
    }

    #[test]
    fn check_normalizes() {
        let ok = WriteFileTool::check_input(input("./a//b\\c.txt", String::new())).unwrap();
        assert_eq!(ok.path.as_str(), "a/b/c.txt");
    }
}
