//! Address classes the proxy refuses after resolving a name.

use std::net::IpAddr;

use crate::entry::canonical_ip;

/// Why an address is refused, or `None` when it is reachable. Loopback, private (10/8,
/// 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16, where the cloud metadata
/// services answer, and fe80::/10), unspecified (0.0.0.0/8 and `::`), multicast and the
/// broadcast address are refused; documentation and shared ranges (100.64/10, 198.18/15,
/// 192.0.2/24, …) are not: some networks route their registries through them. An
/// IPv4-mapped IPv6 address is classified as its IPv4 address.
pub(crate) fn refusal(addr: IpAddr) -> Option<&'static str> {
    match canonical_ip(addr) {
        IpAddr::V4(v4) => {
            if v4.is_loopback() {
                Some("resolves to a loopback address")
            } else if v4.is_private() {
                Some("resolves to a private address")
            } else if v4.is_link_local() {
                Some("resolves to a link-local address")
            } else if v4.octets()[0] == 0 {
                Some("resolves to an unspecified address")
            } else if v4.is_multicast() {
                Some("resolves to a multicast address")
            } else if v4.is_broadcast() {
                Some("resolves to a broadcast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("resolves to a loopback address")
            } else if v6.is_unspecified() {
                Some("resolves to an unspecified address")
            } else if first & 0xfe00 == 0xfc00 {
                Some("resolves to a private address")
            } else if first & 0xffc0 == 0xfe80 {
                Some("resolves to a link-local address")
            } else if v6.is_multicast() {
                Some("resolves to a multicast address")
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every class at its edges: the first and last address inside, the neighbours outside.
    #[test]
    fn refusal_classifies_every_range_at_its_edges() {
        let cases: &[(&str, Option<&str>)] = &[
            ("127.0.0.1", Some("loopback")),
            ("127.255.255.255", Some("loopback")),
            ("128.0.0.0", None),
            ("126.255.255.255", None),
            ("10.0.0.0", Some("private")),
            ("10.255.255.255", Some("private")),
            ("11.0.0.0", None),
            ("9.255.255.255", None),
            ("172.16.0.0", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("192.168.0.0", Some("private")),
            ("192.168.255.255", Some("private")),
            ("192.169.0.0", None),
            ("192.167.255.255", None),
            ("169.254.169.254", Some("link-local")),
            ("169.254.0.0", Some("link-local")),
            ("169.255.0.0", None),
            ("169.253.255.255", None),
            ("0.0.0.0", Some("unspecified")),
            ("0.255.255.255", Some("unspecified")),
            ("1.0.0.0", None),
            ("224.0.0.0", Some("multicast")),
            ("239.255.255.255", Some("multicast")),
            ("223.255.255.255", None),
            ("255.255.255.255", Some("broadcast")),
            ("255.255.255.254", None),
            // Documentation and shared ranges stay reachable.
            ("192.0.2.1", None),
            ("198.51.100.1", None),
            ("203.0.113.1", None),
            ("100.64.0.1", None),
            ("198.18.0.1", None),
            ("::1", Some("loopback")),
            ("::2", None),
            ("::", Some("unspecified")),
            ("fc00::", Some("private")),
            ("fdff:ffff::1", Some("private")),
            ("fe00::", None),
            ("fbff::1", None),
            ("fe80::1", Some("link-local")),
            ("febf::1", Some("link-local")),
            ("fec0::1", None),
            ("ff02::1", Some("multicast")),
            ("2001:db8::1", None),
            ("2606:4700::1", None),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:10.1.2.3", Some("private")),
            ("::ffff:169.254.169.254", Some("link-local")),
            ("::ffff:8.8.8.8", None),
        ];
        for (addr, class) in cases {
            let got = refusal(addr.parse().unwrap());
            match class {
                Some(c) => assert!(
                    got.is_some_and(|r| r.ends_with(&format!(" {c} address"))),
                    "{addr}: {got:?}"
                ),
                None => assert_eq!(got, None, "{addr}"),
            }
        }
    }
}
