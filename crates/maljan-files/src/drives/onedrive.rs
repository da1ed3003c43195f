//! `FA_onedrive_*` over Microsoft Graph v1.0, addressing items by path under the signed-in
//! user's drive (`/me/drive/root:/{path}`): a file up to [`SIMPLE_UPLOAD`] goes up in one `PUT
//! …:/content`, a larger one through an upload session (`createUploadSession`, then
//! [`SESSION_PIECE`] pieces `PUT` to the pre-authenticated `uploadUrl`, without the token);
//! downloads read the item's size, then follow `…:/content`'s redirect to its download link;
//! listings follow `@odata.nextLink`. The device-code login is in `onedrive_login.rs`.

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use reqwest::Method;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    Api, DeletePath, DownloadFile, Drives, LocalFile, Opener, ProfileOnly, Service,
    TRANSFER_TIMEOUT_S, Transferred, UploadFile, encode_segment, files_under, save, size_of,
    str_of,
};
use crate::storage::default_profile;

/// Graph's documented bound for a simple upload.
const SIMPLE_UPLOAD: u64 = 4 << 20;
/// A multiple of 320 KiB, as Graph asks of every piece but the last.
const SESSION_PIECE: usize = 32 * 320 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListFolder {
    /// The folder, relative to the drive's root; empty for the root.
    #[serde(default)]
    remote_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadDir {
    /// The local directory whose files are uploaded (recursively).
    dir_path: String,
    /// The OneDrive folder they go under; empty for the root.
    #[serde(default)]
    remote_prefix: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LaterInit {
    /// A Microsoft Graph access token. Never echoed, logged or kept beyond this server's lifetime.
    #[schemars(extend("writeOnly" = true))]
    access_token: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Serialize, JsonSchema)]
struct Entry {
    name: String,
    /// `file` or `folder`.
    #[serde(rename = "type")]
    kind: &'static str,
    size: u64,
}

/// A OneDrive path relative to the root, its segments cleaned ("" is the root).
fn clean(path: &str) -> Result<Vec<String>, ToolError> {
    if path.chars().any(char::is_control) {
        return Err(ToolError::bad_argument(
            "remote_path holds a control character",
        ));
    }
    let segments: Vec<String> = path
        .split(['/', '\\'])
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != ".")
        .map(str::to_string)
        .collect();
    if segments.iter().any(|s| s == "..") {
        return Err(ToolError::bad_argument("remote_path may not hold `..`"));
    }
    Ok(segments)
}

/// The Graph URL of an item (`…/root` or `…/root:/a/b`), with `then` after it (`:/content`…).
fn item_url(api: &Api, path: &str, then: &str) -> Result<String, ToolError> {
    let segments = clean(path)?;
    let base = format!("{}/me/drive/root", api.api_url);
    if segments.is_empty() {
        return Ok(match then {
            "" => base,
            t => format!("{base}/{}", t.trim_start_matches([':', '/'])),
        });
    }
    let encoded: Vec<String> = segments.iter().map(|s| encode_segment(s)).collect();
    Ok(format!("{base}:/{}{then}", encoded.join("/")))
}

fn shown(path: &str) -> String {
    clean(path).map(|s| s.join("/")).unwrap_or_default()
}

