//! rmcp's streamable HTTP client over reqwest, but for one kind of message: a `tools/call` whose
//! arguments hold a large string (a put_sample chunk is 5.6 MB of base64) is posted with that
//! string spliced into the body as it is. rmcp's client serialises every message with serde_json,
//! which scans a string byte by byte for characters to escape: for a staged sample that scan was
//! the largest cost on the client (about 45% of its CPU). A string that needs no escaping is
//! written verbatim; anything else takes rmcp's own path unchanged. An attachment's token (see
//! [`super::attach`]) is replaced by the held base64 the same way, without the escape scan.
//!
//! Request ids, sessions, re-initialisation, timeouts and cancellation stay rmcp's: only the
//! body of one POST is built here, and its answer handed back to rmcp as its own client would.

use std::{collections::HashMap, sync::Arc};

use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue};
use rmcp::{
    model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage},
    transport::streamable_http_client::{
        SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
        StreamableHttpResponseLimits,
    },
};
use serde_json::Value;

use super::attach::{Attachments, Base64};

/// Strings at least this long are spliced; below it serde_json's scan costs nothing worth saving.
const SPLICE_FROM: usize = 64 * 1024;

type Error = StreamableHttpError<reqwest::Error>;
type SseStream = futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>;

/// A `reqwest::Client` that splices large string arguments and held attachments (see the
/// module doc and [`super::attach`]).
#[derive(Clone)]
pub struct SplicingClient {
    pub http: reqwest::Client,
    pub attachments: Attachments,
}

impl StreamableHttpClient for SplicingClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut message = message;
        match spliced_body(&mut message, &self.attachments) {
            Some(body) => {
                let post = Post {
                    uri,
                    session_id,
                    auth_header,
                    custom_headers,
                };
                self.post_spliced(post, body, limits).await
            }
            None => {
                self.http
                    .post_message_with_response_limits(
                        uri,
                        message,
                        session_id,
                        auth_header,
                        custom_headers,
                        limits,
                    )
                    .await
            }
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseStream, Error> {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseStream, Error> {
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// Where a spliced POST goes and what it carries besides its body.
struct Post {
    uri: Arc<str>,
    session_id: Option<Arc<str>>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
}

impl SplicingClient {
    /// POSTs a request body and reads the answer as rmcp's reqwest client does on success; a
    /// failure status is an error (404 on a session: expired, so rmcp starts a new one).
    async fn post_spliced(
        &self,
        post: Post,
        body: Body,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let mut request = self
            .http
            .post(post.uri.as_ref())
            .header(ACCEPT, "text/event-stream, application/json")
            .header(CONTENT_TYPE, "application/json");
        if let Some(token) = post.auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in post.custom_headers {
            request = request.header(name, value);
        }
        if let Some(session) = &post.session_id {
            request = request.header("mcp-session-id", session.as_ref());
        }
        let response = body
            .into_request(request)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && post.session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if !status.is_success() {
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {status}").into(),
            ));
        }
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.to_ascii_lowercase());
        match content_type.as_deref() {
            Some(ct) if ct.starts_with("text/event-stream") => {
                let bytes = capped(response.bytes_stream(), limits.max_sse_event_size);
                let events = sse_stream::SseStream::from_bytes_stream(bytes).boxed();
                Ok(StreamableHttpPostResponse::Sse(events, session))
            }
            Some(ct) if ct.starts_with("application/json") => {
                let limit = limits.max_json_response_size;
                let body = read_capped(response, limit).await?;
                let message = serde_json::from_slice::<ServerJsonRpcMessage>(&body)?;
                Ok(StreamableHttpPostResponse::Json(message, session))
            }
            _ => Err(StreamableHttpError::UnexpectedContentType(content_type)),
        }
    }
}

/// The answer's bytes, failing once more than `limit` have come: the answer to one request is
/// small, and a server that streams without end must not fill memory.
fn capped(
    stream: impl Stream<Item = reqwest::Result<bytes::Bytes>> + Send + 'static,
    limit: usize,
) -> impl Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static {
    let mut seen = 0usize;
    stream.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        seen = seen.saturating_add(chunk.len());
        if seen > limit {
            return Err(std::io::Error::other(format!(
                "the server's answer exceeded {limit} bytes"
            )));
        }
        Ok(chunk)
    })
}

