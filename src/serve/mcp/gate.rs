//! The transport of `confine mcp` on stdio: every request answered exactly once, and a
//! connection's memory bounded whatever the client sends or fails to read.
//!
//! It sits where rmcp's own line transport would, and does four things that one does not:
//!
//! - **Every line gets its answer.** Lines are cut by [`Framer`] (a line over the bound is
//!   never held: `-32600` with the id found in it); each line goes through `triage`, which
//!   answers malformed input itself (`-32700` for a line that is not JSON, `-32600` for one
//!   that is not JSON-RPC or nests too deep) so that rmcp only ever sees well-formed messages.
//! - **A request id is never shared inside rmcp.** rmcp keeps one entry per request id, so a
//!   second request with the id of one in flight would replace the first one's entry and one
//!   of the two answers would be lost. The client's ids are therefore mapped to ids of our
//!   own, unique for the connection, on the way in and back on the way out; a second request
//!   with the id of one still in flight is refused with `-32600` (the first one is answered as
//!   usual). A `notifications/cancelled` names the client's id and is mapped too; one that
//!   names no request in flight is dropped, so it cannot cancel another.
//! - **Calls in flight are bounded** ([`Limits::in_flight`], 64): each request carries a slot
//!   in its extensions, released when rmcp drops the handler's context, that is when the call
//!   has ended. While every slot is taken, no input is read.
//! - **Answers waiting for the client are bounded** ([`Limits::queued_bytes`], 16 MiB): answers
//!   go to a queue that one task writes out; while the queue holds more than the bound, no
//!   input is read either, so a client that sends without reading stops being read instead of
//!   growing the server. Progress notifications are dropped (not queued) while it is over the
//!   bound; answers never are.
//!
//! Closing waits for the queue to be written, at most five seconds, or 200 ms once the
//! `abandon` token (a signal) is cancelled.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{GetExtensions, JsonRpcMessage, NumberOrString};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::triage::{INVALID_REQUEST, Triage, triage};
use crate::serve::lines::{Frame, Framer, MAX_LINE_BYTES};

/// The bounds of one connection.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The longest line read, in bytes.
    pub line_bytes: usize,
    /// The most requests whose handler is running at once.
    pub in_flight: usize,
    /// The most bytes of answers waiting to be written before input stops being read.
    pub queued_bytes: usize,
}

impl Limits {
    /// The bounds `confine mcp` serves with.
    pub const SERVED: Limits = Limits {
        line_bytes: MAX_LINE_BYTES,
        in_flight: 64,
        queued_bytes: 16 * 1024 * 1024,
    };
}

#[derive(Default)]
struct State {
    /// Requests whose handler has not ended.
    running: usize,
    queue: VecDeque<Vec<u8>>,
    /// Bytes queued or being written.
    queued: usize,
    /// Our id → the client's id, for every request not yet answered (nor cancelled).
    to_client: HashMap<i64, Value>,
    /// The client's id (as JSON text, so `1` and `"1"` differ) → ours.
    from_client: HashMap<String, i64>,
    next_id: i64,
    closed: bool,
    write_failed: bool,
}

struct Shared {
    limits: Limits,
    state: Mutex<State>,
    /// Wakes the reader: a slot was released or queued bytes were written.
    reader: Notify,
    /// Wakes the writer: something was queued, or the transport closed.
    writer: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_open(&self) -> bool {
        let s = self.lock();
        s.running < self.limits.in_flight && s.queued <= self.limits.queued_bytes
    }

    /// Until input may be read again.
    async fn wait_open(&self) {
        loop {
            let notified = self.reader.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_open() {
                return;
            }
            notified.await;
        }
    }

    fn push(&self, mut bytes: Vec<u8>) {
        bytes.push(b'\n');
        {
            let mut s = self.lock();
            if s.write_failed {
                return;
            }
            s.queued += bytes.len();
            s.queue.push_back(bytes);
        }
        self.writer.notify_one();
    }

    /// Forget our id `ours` (its request is answered, cancelled or refused).
    fn forget(&self, ours: i64) -> Option<Value> {
        let mut s = self.lock();
        let theirs = s.to_client.remove(&ours)?;
        s.from_client.remove(&theirs.to_string());
        Some(theirs)
    }

