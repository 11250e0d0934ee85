//! The temporary's name: `.<name>.pify-tmp-<random>`, never longer than 255 bytes.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// The marker every temporary's name holds; a leftover is found by it.
pub const TEMP_MARKER: &str = ".pify-tmp-";

/// The longest file name the platforms we support accept, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// Hex digits of randomness in a temporary's name (64 bits).
const RANDOM_HEX: usize = 16;

/// How many bytes of the target's name a temporary's name keeps at most.
const KEPT: usize = MAX_NAME_BYTES - 1 - TEMP_MARKER.len() - RANDOM_HEX;

/// A fresh temporary name for `name`. The name part is cut to fit 255 bytes; a UTF-8 name is
/// cut on a character boundary so that the temporary stays valid UTF-8 too.
pub(crate) fn temp_name(name: &OsStr) -> OsString {
    let bytes = name.as_bytes();
    let mut keep = bytes.len().min(KEPT);
    if let Ok(text) = std::str::from_utf8(bytes) {
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
    }
    let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
    let random = high ^ low.rotate_left(29);
    let mut out = Vec::with_capacity(MAX_NAME_BYTES);
    out.push(b'.');
    out.extend_from_slice(&bytes[..keep]);
    out.extend_from_slice(TEMP_MARKER.as_bytes());
    out.extend_from_slice(format!("{random:0width$x}", width = RANDOM_HEX).as_bytes());
    OsString::from_vec(out)
}

/// True when `name` is one plain file name: not empty, `.` or `..`, no `/` or NUL, at most
/// 255 bytes.
pub(crate) fn is_plain_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b != b"."
        && b != b".."
        && b.len() <= MAX_NAME_BYTES
        && !b.iter().any(|&c| c == b'/' || c == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_name_keeps_short_names_whole() {
        let t = temp_name(OsStr::new("a.txt"));
        let s = t.to_str().unwrap();
        assert!(s.starts_with(".a.txt.pify-tmp-"), "{s}");
        assert_eq!(s.len(), 1 + 5 + TEMP_MARKER.len() + RANDOM_HEX);
    }

    #[test]
    fn temp_name_of_255_bytes_fits_255() {
        let name = "x".repeat(255);
        let t = temp_name(OsStr::new(&name));
        assert_eq!(t.len(), MAX_NAME_BYTES);
        // A multi-byte name is cut on a character boundary.
        let name = "é".repeat(127);
        let t = temp_name(OsStr::new(&name));
        assert!(t.len() <= MAX_NAME_BYTES);
        assert!(t.to_str().is_some());
    }

    #[test]
    fn temp_names_differ() {
        assert_ne!(temp_name(OsStr::new("a")), temp_name(OsStr::new("a")));
    }

    #[test]
    fn plain_names() {
        for bad in ["", ".", "..", "a/b", "a\0b", &"x".repeat(256)] {
            assert!(!is_plain_name(OsStr::new(bad)), "{bad:?}");
        }
        for good in ["a", "...", ".hidden", &"x".repeat(255)] {
            assert!(is_plain_name(OsStr::new(good)), "{good:?}");
        }
    }
}
