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
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, GetExtensions, JsonRpcMessage, JsonRpcRequest, NumberOrString};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::triage::{INVALID_REQUEST, Triage, WellFormed, triage, well_formed};
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
    /// Wakes the writing task: a refusal was queued, or the transport closed.
    writer: Notify,
    /// The output; its holder writes the queue out (see [`write_now`]).
    out: tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>,
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

    /// Queue `bytes` as one line; whoever writes the queue out next writes it.
    fn push(&self, mut bytes: Vec<u8>) {
        bytes.push(b'\n');
        let mut s = self.lock();
        if s.write_failed {
            return;
        }
        s.queued += bytes.len();
        s.queue.push_back(bytes);
    }

    /// Queue `bytes` and wake the writing task: for a refusal, answered from the reading side.
    fn push_and_wake(&self, bytes: Vec<u8>) {
        self.push(bytes);
        self.writer.notify_one();
    }

    /// Map the client's request `id` to a fresh id of ours; `None` (the request refused with
    /// `INVALID_REQUEST`) while a request with that id is still in flight.
    fn admit_id(&self, id: &Value) -> Option<i64> {
        let ours = {
            let mut s = self.lock();
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
        if ours.is_none() {
            self.refuse(
                id.clone(),
                INVALID_REQUEST,
                "Invalid request: a request with this id is still in flight",
            );
        }
        ours
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
        let mut bytes = match serde_json::to_vec(&item) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::error!(error = %e, "an outgoing message does not serialize");
                return;
            }
        };
        if let Some(id) = answered {
            let theirs = match &id {
                NumberOrString::Number(ours) => self.forget(*ours),
                NumberOrString::String(_) => None,
            };
            let Some(theirs) = theirs else {
                tracing::debug!(%id, "dropping the answer to a cancelled request");
                return;
            };
            bytes = match with_id(&bytes, &id, &theirs) {
                Some(mapped) => mapped,
                None => return,
            };
        } else if notification && self.lock().queued > self.limits.queued_bytes {
            tracing::debug!("answers queued over the bound: dropping a notification");
            return;
        }
        self.push(bytes);
    }

    fn refuse(&self, id: Value, code: i64, message: &str) {
        let answer = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        });
        self.push_and_wake(answer.to_string().into_bytes());
    }
}

/// An answer serialized by rmcp (`bytes`, with our id `ours`) with the client's id `theirs`
/// in its place. rmcp writes `{"jsonrpc":"2.0","id":…,` first; that prefix is replaced as
/// text, so the answer (a read's content, up to megabytes) is serialized once. An answer of
/// another layout goes through a `Value` instead, with the same result.
fn with_id(bytes: &[u8], ours: &NumberOrString, theirs: &Value) -> Option<Vec<u8>> {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    if let NumberOrString::Number(n) = ours
        && let Some(rest) = bytes.strip_prefix(HEAD)
        && let Some(rest) = rest.strip_prefix(n.to_string().as_bytes())
        && rest.first() == Some(&b',')
    {
        let theirs = theirs.to_string();
        let mut out = Vec::with_capacity(HEAD.len() + theirs.len() + rest.len() + 1);
        out.extend_from_slice(HEAD);
        out.extend_from_slice(theirs.as_bytes());
        out.extend_from_slice(rest);
        return Some(out);
    }
    let mut value: Value = serde_json::from_slice(bytes)
        .inspect_err(|e| tracing::error!(error = %e, "an outgoing message is not JSON"))
        .ok()?;
    value["id"] = theirs.clone();
    serde_json::to_vec(&value)
        .inspect_err(|e| tracing::error!(error = %e, "an outgoing message does not serialize"))
        .ok()
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
            out: tokio::sync::Mutex::new(Box::pin(output)),
        });
        let writer = tokio::spawn(write_out(shared.clone()));
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
        if let Some(message) = self.admit_well_formed(&line) {
            return message;
        }
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
                let ours = self.shared.admit_id(&id)?;
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

impl<R> Gate<R> {
    /// [`Gate::admit`] of a line [`well_formed`] reads: rmcp's message read from the line
    /// itself, without the `Value` the triage builds, then the same steps. `None` when the
    /// line is for the triage (which then gives the answer it always gave: this changes
    /// nothing it has not checked first).
    fn admit_well_formed(&mut self, line: &[u8]) -> Option<Option<RxJsonRpcMessage<RoleServer>>> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let (id, initialize) = match well_formed(line)? {
            WellFormed::Notification => {
                let notification = serde_json::from_slice(line).ok()?;
                return Some(Some(JsonRpcMessage::Notification(notification)));
            }
            WellFormed::Request { id, initialize } => (id, initialize),
        };
        // An id rmcp does not take (a fraction, beyond i64) is ours before rmcp reads the
        // request in the triage's way; here the line is read as it is, so such a line goes
        // there.
        let mut request: JsonRpcRequest<ClientRequest> = serde_json::from_slice(line).ok()?;
        let Some(ours) = self.shared.admit_id(&id) else {
            return Some(None);
        };
        request.id = NumberOrString::Number(ours);
        // rmcp keeps the initialize request's extensions for the session.
        if !initialize {
            request
                .request
                .extensions_mut()
                .insert(Slot::take(&self.shared));
        }
        Some(Some(JsonRpcMessage::Request(request)))
    }
}

