//! `edit_file`: exact-text replacements in one UTF-8 file beneath the workspace, all or
//! nothing, installed atomically.
//!
//! Validation, pure and before any effect: the shape (`{path, edits: [{oldText, newText,
//! replaceAll?}], dryRun?}`, at least one edit, no empty `oldText`; else
//! `INVALID_EDIT_INPUT`), the path grammar (`INVALID_RELATIVE_PATH`), and no `newText` over
//! [`MAX_EDIT_BYTES`] (`FILE_TOO_LARGE`: it could only make the file too large).
//!
//! Execution:
//! 1. the parent is opened beneath the root (nothing is created: a missing file is
//!    `FILE_NOT_FOUND`), and the process-wide lock of the target is taken, the very lock
//!    `write_file` takes, so the two tools never interleave on one file;
//! 2. the file is opened in the held parent without following a symlink (a symlink is
//!    `WRITE_TARGET_SYMLINK`, or `PATH_OUTSIDE_WORKSPACE` where it leads outside, as for
//!    `write_file`), must be regular, at most [`MAX_EDIT_BYTES`] and strict UTF-8;
//! 3. the edits apply in order, each to the text the previous ones left: `oldText` must occur
//!    exactly once (`EDIT_TEXT_NOT_FOUND`, `EDIT_TEXT_NOT_UNIQUE`; the record names the edit by
//!    its index from 0), or at least once with `replaceAll`. A miss says why, in the record
//!    beside `edit` (the private module `closest`, and docs/TOOLS.md): `closest` for a text not
//!    found (the region most like `oldText`, with a hint), `lines` for a text found more than
//!    once; nothing is ever applied by similarity. A UTF-8 byte order mark is set
//!    aside and put back. A file whose every line ending is `\r\n` is edited as if it used
//!    `\n` (edits may be given with either) and written back with `\r\n`; any other file is
//!    matched byte for byte. The result must fit in [`MAX_EDIT_BYTES`] (`FILE_TOO_LARGE`);
//! 4. the unified diff (3 lines of context, by the `similar` crate) of the text as read
//!    against the text as edited (both with `\n` endings, without the mark) is returned; with
//!    `dryRun` nothing is written;
//! 5. the new bytes are installed by [`confine_atomicwrite::install_with`]: just before the rename the
//!    root, the parent's identity at its path and cancellation are checked again, and the
//!    target must still be the file that was read, with the same bytes (read again through
//!    the descriptor held since step 2). Anything else is `EDIT_CONFLICT` and nothing is
//!    written. The commit exchanges the new file with the target (see `atomicwrite`), so
//!    right after it the call checks that what it displaced is the very file it read: another
//!    writer that saved by temp-and-rename between the last check and the commit would
//!    otherwise lose its save to an edit of an older text. Then the commit is undone (that
//!    writer's file is back at the name; the edit was visible for that instant only) and the
//!    call fails with `EDIT_CONFLICT`. So an edit replaces exactly the file it read, or
//!    nothing. A writer that does not take the lock and writes in place (same file) after the
//!    last check and before the rename still loses its write to this edit's content: the file
//!    then holds the edit applied to the text this call read, never a mix of the two.
//!    The same holds for a writer that appends (`O_APPEND`) through a descriptor it opened on
//!    the file before the commit: its later appends land in the replaced file, which no name
//!    holds any more (the limit every editor that replaces by rename shares; docs/SECURITY.md
//!    gives the measured figures). Edits never lose an append made before the last check;
//! 6. the answer is true to the file: an error means the edit is not in place, a success that
//!    it is. The one failure that comes once the name was seen holding the edited file, the
//!    directory's `fsync`, answers success (logged for the operator): an error there would
//!    invite a retry that could apply the edit twice.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use confine_atomicwrite::Step;
use confine_beneath::{FsErrorKind, Symlinks};
use confine_pathgrammar::RelPath;
use confine_rootid::{FileId, WorkspaceRoot};
use rustix::fs::{AtFlags, OFlags};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::blocking::off_reactor;
use crate::entry::{lstat_at, normalize};
use crate::error::{CallError, Cancelled, ErrorKind, ToolError, failed};
use crate::fsmap::FsTokens;
use crate::install::install_checked;
use crate::parent::{Missing, Parent, open_parent, symlink_target_kind};
use crate::protect::ProtectedPaths;
use crate::read::{read_bounded, regular_file};
use crate::target_lock::{TargetKey, lock_target};
use crate::tool::{ToolHints, TypedTool};
use crate::workspace::Workspace;

mod closest;
pub use closest::{MAX_CLOSEST_CHARS, MAX_OCCURRENCE_LINES};

