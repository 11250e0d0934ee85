//! Fuzz `confine_pathgrammar::normalize`. Oracle: whatever is accepted has only clean `/`-separated
//! segments, is a fixed point (normalizing it again returns it unchanged), and, joined beneath a
//! root, never leaves it when the components are walked lexically. Any input may be rejected;
//! none may panic.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run normalize -- -max_total_time=60`

#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(p) = confine_pathgrammar::normalize(input) else {
        return;
    };
    let s = p.as_str();
    assert!(!s.is_empty() && !s.contains('\\') && !s.contains('\0'));
    for seg in p.segments() {
        assert!(
            !seg.is_empty() && seg != "." && seg != "..",
            "bad segment {seg:?} in {s:?}"
        );
    }
    assert_eq!(
        confine_pathgrammar::normalize(s).as_ref(),
        Ok(&p),
        "not a fixed point"
    );

    let root = Path::new("/fuzz/root");
    let joined = root.join(s);
    let rest = joined.strip_prefix(root).expect("join re-rooted the path");
    let mut depth = 0usize;
    for c in rest.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth = depth.checked_sub(1).expect("left the root"),
            Component::RootDir | Component::Prefix(_) => panic!("re-rooted: {s:?}"),
        }
    }
    assert!(depth > 0);
});
