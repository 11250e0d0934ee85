//! Path confinement for agent file tools: the path guard [`resolve_in_sandbox`] and the
//! allow/deny [`FileJail`], whose [`FileJail::open_for_read`] and [`FileJail::open_for_write`]
//! make their decision on the descriptor they return.
//!
//! - [`resolve_in_sandbox`]`(task_dir, p)` maps a model-supplied path into one directory or
//!   refuses it, returning a [`GuardResult`] (`ok`, `resolved`, `error`).
//! - [`FileJail::new`]`(cwd, `[`JailPolicy`]` { allow_read, allow_write, deny })` confines reads
//!   and writes to directory bounds; [`FileJail::resolve_for_read`] /
//!   [`FileJail::resolve_for_write`] return the checked path, `open_for_*` the checked file.
//! - `confine-grading` runs the case files of `confine guard` / `confine jail` and the conformance
//!   corpus.
//! - Every refusal is an [`Error`] whose [`ErrorKind::code`] is a stable token.
//!
//! ```
//! use confine_jail::{FileJail, JailPolicy, resolve_in_sandbox};
//!
//! let tmp = tempfile::tempdir()?;
//! let root = tmp.path().join("cc-task-abc");
//! std::fs::create_dir_all(root.join("sub/secret"))?;
//! std::fs::write(root.join("ok.txt"), "hi")?;
//! std::fs::create_dir(tmp.path().join("cc-task-abc-evil"))?;
//!
//! // The guard: inside, normalized back in, escapes, and the prefix-sharing sibling.
//! assert!(resolve_in_sandbox(&root, "sub/../ok.txt").ok);
//! assert!(!resolve_in_sandbox(&root, "../escape").ok);
//! assert!(!resolve_in_sandbox(&root, "/etc/passwd").ok);
//! assert!(!resolve_in_sandbox(&root, "../cc-task-abc-evil/x").ok);
//! std::os::unix::fs::symlink("/etc", root.join("link"))?;
//! let r = resolve_in_sandbox(&root, "link/passwd");
//! assert_eq!(r.error.map(|e| e.code()), Some("PATH_OUTSIDE_SANDBOX"));
//!
//! // The jail: deny beats allow, relative paths resolve against the cwd.
//! let policy = JailPolicy {
//!     allow_read: vec![root.clone()],
//!     allow_write: vec!["sub".into()],
//!     deny: vec!["sub/secret".into()],
//! };
//! let jail = FileJail::new(&root, policy)?;
//! assert!(jail.resolve_for_read("ok.txt").is_ok());
//! assert_eq!(jail.resolve_for_write("ok.txt").unwrap_err().code(), "PATH_OUTSIDE_WRITE_BOUNDS");
//! assert_eq!(jail.resolve_for_write("sub/secret/x").unwrap_err().code(), "PATH_DENIED");
//!
//! use std::io::{Read, Write};
//! jail.open_for_write("sub/new.txt")?.write_all(b"hello")?;
//! let mut text = String::new();
//! jail.open_for_read("sub/new.txt")?.read_to_string(&mut text)?;
//! assert_eq!(text, "hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Semantics
//!
//! Both resolve a path the same way: made absolute (against the root, or the jail's cwd),
//! `.` and `..` collapsed lexically as node's `path.resolve` does, then symlinks resolved
//! component by component, tolerating a missing tail. Unlike the reference implementation, a dangling
//! symlink is followed to where it points (so a later create through it is judged now), and
//! more than 40 symlinks is `SYMLINK_LOOP`. Containment is judged component by component,
//! never as a string prefix. Names are literal: `~`, `%2e%2e`, `$HOME` are file names.
//!
//! Jail bounds are resolved once at construction (see [`FileJail::new`] for bounds that do
//! not exist yet: they stay paths, and grant or deny whatever later appears at exactly that
//! place as real directories). Deny beats allow, whatever the nesting. Reads need a read
//! bound and writes a write bound; neither implies the other.
//!
//! # Threat model
//!
//! The adversary writes the requested paths (the model, through tool-call arguments) and may
//! also run a concurrent local process that creates, renames and swaps symlinks and
//! directories inside the allow bounds while a call runs.
//!
//! - `resolve_in_sandbox`, `resolve_for_read` and `resolve_for_write` return *paths*. They
//!   defend against `..` traversal, absolute paths, prefix-sharing siblings, and symlinks
//!   (inner, outer, relative, absolute, dangling, looping) planted before the call. Like the
//!   reference implementation's `FileJail` they are check-then-use: a process that swaps a directory
//!   for a symlink between the check and the caller's `open(path)` wins. The race tests in
//!   `tests/` show it winning against the naive `resolve_for_read` + `File::open`.
//! - `open_for_read` / `open_for_write` close that gap. The decision is taken on the
//!   canonical path as above; then that path is opened relative to the allow bound's directory
//!   handle, held open since construction, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
//!   for the directories and `O_NOFOLLOW` for the leaf. The decided path had no symlink, so any
//!   symlink met now is a swap and fails with `PATH_CHANGED`; nothing outside the bound's
//!   directory can be reached, whatever is renamed meanwhile. The deny bounds are then checked
//!   against the object actually opened: its `(dev, ino)` against deny bounds that are files;
//!   the directory it was opened in and each ancestor up to the allow directory, climbed
//!   through `..` on descriptors, against the deny directories' identities recorded at
//!   construction (so a deny directory renamed or exchanged into an allowed name stays denied);
//!   and the object's present location, read back from `/proc/self/fd/N`, against the bound
//!   and the deny paths (which covers deny bounds created after construction). `open_for_write`
//!   checks the parent before creating, and truncates only after every check passed.
//!
//! What remains:
//! - Hard links. A file inside a deny directory that also has a name in an allowed directory
//!   is the same inode under an allowed path; it is refused only when the deny bound is that
//!   file itself (identity), not when the deny bound is a directory holding another name of it.
//!   Creating such a link needs write access to both places.
//! - Moves after the check. A process that can rename inside the allow bound can move a denied
//!   file to an allowed name, or move the opened file into a deny directory after the checks;
//!   the guarantee is about the object at the moment of the check. It can never reach outside
//!   the allow bound's directory.
//! - Bind mounts and mount changes inside a bound are trusted (`RESOLVE_NO_XDEV` is not set).
//! - Without procfs the path re-check is skipped; the identity checks remain.
//!
//! Error messages are the tokens alone and never carry host paths.
//!
//! # Platform support
//!
//! Linux is tested (openat2 since 5.6; older kernels use a per-component
//! `openat(O_NOFOLLOW)` walk with the same guarantees). Other Unix systems may compile but are
//! untested. Windows is not claimed: the crate uses Unix paths, `(dev, ino)` identities and
//! procfs.

#![deny(missing_docs)]

mod bound;
mod error;
mod filejail;
mod guard;
mod lexical;
mod open;

pub use confine_beneath::MAX_SYMLINKS;
pub use error::{Error, ErrorKind};
pub use filejail::{FileJail, JailPolicy};
pub use guard::{GuardResult, resolve_in_sandbox};
