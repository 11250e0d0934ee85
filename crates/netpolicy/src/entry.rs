//! One `--allow-net` entry: its grammar and its match against a requested host and port.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One `--allow-net` entry after parsing (presets already expanded by
/// [`AllowList::build`](crate::AllowList::build)).
///
/// Names are kept in lower case without a trailing dot. `port: None` means 443 and 80.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// `HOST` or `HOST:PORT`: exactly that name.
    Host {
        /// The name, lower case, no trailing dot.
        name: String,
        /// The one port allowed, or `None` for 443 and 80.
        port: Option<u16>,
    },
    /// `*.DOMAIN` or `*.DOMAIN:PORT`: every name ending in `.DOMAIN`, not `DOMAIN` itself.
    Suffix {
        /// The domain, lower case, no trailing dot, without the leading `*.`.
        domain: String,
        /// The one port allowed, or `None` for 443 and 80.
        port: Option<u16>,
    },
    /// An IP literal, with or without a port (`127.0.0.1:8080`, `[::1]:8080`, `::1`).
    Ip {
        /// The address (an IPv4-mapped IPv6 literal is kept as its IPv4 address).
        addr: IpAddr,
        /// The one port allowed, or `None` for 443 and 80.
        port: Option<u16>,
    },
}

/// Why an `--allow-net` entry was refused. Its `Display` is one line naming the entry.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// Not a host, `*.domain`, IP literal or preset.
    #[error("--allow-net '{0}': not a host, *.domain, IP literal or preset")]
    Malformed(String),
    /// `@name` that is no preset this crate knows.
    #[error("--allow-net '{0}': unknown preset (the presets are @npm, @crates, @pypi, @github)")]
    UnknownPreset(String),
    /// A preset whose client is not installed.
    #[error("--allow-net @{preset}: {client} is not installed")]
    ClientMissing {
        /// The preset's name, without `@`.
        preset: String,
        /// The client that was looked for (`npm`, `python3`, `pip`, `cargo`).
        client: String,
    },
    /// A preset whose client is installed but whose hosts could not be read.
    #[error("--allow-net @{preset}: {why}")]
    Unreadable {
        /// The preset's name, without `@`.
        preset: String,
        /// What went wrong, in one line, naming no host path.
        why: String,
    },
}

/// The ports an entry without a port allows.
pub(crate) const DEFAULT_PORTS: [u16; 2] = [443, 80];

impl Entry {
    /// Parses one entry that is not a preset (`@…` is [`AllowList::build`](crate::AllowList::build)'s).
    pub fn parse(text: &str) -> Result<Entry, EntryError> {
        let bad = || EntryError::Malformed(text.to_owned());
        if text.is_empty() || text.len() > 300 || !text.is_ascii() {
            return Err(bad());
        }
        // `[v6]` or `[v6]:port`.
        if let Some(rest) = text.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or_else(bad)?;
            let addr: Ipv6Addr = inside.parse().map_err(|_| bad())?;
            let port = match after {
                "" => None,
                _ => Some(parse_port(after.strip_prefix(':').ok_or_else(bad)?).ok_or_else(bad)?),
            };
            return Ok(Entry::Ip {
                addr: canonical_ip(IpAddr::V6(addr)),
                port,
            });
        }
        // A bare IPv6 literal has more than one colon.
        if text.matches(':').count() > 1 {
            let addr: Ipv6Addr = text.parse().map_err(|_| bad())?;
            return Ok(Entry::Ip {
                addr: canonical_ip(IpAddr::V6(addr)),
                port: None,
            });
        }
        let (host, port) = match text.split_once(':') {
            Some((h, p)) => (h, Some(parse_port(p).ok_or_else(bad)?)),
            None => (text, None),
        };
        if let Ok(v4) = host.parse::<Ipv4Addr>() {
            return Ok(Entry::Ip {
                addr: IpAddr::V4(v4),
                port,
            });
        }
        if let Some(domain) = host.strip_prefix("*.") {
            let domain = normalize_name(domain).ok_or_else(bad)?;
            return Ok(Entry::Suffix { domain, port });
        }
        let name = normalize_name(host).ok_or_else(bad)?;
        Ok(Entry::Host { name, port })
    }

    fn port_matches(port: Option<u16>, asked: u16) -> bool {
        match port {
            Some(p) => p == asked,
            None => DEFAULT_PORTS.contains(&asked),
        }
    }

    /// Whether this entry allows `host` (already normalized by [`RequestHost::parse`]) on `port`.
    pub(crate) fn matches(&self, host: &RequestHost, asked: u16) -> bool {
        match (self, host) {
            (Entry::Host { name, port }, RequestHost::Name(n)) => {
                name == n && Self::port_matches(*port, asked)
            }
            (Entry::Suffix { domain, port }, RequestHost::Name(n)) => {
                n.len() > domain.len() + 1
                    && n.ends_with(domain.as_str())
                    && n.as_bytes()[n.len() - domain.len() - 1] == b'.'
                    && Self::port_matches(*port, asked)
            }
            (Entry::Ip { addr, port }, RequestHost::Ip(a)) => {
                addr == a && Self::port_matches(*port, asked)
            }
            _ => false,
        }
    }

    /// The entry as a user would write it (`*.example.test:8443`, `[::1]:8080`).
    pub fn display(&self) -> String {
        let (base, port) = match self {
            Entry::Host { name, port } => (name.clone(), port),
            Entry::Suffix { domain, port } => (format!("*.{domain}"), port),
            Entry::Ip {
                addr: IpAddr::V6(a),
                port: Some(p),
            } => return format!("[{a}]:{p}"),
            Entry::Ip { addr, port } => (addr.to_string(), port),
        };
        match port {
            Some(p) => format!("{base}:{p}"),
            None => base,
        }
    }
}

