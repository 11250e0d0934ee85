//! `confine mcp --http ADDR:PORT`: the same tools over MCP's Streamable HTTP transport at
//! `/mcp`, with rmcp's server (its tower service, served by hyper) behind a front of our own.
//!
//! Both protocol forms rmcp speaks are served: sessions opened by `initialize` (protocol
//! versions up to 2025-11-25) and stateless requests (2026-07-28). Each session has a tool
//! registry of its own, so its jobs end with it and no other session sees them; stateless
//! requests share one registry that lives as long as the server. Every registry takes its
//! run slots from one bound (`--max-processes`) and its job slots from another
//! (`--max-jobs`): both bounds are the server's, whatever the number of sessions.
//!
//! The front checks every request before rmcp sees it, in this order:
//!
//! 1. DNS rebinding: a `Host` that is neither the bound address nor `localhost:PORT` (on an
//!    unspecified address, `0.0.0.0` or `::` with `--http-public`: any host with the bound
//!    port, since the names the machine is reached by are unknown), or an
//!    `Origin` that is present and not `http://localhost`, `http://127.0.0.1` or
//!    `http://[::1]` (any port), is `403`;
//! 2. `GET /healthz` is `200` with `ok`, without a token (a health probe cannot carry one); it
//!    says only that the server answers. No other method or path is answered before step 3;
//! 3. authentication: `Authorization: Bearer TOKEN`, compared in constant time by a
//!    hand-written fold over the bytes (no early exit; the length is folded in too), else `401`
//!    with `WWW-Authenticate: Bearer`;
//! 4. the path is `/mcp` (else `404`);
//! 5. a request body of at most [`MAX_BODY_BYTES`] (4 MiB), read within
//!    [`BODY_READ_TIMEOUT`], else `413` (`408` when too slow);
//! 6. an `initialize` that would open session [`MAX_SESSIONS`] + 1 is `503`.
//!
//! Connections that have not authenticated cannot crowd out those that have. Every
//! connection is accepted; until one of its requests passes the checks above up to the
//! token, it waits in a [`confine_netpolicy::WaitingRoom`] of [`MAX_UNAUTHENTICATED`] (64)
//! places, and one more connection takes the place of the oldest waiting one, which is
//! closed. A client with the token sends its request at once, so connections that send
//! nothing or a byte at a time are the ones that give way. A request's head must be whole
//! within [`HEAD_READ_TIMEOUT`] (10 s, hyper's header read timeout: counted from the
//! connection's start, or from the end of the previous request on it, and not extended by
//! the bytes that trickle in), else the connection is closed. Authenticated connections are
//! at most [`MAX_CONNECTIONS`] (256); a request that would authenticate one more is `503`.
//!
//! What rmcp 3.11 does not do and this module adds: the cap on live sessions, idle sessions
//! ended after 30 minutes (rmcp's default is 5), and the cancellation of a session-form call
//! whose response stream the client drops (a `notifications/cancelled` is handed to the
//! session for it, so the call's processes die as on an explicit cancel).
//!
//! SIGTERM, SIGINT (and the other signals of [`crate::cli::common::ending_signal`]) cancel
//! every running call of every session, wait until each has ended and every registry is
//! dropped (its jobs killed), and exit 0.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::cli::common::{ToolArgs, usage};
use crate::serve::mcp::server::{ConfineServer, Setting};

/// The largest request body accepted (`413` beyond).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// The most sessions alive at once (`503` for an `initialize` beyond).
pub const MAX_SESSIONS: usize = 64;
/// A session without any request for this long is ended, with its runs and jobs.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// The environment variable that shortens [`SESSION_IDLE`] (milliseconds), for the tests.
const IDLE_ENV: &str = "CONFINE_HTTP_IDLE_MS";
/// The most authenticated connections at once (a connection is authenticated by its first
/// request that passes the front's checks); a request that would authenticate one more is
/// `503`.
pub const MAX_CONNECTIONS: usize = 256;
/// The most connections not yet authenticated at once; one more takes the place of the
/// oldest, which is closed.
pub const MAX_UNAUTHENTICATED: usize = 64;
/// A request's head must arrive whole within this long of the connection's start (or of the
/// end of the previous request on it), whatever it sends meanwhile.
pub const HEAD_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A request's body must arrive within this long.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the end of the server waits for running calls to end once cancelled.
const END_WAIT: Duration = Duration::from_millis(900);

