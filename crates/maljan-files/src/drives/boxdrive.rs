//! `FA_box_*` over the Box API 2.0, by id (`0` is the root folder): a preflight check (`OPTIONS
//! /files/content`) says whether the name is free or which file a new version goes to; a file up
//! to [`SIMPLE_UPLOAD`] goes up as one multipart form (`POST /files/content`, or
//! `/files/{id}/content` for a new version), a larger one through a chunked upload session
//! (parts of the session's `part_size`, each with its SHA-1 digest, then a commit with the whole
//! file's). Downloads read the file's size, then follow `/files/{id}/content`'s redirect.
//! `FA_box_upload_dir` mirrors the local folders as Box folders (Box names hold no `/`).

use std::sync::Arc;

use base64::Engine;
use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use reqwest::{Method, StatusCode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha1::{Digest, Sha1};

use super::{
    Api, Drives, LocalFile, Opener, Pieces, Service, TRANSFER_TIMEOUT_S, Transferred, files_under,
    plain_id, save, size_of, str_of,
};
use crate::storage::default_profile;

/// Box wants files over 50 MB in sessions, and sessions only for files of 20 MB or more.
const SIMPLE_UPLOAD: u64 = 20_000_000;

fn root() -> String {
    "0".into()
}

fn hundred() -> u32 {
    100
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadFile {
    /// The local file to upload.
    file_path: String,
    /// The Box folder it goes in (`0`: the root).
    #[serde(default = "root")]
    #[schemars(default = "root")]
    parent_folder_id: String,
    /// Its name in Box; empty for the local file's name. A file of that name there gets a new
    /// version.
    #[serde(default)]
    name: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadDir {
    /// The local directory whose files are uploaded (recursively, its folders mirrored).
    dir_path: String,
    #[serde(default = "root")]
    #[schemars(default = "root")]
    parent_folder_id: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DownloadFile {
    file_id: String,
    /// The local file written (through `<target_path>.part`, renamed when complete).
    target_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteFile {
    file_id: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DeleteFolder {
    folder_id: String,
    /// Also everything in it (else a folder that is not empty is refused).
    #[serde(default)]
    recursive: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListFolder {
    #[serde(default = "root")]
    #[schemars(default = "root")]
    folder_id: String,
    /// At most this many entries (the first page; Box allows up to 1000).
    #[serde(default = "hundred")]
    #[schemars(default = "hundred", range(min = 1, max = 1000))]
    limit: u32,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LaterInit {
    /// A Box access token. Never echoed, logged or kept beyond this server's lifetime.
    #[schemars(extend("writeOnly" = true))]
    access_token: String,
    /// Accepted for automation-file's signature; this server does not revoke tokens.
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    #[schemars(extend("writeOnly" = true))]
    client_secret: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Serialize, JsonSchema)]
struct Entry {
    id: String,
    name: String,
    /// `file`, `folder` or `web_link`.
    #[serde(rename = "type")]
    kind: String,
}

fn box_name(name: &str) -> Result<String, ToolError> {
    let n = name.trim();
    if n.is_empty()
        || n == "."
        || n == ".."
        || n.contains(['/', '\\'])
        || n.chars().any(char::is_control)
    {
        return Err(ToolError::bad_argument(format!(
            "{name:?} cannot be a Box name (no /, \\, control characters, . or ..)"
        )));
    }
    Ok(n.to_string())
}

/// Where an upload goes: a new file in the folder, or a new version of the one holding the name.
async fn preflight(
    api: &Api,
    parent: &str,
    name: &str,
    size: u64,
) -> Result<Option<String>, ToolError> {
    let req = api
        .request(Method::OPTIONS, &format!("{}/files/content", api.api_url))?
        .json(&json!({"name": name, "parent": {"id": parent}, "size": size}));
    let (status, answer) = api.exchange(req).await?;
    if status.is_success() {
        return Ok(None);
    }
    if status == StatusCode::CONFLICT
        && let Some(id) = answer
            .pointer("/context_info/conflicts/id")
            .and_then(Value::as_str)
    {
        return Ok(Some(id.to_string()));
    }
    // Anything else (no such folder, a refused token…) as Box says it.
    Err(api.refusal(status, &answer))
}

async fn upload(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    file_path: &str,
    parent: &str,
    name: &str,
) -> Result<Transferred, ToolError> {
    let parent = plain_id("parent_folder_id", parent)?;
    let mut file = LocalFile::open(c, file_path, api.max_bytes()).await?;
    let size = file.size;
    let name = box_name(name)?;
    let existing = preflight(api, &parent, &name, size).await?;
    let entry = if size <= SIMPLE_UPLOAD {
        let (url, attributes) = match &existing {
            Some(id) => (
                format!("{}/files/{id}/content", api.upload_url),
                json!({"name": name}),
            ),
            None => (
                format!("{}/files/content", api.upload_url),
                json!({"name": name, "parent": {"id": parent}}),
            ),
        };
        let boundary = format!("maljan{}", uuid::Uuid::new_v4().simple());
        let head = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"attributes\"\r\n\r\n{attributes}\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .into_bytes();
        let tail = format!("\r\n--{boundary}--\r\n").into_bytes();
        let length = size + (head.len() + tail.len()) as u64;
        let req = api
            .request(Method::POST, &url)?
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .header("content-length", length)
            .body(file.framed_body(ctx, head, tail));
        first_entry(api.json(req).await?)?
    } else {
        session(api, ctx, &mut file, &parent, &name, existing.as_deref()).await?
    };
    Service::Box.stored(&entry, size)?;
    Ok(Transferred {
        remote: str_of(&entry, "name").unwrap_or(name),
        id: str_of(&entry, "id"),
        path: file_path.to_string(),
        bytes: size,
        content_hash: str_of(&entry, "sha1"),
    })
}

fn first_entry(answer: Value) -> Result<Value, ToolError> {
    answer
        .pointer("/entries/0")
        .cloned()
        .ok_or_else(|| ToolError::tool_failed("Box answered the upload without the file"))
}

/// A chunked upload session: parts with their SHA-1 digests, then a commit with the whole's.
async fn session(
    api: &Api,
    ctx: &ToolContext,
    file: &mut LocalFile,
    parent: &str,
    name: &str,
    existing: Option<&str>,
) -> Result<Value, ToolError> {
    let size = file.size;
    let (url, body) = match existing {
        Some(id) => (
            format!("{}/files/{id}/upload_sessions", api.upload_url),
            json!({"file_size": size, "file_name": name}),
        ),
        None => (
            format!("{}/files/upload_sessions", api.upload_url),
            json!({"folder_id": parent, "file_size": size, "file_name": name}),
        ),
    };
    let opened = api
        .json(api.request(Method::POST, &url)?.json(&body))
        .await?;
    let id = plain_id(
        "the upload session",
        &str_of(&opened, "id").unwrap_or_default(),
    )?;
    let part_size = opened.get("part_size").and_then(Value::as_u64).unwrap_or(0);
    if part_size == 0 || part_size > 256 << 20 {
        return Err(ToolError::tool_failed(format!(
            "Box asked for parts of {part_size} bytes"
        )));
    }
    let at = format!("{}/files/upload_sessions/{id}", api.upload_url);
    let mut whole = Sha1::new();
    let mut parts = Vec::new();
    let b64 = base64::engine::general_purpose::STANDARD;
    let sent = async {
        let mut pieces = Pieces::new(file, ctx, part_size as usize);
        while let Some(p) = pieces.next().await? {
            whole.update(&p.bytes);
            let req = api
                .request(Method::PUT, &at)?
                .header("content-type", "application/octet-stream")
                .header(
                    "content-range",
                    super::content_range(p.offset, p.bytes.len(), size),
                )
                .header(
                    "digest",
                    format!("sha={}", b64.encode(Sha1::digest(&p.bytes))),
                )
                .body(p.bytes);
            let answer = api.json(req).await?;
            parts.push(answer.get("part").cloned().unwrap_or(Value::Null));
        }
        Ok::<_, ToolError>(())
    }
    .await;
    if let Err(e) = sent {
        if let Ok(req) = api.request(Method::DELETE, &at) {
            let _ = api.send(req).await;
        }
        return Err(e);
    }
    let digest = format!("sha={}", b64.encode(whole.finalize()));
    // Box may answer 202 (still assembling) with a Retry-After; ask again a few times.
    for _ in 0..20 {
        let req = api
            .request(Method::POST, &format!("{at}/commit"))?
            .header("digest", &digest)
            .json(&json!({"parts": parts}));
        let resp = api.send(req).await?;
        if resp.status() == StatusCode::ACCEPTED {
            let wait = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1)
                .min(30);
            tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
            continue;
        }
        return first_entry(super::read_json(Service::Box, resp).await?);
    }
    Err(ToolError::tool_failed(
        "Box did not finish assembling the upload",
    ))
}

/// The id of the folder `name` in `parent`, made when missing.
async fn folder(api: &Api, parent: &str, name: &str) -> Result<String, ToolError> {
    let req = api
        .request(Method::POST, &format!("{}/folders", api.api_url))?
        .json(&json!({"name": box_name(name)?, "parent": {"id": parent}}));
    let (status, answer) = api.exchange(req).await?;
    let id = if status.is_success() {
        str_of(&answer, "id")
    } else if status == StatusCode::CONFLICT {
        answer
            .pointer("/context_info/conflicts/0/id")
            .and_then(Value::as_str)
            .map(str::to_string)
    } else {
        return Err(api.refusal(status, &answer));
    };
    id.ok_or_else(|| ToolError::tool_failed("Box made a folder without an id"))
}

async fn download(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    a: DownloadFile,
) -> Result<Transferred, ToolError> {
    let id = plain_id("file_id", &a.file_id)?;
    c.target(&a.target_path)?;
    let meta = api
        .json(api.request(
            Method::GET,
            &format!("{}/files/{id}?fields=id,name,size,sha1", api.api_url),
        )?)
        .await?;
    let content = format!("{}/files/{id}/content", api.api_url);
    let opener = api.clone();
    let open: Opener = Arc::new(move || opener.request(Method::GET, &content));
    let (source, _) = api.download(open, size_of(&meta)).await?;
    let bytes = save(c, ctx, source, &a.target_path).await?;
    Ok(Transferred {
        remote: str_of(&meta, "name").unwrap_or_default(),
        id: Some(id),
        path: a.target_path,
        bytes,
        content_hash: str_of(&meta, "sha1"),
    })
}

pub(super) fn register(reg: &mut Registry, drives: &Arc<Drives>) {
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_box_upload_file",
            "Upload a local file into a Box folder (a file of the same name there gets a new \
             version), streamed; large files go through a chunked upload session. Returns its id.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadFile| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Box, &a.profile)?;
                let name = if a.name.is_empty() {
                    std::path::Path::new(&a.file_path)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                } else {
                    a.name.clone()
                };
                upload(&api, &ctx, &d.cfg, &a.file_path, &a.parent_folder_id, &name).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_box_upload_dir",
            "Upload every file under a local directory into a Box folder, its folders mirrored as \
             Box folders; returns the relative paths uploaded.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadDir| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Box, &a.profile)?;
                let top = plain_id("parent_folder_id", &a.parent_folder_id)?;
                let mut folders = std::collections::HashMap::new();
                let mut out = Vec::new();
                for (local, rel) in files_under(&d.cfg, &ctx, &a.dir_path).await? {
                    let (dirs, name) = rel.rsplit_once('/').unwrap_or(("", &rel));
                    let mut parent = top.clone();
                    let mut so_far = String::new();
                    for dir in dirs.split('/').filter(|s| !s.is_empty()) {
                        so_far = format!("{so_far}/{dir}");
                        parent = match folders.get(&so_far) {
                            Some(id) => String::clone(id),
                            None => {
                                let id = folder(&api, &parent, dir).await?;
                                folders.insert(so_far.clone(), id.clone());
                                id
                            }
                        };
                    }
                    upload(&api, &ctx, &d.cfg, &local, &parent, name).await?;
                    out.push(rel);
                }
                Ok::<_, ToolError>(out)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_box_download_file",
            "Download a Box file (by id) to a local file, streamed and resumed where the connection \
             was cut; a failed download leaves no partial file.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: DownloadFile| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Box, &a.profile)?;
                download(&api, &ctx, &d.cfg, a).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_box_delete_file",
            "Delete a Box file by id (it goes to Box's trash).",
        )
        .destructive()
        .open_world()
        .timeout_s(120),
        move |_ctx: ToolContext, a: DeleteFile| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Box, &a.profile)?;
                let id = plain_id("file_id", &a.file_id)?;
                api.send(api.request(Method::DELETE, &format!("{}/files/{id}", api.api_url))?)
                    .await?;
                Ok::<_, ToolError>(true)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_box_delete_folder",
            "Delete a Box folder by id; with recursive, everything in it too (else it must be empty).",
        )
        .destructive()
        .open_world()
        .timeout_s(300),
        move |_ctx: ToolContext, a: DeleteFolder| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Box, &a.profile)?;
                let id = plain_id("folder_id", &a.folder_id)?;
                if id == "0" {
                    return Err(ToolError::bad_argument("folder 0 is the root; it cannot be deleted"));
                }
                let url = format!("{}/folders/{id}?recursive={}", api.api_url, a.recursive);
                api.send(api.request(Method::DELETE, &url)?).await?;
                Ok(true)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_box_list_folder",
            "The entries of a Box folder (id, name, type), up to limit of them (the first page).",
        )
        .open_world()
        .timeout_s(120),
        move |_ctx: ToolContext, a: ListFolder| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Box, &a.profile)?;
                let id = plain_id("folder_id", &a.folder_id)?;
                let limit = a.limit.clamp(1, 1000);
                let url = format!(
                    "{}/folders/{id}/items?limit={limit}&fields=id,name,type",
                    api.api_url
                );
                let page = api.json(api.request(Method::GET, &url)?).await?;
                let entries = page
                    .get("entries")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Ok::<_, ToolError>(
                    entries
                        .iter()
                        .take(limit as usize)
                        .map(|e| Entry {
                            id: str_of(e, "id").unwrap_or_default(),
                            name: str_of(e, "name").unwrap_or_default(),
                            kind: str_of(e, "type").unwrap_or_else(|| "file".into()),
                        })
                        .collect::<Vec<_>>(),
                )
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_box_later_init",
            "Set the Box access token of a profile for this server's lifetime. The token is never \
             echoed or logged; the profile's hosts and private-endpoint permission stay the operator's.",
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
        .not_idempotent()
        .timeout_s(60),
        move |_ctx: ToolContext, a: LaterInit| {
            let d = d.clone();
            async move {
                let mut done = d.install_token(Service::Box, &a.profile, a.access_token, "access_token")?;
                if !a.client_id.is_empty() {
                    done.set.push("client_id");
                }
                if !a.client_secret.is_empty() {
                    done.set.push("client_secret");
                }
                Ok::<_, ToolError>(done)
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_names_hold_no_separator() {
        assert_eq!(box_name(" a.txt ").unwrap(), "a.txt");
        for bad in ["", "a/b", "a\\b", "..", "a\nb"] {
            assert!(box_name(bad).is_err(), "{bad}");
        }
    }
}