/// The most bytes a file may hold before and after the edits (`write_file`'s limit).
pub const MAX_EDIT_BYTES: usize = 65_536;

const BOM: &str = "\u{feff}";

/// The arguments of `edit_file`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EditInput {
    /// Relative path of the file inside the workspace, with `/` separators.
    pub path: String,
    /// The replacements, applied in order, each to the text the previous ones left.
    pub edits: Vec<EditSpec>,
    /// Return the diff and write nothing (default false).
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// One replacement.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EditSpec {
    /// The exact text to find (not empty); it must occur exactly once unless `replaceAll`.
    pub old_text: String,
    /// The text to put in its place.
    pub new_text: String,
    /// Replace every occurrence (default false: exactly one must exist).
    #[serde(default)]
    pub replace_all: Option<bool>,
}

/// The record `edit_file` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EditOutput {
    /// The normalized relative path.
    pub path: String,
    /// The size of the edited file in bytes.
    pub bytes: usize,
    /// How many occurrences were replaced, over all edits.
    pub replacements: usize,
    /// A unified diff of the change, 3 lines of context.
    pub diff: String,
}

/// Arguments that passed validation.
#[derive(Clone, Debug)]
pub struct ValidEdit {
    path: RelPath,
    edits: Vec<EditSpec>,
    dry_run: bool,
}

/// The `edit_file` tool over one workspace.
#[derive(Debug, Clone)]
pub struct EditFileTool {
    ws: Workspace,
}

impl EditFileTool {
    /// An edit_file tool over an already captured root, refusing the default protected paths.
    pub(crate) fn new(ws: Workspace) -> Self {
        Self { ws }
    }
}

/// The text after the edits, and how many replacements they made.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Edited {
    /// The bytes to install.
    pub(crate) bytes: String,
    /// Replacements over all edits.
    pub(crate) replacements: usize,
    /// The unified diff.
    pub(crate) diff: String,
}

/// Apply `edits` to `original` (pure): the byte order mark and CRLF rules of the module docs.
/// An edit that misses fails with its diagnostics (`closest`, `lines`); `cancel` is checked
/// while the closest region is searched.
pub(crate) fn apply(
    original: &str,
    edits: &[EditSpec],
    label: &str,
    cancel: &CancellationToken,
) -> Result<Edited, CallError> {
    let (bom, body) = match original.strip_prefix(BOM) {
        Some(rest) => (BOM, rest),
        None => ("", original),
    };
    let crlf = body.contains("\r\n") && !body.replace("\r\n", "").contains('\n');
    let lf = |s: &str| {
        if crlf {
            s.replace("\r\n", "\n")
        } else {
            s.to_owned()
        }
    };
    let before = lf(body);
    let mut text = before.clone();
    let mut replacements = 0;
    for (index, edit) in edits.iter().enumerate() {
        let old = lf(&edit.old_text);
        let new = lf(&edit.new_text);
        let found = text.matches(old.as_str()).count();
        let fail = |kind| ToolError::failed(kind).with_edit(index);
        match (found, edit.replace_all.unwrap_or(false)) {
            (0, _) => {
                let mut e = fail(ErrorKind::EditTextNotFound);
                if let Some(region) = closest::closest(&text, &old, crlf, cancel)? {
                    e = e.with_field("closest", region);
                }
                return Err(e.into());
            }
            (1, _) => text = text.replacen(old.as_str(), &new, 1),
            (_, true) => text = text.replace(old.as_str(), &new),
            (_, false) => {
                let lines = closest::occurrence_lines(&text, &old);
                let e = fail(ErrorKind::EditTextNotUnique).with_field("lines", lines.into());
                return Err(e.into());
            }
        }
        replacements += found;
        if text.len() > 2 * MAX_EDIT_BYTES {
            // Already far too large: stop before the text grows further.
            return Err(failed(ErrorKind::FileTooLarge));
        }
    }
    let out = if crlf {
        text.replace('\n', "\r\n")
    } else {
        text.clone()
    };
    let bytes = format!("{bom}{out}");
    if bytes.len() > MAX_EDIT_BYTES {
        return Err(failed(ErrorKind::FileTooLarge));
    }
    let diff = similar::TextDiff::from_lines(&before, &text)
        .unified_diff()
        .context_radius(3)
        .header(label, label)
        .to_string();
    Ok(Edited {
        bytes,
        replacements,
        diff,
    })
}