/// Take the queued lines as one batch (`None` when the queue is empty), and whether writing
/// already failed.
fn take_batch(shared: &Shared) -> Option<(Vec<u8>, bool)> {
    let mut s = shared.lock();
    let batch = match s.queue.len() {
        0 => return None,
        1 => s.queue.pop_front().unwrap_or_default(),
        _ => {
            let mut batch = Vec::with_capacity(s.queue.iter().map(Vec::len).sum());
            for line in s.queue.drain(..) {
                batch.extend_from_slice(&line);
            }
            batch
        }
    };
    Some((batch, s.write_failed))
}

/// `written` bytes of the queue are out (or dropped, when writing `failed`).
fn written(shared: &Shared, written: usize, failed: bool) {
    {
        let mut s = shared.lock();
        s.queued -= written;
        s.write_failed |= failed;
    }
    shared.reader.notify_one();
}

/// Write the queue out without waiting, from the task that queued an answer: if the output is
/// free, and for as long as it takes each write at once. A line queued while another holds
/// the output is left to that holder, which looks at the queue again once it has let the
/// output go; what cannot be written at once (the client does not read) is put back in
/// front of the queue for the writing task, which alone waits for the client. So an answer
/// goes out from the task that made it, without a hand-off to another task, and a send never
/// waits on the client.
async fn write_now(shared: &Shared) {
    use std::task::Poll;
    loop {
        let Ok(mut out) = shared.out.try_lock() else {
            return;
        };
        while let Some((batch, mut failed)) = take_batch(shared) {
            let mut done = 0;
            while !failed && done < batch.len() {
                let step = std::future::poll_fn(|cx| {
                    Poll::Ready(out.as_mut().poll_write(cx, &batch[done..]))
                })
                .await;
                match step {
                    Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                        tracing::warn!("stdout cannot be written: answers are dropped from now on");
                        failed = true;
                    }
                    Poll::Ready(Ok(n)) => done += n,
                    Poll::Pending => break,
                }
            }
            if !failed && done < batch.len() {
                // The rest waits for the client, in the writing task.
                written(shared, done, false);
                shared.lock().queue.push_front(batch[done..].to_vec());
                drop(out);
                shared.writer.notify_one();
                return;
            }
            written(shared, batch.len(), failed);
        }
        let flushed = std::future::poll_fn(|cx| Poll::Ready(out.as_mut().poll_flush(cx))).await;
        drop(out);
        if flushed.is_pending() {
            shared.writer.notify_one();
        }
        if shared.lock().queue.is_empty() {
            return;
        }
    }
}

/// Write the queue out through the held output, waiting for the client, until it is empty.
async fn write_held(shared: &Shared, out: &mut Pin<Box<dyn AsyncWrite + Send>>) {
    while let Some((batch, mut failed)) = take_batch(shared) {
        if !failed && out.write_all(&batch).await.is_err() {
            tracing::warn!("stdout cannot be written: answers are dropped from now on");
            failed = true;
        }
        written(shared, batch.len(), failed);
    }
    if out.flush().await.is_err() {
        shared.lock().write_failed = true;
    }
}

/// The writing task: what [`write_now`] could not write at once, the refusals queued by the
/// reading side, and at close whatever is left, until the transport closes.
async fn write_out(shared: Arc<Shared>) {
    loop {
        let notified = shared.writer.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let closed = shared.lock().closed;
        {
            let mut out = shared.out.lock().await;
            write_held(&shared, &mut out).await;
        }
        if closed {
            return;
        }
        if shared.lock().queue.is_empty() {
            notified.await;
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
        // Serialized and written (as far as the client reads at once, see [`write_now`]) in
        // the returned future, which rmcp runs as a task of its own: not in rmcp's service
        // loop, which every message of the session goes through one at a time. A
        // notification's sender awaits that future, so it is queued before the answer that
        // follows it.
        let shared = self.shared.clone();
        async move {
            shared.deliver(item);
            write_now(&shared).await;
            Ok(())
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_gets_the_clients_id_as_a_value_would() {
        let ours = NumberOrString::Number(17);
        let answer = br#"{"jsonrpc":"2.0","id":17,"result":{"id":17,"text":"a\"b"}}"#;
        for theirs in [
            Value::from(1.5),
            Value::from("s\"q"),
            Value::from(-3),
            Value::from(u64::MAX),
        ] {
            let mut expected: Value = serde_json::from_slice(answer).unwrap();
            expected["id"] = theirs.clone();
            let got = with_id(answer, &ours, &theirs).unwrap();
            assert_eq!(got, serde_json::to_vec(&expected).unwrap(), "{theirs}");
        }
        // Another layout: through a value, the same result.
        let other = br#"{"id":17,"jsonrpc":"2.0","result":{}}"#;
        let got = with_id(other, &ours, &Value::from("x")).unwrap();
        assert_eq!(got, br#"{"id":"x","jsonrpc":"2.0","result":{}}"#);
        // An id that only starts like ours is not ours.
        let longer = br#"{"jsonrpc":"2.0","id":170,"result":{}}"#;
        let got = with_id(longer, &ours, &Value::from(1)).unwrap();
        assert_eq!(got, br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    }
}
