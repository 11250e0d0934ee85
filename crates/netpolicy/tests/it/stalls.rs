//! Stalls: one run, or connections that send nothing or a byte at a time, cannot keep the
//! proxy from another run. Each attack stands beside a legitimate client that must get
//! through in a few seconds (a generous bound, far under the ten seconds a head may take, so
//! passing it shows the client did not wait for the stall to end).

use std::time::{Duration, Instant};

use base64::Engine as _;
use confine_netpolicy::{AllowList, Proxy, ProxyOptions, Ticket};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bounds a test that went wrong; it times nothing.
const PATIENCE: Duration = Duration::from_secs(20);
/// How long a legitimate client may take to get its answer beside a stall.
const PROMPT: Duration = Duration::from_secs(5);

fn start(entries: &[String]) -> Proxy {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    Proxy::start(
        listener,
        AllowList::build(entries).unwrap(),
        ProxyOptions::default(),
    )
    .unwrap()
}

async fn target() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    (listener, authority)
}

fn connect_request(authority: &str, ticket: Option<&Ticket>) -> Vec<u8> {
    let auth = ticket.map_or(String::new(), |t| {
        let basic =
            base64::engine::general_purpose::STANDARD.encode(format!("confine:{}", t.token()));
        format!("Proxy-Authorization: Basic {basic}\r\n")
    });
    format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n").into_bytes()
}

/// Reads up to the end of a response head (at most 64 KiB), within `patience`.
async fn read_head(stream: &mut TcpStream, patience: Duration) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(patience, async {
        while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
            match stream.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
    })
    .await
    .expect("a response in time");
    String::from_utf8(head).unwrap()
}

/// Reads until the proxy closes (an end of stream or a reset), within `patience`; what was
/// read.
async fn until_closed(stream: &mut TcpStream, patience: Duration) -> String {
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    tokio::time::timeout(patience, async {
        // Each pass reads at least one byte or ends; at most 64 KiB.
        while answer.len() < 65536 {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .expect("closed by the proxy in time");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Whether `stream` is still open: nothing arrives within a short wait.
async fn still_open(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    tokio::time::timeout(Duration::from_millis(300), stream.read(&mut byte))
        .await
        .is_err()
}

/// Opens a tunnel for `ticket` and checks it carries a byte each way; the two ends.
async fn tunnel(
    proxy: &Proxy,
    listener: &TcpListener,
    authority: &str,
    ticket: Option<&Ticket>,
) -> (TcpStream, TcpStream) {
    let mut client = TcpStream::connect(proxy.local_addr()).await.unwrap();
    client
        .write_all(&connect_request(authority, ticket))
        .await
        .unwrap();
    let head = read_head(&mut client, PROMPT).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let (mut server, _) = tokio::time::timeout(PATIENCE, listener.accept())
        .await
        .expect("the tunnel's connection")
        .unwrap();
    client.write_all(b"u").await.unwrap();
    server.write_all(b"d").await.unwrap();
    let mut one = [0u8; 1];
    server.read_exact(&mut one).await.unwrap();
    client.read_exact(&mut one).await.unwrap();
    (client, server)
}

/// The answer to one request of `ticket`, the connection kept by the caller's patience.
async fn refused(proxy: &Proxy, authority: &str, ticket: Option<&Ticket>) -> String {
    let mut client = TcpStream::connect(proxy.local_addr()).await.unwrap();
    client
        .write_all(&connect_request(authority, ticket))
        .await
        .unwrap();
    until_closed(&mut client, PATIENCE).await
}

/// A run holds its 32 connections (tunnels, here); its 33rd is refused with a one-line
/// reason, while another run's connection gets through; once one of the 32 closes, the run
/// gets through again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_32_connections_is_refused_while_another_run_gets_through() {
    let (listener, authority) = target().await;
    let proxy = start(std::slice::from_ref(&authority));
    let greedy = proxy.ticket();
    let other = proxy.ticket();
    let mut held = Vec::new();
    for _ in 0..32 {
        held.push(tunnel(&proxy, &listener, &authority, Some(&greedy)).await);
    }
    let answer = refused(&proxy, &authority, Some(&greedy)).await;
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.ends_with(&format!(
            "\r\n\r\nconfine: {authority} refused: too many connections from this run\n"
        )),
        "{answer}"
    );
    // The twin: another run, beside the one at its bound.
    let _theirs = tunnel(&proxy, &listener, &authority, Some(&other)).await;
    // A place given back is taken again (bounded retries: the proxy sees the close a little
    // after the test does).
    drop(held.pop());
    let mut again = None;
    for _ in 0..100 {
        let mut client = TcpStream::connect(proxy.local_addr()).await.unwrap();
        client
            .write_all(&connect_request(&authority, Some(&greedy)))
            .await
            .unwrap();
        if read_head(&mut client, PATIENCE)
            .await
            .starts_with("HTTP/1.1 200 ")
        {
            again = Some(client);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(again.is_some(), "the run's 32nd place comes back");
}

/// Requests that carry no run's token share one bound of 16: the 17th is refused, while a
/// run's request gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_a_token_share_16_places() {
    let (listener, authority) = target().await;
    let proxy = start(std::slice::from_ref(&authority));
    let mut held = Vec::new();
    for _ in 0..16 {
        held.push(tunnel(&proxy, &listener, &authority, None).await);
    }
    let answer = refused(&proxy, &authority, None).await;
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.ends_with(&format!(
            "confine: {authority} refused: too many connections without a run's proxy \
             credentials\n"
        )),
        "{answer}"
    );
    // A token of no live ticket counts as none.
    let gone = proxy.ticket();
    let stale = connect_request(&authority, Some(&gone));
    drop(gone);
    let mut client = TcpStream::connect(proxy.local_addr()).await.unwrap();
    client.write_all(&stale).await.unwrap();
    let answer = until_closed(&mut client, PATIENCE).await;
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    // The twin: a run's request.
    let run = proxy.ticket();
    let _theirs = tunnel(&proxy, &listener, &authority, Some(&run)).await;
}

/// One run holds 130 connections that send nothing (more than the proxy ever served at
/// once before); another run's request still gets through promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_holding_130_idle_connections_does_not_keep_another_out() {
    let (listener, authority) = target().await;
    let proxy = start(std::slice::from_ref(&authority));
    let mut idle = Vec::new();
    for _ in 0..130 {
        idle.push(TcpStream::connect(proxy.local_addr()).await.unwrap());
    }
    let run = proxy.ticket();
    let started = Instant::now();
    let _tunnel = tunnel(&proxy, &listener, &authority, Some(&run)).await;
    assert!(started.elapsed() < PROMPT);
    // The newest idle connections are still there; the oldest were let go.
    assert!(still_open(idle.last_mut().unwrap()).await);
    let oldest = until_closed(&mut idle[0], PATIENCE).await;
    assert!(
        oldest.is_empty() || oldest.ends_with("confine: too many connections to the proxy\n"),
        "{oldest}"
    );
}

/// 130 connections that each sent one byte of a head (a slow loris); a request still gets
/// through promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_loris_connections_do_not_keep_a_request_out() {
    let (listener, authority) = target().await;
    let proxy = start(std::slice::from_ref(&authority));
    let mut loris = Vec::new();
    for _ in 0..130 {
        let mut stream = TcpStream::connect(proxy.local_addr()).await.unwrap();
        stream.write_all(b"C").await.unwrap();
        loris.push(stream);
    }
    let run = proxy.ticket();
    let started = Instant::now();
    let _tunnel = tunnel(&proxy, &listener, &authority, Some(&run)).await;
    assert!(started.elapsed() < PROMPT);
}