async fn upload(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    file_path: &str,
    remote_path: &str,
) -> Result<Transferred, ToolError> {
    if clean(remote_path)?.is_empty() {
        return Err(ToolError::bad_argument(
            "remote_path names no file (it is the root)",
        ));
    }
    let mut file = LocalFile::open(c, file_path, api.max_bytes()).await?;
    let size = file.size;
    let item = if size <= SIMPLE_UPLOAD {
        let req = api
            .request(Method::PUT, &item_url(api, remote_path, ":/content")?)?
            .header("content-type", "application/octet-stream")
            .header("content-length", size)
            .body(file.body(ctx, 0, size));
        api.json(req).await?
    } else {
        let session = api
            .json(
                api.request(
                    Method::POST,
                    &item_url(api, remote_path, ":/createUploadSession")?,
                )?
                .json(&json!({"item": {"@microsoft.graph.conflictBehavior": "replace"}})),
            )
            .await?;
        let url = str_of(&session, "uploadUrl")
            .ok_or_else(|| ToolError::tool_failed("OneDrive opened no upload session"))?;
        let sent = api.put_pieces(ctx, &mut file, &url, SESSION_PIECE).await;
        if sent.is_err() {
            // Graph keeps a session's pieces until it expires; say it is over now.
            if let Ok(req) = api.bare(Method::DELETE, &url) {
                let _ = api.send(req).await;
            }
        }
        sent?
    };
    Service::OneDrive.stored(&item, size)?;
    Ok(Transferred {
        remote: shown(remote_path),
        id: str_of(&item, "id"),
        path: file_path.to_string(),
        bytes: size,
        content_hash: item
            .pointer("/file/hashes/quickXorHash")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

async fn download(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    a: DownloadFile,
) -> Result<Transferred, ToolError> {
    if clean(&a.remote_path)?.is_empty() {
        return Err(ToolError::bad_argument("remote_path names the root folder"));
    }
    c.target(&a.target_path)?;
    let item = api
        .json(api.request(Method::GET, &item_url(api, &a.remote_path, "")?)?)
        .await?;
    if item.get("folder").is_some() {
        return Err(ToolError::bad_argument(format!(
            "{} is a folder, not a file",
            shown(&a.remote_path)
        )));
    }
    let content = item_url(api, &a.remote_path, ":/content")?;
    let opener = api.clone();
    let open: Opener = Arc::new(move || opener.request(Method::GET, &content));
    let (source, _) = api.download(open, size_of(&item)).await?;
    let bytes = save(c, ctx, source, &a.target_path).await?;
    Ok(Transferred {
        remote: shown(&a.remote_path),
        id: str_of(&item, "id"),
        path: a.target_path,
        bytes,
        content_hash: item
            .pointer("/file/hashes/quickXorHash")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

async fn list(api: &Api, remote_path: &str) -> Result<Vec<Entry>, ToolError> {
    let first = api.request(Method::GET, &item_url(api, remote_path, ":/children")?)?;
    let items = api
        .pages(first, "value", |page| {
            match str_of(page, "@odata.nextLink") {
                Some(next) => api.follow(Method::GET, &next).map(Some),
                None => Ok(None),
            }
        })
        .await?;
    Ok(items
        .iter()
        .map(|i| Entry {
            name: str_of(i, "name").unwrap_or_default(),
            kind: if i.get("folder").is_some() {
                "folder"
            } else {
                "file"
            },
            size: size_of(i).unwrap_or(0),
        })
        .collect())
}

pub(super) fn register(reg: &mut Registry, drives: &Arc<Drives>) {
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_onedrive_upload_file",
            "Upload a local file to OneDrive at remote_path (relative to the drive's root, replacing \
             what is there), streamed; files over 4 MiB go through an upload session.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadFile| {
            let d = d.clone();
            async move {
                let api = d.api(Service::OneDrive, &a.profile)?;
                upload(&api, &ctx, &d.cfg, &a.file_path, &a.remote_path).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_onedrive_upload_dir",
            "Upload every file under a local directory to OneDrive under remote_prefix; returns the \
             OneDrive paths.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadDir| {
            let d = d.clone();
            async move {
                let api = d.api(Service::OneDrive, &a.profile)?;
                let prefix = clean(&a.remote_prefix)?.join("/");
                let mut out = Vec::new();
                for (local, rel) in files_under(&d.cfg, &ctx, &a.dir_path).await? {
                    let to = if prefix.is_empty() {
                        rel
                    } else {
                        format!("{prefix}/{rel}")
                    };
                    out.push(upload(&api, &ctx, &d.cfg, &local, &to).await?.remote);
                }
                Ok::<_, ToolError>(out)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_onedrive_download_file",
            "Download a OneDrive file to a local file, streamed and resumed where the connection was \
             cut; a failed download leaves no partial file.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: DownloadFile| {
            let d = d.clone();
            async move {
                let api = d.api(Service::OneDrive, &a.profile)?;
                download(&api, &ctx, &d.cfg, a).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_onedrive_delete_item",
            "Delete a OneDrive file or folder (a folder with everything in it; it goes to the \
             drive's recycle bin).",
        )
        .destructive()
        .open_world()
        .timeout_s(300),
        move |_ctx: ToolContext, a: DeletePath| {
            let d = d.clone();
            async move {
                let api = d.api(Service::OneDrive, &a.profile)?;
                if clean(&a.remote_path)?.is_empty() {
                    return Err(ToolError::bad_argument("remote_path names the root folder"));
                }
                let url = item_url(&api, &a.remote_path, "")?;
                api.send(api.request(Method::DELETE, &url)?).await?;
                Ok(true)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_onedrive_list_folder",
            "The entries of a OneDrive folder (name, type file/folder, size), every page of them.",
        )
        .open_world()
        .timeout_s(600),
        move |_ctx: ToolContext, a: ListFolder| {
            let d = d.clone();
            async move {
                let api = d.api(Service::OneDrive, &a.profile)?;
                list(&api, &a.remote_path).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_onedrive_later_init",
            "Set the Microsoft Graph access token of a OneDrive profile for this server's lifetime. \
             The token is never echoed or logged; the profile's hosts and private-endpoint \
             permission stay the operator's.",
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
        .not_idempotent()
        .timeout_s(60),
        move |_ctx: ToolContext, a: LaterInit| {
            let d = d.clone();
            async move {
                d.install_token(
                    Service::OneDrive,
                    &a.profile,
                    a.access_token,
                    "access_token",
                )
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_onedrive_close",
            "Forget the OneDrive token this session set (by later_init or the device-code login); \
             the operator's configured profile stays.",
        )
        // It reaches beyond the host (it connects, or runs what may).
        .open_world()
        .not_idempotent()
        .timeout_s(10),
        move |_ctx: ToolContext, a: ProfileOnly| {
            let d = d.clone();
            async move {
                d.clear_session(Service::OneDrive, &a.profile);
                Ok::<_, ToolError>(true)
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_and_dot_dot_refused() {
        assert_eq!(
            clean("/Documents//a b.txt").unwrap(),
            ["Documents", "a b.txt"]
        );
        assert!(clean("").unwrap().is_empty());
        assert!(clean("a/../b").is_err());
        assert!(clean("a\nb").is_err());
        assert_eq!(shown("/x/./y/"), "x/y");
    }
}
