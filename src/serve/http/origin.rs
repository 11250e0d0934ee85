//! DNS rebinding: the `Host` and `Origin` checks made before anything else.

/// Whether an `Origin` is one of this machine's own pages: `http://localhost`,
/// `http://127.0.0.1` or `http://[::1]`, with any port.
pub(super) fn local_origin(origin: &[u8]) -> bool {
    let Some((scheme, rest)) = origin.split_at_checked(7) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case(b"http://") {
        return false;
    }
    let port_ok = |p: &[u8]| !p.is_empty() && p.len() <= 5 && p.iter().all(u8::is_ascii_digit);
    for host in [&b"localhost"[..], b"127.0.0.1", b"[::1]"] {
        if rest.len() >= host.len() && rest[..host.len()].eq_ignore_ascii_case(host) {
            let after = &rest[host.len()..];
            if after.is_empty() {
                return true;
            }
            if let Some(port) = after.strip_prefix(b":") {
                return port_ok(port);
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_origins_pass() {
        for ok in [
            "http://localhost",
            "http://localhost:3000",
            "http://127.0.0.1:8080",
            "http://[::1]:1",
            "HTTP://LOCALHOST",
        ] {
            assert!(local_origin(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "https://localhost",
            "null",
            "http://localhost:80x",
            "http://localhost:",
        ] {
            assert!(!local_origin(bad.as_bytes()), "{bad}");
        }
    }
}