/// Open the target in the held parent, never following a symlink at it.
fn open_target(root: &WorkspaceRoot, parent: &Parent, name: &str) -> Result<File, CallError> {
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    match confine_beneath::open_beneath(&parent.dir, name, flags, Symlinks::Refuse) {
        Ok(fd) => Ok(File::from(fd)),
        Err(e) => {
            const TOKENS: FsTokens = FsTokens::at_name(ErrorKind::ReadFailed)
                .not_found(ErrorKind::FileNotFound)
                .not_directory(ErrorKind::FileNotFound)
                .not_regular(ErrorKind::FileNotRegular);
            Err(failed(match FsErrorKind::of(&e) {
                // The leaf is a symlink (opened without following it).
                FsErrorKind::Symlink => symlink_target_kind(root, parent, name),
                kind => TOKENS.token(kind),
            }))
        }
    }
}

/// The file still holds exactly `expected`, read again through its descriptor.
fn same_content(file: &File, expected: &[u8]) -> io::Result<bool> {
    let mut buf = vec![0u8; expected.len() + 1];
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(&buf[..filled] == expected)
}

/// Run just before the rename: the name still names the file that was read, and it still holds
/// the bytes read; else `EDIT_CONFLICT`.
fn check_unchanged(
    parent: &Parent,
    name: &str,
    file: &File,
    opened: FileId,
    read: &[u8],
) -> Result<(), CallError> {
    let conflict = || failed(ErrorKind::EditConflict);
    let now = lstat_at(&parent.dir, name).map_err(|e| conflict().with_source(e))?;
    if FileId::of(&now) != opened {
        return Err(conflict());
    }
    match same_content(file, read) {
        Ok(true) => Ok(()),
        Ok(false) => Err(conflict()),
        Err(_) => Err(failed(ErrorKind::ReadFailed)),
    }
}

fn edit(
    root: &WorkspaceRoot,
    protected: &ProtectedPaths,
    parent: &Parent,
    name: &str,
    valid: &ValidEdit,
    cancel: &CancellationToken,
) -> Result<EditOutput, CallError> {
    let mut file = open_target(root, parent, name)?;
    let (meta, opened) = regular_file(&file)?;
    let read = read_bounded(&mut file, meta.len(), cancel, || {})?;
    let original =
        std::str::from_utf8(&read).map_err(|e| failed(ErrorKind::FileNotUtf8).with_source(e))?;
    let edited = apply(original, &valid.edits, valid.path.as_str(), cancel)?;
    let output = EditOutput {
        path: valid.path.as_str().to_owned(),
        bytes: edited.bytes.len(),
        replacements: edited.replacements,
        diff: edited.diff,
    };
    if valid.dry_run {
        return Ok(output);
    }
    let unchanged = |step: Step, aside: Option<&OsStr>| match (step, aside) {
        (Step::Rename, _) => check_unchanged(parent, name, &file, opened, &read),
        // The commit must have displaced the very file that was read: another writer's
        // rename in between would otherwise lose its content to an edit of an older text.
        (Step::CheckInstalled, Some(aside)) => {
            match rustix::fs::statat(&parent.dir, aside, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileId::of(&st) == opened => Ok(()),
                _ => Err(failed(ErrorKind::EditConflict)),
            }
        }
        _ => Ok(()),
    };
    // Set when the installation failed only at the directory's fsync, once the edited file
    // was confirmed at the name: the edit has landed.
    let landed = std::cell::Cell::new(false);
    let token = |e: &confine_atomicwrite::Error| {
        use confine_atomicwrite::ErrorKind as K;
        landed.set(e.step() == Step::SyncDir);
        match e.kind() {
            // The target was replaced by something else since it was read.
            K::TargetSymlink | K::TargetNotRegular => ErrorKind::EditConflict,
            // `WRITE_TARGET_REPLACED`: another writer renamed over the edited file after the
            // commit, nothing removed; the rest as for every installation.
            kind => kind.into(),
        }
    };
    let installed = install_checked(
        root,
        protected,
        parent,
        name,
        edited.bytes.as_bytes(),
        cancel,
        &unchanged,
        &token,
    );
    settle(installed.map(drop), landed.get(), output)
}

/// The answer once the installation returned: an error only when the edit is not in place.
/// A failure at the directory's fsync comes after the check that the name holds the edited
/// file: the edit has landed and the answer says so (the failure goes to the operator's log),
/// since an error would tell the model nothing happened, and a retried edit could then apply
/// twice (`replaceAll`, or a `newText` that still holds its `oldText`).
fn settle(
    installed: Result<(), CallError>,
    landed: bool,
    output: EditOutput,
) -> Result<EditOutput, CallError> {
    match installed {
        Ok(()) => Ok(output),
        Err(e) if landed => {
            tracing::warn!(path = %output.path, error = ?e, "edit_file: the edit is in place, its directory's fsync failed");
            Ok(output)
        }
        Err(e) => Err(e),
    }
}