/// The HTTP options of `confine mcp`.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpArgs {
    /// Serve MCP over Streamable HTTP at http://ADDR:PORT/mcp instead of stdio (PORT 0 picks
    /// a free port). Loopback only unless --http-public. Requests need
    /// `Authorization: Bearer TOKEN`: the token is CONFINE_HTTP_TOKEN, else read from
    /// --http-token-file.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,
    /// Allow --http on an address that is not loopback (put TLS in front of such a server).
    #[arg(long, requires = "http")]
    pub http_public: bool,
    /// The file holding the bearer token; created with mode 0600 and a new random token when
    /// missing. Must not be beneath the workspace root.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub http_token_file: Option<PathBuf>,
    /// Serve without authentication (only on a loopback address).
    #[arg(long, requires = "http", conflicts_with_all = ["http_token_file", "http_public"])]
    pub http_no_auth: bool,
}

/// Everything decided before serving: the address, the token (`None`: unauthenticated).
struct Plan {
    addr: SocketAddr,
    token: Option<Vec<u8>>,
}

/// Check the flags and find the token; a usage error is exit status 2 with one line.
fn plan(http: &HttpArgs, addr: SocketAddr, root: &Path) -> Result<Plan, ExitCode> {
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

/// 32 random bytes from `/dev/urandom`, base64url without padding (43 characters).
fn new_token() -> std::io::Result<String> {
    use base64::Engine as _;
    use std::io::Read as _;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
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
fn authorized(header: Option<&hyper::header::HeaderValue>, token: &[u8]) -> bool {
    let Some(value) = header else {
        return false;
    };
    let value = value.as_bytes();
    let Some((scheme, rest)) = value.split_at_checked(7) else {
        return false;
    };
    scheme.eq_ignore_ascii_case(b"bearer ") && same_token(rest.trim_ascii(), token)
}

/// Whether an `Origin` is one of this machine's own pages: `http://localhost`,
/// `http://127.0.0.1` or `http://[::1]`, with any port.
fn local_origin(origin: &[u8]) -> bool {
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

/// One connection's standing: waiting unauthenticated (a place in the room), or
/// authenticated (a place among [`MAX_CONNECTIONS`]).
struct Standing {
    waiting: std::sync::Mutex<Option<confine_netpolicy::WaitingPlace>>,
    served: std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
}

/// Everything a request's front needs.
struct Front {
    token: Option<Vec<u8>>,
    /// The `Host` values accepted: the bound address and `localhost:PORT`.
    hosts: Vec<String>,
    /// Bound to every address (`0.0.0.0`, `::`, with `--http-public`): any `Host` naming the
    /// bound port is accepted, since the names clients reach the machine by are not known.
    any_host_on: Option<u16>,
    rmcp: StreamableHttpService<ConfineServer, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    /// Held while an `initialize` is counted against the cap and handed to rmcp, so that two
    /// at once cannot both take the last place.
    opening: tokio::sync::Mutex<()>,
    /// The places of authenticated connections.
    served: Arc<tokio::sync::Semaphore>,
}

tokio::task_local! {
    /// Set while rmcp handles an `initialize`: the service factory then builds a registry of
    /// the session's own instead of handing out the shared one.
    static OPENS_SESSION: bool;
}

type Answer = Response<BoxBody<Bytes, Infallible>>;

fn plain(status: StatusCode, text: &'static str) -> Answer {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain")
        .body(Full::new(Bytes::from_static(text.as_bytes())).boxed())
        .expect("a valid response")
}

impl Front {
    /// Moves a connection whose request passed the checks from the waiting room to the
    /// authenticated ones; `false` when those are all taken.
    fn authenticate(&self, standing: &Standing) -> bool {
        let mut served = standing
            .served
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if served.is_some() {
            return true;
        }
        let Ok(place) = self.served.clone().try_acquire_owned() else {
            return false;
        };
        *served = Some(place);
        standing
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        true
    }

    async fn answer(self: Arc<Self>, request: Request<Incoming>, standing: &Standing) -> Answer {
        let headers = request.headers();
        let host_ok = headers
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| {
                self.hosts.iter().any(|ok| ok.eq_ignore_ascii_case(h))
                    || self.any_host_on.is_some_and(|port| {
                        h.rsplit_once(':')
                            .is_some_and(|(_, p)| p == port.to_string())
                    })
            });
        if !host_ok {
            return plain(StatusCode::FORBIDDEN, "forbidden: Host not accepted\n");
        }
        if let Some(origin) = headers.get(hyper::header::ORIGIN)
            && !local_origin(origin.as_bytes())
        {
            return plain(StatusCode::FORBIDDEN, "forbidden: Origin not accepted\n");
        }
        // The health probe: a kubelet cannot carry the token. Only this exact GET; anything
        // else (another method, `/healthz/x`) meets the token check below.
        if request.method() == hyper::Method::GET && request.uri().path() == "/healthz" {
            return plain(StatusCode::OK, "ok\n");
        }
        if let Some(token) = &self.token
            && !authorized(headers.get(hyper::header::AUTHORIZATION), token)
        {
            let mut answer = plain(StatusCode::UNAUTHORIZED, "unauthorized\n");
            answer.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
            return answer;
        }
        if request.uri().path() != "/mcp" {
            return plain(StatusCode::NOT_FOUND, "not found: MCP is served at /mcp\n");
        }
        if !self.authenticate(standing) {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many connections: 256 are open\n",
            );
        }
        let (parts, body) = request.into_parts();
        let body = match tokio::time::timeout(
            BODY_READ_TIMEOUT,
            Limited::new(body, MAX_BODY_BYTES).collect(),
        )
        .await
        {
            Err(_) => return plain(StatusCode::REQUEST_TIMEOUT, "request body too slow\n"),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request body over 4 MiB (4194304 bytes)\n",
                );
            }
            Ok(Err(_)) => return plain(StatusCode::BAD_REQUEST, "request body unreadable\n"),
            Ok(Ok(collected)) => collected.to_bytes(),
        };
        let session: Option<SessionId> = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(Into::into);
        let peek = if parts.method == hyper::Method::POST {
            Peek::of(&body)
        } else {
            Peek::default()
        };
        let method = peek.method.as_deref();
        let request_id = peek.id.clone();
        // `initialize` does not exist in the stateless form (2026-07-28): one that carries that
        // form's per-request protocol version is an unknown method there, 404 with -32601.
        // (rmcp routes every `initialize` to the session form.)
        if method == Some("initialize") && peek.stateless_version {
            let error = serde_json::json!({"jsonrpc": "2.0", "id": request_id,
                "error": {"code": -32601, "message": "Method not found: initialize"}});
            return Response::builder()
                .status(StatusCode::NOT_FOUND)
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(error.to_string())).boxed())
                .expect("a valid response");
        }
        let opens = session.is_none() && method == Some("initialize") && request_id.is_some();
        let request = Request::from_parts(parts, Full::new(body));
        let answer = if opens {
            let _opening = self.opening.lock().await;
            if self.sessions.sessions.read().await.len() >= MAX_SESSIONS {
                return plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many sessions (at most 64): end one with DELETE, or wait until one \
                     is idle for 30 minutes\n",
                );
            }
            OPENS_SESSION.scope(true, self.rmcp.handle(request)).await
        } else {
            OPENS_SESSION.scope(false, self.rmcp.handle(request)).await
        };
        match (session, request_id, method) {
            // A request of a session: its stream dropped before its end cancels the call.
            (Some(session), Some(id), Some(_)) if answer.status().is_success() => {
                let (parts, body) = answer.into_parts();
                let body = CancelOnDrop {
                    inner: body,
                    ended: false,
                    cancel: Some((self.sessions.clone(), session, id)),
                };
                Response::from_parts(parts, body.boxed())
            }
            _ => answer,
        }
    }
}

