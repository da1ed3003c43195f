//! The HTTP way in for a sample's bytes that keeps them out of rmcp's JSON parser.
//!
//! rmcp parses every request body into owned JSON values: a 4 MiB put_sample chunk is a 5.6 MB
//! string scanned, validated and copied before the tool sees it, and then decoded. This
//! middleware sits in front of rmcp's streamable HTTP service. When a POST's body is a
//! `tools/call` of put_sample or put_sample_chunk, it cuts `content_b64` out of the body, keeps
//! the body here (no copy of the content) and hands rmcp the request with a ticket in the
//! content's place. Everything else stays rmcp's: the session, the Host and Origin checks, the
//! protocol headers, the call itself and its answer. The tool redeems the ticket. A ticket
//! that is never redeemed (rmcp refused the request, the client went away) is dropped with the
//! request's answer.

use std::{
    collections::HashMap,
    ops::Range,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use axum::{
    body::Body,
    extract::{Request, State},
    http::{Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use http_body_util::BodyExt;
use serde::Deserialize;

use super::StagingStore;

/// What a ticket looks like in `content_b64`. `@` and `:` are not base64, so no content sent by
/// a client can be taken for a ticket that this middleware issued.
pub(super) const TICKET: &str = "@stashed:";

/// Bodies below this size go to rmcp untouched: cutting saves nothing worth the look.
const CUT_FROM: usize = 64 * 1024;

/// A sample's base64 as it arrived: `bytes[range]`.
pub(super) struct Encoded {
    pub bytes: Vec<u8>,
    pub range: Range<usize>,
}

#[cfg(test)]
impl Encoded {
    /// `text` as the intake hands it over: in the middle of a request body.
    pub(super) fn in_body(text: &str) -> Self {
        let head = br#"{"arguments":{"content_b64":""#;
        Self {
            bytes: [head.as_slice(), text.as_bytes(), br#""}}"#].concat(),
            range: head.len()..head.len() + text.len(),
        }
    }
}

/// Buffers kept for the next request bodies while uploads are open: a fresh chunk-sized
/// buffer costs ~1400 page faults, a measurable share of the server's CPU per chunk.
const SPARES: usize = 4;
const SPARE_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Contents cut from requests whose answers are not yet sent, by ticket; and spare buffers.
#[derive(Default)]
pub(super) struct Stash {
    held: Mutex<HashMap<String, Encoded>>,
    cuts: AtomicU64,
    spares: Mutex<Vec<Vec<u8>>>,
}

impl Stash {
    fn put(&self, key: String, encoded: Encoded) {
        self.cuts.fetch_add(1, Ordering::Relaxed);
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, encoded);
    }

    /// The content behind `ticket` (the part after [`TICKET`]), once.
    pub(super) fn take(&self, key: &str) -> Option<Encoded> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key)
    }

    pub(super) fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub(super) fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::Relaxed)
    }

    /// An empty buffer for a body of `length` bytes: a spare one if there is one.
    fn buffer(&self, length: usize) -> Vec<u8> {
        let spare = self.spares.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match spare {
            Some(mut b) => {
                b.clear();
                b.reserve(length);
                b
            }
            None => Vec::with_capacity(length),
        }
    }

    /// Keeps a chunk's buffer for the next body, up to a few of a chunk's size.
    pub(super) fn recycle(&self, bytes: Vec<u8>) {
        let mut spares = self.spares.lock().unwrap_or_else(|p| p.into_inner());
        if spares.len() < SPARES && bytes.capacity() <= SPARE_MAX_BYTES {
            spares.push(bytes);
        }
    }

    pub(super) fn spares(&self) -> usize {
        self.spares.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Frees the spare buffers (no upload is open: nothing is kept while idle).
    pub(super) fn drop_spares(&self) {
        self.spares
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// Drops a ticket's content when the answer to its request has gone (or was dropped).
struct Ticket {
    store: Arc<StagingStore>,
    key: String,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.store.stash.take(&self.key);
    }
}

/// The middleware's state: the store the tools redeem from, and the body size bound.
#[derive(Clone)]
pub struct Intake {
    pub store: Arc<StagingStore>,
    pub max_body_bytes: usize,
}

/// See the module doc. A request that is not a put_sample call passes through as it came.
pub async fn intake(State(intake): State<Intake>, request: Request, next: Next) -> Response {
    let Some(length) = worth_a_look(&request, intake.max_body_bytes) else {
        return next.run(request).await;
    };
    let (mut parts, body) = request.into_parts();
    let buffer = intake.store.stash.buffer(length);
    let body = match read_body(body, buffer, length).await {
        Ok(b) => b,
        Err(e) => {
            tracing::debug!("request body unreadable: {e}");
            return (
                StatusCode::BAD_REQUEST,
                "the request body could not be read\n",
            )
                .into_response();
        }
    };
    let key = uuid::Uuid::new_v4().simple().to_string();
    let Some((range, rest)) = cut(&body, &format!("{TICKET}{key}")) else {
        return next.run(Request::from_parts(parts, Body::from(body))).await;
    };
    tracing::debug!(
        encoded_bytes = range.len(),
        "put_sample content taken from the request body"
    );
    intake
        .store
        .stash
        .put(key.clone(), Encoded { bytes: body, range });
    let ticket = Ticket {
        store: intake.store,
        key,
    };
    parts
        .headers
        .insert(header::CONTENT_LENGTH, rest.len().into());
    let response = next.run(Request::from_parts(parts, Body::from(rest))).await;
    // An SSE answer is still streaming while the tool runs: the ticket lives as long as it.
    let (parts, body) = response.into_parts();
    let body = body.map_frame(move |frame| {
        let _ = &ticket;
        frame
    });
    Response::from_parts(parts, Body::new(body))
}

/// The body, into `bytes` (empty, with room for its declared length: hyper holds the peer to it).
async fn read_body(
    mut body: Body,
    mut bytes: Vec<u8>,
    length: usize,
) -> Result<Vec<u8>, axum::Error> {
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            if bytes.len() + data.len() > length {
                return Err(axum::Error::new(
                    "the body is longer than its Content-Length",
                ));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// The declared length of a JSON POST big enough to carry a chunk and within the bound (a body
/// without a length, or over the bound, is rmcp's to refuse).
fn worth_a_look(request: &Request, max_body_bytes: usize) -> Option<usize> {
    // Every request passes here: the cheap checks first, and nothing allocated.
    if request.method() != Method::POST {
        return None;
    }
    let headers = request.headers();
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| (CUT_FROM..=max_body_bytes).contains(n))?;
    const JSON: &str = "application/json";
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim_start().get(..JSON.len()))
        .is_some_and(|v| v.eq_ignore_ascii_case(JSON));
    json.then_some(length)
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    method: &'a str,
    #[serde(borrow)]
    params: Params<'a>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: &'a str,
    #[serde(borrow)]
    arguments: Arguments<'a>,
}

#[derive(Deserialize)]
struct Arguments<'a> {
    #[serde(borrow)]
    content_b64: &'a str,
}

