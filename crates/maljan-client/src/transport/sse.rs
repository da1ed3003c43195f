//! The legacy HTTP+SSE client transport (MCP 2024-11-05), which rmcp no longer has: GET the event
//! stream, wait for the `endpoint` event, then POST each message to that endpoint and read every
//! answer from the stream. Events are parsed by `sse-stream`, the parser rmcp's own streamable
//! HTTP client uses.
//!
//! Spec notes kept here because they are easy to get wrong:
//! - The endpoint may be relative; it is resolved against the stream URL and must stay on the
//!   same origin (scheme, host, port), or the bearer token would be sent to another host.
//! - Events without an `event:` field are `message` events.
//! - The stream may hold at most [`MAX_EVENT_BYTES`] between two events; a server that sends more
//!   without ending an event has its stream closed (as rmcp bounds its own), so a never-ending
//!   event cannot fill memory.

use std::{
    borrow::Cow,
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::{Stream, StreamExt, stream::BoxStream};
use reqwest::{Url, header};
use rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use sse_stream::{Sse, SseStream};
use tokio::sync::mpsc;

use crate::secrets::Secret;

const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

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

/// The events of one stream, parsed by `sse-stream`, with the bound of [`MAX_EVENT_BYTES`].
struct Events {
    parsed: BoxStream<'static, Result<Sse, sse_stream::Error>>,
    /// Bytes received since the last event came out of the parser.
    since_event: Arc<AtomicUsize>,
    /// Set once the stream broke: nothing after a broken stream is read.
    broken: bool,
}

impl Events {
    fn new<S, E>(bytes: S) -> Self
    where
        S: Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
        E: std::fmt::Display,
    {
        let since_event = Arc::new(AtomicUsize::new(0));
        let counter = since_event.clone();
        let bounded = bytes.map(move |chunk| {
            let chunk = chunk.map_err(|e| std::io::Error::other(e.to_string()))?;
            let pending = counter.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
            if pending > MAX_EVENT_BYTES {
                return Err(std::io::Error::other(format!(
                    "the server sent more than {MAX_EVENT_BYTES} bytes without ending an event"
                )));
            }
            Ok(chunk)
        });
        Self {
            parsed: SseStream::from_bytes_stream(bounded).boxed(),
            since_event,
            broken: false,
        }
    }

    /// The next event; None when the stream ended, an error when it broke (the stream is over
    /// then too). A malformed line is skipped, as the spec has a client ignore what it cannot read.
    async fn next(&mut self) -> Option<Result<Sse, String>> {
        if self.broken {
            return None;
        }
        loop {
            match self.parsed.next().await? {
                Ok(event) => {
                    self.since_event.store(0, Ordering::Relaxed);
                    return Some(Ok(event));
                }
                Err(sse_stream::Error::Body(e)) => {
                    self.broken = true;
                    return Some(Err(crate::redact::scrub_urls(&e.to_string())));
                }
                Err(e) => tracing::debug!("skipped a malformed server-sent event line: {e}"),
            }
        }
    }
}

/// A `message` event's data: the events a client acts on (others are named, like `endpoint`).
fn message_data(event: Sse) -> Option<String> {
    match event.event.as_deref() {
        None | Some("message") => event.data,
        Some(_) => None,
    }
}

/// The legacy SSE transport, usable wherever rmcp wants a `Transport<RoleClient>`.
pub(crate) struct SseTransport {
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
    pub(crate) async fn connect(
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
        let mut events = Events::new(resp.bytes_stream());
        let endpoint = tokio::time::timeout(timeout, async {
            while let Some(event) = events.next().await {
                let event = event.map_err(SseError::Http)?;
                if event.event.as_deref() == Some("endpoint") {
                    return Ok(event.data.unwrap_or_default());
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
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(why) => {
                        tracing::warn!("the legacy SSE stream broke: {why}");
                        break;
                    }
                };
                let Some(data) = message_data(event) else {
                    continue;
                };
                match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
                    Ok(msg) => {
                        if tx.send(msg).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => tracing::debug!("ignored an SSE message that is not JSON-RPC: {e}"),
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

    fn events(chunks: Vec<Vec<u8>>) -> Events {
        Events::new(futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(bytes::Bytes::from(c))),
        ))
    }

    async fn all(mut events: Events) -> Vec<Result<Sse, String>> {
        let mut out = Vec::new();
        while let Some(e) = events.next().await {
            out.push(e);
        }
        out
    }

    #[tokio::test]
    async fn events_are_read_across_chunks_and_line_endings() {
        let got = all(events(vec![
            b"event: endpoint\r\ndata: /messages/?session_id=1\r\n\r\n: comment\n\ndata: {\"a\""
                .to_vec(),
            b":1}\n\ndata: a\ndata: b\n\n".to_vec(),
        ]))
        .await;
        let got: Vec<Sse> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].event.as_deref(), Some("endpoint"));
        assert_eq!(got[0].data.as_deref(), Some("/messages/?session_id=1"));
        assert_eq!(message_data(got[0].clone()), None, "a named event");
        assert_eq!(message_data(got[1].clone()).as_deref(), Some("{\"a\":1}"));
        assert_eq!(message_data(got[2].clone()).as_deref(), Some("a\nb"));
    }

    #[tokio::test]
    async fn a_malformed_line_is_skipped_and_the_stream_goes_on() {
        let got = all(events(vec![
            b"no colon here\n\n".to_vec(),
            b"event: message\ndata: {}\n\n".to_vec(),
        ]))
        .await;
        let data: Vec<_> = got.into_iter().map(|e| message_data(e.unwrap())).collect();
        assert_eq!(data, [Some("{}".to_string())]);
    }

    /// A server that never ends its event gets its stream closed once the bound is passed,
    /// instead of having every byte buffered; events before it still arrive.
    #[tokio::test]
    async fn a_stream_without_an_event_end_is_closed_at_the_bound() {
        let piece = vec![b'x'; 1024 * 1024];
        let mut chunks = vec![b"data: first\n\ndata: ".to_vec()];
        chunks.extend(std::iter::repeat_n(piece, 17));
        chunks.push(b"\n\ndata: never\n\n".to_vec());
        let got = all(events(chunks)).await;
        assert_eq!(got.len(), 2, "the first event, then the error");
        assert_eq!(got[0].as_ref().unwrap().data.as_deref(), Some("first"));
        let why = got[1].as_ref().unwrap_err();
        assert!(why.contains("without ending an event"), "{why}");
    }
}
