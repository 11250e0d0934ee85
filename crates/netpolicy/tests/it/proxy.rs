//! The proxy as a child meets it, on loopback: the decision order, tunnels, forwarding, the
//! bounds at N and N+1, decisions per ticket.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use confine_netpolicy::{AllowList, Decision, Proxy, ProxyOptions, Ticket};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Generous: these bound a test that went wrong, they time nothing.
const PATIENCE: Duration = Duration::from_secs(20);

fn start(entries: &[String], options: ProxyOptions) -> Proxy {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    Proxy::start(listener, AllowList::build(entries).unwrap(), options).unwrap()
}

async fn target() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

async fn connect(proxy: &Proxy) -> TcpStream {
    TcpStream::connect(proxy.local_addr()).await.unwrap()
}

/// Reads up to the end of a response head; returns the head.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // At most 64 KiB: a head that long is a failure of its own.
    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut byte))
            .await
            .expect("a response in time")
            .unwrap();
        if n == 0 {
            break;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

/// Sends `request`, reads the whole answer (the proxy closes after a refusal).
async fn exchange(proxy: &Proxy, request: &[u8]) -> String {
    let mut stream = connect(proxy).await;
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .expect("the proxy answers and closes")
        .unwrap();
    String::from_utf8(answer).unwrap()
}

fn connect_request(authority: &str, ticket: Option<&Ticket>) -> Vec<u8> {
    let auth = ticket.map_or(String::new(), |t| {
        let basic =
            base64::engine::general_purpose::STANDARD.encode(format!("confine:{}", t.token()));
        format!("Proxy-Authorization: Basic {basic}\r\n")
    });
    format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n").into_bytes()
}

/// The status line's code and the body.
fn status_and_body(answer: &str) -> (u16, &str) {
    let code = answer
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, body)
}

/// The listener saw no connection: every connection the proxy could have opened would have
/// been opened before its answer, which the caller has already read.
async fn assert_untouched(listener: &TcpListener) {
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "the target saw a connection");
}

#[tokio::test]
async fn connect_unlisted_is_403_before_the_target_sees_a_connection() {
    let (listener, port) = target().await;
    let proxy = start(&["allowed.example.test".into()], ProxyOptions::default());
    for authority in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let answer = exchange(&proxy, &connect_request(&authority, None)).await;
        let (code, body) = status_and_body(&answer);
        assert_eq!(code, 403, "{answer}");
        assert_eq!(
            body,
            format!("confine: {authority} refused: not on the allow list\n")
        );
        assert!(answer.contains("Connection: close\r\n"));
    }
    assert_untouched(&listener).await;
    // The same port of a listed name is not the listed name.
    let answer = exchange(&proxy, &connect_request("allowed.example.test:22", None)).await;
    assert_eq!(status_and_body(&answer).0, 403);
}

#[tokio::test]
async fn listed_name_that_resolves_to_loopback_is_refused() {
    let (listener, port) = target().await;
    let proxy = start(&[format!("localhost:{port}")], ProxyOptions::default());
    let answer = exchange(&proxy, &connect_request(&format!("localhost:{port}"), None)).await;
    let (code, body) = status_and_body(&answer);
    assert_eq!(code, 403, "{answer}");
    assert_eq!(
        body,
        format!("confine: localhost:{port} refused: resolves to a loopback address\n")
    );
    // Plain HTTP is decided alike.
    let get = format!("GET http://LocalHost.:{port}/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let answer = exchange(&proxy, get.as_bytes()).await;
    assert_eq!(status_and_body(&answer).0, 403, "{answer}");
    // Asked again while the proxy keeps the name's answer: checked again, refused again.
    for _ in 0..3 {
        let answer = exchange(&proxy, &connect_request(&format!("localhost:{port}"), None)).await;
        assert_eq!(status_and_body(&answer).1, body, "{answer}");
    }
    assert_untouched(&listener).await;
}

#[tokio::test]
async fn name_that_does_not_resolve_is_502() {
    let proxy = start(&["nowhere.invalid".into()], ProxyOptions::default());
    let answer = exchange(&proxy, &connect_request("nowhere.invalid:443", None)).await;
    let (code, body) = status_and_body(&answer);
    assert_eq!(code, 502, "{answer}");
    assert_eq!(
        body,
        "confine: nowhere.invalid:443 refused: does not resolve\n"
    );
}

/// The proxy's own socket (in this process) whose peer is `peer`: found among this
/// process's descriptors by their addresses.
fn proxy_socket_with_peer(peer: SocketAddr, local_port: Option<u16>) -> std::os::fd::OwnedFd {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};
    use std::os::fd::AsFd;
    // The process's own descriptors by number, duplicated through its own pidfd.
    let me = pidfd_open(getpid(), PidfdFlags::empty()).unwrap();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(dup) = pidfd_getfd(&me, fd, PidfdGetfdFlags::empty()) else {
            continue;
        };
        let addr =
            |a: Option<rustix::net::SocketAddrAny>| a.and_then(|a| SocketAddr::try_from(a).ok());
        let remote = addr(rustix::net::getpeername(dup.as_fd()).ok().flatten());
        let local = addr(rustix::net::getsockname(dup.as_fd()).ok());
        if remote == Some(peer) && local_port.is_none_or(|p| local.is_some_and(|l| l.port() == p)) {
            return dup;
        }
    }
    panic!("no socket of the proxy has the peer {peer}");
}