/// What the front needs of a POST's JSON-RPC message: its method, its id (a string or a
/// number), and whether its `params._meta` carries the stateless form's per-request protocol
/// version.
#[derive(Default)]
struct Peek {
    method: Option<String>,
    id: Option<Value>,
    stateless_version: bool,
}

impl Peek {
    /// Read `body` once without building its tree: unknown members (a call's arguments, a
    /// write's content) are skipped, not copied. A body this reading refuses (not one JSON
    /// object, a member of the wrong type, a duplicate member) is read again as a whole
    /// `Value`, so that every body is classified exactly as a `Value` would classify it.
    fn of(body: &[u8]) -> Peek {
        use serde::de::IgnoredAny;
        use std::borrow::Cow;

        #[derive(serde::Deserialize)]
        struct Message<'a> {
            #[serde(borrow, default)]
            method: Option<Cow<'a, str>>,
            #[serde(default)]
            id: Option<Value>,
            #[serde(default)]
            params: Option<Params>,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(rename = "_meta", default)]
            meta: Option<Meta>,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            #[serde(rename = "io.modelcontextprotocol/protocolVersion", default)]
            version: Present,
        }
        /// Whether a member is there, whatever its value (`null` included), read without
        /// keeping it.
        #[derive(Default)]
        struct Present(bool);
        impl<'de> serde::Deserialize<'de> for Present {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Present, D::Error> {
                IgnoredAny::deserialize(d).map(|_| Present(true))
            }
        }

        let id_of = |id: Option<Value>| id.filter(|id| id.is_string() || id.is_number());
        if let Ok(m) = serde_json::from_slice::<Message<'_>>(body) {
            return Peek {
                method: m.method.map(Cow::into_owned),
                id: id_of(m.id),
                stateless_version: m
                    .params
                    .and_then(|p| p.meta)
                    .is_some_and(|meta| meta.version.0),
            };
        }
        let Ok(m) = serde_json::from_slice::<Value>(body) else {
            return Peek::default();
        };
        Peek {
            method: m["method"].as_str().map(str::to_owned),
            id: id_of(m.get("id").cloned()),
            stateless_version: m["params"]["_meta"]
                .get("io.modelcontextprotocol/protocolVersion")
                .is_some(),
        }
    }
}