async fn read_capped(response: reqwest::Response, limit: usize) -> Result<Vec<u8>, Error> {
    let mut body = Vec::new();
    let mut stream = std::pin::pin!(capped(response.bytes_stream(), limit));
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk?);
    }
    Ok(body)
}

/// A request body in parts: the JSON around each spliced string, the strings themselves, and
/// attachments, whose raw bytes are encoded piece by piece as the body is sent. No part is
/// copied into another.
#[derive(Debug)]
struct Body(Vec<Part>);

#[derive(Debug)]
enum Part {
    Text(bytes::Bytes),
    Attachment(Base64),
}

impl Body {
    fn len(&self) -> usize {
        self.0
            .iter()
            .map(|p| match p {
                Part::Text(b) => b.len(),
                Part::Attachment(a) => a.len(),
            })
            .sum()
    }

    #[cfg(test)]
    fn concat(self) -> Vec<u8> {
        self.pieces().collect::<Vec<_>>().concat()
    }

    fn pieces(self) -> impl Iterator<Item = bytes::Bytes> + Send + Sync + 'static {
        self.0
            .into_iter()
            .flat_map(|p| -> Box<dyn Iterator<Item = _> + Send + Sync> {
                match p {
                    Part::Text(b) => Box::new(std::iter::once(b)),
                    Part::Attachment(a) => Box::new(a.into_pieces()),
                }
            })
    }

    /// A reqwest body that declares its length: hyper then sends the parts as they come, and
    /// the server sees a Content-Length (its intake reads only bodies that declare one).
    fn into_request(self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let len = self.len();
        let parts = futures::stream::iter(self.pieces().map(Ok::<_, std::io::Error>));
        request
            .header(CONTENT_LENGTH, len)
            .body(reqwest::Body::wrap_stream(parts))
    }
}

/// What goes in a placeholder's place.
enum Taken {
    /// A large string taken out of the arguments (put back should splicing fail).
    String(String),
    /// A held attachment: its token stays in the arguments.
    Attachment(Base64),
}

/// The message as JSON with its attachments and large string arguments written verbatim, or
/// None, with the message as it was, when it has neither (it then goes through rmcp's client as
/// it is).
fn spliced_body(message: &mut ClientJsonRpcMessage, attachments: &Attachments) -> Option<Body> {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let mut taken = Vec::new();
    if let Some(arguments) = arguments_mut(message) {
        for value in arguments.values_mut() {
            let Value::String(s) = value else { continue };
            if let Some(content) = attachments.get(s) {
                taken.push((s.clone(), Taken::Attachment(content)));
            } else if s.len() >= SPLICE_FROM && writes_verbatim(s) {
                let placeholder = format!("maljan-splice-{nonce}-{}", taken.len());
                let string = std::mem::replace(s, placeholder.clone());
                taken.push((placeholder, Taken::String(string)));
            }
        }
    }
    if taken.is_empty() {
        return None;
    }
    let Ok(small) = serde_json::to_vec(&*message) else {
        put_back(message, taken);
        return None;
    };
    // Where each placeholder's characters are in the output (a string of its own there: the
    // quotes around it stay).
    let mut cuts = Vec::with_capacity(taken.len());
    let mut from = 0;
    for (placeholder, _) in &taken {
        let quoted = format!("\"{placeholder}\"");
        let Some(at) = memchr::memmem::find(&small[from..], quoted.as_bytes()) else {
            put_back(message, taken);
            return None;
        };
        let start = from + at + 1;
        cuts.push(start..start + placeholder.len());
        from = start + placeholder.len();
    }
    let small = bytes::Bytes::from(small);
    let mut parts = Vec::with_capacity(2 * cuts.len() + 1);
    let mut from = 0;
    for (cut, (_, content)) in cuts.into_iter().zip(taken) {
        parts.push(Part::Text(small.slice(from..cut.start)));
        parts.push(match content {
            Taken::String(s) => Part::Text(bytes::Bytes::from(s)),
            Taken::Attachment(a) => Part::Attachment(a),
        });
        from = cut.end;
    }
    parts.push(Part::Text(small.slice(from..)));
    Some(Body(parts))
}