    /// Queue a message of rmcp's, its id mapped back to the client's.
    fn deliver(&self, item: TxJsonRpcMessage<RoleServer>) {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
        };
        let notification = matches!(item, JsonRpcMessage::Notification(_));
        let mut value = match serde_json::to_value(&item) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "an outgoing message does not serialize");
                return;
            }
        };
        if let Some(id) = answered {
            let theirs = match id {
                NumberOrString::Number(ours) => self.forget(ours),
                NumberOrString::String(_) => None,
            };
            let Some(theirs) = theirs else {
                tracing::debug!(%id, "dropping the answer to a cancelled request");
                return;
            };
            value["id"] = theirs;
        } else if notification && self.lock().queued > self.limits.queued_bytes {
            tracing::debug!("answers queued over the bound: dropping a notification");
            return;
        }
        match serde_json::to_vec(&value) {
            Ok(bytes) => self.push(bytes),
            Err(e) => tracing::error!(error = %e, "an outgoing message does not serialize"),
        }
    }

    fn refuse(&self, id: Value, code: i64, message: &str) {
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        });
        self.push(answer.to_string().into_bytes());
    }
}

/// A running request's claim on one of the connection's [`Limits::in_flight`] slots, held in
/// the request's extensions; the last clone dropped releases it.
#[derive(Clone)]
struct Slot(#[allow(dead_code, reason = "held for its drop")] Arc<SlotRelease>);

struct SlotRelease(Arc<Shared>);

impl Slot {
    fn take(shared: &Arc<Shared>) -> Self {
        shared.lock().running += 1;
        Slot(Arc::new(SlotRelease(shared.clone())))
    }
}

impl Drop for SlotRelease {
    fn drop(&mut self) {
        self.0.lock().running -= 1;
        self.0.reader.notify_one();
    }
}

/// The transport over one reading and one writing half; see the module docs.
pub struct Gate<R> {
    input: R,
    framer: Framer,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    eof: bool,
    shared: Arc<Shared>,
    writer: Option<tokio::task::JoinHandle<()>>,
    abandon: CancellationToken,
}

impl<R> Gate<R>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    /// Serve over `input` and `output` within `limits`; `abandon` cancelled (a signal) cuts
    /// the wait for unwritten answers at close short. Spawns the writing task, so it must be
    /// called within a tokio runtime.
    pub fn new<W>(input: R, output: W, limits: Limits, abandon: CancellationToken) -> Self
    where
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let shared = Arc::new(Shared {
            limits,
            state: Mutex::new(State::default()),
            reader: Notify::new(),
            writer: Notify::new(),
        });
        let writer = tokio::spawn(write_out(shared.clone(), output));
        Self {
            input,
            framer: Framer::new(limits.line_bytes),
            buf: vec![0; 16 * 1024].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            shared,
            writer: Some(writer),
            abandon,
        }
    }

    /// What to hand rmcp for one frame, if anything; answers what it refuses.
    fn admit(&mut self, frame: Frame) -> Option<RxJsonRpcMessage<RoleServer>> {
        let line = match frame {
            Frame::Oversized { id } => {
                let message = format!(
                    "Message too large: over {} bytes; it was not read",
                    self.shared.limits.line_bytes
                );
                self.shared
                    .refuse(id.unwrap_or(Value::Null), INVALID_REQUEST, &message);
                return None;
            }
            Frame::Line(line) => line,
        };
        match triage(&line) {
            Triage::Blank => None,
            Triage::Refused { id, code, message } => {
                self.shared.refuse(id, code, message);
                None
            }
            Triage::Unanswered(mut value) => {
                if value["method"] == "notifications/cancelled" {
                    let theirs = value["params"]["requestId"].to_string();
                    let ours = self.shared.lock().from_client.get(&theirs).copied();
                    // Cancelling a request not in flight would name one of our ids.
                    let ours = ours?;
                    self.shared.forget(ours);
                    value["params"]["requestId"] = Value::from(ours);
                }
                serde_json::from_value(value)
                    .inspect_err(|e| tracing::debug!(error = %e, "an unreadable message dropped"))
                    .ok()
            }
            Triage::Request { id, mut message } => {
                let ours = {
                    let mut s = self.shared.lock();
                    let theirs = id.to_string();
                    if s.from_client.contains_key(&theirs) {
                        None
                    } else {
                        let ours = s.next_id;
                        s.next_id += 1;
                        s.from_client.insert(theirs, ours);
                        s.to_client.insert(ours, id.clone());
                        Some(ours)
                    }
                };
                let Some(ours) = ours else {
                    self.shared.refuse(
                        id,
                        INVALID_REQUEST,
                        "Invalid request: a request with this id is still in flight",
                    );
                    return None;
                };
                let initialize = message["method"] == "initialize";
                message["id"] = Value::from(ours);
                match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(message) {
                    Ok(JsonRpcMessage::Request(mut request)) => {
                        // rmcp keeps the initialize request's extensions for the session.
                        if !initialize {
                            request
                                .request
                                .extensions_mut()
                                .insert(Slot::take(&self.shared));
                        }
                        Some(JsonRpcMessage::Request(request))
                    }
                    Ok(other) => Some(other),
                    Err(e) => {
                        tracing::debug!(error = %e, "a request of no known shape");
                        self.shared.forget(ours);
                        self.shared.refuse(
                            id,
                            INVALID_REQUEST,
                            "Invalid request: not the shape of a JSON-RPC request",
                        );
                        None
                    }
                }
            }
        }
    }
}

