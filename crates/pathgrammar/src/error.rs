//! The rejection type: one opaque [`PathError`] whose tool-level token is always
//! `INVALID_RELATIVE_PATH`, and a [`PathErrorReason`] naming the precise rule that was violated.

use std::fmt;

/// Why [`normalize`](crate::normalize) rejected a path.
///
/// A tool result carries only [`PathError::code`] (`INVALID_RELATIVE_PATH`); Rust callers that
/// want the precise rule branch on [`PathError::reason`]. The message never repeats the input, so
/// it is safe to show to a model or to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("invalid relative path: {}", .reason.description())]
pub struct PathError {
    reason: PathErrorReason,
}

impl PathError {
    pub(crate) const fn new(reason: PathErrorReason) -> Self {
        Self { reason }
    }

    /// The stable tool-level token, the same for every reason: `INVALID_RELATIVE_PATH`.
    pub const fn code(&self) -> &'static str {
        "INVALID_RELATIVE_PATH"
    }

    /// The precise rule that was violated (the first one found, in the order documented on
    /// [`normalize`](crate::normalize)).
    pub const fn reason(&self) -> PathErrorReason {
        self.reason
    }
}

/// The precise rule a rejected path violated. Each has a stable [`code`](Self::code).
///
/// New reasons may be added (the enum is `#[non_exhaustive]`); an existing code is never renamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathErrorReason {
    /// The input is the empty string.
    Empty,
    /// The input holds a NUL character (U+0000) anywhere.
    Nul,
    /// The input is longer than [`MAX_PATH_BYTES`](crate::MAX_PATH_BYTES) bytes.
    TooLong,
    /// A segment is longer than [`MAX_SEGMENT_BYTES`](crate::MAX_SEGMENT_BYTES) bytes.
    SegmentTooLong,
    /// A Windows device or NT namespace prefix: `\\?\`, `\\.\`, `//?/`, `//./`, `\??\` (either
    /// separator in any position).
    DevicePrefix,
    /// A UNC path: two leading separators (`\\server\share`, `//server/share`).
    Unc,
    /// A path rooted at a separator: POSIX absolute (`/etc/passwd`) or Windows root-relative
    /// (`\Windows`).
    Absolute,
    /// A Windows absolute path on a drive: `C:\x`, `C:/x`.
    DriveAbsolute,
    /// A Windows drive-relative path: `C:`, `C:x`.
    DriveRelative,
    /// A `..` segment, anywhere, even one that would normalize away (`a/../b`).
    Parent,
    /// A segment holds `:` (an NTFS alternate data stream such as `a.txt:secret`, or a drive
    /// form after the first segment).
    Colon,
    /// A segment holds one of `< > " | ? *`.
    ForbiddenCharacter,
    /// A segment holds a control character U+0001 to U+001F.
    ControlCharacter,
    /// A segment ends in `.` or a space (`a.`, `a `, `...`), which Windows strips silently.
    TrailingDotOrSpace,
    /// A segment is a Windows reserved device name (`CON`, `nul.txt`, `LPT¹`, `CONIN$`, ...).
    ReservedName,
    /// Nothing remains once empty and `.` segments are dropped (`.`, `./`, `././/`).
    NoSegments,
}

impl PathErrorReason {
    /// Every reason, in the order the checks run (useful for tables and tests).
    pub const ALL: [Self; 16] = [
        Self::Empty,
        Self::TooLong,
        Self::Nul,
        Self::DevicePrefix,
        Self::Unc,
        Self::Absolute,
        Self::DriveAbsolute,
        Self::DriveRelative,
        Self::Parent,
        Self::SegmentTooLong,
        Self::ControlCharacter,
        Self::Colon,
        Self::ForbiddenCharacter,
        Self::TrailingDotOrSpace,
        Self::ReservedName,
        Self::NoSegments,
    ];

    /// The stable token of this reason; never renamed once released.
    pub const fn code(self) -> &'static str {
        match self {
            Self::Empty => "EMPTY",
            Self::Nul => "NUL",
            Self::TooLong => "TOO_LONG",
            Self::SegmentTooLong => "SEGMENT_TOO_LONG",
            Self::DevicePrefix => "DEVICE_PREFIX",
            Self::Unc => "UNC",
            Self::Absolute => "ABSOLUTE",
            Self::DriveAbsolute => "DRIVE_ABSOLUTE",
            Self::DriveRelative => "DRIVE_RELATIVE",
            Self::Parent => "PARENT",
            Self::Colon => "COLON",
            Self::ForbiddenCharacter => "FORBIDDEN_CHARACTER",
            Self::ControlCharacter => "CONTROL_CHARACTER",
            Self::TrailingDotOrSpace => "TRAILING_DOT_OR_SPACE",
            Self::ReservedName => "RESERVED_NAME",
            Self::NoSegments => "NO_SEGMENTS",
        }
    }

    /// A short English description, used in the error's `Display`.
    pub const fn description(self) -> &'static str {
        match self {
            Self::Empty => "the path is empty",
            Self::Nul => "the path holds a NUL character",
            Self::TooLong => "the path is longer than 4096 bytes",
            Self::SegmentTooLong => "a segment is longer than 255 bytes",
            Self::DevicePrefix => "the path starts with a device prefix",
            Self::Unc => "the path is a UNC path",
            Self::Absolute => "the path is absolute",
            Self::DriveAbsolute => "the path is absolute on a drive",
            Self::DriveRelative => "the path is relative to a drive",
            Self::Parent => "the path holds a `..` segment",
            Self::Colon => "a segment holds `:`",
            Self::ForbiddenCharacter => "a segment holds one of < > \" | ? *",
            Self::ControlCharacter => "a segment holds a control character",
            Self::TrailingDotOrSpace => "a segment ends in a dot or a space",
            Self::ReservedName => "a segment is a reserved device name",
            Self::NoSegments => "the path names no segment",
        }
    }
}

impl fmt::Display for PathErrorReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_stable_for_every_reason() {
        let codes: Vec<&str> = PathErrorReason::ALL.iter().map(|r| r.code()).collect();
        assert_eq!(
            codes,
            [
                "EMPTY",
                "TOO_LONG",
                "NUL",
                "DEVICE_PREFIX",
                "UNC",
                "ABSOLUTE",
                "DRIVE_ABSOLUTE",
                "DRIVE_RELATIVE",
                "PARENT",
                "SEGMENT_TOO_LONG",
                "CONTROL_CHARACTER",
                "COLON",
                "FORBIDDEN_CHARACTER",
                "TRAILING_DOT_OR_SPACE",
                "RESERVED_NAME",
                "NO_SEGMENTS",
            ]
        );
    }

    #[test]
    fn error_code_is_invalid_relative_path_for_every_reason() {
        for reason in PathErrorReason::ALL {
            let e = PathError::new(reason);
            assert_eq!(e.code(), "INVALID_RELATIVE_PATH");
            assert_eq!(e.reason(), reason);
            assert_eq!(reason.to_string(), reason.code());
        }
    }

    #[test]
    fn error_message_names_the_rule_without_the_input() {
        let e = PathError::new(PathErrorReason::Parent);
        assert_eq!(
            e.to_string(),
            "invalid relative path: the path holds a `..` segment"
        );
    }
}
