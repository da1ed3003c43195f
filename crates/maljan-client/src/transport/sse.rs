//! The legacy HTTP+SSE client transport (MCP 2024-11-05), written by hand since rmcp dropped it:
//! GET the event stream, wait for the `endpoint` event, then POST each message to that endpoint
//! and read every answer from the stream.
//!
//! Spec notes kept here because they are easy to get wrong:
//! - The endpoint may be relative; it is resolved against the stream URL and must stay on the
//!   same origin (scheme, host, port), or the bearer token would be sent to another host.
//! - Events without an `event:` field are `message` events.
//! - One event is at most [`MAX_EVENT_BYTES`]; a longer one is dropped, not buffered.

use std::{borrow::Cow, future::Future, time::Duration};

use futures::StreamExt;
use reqwest::{Url, header};
use rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use tokio::sync::mpsc;

use crate::secrets::Secret;

pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("{0}")]
    Http(String),
    #[error("the server answered the event-stream GET with HTTP {0}")]
    Status(u16),
    #[error("the server answered the event-stream GET with {0:?}, not text/event-stream")]
    NotEventStream(String),
    #[error("the event stream ended before the endpoint event")]
    NoEndpoint,
    #[error("the endpoint event named another origin ({0}); refusing to post there")]
    ForeignEndpoint(String),
    #[error("the endpoint event is not a URL: {0}")]
    BadEndpoint(String),
    #[error("POST to the message endpoint failed: HTTP {0}")]
    PostStatus(u16),
}

/// One parsed server-sent event.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Event {
    pub event: String,
    pub data: String,
    pub id: Option<String>,
}

/// An incremental SSE parser over byte chunks with a per-event size bound.
#[derive(Default)]
pub struct EventParser {
    line: Vec<u8>,
    current: Event,
    size: usize,
    oversized: bool,
    last_was_cr: bool,
}

impl EventParser {
    /// Feeds bytes; returns the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        for &b in bytes {
            if self.last_was_cr && b == b'\n' {
                self.last_was_cr = false;
                continue;
            }
            self.last_was_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                let line = std::mem::take(&mut self.line);
                if let Some(ev) = self.line_done(&line) {
                    out.push(ev);
                }
            } else {
                self.size += 1;
                if self.size > MAX_EVENT_BYTES {
                    self.oversized = true;
                    self.line.clear();
                } else {
                    self.line.push(b);
                }
            }
        }
        out
    }

    fn line_done(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            let ev = std::mem::take(&mut self.current);
            let oversized = std::mem::take(&mut self.oversized);
            self.size = 0;
            if oversized {
                tracing::warn!("dropped a server-sent event over {MAX_EVENT_BYTES} bytes");
                return None;
            }
            if ev.data.is_empty() && ev.event.is_empty() {
                return None;
            }
            return Some(ev);
        }
        if self.oversized || line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.find(':') {
            Some(i) => (
                &line[..i],
                line[i + 1..].strip_prefix(' ').unwrap_or(&line[i + 1..]),
            ),
            None => (&line[..], ""),
        };
        match field {
            "event" => self.current.event = value.to_string(),
            "data" => {
                if !self.current.data.is_empty() {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
            }
            "id" => self.current.id = Some(value.to_string()),
            _ => {}
        }
        None
    }
}

/// The legacy SSE transport, usable wherever rmcp wants a `Transport<RoleClient>`.
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    auth: Option<Secret>,
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SseTransport {
    /// GETs the stream at `url` and waits (up to `timeout`) for the endpoint event.
    pub async fn connect(
        client: reqwest::Client,
        url: Url,
        auth: Option<Secret>,
        timeout: Duration,
    ) -> Result<Self, SseError> {
        let mut req = client
            .get(url.clone())
            .header(header::ACCEPT, "text/event-stream");
        if let Some(token) = &auth {
            req = req.bearer_auth(token.expose());
        }
        let resp = tokio::time::timeout(timeout, req.send())
            .await
            .map_err(|_| SseError::Http(format!("no answer within {} s", timeout.as_secs_f64())))?
            .map_err(|e| SseError::Http(crate::redact::scrub_urls(&e.to_string())))?;
        if !resp.status().is_success() {
            return Err(SseError::Status(resp.status().as_u16()));
        }
        let ctype = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !ctype.starts_with("text/event-stream") {
            return Err(SseError::NotEventStream(ctype));
        }
        let mut body = resp.bytes_stream();
        let mut parser = EventParser::default();
        let mut pending = Vec::new();
        let endpoint = tokio::time::timeout(timeout, async {
            while let Some(chunk) = body.next().await {
                let chunk =
                    chunk.map_err(|e| SseError::Http(crate::redact::scrub_urls(&e.to_string())))?;
                let mut events = parser.feed(&chunk).into_iter();
                for ev in events.by_ref() {
                    if ev.event == "endpoint" {
                        pending.extend(events);
                        return Ok(ev.data);
                    }
                }
            }
            Err(SseError::NoEndpoint)
        })
        .await
        .map_err(|_| SseError::NoEndpoint)??;
        let endpoint = url
            .join(endpoint.trim())
            .map_err(|e| SseError::BadEndpoint(e.to_string()))?;
        if endpoint.origin() != url.origin() {
            return Err(SseError::ForeignEndpoint(
                endpoint.origin().ascii_serialization(),
            ));
        }
        let (tx, rx) = mpsc::channel(256);
        let reader = tokio::spawn(async move {
            let deliver = |ev: Event| {
                let tx = tx.clone();
                async move {
                    if !(ev.event.is_empty() || ev.event == "message") {
                        return true;
                    }
                    match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&ev.data) {
                        Ok(msg) => tx.send(msg).await.is_ok(),
                        Err(e) => {
                            tracing::debug!("ignored an SSE message that is not JSON-RPC: {e}");
                            true
                        }
                    }
                }
            };
            for ev in pending {
                if !deliver(ev).await {
                    return;
                }
            }
            while let Some(Ok(chunk)) = body.next().await {
                for ev in parser.feed(&chunk) {
                    if !deliver(ev).await {
                        return;
                    }
                }
            }
            // Stream over: dropping tx ends the service's receive loop (the connection is closed).
        });
        Ok(Self {
            client,
            endpoint,
            auth,
            rx,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "legacy-sse".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let mut req = self.client.post(self.endpoint.clone()).json(&item);
        if let Some(token) = &self.auth {
            req = req.bearer_auth(token.expose());
        }
        async move {
            let resp = req
                .send()
                .await
                .map_err(|e| std::io::Error::other(crate::redact::scrub_urls(&e.to_string())))?;
            if resp.status().is_success() {
                Ok(())
            } else {
                Err(std::io::Error::other(SseError::PostStatus(
                    resp.status().as_u16(),
                )))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.rx.recv()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.reader.abort();
        self.rx.close();
        std::future::ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_across_chunks_and_line_endings() {
        let mut p = EventParser::default();
        let mut evs = p.feed(
            b"event: endpoint\r\ndata: /messages/?session_id=1\r\n\r\n: comment\n\ndata: {\"a\"",
        );
        evs.extend(p.feed(b":1}\n\n"));
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].event, "endpoint");
        assert_eq!(evs[0].data, "/messages/?session_id=1");
        assert_eq!(evs[1].event, "");
        assert_eq!(evs[1].data, "{\"a\":1}");
    }

    #[test]
    fn multi_line_data_is_joined() {
        let mut p = EventParser::default();
        let evs = p.feed(b"data: a\ndata: b\n\n");
        assert_eq!(evs[0].data, "a\nb");
    }
}
