//! The SaaS drive fixture behind `fixture-drives`: one in-memory server that answers the
//! documented endpoints of Dropbox (API v2), OneDrive (Microsoft Graph v1.0 drive items, upload
//! sessions, the identity platform's device-code login), Box (API 2.0 files, folders, uploads
//! and chunked upload sessions), Google Drive (API v3 files list/get/media, resumable uploads,
//! permissions, the token refresh) and Google Cloud Storage (its XML API: objects with ranges and
//! preconditions, listings, XML multipart uploads; see `gcs.rs`), each at a path named after its
//! real host, so a
//! client reaches `https://api.dropboxapi.com/2/files/list_folder` here as
//! `http://127.0.0.1:PORT/api.dropboxapi.com/2/files/list_folder`.
//!
//! No emulator exists for these APIs; this one is held to them by the drives' official Python
//! SDKs, which call it and parse its answers (`crates/maljan-files/tests/drive_fixture_speaks_the_sdks.rs`).
//! Every request must carry `Authorization: Bearer TOKEN` (the token it was started with), except
//! GCS's, which are signed by the service account given with `--gcs-key` (a self-signed JWT or a
//! V4 signed URL, checked as Google checks them); GCS is held to google-cloud-storage likewise.
//!
//! Test controls (not part of any drive's API): `POST /_fixture/faults`
//! `{"cut_download_after": BYTES, "times": N, "device_login": "declined"}` cuts the next N downloads after BYTES bytes (the
//! connection drops mid-body) and makes the next device-code logins declined; `GET /_fixture/log` answers the requests so far, as
//! `[{"method", "path", "range"}]` (never a header's value or a body).

mod boxapi;
mod dropbox;
mod gcs;
mod google;
mod onedrive;
mod tree;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{DefaultBodyLimit, State},
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The fixture's whole state.
pub struct Fixture {
    token: String,
    state: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    dropbox: dropbox::Dropbox,
    onedrive: onedrive::OneDrive,
    r#box: boxapi::BoxDrive,
    google: google::Google,
    gcs: gcs::Gcs,
    /// Device-code logins declined instead of approved.
    decline_logins: bool,
    /// (bytes, times): cut the next `times` downloads after `bytes`.
    cut_download: Option<(u64, u32)>,
    log: Vec<Value>,
    counter: u64,
}

impl Inner {
    fn next_id(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }
}

impl Fixture {
    pub fn new(token: &str) -> Arc<Self> {
        Arc::new(Self {
            token: token.to_string(),
            state: Mutex::default(),
        })
    }

    /// A fixture whose GCS trusts the service account of this JSON key (its public half).
    pub fn with_gcs_key(token: &str, json_key: &str) -> Result<Arc<Self>, String> {
        let fx = Self::new(token);
        fx.state.lock().unwrap().gcs.account = Some(gcs::Account::from_key(json_key)?);
        Ok(fx)
    }

    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::disable())
            .with_state(self.clone())
    }
}

/// A request as the drives see it.
pub(crate) struct Req {
    pub method: Method,
    /// The path after the host segment, e.g. `/2/files/upload`.
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Req {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

async fn handle(
    State(fx): State<Arc<Fixture>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let full = uri.path().to_string();
    let query = uri.query().unwrap_or("").to_string();
    let (host, path) = match full.trim_start_matches('/').split_once('/') {
        Some((h, p)) => (h.to_string(), format!("/{p}")),
        None => (full.trim_start_matches('/').to_string(), "/".to_string()),
    };
    {
        let mut s = fx.state.lock().unwrap();
        s.log.push(json!({
            "method": method.as_str(),
            "path": full,
            "range": headers.get(header::RANGE).and_then(|v| v.to_str().ok()),
        }));
    }
    if host == "_fixture" {
        return control(&fx, &method, &path, &body);
    }
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Bearer {}", fx.token));
    let req = Req {
        method,
        path,
        query,
        headers,
        body,
    };
    match host.as_str() {
        "api.dropboxapi.com" | "content.dropboxapi.com" => {
            if !authorized {
                return json_response(
                    StatusCode::UNAUTHORIZED,
                    &json!({"error_summary": "invalid_access_token/..",
                            "error": {".tag": "invalid_access_token"}}),
                );
            }
            dropbox::handle(&fx, &host, &req)
        }
        "login.microsoftonline.com" => onedrive::login(&fx, &req),
        "public.onedrive.fixture" => onedrive::public(&fx, &req),
        "graph.microsoft.com" if authorized => onedrive::handle(&fx, &req),
        "graph.microsoft.com" => json_response(
            StatusCode::UNAUTHORIZED,
            &json!({"error": {"code": "InvalidAuthenticationToken", "message": "Access token is empty or invalid."}}),
        ),
        "dl.boxcloud.com" => boxapi::public(&fx, &req),
        "api.box.com" | "upload.box.com" if authorized => boxapi::handle(&fx, &host, &req),
        "api.box.com" | "upload.box.com" => json_response(
            StatusCode::UNAUTHORIZED,
            &json!({"type": "error", "status": 401, "code": "unauthorized", "message": "Unauthorized"}),
        ),
        "oauth2.googleapis.com" => google::token(&fx, &req),
        "storage.googleapis.com" => gcs::handle(&fx, &req),
        "www.googleapis.com" if authorized || req.query.contains("upload_id=") => {
            google::handle(&fx, &req)
        }
        "www.googleapis.com" => json_response(
            StatusCode::UNAUTHORIZED,
            &json!({"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                    "errors": [{"reason": "authError", "domain": "global", "message": "Invalid Credentials"}],
                    "status": "UNAUTHENTICATED"}}),
        ),
        _ => json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": format!("the fixture serves no host {host}")}),
        ),
    }
}

