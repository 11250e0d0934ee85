//! [`normalize`]: the whole grammar, in the order its checks run.
//!
//! Two implementations of one rule set: `scan`, a single pass over the bytes that only decides
//! accept or reject (the hot path, no allocation), and `reference`, the rules written family by
//! family in the documented order, which runs only on a rejected input to name its reason. Tests
//! hold them to the same decision on a table of cases and on random inputs.

use crate::error::{PathError, PathErrorReason};
use crate::prefix::{self, is_separator};
use crate::relpath::RelPath;
use crate::reserved::is_reserved;
use crate::segment::{self, CLASS, MAX_SEGMENT_BYTES, PLAIN, SEPARATOR};

/// The most bytes the input may hold, counted on the input as given (before separators are
/// unified or empty and `.` segments dropped): 4,096 bytes are accepted, 4,097 rejected.
pub const MAX_PATH_BYTES: usize = 4096;

/// Validate a model-supplied relative path and return it normalized.
///
/// Both `/` and `\` separate segments. Empty and `.` segments are dropped; the segments that
/// remain are joined by `/`. `a/./b//c.txt` and `a\b\c.txt` both become `a/b/c.txt`.
///
/// # Order of the checks
///
/// The first failing check gives the [`reason`](PathError::reason); a path breaking several
/// rules is rejected whatever the order, which only decides the reason reported.
///
/// 1. On the whole input, as given: empty → `EMPTY`; more than [`MAX_PATH_BYTES`] bytes →
///    `TOO_LONG` (before anything is scanned); any NUL → `NUL`.
/// 2. On the start of the input: a root form (`DEVICE_PREFIX`, `UNC`, `ABSOLUTE`,
///    `DRIVE_ABSOLUTE`, `DRIVE_RELATIVE`; see the order in the `prefix` module docs: device
///    prefixes before UNC before a single leading separator before drive forms).
/// 3. Each segment, left to right; empty and `.` segments are skipped; every other one is checked
///    in this order: `..` → `PARENT`; more than [`MAX_SEGMENT_BYTES`](crate::MAX_SEGMENT_BYTES)
///    bytes → `SEGMENT_TOO_LONG`; the first offending character (`CONTROL_CHARACTER`, `COLON`,
///    `FORBIDDEN_CHARACTER`); a trailing `.` or space → `TRAILING_DOT_OR_SPACE`; a reserved
///    device name → `RESERVED_NAME`.
/// 4. No segment kept → `NO_SEGMENTS` (`.`, `./`, `.//./`).
///
/// # Edge cases, decided
///
/// - The 4,096-byte limit counts the raw input, so `./` padding and doubled separators count
///   toward it; the 255-byte limit counts one segment's UTF-8 bytes.
/// - `.` is dropped only as a whole segment; `.hidden`, `..hidden` and `a..b` are ordinary names,
///   while `...`, `. ` and `.. ` end in a dot or a space and are rejected.
/// - A trailing separator is dropped (`a/b/` becomes `a/b`): the grammar does not record
///   "directory-ness".
/// - `.//server/share` is relative (it starts with `.`), so it becomes `server/share`.
/// - DEL (U+007F), C1 controls (U+0080..U+009F), look-alike slashes (U+2215, U+FF0F), `~`, `$`
///   and `%` are ordinary characters: the contract rejects only what it lists, and none of them
///   separates or escapes on a platform that takes paths as Unicode (Rust uses the wide Windows
///   API).
pub fn normalize(input: &str) -> Result<RelPath, PathError> {
    match scan(input.as_bytes()) {
        Some(already_normal) => Ok(RelPath::from_normalized(build(input, already_normal))),
        None => Err(PathError::new(diagnose(input.as_bytes()))),
    }
}

/// Whether [`normalize`] accepts `input` and returns it unchanged: the check a directory walk
/// makes on every name it lists, in one pass over the bytes and without allocating. True
/// exactly when `normalize(input)` is `Ok(p)` with `p.as_str() == input`.
///
/// ```
/// use confine_pathgrammar::is_normal;
///
/// assert!(is_normal("src/lib.rs"));
/// assert!(!is_normal("src//lib.rs")); // accepted, but normalized to `src/lib.rs`
/// assert!(!is_normal("a/../b")); // refused
/// ```
#[inline]
pub fn is_normal(input: &str) -> bool {
    scan(input.as_bytes()) == Some(true)
}