#[tokio::test]
async fn both_sockets_of_a_tunnel_send_without_nagle() {
    // A tunnel relays each read as one write; with Nagle's algorithm a small write waits for
    // the ACK of the one before (a delayed ACK: 40 ms), which a real install pays on every
    // TLS exchange.
    let (listener, port) = target().await;
    let proxy = start(&[format!("127.0.0.1:{port}")], ProxyOptions::default());
    let mut client = connect(&proxy).await;
    client
        .write_all(&connect_request(&format!("127.0.0.1:{port}"), None))
        .await
        .unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200 "));
    let (server, _) = tokio::time::timeout(PATIENCE, listener.accept())
        .await
        .unwrap()
        .unwrap();
    let towards_client = proxy_socket_with_peer(
        client.local_addr().unwrap(),
        Some(proxy.local_addr().port()),
    );
    // The proxy's upstream end: its peer is the target, its port the accepted one's peer's.
    let towards_server = proxy_socket_with_peer(
        server.local_addr().unwrap(),
        Some(server.peer_addr().unwrap().port()),
    );
    assert!(rustix::net::sockopt::tcp_nodelay(&towards_client).unwrap());
    assert!(rustix::net::sockopt::tcp_nodelay(&towards_server).unwrap());
}

#[tokio::test]
async fn ip_literal_on_the_list_is_tunnelled_both_ways() {
    let (listener, port) = target().await;
    let proxy = start(&[format!("127.0.0.1:{port}")], ProxyOptions::default());
    let mut client = connect(&proxy).await;
    // The first bytes of the tunnel ride with the head.
    let mut request = connect_request(&format!("127.0.0.1:{port}"), None);
    request.extend_from_slice(b"early");
    client.write_all(&request).await.unwrap();
    let head = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let (mut server, _) = tokio::time::timeout(PATIENCE, listener.accept())
        .await
        .unwrap()
        .unwrap();
    client.write_all(b" ping").await.unwrap();
    let mut got = [0u8; 10];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"early ping");
    server.write_all(b"pong").await.unwrap();
    let mut got = [0u8; 4];
    client.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"pong");
    // One side closing is passed on; the other direction still flows.
    client.shutdown().await.unwrap();
    let mut rest = Vec::new();
    let n = tokio::time::timeout(PATIENCE, server.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n, 0);
    server.write_all(b"bye").await.unwrap();
    drop(server);
    let mut rest = Vec::new();
    tokio::time::timeout(PATIENCE, client.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rest, b"bye");
}

