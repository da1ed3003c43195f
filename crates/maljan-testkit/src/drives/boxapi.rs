//! Box API 2.0, the routes `FA_box_*` use: `OPTIONS /files/content` (the preflight check),
//! `POST /files/content` and `/files/{id}/content` (multipart uploads: `attributes`, then
//! `file`), chunked upload sessions (`POST /files/upload_sessions`, `PUT` parts with
//! `Content-Range` and a `Digest: sha=` SHA-1, `POST …/commit` with the whole file's digest),
//! `GET /files/{id}`, `GET /files/{id}/content` (a 302 to a download link), `DELETE
//! /files/{id}`, `GET /folders/{id}/items`, `POST /folders`, `DELETE /folders/{id}?recursive=`.
//! Folder `0` is the root; names compare case-insensitively; errors are Box's
//! `{"type": "error", "status", "code", "message"}`.

use axum::{
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use base64::Engine;
use serde_json::{Value, json};
use sha1::{Digest, Sha1};

use super::{
    Fixture, Req, content_response, json_response,
    tree::{Tree, Uploads, content_range},
};

/// Parts of 8 MiB, as Box asks for files of this size.
const PART: u64 = 8 << 20;

pub(crate) struct BoxDrive {
    tree: Tree,
    uploads: Uploads,
}

impl Default for BoxDrive {
    fn default() -> Self {
        Self {
            tree: Tree::new("0", "All Files", ""),
            uploads: Uploads::default(),
        }
    }
}

fn error(status: StatusCode, code: &str, message: &str, context: Option<Value>) -> Response {
    let mut v = json!({"type": "error", "status": status.as_u16(), "code": code, "message": message,
                       "request_id": "fixture"});
    if let Some(c) = context {
        v["context_info"] = c;
    }
    json_response(status, &v)
}

fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not_found", "Not Found", None)
}

fn sha1_hex(data: &[u8]) -> String {
    hex::encode(Sha1::digest(data))
}

fn item_json(b: &BoxDrive, id: &str) -> Value {
    let Some(i) = b.tree.get(id) else {
        return Value::Null;
    };
    let parent = i
        .parent
        .as_ref()
        .map(|p| json!({"type": "folder", "id": p, "name": b.tree.get(p).map(|x| x.name.clone())}));
    match &i.data {
        Some(data) => json!({"type": "file", "id": i.id, "etag": (i.version - 1).to_string(),
                             "name": i.name, "size": data.len(), "sha1": sha1_hex(data),
                             "file_version": {"type": "file_version", "id": format!("v{}{}", i.id, i.version), "sha1": sha1_hex(data)},
                             "parent": parent, "item_status": "active"}),
        None => json!({"type": "folder", "id": i.id, "etag": "0", "name": i.name, "size": 0,
                       "parent": parent, "item_status": "active"}),
    }
}

fn mini(b: &BoxDrive, id: &str) -> Value {
    let full = item_json(b, id);
    let mut m =
        json!({"type": full["type"], "id": full["id"], "etag": full["etag"], "name": full["name"]});
    if full["type"] == "file" {
        m["sha1"] = full["sha1"].clone();
        m["file_version"] = full["file_version"].clone();
    }
    m
}

/// The `attributes` JSON and the `file` bytes of a multipart upload.
fn multipart(req: &Req) -> Option<(Value, Vec<u8>)> {
    let ct = req.header("content-type")?;
    let boundary = ct
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))?
        .trim_matches('"');
    let delim = format!("--{boundary}").into_bytes();
    let body = &req.body[..];
    let mut attributes = None;
    let mut file = None;
    let mut at = find(body, &delim, 0)?;
    loop {
        let start = at + delim.len();
        if body[start..].starts_with(b"--") {
            break;
        }
        let next = find(body, &delim, start)?;
        let part = &body[start..next];
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let part = part.strip_suffix(b"\r\n").unwrap_or(part);
        let split = find(part, b"\r\n\r\n", 0)?;
        let head = String::from_utf8_lossy(&part[..split]).to_lowercase();
        let content = &part[split + 4..];
        if head.contains("name=\"attributes\"") {
            attributes = serde_json::from_slice(content).ok();
        } else if head.contains("name=\"file\"") {
            file = Some(content.to_vec());
        }
        at = next;
    }
    Some((attributes?, file?))
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn digest_of(req: &Req) -> Option<String> {
    req.header("digest")?
        .strip_prefix("sha=")
        .map(str::to_string)
}