/// The fast path: accept or reject in one pass over the bytes, without naming a reason.
/// `Some(already_normal)` on acceptance, where `already_normal` says the input needs no rewriting
/// (no `\`, no empty or `.` segment). It must accept exactly what [`reference`] accepts (a unit
/// table and a property test check this); a rejection is then explained by [`diagnose`].
///
/// Every root form either starts with a separator or holds a `:` (which no kept segment may),
/// and NUL is a class of its own, so the root-form and whole-input rules need no separate pass.
#[inline]
fn scan(b: &[u8]) -> Option<bool> {
    let n = b.len();
    if n == 0 || n > MAX_PATH_BYTES || is_separator(b[0]) {
        return None;
    }
    let mut already_normal = true;
    let mut kept = 0usize;
    let mut start = 0usize;
    let mut i = 0usize;
    loop {
        while i < n {
            match CLASS[b[i] as usize] {
                PLAIN => i += 1,
                SEPARATOR => break,
                _ => return None,
            }
        }
        match &b[start..i] {
            [] | [b'.'] => already_normal = false,
            [b'.', b'.'] => return None,
            seg => {
                if seg.len() > MAX_SEGMENT_BYTES
                    || matches!(seg[seg.len() - 1], b'.' | b' ')
                    || is_reserved(seg)
                {
                    return None;
                }
                kept += 1;
            }
        }
        if i == n {
            break;
        }
        if b[i] == b'\\' {
            already_normal = false;
        }
        i += 1;
        start = i;
    }
    (kept > 0).then_some(already_normal)
}

/// The output text: a copy of the input when it is already normal, else the kept segments joined
/// by `/`. Either way, one allocation.
fn build(input: &str, already_normal: bool) -> String {
    if already_normal {
        return input.to_owned();
    }
    let mut out = String::with_capacity(input.len());
    let b = input.as_bytes();
    let mut start = 0;
    for i in 0..=b.len() {
        if i < b.len() && !is_separator(b[i]) {
            continue;
        }
        // Separators are ASCII, so every cut falls on a character boundary.
        let seg = &input[start..i];
        start = i + 1;
        if seg.is_empty() || seg == "." {
            continue;
        }
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(seg);
    }
    out
}

/// Name the reason for a rejection that [`scan`] decided.
#[cold]
fn diagnose(b: &[u8]) -> PathErrorReason {
    match reference(b) {
        Err(reason) => reason,
        // Unreachable while `scan` and `reference` agree (tested); a disagreement still rejects.
        Ok(()) => {
            debug_assert!(false, "scan rejected what the reference rules accept");
            PathErrorReason::NoSegments
        }
    }
}