fn control(fx: &Fixture, method: &Method, path: &str, body: &Bytes) -> Response {
    let mut s = fx.state.lock().unwrap();
    match (method.as_str(), path) {
        ("POST", "/faults") => {
            let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            s.cut_download = v
                .get("cut_download_after")
                .and_then(Value::as_u64)
                .map(|b| {
                    (
                        b,
                        v.get("times").and_then(Value::as_u64).unwrap_or(1) as u32,
                    )
                });
            s.decline_logins = v.get("device_login").and_then(Value::as_str) == Some("declined");
            json_response(StatusCode::OK, &json!({"ok": true}))
        }
        ("GET", "/log") => json_response(StatusCode::OK, &Value::Array(s.log.clone())),
        _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "no such control"})),
    }
}

impl Req {
    /// `http://HOST:PORT` as the client reached this server (links the drives hand out).
    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.header("host").unwrap_or("127.0.0.1"))
    }

    /// A query parameter, decoded.
    pub(crate) fn param(&self, key: &str) -> Option<String> {
        form(&self.query).remove(key)
    }

    /// The body as a urlencoded form.
    pub(crate) fn form(&self) -> HashMap<String, String> {
        form(&String::from_utf8_lossy(&self.body))
    }
}

pub(crate) fn form(s: &str) -> HashMap<String, String> {
    s.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// `%XX` and `+` decoded.
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 3 <= b.len()
            && let Ok(hex) = std::str::from_utf8(&b[i + 1..i + 3])
            && let Ok(v) = u8::from_str_radix(hex, 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(if b[i] == b'+' { b' ' } else { b[i] });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn json_response(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// A file's bytes from the request's Range (`bytes=N-` or `bytes=N-M`) on, with the cut the test
/// asked for; `extra` headers go on the answer.
pub(crate) fn content_response(
    fx: &Fixture,
    req: &Req,
    data: Arc<Vec<u8>>,
    extra: &[(&str, String)],
) -> Response {
    let size = data.len() as u64;
    let (start, end) = match req.header("range").and_then(parse_range) {
        Some((s, e)) if s < size.max(1) => (
            s,
            e.unwrap_or(size.saturating_sub(1))
                .min(size.saturating_sub(1)),
        ),
        Some(_) => {
            return (
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{size}"))],
            )
                .into_response();
        }
        None => (0, size.saturating_sub(1)),
    };
    let ranged = req.header("range").is_some();
    let len = if size == 0 { 0 } else { end - start + 1 };
    let cut = {
        let mut s = fx.state.lock().unwrap();
        match &mut s.cut_download {
            Some((after, times)) if *times > 0 && len > *after => {
                *times -= 1;
                Some(*after)
            }
            _ => None,
        }
    };
    let mut b = Response::builder()
        .status(if ranged {
            StatusCode::PARTIAL_CONTENT
        } else {
            StatusCode::OK
        })
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, len)
        .header(header::ACCEPT_RANGES, "bytes");
    if ranged {
        b = b.header(header::CONTENT_RANGE, format!("bytes {start}-{end}/{size}"));
    }
    for (k, v) in extra {
        b = b.header(*k, v);
    }
    let from = start as usize;
    let to = from + len as usize;
    let body = match cut {
        None => Body::from(Bytes::copy_from_slice(&data[from..to])),
        Some(after) => {
            let head = Bytes::copy_from_slice(&data[from..from + after as usize]);
            Body::from_stream(futures::stream::iter([
                Ok(head),
                Err(std::io::Error::other("the fixture cut this download")),
            ]))
        }
    };
    b.body(body).unwrap()
}

fn parse_range(v: &str) -> Option<(u64, Option<u64>)> {
    let r = v.strip_prefix("bytes=")?;
    let (s, e) = r.split_once('-')?;
    let s = s.trim().parse().ok()?;
    let e = if e.trim().is_empty() {
        None
    } else {
        Some(e.trim().parse().ok()?)
    };
    Some((s, e))
}

pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Serves on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, fixture: Arc<Fixture>) {
    axum::serve(listener, fixture.router())
        .await
        .expect("serve");
}