/// Write the queue out until the transport closes and the queue is empty.
async fn write_out<W: AsyncWrite + Unpin>(shared: Arc<Shared>, mut out: W) {
    loop {
        let batch: Vec<Vec<u8>> = loop {
            let notified = shared.writer.notified();
            let closed = {
                let mut s = shared.lock();
                if !s.queue.is_empty() {
                    break s.queue.drain(..).collect();
                }
                s.closed
            };
            if closed {
                let _ = out.flush().await;
                return;
            }
            notified.await;
        };
        let mut failed = shared.lock().write_failed;
        for bytes in batch {
            if !failed && out.write_all(&bytes).await.is_err() {
                tracing::warn!("stdout cannot be written: answers are dropped from now on");
                failed = true;
            }
            {
                let mut s = shared.lock();
                s.queued -= bytes.len();
                s.write_failed |= failed;
            }
            shared.reader.notify_one();
        }
        if !failed && out.flush().await.is_err() {
            shared.lock().write_failed = true;
        }
    }
}

impl<R> Transport<RoleServer> for Gate<R>
where
    R: AsyncRead + Send + Unpin + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.shared.deliver(item);
        std::future::ready(Ok(()))
    }

    /// Cancel safe: rmcp polls it in a `select!`; every step that has been taken is kept in
    /// `self` (the framer, the buffer), and the waits hold nothing.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            self.shared.wait_open().await;
            if self.start < self.end {
                let (taken, frame) = self.framer.push(&self.buf[self.start..self.end]);
                self.start += taken;
                if let Some(frame) = frame
                    && let Some(message) = self.admit(frame)
                {
                    return Some(message);
                }
                continue;
            }
            if self.eof {
                return None;
            }
            match self.input.read(&mut self.buf).await {
                Ok(n) => {
                    self.start = 0;
                    self.end = n;
                    if n == 0 {
                        self.eof = true;
                        if let Some(frame) = self.framer.finish()
                            && let Some(message) = self.admit(frame)
                        {
                            return Some(message);
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "stdin cannot be read: the session ends");
                    self.eof = true;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.shared.lock().closed = true;
        self.shared.writer.notify_one();
        if let Some(writer) = self.writer.take() {
            let abandon = self.abandon.clone();
            tokio::select! {
                _ = writer => {}
                () = async {
                    abandon.cancelled().await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                } => tracing::warn!("signalled: answers not yet read are dropped"),
                () = tokio::time::sleep(Duration::from_secs(5)) => {
                    tracing::warn!("the client does not read: answers not yet read are dropped");
                }
            }
        }
        Ok(())
    }
}
