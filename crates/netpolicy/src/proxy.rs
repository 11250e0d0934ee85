//! The proxy: accepts, decides, tunnels.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::address::refusal;
use crate::allow::AllowList;
use crate::entry::{RequestHost, canonical_ip};
use crate::head::{HeadError, Target, read_head};
use crate::names::Names;
use crate::ticket::{Decision, Registry, Ticket, TicketState};
use crate::waiting::{WaitingPlace, WaitingRoom};

/// How long resolving a name, connecting to a target or writing a refusal may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a refused connection is drained before it is closed.
const LINGER: Duration = Duration::from_secs(1);
/// How many resolved addresses are looked at (each is checked; the first that connects wins).
const MAX_ADDRESSES: usize = 32;
/// The buffer of each direction of a tunnel.
const TUNNEL_BUFFER: usize = 8 * 1024;

/// The proxy's bounds.
#[derive(Clone, Debug)]
pub struct ProxyOptions {
    /// Open tunnels at most (a forwarded plain-HTTP request counts as one); one more is `503`.
    /// Default 64.
    pub max_tunnels: usize,
    /// Connections at most of one run (those whose head carried its ticket's token: being
    /// decided, being refused, or tunnelling); one more is `503 too many connections from
    /// this run`. Default 32, half the tunnels, so one run leaves the others room.
    pub max_per_run: usize,
    /// Connections at most whose head carried no live ticket's token (all of them together,
    /// whichever run they come from); one more is `503`. Default 16: the clients of a run
    /// present its token, so a run that hides it gains little beside its own bound.
    pub max_unattributed: usize,
    /// Connections at most whose head has not yet arrived. One more does not wait and is not
    /// refused: the oldest of them is closed instead (with a `503` line), so connections that
    /// send nothing cannot keep out one that sends its head at once. Default 64.
    pub max_waiting: usize,
    /// A connection's whole head must arrive within this long of its accept, else it is closed
    /// with a `408` line (sending a byte now and then does not extend it). Default 10 s.
    pub head_timeout: Duration,
    /// Bytes of a request head at most, its blank line included; one more is `431`.
    /// Default 16 KiB.
    pub max_head: usize,
    /// A tunnel with no byte in either direction for this long is closed. Default 5 minutes.
    pub idle: Duration,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            max_tunnels: 64,
            max_per_run: 32,
            max_unattributed: 16,
            max_waiting: 64,
            head_timeout: Duration::from_secs(10),
            max_head: 16 * 1024,
            idle: Duration::from_secs(300),
        }
    }
}

struct Shared {
    policy: AllowList,
    options: ProxyOptions,
    own: SocketAddr,
    registry: Arc<Registry>,
    tunnels: Arc<Semaphore>,
    /// The places of connections whose head named no live ticket.
    unattributed: Arc<Semaphore>,
    /// The connections whose head has not arrived, oldest first.
    waiting: Arc<WaitingRoom>,
    /// The names resolved lately (each use checks their addresses again).
    names: Names,
}

/// A running proxy. Dropping it stops it: the listener is closed and every tunnel with it.
pub struct Proxy {
    addr: SocketAddr,
    registry: Arc<Registry>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("addr", &self.addr).finish()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept task owns the listener and the set of connection tasks; aborting it drops
        // both, and dropping the set aborts every connection (their sockets close with them).
        self.task.abort();
    }
}

impl Proxy {
    /// Serve on a listener the caller made (inside the children's network namespace, or on the
    /// host's loopback). Must be called in a tokio runtime.
    pub fn start(
        listener: std::net::TcpListener,
        policy: AllowList,
        options: ProxyOptions,
    ) -> std::io::Result<Proxy> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| std::io::Error::other("Proxy::start needs a tokio runtime"))?;
        let own = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let registry = Arc::new(Registry::new(options.max_per_run));
        let shared = Arc::new(Shared {
            tunnels: Arc::new(Semaphore::new(options.max_tunnels)),
            unattributed: Arc::new(Semaphore::new(options.max_unattributed)),
            waiting: WaitingRoom::new(options.max_waiting),
            policy,
            options,
            own,
            registry: Arc::clone(&registry),
            names: Names::default(),
        });
        let task = runtime.spawn(accept_loop(listener, shared));
        Ok(Proxy {
            addr: own,
            registry,
            task,
        })
    }

    /// The address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A ticket for one run or job: the decisions of requests carrying its token are recorded
    /// under it.
    pub fn ticket(&self) -> Ticket {
        Ticket::issue(&self.registry, self.addr)
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // The head's time counts from here, whatever the client sends.
                    let deadline = tokio::time::Instant::now() + shared.options.head_timeout;
                    let place = shared.waiting.enter();
                    // A tunnel relays each read as one write: Nagle's wait for an ACK before a
                    // small write would add a round trip (or a delayed ACK's 40 ms) to the
                    // exchanges the two ends made without it.
                    let _ = stream.set_nodelay(true);
                    let shared = Arc::clone(&shared);
                    connections.spawn(async move {
                        serve(stream, &shared, place, deadline).await;
                    });
                }
                Err(error) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    tracing::warn!(%error, "network proxy: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A duration as the one-line answers name it: `10 s`, or `300 ms` below a whole second.
fn spoken(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "Connection established",
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Service Unavailable",
    }
}