/// At most 64 connections wait for their head: the 64th waits beside the others, the 65th
/// takes the place of the oldest, which is closed with a one-line reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_65th_waiting_connection_takes_the_oldest_ones_place() {
    let proxy = start(&[]);
    let mut waiting = Vec::new();
    for _ in 0..64 {
        waiting.push(TcpStream::connect(proxy.local_addr()).await.unwrap());
    }
    // At the bound: the oldest is still open once the proxy has taken all 64 in (its
    // accepts are in order; the newest seen open means all were taken).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(still_open(&mut waiting[0]).await, "64 may wait");
    let _newest = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let oldest = until_closed(&mut waiting[0], PATIENCE).await;
    assert!(
        oldest.is_empty()
            || oldest.ends_with("\r\n\r\nconfine: too many connections to the proxy\n"),
        "{oldest}"
    );
    assert!(
        oldest.is_empty() || oldest.starts_with("HTTP/1.1 503 "),
        "{oldest}"
    );
    assert!(still_open(&mut waiting[1]).await, "only the oldest leaves");
}

/// A connection that sends its head a byte a second is closed about ten seconds after it
/// came, with a 408 line, however many bytes it sent; a request beside it gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_dribbled_a_byte_a_second_is_closed_after_10_s() {
    let (listener, authority) = target().await;
    let proxy = start(std::slice::from_ref(&authority));
    let started = Instant::now();
    let mut dribble = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let head = format!("CONNECT {authority} HTTP/1.1\r\nX-Pad: {}", "p".repeat(64));
    let mut answer = Vec::new();
    let mut closed = false;
    let mut chunk = [0u8; 1024];
    // One byte a second, at most 30 of them; each pass waits a second for the close.
    for byte in head.as_bytes().iter().take(30) {
        if dribble.write_all(std::slice::from_ref(byte)).await.is_err() {
            closed = true;
            break;
        }
        match tokio::time::timeout(Duration::from_secs(1), dribble.read(&mut chunk)).await {
            Err(_) => {}
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => {
                answer.extend_from_slice(&chunk[..n]);
                let rest = until_closed(&mut dribble, PATIENCE).await;
                answer.extend_from_slice(rest.as_bytes());
                closed = true;
                break;
            }
        }
    }
    let took = started.elapsed();
    assert!(closed, "still open after {took:?}");
    assert!(
        took >= Duration::from_millis(9500) && took < Duration::from_secs(25),
        "closed after {took:?}"
    );
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty()
            || (answer.starts_with("HTTP/1.1 408 ")
                && answer.ends_with("\r\n\r\nconfine: no request head within 10 s\n")),
        "{answer}"
    );
    // The twin: a whole head at once is served.
    let run = proxy.ticket();
    let _tunnel = tunnel(&proxy, &listener, &authority, Some(&run)).await;
}
