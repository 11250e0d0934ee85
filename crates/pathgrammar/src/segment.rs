//! The rules every kept segment must pass (one segment: the bytes between two separators, never
//! empty and never `.`, which are dropped before these rules run).
//!
//! In order, the first failure wins:
//! 1. `..` → [`Parent`](PathErrorReason::Parent);
//! 2. more than [`MAX_SEGMENT_BYTES`] bytes → [`SegmentTooLong`](PathErrorReason::SegmentTooLong);
//! 3. the first offending byte, left to right: U+0001..U+001F →
//!    [`ControlCharacter`](PathErrorReason::ControlCharacter), `:` →
//!    [`Colon`](PathErrorReason::Colon), one of `< > " | ? *` →
//!    [`ForbiddenCharacter`](PathErrorReason::ForbiddenCharacter);
//! 4. a last byte `.` or space → [`TrailingDotOrSpace`](PathErrorReason::TrailingDotOrSpace);
//! 5. a reserved device name → [`ReservedName`](PathErrorReason::ReservedName).
//!
//! Every forbidden character is ASCII, so the rules run on bytes: a byte of a multi-byte UTF-8
//! sequence is always >= 0x80 and can never be mistaken for one.

use crate::error::PathErrorReason;
use crate::reserved::is_reserved;

/// The most bytes one segment may hold (a common file-name limit: ext4, NTFS in UTF-16 units,
/// APFS). Counted in UTF-8 bytes, so a name of 255 bytes is accepted and 256 rejected.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Byte classes of [`CLASS`].
pub(crate) const PLAIN: u8 = 0;
pub(crate) const SEPARATOR: u8 = 1;
pub(crate) const NUL: u8 = 2;
pub(crate) const CONTROL: u8 = 3;
pub(crate) const COLON: u8 = 4;
pub(crate) const FORBIDDEN: u8 = 5;

/// Byte class table: one lookup per byte in the hot loop of both the fast scan and [`check`].
pub(crate) static CLASS: [u8; 256] = {
    let mut t = [PLAIN; 256];
    let mut b = 0x01;
    while b <= 0x1F {
        t[b] = CONTROL;
        b += 1;
    }
    t[0] = NUL;
    t[b'/' as usize] = SEPARATOR;
    t[b'\\' as usize] = SEPARATOR;
    t[b':' as usize] = COLON;
    t[b'<' as usize] = FORBIDDEN;
    t[b'>' as usize] = FORBIDDEN;
    t[b'"' as usize] = FORBIDDEN;
    t[b'|' as usize] = FORBIDDEN;
    t[b'?' as usize] = FORBIDDEN;
    t[b'*' as usize] = FORBIDDEN;
    t
};

