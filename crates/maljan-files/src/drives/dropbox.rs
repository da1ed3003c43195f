//! `FA_dropbox_*` over the Dropbox API v2: RPC calls (`files/list_folder`, `files/delete_v2`) to
//! the API host with JSON bodies; content calls (`files/upload`, `files/upload_session/*`,
//! `files/download`) to the content host with their argument in the `Dropbox-API-Arg` header.
//! A file up to [`SINGLE_UPLOAD`] goes up in one request, a larger one through an upload session
//! in [`SESSION_CHUNK`] pieces (Dropbox takes at most 150 MB per request).

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use reqwest::Method;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Api, DeletePath, DownloadFile, Drives, LocalFile, MAX_LISTED, Opener, Pieces, Service,
    TRANSFER_TIMEOUT_S, Transferred, UploadFile, files_under, header_json, read_json, save, str_of,
};
use crate::storage::default_profile;

const SINGLE_UPLOAD: u64 = 8 << 20;
const SESSION_CHUNK: usize = 8 << 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListFolder {
    /// The folder; empty (or `/`) for the top.
    #[serde(default)]
    remote_path: String,
    /// Everything below it, not only its own entries.
    #[serde(default)]
    recursive: bool,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadDir {
    /// The local directory whose files are uploaded (recursively).
    dir_path: String,
    /// The Dropbox folder they go under.
    #[serde(default = "slash")]
    #[schemars(default = "slash")]
    remote_prefix: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

fn slash() -> String {
    "/".into()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LaterInit {
    /// An OAuth 2 access token. Never echoed, logged or kept beyond this server's lifetime.
    #[schemars(extend("writeOnly" = true))]
    oauth2_access_token: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

/// A Dropbox path as the API wants it: `/…`, an `id:`/`rev:`/`ns:` reference, or (for a
/// folder listing) empty for the top.
fn remote(path: &str, top_allowed: bool) -> Result<String, ToolError> {
    let p = path.trim();
    if p.chars().any(char::is_control) {
        return Err(ToolError::bad_argument(
            "remote_path holds a control character",
        ));
    }
    if p.is_empty() || p == "/" {
        return if top_allowed {
            Ok(String::new())
        } else {
            Err(ToolError::bad_argument(
                "remote_path names no file (it is the top folder)",
            ))
        };
    }
    if ["id:", "rev:", "ns:"].iter().any(|r| p.starts_with(r)) {
        return Ok(p.to_string());
    }
    let p = if p.starts_with('/') {
        p.to_string()
    } else {
        format!("/{p}")
    };
    Ok(p.trim_end_matches('/').to_string())
}

fn rpc(api: &Api, route: &str, body: &Value) -> Result<reqwest::RequestBuilder, ToolError> {
    Ok(api
        .request(Method::POST, &format!("{}/2/{route}", api.api_url))?
        .json(body))
}

fn content(api: &Api, route: &str, arg: &Value) -> Result<reqwest::RequestBuilder, ToolError> {
    Ok(api
        .request(Method::POST, &format!("{}/2/{route}", api.upload_url))?
        .header("dropbox-api-arg", header_json(arg)))
}

async fn upload(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    file_path: &str,
    remote_path: &str,
) -> Result<Transferred, ToolError> {
    let path = remote(remote_path, false)?;
    let mut file = LocalFile::open(c, file_path, api.max_bytes()).await?;
    let size = file.size;
    let commit = json!({"path": path, "mode": "overwrite", "autorename": false, "mute": true});
    let meta = if size <= SINGLE_UPLOAD {
        let req = content(api, "files/upload", &commit)?
            .header("content-type", "application/octet-stream")
            .header("content-length", size)
            .body(file.body(ctx, 0, size));
        read_json(Service::Dropbox, api.send(req).await?).await?
    } else {
        // An upload session: start with the first piece, append the middle, finish with the last.
        let mut session = String::new();
        let mut pieces = Pieces::new(&mut file, ctx, SESSION_CHUNK);
        let mut reply = Value::Null;
        while let Some(p) = pieces.next().await? {
            let cursor = json!({"session_id": session, "offset": p.offset});
            let (route, arg) = match (p.offset, p.last) {
                (0, _) => ("files/upload_session/start", json!({"close": false})),
                (_, true) => (
                    "files/upload_session/finish",
                    json!({"cursor": cursor, "commit": commit}),
                ),
                _ => (
                    "files/upload_session/append_v2",
                    json!({"cursor": cursor, "close": false}),
                ),
            };
            let req = content(api, route, &arg)?
                .header("content-type", "application/octet-stream")
                .body(p.bytes);
            reply = read_json(Service::Dropbox, api.send(req).await?).await?;
            if p.offset == 0 {
                session = str_of(&reply, "session_id")
                    .ok_or_else(|| ToolError::tool_failed("Dropbox started no upload session"))?;
            }
        }
        reply
    };
    Service::Dropbox.stored(&meta, size)?;
    Ok(Transferred {
        remote: str_of(&meta, "path_display").unwrap_or(path),
        id: str_of(&meta, "id"),
        path: file_path.to_string(),
        bytes: size,
        content_hash: str_of(&meta, "content_hash"),
    })
}

async fn download(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    a: DownloadFile,
) -> Result<Transferred, ToolError> {
    let path = remote(&a.remote_path, false)?;
    let arg = json!({"path": path});
    let opener_api = api.clone();
    let open: Opener = Arc::new(move || content(&opener_api, "files/download", &arg));
    let (source, meta) = api.download(open, None).await?;
    let bytes = save(c, ctx, source, &a.target_path).await?;
    Ok(Transferred {
        remote: str_of(&meta, "path_display").unwrap_or(path),
        id: str_of(&meta, "id"),
        path: a.target_path,
        bytes,
        content_hash: str_of(&meta, "content_hash"),
    })
}

async fn list(api: &Api, a: &ListFolder) -> Result<Vec<String>, ToolError> {
    let path = remote(&a.remote_path, true)?;
    let first = rpc(
        api,
        "files/list_folder",
        &json!({"path": path, "recursive": a.recursive}),
    )?;
    let entries = api
        .pages(first, "entries", |page| {
            match (
                page.get("has_more").and_then(Value::as_bool),
                page.get("cursor").and_then(Value::as_str),
            ) {
                (Some(true), Some(cursor)) => Ok(Some(rpc(
                    api,
                    "files/list_folder/continue",
                    &json!({"cursor": cursor}),
                )?)),
                _ => Ok(None),
            }
        })
        .await?;
    Ok(entries
        .iter()
        .filter_map(|e| str_of(e, "path_display"))
        .collect())
}

pub(super) fn register(reg: &mut Registry, drives: &Arc<Drives>) {
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_dropbox_upload_file",
            "Upload a local file to Dropbox (replacing what is at remote_path), streamed; large files \
             go through an upload session.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadFile| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Dropbox, &a.profile)?;
                upload(&api, &ctx, &d.cfg, &a.file_path, &a.remote_path).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_dropbox_download_file",
            "Download a Dropbox file to a local file, streamed and resumed where the connection was \
             cut; a failed download leaves no partial file.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: DownloadFile| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Dropbox, &a.profile)?;
                download(&api, &ctx, &d.cfg, a).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_dropbox_delete_path",
            "Delete a Dropbox file or folder (a folder with everything in it).",
        )
        .destructive()
        .open_world()
        .timeout_s(300),
        move |_ctx: ToolContext, a: DeletePath| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Dropbox, &a.profile)?;
                let path = remote(&a.remote_path, false)?;
                api.json(rpc(&api, "files/delete_v2", &json!({"path": path}))?)
                    .await?;
                Ok::<_, ToolError>(true)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_dropbox_list_folder",
            format!(
                "The paths in a Dropbox folder (with recursive, everything below it; at most {MAX_LISTED})."
            ),
        )
        .open_world()
        .timeout_s(600),
        move |_ctx: ToolContext, a: ListFolder| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Dropbox, &a.profile)?;
                list(&api, &a).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_dropbox_upload_dir",
            "Upload every file under a local directory to Dropbox under remote_prefix; returns the \
             Dropbox paths.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadDir| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Dropbox, &a.profile)?;
                let prefix = remote(&a.remote_prefix, true)?;
                let mut out = Vec::new();
                for (local, rel) in files_under(&d.cfg, &ctx, &a.dir_path).await? {
                    let up = upload(&api, &ctx, &d.cfg, &local, &format!("{prefix}/{rel}")).await?;
                    out.push(up.remote);
                }
                Ok::<_, ToolError>(out)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_dropbox_later_init",
            "Set the Dropbox access token of a drive profile for this server's lifetime. The token is \
             never echoed or logged; the profile's hosts and private-endpoint permission stay the \
             operator's.",
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
        .not_idempotent()
        .timeout_s(60),
        move |_ctx: ToolContext, a: LaterInit| {
            let d = d.clone();
            async move {
                d.install_token(
                    Service::Dropbox,
                    &a.profile,
                    a.oauth2_access_token,
                    "oauth2_access_token",
                )
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_paths_are_spelt_as_the_api_wants() {
        assert_eq!(remote("a/b.txt", false).unwrap(), "/a/b.txt");
        assert_eq!(remote("/a/dir/", false).unwrap(), "/a/dir");
        assert_eq!(remote("id:abc123", false).unwrap(), "id:abc123");
        assert_eq!(remote("/", true).unwrap(), "");
        assert!(remote("/", false).is_err());
        assert!(remote("a\nb", false).is_err());
    }
}