impl TypedTool for EditFileTool {
    type Input = EditInput;
    type Valid = ValidEdit;
    type Output = EditOutput;
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Edit a UTF-8 text file inside the workspace by exact \
        text replacement. `path` is relative to the workspace root. `edits` apply in order, \
        each to the text the previous ones left: `oldText` must occur exactly once (or set \
        `replaceAll: true` to replace every occurrence) and is replaced by `newText`; if any \
        edit fails nothing is written and the error names the edit by index: a text not \
        found comes with `closest` (the lines most like it, the text they hold, and a hint: \
        `indentation`, `whitespace`, `quotes` or `different`), a text found more than once \
        with `lines` (where each occurrence starts); resend the exact text. Line endings and \
        a byte order mark are kept. `dryRun: true` shows the diff without writing. Returns \
        {path, bytes, replacements, diff} with a unified diff of the change. Files over 65,536 \
        bytes, before or after, are refused.";
    const HINTS: ToolHints = ToolHints::writes("Edit a workspace file", true, false);
    const INVALID_INPUT: ErrorKind = ErrorKind::InvalidEditInput;
    const FAILED: ErrorKind = ErrorKind::WriteFailed;

    fn check(&self, input: EditInput) -> Result<ValidEdit, ToolError> {
        if input.edits.is_empty() || input.edits.iter().any(|e| e.old_text.is_empty()) {
            return Err(ToolError::invalid(ErrorKind::InvalidEditInput));
        }
        let path = normalize(&input.path)?;
        if input
            .edits
            .iter()
            .any(|e| e.new_text.len() > MAX_EDIT_BYTES)
        {
            return Err(ToolError::invalid(ErrorKind::FileTooLarge));
        }
        Ok(ValidEdit {
            path,
            edits: input.edits,
            dry_run: input.dry_run.unwrap_or(false),
        })
    }

