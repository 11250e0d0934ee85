//! Authentication: the bearer token (from `CONFINE_HTTP_TOKEN` or the token file, created
//! with a new random token when missing) and its constant-time check.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::common::usage;
use crate::cli::mcp::HttpArgs;

/// Everything decided before serving: the address, the token (`None`: unauthenticated).
pub(super) struct Plan {
    pub(super) addr: SocketAddr,
    pub(super) token: Option<Vec<u8>>,
}

/// Check the flags and find the token; a usage error is exit status 2 with one line.
pub(super) fn plan(http: &HttpArgs, addr: SocketAddr, root: &Path) -> Result<Plan, ExitCode> {
    let loopback = addr.ip().is_loopback();
    if !loopback && !http.http_public {
        return Err(usage(&format!(
            "--http {addr} is not a loopback address; give --http-public to serve other \
             machines (and put TLS in front)"
        )));
    }
    if http.http_no_auth {
        if !loopback {
            return Err(usage(
                "--http-no-auth is allowed only on a loopback address",
            ));
        }
        return Ok(Plan { addr, token: None });
    }
    if let Some(token) = std::env::var_os("CONFINE_HTTP_TOKEN").filter(|t| !t.is_empty()) {
        use std::os::unix::ffi::OsStrExt;
        return Ok(Plan {
            addr,
            token: Some(token.as_bytes().to_vec()),
        });
    }
    let Some(file) = &http.http_token_file else {
        return Err(usage(
            "--http needs a bearer token: set CONFINE_HTTP_TOKEN, or give --http-token-file \
             FILE (created with a new token when missing), or --http-no-auth on a loopback \
             address",
        ));
    };
    if beneath_root(file, root) {
        return Err(usage(
            "--http-token-file must not be beneath the workspace root (the tools could read it)",
        ));
    }
    let token = read_or_create_token(file)?;
    Ok(Plan {
        addr,
        token: Some(token),
    })
}

/// Whether `file` (which may not exist yet) would be beneath `root`, both resolved through
/// the file system as far as they exist.
fn beneath_root(file: &Path, root: &Path) -> bool {
    let Ok(root) = std::fs::canonicalize(root) else {
        return false;
    };
    let Ok(file) = std::path::absolute(file) else {
        return true;
    };
    let resolved = match std::fs::canonicalize(&file) {
        Ok(resolved) => resolved,
        Err(_) => match (file.parent().map(std::fs::canonicalize), file.file_name()) {
            (Some(Ok(parent)), Some(name)) => parent.join(name),
            _ => file,
        },
    };
    resolved.starts_with(&root)
}

/// The token held by `file`, or a new one written there (mode 0600, created exclusively):
/// 32 bytes of the OS's randomness, base64url without padding.
fn read_or_create_token(file: &Path) -> Result<Vec<u8>, ExitCode> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;

    match std::fs::read(file) {
        Ok(bytes) => {
            let token = bytes.trim_ascii().to_vec();
            if token.is_empty() {
                return Err(usage("--http-token-file is empty"));
            }
            return Ok(token);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(usage(&format!("--http-token-file: {}", e.kind()))),
    }
    let token = new_token().map_err(|_| usage("cannot read the OS's randomness"))?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .map_err(|e| {
            usage(&format!(
                "--http-token-file: cannot create it: {}",
                e.kind()
            ))
        })?;
    out.write_all(token.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.sync_all())
        .map_err(|e| usage(&format!("--http-token-file: {}", e.kind())))?;
    Ok(token.into_bytes())
}

/// 32 random bytes from the kernel ([`confine_netpolicy::random_bytes`]), base64url without
/// padding (43 characters).
fn new_token() -> std::io::Result<String> {
    use base64::Engine as _;
    let mut bytes = [0u8; 32];
    confine_netpolicy::random_bytes(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Constant-time equality of a presented token and the expected one: every byte of the
/// expected token is compared whatever the presented one holds, and the lengths are folded
/// in, so the time depends on neither where they differ nor on the expected token.
fn same_token(presented: &[u8], expected: &[u8]) -> bool {
    let mut diff = presented.len() ^ expected.len();
    for (i, e) in expected.iter().enumerate() {
        let p = presented.get(i).copied().unwrap_or(!e);
        diff |= usize::from(p ^ e);
    }
    std::hint::black_box(diff) == 0
}

/// Whether an `Authorization` header value carries `token` as a bearer token.
pub(super) fn authorized(header: Option<&hyper::header::HeaderValue>, token: &[u8]) -> bool {
    let Some(value) = header else {
        return false;
    };
    let value = value.as_bytes();
    let Some((scheme, rest)) = value.split_at_checked(7) else {
        return false;
    };
    scheme.eq_ignore_ascii_case(b"bearer ") && same_token(rest.trim_ascii(), token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abcdef", b"abcdef"));
        assert!(!same_token(b"abcdeg", b"abcdef"));
        assert!(!same_token(b"abcde", b"abcdef"));
        assert!(!same_token(b"abcdefg", b"abcdef"));
        assert!(!same_token(b"", b"abcdef"));
        // A presented byte equal to the complement of a missing one does not make it match.
        assert!(!same_token(&[!b'a'], b"a\0"));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_exact() {
        let v = |s: &str| hyper::header::HeaderValue::from_str(s).unwrap();
        assert!(authorized(Some(&v("Bearer tok")), b"tok"));
        assert!(authorized(Some(&v("bearer tok")), b"tok"));
        assert!(!authorized(Some(&v("Basic tok")), b"tok"));
        assert!(!authorized(Some(&v("Bearer tok2")), b"tok"));
        assert!(!authorized(Some(&v("Bearertok")), b"tok"));
        assert!(!authorized(None, b"tok"));
    }

    #[test]
    fn a_new_token_is_43_base64url_characters() {
        let t = new_token().unwrap();
        assert_eq!(t.len(), 43);
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_ne!(t, new_token().unwrap());
    }
}
