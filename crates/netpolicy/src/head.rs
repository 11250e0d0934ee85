//! The request head: read by hand up to its exact byte bound, parsed by `httparse`.

use base64::Engine as _;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::entry::{RequestHost, split_authority};

/// More header lines than this in one head is answered like a head over its byte bound.
const MAX_HEADERS: usize = 256;

/// What a request asks the proxy for.
pub(crate) enum Target {
    /// `CONNECT host:port`: a tunnel.
    Connect,
    /// `METHOD http://host[:port]/path`: the head to send the origin, in origin form, without
    /// `Proxy-Authorization`, with `Connection: close`.
    Forward(Vec<u8>),
}

/// A parsed request head.
pub(crate) struct Head {
    pub(crate) host: RequestHost,
    pub(crate) port: u16,
    pub(crate) target: Target,
    /// The token of `Proxy-Authorization: Basic base64(confine:TOKEN)`, if the request has one.
    pub(crate) token: Option<String>,
    /// Bytes the client sent after the head (a body, or a tunnel's first bytes).
    pub(crate) rest: Vec<u8>,
}

/// Why no head could be had.
pub(crate) enum HeadError {
    /// No blank line within the bound (or more than [`MAX_HEADERS`] header lines): 431.
    TooLarge,
    /// Not a request the proxy serves: 400, with the reason.
    Bad(&'static str),
    /// The client closed or failed before the head was whole: no answer.
    Gone,
    /// The head was not whole by the deadline (a client that sends nothing, or trickles its
    /// head a byte at a time, holds its connection no longer).
    Late,
}

/// Reads one head of at most `max` bytes (the blank line included), the whole head by
/// `deadline`. Never reads past `max` bytes in all, so a head of `max` bytes is accepted and
/// one of `max + 1` is [`HeadError::TooLarge`].
pub(crate) async fn read_head(
    stream: &mut TcpStream,
    max: usize,
    deadline: Instant,
) -> Result<Head, HeadError> {
    let mut buf: Vec<u8> = Vec::with_capacity(max.min(4096));
    let mut chunk = [0u8; 4096];
    // Each pass reads at least one byte or ends, so there are at most `max` passes.
    loop {
        let room = (max - buf.len()).min(chunk.len());
        if room == 0 {
            return Err(HeadError::TooLarge);
        }
        let n = match tokio::time::timeout_at(deadline, stream.read(&mut chunk[..room])).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Err(HeadError::Gone),
            Err(_) => return Err(HeadError::Late),
            Ok(Ok(n)) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = vec![httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&buf) {
            Ok(httparse::Status::Partial) => continue,
            Ok(httparse::Status::Complete(len)) => {
                let head = interpret(&request)?;
                return Ok(Head {
                    rest: buf[len..].to_vec(),
                    ..head
                });
            }
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
            Err(_) => return Err(HeadError::Bad("not an HTTP/1.1 request head")),
        }
    }
}

fn interpret(request: &httparse::Request<'_, '_>) -> Result<Head, HeadError> {
    let method = request.method.unwrap_or_default();
    let target = request.path.unwrap_or_default();
    let version = request.version.unwrap_or(1);
    let token = request
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("proxy-authorization"))
        .and_then(|h| basic_token(h.value));
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) =
            split_authority(target, None).ok_or(HeadError::Bad("CONNECT needs host:port"))?;
        return Ok(Head {
            host,
            port,
            target: Target::Connect,
            token,
            rest: Vec::new(),
        });
    }
    let scheme_end = target.find("://");
    let rest = match scheme_end {
        Some(i) if target[..i].eq_ignore_ascii_case("http") => &target[i + 3..],
        Some(_) => {
            return Err(HeadError::Bad(
                "only http:// is forwarded (https goes through CONNECT)",
            ));
        }
        None => return Err(HeadError::Bad("not a proxy request")),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    if authority.contains('@') {
        return Err(HeadError::Bad("a URL with user information"));
    }
    let (host, port) =
        split_authority(authority, Some(80)).ok_or(HeadError::Bad("not an http:// URL"))?;
    let path = match &rest[authority_end..] {
        "" => "/".to_owned(),
        p if p.starts_with('/') => p.to_owned(),
        p => format!("/{p}"),
    };
    let mut head = format!("{method} {path} HTTP/1.{version}\r\n").into_bytes();
    let mut has_host = false;
    for h in request.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if matches!(
            name.as_str(),
            "proxy-authorization" | "proxy-connection" | "connection" | "keep-alive"
        ) {
            continue;
        }
        has_host |= name == "host";
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    if !has_host {
        head.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Head {
        host,
        port,
        target: Target::Forward(head),
        token,
        rest: Vec::new(),
    })
}

/// The password of `Basic base64(user:password)`: the ticket's token.
fn basic_token(value: &[u8]) -> Option<String> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (_, token) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some(token.to_owned())
}