fn parse_port(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|&p| p != 0)
}

/// An IPv4-mapped IPv6 address as its IPv4 address; every other address unchanged.
pub(crate) fn canonical_ip(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// A DNS name in lower case without its trailing dot, or `None` when it is not one: labels of
/// 1 to 63 letters, digits, `-` or `_`, not starting or ending with `-`, at most 253 bytes,
/// the last label not all digits (that would be an IP address in disguise).
pub(crate) fn normalize_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name.is_empty() || name.len() > 253 {
        return None;
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return None;
        }
    }
    if labels.last()?.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(name)
}

/// The host of a request, as the proxy compares it with the entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RequestHost {
    /// A DNS name, normalized.
    Name(String),
    /// An IP literal (IPv4-mapped IPv6 as IPv4).
    Ip(IpAddr),
}

impl RequestHost {
    /// The host part of a request's authority (`[::1]` bracketed, or a name, or IPv4).
    pub(crate) fn parse(host: &str) -> Option<RequestHost> {
        if let Some(inside) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            let v6: Ipv6Addr = inside.parse().ok()?;
            return Some(RequestHost::Ip(canonical_ip(IpAddr::V6(v6))));
        }
        if let Ok(v4) = host.parse::<Ipv4Addr>() {
            return Some(RequestHost::Ip(IpAddr::V4(v4)));
        }
        normalize_name(host).map(RequestHost::Name)
    }

    /// The host as decisions and messages name it (IPv6 without brackets).
    pub(crate) fn as_text(&self) -> String {
        match self {
            RequestHost::Name(n) => n.clone(),
            RequestHost::Ip(a) => a.to_string(),
        }
    }

    /// `HOST:PORT` as the refusal's body names it (IPv6 bracketed).
    pub(crate) fn with_port(&self, port: u16) -> String {
        match self {
            RequestHost::Ip(IpAddr::V6(a)) => format!("[{a}]:{port}"),
            other => format!("{}:{port}", other.as_text()),
        }
    }
}

/// Splits an authority `host:port` (IPv6 bracketed); the port is required when `default` is
/// `None`.
pub(crate) fn split_authority(authority: &str, default: Option<u16>) -> Option<(RequestHost, u16)> {
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (h, rest) = authority.split_at(end + 1);
        match rest {
            "" => (h, None),
            _ => (h, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => parse_port(p)?,
        None => default?,
    };
    Some((RequestHost::parse(host)?, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_authority_needs_a_port_for_connect() {
        assert!(split_authority("example.test", None).is_none());
        assert_eq!(
            split_authority("Example.Test.:8443", None),
            Some((RequestHost::Name("example.test".into()), 8443))
        );
        assert_eq!(
            split_authority("[::1]:80", None),
            Some((RequestHost::Ip("::1".parse().unwrap()), 80))
        );
        assert_eq!(
            split_authority("[::ffff:127.0.0.1]", Some(80)),
            Some((RequestHost::Ip("127.0.0.1".parse().unwrap()), 80))
        );
        assert!(split_authority("a b:80", None).is_none());
        assert!(split_authority("host:0", None).is_none());
        assert!(split_authority("host:65536", None).is_none());
    }
}
