//! Dropbox API v2, the routes the `FA_dropbox_*` actions use: `files/upload`,
//! `files/upload_session/{start,append_v2,finish}`, `files/download` (with Range),
//! `files/list_folder` (+ `/continue`, pages of [`PAGE`] entries), `files/delete_v2`,
//! `files/get_metadata`. Paths are case-insensitive (keyed by `path_lower`); parent folders come
//! into being with the files under them, as in Dropbox. Errors are the routes' documented unions
//! (`409 {"error_summary", "error": {".tag": …}}`).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Fixture, Req, content_response, json_response, percent_decode};

/// Entries per list_folder page (small, so paging is exercised).
const PAGE: usize = 3;

#[derive(Default)]
pub(crate) struct Dropbox {
    files: BTreeMap<String, File>,
    /// path_lower → path_display.
    folders: BTreeMap<String, String>,
    sessions: HashMap<String, Vec<u8>>,
    cursors: HashMap<String, Vec<Value>>,
}

struct File {
    display: String,
    data: Arc<Vec<u8>>,
    id: String,
    rev: String,
}

/// Dropbox's content hash: SHA-256 of the SHA-256s of each 4 MiB block.
fn content_hash(data: &[u8]) -> String {
    let mut outer = Sha256::new();
    for block in data.chunks(4 << 20) {
        outer.update(Sha256::digest(block));
    }
    hex::encode(outer.finalize())
}

fn name_of(display: &str) -> String {
    display.rsplit('/').next().unwrap_or_default().to_string()
}

fn parent_of(lower: &str) -> &str {
    match lower.rfind('/') {
        Some(0) | None => "",
        Some(i) => &lower[..i],
    }
}

fn file_meta(f: &File) -> Value {
    json!({
        ".tag": "file",
        "name": name_of(&f.display),
        "id": f.id,
        "client_modified": "2026-01-01T00:00:00Z",
        "server_modified": "2026-01-01T00:00:00Z",
        "rev": f.rev,
        "size": f.data.len(),
        "path_lower": f.display.to_lowercase(),
        "path_display": f.display,
        "is_downloadable": true,
        "content_hash": content_hash(&f.data),
    })
}

fn folder_meta(lower: &str, display: &str) -> Value {
    json!({
        ".tag": "folder",
        "name": name_of(display),
        "id": format!("id:folder{}", super::sha256_hex(lower.as_bytes()).get(..12).unwrap_or("0")),
        "path_lower": lower,
        "path_display": display,
    })
}

fn route_error(tag: &str, inner: &str) -> Response {
    json_response(
        StatusCode::CONFLICT,
        &json!({"error_summary": format!("{tag}/{inner}/.."),
                "error": {".tag": tag, tag: {".tag": inner}}}),
    )
}

fn bad_request(why: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [("content-type", "text/plain; charset=utf-8")],
        format!("Error in call: {why}"),
    )
        .into_response()
}

/// The argument of a content route (the `Dropbox-API-Arg` header, or the `arg` query value).
fn arg(req: &Req) -> Option<Value> {
    if let Some(h) = req.header("dropbox-api-arg") {
        return serde_json::from_str(h).ok();
    }
    req.query
        .split('&')
        .find_map(|kv| kv.strip_prefix("arg="))
        .and_then(|v| serde_json::from_str(&percent_decode(v)).ok())
}