#[tokio::test]
async fn absolute_form_is_forwarded_in_origin_form_without_proxy_authorization() {
    let (listener, port) = target().await;
    let proxy = start(&[format!("127.0.0.1:{port}")], ProxyOptions::default());
    let ticket = proxy.ticket();
    let basic =
        base64::engine::general_purpose::STANDARD.encode(format!("confine:{}", ticket.token()));
    let request = format!(
        "POST http://127.0.0.1:{port}/a/b?c=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         proxy-authorization: Basic {basic}\r\nProxy-Connection: keep-alive\r\n\
         Connection: keep-alive\r\nX-Other: 1\r\nContent-Length: 4\r\n\r\nbody"
    );
    let mut client = connect(&proxy).await;
    client.write_all(request.as_bytes()).await.unwrap();
    let (mut server, _) = tokio::time::timeout(PATIENCE, listener.accept())
        .await
        .unwrap()
        .unwrap();
    let head = read_head(&mut server).await;
    assert!(head.starts_with("POST /a/b?c=1 HTTP/1.1\r\n"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(!lower.contains("proxy-authorization"), "{head}");
    assert!(!lower.contains(&basic.to_ascii_lowercase()), "{head}");
    assert!(!lower.contains("proxy-connection"), "{head}");
    assert!(!lower.contains("keep-alive"), "{head}");
    assert!(head.contains("\r\nX-Other: 1\r\n"), "{head}");
    assert!(
        head.contains(&format!("\r\nHost: 127.0.0.1:{port}\r\n")),
        "{head}"
    );
    assert!(head.contains("\r\nConnection: close\r\n"), "{head}");
    let mut body = [0u8; 4];
    server.read_exact(&mut body).await.unwrap();
    assert_eq!(&body, b"body");
    server
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        .await
        .unwrap();
    drop(server);
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, client.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    assert_eq!(
        ticket.decisions(),
        [Decision {
            host: "127.0.0.1".into(),
            port,
            allowed: true,
            reason: None
        }]
    );
}

#[tokio::test]
async fn requests_that_are_not_for_a_proxy_are_400() {
    let proxy = start(&["127.0.0.1".into()], ProxyOptions::default());
    for request in [
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_owned(),
        "GET https://127.0.0.1/ HTTP/1.1\r\n\r\n".to_owned(),
        "GET http://user@127.0.0.1/ HTTP/1.1\r\n\r\n".to_owned(),
        "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n".to_owned(),
        "NOT HTTP AT ALL\r\n\r\n".to_owned(),
    ] {
        let answer = exchange(&proxy, request.as_bytes()).await;
        let (code, body) = status_and_body(&answer);
        assert_eq!(code, 400, "{request:?}: {answer}");
        assert!(body.starts_with("confine: bad request: "), "{answer}");
    }
}

#[tokio::test]
async fn the_proxys_own_address_is_refused_even_when_listed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let own = listener.local_addr().unwrap();
    let policy = AllowList::build(&[
        own.to_string(),
        format!("[::ffff:127.0.0.1]:{}", own.port()),
    ])
    .unwrap();
    let proxy = Proxy::start(listener, policy, ProxyOptions::default()).unwrap();
    for authority in [
        own.to_string(),
        format!("[::ffff:127.0.0.1]:{}", own.port()),
    ] {
        let answer = exchange(&proxy, &connect_request(&authority, None)).await;
        let (code, body) = status_and_body(&answer);
        assert_eq!(code, 403, "{answer}");
        assert_eq!(
            body,
            format!("confine: {own} refused: is the proxy's own address\n"),
            "{authority}"
        );
    }
}

/// A head of exactly `max_head` bytes (its blank line included) is read; one byte more is 431.
#[tokio::test]
async fn head_of_16_kib_is_accepted_and_one_byte_more_is_431() {
    let (listener, port) = target().await;
    let proxy = start(&[format!("127.0.0.1:{port}")], ProxyOptions::default());
    let head_of = |len: usize| {
        let start = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nX-Pad: ");
        let pad = len - start.len() - 4;
        format!("{start}{}\r\n\r\n", "p".repeat(pad)).into_bytes()
    };
    let exact = head_of(16 * 1024);
    assert_eq!(exact.len(), 16384);
    let mut client = connect(&proxy).await;
    client.write_all(&exact).await.unwrap();
    let head = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let (_server, _) = tokio::time::timeout(PATIENCE, listener.accept())
        .await
        .unwrap()
        .unwrap();

    let over = head_of(16 * 1024 + 1);
    let answer = exchange(&proxy, &over).await;
    let (code, body) = status_and_body(&answer);
    assert_eq!(code, 431, "{answer}");
    assert_eq!(body, "confine: request head over 16384 bytes\n");
    assert_untouched(&listener).await;
}

/// 64 tunnels open (two runs of 32, each at its own bound); the 65th request, from a third
/// run, is 503; once tunnels close, requests pass again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_65_is_503_while_64_are_open() {
    let (listener, port) = target().await;
    let proxy = start(&[format!("127.0.0.1:{port}")], ProxyOptions::default());
    let tickets = [proxy.ticket(), proxy.ticket()];
    let ticket = &tickets[0];
    let authority = format!("127.0.0.1:{port}");
    let mut clients = Vec::new();
    let mut servers = Vec::new();
    for i in 0..64 {
        let mut client = connect(&proxy).await;
        client
            .write_all(&connect_request(&authority, Some(&tickets[i / 32])))
            .await
            .unwrap();
        let head = read_head(&mut client).await;
        assert!(head.starts_with("HTTP/1.1 200 "), "tunnel {i}: {head}");
        let (server, _) = tokio::time::timeout(PATIENCE, listener.accept())
            .await
            .unwrap()
            .unwrap();
        clients.push(client);
        servers.push(server);
    }
    let third = proxy.ticket();
    let answer = exchange(&proxy, &connect_request(&authority, Some(&third))).await;
    let (code, body) = status_and_body(&answer);
    assert_eq!(code, 503, "{answer}");
    assert_eq!(
        body,
        format!("confine: {authority} refused: too many open tunnels\n")
    );
    assert_untouched(&listener).await;
    // The tunnels still work.
    clients[63].write_all(b"x").await.unwrap();
    let mut one = [0u8; 1];
    servers[63].read_exact(&mut one).await.unwrap();
    // Both ends of every tunnel closed: the slots come back (bounded retries).
    drop(clients);
    drop(servers);
    let mut passed = false;
    for _ in 0..200 {
        let mut client = connect(&proxy).await;
        client
            .write_all(&connect_request(&authority, None))
            .await
            .unwrap();
        if read_head(&mut client).await.starts_with("HTTP/1.1 200 ") {
            passed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(passed, "a tunnel opens once the others closed");
    // The ticket kept one decision for the one (host, port), allowed.
    assert_eq!(ticket.decisions().len(), 1);
    assert!(ticket.decisions()[0].allowed);
}

#[tokio::test]
async fn idle_tunnel_is_closed() {
    let (listener, port) = target().await;
    let authority = format!("127.0.0.1:{port}");
    let short = ProxyOptions {
        idle: Duration::from_millis(300),
        ..ProxyOptions::default()
    };
    let proxy = start(std::slice::from_ref(&authority), short);
    let mut client = connect(&proxy).await;
    client
        .write_all(&connect_request(&authority, None))
        .await
        .unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200 "));
    let (mut server, _) = listener.accept().await.unwrap();
    // Nothing moves: both ends see the tunnel close.
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(PATIENCE, client.read(&mut buf))
        .await
        .expect("closed within the test's patience")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let n = tokio::time::timeout(PATIENCE, server.read(&mut buf))
        .await
        .expect("closed within the test's patience")
        .unwrap_or(0);
    assert_eq!(n, 0);
}

/// The twin: with the default idle bound, a tunnel quiet for a second still carries bytes.
#[tokio::test]
async fn quiet_tunnel_under_the_idle_bound_stays_open() {
    let (listener, port) = target().await;
    let authority = format!("127.0.0.1:{port}");
    let proxy = start(std::slice::from_ref(&authority), ProxyOptions::default());
    let mut client = connect(&proxy).await;
    client
        .write_all(&connect_request(&authority, None))
        .await
        .unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200 "));
    let (mut server, _) = listener.accept().await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    client.write_all(b"late").await.unwrap();
    let mut got = [0u8; 4];
    tokio::time::timeout(PATIENCE, server.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got, b"late");
}

#[tokio::test]
async fn decisions_are_distinct_ordered_with_reasons_and_per_ticket() {
    let (_listener, port) = target().await;
    let proxy = start(
        &[format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        ProxyOptions::default(),
    );
    let mine = proxy.ticket();
    let other = proxy.ticket();
    assert_ne!(mine.token(), other.token());
    assert_eq!(mine.token().len(), 32);
    assert!(mine.token().bytes().all(|b| b.is_ascii_hexdigit()));
    let allowed = format!("127.0.0.1:{port}");
    for authority in [
        "unlisted.example.test:443".to_owned(),
        allowed.clone(),
        "unlisted.example.test:443".to_owned(),
        format!("LOCALHOST.:{port}"),
        "unlisted.example.test:80".to_owned(),
    ] {
        let mut client = connect(&proxy).await;
        client
            .write_all(&connect_request(&authority, Some(&mine)))
            .await
            .unwrap();
        read_head(&mut client).await;
    }
    // Without a token, and with an unknown one: decided alike, recorded nowhere.
    let answer = exchange(&proxy, &connect_request("nobody.example.test:443", None)).await;
    assert_eq!(status_and_body(&answer).0, 403);
    let forged = "Proxy-Authorization: Basic Y29uZmluZTowMDAw\r\n";
    let request = format!("CONNECT forged.example.test:443 HTTP/1.1\r\n{forged}\r\n");
    assert_eq!(
        status_and_body(&exchange(&proxy, request.as_bytes()).await).0,
        403
    );
    let refused = |host: &str, port: u16, reason: &str| Decision {
        host: host.into(),
        port,
        allowed: false,
        reason: Some(reason.into()),
    };
    assert_eq!(
        mine.decisions(),
        [
            refused("unlisted.example.test", 443, "not on the allow list"),
            Decision {
                host: "127.0.0.1".into(),
                port,
                allowed: true,
                reason: None
            },
            refused("localhost", port, "resolves to a loopback address"),
            refused("unlisted.example.test", 80, "not on the allow list"),
        ]
    );
    assert!(other.decisions().is_empty());
    // The record's JSON form: `reason` only on refusals.
    let json = serde_json::to_value(mine.decisions()).unwrap();
    assert_eq!(
        json[1],
        serde_json::json!({"host": "127.0.0.1", "port": port, "allowed": true})
    );
    assert_eq!(json[0]["reason"], "not on the allow list");
}

#[tokio::test]
async fn decisions_are_capped_at_100() {
    let proxy = start(&[], ProxyOptions::default());
    let ticket = proxy.ticket();
    for i in 0..101 {
        let answer = exchange(
            &proxy,
            &connect_request(&format!("h{i}.example.test:443"), Some(&ticket)),
        )
        .await;
        assert_eq!(status_and_body(&answer).0, 403);
        // Exactly 100 hold: the 100th is kept, the 101st is not.
        let expected = (i + 1).min(100);
        assert_eq!(ticket.decisions().len(), expected, "after {}", i + 1);
    }
    let hosts: Vec<String> = ticket.decisions().into_iter().map(|d| d.host).collect();
    let first: Vec<String> = (0..100).map(|i| format!("h{i}.example.test")).collect();
    assert_eq!(hosts, first);
}

/// The variables a child gets, and that a client using them is attributed to the ticket.
#[tokio::test]
async fn ticket_env_points_at_the_proxy_with_the_token() {
    let (_listener, port) = target().await;
    let proxy = start(&[format!("127.0.0.1:{port}")], ProxyOptions::default());
    let ticket = proxy.ticket();
    let env = ticket.env();
    let get = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{k} is set"))
    };
    let url = format!("http://confine:{}@{}", ticket.token(), proxy.local_addr());
    for k in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        assert_eq!(get(k), url);
    }
    for k in ["NO_PROXY", "no_proxy"] {
        assert_eq!(get(k), "localhost,127.0.0.1,::1");
    }
    assert_eq!(get("NODE_USE_ENV_PROXY"), "1");
    assert_eq!(env.len(), 7);
    // What a client does with the URL's user information.
    let userinfo = url
        .strip_prefix("http://")
        .and_then(|r| r.split_once('@'))
        .unwrap()
        .0;
    let basic = base64::engine::general_purpose::STANDARD.encode(userinfo);
    let request =
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nProxy-Authorization: Basic {basic}\r\n\r\n");
    let mut client = connect(&proxy).await;
    client.write_all(request.as_bytes()).await.unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200 "));
    assert_eq!(ticket.decisions().len(), 1);
    // A dropped ticket's clone still records; the proxy's decisions are the clone's too.
    let clone = ticket.clone();
    drop(ticket);
    assert_eq!(clone.decisions().len(), 1);
}

/// Dropping the proxy closes its listener and every tunnel.
#[tokio::test]
async fn dropping_the_proxy_closes_listener_and_tunnels() {
    let (listener, port) = target().await;
    let authority = format!("127.0.0.1:{port}");
    let proxy = start(std::slice::from_ref(&authority), ProxyOptions::default());
    let addr: SocketAddr = proxy.local_addr();
    let mut client = connect(&proxy).await;
    client
        .write_all(&connect_request(&authority, None))
        .await
        .unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200 "));
    let (mut server, _) = listener.accept().await.unwrap();
    drop(proxy);
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(PATIENCE, client.read(&mut buf))
        .await
        .expect("the tunnel closes")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let n = tokio::time::timeout(PATIENCE, server.read(&mut buf))
        .await
        .expect("the tunnel closes")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let mut refused = false;
    for _ in 0..200 {
        if TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "the listener is closed");
}

#[test]
fn start_outside_a_runtime_is_an_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let err = Proxy::start(listener, AllowList::empty(), ProxyOptions::default()).unwrap_err();
    assert!(err.to_string().contains("tokio runtime"));
}

