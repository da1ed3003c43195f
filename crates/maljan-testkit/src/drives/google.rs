//! Google Drive API v3, the routes `FA_drive_*` use: `GET /drive/v3/files` (a `q` of clauses
//! joined by `and`: `mimeType = '…'`, `mimeType != '…'`, `name = '…'`, `'ID' in parents`,
//! `trashed = false`; pages of [`PAGE`] with `nextPageToken`), `GET /files/{id}` (with
//! `alt=media`: the bytes, Range honoured), `POST /files` (metadata only: a folder),
//! `DELETE /files/{id}`, `POST /files/{id}/permissions`, and resumable uploads (`POST
//! /upload/drive/v3/files?uploadType=resumable` answers the session URI in `Location`; `PUT`
//! pieces there with `Content-Range`, 308 with `Range` until the last). Sizes are strings, as
//! Drive's int64s are. And `oauth2.googleapis.com/token`'s refresh grant.

use axum::{
    http::{Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    Fixture, Req, content_response, json_response,
    tree::{Tree, Uploads, content_range},
};

const PAGE: usize = 3;
const FOLDER: &str = "application/vnd.google-apps.folder";
pub const REFRESH_TOKEN: &str = "fixture-google-refresh";

pub(crate) struct Google {
    tree: Tree,
    uploads: Uploads,
    permissions: u64,
}

impl Default for Google {
    fn default() -> Self {
        Self {
            tree: Tree::new("rootfolder0", "My Drive", "gfile"),
            uploads: Uploads::default(),
            permissions: 0,
        }
    }
}

fn error(status: StatusCode, reason: &str, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": {"code": status.as_u16(), "message": message,
                          "errors": [{"domain": "global", "reason": reason, "message": message}]}}),
    )
}

fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "notFound",
        &format!("File not found: {id}."),
    )
}

fn file_json(g: &Google, id: &str) -> Value {
    let Some(i) = g.tree.get(id) else {
        return Value::Null;
    };
    let mut v = json!({"kind": "drive#file", "id": i.id, "name": i.name, "mimeType": i.mime,
                       "parents": i.parent.iter().collect::<Vec<_>>(), "trashed": false});
    if let Some(d) = &i.data {
        v["size"] = json!(d.len().to_string());
        v["sha256Checksum"] = json!(super::sha256_hex(d));
    }
    v
}

/// One clause of a query: does the item match it? None: a clause this fixture does not know.
fn clause(g: &Google, id: &str, c: &str) -> Option<bool> {
    let i = g.tree.get(id)?;
    let c = c.trim();
    let lit = |s: &str| -> Option<String> {
        let s = s.trim().strip_prefix('\'')?.strip_suffix('\'')?;
        Some(s.replace("\\'", "'").replace("\\\\", "\\"))
    };
    if let Some((l, r)) = c.split_once(" in ") {
        if r.trim() == "parents" {
            let mut p = lit(l)?;
            if p == "root" {
                p = g.tree.root.clone();
            }
            return Some(i.parent.as_deref() == Some(p.as_str()));
        }
        return None;
    }
    let (field, op, value) = if let Some((f, v)) = c.split_once("!=") {
        (f.trim(), "!=", v)
    } else {
        let (f, v) = c.split_once('=')?;
        (f.trim(), "=", v)
    };
    let equal = match field {
        "mimeType" => i.mime == lit(value)?,
        "name" => i.name == lit(value)?,
        "trashed" => value.trim() == "false",
        _ => return None,
    };
    Some(if op == "=" { equal } else { !equal })
}

/// Splits a query on ` and ` outside its string literals.
fn clauses(q: &str) -> Vec<String> {
    let b = q.as_bytes();
    let (mut out, mut start, mut quoted, mut i) = (Vec::new(), 0, false, 0);
    while i < b.len() {
        match b[i] {
            b'\\' if quoted => {
                i += 2;
                continue;
            }
            b'\'' => quoted = !quoted,
            _ => {}
        }
        if !quoted && b[i..].starts_with(b" and ") {
            out.push(q[start..i].to_string());
            i += 5;
            start = i;
            continue;
        }
        i += 1;
    }
    out.push(q[start.min(q.len())..].to_string());
    out
}

