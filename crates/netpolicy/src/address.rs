//! Address classes the proxy refuses after resolving a name.
//!
//! An address is refused when it leads inside: to this machine, to the network it sits on,
//! or to the cloud's metadata service that hands out the machine's credentials. IPv6 forms
//! that carry an IPv4 address (mapped, compatible, translated, NAT64, 6to4, Teredo) are
//! judged by the IPv4 address they carry, because a translator or relay on the way turns
//! them into that address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::entry::canonical_ip;

/// The cloud metadata services' addresses: AWS, GCP and most others (169.254.169.254), ECS
/// task metadata (169.254.170.2), Alibaba Cloud (100.100.100.200), Azure's wire server
/// (168.63.129.16), and AWS's IPv6 metadata endpoint (fd00:ec2::254).
const METADATA_V4: [Ipv4Addr; 4] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
];
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

const METADATA: &str = "resolves to a cloud metadata address";

/// Why an address is refused, or `None` when it is reachable.
///
/// Refused: the cloud metadata addresses ([`METADATA_V4`], fd00:ec2::254, named as such),
/// loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16 and
/// fe80::/10), site-local (fec0::/10, deprecated but still routed inside some networks),
/// unspecified (0.0.0.0/8 and `::`), multicast and the broadcast address. An IPv6 address
/// that carries an IPv4 address is judged by the IPv4 address it carries (and refused with
/// that address's reason): IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated
/// `::ffff:0:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64's well-known `64:ff9b::/96` (the
/// last 32 bits), its local-use `64:ff9b:1::/48` (every place RFC 6052 may put the IPv4
/// address for a prefix of 48, 56, 64 or 96 bits: the prefix length is the local network's
/// choice, which the proxy cannot know; a candidate in 0.0.0.0/8 is the zero padding of
/// another length and is not judged), 6to4 `2002::/16` (bits 16 to 48) and Teredo
/// `2001::/32` (both the server, bits 32 to 64, and the client, the last 32 bits inverted:
/// either leading inside refuses the address).
///
/// Documentation and shared ranges (100.64/10, 198.18/15, 192.0.2/24, …) are not refused:
/// some networks route their registries through them.
pub(crate) fn refusal(addr: IpAddr) -> Option<&'static str> {
    match canonical_ip(addr) {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(v4: Ipv4Addr) -> Option<&'static str> {
    if METADATA_V4.contains(&v4) {
        Some(METADATA)
    } else if v4.is_loopback() {
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

fn refusal_v6(v6: Ipv6Addr) -> Option<&'static str> {
    let first = v6.segments()[0];
    if v6 == METADATA_V6 {
        Some(METADATA)
    } else if v6.is_loopback() {
        Some("resolves to a loopback address")
    } else if v6.is_unspecified() {
        Some("resolves to an unspecified address")
    } else if first & 0xfe00 == 0xfc00 {
        Some("resolves to a private address")
    } else if first & 0xffc0 == 0xfe80 {
        Some("resolves to a link-local address")
    } else if first & 0xffc0 == 0xfec0 {
        Some("resolves to a site-local address")
    } else if v6.is_multicast() {
        Some("resolves to a multicast address")
    } else {
        carried_v4(v6)
            .iter()
            .flatten()
            .find_map(|v4| refusal_v4(*v4))
    }
}

/// The IPv4 addresses an IPv6 address carries (at most four candidates; `None` fills the
/// rest), by the forms [`refusal`] names.
fn carried_v4(v6: Ipv6Addr) -> [Option<Ipv4Addr>; 4] {
    let bits = u128::from(v6);
    let v4_at = |shift: u32| Ipv4Addr::from((bits >> shift) as u32);
    let last = v4_at(0);
    let s = v6.segments();
    let mut found = [None; 4];
    if bits >> 32 == 0 || bits >> 32 == 0xffff || bits >> 32 == 0xffff_0000 {
        // IPv4-compatible ::a.b.c.d, mapped ::ffff:a.b.c.d, translated ::ffff:0:a.b.c.d.
        found[0] = Some(last);
    } else if bits >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        // NAT64, the well-known prefix 64:ff9b::/96.
        found[0] = Some(last);
    } else if s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 0x0001 {
        // NAT64, the local-use prefix 64:ff9b:1::/48: RFC 6052's places for a prefix of
        // 48 bits (bits 48..64 and 72..88), 56 (bits 56..64 and 72..96), 64 (bits 72..104)
        // and 96 (the last 32 bits); bits 64..72 are always zero there.
        let octet = |i: u32| (bits >> (120 - 8 * i)) as u8;
        let candidates = [
            Ipv4Addr::new(octet(6), octet(7), octet(9), octet(10)),
            Ipv4Addr::new(octet(7), octet(9), octet(10), octet(11)),
            Ipv4Addr::new(octet(9), octet(10), octet(11), octet(12)),
            last,
        ];
        for (slot, v4) in found.iter_mut().zip(candidates) {
            // The zero padding of another prefix length, not an address a translator uses.
            if v4.octets()[0] != 0 {
                *slot = Some(v4);
            }
        }
    } else if s[0] == 0x2002 {
        // 6to4: the IPv4 address of the relay's far end, bits 16..48.
        found[0] = Some(v4_at(80));
    } else if s[0] == 0x2001 && s[1] == 0 {
        // Teredo: the server in bits 32..64, the client's address inverted in the last 32.
        found[0] = Some(v4_at(64));
        found[1] = Some(!last);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `addr` refused with a reason ending in `class address`, or reachable (`None`).
    fn check(cases: &[(&str, Option<&str>)]) {
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

    /// Every class at its edges: the first and last address inside, the neighbours outside.
    #[test]
    fn refusal_classifies_every_range_at_its_edges() {
        check(&[
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
            ("169.254.169.253", Some("link-local")),
            ("169.254.0.0", Some("link-local")),
            ("169.254.255.255", Some("link-local")),
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
            ("::", Some("unspecified")),
            ("fc00::", Some("private")),
            ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some("private")),
            ("fe00::", None),
            ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
            ("fe80::", Some("link-local")),
            (
                "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                Some("link-local"),
            ),
            ("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
            ("ff02::1", Some("multicast")),
            ("2001:db8::1", None),
            ("2606:4700::1", None),
        ]);
    }

    /// The metadata addresses, named as such, and their neighbours (which fall to their own
    /// class, or none).
    #[test]
    fn cloud_metadata_addresses_are_refused_as_such() {
        check(&[
            ("169.254.169.254", Some("cloud metadata")),
            ("169.254.169.255", Some("link-local")),
            ("169.254.170.2", Some("cloud metadata")),
            ("169.254.170.3", Some("link-local")),
            ("100.100.100.200", Some("cloud metadata")),
            ("100.100.100.199", None),
            ("100.100.100.201", None),
            ("168.63.129.16", Some("cloud metadata")),
            ("168.63.129.15", None),
            ("168.63.129.17", None),
            ("fd00:ec2::254", Some("cloud metadata")),
            ("fd00:ec2::255", Some("private")),
        ]);
    }

    /// fec0::/10, at both edges.
    #[test]
    fn site_local_is_refused() {
        check(&[
            ("fec0::", Some("site-local")),
            ("fec0::1", Some("site-local")),
            (
                "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                Some("site-local"),
            ),
            ("ff00::", Some("multicast")),
        ]);
    }

    /// Each IPv6 form that carries an IPv4 address, judged by the address it carries, at the
    /// edges of the form's prefix.
    #[test]
    fn ipv6_forms_carrying_ipv4_are_judged_by_the_ipv4_address() {
        check(&[
            // IPv4-mapped, ::ffff:0:0/96.
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:10.1.2.3", Some("private")),
            ("::ffff:169.254.169.254", Some("cloud metadata")),
            ("::ffff:8.8.8.8", None),
            // IPv4-translated, ::ffff:0:0:0/96.
            ("::ffff:0:127.0.0.1", Some("loopback")),
            ("::ffff:0:100.100.100.200", Some("cloud metadata")),
            ("::ffff:0:8.8.8.8", None),
            ("::1:ffff:0:7f00:1", None),
            // IPv4-compatible, ::/96 (:: and ::1 are IPv6's own).
            ("::127.0.0.1", Some("loopback")),
            ("::0.0.0.2", Some("unspecified")),
            ("::10.0.0.1", Some("private")),
            ("::168.63.129.16", Some("cloud metadata")),
            ("::255.255.255.255", Some("broadcast")),
            ("::8.8.8.8", None),
            ("::1:0:0", None),
            ("::1:7f00:1", None),
            // NAT64, the well-known 64:ff9b::/96.
            ("64:ff9b::7f00:1", Some("loopback")),
            ("64:ff9b::a9fe:a9fe", Some("cloud metadata")),
            ("64:ff9b::c0a8:1", Some("private")),
            ("64:ff9b::808:808", None),
            ("64:ff9b::1:7f00:1", None),
            ("64:ff9a:ffff:ffff:ffff:ffff:7f00:1", None),
            // NAT64, the local-use 64:ff9b:1::/48, at each prefix length a translator uses.
            ("64:ff9b:1::7f00:1", Some("loopback")),
            ("64:ff9b:1:0:a:0:100:0", Some("private")),
            ("64:ff9b:1:a00:0:100::", Some("private")),
            ("64:ff9b:1:a9:fe:a9fe:0:0", Some("cloud metadata")),
            ("64:ff9b:1:ffff:ff:ffff:ffff:ffff", Some("broadcast")),
            ("64:ff9b:1::808:808", None),
            ("64:ff9b:1:808:8:800::", None),
            ("64:ff9b:1::", None),
            ("64:ff9b:2::7f00:1", None),
            ("64:ff9b:0:ffff:ffff:ffff:7f00:1", None),
            // 6to4, 2002::/16, the IPv4 address in bits 16..48.
            ("2002:7f00:1::", Some("loopback")),
            ("2002:a9fe:a9fe::1", Some("cloud metadata")),
            ("2002:a00:1:ffff:ffff:ffff:ffff:ffff", Some("private")),
            ("2002:808:808::", None),
            ("2003:7f00:1::", None),
            ("2001:ffff:7f00:1::", None),
            // Teredo, 2001::/32: the server in bits 32..64, the client inverted at the end.
            ("2001:0:7f00:1::", Some("loopback")),
            ("2001:0:808:808::80ff:fefe", Some("loopback")),
            ("2001:0:808:808::f5ff:fffe", Some("private")),
            ("2001:0:808:808::f7f7:f7f7", None),
            ("2001:1:7f00:1::80ff:fefe", None),
        ]);
    }
}
