//! Windows reserved device names.
//!
//! A segment is reserved when its *stem*, the part before the first `.` with trailing spaces
//! removed, equals one of these names, ignoring ASCII case:
//! `CON PRN AUX NUL`, `COM0`..`COM9`, `LPT0`..`LPT9`, `COM¹ COM² COM³ LPT¹ LPT² LPT³`
//! (superscript digits U+00B9, U+00B2, U+00B3), `CONIN$`, `CONOUT$`.
//!
//! So `con`, `Con.txt`, `nul .tar.gz`, `LPT¹` and `conout$.log` are reserved; `CONSOLE`, `con_`,
//! `COM10`, `.con` (empty stem) and ` con` (a leading space is kept) are not. Only ASCII letters
//! fold: `ＣＯＮ` (fullwidth) is an ordinary name.

/// Whether `segment` (one path segment, no separator) is a reserved device name.
#[inline]
pub(crate) fn is_reserved(segment: &[u8]) -> bool {
    // Every reserved name starts with one of these letters: most segments leave here.
    match segment.first() {
        Some(b'c' | b'C' | b'p' | b'P' | b'a' | b'A' | b'n' | b'N' | b'l' | b'L') => {}
        _ => return false,
    }
    let stem = match segment.iter().position(|&b| b == b'.') {
        Some(dot) => &segment[..dot],
        None => segment,
    };
    let mut len = stem.len();
    while len > 0 && stem[len - 1] == b' ' {
        len -= 1;
    }
    let stem = &stem[..len];
    match stem.len() {
        3 => {
            stem.eq_ignore_ascii_case(b"CON")
                || stem.eq_ignore_ascii_case(b"PRN")
                || stem.eq_ignore_ascii_case(b"AUX")
                || stem.eq_ignore_ascii_case(b"NUL")
        }
        4 => is_com_or_lpt(&stem[..3]) && stem[3].is_ascii_digit(),
        // COM¹ COM² COM³ LPT¹ LPT² LPT³: the superscript is two UTF-8 bytes, C2 B9 / B2 / B3.
        5 => is_com_or_lpt(&stem[..3]) && stem[3] == 0xC2 && matches!(stem[4], 0xB9 | 0xB2 | 0xB3),
        6 => stem.eq_ignore_ascii_case(b"CONIN$"),
        7 => stem.eq_ignore_ascii_case(b"CONOUT$"),
        _ => false,
    }
}

fn is_com_or_lpt(three: &[u8]) -> bool {
    three.eq_ignore_ascii_case(b"COM") || three.eq_ignore_ascii_case(b"LPT")
}

#[cfg(test)]
mod tests {
    use super::is_reserved;

    /// Every reserved stem of the grammar, in upper case.
    fn all_reserved() -> Vec<String> {
        let mut names: Vec<String> = ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for prefix in ["COM", "LPT"] {
            for d in '0'..='9' {
                names.push(format!("{prefix}{d}"));
            }
            for sup in ['¹', '²', '³'] {
                names.push(format!("{prefix}{sup}"));
            }
        }
        names
    }

    fn variants(name: &str) -> Vec<String> {
        let lower = name.to_ascii_lowercase();
        let mut mixed = String::new();
        for (i, c) in name.chars().enumerate() {
            if i % 2 == 0 {
                mixed.push(c.to_ascii_lowercase());
            } else {
                mixed.push(c);
            }
        }
        let mut out = Vec::new();
        for base in [name.to_owned(), lower, mixed] {
            out.push(base.clone());
            out.push(format!("{base}.txt"));
            out.push(format!("{base}.tar.gz"));
            out.push(format!("{base} .txt"));
            out.push(format!("{base}   .txt"));
            out.push(format!("{base} "));
            out.push(format!("{base}."));
            out.push(format!("{base}.."));
        }
        out
    }

    #[test]
    fn is_reserved_every_name_with_case_extension_and_space_variants() {
        let names = all_reserved();
        assert_eq!(names.len(), 4 + 2 + 2 * 13);
        for name in &names {
            for v in variants(name) {
                assert!(is_reserved(v.as_bytes()), "{v:?} should be reserved");
            }
        }
    }

    #[test]
    fn is_reserved_false_for_look_alikes() {
        for s in [
            "CONSOLE",
            "con_",
            "_con",
            "COM10",
            "LPT10",
            "COM",
            "LPT",
            "COMA",
            "LPTx",
            "CO",
            "CONIN",
            "CONOUT",
            "CONIN$$",
            "CONOUT$X",
            ".con",
            " con",
            "a.con",
            "con-1.txt",
            "ＣＯＮ",
            "COM⁴",
            "LPT⁰",
            "COM½",
            "a.b",
            ".hidden",
            "aux1",
            "nul_",
            "prn2",
            "conin",
            "x",
        ] {
            assert!(!is_reserved(s.as_bytes()), "{s:?} should not be reserved");
        }
    }

    #[test]
    fn is_reserved_judges_the_stem_before_the_first_dot() {
        assert!(is_reserved(b"con.a.b.c"));
        assert!(!is_reserved(b"a.con.txt"));
        assert!(!is_reserved(b"a.con"));
    }
}