#[test]
fn options_default_to_the_contracts_bounds() {
    let o = ProxyOptions::default();
    assert_eq!(o.max_tunnels, 64);
    assert_eq!(o.max_per_run, 32);
    assert_eq!(o.max_unattributed, 16);
    assert_eq!(o.max_waiting, 64);
    assert_eq!(o.head_timeout, Duration::from_secs(10));
    assert_eq!(o.max_head, 16 * 1024);
    assert_eq!(o.idle, Duration::from_secs(300));
}

/// A head that does not arrive whole within the head's time: the connection is closed with
/// a 408 line, and nothing was reached.
#[tokio::test]
async fn head_not_whole_in_time_is_408_and_closed() {
    let (listener, port) = target().await;
    let short = ProxyOptions {
        head_timeout: Duration::from_millis(300),
        ..ProxyOptions::default()
    };
    let proxy = start(&[format!("127.0.0.1:{port}")], short);
    let mut client = connect(&proxy).await;
    client
        .write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, client.read_to_end(&mut answer))
        .await
        .expect("closed within the test's patience")
        .unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let (code, body) = status_and_body(&answer);
    assert_eq!(code, 408, "{answer}");
    assert_eq!(body, "confine: no request head within 300 ms\n");
    assert_untouched(&listener).await;
}