pub(super) fn handle(fx: &Fixture, req: &Req) -> Response {
    let base = req.base();
    let mut s = fx.state.lock().unwrap();
    let g = &mut s.google;
    if let Some(rest) = req.path.strip_prefix("/upload/drive/v3/files") {
        if !rest.is_empty() {
            return error(StatusCode::NOT_FOUND, "notFound", "unknown upload route");
        }
        if req.method == Method::POST {
            if req.param("uploadType").as_deref() != Some("resumable") {
                return error(
                    StatusCode::BAD_REQUEST,
                    "badRequest",
                    "this fixture takes uploadType=resumable",
                );
            }
            let meta = req.json();
            let total = req
                .header("x-upload-content-length")
                .and_then(|v| v.parse().ok());
            let sid = g.uploads.start(total, meta);
            let at = format!(
                "{base}/www.googleapis.com/upload/drive/v3/files?uploadType=resumable&upload_id={sid}"
            );
            return (StatusCode::OK, [(header::LOCATION, at)]).into_response();
        }
        let Some(sid) = req.param("upload_id") else {
            return error(StatusCode::BAD_REQUEST, "badRequest", "no upload_id");
        };
        let Some(up) = g.uploads.open.get_mut(&sid) else {
            return error(StatusCode::NOT_FOUND, "notFound", "no such upload session");
        };
        let range = req.header("content-range").and_then(content_range);
        let total = match range {
            Some((Some((first, last)), total)) => {
                if first != up.data.len() as u64
                    || last + 1 - first != req.body.len() as u64
                    || last >= total
                {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "badContent",
                        "the piece does not continue the upload",
                    );
                }
                let is_last = last + 1 == total;
                if !is_last && !req.body.len().is_multiple_of(256 * 1024) {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "badContent",
                        "pieces must be multiples of 256 KiB",
                    );
                }
                up.data.extend_from_slice(&req.body);
                total
            }
            Some((None, total)) => total,
            None if req.header("content-range").is_none() => {
                up.data.extend_from_slice(&req.body);
                up.data.len() as u64
            }
            None => return error(StatusCode::BAD_REQUEST, "badContent", "bad Content-Range"),
        };
        if (up.data.len() as u64) < total {
            let mut r = (StatusCode::PERMANENT_REDIRECT, ()).into_response();
            if !up.data.is_empty() {
                r.headers_mut().insert(
                    header::RANGE,
                    format!("bytes=0-{}", up.data.len() - 1).parse().unwrap(),
                );
            }
            return r;
        }
        let up = g.uploads.open.remove(&sid).unwrap();
        let name = up
            .target
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("Untitled")
            .to_string();
        let parent = up
            .target
            .pointer("/parents/0")
            .and_then(Value::as_str)
            .map(str::to_string);
        let parent = parent.unwrap_or_else(|| g.tree.root.clone());
        if !g.tree.is_folder(&parent) {
            return not_found(&parent);
        }
        let mime = up
            .target
            .get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or("application/octet-stream")
            .to_string();
        let id = g.tree.add(&parent, &name, Some(up.data), &mime);
        return json_response(StatusCode::OK, &file_json(g, &id));
    }
    let Some(rest) = req.path.strip_prefix("/drive/v3/files") else {
        return error(StatusCode::NOT_FOUND, "notFound", "unknown route");
    };
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    match (&req.method, parts.as_slice()) {
        (&Method::GET, []) => {
            let q = req.param("q").unwrap_or_default();
            let cs = if q.trim().is_empty() {
                Vec::new()
            } else {
                clauses(&q)
            };
            let mut found = Vec::new();
            for i in g.tree.all() {
                let mut hit = true;
                for c in &cs {
                    match clause(g, &i.id, c) {
                        Some(h) => hit &= h,
                        None => return error(StatusCode::BAD_REQUEST, "invalid", "Invalid Value"),
                    }
                }
                if hit {
                    found.push(i.id.clone());
                }
            }
            let size: usize = req
                .param("pageSize")
                .and_then(|p| p.parse().ok())
                .unwrap_or(100)
                .clamp(1, PAGE);
            let skip: usize = req
                .param("pageToken")
                .and_then(|p| p.strip_prefix("page").and_then(|n| n.parse().ok()))
                .unwrap_or(0);
            let files: Vec<Value> = found
                .iter()
                .skip(skip)
                .take(size)
                .map(|id| file_json(g, id))
                .collect();
            let mut page =
                json!({"kind": "drive#fileList", "incompleteSearch": false, "files": files});
            if skip + size < found.len() {
                page["nextPageToken"] = json!(format!("page{}", skip + size));
            }
            json_response(StatusCode::OK, &page)
        }
        (&Method::POST, []) => {
            let meta = req.json();
            let name = meta
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("Untitled")
                .to_string();
            let mime = meta
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream")
                .to_string();
            let parent = meta
                .pointer("/parents/0")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| g.tree.root.clone());
            if !g.tree.is_folder(&parent) {
                return not_found(&parent);
            }
            let data = (mime != FOLDER).then(Vec::new);
            let id = g.tree.add(&parent, &name, data, &mime);
            json_response(StatusCode::OK, &file_json(g, &id))
        }
        (&Method::GET, [id]) => {
            let Some(item) = g.tree.get(id) else {
                return not_found(id);
            };
            if req.param("alt").as_deref() == Some("media") {
                let Some(data) = item.data.clone() else {
                    return error(
                        StatusCode::FORBIDDEN,
                        "fileNotDownloadable",
                        "Only files with binary content can be downloaded.",
                    );
                };
                drop(s);
                return content_response(fx, req, data, &[]);
            }
            json_response(StatusCode::OK, &file_json(g, id))
        }
        (&Method::DELETE, [id]) if *id != g.tree.root => {
            if g.tree.remove(id) {
                StatusCode::NO_CONTENT.into_response()
            } else {
                not_found(id)
            }
        }
        (&Method::POST, [id, "permissions"]) => {
            if g.tree.get(id).is_none() {
                return not_found(id);
            }
            let p = req.json();
            let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
            let role = p.get("role").and_then(Value::as_str).unwrap_or("");
            let needs = match kind {
                "user" | "group" => Some("emailAddress"),
                "domain" => Some("domain"),
                "anyone" => None,
                _ => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "invalid",
                        "Invalid permission type",
                    );
                }
            };
            if needs.is_some_and(|k| p.get(k).and_then(Value::as_str).is_none_or(str::is_empty)) {
                return error(
                    StatusCode::BAD_REQUEST,
                    "required",
                    "A field of the permission is required",
                );
            }
            if ![
                "reader",
                "commenter",
                "writer",
                "fileOrganizer",
                "organizer",
                "owner",
            ]
            .contains(&role)
            {
                return error(StatusCode::BAD_REQUEST, "invalid", "Invalid role");
            }
            g.permissions += 1;
            json_response(
                StatusCode::OK,
                &json!({"kind": "drive#permission", "id": format!("perm{}", g.permissions),
                                                  "type": kind, "role": role}),
            )
        }
        _ => error(StatusCode::NOT_FOUND, "notFound", "unknown route"),
    }
}

/// `POST oauth2.googleapis.com/token` with the refresh grant.
pub(super) fn token(fx: &Fixture, req: &Req) -> Response {
    let f = req.form();
    let ok = req.path == "/token"
        && f.get("grant_type").map(String::as_str) == Some("refresh_token")
        && f.get("refresh_token").map(String::as_str) == Some(REFRESH_TOKEN)
        && f.get("client_id").is_some_and(|c| !c.is_empty())
        && f.get("client_secret").is_some_and(|c| !c.is_empty());
    if !ok {
        return json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": "invalid_grant", "error_description": "Bad Request"}),
        );
    }
    json_response(
        StatusCode::OK,
        &json!({"access_token": fx.token, "expires_in": 3599, "token_type": "Bearer",
                                          "scope": "https://www.googleapis.com/auth/drive"}),
    )
}