/// The rules as the contract states them, one family after another in the documented order:
/// slower than [`scan`], and the source of every reason.
fn reference(b: &[u8]) -> Result<(), PathErrorReason> {
    if b.is_empty() {
        return Err(PathErrorReason::Empty);
    }
    if b.len() > MAX_PATH_BYTES {
        return Err(PathErrorReason::TooLong);
    }
    if b.contains(&0) {
        return Err(PathErrorReason::Nul);
    }
    prefix::check(b)?;
    let mut kept = 0usize;
    for seg in b.split(|&c| is_separator(c)) {
        if seg.is_empty() || seg == b"." {
            continue;
        }
        segment::check(seg)?;
        kept += 1;
    }
    if kept == 0 {
        return Err(PathErrorReason::NoSegments);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use PathErrorReason::*;

    fn ok(input: &str) -> String {
        match normalize(input) {
            Ok(p) => p.into_string(),
            Err(e) => panic!("{input:?} rejected: {}", e.reason()),
        }
    }

    fn why(input: &str) -> PathErrorReason {
        match normalize(input) {
            Ok(p) => panic!("{input:?} accepted as {p:?}"),
            Err(e) => {
                assert_eq!(e.code(), "INVALID_RELATIVE_PATH");
                e.reason()
            }
        }
    }

    /// A path of exactly `n` ASCII bytes made of valid segments of at most 201 bytes.
    fn path_of_len(n: usize) -> String {
        let mut s = String::new();
        while s.len() < n {
            if !s.is_empty() {
                s.push('/');
            }
            let room = (n - s.len()).min(200);
            if room == 0 {
                s.pop();
                s.push('b');
                break;
            }
            s.push_str(&"a".repeat(room));
        }
        assert_eq!(s.len(), n);
        s
    }

    #[test]
    fn normalize_drops_empty_and_dot_segments() {
        assert_eq!(ok("a/./b//c.txt"), "a/b/c.txt");
        assert_eq!(ok("./a"), "a");
        assert_eq!(ok("a/"), "a");
        assert_eq!(ok("a/."), "a");
        assert_eq!(ok("././a/././"), "a");
        assert_eq!(ok(".//server/share"), "server/share");
        assert_eq!(ok("a////b"), "a/b");
    }

    #[test]
    fn normalize_accepts_both_separators() {
        assert_eq!(ok(r"a\b\c.txt"), "a/b/c.txt");
        assert_eq!(ok(r"a\/b/\c"), "a/b/c");
        assert_eq!(ok(r".\a"), "a");
    }

    #[test]
    fn normalize_keeps_already_normal_input() {
        for s in [
            "a",
            "a/b/c.txt",
            ".hidden/x",
            "src/lib.rs",
            "日本/語.txt",
            "a b/c d",
        ] {
            assert_eq!(ok(s), s);
        }
    }

    #[test]
    fn normalize_accepts_look_alikes() {
        for s in [
            "CONSOLE",
            "con_",
            "a.b",
            ".hidden",
            "COM10",
            "LPT10",
            "auxiliary.txt",
            "null",
            "a/nul_/b",
            "..hidden",
            "a..b",
            "~",
            "$HOME",
            "%APPDATA%",
            "a\u{7f}",
            "a\u{2215}b",
            "a\u{ff0f}b",
            "x.con",
            ".con",
        ] {
            assert_eq!(ok(s), s, "{s:?}");
        }
    }

    #[test]
    fn normalize_rejects_empty() {
        assert_eq!(why(""), Empty);
    }

    #[test]
    fn normalize_rejects_nul_anywhere() {
        for s in ["\0", "a\0", "\0a", "a/\0/b", "a\0.txt", "/\0"] {
            assert_eq!(why(s), Nul, "{s:?}");
        }
    }

    #[test]
    fn normalize_total_length_at_n_and_n_plus_one() {
        let n = path_of_len(MAX_PATH_BYTES);
        assert_eq!(ok(&n), n);
        let n1 = path_of_len(MAX_PATH_BYTES + 1);
        assert_eq!(why(&n1), TooLong);
    }

    #[test]
    fn normalize_total_length_counts_raw_input() {
        // 4,094 bytes of `./` padding plus `ab`: 4,096 accepted; one more `.` makes 4,097.
        let padded = format!("{}ab", "./".repeat(2047));
        assert_eq!(padded.len(), MAX_PATH_BYTES);
        assert_eq!(ok(&padded), "ab");
        let over = format!("./{padded}");
        assert_eq!(over.len(), MAX_PATH_BYTES + 2);
        assert_eq!(why(&over), TooLong);
        let over = format!("/{padded}");
        assert_eq!(over.len(), MAX_PATH_BYTES + 1);
        assert_eq!(
            why(&over),
            TooLong,
            "the length check runs before the root-form check"
        );
    }

    #[test]
    fn normalize_total_length_with_multibyte_at_the_boundary() {
        // Ends in a three-byte character whose last byte is byte 4,096 (accepted) or 4,097.
        let base = path_of_len(MAX_PATH_BYTES - 4);
        let ok_path = format!("{base}/€");
        assert_eq!(ok_path.len(), MAX_PATH_BYTES);
        assert_eq!(ok(&ok_path), ok_path);
        let long = format!("{base}/a€");
        assert_eq!(long.len(), MAX_PATH_BYTES + 1);
        assert_eq!(why(&long), TooLong);
    }

    #[test]
    fn normalize_segment_length_at_n_and_n_plus_one() {
        let n = format!("d/{}", "x".repeat(MAX_SEGMENT_BYTES));
        assert_eq!(ok(&n), n);
        let n1 = format!("d/{}", "x".repeat(MAX_SEGMENT_BYTES + 1));
        assert_eq!(why(&n1), SegmentTooLong);
        let multi = format!("{}é/d", "x".repeat(MAX_SEGMENT_BYTES - 2));
        assert_eq!(ok(&multi), multi);
        let multi = format!("{}é/d", "x".repeat(MAX_SEGMENT_BYTES - 1));
        assert_eq!(why(&multi), SegmentTooLong);
    }

    #[test]
    fn normalize_rejects_root_forms() {
        let cases = [
            ("/etc/passwd", Absolute),
            ("/", Absolute),
            (r"\Windows\System32", Absolute),
            (r"C:\x", DriveAbsolute),
            ("C:/x", DriveAbsolute),
            ("C:x", DriveRelative),
            ("C:", DriveRelative),
            (r"\\server\share", Unc),
            ("//server/share", Unc),
            (r"\\?\C:\x", DevicePrefix),
            (r"\\.\COM1", DevicePrefix),
            ("//?/C:/x", DevicePrefix),
            ("//./pipe/x", DevicePrefix),
            (r"\??\C:\x", DevicePrefix),
        ];
        for (s, r) in cases {
            assert_eq!(why(s), r, "{s:?}");
        }
    }

    #[test]
    fn normalize_rejects_parent_even_when_it_would_normalize_away() {
        for s in [
            "..",
            "../x",
            "a/../b",
            "a/..",
            r"a\..\b",
            "./..",
            "a/b/c/../../..",
            "x/../x",
        ] {
            assert_eq!(why(s), Parent, "{s:?}");
        }
    }

    #[test]
    fn normalize_rejects_colon_in_any_segment() {
        for s in [
            "a.txt:secret",
            "a.txt::$DATA",
            "a/C:/b",
            "1:x",
            "é:x",
            "a/b:c/d",
            "dir/:x",
        ] {
            assert_eq!(why(s), Colon, "{s:?}");
        }
    }

    #[test]
    fn normalize_rejects_forbidden_and_control_characters() {
        for s in ["a<b", "a>b", "a\"b", "a|b", "a?b", "a*b", "*.txt", "d/?"] {
            assert_eq!(why(s), ForbiddenCharacter, "{s:?}");
        }
        for s in ["a\u{1}", "a/\tb", "a\nb", "\u{1f}", "x/\u{1b}[31m"] {
            assert_eq!(why(s), ControlCharacter, "{s:?}");
        }
    }

    #[test]
    fn normalize_rejects_trailing_dot_or_space() {
        for s in [
            "a.", "a ", "...", "a./b", "a /b", "d/....", ". /x", ".. ", "x/. ",
        ] {
            assert_eq!(why(s), TrailingDotOrSpace, "{s:?}");
        }
    }

    #[test]
    fn normalize_rejects_reserved_names_in_any_segment() {
        for s in [
            "con",
            "CON",
            "Con.txt",
            "nul .tar.gz",
            "LPT¹",
            "a/aux/b",
            "src/prn.c",
            "com1.log",
            "lpt9",
            "COM0",
            "conin$",
            "CONOUT$.x",
            "COM³.txt",
            "d/NUL   .txt",
        ] {
            assert_eq!(why(s), ReservedName, "{s:?}");
        }
    }

    #[test]
    fn normalize_rejects_when_no_segment_remains() {
        for s in [".", "./", ".//./", r".\.\", "./././."] {
            assert_eq!(why(s), NoSegments, "{s:?}");
        }
    }

    #[test]
    fn normalize_reports_checks_in_documented_order() {
        assert_eq!(why("/\0"), Nul, "NUL before root forms");
        assert_eq!(why("/a/../b"), Absolute, "root forms before segments");
        assert_eq!(why("C:/.."), DriveAbsolute);
        assert_eq!(why("ab:c/../d"), Colon, "segments left to right");
        assert_eq!(why("../a:b"), Parent);
        assert_eq!(
            why("con./x"),
            TrailingDotOrSpace,
            "trailing before reserved"
        );
        assert_eq!(why("con/a?"), ReservedName);
    }

    #[test]
    fn scan_agrees_with_reference_rules() {
        let long_seg = "x".repeat(MAX_SEGMENT_BYTES + 1);
        let long_path = "a/".repeat(MAX_PATH_BYTES / 2 + 1);
        let mut inputs = vec![
            "",
            "a",
            "a/b",
            "./a",
            "a/",
            ".",
            "..",
            "a/../b",
            "/a",
            r"\a",
            "//a",
            "C:x",
            "C:/x",
            "a:b",
            "a\0",
            "a\u{1}",
            "a?",
            "a.",
            "a ",
            "con",
            "con.txt",
            "CONSOLE",
            "COM¹",
            "conin$",
            ".hidden",
            "...",
            r"a\b",
            "a//b",
            "a/./b",
            "日本/語",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
        inputs.push(long_seg);
        inputs.push(long_path);
        for s in &inputs {
            assert_eq!(
                scan(s.as_bytes()).is_some(),
                reference(s.as_bytes()).is_ok(),
                "{s:?}"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        #[test]
        fn scan_agrees_with_reference_on_random_inputs(
            s in proptest::prop_oneof![
                "[a-cCoOmMnNlLpPtTuUxX1-3¹$./\\\\: ?<*\\x00\\x01\\x1f]{0,16}",
                proptest::prelude::any::<String>(),
            ]
        ) {
            proptest::prop_assert_eq!(scan(s.as_bytes()).is_some(), reference(s.as_bytes()).is_ok());
        }
    }
}
