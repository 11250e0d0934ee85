//! Install a file's new content atomically beneath a directory handle, checking at every step
//! that the names involved still name the objects this operation created.
//!
//! [`install`] (and [`install_with`], which takes [`Hooks`]) writes `bytes` as the file `name`
//! directly inside a cap-std [`Dir`](cap_std::fs::Dir):
//!
//! 1. `lstat` the target: a symlink fails with [`ErrorKind::TargetSymlink`], a directory,
//!    FIFO, socket or device with [`ErrorKind::TargetNotRegular`], before any temporary
//!    exists; a regular file's permission bits (without setuid, setgid, sticky) become the
//!    new file's mode, else [`DEFAULT_MODE`] (0644), and its owner and group the new file's
//!    where this process may set them (see *Owner and mode* below);
//! 2. create the sibling `.<name>.pify-tmp-<random>` with `O_CREAT|O_EXCL|O_NOFOLLOW`, mode
//!    0600 (the `<name>` part is shortened so that the whole never exceeds 255 bytes: a
//!    255-byte target name is writable);
//! 3. write every byte and `fsync` the file;
//! 4. check that the temporary's name still names the opened file by `(st_dev, st_ino)`
//!    ([`ErrorKind::TempIdentityChanged`] otherwise: nothing is committed and nothing that
//!    this operation did not create is removed), and `lstat` the target again;
//! 5. `fchown` the old file's owner and group (as far as allowed), `fchmod` the final mode,
//!    look at the temporary's name once more (the caller's hook before the rename takes time:
//!    [`ErrorKind::TempIdentityChanged`] again), then commit: where the target exists, the
//!    temporary and the
//!    target are exchanged in one step (`renameat2(RENAME_EXCHANGE)`), so the old file is not
//!    gone yet but sits at the temporary's name until the caller's check after the commit
//!    ([`Step::CheckInstalled`], whose hook is given that name, so it can check the commit
//!    displaced the very file it meant to replace) accepts it; refused, the exchange is undone
//!    (the old file is back at its name; or, when another writer renamed its own file over the
//!    name meanwhile, the old file goes, as that writer's rename would have dropped it) and
//!    only this operation's file is removed. Where the target does not
//!    exist the temporary is renamed with `RENAME_NOREPLACE`. A directory found exchanged out
//!    is put back at once ([`ErrorKind::TargetNotRegular`]). (On a filesystem without these
//!    flags, a plain `renameat`.)
//! 6. if the commit fails, the old target stays and only this operation's temporary is
//!    removed, checked by identity, never recursively;
//! 7. `lstat` the target's name: if it is not the temporary's file (another writer renamed
//!    over it after the commit, or the temporary was substituted just before it), the call
//!    fails with [`ErrorKind::TargetReplaced`] and removes nothing: an entry this operation
//!    did not create is never removed, whoever put it there (no rollback of the previous
//!    content is promised). Then the directory is `fsync`ed (opened again read-only, since a
//!    cap-std `Dir` can be an `O_PATH` handle).
//!
//! A crash at any point leaves the target wholly old or wholly new (a crash between the exchange
//! and the removal of the old file leaves that old file at a temporary's name). Installs to
//! one name from one process should be serialized by the caller (the `write_file` tool holds a
//! process-wide lock per target); a writer in another process (an editor saving by
//! temp-and-rename) is never undone: the name always holds one writer's whole file, and the
//! installer that lost the race reports [`ErrorKind::TargetReplaced`]. [`Hooks`] run before
//! every [`Step`]: a caller re-verifies its own invariants there (the `write_file` tool checks
//! its workspace root, the parent directory and cancellation before the rename), and tests
//! make any step fail or run an attack between two steps.
//!
//! ```
//! use cap_std::{ambient_authority, fs::Dir};
//!
//! let tmp = tempfile::tempdir()?;
//! let dir = Dir::open_ambient_dir(tmp.path(), ambient_authority())?;
//! let installed = confine_atomicwrite::install(&dir, "hello.txt", b"hi")?;
//! assert_eq!(dir.read_to_string("hello.txt")?, "hi");
//! assert_eq!(installed.mode, 0o644);
//!
//! // A symlink target is refused, never followed.
//! dir.symlink("hello.txt", "link")?;
//! let err = confine_atomicwrite::install(&dir, "link", b"x").unwrap_err();
//! assert_eq!(err.kind(), confine_atomicwrite::ErrorKind::TargetSymlink);
//! assert_eq!(err.code(), "WRITE_TARGET_SYMLINK");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Owner and mode
//!
//! A replaced file keeps its owner and group where the installing process may set them: root
//! (`CAP_CHOWN`) sets both, so a root-run server's edit of a user's file leaves it the user's;
//! an ordinary user cannot give a file away, so the new file is the writer's, with the old
//! group where the writer belongs to it. The owner is set on the temporary before the
//! commit, so no instant shows the file with the wrong owner. The permission bits are kept
//! without set-user-ID, set-group-ID and sticky: a set-id bit on content nobody reviewed as
//! a program would make the new bytes run with the owner's rights (the kernel drops these
//! bits itself when a file is written by someone else, for the same reason), and the sticky
//! bit means nothing on a regular file. `04755` becomes `0755`.
//!
//! # Threat model
//!
//! The caller trusts the directory handle it passes (how it was reached is its business:
//! the `confine-tools` crate opens it beneath a workspace root). Inside that directory a concurrent
//! process may create, rename, replace and remove entries at any moment. Against that:
//!
//! - every operation is relative to the handle and to one plain name (`*at` system calls), so
//!   no path is ever resolved and no symlink is ever followed, at the target or the
//!   temporary;
//! - the temporary is created exclusively, so a planted file or symlink at its name fails the
//!   creation (a fresh random name is tried, up to 16 times) instead of being written through;
//! - a temporary replaced by a file, a symlink or a directory is detected before the commit
//!   ([`ErrorKind::TempIdentityChanged`]) and left where it is: removal is by identity, and a
//!   directory is never removed at all;
//! - a swap in the instant between the last of those checks (right before the rename) and
//!   the rename is detected after it ([`ErrorKind::TargetReplaced`]) and the foreign entry
//!   is left where it is: at the target, where the swapping process could have renamed it
//!   itself;
//! - a directory moved elsewhere between the caller's last check and the commit (the caller
//!   notices at [`Step::CheckInstalled`]) loses nothing: the exchange is undone there;
//! - another writer renaming its file over the target while a commit is undone keeps the
//!   target: its file, moved aside by the exchange back, gets the name again.
//!
//! It does not defend against: the remaining window between an identity check and the unlink
//! that follows it (a racing process can make it unlink one other non-directory entry of its
//! own making); a third writer renaming in the instant while an undo gives the name back,
//! whose file is then left at the temporary's name (kept, not lost); readers that open the
//! temporary (it is 0600 and carries no secret beyond
//! the content being written); or a crash leaving the temporary behind (nothing can remove
//! it; find leftovers by [`TEMP_MARKER`]). Messages carry tokens and step names, never paths.
//!
//! # Platform support
//!
//! Unix only (it uses `openat`, `renameat`, `fchmod`, `fsync` through `rustix`); tested on
//! Linux. The identity is `(st_dev, st_ino)`.

#![deny(missing_docs)]

mod error;
mod group;
mod hooks;
mod install;
mod temp_name;

pub use confine_beneath::FileId;
pub use error::{Error, ErrorKind};
pub use hooks::{Hooks, NoHooks, Step};
pub use install::{DEFAULT_MODE, Installed, install, install_with, sync_dir};
pub use temp_name::{MAX_NAME_BYTES, TEMP_MARKER};
