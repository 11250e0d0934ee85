//! A portable relative-path grammar for model-supplied paths: it turns the `path` argument of a
//! tool call into a clean relative path, or rejects it before anything touches the filesystem.
//!
//! The crate is pure and lexical (no I/O, no allocation but the output). Its main items:
//!
//! - [`normalize`]: validate a `&str` and return a [`RelPath`] or a [`PathError`];
//! - [`is_normal`]: whether `normalize` accepts a `&str` as it stands (no allocation);
//! - [`RelPath`]: the normalized path, segments joined by `/` ([`RelPath::as_str`],
//!   [`RelPath::segments`], [`RelPath::file_name`], [`RelPath::parent`]);
//! - [`PathError`]: the rejection, whose tool-level token [`PathError::code`] is always
//!   `INVALID_RELATIVE_PATH`, and whose [`PathError::reason`] is a [`PathErrorReason`] naming the
//!   precise rule broken, each with its own stable code (`PARENT`, `RESERVED_NAME`, ...);
//! - [`MAX_PATH_BYTES`] (4,096) and [`MAX_SEGMENT_BYTES`] (255).
//!
//! ```
//! use confine_pathgrammar::{normalize, PathErrorReason};
//!
//! let p = normalize(r"src/./util\\strings.rs")?;
//! assert_eq!(p.as_str(), "src/util/strings.rs");
//! assert_eq!(p.segments().collect::<Vec<_>>(), ["src", "util", "strings.rs"]);
//! assert_eq!(p.file_name(), "strings.rs");
//! assert_eq!(p.parent(), Some("src/util"));
//!
//! let e = normalize("a/../../etc/passwd").unwrap_err();
//! assert_eq!(e.code(), "INVALID_RELATIVE_PATH");
//! assert_eq!(e.reason(), PathErrorReason::Parent);
//! assert_eq!(normalize("Con.txt").unwrap_err().reason().code(), "RESERVED_NAME");
//! assert_eq!(normalize("notes.txt:secret").unwrap_err().reason().code(), "COLON");
//! # Ok::<(), confine_pathgrammar::PathError>(())
//! ```
//!
//! # The grammar
//!
//! Both `/` and `\` separate segments. Rejected, with the reason in brackets:
//!
//! | family | examples | reason |
//! | --- | --- | --- |
//! | empty input | `""` | `EMPTY` |
//! | more than 4,096 bytes in all (the raw input) | | `TOO_LONG` |
//! | any NUL | `a\0.txt` | `NUL` |
//! | device / NT prefixes | `\\?\C:\x`, `\\.\COM1`, `//?/x`, `//./x`, `\??\x` | `DEVICE_PREFIX` |
//! | UNC | `\\server\share`, `//server/share` | `UNC` |
//! | rooted | `/etc/passwd`, `\Windows` | `ABSOLUTE` |
//! | Windows absolute | `C:\x`, `C:/x` | `DRIVE_ABSOLUTE` |
//! | drive-relative | `C:x`, `C:` | `DRIVE_RELATIVE` |
//! | `..` anywhere | `..`, `a/../b` | `PARENT` |
//! | a segment of more than 255 bytes | | `SEGMENT_TOO_LONG` |
//! | control character U+0001..U+001F | `a\tb` | `CONTROL_CHARACTER` |
//! | `:` in a segment (ADS, drive forms) | `a.txt:s`, `a.txt::$DATA`, `x/C:/y` | `COLON` |
//! | `< > " \| ? *` | `*.txt`, `a?b` | `FORBIDDEN_CHARACTER` |
//! | a trailing `.` or space | `a.`, `a `, `...` | `TRAILING_DOT_OR_SPACE` |
//! | reserved device names | `con`, `Con.txt`, `nul .tar.gz`, `LPT¹`, `CONIN$` | `RESERVED_NAME` |
//! | nothing left | `.`, `./`, `.//.` | `NO_SEGMENTS` |
//!
//! Empty and `.` segments are dropped and the rest joined by `/`: `a/./b//c.txt` becomes
//! `a/b/c.txt`. Reserved names are judged, ASCII-case-insensitively, on the part of a segment
//! before its first `.` with trailing spaces removed: CON, PRN, AUX, NUL, COM0..COM9,
//! LPT0..LPT9, COM¹ COM² COM³ LPT¹ LPT² LPT³, CONIN$, CONOUT$. `CONSOLE`, `con_`, `COM10`,
//! `a.con` and `.hidden` are ordinary names. The order in which the checks run, which decides the
//! reason reported when several rules are broken, and the edge cases are on [`normalize`].
//!
//! # Threat model
//!
//! The input is written by the adversary (a model, through tool-call arguments). What this crate
//! guarantees, for every input: it never panics; an accepted path is relative on POSIX and on
//! Windows, has no empty, `.` or `..` segment and no separator but `/`, so joining it beneath a
//! root directory and resolving it *lexically* never leaves that root; no segment can be
//! reinterpreted by Windows as a device, a drive, a stream, a wildcard or, by silent stripping of
//! trailing dots and spaces, as another name; `normalize` of its own output returns it unchanged.
//!
//! What it does not defend against, by design (it does no I/O): symlinks, junctions, mount
//! points and hard links inside the root, a root replaced while a call runs, case-insensitive or
//! Unicode-normalizing file systems that make two accepted names the same file, and Windows 8.3
//! short names (`PROGRA~1`) that alias another name inside the root. Those belong to the
//! descriptor-based resolution of the crates above (`rootid`, `jail`, `tools`), which must treat
//! a [`RelPath`] as a *lexically* safe name, never as proof that the file it reaches is inside.
//! Characters the contract does not list (DEL, C1 controls, look-alike slashes such as U+2215 or
//! U+FF0F) are accepted: none separates or escapes where paths are passed as Unicode, as Rust's
//! standard library does on every platform (the Windows wide API, not the ANSI "best fit" one).
//!
//! # Platform support
//!
//! The grammar is the same on every OS: a Windows-only hazard (`C:x`, `CON`, `a.txt:s`) is
//! rejected on Linux too, so a path accepted on one host is accepted on all of them and means the
//! same thing. The crate uses only `core`/`std` string handling and is tested on Linux.
//!
//! # Fuzzing
//!
//! A cargo-fuzz target lives in `fuzz/` at the workspace root (a separate workspace, not built by
//! `cargo build`). Its oracle: whatever is accepted stays beneath a root when joined to it and is
//! a fixed point of `normalize`. With cargo-fuzz installed (it needs a nightly toolchain):
//!
//! ```text
//! cd fuzz && cargo +nightly fuzz run normalize -- -max_total_time=60
//! ```
//!
//! `fuzz/README.md` gives the equivalent build on the pinned stable toolchain.

#![deny(missing_docs)]

mod error;
mod normalize;
mod prefix;
mod relpath;
mod reserved;
mod segment;

pub use error::{PathError, PathErrorReason};
pub use normalize::{MAX_PATH_BYTES, is_normal, normalize};
pub use relpath::RelPath;
pub use segment::MAX_SEGMENT_BYTES;
