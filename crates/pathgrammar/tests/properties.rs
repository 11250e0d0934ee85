//! Property tests of the grammar: what is accepted is clean, a fixed point, and stays beneath any
//! root; random inputs never panic and every rejection carries the stable token.

use std::path::{Component, Path};

use confine_pathgrammar::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, is_normal, normalize};
use proptest::prelude::*;

/// Segments chosen to hit every rule and its near misses.
fn nasty_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just("...".to_owned()),
        Just(". ".to_owned()),
        Just(".. ".to_owned()),
        Just("a".to_owned()),
        Just(".hidden".to_owned()),
        Just("a.b".to_owned()),
        Just("C:".to_owned()),
        Just("c:x".to_owned()),
        Just("a.txt:s".to_owned()),
        Just("?".to_owned()),
        Just("*".to_owned()),
        Just("CON".to_owned()),
        Just("con .txt".to_owned()),
        Just("COM¹".to_owned()),
        Just("lpt9".to_owned()),
        Just("CONSOLE".to_owned()),
        Just("COM10".to_owned()),
        Just("conin$".to_owned()),
        Just("~".to_owned()),
        Just("\u{0}".to_owned()),
        Just("\u{1}".to_owned()),
        Just("a ".to_owned()),
        Just(" a".to_owned()),
        Just("日本".to_owned()),
        Just("x".repeat(MAX_SEGMENT_BYTES)),
        Just("x".repeat(MAX_SEGMENT_BYTES + 1)),
        "[a-zA-Z0-9._ $~-]{1,12}",
        "\\PC{0,8}",
    ]
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("/"), Just("\\"), Just("//"), Just("\\\\"), Just("/\\")]
}

/// A path assembled from nasty segments and mixed separators, sometimes with a leading one.
fn nasty_path() -> impl Strategy<Value = String> {
    (
        prop::option::of(separator()),
        prop::collection::vec((nasty_segment(), separator()), 0..8),
        nasty_segment(),
    )
        .prop_map(|(lead, parts, last)| {
            let mut s = lead.unwrap_or("").to_owned();
            for (seg, sep) in parts {
                s.push_str(&seg);
                s.push_str(sep);
            }
            s.push_str(&last);
            s
        })
}

fn any_input() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => nasty_path(),
        2 => any::<String>(),
        1 => "[a-c./\\\\:. ]{0,24}",
    ]
}

/// Join `rel` beneath `root` and walk the components lexically: the depth below the root never
/// goes negative and nothing re-roots the path.
fn stays_beneath(root: &Path, rel: &str) -> bool {
    let joined = root.join(rel);
    let Ok(rest) = joined.strip_prefix(root) else {
        return false;
    };
    let mut depth: usize = 0;
    for c in rest.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    depth > 0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn accepted_has_no_empty_dot_or_parent_segment_and_no_backslash(input in any_input()) {
        if let Ok(p) = normalize(&input) {
            let s = p.as_str();
            prop_assert!(!s.is_empty());
            prop_assert!(!s.contains('\\'));
            prop_assert!(!s.contains('\0'));
            prop_assert!(!s.starts_with('/'));
            for seg in p.segments() {
                prop_assert!(!seg.is_empty() && seg != "." && seg != "..", "segment {:?}", seg);
                prop_assert!(seg.len() <= MAX_SEGMENT_BYTES);
                prop_assert!(!seg.contains(':'));
            }
            prop_assert!(s.len() <= input.len());
            prop_assert!(input.len() <= MAX_PATH_BYTES);
        }
    }

    #[test]
    fn is_normal_is_accepted_unchanged(input in any_input()) {
        let unchanged = normalize(&input).is_ok_and(|p| p.as_str() == input);
        prop_assert_eq!(is_normal(&input), unchanged, "{:?}", input);
    }

    #[test]
    fn normalizing_twice_changes_nothing(input in any_input()) {
        if let Ok(p) = normalize(&input) {
            let again = normalize(p.as_str());
            prop_assert_eq!(again.as_ref(), Ok(&p));
        }
    }

    #[test]
    fn accepted_joins_beneath_the_root(input in any_input()) {
        if let Ok(p) = normalize(&input) {
            for root in ["/srv/ws", "/", "relative/root"] {
                prop_assert!(stays_beneath(Path::new(root), p.as_str()), "{:?} under {}", p, root);
            }
        }
    }

    #[test]
    fn random_inputs_never_panic_and_reject_with_the_stable_token(input in any_input()) {
        match normalize(&input) {
            Ok(p) => prop_assert!(p.depth() >= 1),
            Err(e) => {
                prop_assert_eq!(e.code(), "INVALID_RELATIVE_PATH");
                prop_assert!(!e.reason().code().is_empty());
            }
        }
    }

    #[test]
    fn clean_inputs_are_accepted_unchanged(
        segs in prop::collection::vec("[a-z0-9_-]{1,10}(\\.[a-z0-9]{1,4})?", 1..6)
    ) {
        // Names of lower-case letters with a dash or underscore cannot be reserved (no `$`, no
        // superscript, and a 3- or 4-letter stem such as `con` is excluded below).
        prop_assume!(segs.iter().all(|s| {
            let stem = s.split('.').next().unwrap_or("");
            !matches!(stem, "con" | "prn" | "aux" | "nul")
                && !(stem.len() == 4
                    && (stem.starts_with("com") || stem.starts_with("lpt"))
                    && stem.as_bytes()[3].is_ascii_digit())
        }));
        let input = segs.join("/");
        let p = normalize(&input);
        prop_assert_eq!(p.map(|p| p.into_string()), Ok(input));
    }

    #[test]
    fn dot_and_empty_segments_and_backslashes_do_not_change_the_result(
        segs in prop::collection::vec("[a-z]{1,8}", 1..6),
        noise in prop::collection::vec(prop_oneof![Just("/"), Just("\\"), Just("/./"), Just("\\.\\"), Just("//")], 5),
    ) {
        let plain = segs.join("/");
        let mut noisy = String::from("./");
        for (i, seg) in segs.iter().enumerate() {
            if i > 0 {
                noisy.push_str(noise[i % noise.len()]);
            }
            noisy.push_str(seg);
        }
        noisy.push('/');
        let a = normalize(&plain).map(|p| p.into_string());
        let b = normalize(&noisy).map(|p| p.into_string());
        prop_assert_eq!(a, b);
    }
}

#[test]
fn stays_beneath_detects_escapes() {
    // The oracle itself must be able to fail, or the property above proves nothing.
    let root = Path::new("/srv/ws");
    assert!(stays_beneath(root, "a/b"));
    assert!(!stays_beneath(root, "../x"));
    assert!(!stays_beneath(root, "a/../../x"));
    assert!(!stays_beneath(root, "/etc/passwd"));
    assert!(!stays_beneath(root, ""));
}