fn b64_sha1(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha1::digest(data))
}

fn conflict(b: &BoxDrive, id: &str, folders: bool) -> Response {
    let c = mini(b, id);
    let conflicts = if folders { json!([c]) } else { c };
    error(
        StatusCode::CONFLICT,
        "item_name_in_use",
        "Item with the same name already exists",
        Some(json!({"conflicts": conflicts})),
    )
}

pub(super) fn handle(fx: &Fixture, host: &str, req: &Req) -> Response {
    let route = req.path.strip_prefix(if host == "upload.box.com" {
        "/api/2.0/"
    } else {
        "/2.0/"
    });
    let Some(route) = route else {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "unknown route",
            None,
        );
    };
    let parts: Vec<&str> = route.split('/').collect();
    let base = req.base();
    let mut s = fx.state.lock().unwrap();
    let b = &mut s.r#box;
    match (host, &req.method, parts.as_slice()) {
        ("api.box.com", &Method::OPTIONS, ["files", "content"]) => {
            let a = req.json();
            let parent = a
                .pointer("/parent/id")
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = a.get("name").and_then(Value::as_str).unwrap_or("");
            if !b.tree.is_folder(parent) {
                return not_found();
            }
            match b.tree.child(parent, name).map(|c| c.id.clone()) {
                Some(id) => conflict(b, &id, false),
                None => json_response(
                    StatusCode::OK,
                    &json!({"upload_url": format!("{base}/upload.box.com/api/2.0/files/content"), "upload_token": null}),
                ),
            }
        }
        ("upload.box.com", &Method::POST, ["files", "content"])
        | ("upload.box.com", &Method::POST, ["files", _, "content"]) => {
            let Some((attributes, data)) = multipart(req) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    "a multipart form with attributes and file is needed",
                    None,
                );
            };
            let name = attributes
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let id = if parts.len() == 3 {
                let id = parts[1].to_string();
                let Some(item) = b.tree.get_mut(&id).filter(|i| i.data.is_some()) else {
                    return not_found();
                };
                item.data = Some(std::sync::Arc::new(data));
                item.version += 1;
                if !name.is_empty() {
                    item.name = name;
                }
                id
            } else {
                let parent = attributes
                    .pointer("/parent/id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if !b.tree.is_folder(&parent) {
                    return not_found();
                }
                if name.is_empty() || name.contains('/') {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "item_name_invalid",
                        "Item name invalid",
                        None,
                    );
                }
                if let Some(c) = b.tree.child(&parent, &name).map(|c| c.id.clone()) {
                    return conflict(b, &c, false);
                }
                b.tree
                    .add(&parent, &name, Some(data), "application/octet-stream")
            };
            json_response(
                StatusCode::CREATED,
                &json!({"total_count": 1, "entries": [item_json(b, &id)]}),
            )
        }
        ("upload.box.com", &Method::POST, ["files", "upload_sessions"])
        | ("upload.box.com", &Method::POST, ["files", _, "upload_sessions"]) => {
            let a = req.json();
            let size = a.get("file_size").and_then(Value::as_u64).unwrap_or(0);
            if size < 20_000_000 {
                return error(
                    StatusCode::BAD_REQUEST,
                    "file_size_too_small",
                    "File size is less than minimum allowed for this API: 20000000",
                    None,
                );
            }
            let target = if parts.len() == 3 {
                if b.tree.get(parts[1]).is_none_or(|i| i.data.is_none()) {
                    return not_found();
                }
                json!({"file": parts[1], "name": a.get("file_name")})
            } else {
                let parent = a.get("folder_id").and_then(Value::as_str).unwrap_or("");
                if !b.tree.is_folder(parent) {
                    return not_found();
                }
                json!({"folder": parent, "name": a.get("file_name")})
            };
            let sid = b.uploads.start(Some(size), target);
            let at = format!("{base}/upload.box.com/api/2.0/files/upload_sessions/{sid}");
            json_response(
                StatusCode::CREATED,
                &json!({
                "type": "upload_session", "id": sid, "session_expires_at": "2099-01-01T00:00:00Z",
                "part_size": PART, "total_parts": size.div_ceil(PART), "num_parts_processed": 0,
                "session_endpoints": {"upload_part": at, "commit": format!("{at}/commit"), "abort": at,
                                      "list_parts": format!("{at}/parts"), "status": at, "log_event": format!("{at}/log")}}),
            )
        }
        ("upload.box.com", &Method::PUT, ["files", "upload_sessions", sid]) => {
            let Some(up) = b.uploads.open.get_mut(*sid) else {
                return not_found();
            };
            let Some((Some((first, last)), total)) =
                req.header("content-range").and_then(content_range)
            else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    "Content-Range is needed",
                    None,
                );
            };
            if Some(total) != up.total
                || first % PART != 0
                || last + 1 - first != req.body.len() as u64
                || (last + 1 != total && req.body.len() as u64 != PART)
                || first != up.data.len() as u64
            {
                return error(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    "range_mismatch",
                    "the part's range does not fit the session",
                    None,
                );
            }
            if digest_of(req) != Some(b64_sha1(&req.body)) {
                return error(
                    StatusCode::PRECONDITION_FAILED,
                    "sha1_mismatch",
                    "The digest does not match the part",
                    None,
                );
            }
            up.data.extend_from_slice(&req.body);
            json_response(
                StatusCode::OK,
                &json!({"part": {"part_id": format!("{:08X}", first / PART), "offset": first,
                                                          "size": req.body.len(), "sha1": sha1_hex(&req.body)}}),
            )
        }
        ("upload.box.com", &Method::POST, ["files", "upload_sessions", sid, "commit"]) => {
            let Some(up) = b.uploads.open.get(*sid) else {
                return not_found();
            };
            let parts_given = req
                .json()
                .get("parts")
                .and_then(Value::as_array)
                .map_or(0, Vec::len) as u64;
            if Some(up.data.len() as u64) != up.total
                || parts_given != up.data.len().div_ceil(PART as usize) as u64
            {
                return error(
                    StatusCode::BAD_REQUEST,
                    "missing_parts",
                    "parts are missing",
                    None,
                );
            }
            if digest_of(req) != Some(b64_sha1(&up.data)) {
                return error(
                    StatusCode::PRECONDITION_FAILED,
                    "sha1_mismatch",
                    "The digest does not match the file",
                    None,
                );
            }
            let up = b.uploads.open.remove(*sid).unwrap();
            let name = up.target["name"].as_str().unwrap_or("").to_string();
            let id = if let Some(file) = up.target["file"].as_str() {
                let item = b.tree.get_mut(file).unwrap();
                item.data = Some(std::sync::Arc::new(up.data));
                item.version += 1;
                file.to_string()
            } else {
                let parent = up.target["folder"].as_str().unwrap_or("0").to_string();
                b.tree.put(&parent, &name, up.data)
            };
            json_response(
                StatusCode::CREATED,
                &json!({"total_count": 1, "entries": [item_json(b, &id)]}),
            )
        }
        ("upload.box.com", &Method::GET, ["files", "upload_sessions", sid, "parts"]) => {
            let Some(up) = b.uploads.open.get(*sid) else {
                return not_found();
            };
            let entries: Vec<Value> = up
                .data
                .chunks(PART as usize)
                .enumerate()
                .map(|(n, c)| json!({"part_id": format!("{n:08X}"), "offset": n as u64 * PART, "size": c.len(), "sha1": sha1_hex(c)}))
                .collect();
            json_response(
                StatusCode::OK,
                &json!({"total_count": entries.len(), "entries": entries, "offset": 0, "limit": 1000}),
            )
        }
        ("upload.box.com", &Method::DELETE, ["files", "upload_sessions", sid]) => {
            match b.uploads.open.remove(*sid) {
                Some(_) => StatusCode::NO_CONTENT.into_response(),
                None => not_found(),
            }
        }
        ("api.box.com", &Method::GET, ["files", id]) => {
            match b.tree.get(id).filter(|i| i.data.is_some()) {
                Some(_) => json_response(StatusCode::OK, &item_json(b, id)),
                None => not_found(),
            }
        }
        ("api.box.com", &Method::GET, ["files", id, "content"]) => {
            match b.tree.get(id).filter(|i| i.data.is_some()) {
                Some(_) => (
                    StatusCode::FOUND,
                    [(
                        header::LOCATION,
                        format!("{base}/dl.boxcloud.com/d/1/{id}/download"),
                    )],
                )
                    .into_response(),
                None => not_found(),
            }
        }
        ("api.box.com", &Method::DELETE, ["files", id]) => {
            if b.tree.get(id).is_some_and(|i| i.data.is_some()) && b.tree.remove(id) {
                StatusCode::NO_CONTENT.into_response()
            } else {
                not_found()
            }
        }
        ("api.box.com", &Method::GET, ["folders", id]) if b.tree.is_folder(id) => {
            json_response(StatusCode::OK, &item_json(b, id))
        }
        ("api.box.com", &Method::GET, ["folders", id, "items"]) => {
            if !b.tree.is_folder(id) {
                return not_found();
            }
            let limit: usize = req
                .param("limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(100)
                .min(1000);
            let offset: usize = req
                .param("offset")
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let kids: Vec<String> = b.tree.children(id).iter().map(|i| i.id.clone()).collect();
            let entries: Vec<Value> = kids
                .iter()
                .skip(offset)
                .take(limit)
                .map(|k| mini(b, k))
                .collect();
            json_response(
                StatusCode::OK,
                &json!({"total_count": kids.len(), "entries": entries, "offset": offset,
                                                  "limit": limit, "order": [{"by": "type", "direction": "ASC"}]}),
            )
        }
        ("api.box.com", &Method::POST, ["folders"]) => {
            let a = req.json();
            let parent = a
                .pointer("/parent/id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let name = a
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if !b.tree.is_folder(&parent) {
                return not_found();
            }
            if let Some(c) = b.tree.child(&parent, &name).map(|c| c.id.clone()) {
                return conflict(b, &c, true);
            }
            let id = b.tree.add(&parent, &name, None, "folder");
            json_response(StatusCode::CREATED, &item_json(b, &id))
        }
        ("api.box.com", &Method::DELETE, ["folders", id]) => {
            if !b.tree.is_folder(id) || *id == "0" {
                return not_found();
            }
            let recursive = req
                .param("recursive")
                .is_some_and(|r| r.eq_ignore_ascii_case("true"));
            if !recursive && !b.tree.children(id).is_empty() {
                return error(
                    StatusCode::BAD_REQUEST,
                    "folder_not_empty",
                    "Cannot delete – folder not empty",
                    None,
                );
            }
            b.tree.remove(id);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => error(StatusCode::NOT_FOUND, "not_found", "unknown route", None),
    }
}

/// Download links (no token).
pub(super) fn public(fx: &Fixture, req: &Req) -> Response {
    let id = req
        .path
        .trim_start_matches("/d/1/")
        .trim_end_matches("/download")
        .to_string();
    let data = fx
        .state
        .lock()
        .unwrap()
        .r#box
        .tree
        .get(&id)
        .and_then(|i| i.data.clone());
    match data {
        Some(data) => content_response(fx, req, data, &[]),
        None => not_found(),
    }
}