/// A session request's response body that, dropped before its end (the client closed the
/// stream), hands the session a `notifications/cancelled` for the request.
struct CancelOnDrop {
    inner: BoxBody<Bytes, Infallible>,
    ended: bool,
    cancel: Option<(Arc<LocalSessionManager>, SessionId, Value)>,
}

impl Body for CancelOnDrop {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.ended || self.inner.is_end_stream() {
            return;
        }
        let Some((sessions, session, id)) = self.cancel.take() else {
            return;
        };
        let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the client closed the request's stream"}});
        let Ok(message) = serde_json::from_value(note) else {
            return;
        };
        tracing::info!("a request's stream was dropped: cancelling its call");
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = sessions.accept_message(&session, message).await;
            });
        }
    }
}

/// The idle time of a session: [`SESSION_IDLE`] unless the tests shorten it.
fn session_idle() -> Duration {
    std::env::var(IDLE_ENV)
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(SESSION_IDLE, Duration::from_millis)
}

/// Run `confine mcp --http`: check the flags, bind, serve until a signal. Exit 0 then.
pub fn run(tools: &ToolArgs, http: &HttpArgs, addr: SocketAddr, setting: Setting) -> ExitCode {
    let plan = match plan(http, addr, &tools.root) {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    // One bound on concurrent runs, one on running jobs, one proxy and one children's
    // loopback for every registry of this server.
    let shared_parts = match tools.shared() {
        Ok(shared) => shared,
        Err(code) => return code,
    };
    // The shared registry (stateless requests), built now so that a root that cannot be used
    // is exit 2 before anything listens.
    let shared = match tools.registry_sharing(Some(&shared_parts)) {
        Ok(registry) => registry,
        Err(code) => return code,
    };
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("confine-mcp-http")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return usage("cannot start the async runtime"),
    };
    let code = runtime.block_on(serve(tools.clone(), plan, setting, shared, shared_parts));
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

async fn serve(
    tools: ToolArgs,
    plan: Plan,
    setting: Setting,
    shared: confine_tools::ToolRegistry,
    shared_parts: crate::cli::common::Shared,
) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(plan.addr).await {
        Ok(listener) => listener,
        Err(e) => {
            return usage(&format!(
                "--http {}: cannot listen: {}",
                plan.addr,
                e.kind()
            ));
        }
    };
    let Ok(bound) = listener.local_addr() else {
        return usage("--http: cannot read the bound address");
    };
    let shutdown = CancellationToken::new();
    let alive = Arc::new(());
    let shared =
        ConfineServer::new(shared, setting).with_lifetime(shutdown.child_token(), alive.clone());
    let names = shared.tool_names().join(", ");
    let root = std::path::absolute(&tools.root).unwrap_or_else(|_| tools.root.clone());
    let factory = {
        let shared = shared.clone();
        let shutdown = shutdown.clone();
        let alive = alive.clone();
        move || -> Result<ConfineServer, std::io::Error> {
            if !OPENS_SESSION.try_with(|opens| *opens).unwrap_or(false) {
                return Ok(shared.clone());
            }
            let registry = tools
                .registry_sharing(Some(&shared_parts))
                .map_err(|_| std::io::Error::other("the workspace root cannot be used"))?;
            Ok(ConfineServer::new(registry, setting)
                .with_lifetime(shutdown.child_token(), alive.clone()))
        }
    };
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(session_idle());
    let sessions = Arc::new(sessions);
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        // The front checks Host and Origin itself (see the module docs).
        .disable_allowed_hosts()
        .disable_allowed_origins();
    config.legacy_session_mode = true;
    let rmcp = StreamableHttpService::new(factory, sessions.clone(), config);
    let port = bound.port();
    let front = Arc::new(Front {
        token: plan.token.clone(),
        hosts: vec![bound.to_string(), format!("localhost:{port}")],
        any_host_on: bound.ip().is_unspecified().then_some(port),
        rmcp,
        sessions,
        opening: tokio::sync::Mutex::new(()),
        served: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
    });
    drop(shared);
    eprintln!(
        "confine {} mcp: serving {names} over HTTP (root {})",
        env!("CARGO_PKG_VERSION"),
        root.display(),
    );
    if plan.token.is_some() {
        eprintln!("listening on http://{bound}/mcp");
    } else {
        eprintln!("listening on http://{bound}/mcp (unauthenticated)");
    }
    // Connections not yet authenticated wait here; see the module docs.
    let room = confine_netpolicy::WaitingRoom::new(MAX_UNAUTHENTICATED);
    let signal = crate::cli::common::ending_signal();
    tokio::pin!(signal);
    loop {
        let (stream, _) = tokio::select! {
            () = &mut signal => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let place = room.enter();
        let evicted = place.evicted();
        let standing = Arc::new(Standing {
            waiting: std::sync::Mutex::new(Some(place)),
            served: std::sync::Mutex::new(None),
        });
        // Answers are small writes (SSE events): without this, Nagle's algorithm holds each
        // behind the client's delayed ACK, about 40 ms a call.
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let front = front.clone();
                let standing = standing.clone();
                async move { Ok::<_, Infallible>(front.answer(request, &standing).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEAD_READ_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            // Dropping the connection closes its socket: evicted from the waiting room, or
            // the server ends.
            tokio::select! {
                _ = &mut connection => {}
                () = evicted => tracing::debug!("an unauthenticated connection gave way"),
                () = stop.cancelled() => {}
            }
        });
    }
    tracing::info!("signal received: cancelling running calls");
    drop(listener);
    shutdown.cancel();
    drop(front);
    // Every call was cancelled; wait (bounded) until each has ended and every session's
    // server, with its registry and jobs, is dropped.
    let deadline = tokio::time::Instant::now() + END_WAIT;
    while Arc::strong_count(&alive) > 1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tracing::info!("MCP HTTP server stopped");
    ExitCode::SUCCESS
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

    #[test]
    fn the_peek_classifies_every_body_as_a_whole_value_would() {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
        let bodies = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":"a","method":"initialize","params":{{{meta}}}}}"#),
            format!(r#"{{"params":{{{meta}}},"method":"initialize","id":2}}"#),
            r#"{"id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a","content":"x
y"}}}"#.to_owned(),
            r#"{"id":null,"method":"tools/list"}"#.to_owned(),
            r#"{"id":[1],"method":"tools/list"}"#.to_owned(),
            r#"{"id":1.5,"method":7}"#.to_owned(),
            r#"{"method":"notifications/initialized"}"#.to_owned(),
            // Duplicates: a whole `Value` keeps the last; so does the peek.
            r#"{"method":"ping","method":"initialize","id":4}"#.to_owned(),
            r#"{"id":4,"id":"x","method":"ping"}"#.to_owned(),
            format!(r#"{{"method":"initialize","id":5,"params":{{{meta},"_meta":{{}}}}}}"#),
            r#"{"method":"initialize","id":6,"params":7}"#.to_owned(),
            r#"{"method":"initialize","id":6,"params":{"_meta":null}}"#.to_owned(),
            r#"{"method":"initialize","id":6,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":null}}}"#.to_owned(),
            r#"{"method":null,"id":6,"params":null}"#.to_owned(),
            r#"[{"method":"initialize","id":7}]"#.to_owned(),
            "not json".to_owned(),
            String::new(),
        ];
        for body in &bodies {
            let peek = Peek::of(body.as_bytes());
            let whole = serde_json::from_slice::<Value>(body.as_bytes()).ok();
            let method = whole.as_ref().and_then(|m| m["method"].as_str());
            let id = whole
                .as_ref()
                .and_then(|m| m.get("id"))
                .filter(|id| id.is_string() || id.is_number());
            let stateless = whole.as_ref().is_some_and(|m| {
                m["params"]["_meta"]
                    .get("io.modelcontextprotocol/protocolVersion")
                    .is_some()
            });
            assert_eq!(peek.method.as_deref(), method, "{body}");
            assert_eq!(peek.id.as_ref(), id, "{body}");
            assert_eq!(peek.stateless_version, stateless, "{body}");
        }
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
