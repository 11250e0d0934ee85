//! The network policy of confined children: the allow list and the proxy that enforces it.
//!
//! [`AllowList::build`] parses `--allow-net` entries ([`Entry`]: `HOST`, `HOST:PORT`,
//! `*.DOMAIN`, `*.DOMAIN:PORT`, IP literals with or without a port) and expands the presets
//! `@npm`, `@pypi`, `@crates` and `@github` once, by asking where each ecosystem's own client
//! is configured to go (npm's configured registries; pip's index from `PIP_INDEX_URL` /
//! `PIP_EXTRA_INDEX_URL`, its configuration, else the defaults pip reports; cargo's configured
//! registries and source replacement, else its registry cache; GitHub's web, API, archive and
//! raw-content hosts). A malformed entry, a preset whose client is not installed, or one whose
//! hosts cannot be read is an [`EntryError`] whose one line names it. An entry without a port
//! means 443 and 80; names compare case-insensitively, without a trailing dot; `*.d` matches
//! the names ending in `.d`, not `d` itself.
//!
//! [`Proxy::start`] serves HTTP/1.1 on a listener the caller made: `CONNECT host:port`
//! (answered `200`, then the bytes pass both ways unread; TLS is never terminated) and
//! absolute-form requests (`GET http://host[:port]/path`, sent to the origin in origin form
//! without `Proxy-Authorization`, with `Connection: close`, then the bytes pass both ways).
//! A request in origin form, to the proxy itself, is `400`. [`Proxy::ticket`] issues a
//! [`Ticket`] per run or job: its [`Ticket::env`] points a child's `HTTPS_PROXY` and friends at
//! the proxy, and [`Ticket::decisions`] lists what the run asked for ([`Decision`]).
//!
//! ```
//! use confine_netpolicy::{AllowList, Proxy, ProxyOptions};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! rt.block_on(async {
//!     let policy = AllowList::build(&["*.example.test", "127.0.0.1:9"])?;
//!     assert!(policy.allows("pkg.example.test", 443));
//!     assert!(!policy.allows("example.test", 443));
//!     let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//!     let proxy = Proxy::start(listener, policy, ProxyOptions::default())?;
//!     let ticket = proxy.ticket();
//!     let mut child = tokio::net::TcpStream::connect(proxy.local_addr()).await?;
//!     child.write_all(b"CONNECT elsewhere.test:443 HTTP/1.1\r\n\r\n").await?;
//!     let mut answer = String::new();
//!     child.read_to_string(&mut answer).await?;
//!     assert!(answer.starts_with("HTTP/1.1 403 "));
//!     assert!(answer.ends_with("confine: elsewhere.test:443 refused: not on the allow list\n"));
//!     // No token was sent: decided by the same policy, recorded under no ticket.
//!     assert!(ticket.decisions().is_empty());
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The decision
//!
//! In this order, each step answering before any byte reaches a target: the head is read by
//! hand up to its exact bound ([`ProxyOptions::max_head`], 16 KiB by default, the blank line
//! included; one byte more is `431`), whole within [`ProxyOptions::head_timeout`] of the
//! accept (10 s; else `408` and closed), and parsed by `httparse`; the connection takes a
//! place among its run's (see *One run cannot starve the others*; else `503 too many
//! connections from this run`); the host and port must match an
//! entry (else `403 not on the allow list`); a name is resolved by the proxy's own resolver
//! (else `502 does not resolve`; an answer is kept 30 seconds for at most 256 names, a failure
//! never, and a kept answer is checked on every use as a fresh one is); every address it
//! resolves to must be reachable: the cloud metadata addresses (169.254.169.254,
//! 169.254.170.2, 100.100.100.200, 168.63.129.16, fd00:ec2::254), loopback, private (10/8,
//! 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16, fe80::/10), site-local
//! (fec0::/10), unspecified (0.0.0.0/8, `::`), multicast and broadcast are refused with the
//! class named (`403 resolves to a loopback address`); an IPv6 address that carries an IPv4
//! address (mapped, translated, compatible, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4,
//! Teredo's server and client) is judged by the IPv4 address it carries; one refused address
//! refuses the name; an IP literal is exempt from the classes only when the embedder listed
//! that literal itself (one a preset yielded is judged like a name's address);
//! the proxy's own listening address is always refused (`403 is the proxy's own address`);
//! more than [`ProxyOptions::max_tunnels`] open tunnels (64 by default) is `503 too many open
//! tunnels`; then the proxy connects to a checked address, never resolving the name again.
//! Every refusal has the one-line body `confine: HOST:PORT refused: REASON`.
//! Documentation and shared ranges (192.0.2/24, 100.64/10, 198.18/15, …) are not refused:
//! some networks route their registries through them. A tunnel with no byte either way for
//! [`ProxyOptions::idle`] (5 minutes by default) is closed. Both sockets of a tunnel send
//! without Nagle's delay (`TCP_NODELAY`): the proxy relays each read as one write, and a small
//! write must not wait for the ACK of the one before. Each decision is logged at info
//! (`tracing`).
//!
//! # One run cannot starve the others
//!
//! Every run and job of a server reaches the one proxy through one listener, so the proxy
//! cannot tell runs apart when a connection is accepted: all come from the same loopback. A
//! run is known by its ticket's token, which its clients present in the head
//! (`Proxy-Authorization`, from the user information of the proxy URL in their
//! environment). The bounds follow from that:
//!
//! - **Before the head**, no run is known, so no connection is refused for want of a place:
//!   at most [`ProxyOptions::max_waiting`] (64) connections wait for their head, and one more
//!   takes the place of the *oldest* waiting one, which is closed (`503 too many connections
//!   to the proxy`). A client sends its head as soon as it has connected, so it waits for a
//!   moment at most and is never the oldest; connections that send nothing, or a byte now
//!   and then, are the oldest and leave first ([`WaitingRoom`], which `confine mcp --http`
//!   uses for its unauthenticated connections too). Whatever it sends, a connection whose head is
//!   not whole within [`ProxyOptions::head_timeout`] (10 s of its accept) is closed with
//!   `408`.
//! - **After the head**, a connection counts against its run: at most
//!   [`ProxyOptions::max_per_run`] (32) connections of one ticket at once, whether being
//!   decided, being refused or tunnelling; the next is `503 too many connections from this
//!   run`, answered by one write without lingering, and recorded under the ticket. Requests
//!   without a live ticket's token (a client that drops the proxy's credentials, or a run
//!   that hides its token) share one bound of [`ProxyOptions::max_unattributed`] (16).
//!   With 64 tunnels per server, a run at its 32 (and the 16 of no run beside it) leaves
//!   the other runs 16 at least.
//!
//! Per-run listeners were weighed and set aside: in the shared namespace every port is
//! reachable from every run, so a port would identify a run no better than its token, and
//! the Landlock mode would need a rule per run. What the bounds do not cover: a run that
//! reads another run's token (where each run has a PID namespace of its own, another run's
//! environment is out of its sight) can spend that run's places, and runs acting together can
//! fill the server's 64 tunnels.
//!
//! # Threat model
//!
//! The children are assumed hostile; the mechanism that leaves them no way out but the proxy
//! is the embedder's (a network namespace, or Landlock TCP rules). What the proxy sees is a
//! name or address and a port per request, and for plain HTTP the request itself. It never
//! inspects TLS: inside a `CONNECT` tunnel the child may speak anything to the host it was
//! allowed, so the policy is one of hosts and ports, not of URLs or content. DNS rebinding is
//! handled by resolving once, checking every address, and connecting to a checked address:
//! a name whose answer changes between the check and the connection cannot steer the proxy,
//! because it never asks again. A child cannot reach the host's loopback or private network
//! through a name on the list, only through an IP literal the embedder listed; nor through a
//! cloud metadata address or an IPv6 form (NAT64, 6to4, Teredo, compatible, mapped) whose
//! translator or relay would turn it into such an address. The proxy does not protect the
//! allowed hosts from what a child sends them, nor keep a child from passing data out to an
//! allowed host.
//!
//! The presets are read before any child runs, as the embedder's user and unsandboxed, often
//! from a process whose working directory is the workspace the model writes. They therefore
//! read only the user's and the system's configuration: each client runs with `/` as its
//! working directory (no `pip/__init__.py`, project `.npmrc` or `.python-version` of the
//! workspace is seen), Python isolated (`-I`), npm in global mode (no project `.npmrc`,
//! wherever it looks), cargo's configuration read from `$CARGO_HOME` alone; and a host a
//! preset yields is no more trusted than a name: an IP literal among them is refused by the
//! address classes unless the embedder listed it. The clients themselves are found on the
//! embedder's `PATH`, which is the embedder's to keep free of the workspace.
//!
//! The ticket's token (128 random bits, hex) is *attribution*, not authority: a request
//! carrying `Proxy-Authorization: Basic base64(confine:TOKEN)` of a live ticket has its
//! decision recorded under that ticket; a request without one, or with an unknown token, is
//! decided by the same policy (and logged) but recorded under no ticket. Security never
//! depends on the token: a child that reads or guesses another run's token can only make its
//! own requests appear in that run's list, and spend that run's connections.
//!
//! # Platform support
//!
//! The allow list and the proxy are plain tokio and run wherever it does; the presets find
//! their clients on Unix `PATH`s and run them through `confine-nodeexec` (Linux). Linux is
//! tested.

#![deny(missing_docs)]

mod address;
mod allow;
mod entry;
mod head;
mod names;
mod presets;
mod proxy;
mod ticket;
mod waiting;

pub use allow::AllowList;
pub use entry::{Entry, EntryError};
pub use presets::ClientEnv;
pub use proxy::{Proxy, ProxyOptions};
pub use ticket::{Decision, MAX_DECISIONS, Ticket, random_bytes};
pub use waiting::{WaitingPlace, WaitingRoom};