/// A tools/call's arguments.
fn arguments_mut(
    message: &mut ClientJsonRpcMessage,
) -> Option<&mut serde_json::Map<String, Value>> {
    match message {
        ClientJsonRpcMessage::Request(request) => match &mut request.request {
            ClientRequest::CallToolRequest(call) => call.params.arguments.as_mut(),
            _ => None,
        },
        _ => None,
    }
}

fn put_back(message: &mut ClientJsonRpcMessage, taken: Vec<(String, Taken)>) {
    if let Some(arguments) = arguments_mut(message) {
        let mut taken: HashMap<String, String> = taken
            .into_iter()
            .filter_map(|(placeholder, content)| match content {
                Taken::String(s) => Some((placeholder, s)),
                Taken::Attachment(_) => None,
            })
            .collect();
        for value in arguments.values_mut() {
            if let Value::String(s) = value
                && let Some(original) = taken.remove(s.as_str())
            {
                *s = original;
            }
        }
    }
}

/// Whether JSON holds `s` as it is: no quote, backslash or control character. With AVX2 where
/// the CPU has it (twice the bytes per step of the baseline's SSE2; this scan reads every byte
/// of a chunk once more).
fn writes_verbatim(s: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { writes_verbatim_avx2(s.as_bytes()) };
    }
    verbatim(s.as_bytes())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn writes_verbatim_avx2(bytes: &[u8]) -> bool {
    verbatim(bytes)
}