/// An IPv6 literal on the list is reached over `::1`, where this machine has it.
#[tokio::test]
async fn ipv6_literal_on_the_list_is_tunnelled() {
    const TEST: &str = "ipv6_literal_on_the_list_is_tunnelled";
    let Ok(listener) = TcpListener::bind("[::1]:0").await else {
        testkit::not_run(
            TEST,
            "no IPv6 loopback here (the IPv4 tunnel test covers tunnels)",
        );
        return;
    };
    let port = listener.local_addr().unwrap().port();
    let authority = format!("[::1]:{port}");
    let proxy = start(std::slice::from_ref(&authority), ProxyOptions::default());
    let mut client = connect(&proxy).await;
    client
        .write_all(&connect_request(&authority, None))
        .await
        .unwrap();
    assert!(read_head(&mut client).await.starts_with("HTTP/1.1 200 "));
    let (mut server, _) = tokio::time::timeout(PATIENCE, listener.accept())
        .await
        .unwrap()
        .unwrap();
    client.write_all(b"six").await.unwrap();
    let mut got = [0u8; 3];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"six");
    // `::1` without a port means 443 and 80: this port is not on such a list.
    let proxy = start(&["::1".into()], ProxyOptions::default());
    let answer = exchange(&proxy, &connect_request(&authority, None)).await;
    let (code, body) = status_and_body(&answer);
    assert_eq!(code, 403, "{answer}");
    assert_eq!(
        body,
        format!("confine: {authority} refused: not on the allow list\n")
    );
}

#[test]
fn the_public_types_are_send_sync_and_clone() {
    fn shared<T: Send + Sync + Clone + std::fmt::Debug>() {}
    shared::<AllowList>();
    shared::<Ticket>();
    shared::<Decision>();
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Proxy>();
}