/// Check one kept segment (not empty, not `.`; NUL was already excluded for the whole input):
/// the reference rules, run on rejected inputs to name the reason.
pub(crate) fn check(seg: &[u8]) -> Result<(), PathErrorReason> {
    if seg == b".." {
        return Err(PathErrorReason::Parent);
    }
    if seg.len() > MAX_SEGMENT_BYTES {
        return Err(PathErrorReason::SegmentTooLong);
    }
    for &b in seg {
        match CLASS[b as usize] {
            CONTROL => return Err(PathErrorReason::ControlCharacter),
            COLON => return Err(PathErrorReason::Colon),
            FORBIDDEN => return Err(PathErrorReason::ForbiddenCharacter),
            // A separator cannot occur inside a segment, and NUL was excluded for the whole
            // input before any segment is checked.
            _ => {}
        }
    }
    if let Some(b'.' | b' ') = seg.last() {
        return Err(PathErrorReason::TrailingDotOrSpace);
    }
    if is_reserved(seg) {
        return Err(PathErrorReason::ReservedName);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use PathErrorReason::*;

    #[test]
    fn check_accepts_ordinary_names() {
        for s in [
            "a",
            "a.b",
            ".hidden",
            "..hidden",
            "a..b",
            "a b",
            " a",
            "CONSOLE",
            "con_",
            "COM10",
            "~",
            "日本語",
            "émoji😀",
            "a-b_c+d=e",
            "#",
            "%",
            "[x]",
            "{y}",
            "a'b",
            "\u{7f}",
            "\u{80}",
            "\u{a0}",
        ] {
            assert_eq!(check(s.as_bytes()), Ok(()), "{s:?}");
        }
    }

    #[test]
    fn check_rejects_parent() {
        assert_eq!(check(b".."), Err(Parent));
    }

    #[test]
    fn check_segment_length_at_n_and_n_plus_one() {
        let n = "a".repeat(MAX_SEGMENT_BYTES);
        assert_eq!(check(n.as_bytes()), Ok(()));
        let n1 = "a".repeat(MAX_SEGMENT_BYTES + 1);
        assert_eq!(check(n1.as_bytes()), Err(SegmentTooLong));
    }

    #[test]
    fn check_segment_length_counts_utf8_bytes() {
        // 85 three-byte characters are exactly 255 bytes; 86 are 258.
        let ok = "€".repeat(85);
        assert_eq!(ok.len(), 255);
        assert_eq!(check(ok.as_bytes()), Ok(()));
        let long = "€".repeat(86);
        assert_eq!(check(long.as_bytes()), Err(SegmentTooLong));
        // 253 ASCII + a two-byte character = 255; 254 + two bytes = 256.
        let ok = format!("{}é", "a".repeat(253));
        assert_eq!(ok.len(), 255);
        assert_eq!(check(ok.as_bytes()), Ok(()));
        let long = format!("{}é", "a".repeat(254));
        assert_eq!(long.len(), 256);
        assert_eq!(check(long.as_bytes()), Err(SegmentTooLong));
        // 251 ASCII + a four-byte character = 255; 252 + four bytes = 256.
        let ok = format!("{}😀", "a".repeat(251));
        assert_eq!(check(ok.as_bytes()), Ok(()));
        let long = format!("{}😀", "a".repeat(252));
        assert_eq!(check(long.as_bytes()), Err(SegmentTooLong));
    }

    #[test]
    fn check_rejects_every_control_character() {
        for b in 0x01u8..=0x1F {
            let s = [b'a', b, b'b'];
            assert_eq!(check(&s), Err(ControlCharacter), "byte {b:#04x}");
        }
    }

    #[test]
    fn check_rejects_colon_and_forbidden_characters() {
        for s in ["a.txt:secret", "a.txt::$DATA", ":", "C:", "a:"] {
            assert_eq!(check(s.as_bytes()), Err(Colon), "{s:?}");
        }
        for c in ['<', '>', '"', '|', '?', '*'] {
            let s = format!("a{c}b");
            assert_eq!(check(s.as_bytes()), Err(ForbiddenCharacter), "{s:?}");
            assert_eq!(
                check(c.to_string().as_bytes()),
                Err(ForbiddenCharacter),
                "{c:?}"
            );
        }
    }

    #[test]
    fn check_reports_the_first_offending_character() {
        assert_eq!(check(b"a:b?"), Err(Colon));
        assert_eq!(check(b"a?b:"), Err(ForbiddenCharacter));
        assert_eq!(check(b"a\x01b:"), Err(ControlCharacter));
    }

    #[test]
    fn check_rejects_trailing_dot_or_space() {
        for s in ["a.", "a ", "...", "a. ", "a .", "   ", ". ", ".. ", "con. "] {
            assert_eq!(check(s.as_bytes()), Err(TrailingDotOrSpace), "{s:?}");
        }
    }

    #[test]
    fn check_rejects_reserved_names() {
        for s in [
            "con",
            "Con.txt",
            "nul .tar.gz",
            "LPT¹",
            "com0",
            "CONIN$",
            "conout$.log",
        ] {
            assert_eq!(check(s.as_bytes()), Err(ReservedName), "{s:?}");
        }
    }

    #[test]
    fn check_length_wins_over_characters() {
        let s = format!("{}:", "a".repeat(MAX_SEGMENT_BYTES));
        assert_eq!(check(s.as_bytes()), Err(SegmentTooLong));
    }
}
