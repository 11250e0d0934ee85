//! Root forms: the shapes of the *start* of the input that make it something other than a path
//! relative to the workspace, on POSIX or on Windows. Both `/` and `\` count as separators in
//! every position, so `\\?/x` and `/\server\share` are judged like their uniform spellings.
//!
//! In order, the first match wins:
//! 1. two separators, then `?` or `.`, then a separator or the end (`\\?\`, `\\.\`, `//?/`,
//!    `//./`), or a separator, `??`, then a separator or the end (`\??\`, the NT object
//!    namespace) → [`DevicePrefix`](PathErrorReason::DevicePrefix);
//! 2. any other two leading separators (`\\server\share`, `//server/share`, `//`) →
//!    [`Unc`](PathErrorReason::Unc);
//! 3. one leading separator (`/etc/passwd`, `\Windows`) → [`Absolute`](PathErrorReason::Absolute);
//! 4. an ASCII letter, `:` and a separator (`C:\x`, `c:/x`) →
//!    [`DriveAbsolute`](PathErrorReason::DriveAbsolute);
//! 5. an ASCII letter and `:` (`C:`, `C:x`) → [`DriveRelative`](PathErrorReason::DriveRelative).
//!
//! Any other `:` (`1:x`, `a/C:/b`, `a.txt:s`) is left to the segment rules, which reject it as
//! [`Colon`](PathErrorReason::Colon): every drive-like form is rejected, only the reason differs.

use crate::error::PathErrorReason;

#[inline]
pub(crate) const fn is_separator(b: u8) -> bool {
    b == b'/' || b == b'\\'
}

/// Whether byte `i` of `b` is a separator or lies past the end.
#[inline]
fn separator_or_end(b: &[u8], i: usize) -> bool {
    b.get(i).is_none_or(|&c| is_separator(c))
}

/// Reject a root form at the start of `b` (the whole, non-empty input).
#[inline]
pub(crate) fn check(b: &[u8]) -> Result<(), PathErrorReason> {
    match b {
        [s, ..] if is_separator(*s) => Err(rooted(b)),
        [letter, b':', ..] if letter.is_ascii_alphabetic() => {
            if b.get(2).is_some_and(|&c| is_separator(c)) {
                Err(PathErrorReason::DriveAbsolute)
            } else {
                Err(PathErrorReason::DriveRelative)
            }
        }
        _ => Ok(()),
    }
}

/// Classify an input that starts with a separator.
#[cold]
fn rooted(b: &[u8]) -> PathErrorReason {
    match b {
        [_, s, b'?' | b'.', ..] if is_separator(*s) && separator_or_end(b, 3) => {
            PathErrorReason::DevicePrefix
        }
        [_, b'?', b'?', ..] if separator_or_end(b, 3) => PathErrorReason::DevicePrefix,
        [_, s, ..] if is_separator(*s) => PathErrorReason::Unc,
        _ => PathErrorReason::Absolute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PathErrorReason::*;

    fn reason(s: &str) -> Result<(), PathErrorReason> {
        check(s.as_bytes())
    }

    #[test]
    fn check_device_prefixes_in_every_spelling() {
        for s in [
            r"\\?\C:\x",
            r"\\.\PhysicalDrive0",
            "//?/C:/x",
            "//./pipe/x",
            r"\\?/x",
            r"/\.\x",
            r"\/?/x",
            r"\\?",
            "//.",
            r"\??\C:\x",
            "/??/x",
            r"\??",
            r"\\?\UNC\server\share",
            r"\\.\GLOBALROOT\Device",
        ] {
            assert_eq!(reason(s), Err(DevicePrefix), "{s:?}");
        }
    }

    #[test]
    fn check_unc_paths() {
        for s in [
            r"\\server\share",
            "//server/share",
            r"/\server",
            "//",
            r"\\",
            "///x",
            r"\\..\x",
            r"\\.x",
            "//?x",
            r"\\localhost\c$\x",
        ] {
            assert_eq!(reason(s), Err(Unc), "{s:?}");
        }
    }

    #[test]
    fn check_absolute_paths() {
        for s in [
            "/etc/passwd",
            "/",
            r"\Windows\x",
            r"\",
            "/.",
            "/..",
            "/?",
            r"\?\x",
            "/?x",
        ] {
            assert_eq!(reason(s), Err(Absolute), "{s:?}");
        }
    }

    #[test]
    fn check_drive_forms() {
        for s in [r"C:\x", "C:/x", "c:/", r"z:\", "C:/"] {
            assert_eq!(reason(s), Err(DriveAbsolute), "{s:?}");
        }
        for s in ["C:x", "C:", "c:..", "Z:a/b", "C::$DATA"] {
            assert_eq!(reason(s), Err(DriveRelative), "{s:?}");
        }
    }

    #[test]
    fn check_leaves_relative_inputs_to_the_segment_rules() {
        for s in [
            "a",
            "a/b",
            "./a",
            ".//server/share",
            "1:x",
            "é:x",
            "CC:x",
            "a/C:/b",
            "?/x",
        ] {
            assert_eq!(reason(s), Ok(()), "{s:?}");
        }
    }
}
