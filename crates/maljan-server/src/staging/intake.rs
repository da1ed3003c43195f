//! The HTTP way in for a sample's bytes that keeps them out of rmcp's JSON parser.
//!
//! rmcp parses every request body into owned JSON values: a 4 MiB put_sample chunk is a 5.6 MB
//! string scanned, validated and copied before the tool sees it, and then decoded. This
//! middleware sits in front of rmcp's streamable HTTP service. When a POST's body is a
//! `tools/call` of put_sample or put_sample_chunk, it takes `content_b64` out of the body,
//! decoded as the body arrives (see [`super::split`]), keeps it here and hands rmcp the request
//! with a ticket in the content's place. Everything else stays rmcp's: the session, the Host and Origin checks, the
//! protocol headers, the call itself and its answer. The tool redeems the ticket. A ticket
//! that is never redeemed (rmcp refused the request, the client went away) is dropped with the
//! request's answer.

use std::{
    collections::HashMap,
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
use maljan_protocol::{PUT_SAMPLE, PUT_SAMPLE_CHUNK};
use serde::Deserialize;

use super::{
    StagingStore,
    split::{Split, Splitter},
    write::Decoded,
};

/// What a ticket looks like in `content_b64`. `@` and `:` are not base64, so no content sent by
/// a client can be taken for a ticket that this middleware issued.
pub(super) const TICKET: &str = "@stashed:";

/// Bodies below this size go to rmcp untouched: cutting saves nothing worth the look.
const CUT_FROM: usize = 64 * 1024;

/// Decode buffers kept for the next chunks while uploads are open: a fresh chunk-sized
/// buffer costs ~1400 page faults, a measurable share of the server's CPU per chunk.
const SPARES: usize = 4;
const SPARE_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Contents cut from requests whose answers are not yet sent, by ticket; and spare buffers.
#[derive(Default)]
pub(super) struct Stash {
    held: Mutex<HashMap<String, Decoded>>,
    cuts: AtomicU64,
    spares: Mutex<Vec<Vec<u8>>>,
}

impl Stash {
    fn put(&self, key: String, decoded: Decoded) {
        self.cuts.fetch_add(1, Ordering::Relaxed);
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, decoded);
    }

    /// The content behind `ticket` (the part after [`TICKET`]), once.
    pub(super) fn take(&self, key: &str) -> Option<Decoded> {
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

    /// A buffer to decode a body's content into: a spare one if there is one.
    fn buffer(&self) -> Vec<u8> {
        let spare = self.spares.lock().unwrap_or_else(|p| p.into_inner()).pop();
        spare.unwrap_or_default()
    }

    /// Keeps a chunk's buffer for the next chunk, up to a few of a chunk's size.
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
    let (mut parts, mut body) = request.into_parts();
    let mut splitter = Splitter::new(intake.store.stash.buffer(), length);
    while let Some(frame) = body.frame().await {
        let taken = match frame {
            Ok(frame) => frame
                .into_data()
                .map_or(Ok(()), |data| splitter.push(&data).map_err(String::from)),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = taken {
            tracing::debug!("request body unreadable: {e}");
            return (
                StatusCode::BAD_REQUEST,
                "the request body could not be read\n",
            )
                .into_response();
        }
    }
    let key = uuid::Uuid::new_v4().simple().to_string();
    let ticket = format!("{TICKET}{key}");
    let (rest, decoded) = match splitter.finish(&ticket, |rest| is_staging_call(rest, &ticket)) {
        Split::Cut { rest, decoded } => (rest, decoded),
        // The decode buffer is not kept: a body that is not a chunk says nothing of whether an
        // upload is open, and spares are kept only while one is.
        Split::Whole(body) => {
            return next.run(Request::from_parts(parts, Body::from(body))).await;
        }
    };
    tracing::debug!(
        decoded_bytes = decoded.as_slice().len(),
        "put_sample content taken from the request body"
    );
    intake.store.stash.put(key.clone(), decoded);
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

/// Whether `rest` (a body with `ticket` in its content's place) is a tools/call of put_sample
/// or put_sample_chunk whose content_b64 is exactly the ticket. The ticket is fresh and random,
/// so it can be there only because the content taken out was that argument.
fn is_staging_call(rest: &[u8], ticket: &str) -> bool {
    let Ok(call) = serde_json::from_slice::<Call>(rest) else {
        return false;
    };
    let staging = matches!(call.params.name, PUT_SAMPLE | PUT_SAMPLE_CHUNK);
    call.method == "tools/call" && staging && call.params.arguments.content_b64 == ticket
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

    /// The decoded content when the body is a staging call; else None, and the body went on
    /// as it came.
    fn found(b: &[u8]) -> Option<Vec<u8>> {
        let mut splitter = Splitter::new(Vec::new(), b.len());
        splitter.push(b).unwrap();
        match splitter.finish(T, |rest| is_staging_call(rest, T)) {
            Split::Cut { rest, decoded } => {
                let v: serde_json::Value = serde_json::from_slice(&rest).unwrap();
                assert_eq!(v["params"]["arguments"]["content_b64"], T);
                Some(decoded.as_slice().to_vec())
            }
            Split::Whole(body) => {
                assert_eq!(body, b);
                None
            }
        }
    }

    #[test]
    fn the_content_of_a_staging_call_is_found_exactly() {
        for name in ["put_sample", "put_sample_chunk"] {
            assert_eq!(found(&body(name, "QUJD")).as_deref(), Some(&b"ABC"[..]));
        }
        let spaced = br#"{ "method" : "tools/call", "params" : { "name" : "put_sample", "arguments" : { "content_b64" :
            "QUJD" } } }"#;
        assert_eq!(found(spaced).as_deref(), Some(&b"ABC"[..]));
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
        let decoy = br#"{"method":"tools/call","params":{"_meta":{"content_b64":"QUJD"},"name":"put_sample","arguments":{"content_b64":"QUJD"}}}"#;
        assert_eq!(found(decoy), None);
    }

    proptest::proptest! {
        /// Whatever the body (cut short, or with any byte changed), content that is taken is
        /// exactly the decoding of the string serde_json reads there.
        #[test]
        fn taken_content_is_what_serde_json_reads(
            content in "[A-Za-z0-9+/=\"\\\\é \u{1}]{0,40}",
            cut_at in 0usize..200,
            noise in proptest::option::of((0usize..200, proptest::prelude::any::<u8>())),
        ) {
            let mut b = body("put_sample_chunk", &content);
            if cut_at < b.len() { b.truncate(cut_at); }
            if let Some((at, byte)) = noise && at < b.len() { b[at] = byte; }
            if let Some(decoded) = found(&b) {
                let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
                let read = v["params"]["arguments"]["content_b64"].as_str().unwrap();
                let expected = base64_simd::STANDARD.decode_to_vec(read).unwrap();
                proptest::prop_assert_eq!(decoded, expected);
            }
        }
    }
}
