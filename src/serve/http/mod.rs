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

mod auth;
mod cancel;
mod limits;
mod origin;
mod sessions;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, StreamableHttpServerConfig, StreamableHttpService,
};
use tokio_util::sync::CancellationToken;

use crate::cli::common::{ToolArgs, usage};
use crate::cli::mcp::HttpArgs;
use crate::serve::mcp::server::{ConfineServer, Setting};

use auth::{Plan, authorized, plan};
use cancel::CancelOnDrop;
use limits::{BODY_READ_TIMEOUT, Standing};
pub use limits::{HEAD_READ_TIMEOUT, MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_UNAUTHENTICATED};
use origin::local_origin;
pub use sessions::MAX_SESSIONS;
use sessions::{OPENS_SESSION, Peek, session_idle};

/// How long the end of the server waits for running calls to end once cancelled.
const END_WAIT: Duration = Duration::from_millis(900);

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

type Answer = Response<BoxBody<Bytes, Infallible>>;

fn plain(status: StatusCode, text: &'static str) -> Answer {
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "text/plain")
        .body(Full::new(Bytes::from_static(text.as_bytes())).boxed())
        .expect("a valid response")
}

impl Front {
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