/// Where `content_b64`'s characters lie in `body`, and the body with `ticket` in their place,
/// when the body is a tools/call of put_sample or put_sample_chunk. Found in two steps, so the
/// content is scanned once, by memchr, instead of by serde_json's escape scan and UTF-8 check:
///
/// 1. the string after the first `"content_b64"` key, up to the next quote (a backslash first
///    means escapes: not base64, left to rmcp and the tool);
/// 2. the body with that string replaced by the ticket must parse, now small, as a tools/call of
///    a put_sample tool whose content_b64 is exactly the ticket. The ticket is fresh and random,
///    so it can be there only because the cut was the right one.
///
/// Outside the cut the body is checked by serde_json; inside it holds no quote or backslash,
/// and anything else that is not base64 (a control character, say) the decoder refuses.
fn cut(body: &[u8], ticket: &str) -> Option<(Range<usize>, Vec<u8>)> {
    const KEY: &[u8] = b"\"content_b64\"";
    let blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let after_key = memchr::memmem::find(body, KEY)? + KEY.len();
    let mut at = after_key
        + body
            .get(after_key..)?
            .iter()
            .take_while(|b| blank(b))
            .count();
    (body.get(at) == Some(&b':')).then_some(())?;
    at += 1;
    at += body.get(at..)?.iter().take_while(|b| blank(b)).count();
    (body.get(at) == Some(&b'"')).then_some(())?;
    let start = at + 1;
    let end = start + memchr::memchr2(b'"', b'\\', body.get(start..)?)?;
    (body[end] == b'"').then_some(())?;
    let rest = [&body[..start], ticket.as_bytes(), &body[end..]].concat();
    let call: Call = serde_json::from_slice(&rest).ok()?;
    let staging = matches!(call.params.name, "put_sample" | "put_sample_chunk");
    let ours =
        call.method == "tools/call" && staging && call.params.arguments.content_b64 == ticket;
    ours.then_some((start..end, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "@stashed:0f0f";

    fn body(name: &str, content: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": name, "arguments": {"upload_id": "u", "seq": 0, "content_b64": content}},
        }))
        .unwrap()
    }

    fn found(b: &[u8]) -> Option<Vec<u8>> {
        cut(b, T).map(|(range, rest)| {
            let v: serde_json::Value = serde_json::from_slice(&rest).unwrap();
            assert_eq!(v["params"]["arguments"]["content_b64"], T);
            b[range].to_vec()
        })
    }

    #[test]
    fn the_content_of_a_staging_call_is_found_exactly() {
        for name in ["put_sample", "put_sample_chunk"] {
            assert_eq!(found(&body(name, "QUJD")).as_deref(), Some(&b"QUJD"[..]));
        }
        let spaced = br#"{ "method" : "tools/call", "params" : { "name" : "put_sample", "arguments" : { "content_b64" :
            "QUJD" } } }"#;
        assert_eq!(found(spaced).as_deref(), Some(&b"QUJD"[..]));
    }

    #[test]
    fn other_calls_and_odd_bodies_pass_through() {
        assert_eq!(found(&body("FA_list_dir", "QUJD")), None);
        // Escapes are not base64: rmcp and the tool see the string as sent.
        assert_eq!(found(&body("put_sample_chunk", "QU\"JD")), None);
        assert_eq!(found(b"{\"method\":\"tools/call\""), None);
        assert_eq!(found(b"[]"), None);
        let duplicate = br#"{"method":"tools/call","params":{"name":"put_sample","arguments":{"content_b64":"QQ==","content_b64":"Qg=="}}}"#;
        assert_eq!(found(duplicate), None);
        // The first "content_b64" key is not the argument: the ticket lands elsewhere.
        let decoy = br#"{"method":"tools/call","params":{"_meta":{"content_b64":"x"},"name":"put_sample","arguments":{"content_b64":"QUJD"}}}"#;
        assert_eq!(found(decoy), None);
    }

    proptest::proptest! {
        /// Whatever the body (cut short, or with any byte changed), a cut that is accepted holds
        /// exactly the string serde_json reads there; or, where the body is not JSON at all,
        /// bytes the base64 decoder refuses.
        #[test]
        fn an_accepted_cut_is_the_content_serde_json_reads(
            content in "[A-Za-z0-9+/=\"\\\\é \u{1}]{0,40}",
            cut_at in 0usize..200,
            noise in proptest::option::of((0usize..200, proptest::prelude::any::<u8>())),
        ) {
            let mut b = body("put_sample_chunk", &content);
            if cut_at < b.len() { b.truncate(cut_at); }
            if let Some((at, byte)) = noise && at < b.len() { b[at] = byte; }
            if let Some(range) = cut(&b, T).map(|(r, _)| r) {
                match serde_json::from_slice::<serde_json::Value>(&b) {
                    Ok(v) => {
                        let read = v["params"]["arguments"]["content_b64"].as_str().unwrap();
                        proptest::prop_assert_eq!(&b[range], read.as_bytes());
                    }
                    Err(_) => proptest::prop_assert!(
                        b[range].iter().any(|c| !(0x20..0x80).contains(c)),
                        "{}", String::from_utf8_lossy(&b)
                    ),
                }
            }
        }
    }
}