    async fn run(
        &self,
        valid: ValidEdit,
        cancel: &CancellationToken,
    ) -> Result<EditOutput, CallError> {
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        // Refused whole, a dry run included: an edit of a protected file is never prepared.
        self.ws.protected.check_written(&valid.path)?;
        let root = self.ws.root.clone();
        let path = valid.path.clone();
        let protected = self.ws.protected.clone();
        let denied = self.ws.denied.clone();
        let (parent, name) = off_reactor(move || {
            root.verify()?;
            // A dry run too: its diff would show the file's text.
            denied.check_path(&root, &path)?;
            let (parent, name) =
                open_parent(&root, &path, Missing::Refuse(ErrorKind::WriteFailed))?;
            protected.check_in(&root, &parent.dir, name, false)?;
            denied.check_in(&root, &parent.dir, name, false)?;
            Ok((parent, name.to_owned()))
        })
        .await?;
        let key = TargetKey {
            dir: parent.id,
            name: name.clone(),
        };
        let held = lock_target(key, cancel).await?;
        let root = self.ws.root.clone();
        let cancel = cancel.clone();
        let protected = self.ws.protected.clone();
        off_reactor(move || {
            // The lock travels with the work: it is released when the work ends, even if the
            // caller's future was dropped meanwhile.
            let _held = held;
            edit(&root, &protected, &parent, &name, &valid, &cancel)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`super::apply`] never cancelled.
    fn apply(original: &str, edits: &[EditSpec], label: &str) -> Result<Edited, CallError> {
        super::apply(original, edits, label, &CancellationToken::new())
    }

    fn spec(old: &str, new: &str, all: bool) -> EditSpec {
        EditSpec {
            old_text: old.into(),
            new_text: new.into(),
            replace_all: Some(all),
        }
    }

    fn err_of(r: Result<Edited, CallError>) -> (ErrorKind, Option<usize>) {
        match r {
            Err(CallError::Failed(e)) => (e.kind().unwrap(), e.edit()),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn edits_apply_in_order_to_the_text_left_by_the_previous_ones() {
        let got = apply(
            "a b c\n",
            &[spec("a", "x", false), spec("x b", "y", false)],
            "f",
        )
        .unwrap();
        assert_eq!(got.bytes, "y c\n");
        assert_eq!(got.replacements, 2);
        assert!(got.diff.contains("-a b c\n+y c\n"), "{}", got.diff);
        assert!(got.diff.starts_with("--- f\n+++ f\n"), "{}", got.diff);
    }

    #[test]
    fn not_found_and_not_unique_name_the_edit() {
        let edits = [spec("a", "b", false), spec("zz", "q", false)];
        assert_eq!(
            err_of(apply("a a", &edits[1..], "f")),
            (ErrorKind::EditTextNotFound, Some(0))
        );
        assert_eq!(
            err_of(apply("a x", &edits, "f")),
            (ErrorKind::EditTextNotFound, Some(1))
        );
        assert_eq!(
            err_of(apply("a a", &[spec("a", "b", false)], "f")),
            (ErrorKind::EditTextNotUnique, Some(0))
        );
        let all = apply("a a", &[spec("a", "b", true)], "f").unwrap();
        assert_eq!((all.bytes.as_str(), all.replacements), ("b b", 2));
    }

    #[test]
    fn crlf_and_bom_are_kept() {
        let original = "\u{feff}one\r\ntwo\r\nthree\r\n";
        let got = apply(original, &[spec("one\ntwo", "1\n2\n2b", false)], "f").unwrap();
        assert_eq!(got.bytes, "\u{feff}1\r\n2\r\n2b\r\nthree\r\n");
        let crlf_edit = apply(original, &[spec("two\r\n", "deux\r\n", false)], "f").unwrap();
        assert_eq!(crlf_edit.bytes, "\u{feff}one\r\ndeux\r\nthree\r\n");
        // Mixed endings are matched byte for byte.
        let mixed = apply("a\r\nb\nc", &[spec("a\nb", "x", false)], "f");
        assert_eq!(err_of(mixed).0, ErrorKind::EditTextNotFound);
    }

    #[test]
    fn size_after_at_n_and_n_plus_one() {
        let original = "x".repeat(10);
        let n = "y".repeat(MAX_EDIT_BYTES - 9);
        let ok = apply(&original, &[spec("x", &n, false).clone()], "f");
        assert_eq!(err_of(ok).0, ErrorKind::EditTextNotUnique);
        let got = apply(
            &original,
            &[spec(&original, &"y".repeat(MAX_EDIT_BYTES), false)],
            "f",
        )
        .unwrap();
        assert_eq!(got.bytes.len(), MAX_EDIT_BYTES);
        let over = apply(
            &original,
            &[spec(&original, &"y".repeat(MAX_EDIT_BYTES + 1), false)],
            "f",
        );
        assert_eq!(err_of(over).0, ErrorKind::FileTooLarge);
    }

    fn output() -> EditOutput {
        EditOutput {
            path: "f.txt".into(),
            bytes: 3,
            replacements: 1,
            diff: String::new(),
        }
    }

    /// A failure at the directory's fsync comes after the name was seen holding the edit: the
    /// answer is a success. Any other failure stays the failure.
    #[test]
    fn a_failure_once_the_edit_is_in_place_answers_success() {
        let fsync = || failed(ErrorKind::WriteFailed);
        assert_eq!(settle(Err(fsync()), true, output()), Ok(output()));
        assert_eq!(settle(Err(fsync()), false, output()), Err(fsync()));
        let conflict = || failed(ErrorKind::EditConflict);
        assert_eq!(settle(Err(conflict()), false, output()), Err(conflict()));
        assert_eq!(settle(Ok(()), false, output()), Ok(output()));
    }

    /// The conflict check run just before the rename, with the file changed in between.
    #[test]
    fn a_file_changed_after_the_read_is_a_conflict() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        std::fs::write(ws.join("f.txt"), "before").unwrap();
        let root = WorkspaceRoot::capture(&ws).unwrap();
        let path = confine_pathgrammar::normalize("f.txt").unwrap();
        let (parent, name) =
            open_parent(&root, &path, Missing::Refuse(ErrorKind::WriteFailed)).unwrap();
        let file = open_target(&root, &parent, name).unwrap();
        let opened = FileId::of_std(&file.metadata().unwrap());
        let check = || check_unchanged(&parent, name, &file, opened, b"before");
        let conflict = Err(failed(ErrorKind::EditConflict));
        assert_eq!(check(), Ok(()));
        // Rewritten in place (same inode): the bytes differ.
        std::fs::write(ws.join("f.txt"), "after!").unwrap();
        assert_eq!(check(), conflict);
        // Replaced by another file with the very bytes read: the identity differs.
        std::fs::write(ws.join("g.txt"), "before").unwrap();
        std::fs::rename(ws.join("g.txt"), ws.join("f.txt")).unwrap();
        assert_eq!(check(), conflict);
        // Removed.
        std::fs::remove_file(ws.join("f.txt")).unwrap();
        assert_eq!(check(), conflict);
    }
}