pub(super) fn handle(fx: &Fixture, host: &str, req: &Req) -> Response {
    if req.method != axum::http::Method::POST {
        return bad_request("the Dropbox API takes POST only");
    }
    let route = req.path.strip_prefix("/2/").unwrap_or("");
    match (host, route) {
        ("content.dropboxapi.com", "files/upload") => {
            let Some(a) = arg(req) else {
                return bad_request("missing Dropbox-API-Arg");
            };
            commit(fx, &a, req.body.to_vec())
        }
        ("content.dropboxapi.com", "files/upload_session/start") => {
            let mut s = fx.state.lock().unwrap();
            let id = format!("session{}", s.next_id());
            s.dropbox.sessions.insert(id.clone(), req.body.to_vec());
            json_response(StatusCode::OK, &json!({"session_id": id}))
        }
        ("content.dropboxapi.com", "files/upload_session/append_v2")
        | ("content.dropboxapi.com", "files/upload_session/finish") => {
            let Some(a) = arg(req) else {
                return bad_request("missing Dropbox-API-Arg");
            };
            let id = a
                .pointer("/cursor/session_id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let offset = a.pointer("/cursor/offset").and_then(Value::as_u64);
            let data = {
                let mut s = fx.state.lock().unwrap();
                let Some(buf) = s.dropbox.sessions.get_mut(&id) else {
                    drop(s);
                    return json_response(
                        StatusCode::CONFLICT,
                        &json!({"error_summary": "not_found/..", "error": {".tag": "not_found"}}),
                    );
                };
                if offset != Some(buf.len() as u64) {
                    let correct = buf.len();
                    drop(s);
                    return json_response(
                        StatusCode::CONFLICT,
                        &json!({"error_summary": "incorrect_offset/..",
                                "error": {".tag": "incorrect_offset", "correct_offset": correct}}),
                    );
                }
                buf.extend_from_slice(&req.body);
                if route.ends_with("finish") {
                    s.dropbox.sessions.remove(&id)
                } else {
                    None
                }
            };
            match data {
                None => json_response(StatusCode::OK, &Value::Null),
                Some(data) => commit(fx, a.get("commit").unwrap_or(&Value::Null), data),
            }
        }
        ("content.dropboxapi.com", "files/download") => {
            let path = arg(req)
                .and_then(|a| a.get("path").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default();
            let found = {
                let s = fx.state.lock().unwrap();
                lookup(&s.dropbox, &path).map(|f| (f.data.clone(), file_meta(f)))
            };
            match found {
                None => route_error("path", "not_found"),
                Some((data, meta)) => {
                    content_response(fx, req, data, &[("dropbox-api-result", ascii_json(&meta))])
                }
            }
        }
        ("api.dropboxapi.com", "files/get_metadata") => {
            let path = str_arg(&req.json(), "path");
            let s = fx.state.lock().unwrap();
            let lower = path.to_lowercase();
            if let Some(f) = lookup(&s.dropbox, &path) {
                json_response(StatusCode::OK, &file_meta(f))
            } else if let Some(d) = s.dropbox.folders.get(&lower) {
                json_response(StatusCode::OK, &folder_meta(&lower, d))
            } else {
                route_error("path", "not_found")
            }
        }
        ("api.dropboxapi.com", "files/list_folder") => {
            let a = req.json();
            let path = str_arg(&a, "path").to_lowercase();
            let recursive = a.get("recursive").and_then(Value::as_bool) == Some(true);
            let mut s = fx.state.lock().unwrap();
            if !path.is_empty() && !s.dropbox.folders.contains_key(&path) {
                return route_error("path", "not_found");
            }
            let inside = |lower: &str| {
                if recursive {
                    path.is_empty() || lower.starts_with(&format!("{path}/"))
                } else {
                    parent_of(lower) == path
                }
            };
            let mut entries: Vec<(String, Value)> = s
                .dropbox
                .folders
                .iter()
                .filter(|(l, _)| inside(l))
                .map(|(l, d)| (l.clone(), folder_meta(l, d)))
                .collect();
            entries.extend(
                s.dropbox
                    .files
                    .iter()
                    .filter(|(l, _)| inside(l))
                    .map(|(l, f)| (l.clone(), file_meta(f))),
            );
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let entries = entries.into_iter().map(|(_, v)| v).collect();
            page(&mut s, entries)
        }
        ("api.dropboxapi.com", "files/list_folder/continue") => {
            let cursor = str_arg(&req.json(), "cursor");
            let mut s = fx.state.lock().unwrap();
            match s.dropbox.cursors.remove(&cursor) {
                None => route_error("path", "not_found"),
                Some(rest) => page(&mut s, rest),
            }
        }
        ("api.dropboxapi.com", "files/delete_v2") => {
            let path = str_arg(&req.json(), "path");
            let lower = path.to_lowercase();
            let mut s = fx.state.lock().unwrap();
            let d = &mut s.dropbox;
            let meta = if let Some(f) = d.files.remove(&lower) {
                file_meta(&f)
            } else if let Some(display) = d.folders.remove(&lower) {
                let under = format!("{lower}/");
                d.files.retain(|l, _| !l.starts_with(&under));
                d.folders.retain(|l, _| !l.starts_with(&under));
                folder_meta(&lower, &display)
            } else {
                return route_error("path_lookup", "not_found");
            };
            json_response(StatusCode::OK, &json!({"metadata": meta}))
        }
        _ => bad_request(&format!("unknown route {route} on {host}")),
    }
}

fn str_arg(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn lookup<'a>(d: &'a Dropbox, path: &str) -> Option<&'a File> {
    if let Some(id) = path.strip_prefix("id:") {
        return d.files.values().find(|f| f.id == format!("id:{id}"));
    }
    d.files.get(&path.to_lowercase())
}

fn page(s: &mut super::Inner, mut entries: Vec<Value>) -> Response {
    let rest = if entries.len() > PAGE {
        entries.split_off(PAGE)
    } else {
        Vec::new()
    };
    let cursor = format!("cursor{}", s.next_id());
    let has_more = !rest.is_empty();
    if has_more {
        s.dropbox.cursors.insert(cursor.clone(), rest);
    }
    json_response(
        StatusCode::OK,
        &json!({"entries": entries, "cursor": cursor, "has_more": has_more}),
    )
}

/// Stores an upload at the commit's path (mode overwrite, or add: a conflict if it exists).
fn commit(fx: &Fixture, a: &Value, data: Vec<u8>) -> Response {
    let path = str_arg(a, "path");
    if !path.starts_with('/') || path.len() < 2 || path.ends_with('/') {
        return json_response(
            StatusCode::CONFLICT,
            &json!({"error_summary": "path/malformed_path/..",
                    "error": {".tag": "path", "reason": {".tag": "malformed_path"}, "upload_session_id": ""}}),
        );
    }
    let lower = path.to_lowercase();
    let overwrite = a.pointer("/mode/.tag").and_then(Value::as_str) == Some("overwrite")
        || a.get("mode").and_then(Value::as_str) == Some("overwrite");
    let mut s = fx.state.lock().unwrap();
    if s.dropbox.files.contains_key(&lower) && !overwrite {
        return json_response(
            StatusCode::CONFLICT,
            &json!({"error_summary": "path/conflict/file/..",
                    "error": {".tag": "path", "reason": {".tag": "conflict", "conflict": {".tag": "file"}},
                              "upload_session_id": ""}}),
        );
    }
    let n = s.next_id();
    // Every folder above the file.
    let mut at = 0;
    while let Some(i) = path[at + 1..].find('/') {
        let end = at + 1 + i;
        s.dropbox
            .folders
            .entry(lower[..end].to_string())
            .or_insert_with(|| path[..end].to_string());
        at = end;
    }
    let file = File {
        display: path.clone(),
        data: Arc::new(data),
        id: format!("id:file{n:08}"),
        rev: format!("{n:015x}a"),
    };
    let meta = file_meta(&file);
    s.dropbox.files.insert(lower, file);
    json_response(StatusCode::OK, &meta)
}

/// JSON safe for a header: non-ASCII escaped.
fn ascii_json(v: &Value) -> String {
    let mut out = String::new();
    for ch in v.to_string().chars() {
        if ch.is_ascii() {
            out.push(ch);
        } else {
            let mut units = [0u16; 2];
            for u in ch.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}
