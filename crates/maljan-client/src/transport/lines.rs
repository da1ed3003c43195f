//! The client's end of a stdio connection: rmcp's client over the bounded newline framing both
//! ends share ([`maljan_protocol::lines`]), so what a server sends that is not an answer a call
//! can take is named for what it is, instead of being waited for until the call's deadline:
//!
//! - an answer over the bound (`core.mcp.max_answer_bytes`) is skipped as it arrives, never
//!   held whole, and the call whose id its first bytes name fails at once with its size and
//!   the limit;
//! - a malformed line that names a call's id fails that call at once with why;
//! - anything else unreadable, and an answer whose id matches no call in flight, is noted in
//!   [`Faults`], which a call that then times out reports as what it got instead.

use std::{
    borrow::Cow,
    collections::{HashSet, VecDeque},
    sync::{Arc, Mutex},
    time::Instant,
};

use futures::StreamExt;
use maljan_protocol::lines::{Frame, LineCodec, id_in_head, write_lines};
use rmcp::{
    RoleClient,
    model::JsonRpcMessage,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::mpsc,
};
use tokio_util::codec::FramedRead;

/// The code of the error answer made here for a call whose answer could not be used; in
/// JSON-RPC's range for implementation-defined errors, and never passed on as the server's.
pub(crate) const UNUSABLE_ANSWER: i32 = -32099;

/// How many faults a connection remembers.
const FAULTS_KEPT: usize = 8;

/// What a server sent that no call could take, most recent last.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    seen: Mutex<VecDeque<(Instant, String)>>,
}

impl Faults {
    fn note(&self, what: String) {
        tracing::warn!("a server sent something unusable: {what}");
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() == FAULTS_KEPT {
            seen.pop_front();
        }
        seen.push_back((Instant::now(), what));
    }

    /// The faults noted since `start`, in one sentence; None when there were none.
    pub(crate) fn since(&self, start: Instant) -> Option<String> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let recent: Vec<&str> = seen
            .iter()
            .filter(|(at, _)| *at >= start)
            .map(|(_, what)| what.as_str())
            .collect();
        (!recent.is_empty()).then(|| recent.join("; "))
    }
}

/// rmcp's client transport over a child's stdout (read) and stdin (written).
pub(crate) struct LineTransport<R> {
    lines: FramedRead<R, LineCodec>,
    out: mpsc::UnboundedSender<Vec<u8>>,
    /// The ids of requests sent and not yet answered, as JSON text (`7`, `"a"`).
    in_flight: Arc<Mutex<HashSet<String>>>,
    faults: Arc<Faults>,
}

impl<R: AsyncRead + Unpin + Send + 'static> LineTransport<R> {
    pub(crate) fn new<W: AsyncWrite + Unpin + Send + 'static>(
        reader: R,
        writer: W,
        max_answer_bytes: usize,
        faults: Arc<Faults>,
    ) -> Self {
        let (out, lines_out) = mpsc::unbounded_channel();
        tokio::spawn(write_lines(lines_out, writer));
        Self {
            lines: FramedRead::new(reader, LineCodec::new(max_answer_bytes)),
            out,
            in_flight: Default::default(),
            faults,
        }
    }

    /// Takes `id` off the calls in flight; true when it was one.
    fn answered(&self, id: &Value) -> bool {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        in_flight.remove(&id.to_string())
    }

    /// The error answer a call gets when what came for it cannot be read.
    fn refusal(id: Value, why: String) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": UNUSABLE_ANSWER, "message": why}});
        serde_json::from_value(message).ok()
    }

    /// What to do with one line: a message for rmcp, or None when it was only noted.
    fn read(&self, frame: Frame) -> Option<RxJsonRpcMessage<RoleClient>> {
        match frame {
            Frame::TooLong { len, head } => {
                let max = self.lines.decoder().max();
                let why = format!(
                    "the server's answer of {len} bytes exceeds the client's limit of {max} bytes (core.mcp.max_answer_bytes)"
                );
                match id_in_head(&head).filter(|id| self.answered(id)) {
                    Some(id) => Self::refusal(id, why),
                    None => {
                        self.faults.note(why);
                        None
                    }
                }
            }
            Frame::Line(line) => {
                let line = line.strip_suffix(b"\r").unwrap_or(&line);
                if line.iter().all(u8::is_ascii_whitespace) {
                    return None;
                }
                match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line) {
                    Ok(message) => self.take(message),
                    Err(e) => {
                        let why =
                            format!("the server sent a line that is not a JSON-RPC message ({e})");
                        let id = serde_json::from_slice::<Value>(line)
                            .ok()
                            .and_then(|v| v.get("id").cloned())
                            .or_else(|| id_in_head(line));
                        match id.filter(|id| self.answered(id)) {
                            Some(id) => Self::refusal(id, why),
                            None => {
                                self.faults.note(why);
                                None
                            }
                        }
                    }
                }
            }
        }
    }

    /// An answer goes on only when a call waits for it; anything else goes on as it is.
    fn take(&self, message: RxJsonRpcMessage<RoleClient>) -> Option<RxJsonRpcMessage<RoleClient>> {
        let id = match &message {
            JsonRpcMessage::Response(r) => Some(serde_json::to_value(&r.id).unwrap_or_default()),
            JsonRpcMessage::Error(e) => {
                e.id.as_ref()
                    .map(|id| serde_json::to_value(id).unwrap_or_default())
            }
            _ => return Some(message),
        };
        match id {
            Some(id) if self.answered(&id) => Some(message),
            Some(id) => {
                self.faults.note(format!(
                    "the server sent an answer with id {id}, which matches no call in flight"
                ));
                None
            }
            // An error without an id answers nothing the client can match: said, then dropped.
            None => {
                self.faults.note(
                    "the server sent an error with no id (it could not read a request)".into(),
                );
                None
            }
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleClient> for LineTransport<R> {
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "maljan-stdio-client".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(request) = &item {
            let id = serde_json::to_value(&request.id).unwrap_or_default();
            let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            in_flight.insert(id.to_string());
        }
        let sent = match serde_json::to_vec(&item) {
            Ok(mut line) => {
                line.push(b'\n');
                self.out
                    .send(line)
                    .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            }
            Err(e) => Err(std::io::Error::other(e)),
        };
        std::future::ready(sent)
    }

    /// Cancel-safe: a line read in part stays in the framed reader.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.lines.next().await? {
                Ok(frame) => {
                    if let Some(message) = self.read(frame) {
                        return Some(message);
                    }
                }
                Err(e) => {
                    tracing::debug!("the server's output failed: {e}");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}