fn response(status: u16, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}\n",
        status_text(status),
        body.len() + 1
    )
    .into_bytes()
}

/// Writes the answer and closes, lingering a little: what the client still sends (the rest of
/// an over-long head) is read and dropped for at most a second or 64 KiB, so that closing with
/// unread input does not reset the connection before the client has read the answer.
async fn answer(stream: &mut TcpStream, status: u16, body: &str) {
    let bytes = response(status, body);
    let written = tokio::time::timeout(STEP_TIMEOUT, async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return;
    }
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = [0u8; 4096];
        let mut left = 64 * 1024usize;
        // Each pass reads at least one byte or ends; at most 64 KiB in all.
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// The outcome of the policy for one request.
enum Verdict {
    Connect(TcpStream, tokio::sync::OwnedSemaphorePermit),
    Refuse(u16, &'static str),
    /// Allowed, but no checked address accepted a connection.
    Unreachable,
}

async fn serve(
    mut client: TcpStream,
    shared: &Shared,
    place: WaitingPlace,
    deadline: tokio::time::Instant,
) {
    let read = tokio::select! {
        read = read_head(&mut client, shared.options.max_head, deadline) => read,
        () = place.evicted() => {
            // Newer connections took this one's place: answered by one write into the
            // socket's buffer, without waiting, then closed.
            let _ = client.try_write(&response(503, "confine: too many connections to the proxy"));
            return;
        }
    };
    drop(place);
    let head = match read {
        Ok(head) => head,
        Err(HeadError::TooLarge) => {
            let body = format!(
                "confine: request head over {} bytes",
                shared.options.max_head
            );
            return answer(&mut client, 431, &body).await;
        }
        Err(HeadError::Bad(why)) => {
            return answer(&mut client, 400, &format!("confine: bad request: {why}")).await;
        }
        Err(HeadError::Late) => {
            let body = format!(
                "confine: no request head within {}",
                spoken(shared.options.head_timeout)
            );
            let _ = client.try_write(&response(408, &body));
            return;
        }
        Err(HeadError::Gone) => return,
    };
    let ticket = head.token.as_deref().and_then(|t| shared.registry.find(t));
    // The connection's place among its run's (or among those of no run), held until it ends.
    let run_place = match &ticket {
        Some(ticket) => ticket.connection(),
        None => Arc::clone(&shared.unattributed).try_acquire_owned().ok(),
    };
    let Some(_run_place) = run_place else {
        let reason = if ticket.is_some() {
            "too many connections from this run"
        } else {
            "too many connections without a run's proxy credentials"
        };
        note(
            &Decision {
                host: head.host.as_text(),
                port: head.port,
                allowed: false,
                reason: Some(reason.to_owned()),
            },
            ticket.as_deref(),
        );
        // Answered by one write, without lingering: a run past its bound gets no more of the
        // proxy's time.
        let target = head.host.with_port(head.port);
        let _ = client.try_write(&response(
            503,
            &format!("confine: {target} refused: {reason}"),
        ));
        return;
    };
    let verdict = decide(&head.host, head.port, shared).await;
    let (allowed, reason) = match &verdict {
        Verdict::Refuse(_, reason) => (false, Some((*reason).to_owned())),
        Verdict::Connect(..) | Verdict::Unreachable => (true, None),
    };
    let decision = Decision {
        host: head.host.as_text(),
        port: head.port,
        allowed,
        reason,
    };
    note(&decision, ticket.as_deref());
    drop(ticket);
    let target = head.host.with_port(head.port);
    let (mut server, permit) = match verdict {
        Verdict::Connect(server, permit) => (server, permit),
        Verdict::Refuse(status, reason) => {
            return answer(
                &mut client,
                status,
                &format!("confine: {target} refused: {reason}"),
            )
            .await;
        }
        Verdict::Unreachable => {
            return answer(
                &mut client,
                502,
                &format!("confine: {target} refused: cannot be reached"),
            )
            .await;
        }
    };
    let first = match head.target {
        Target::Connect => {
            if client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            head.rest
        }
        Target::Forward(mut origin) => {
            origin.extend_from_slice(&head.rest);
            origin
        }
    };
    if !first.is_empty() && server.write_all(&first).await.is_err() {
        return;
    }
    pipe(client, server, shared.options.idle).await;
    drop(permit);
}

/// Logs a decision at info and records it under its run's ticket, if any.
fn note(decision: &Decision, ticket: Option<&TicketState>) {
    tracing::info!(
        host = %decision.host,
        port = decision.port,
        allowed = decision.allowed,
        reason = decision.reason.as_deref().unwrap_or(""),
        attributed = ticket.is_some(),
        "network proxy decision"
    );
    if let Some(ticket) = ticket {
        ticket.record(decision);
    }
}

/// Whether `addr` is the proxy's own listening address (every address on its port, when it
/// listens on the unspecified address).
fn is_own(addr: SocketAddr, own: SocketAddr) -> bool {
    let own_ip = canonical_ip(own.ip());
    addr.port() == own.port() && (canonical_ip(addr.ip()) == own_ip || own_ip.is_unspecified())
}

/// The decision order: the entry, the proxy's own resolution, the address classes, the
/// proxy's own address, the tunnel bound, then the connection to a checked address.
async fn decide(host: &RequestHost, port: u16, shared: &Shared) -> Verdict {
    let Some(_entry) = shared.policy.matching(host, port) else {
        return Verdict::Refuse(403, "not on the allow list");
    };
    let addrs: Vec<SocketAddr> = match host {
        // Only an entry of that very IP literal matches an IP literal. Its class is not
        // checked when the embedder named it; one a preset yielded is checked like a name's.
        RequestHost::Ip(ip) => {
            if !shared.policy.lists_literal(*ip, port)
                && let Some(reason) = refusal(*ip)
            {
                return Verdict::Refuse(403, reason);
            }
            vec![SocketAddr::new(*ip, port)]
        }
        RequestHost::Name(name) => {
            let lookup = || async {
                let resolved = tokio::time::timeout(
                    STEP_TIMEOUT,
                    tokio::net::lookup_host((name.as_str(), port)),
                )
                .await;
                match resolved {
                    Ok(Ok(found)) => found.take(MAX_ADDRESSES).collect(),
                    _ => Vec::new(),
                }
            };
            let addrs: Vec<SocketAddr> = shared
                .names
                .resolve(name, port, std::time::Instant::now(), lookup)
                .await
                .to_vec();
            if addrs.is_empty() {
                return Verdict::Refuse(502, "does not resolve");
            }
            // One refused address refuses the name: a name that answers both a public and a
            // private address is how a rebinding attack starts.
            if let Some(reason) = addrs.iter().find_map(|a| refusal(a.ip())) {
                return Verdict::Refuse(403, reason);
            }
            addrs
        }
    };
    if addrs.iter().any(|a| is_own(*a, shared.own)) {
        return Verdict::Refuse(403, "is the proxy's own address");
    }
    let Ok(permit) = Arc::clone(&shared.tunnels).try_acquire_owned() else {
        return Verdict::Refuse(503, "too many open tunnels");
    };
    // Connect to the checked addresses only: the name is never resolved again.
    for addr in addrs {
        let addr = SocketAddr::new(canonical_ip(addr.ip()), addr.port());
        if let Ok(Ok(stream)) = tokio::time::timeout(STEP_TIMEOUT, TcpStream::connect(addr)).await {
            let _ = stream.set_nodelay(true);
            return Verdict::Connect(stream, permit);
        }
    }
    Verdict::Unreachable
}

/// Passes bytes both ways until both sides have closed, an error, or `idle` with no byte.
async fn pipe(mut client: TcpStream, mut server: TcpStream, idle: Duration) {
    enum Event {
        FromClient(std::io::Result<usize>),
        FromServer(std::io::Result<usize>),
        Idle,
    }
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let mut up = vec![0u8; TUNNEL_BUFFER];
    let mut down = vec![0u8; TUNNEL_BUFFER];
    let (mut client_open, mut server_open) = (true, true);
    // Each pass moves at least one byte, closes a side, or ends the tunnel; the idle bound
    // ends a tunnel where nothing moves.
    while client_open || server_open {
        let event = tokio::select! {
            r = client_read.read(&mut up), if client_open => Event::FromClient(r),
            r = server_read.read(&mut down), if server_open => Event::FromServer(r),
            () = tokio::time::sleep(idle) => Event::Idle,
        };
        let (bytes, to, open) = match event {
            Event::Idle => return,
            Event::FromClient(r) => (r.map(|n| &up[..n]), &mut server_write, &mut client_open),
            Event::FromServer(r) => (r.map(|n| &down[..n]), &mut client_write, &mut server_open),
        };
        match bytes {
            Err(_) => return,
            Ok([]) => {
                *open = false;
                let _ = to.shutdown().await;
            }
            Ok(bytes) => {
                if !matches!(
                    tokio::time::timeout(idle, to.write_all(bytes)).await,
                    Ok(Ok(()))
                ) {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_own_matches_the_port_on_every_address_of_an_unspecified_listener() {
        let own: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert!(is_own("127.0.0.1:4000".parse().unwrap(), own));
        assert!(is_own("[::ffff:127.0.0.1]:4000".parse().unwrap(), own));
        assert!(!is_own("127.0.0.1:4001".parse().unwrap(), own));
        assert!(!is_own("127.0.0.2:4000".parse().unwrap(), own));
        let any: SocketAddr = "0.0.0.0:4000".parse().unwrap();
        assert!(is_own("127.0.0.2:4000".parse().unwrap(), any));
        assert!(!is_own("127.0.0.2:4001".parse().unwrap(), any));
    }
}
