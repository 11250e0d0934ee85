//! `--allow-net` entries: every form, the malformed ones, case and trailing dot, ports.

use confine_netpolicy::{AllowList, Entry, EntryError};

fn host(name: &str, port: Option<u16>) -> Entry {
    Entry::Host {
        name: name.into(),
        port,
    }
}

#[test]
fn build_parses_every_form() {
    let list = AllowList::build(&[
        "registry.example.test",
        "Mirror.Example.TEST.:8443",
        "*.pkg.example.test",
        "*.cdn.example.test:8080",
        "127.0.0.1",
        "127.0.0.1:8080",
        "[::1]:8080",
        "::1",
        "[2001:db8::5]",
        "[::ffff:192.0.2.7]:81",
    ])
    .unwrap();
    let ip = |a: &str, port| Entry::Ip {
        addr: a.parse().unwrap(),
        port,
    };
    assert_eq!(
        list.entries(),
        [
            host("registry.example.test", None),
            host("mirror.example.test", Some(8443)),
            Entry::Suffix {
                domain: "pkg.example.test".into(),
                port: None
            },
            Entry::Suffix {
                domain: "cdn.example.test".into(),
                port: Some(8080)
            },
            ip("127.0.0.1", None),
            ip("127.0.0.1", Some(8080)),
            ip("::1", Some(8080)),
            ip("::1", None),
            ip("2001:db8::5", None),
            // An IPv4-mapped literal is its IPv4 address.
            ip("192.0.2.7", Some(81)),
        ]
    );
    assert!(list.presets_resolved().is_empty());
}

#[test]
fn build_refuses_malformed_entries_naming_them() {
    for bad in [
        "",
        "a b",
        "host:",
        "host:0",
        "host:65536",
        "host:http",
        "host:+80",
        "*",
        "*.",
        "*.a b",
        "**.example.test",
        "a.*.example.test",
        "[::1",
        "[::1]x",
        "[::1]:",
        "[1.2.3.4]:80",
        "[example.test]:80",
        "a..b",
        ".example.test",
        "-a.example.test",
        "a-.example.test",
        "1.2.3",
        "999.1.1.1",
        "http://example.test",
        "example.test/path",
        "user@example.test",
        "x:1:2",
        "ex\u{e4}mple.test",
        "@",
    ] {
        let err = AllowList::build(&[bad]).expect_err(bad);
        assert!(matches!(err, EntryError::Malformed(_)), "{bad}: {err:?}");
        let line = err.to_string();
        assert_eq!(
            line,
            format!("--allow-net '{bad}': not a host, *.domain, IP literal or preset")
        );
        assert!(!line.contains('\n'));
    }
    let err = AllowList::build(&["@nope"]).unwrap_err();
    assert!(matches!(err, EntryError::UnknownPreset(_)));
    assert!(
        err.to_string()
            .starts_with("--allow-net '@nope': unknown preset")
    );
}

/// A label of 63 bytes and a name of 253 are names; 64 and 254 are not.
#[test]
fn build_bounds_labels_at_63_and_names_at_253() {
    let label = |n: usize| "a".repeat(n);
    AllowList::build(&[format!("{}.test", label(63))]).unwrap();
    AllowList::build(&[format!("{}.test", label(64))]).unwrap_err();
    // 4 labels of 62 and one of 2 with their dots: 4 * 63 + 2 = 254 bytes; 253 without the last byte.
    let name254 = format!("{0}.{0}.{0}.{0}.ab", label(62));
    assert_eq!(name254.len(), 254);
    let name253 = &name254[..253];
    AllowList::build(&[name253]).unwrap();
    AllowList::build(&[name254.as_str()]).unwrap_err();
    // A trailing dot does not count.
    AllowList::build(&[format!("{name253}.")]).unwrap();
}

#[test]
fn allows_compares_names_case_insensitively_without_trailing_dot() {
    let list = AllowList::build(&["Registry.Example.Test."]).unwrap();
    for asked in [
        "registry.example.test",
        "REGISTRY.EXAMPLE.TEST",
        "registry.example.test.",
    ] {
        assert!(list.allows(asked, 443), "{asked}");
    }
    assert!(!list.allows("registry.example.test..", 443));
    assert!(!list.allows("xregistry.example.test", 443));
    assert!(!list.allows("sub.registry.example.test", 443));
    assert!(!list.allows("example.test", 443));
}

#[test]
fn allows_without_a_port_means_443_and_80_only() {
    let list =
        AllowList::build(&["a.example.test", "b.example.test:8443", "*.c.example.test"]).unwrap();
    assert!(list.allows("a.example.test", 443));
    assert!(list.allows("a.example.test", 80));
    assert!(!list.allows("a.example.test", 8443));
    assert!(!list.allows("a.example.test", 22));
    assert!(list.allows("b.example.test", 8443));
    assert!(!list.allows("b.example.test", 443));
    assert!(!list.allows("b.example.test", 80));
    assert!(list.allows("x.c.example.test", 80));
    assert!(!list.allows("x.c.example.test", 81));
}

#[test]
fn allows_a_suffix_below_its_domain_not_the_domain_itself() {
    let list = AllowList::build(&["*.d.test"]).unwrap();
    assert!(list.allows("a.d.test", 443));
    assert!(list.allows("b.a.d.test", 443));
    assert!(list.allows("A.D.TEST.", 443));
    assert!(!list.allows("d.test", 443));
    assert!(!list.allows("xd.test", 443));
    assert!(!list.allows("a.d.test.evil.test", 443));
}

#[test]
fn allows_ip_entries_by_address_only() {
    let list = AllowList::build(&["127.0.0.1:8080", "::1"]).unwrap();
    assert!(list.allows("127.0.0.1", 8080));
    assert!(!list.allows("127.0.0.1", 8081));
    assert!(!list.allows("127.0.0.2", 8080));
    assert!(list.allows("::1", 443));
    assert!(list.allows("[::1]", 80));
    assert!(list.allows("[::ffff:127.0.0.1]", 8080));
    // A name is not an address, whatever it resolves to.
    assert!(!list.allows("localhost", 8080));
}

#[test]
fn empty_allows_nothing() {
    let list = AllowList::empty();
    assert!(list.entries().is_empty());
    assert!(!list.allows("localhost", 80));
    assert!(!list.allows("127.0.0.1", 443));
}