/// Folded over blocks without an early exit, so the compiler vectorises it.
#[inline(always)]
fn verbatim(bytes: &[u8]) -> bool {
    bytes.chunks(256).all(|block| {
        !block.iter().fold(false, |bad, &b| {
            bad | (b < 0x20) | (b == b'"') | (b == b'\\')
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, RequestId};

    fn call(arguments: serde_json::Map<String, Value>) -> ClientJsonRpcMessage {
        let params = CallToolRequestParams::new("put_sample_chunk").with_arguments(arguments);
        ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            RequestId::Number(7),
        )
    }

    fn args(content: &str, other: &str) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("upload_id".into(), Value::String(other.into()));
        m.insert("seq".into(), Value::from(3));
        m.insert("content_b64".into(), Value::String(content.into()));
        m
    }

    #[test]
    fn a_large_plain_string_is_spliced_and_the_body_is_what_serde_json_writes() {
        let content = "QUJD".repeat(SPLICE_FROM);
        let mut message = call(args(&content, "u-1"));
        let expected = serde_json::to_vec(&message).unwrap();
        let body = spliced_body(&mut message, &Attachments::default()).expect("spliced");
        assert_eq!(body.len(), expected.len());
        assert_eq!(body.concat(), expected);
    }

    #[test]
    fn two_large_strings_are_both_spliced_in_their_places() {
        let mut arguments = args(&"QUJD".repeat(SPLICE_FROM), "u-1");
        arguments.insert("note".into(), Value::String("xyz".into()));
        arguments.insert("other".into(), Value::String("RUZH".repeat(SPLICE_FROM)));
        let mut message = call(arguments);
        let expected = serde_json::to_vec(&message).unwrap();
        assert_eq!(
            spliced_body(&mut message, &Attachments::default())
                .expect("spliced")
                .concat(),
            expected
        );
    }

    #[test]
    fn small_strings_and_other_messages_take_rmcps_path() {
        assert!(spliced_body(&mut call(args("QUJD", "u-1")), &Attachments::default()).is_none());
        let mut ping = ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(Default::default()),
            RequestId::Number(1),
        );
        assert!(spliced_body(&mut ping, &Attachments::default()).is_none());
    }

    #[test]
    fn a_string_that_needs_escaping_is_left_to_serde_json_and_comes_back_whole() {
        let content = format!("{}\"\n", "a".repeat(SPLICE_FROM));
        let mut message = call(args(&content, "u-1"));
        let expected = serde_json::to_vec(&message).unwrap();
        assert!(
            spliced_body(&mut message, &Attachments::default()).is_none(),
            "not spliced"
        );
        assert_eq!(serde_json::to_vec(&message).unwrap(), expected);
    }

    /// An attachment of any size goes in its token's place; the message keeps the token (rmcp
    /// may post it again), and the body is what serde_json writes with the content in place.
    #[test]
    fn a_held_attachment_is_spliced_where_its_token_is() {
        let attachments = Attachments::default();
        for raw in [&b"ABC"[..], &[7u8; 3 * SPLICE_FROM]] {
            let content = Base64::of(raw.to_vec());
            let text = content.clone().into_string();
            let held = attachments.hold(content);
            let mut message = call(args(held.token(), "u-1"));
            let expected = serde_json::to_vec(&call(args(&text, "u-1"))).unwrap();
            let body = spliced_body(&mut message, &attachments).expect("spliced");
            assert_eq!(body.len(), expected.len());
            assert_eq!(body.concat(), expected);
            let again = spliced_body(&mut message, &attachments).expect("spliced again");
            assert_eq!(again.concat(), expected);
        }
    }

    #[test]
    fn the_verbatim_check_finds_every_character_json_escapes_anywhere() {
        for byte in 0u8..0x80 {
            for at in [0, 31, 32, 255, 256, 999] {
                let mut s = vec![b'A'; 1000];
                s[at] = byte;
                let s = String::from_utf8(s).unwrap();
                let plain = byte >= 0x20 && byte != b'"' && byte != b'\\';
                assert_eq!(writes_verbatim(&s), plain, "{byte:#x} at {at}");
            }
        }
    }

    /// The parts go out as one body with its length declared (the server's intake reads only
    /// such bodies), and the answer comes back as rmcp's client would give it.
    #[tokio::test]
    async fn a_spliced_body_goes_out_whole_with_its_length() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Arc<str> = format!("http://{}/mcp", listener.local_addr().unwrap()).into();
        let content = "QUJD".repeat(SPLICE_FROM);
        let message = call(args(&content, "u-1"));
        let expected = serde_json::to_vec(&message).unwrap();
        let server = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            let head_end = loop {
                let n = sock.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request ended early");
                got.extend_from_slice(&buf[..n]);
                if let Some(i) = memchr::memmem::find(&got, b"\r\n\r\n") {
                    break i + 4;
                }
            };
            let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
            let declared: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .expect("a Content-Length")
                .trim()
                .parse()
                .unwrap();
            while got.len() < head_end + declared {
                let n = sock.read(&mut buf).await.unwrap();
                assert!(n > 0, "the body ended early");
                got.extend_from_slice(&buf[..n]);
            }
            let answer = br#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                answer.len()
            );
            sock.write_all(reply.as_bytes()).await.unwrap();
            sock.write_all(answer).await.unwrap();
            (head, got[head_end..].to_vec())
        });
        let client = SplicingClient {
            http: crate::transport::http_client(),
            attachments: Attachments::default(),
        };
        let response = client
            .post_message(uri, message, None, None, HashMap::new())
            .await
            .expect("an answer");
        assert!(
            matches!(response, StreamableHttpPostResponse::Json(..)),
            "{response:?}"
        );
        let (head, body) = server.await.unwrap();
        assert!(!head.contains("transfer-encoding"), "{head}");
        assert_eq!(body, expected);
    }

    proptest! {
        /// Any big string, with any neighbour (even one that looks like a placeholder), gives
        /// exactly serde_json's body when spliced, or the message back unchanged.
        #[test]
        fn splicing_agrees_with_serde_json(
            big in proptest::collection::vec(any::<char>(), 0..64),
            other in "\\PC{0,40}",
            fill in prop_oneof![Just('A'), Just('"'), Just('\u{1}'), Just('é')],
        ) {
            let mut content: String = big.into_iter().collect();
            content.extend(std::iter::repeat_n(fill, SPLICE_FROM));
            let other = format!("maljan-splice-{other}-0");
            let mut message = call(args(&content, &other));
            let expected = serde_json::to_vec(&message).unwrap();
            match spliced_body(&mut message, &Attachments::default()) {
                Some(body) => prop_assert_eq!(body.concat(), expected),
                None => prop_assert_eq!(serde_json::to_vec(&message).unwrap(), expected),
            }
        }
    }
}
