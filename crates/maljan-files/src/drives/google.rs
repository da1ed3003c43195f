//! `FA_drive_*` over the Google Drive API v3, by file id: uploads through a resumable session
//! (`POST /upload/drive/v3/files?uploadType=resumable` with the metadata, then [`PIECE`]
//! pieces `PUT` to the session URI it hands out, each a multiple of 256 KiB but the last);
//! downloads read the file's size, then `GET /files/{id}?alt=media` (with a Range to resume);
//! `files.create` for a folder, `files.delete`. `FA_drive_later_init` reads the authorized-user
//! token file automation-file writes (`token_path`), refreshing it at the profile's token host
//! when it has expired. The searches, shares and folder download are in `google_ops.rs`.

use std::sync::Arc;

use maljan_server::{Registry, ToolContext, ToolError, ToolMeta};
use reqwest::Method;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    Api, Drives, LocalFile, Opener, Service, TRANSFER_TIMEOUT_S, Transferred, plain_id, save,
    size_of, str_of,
};
use crate::storage::default_profile;

/// 32 × 256 KiB.
const PIECE: usize = 8 << 20;
/// The fields every answer about a file carries.
pub(super) const FIELDS: &str = "id,name,mimeType,size,md5Checksum,parents";
pub(super) const FOLDER_MIME: &str = "application/vnd.google-apps.folder";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadToDrive {
    /// The local file to upload (to the Drive's root).
    file_path: String,
    /// Its name in Drive (default: the local file's name).
    #[serde(default)]
    file_name: Option<String>,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UploadToFolder {
    /// The Drive folder it goes in.
    folder_id: String,
    file_path: String,
    #[serde(default)]
    file_name: Option<String>,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DirToDrive {
    /// The local directory whose files (not its subdirectories) are uploaded.
    dir_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DirToFolder {
    folder_id: String,
    dir_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Download {
    file_id: String,
    /// The local file written (through `<file_name>.part`, renamed when complete).
    file_name: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Delete {
    file_id: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AddFolder {
    /// The folder made in the Drive's root.
    folder_name: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LaterInit {
    /// The authorized-user token file (JSON with `token`, and `refresh_token`, `client_id`,
    /// `client_secret` to refresh it), under the roots. Its content is never echoed or logged.
    token_path: String,
    /// The OAuth client secrets of the browser sign-in that makes a token file; this server does
    /// not run that sign-in, so it is only needed where the token file came from.
    #[serde(default)]
    #[allow(dead_code)] // automation-file's argument, for a sign-in that does not run here.
    credentials_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    profile: String,
}

#[derive(Serialize, JsonSchema)]
struct TokenLoaded {
    backend: &'static str,
    profile: String,
    /// Whether the token had expired and was refreshed (the file is left as it was).
    refreshed: bool,
}

/// A Drive file's name: no control characters, not empty.
pub(super) fn drive_name(name: &str) -> Result<String, ToolError> {
    if name.trim().is_empty() || name.chars().any(char::is_control) {
        return Err(ToolError::bad_argument(format!(
            "{name:?} cannot be a Drive file name"
        )));
    }
    Ok(name.to_string())
}

fn local_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Uploads a local file as a new Drive file, in `folder` (else the root).
pub(super) async fn upload(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    file_path: &str,
    name: Option<&str>,
    folder: Option<&str>,
) -> Result<Transferred, ToolError> {
    let name = drive_name(
        name.map_or_else(|| local_name(file_path), str::to_string)
            .as_str(),
    )?;
    let mut meta = json!({"name": name});
    if let Some(f) = folder {
        meta["parents"] = json!([plain_id("folder_id", f)?]);
    }
    let mut file = LocalFile::open(c, file_path, api.max_bytes()).await?;
    let size = file.size;
    let start = api
        .request(
            Method::POST,
            &format!(
                "{}/files?uploadType=resumable&fields={FIELDS}",
                api.upload_url
            ),
        )?
        .header("x-upload-content-type", "application/octet-stream")
        .header("x-upload-content-length", size)
        .json(&meta);
    let opened = api.send(start).await?;
    let session = opened
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| ToolError::tool_failed("Google Drive opened no upload session"))?;
    let item = api.put_pieces(ctx, &mut file, &session, PIECE).await?;
    Service::Google.stored(&item, size)?;
    Ok(Transferred {
        remote: str_of(&item, "name").unwrap_or(name),
        id: str_of(&item, "id"),
        path: file_path.to_string(),
        bytes: size,
        content_hash: str_of(&item, "md5Checksum"),
    })
}

/// Downloads a Drive file (not a Google Docs document: those have no bytes, only exports).
pub(super) async fn download(
    api: &Api,
    ctx: &ToolContext,
    c: &crate::Config,
    file_id: &str,
    target: &str,
) -> Result<Transferred, ToolError> {
    let id = plain_id("file_id", file_id)?;
    c.target(target)?;
    let meta = api
        .json(api.request(
            Method::GET,
            &format!("{}/files/{id}?fields={FIELDS}", api.api_url),
        )?)
        .await?;
    let Some(size) = size_of(&meta) else {
        return Err(ToolError::bad_argument(format!(
            "{id} is a {} without content of its own (a folder or a Google document)",
            str_of(&meta, "mimeType").unwrap_or_default()
        )));
    };
    let media = format!("{}/files/{id}?alt=media", api.api_url);
    let opener = api.clone();
    let open: Opener = Arc::new(move || opener.request(Method::GET, &media));
    let (source, _) = api.download(open, Some(size)).await?;
    let bytes = save(c, ctx, source, target).await?;
    Ok(Transferred {
        remote: str_of(&meta, "name").unwrap_or_default(),
        id: Some(id),
        path: target.to_string(),
        bytes,
        content_hash: str_of(&meta, "md5Checksum"),
    })
}

/// The direct files of a confined local directory, by name.
async fn files_in(c: &crate::Config, dir: &str) -> Result<Vec<String>, ToolError> {
    let root = c.existing_dir(dir)?;
    maljan_server::blocking(move || {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&root)
            .map_err(|e| ToolError::tool_failed(format!("read the directory: {e}")))?
        {
            let e = e.map_err(|e| ToolError::tool_failed(format!("read the directory: {e}")))?;
            if e.file_type().is_ok_and(|t| t.is_file()) {
                out.push(crate::paths::show(&e.path()));
            }
        }
        out.sort();
        Ok(out)
    })
    .await
}

async fn load_token(d: &Drives, a: &LaterInit) -> Result<TokenLoaded, ToolError> {
    let opened = d.cfg.existing_file(&a.token_path)?;
    let text = maljan_server::blocking(move || {
        use std::io::Read;
        let mut text = String::new();
        (&opened.file)
            .take(1 << 20)
            .read_to_string(&mut text)
            .map_err(|e| ToolError::tool_failed(format!("read token_path: {}", e.kind())))?;
        Ok(text)
    })
    .await?;
    let file: Value = serde_json::from_str(&text).map_err(|_| {
        ToolError::bad_argument("token_path is not an authorized-user token file (JSON)")
    })?;
    let expired = str_of(&file, "expiry")
        .and_then(|e| chrono::DateTime::parse_from_rfc3339(&e).ok())
        .is_some_and(|e| e <= chrono::Utc::now() + chrono::Duration::seconds(60));
    let token = str_of(&file, "token").or_else(|| str_of(&file, "access_token"));
    let (token, refreshed) = match token {
        Some(t) if !expired => (t, false),
        _ => (refresh(d, a, &file).await?, true),
    };
    d.install_token(Service::Google, &a.profile, token, "token")?;
    Ok(TokenLoaded {
        backend: "drive",
        profile: a.profile.clone(),
        refreshed,
    })
}

/// A new access token from the file's refresh token, at the profile's token host (never the
/// host the file names: the endpoint stays the operator's).
async fn refresh(d: &Drives, a: &LaterInit, file: &Value) -> Result<String, ToolError> {
    let (Some(refresh), Some(id), Some(secret)) = (
        str_of(file, "refresh_token"),
        str_of(file, "client_id"),
        str_of(file, "client_secret"),
    ) else {
        return Err(ToolError::not_configured(
            "the token file holds no valid token and no refresh_token, client_id and client_secret",
        )
        .with_remediation(
            "make the token file with automation-file's browser sign-in (FA_drive_later_init with \
             credentials_path) where a browser runs, then give it here",
        ));
    };
    let api = d.anonymous_api(Service::Google, &a.profile)?;
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", &refresh)
        .append_pair("client_id", &id)
        .append_pair("client_secret", &secret)
        .finish();
    let req = api
        .request(Method::POST, &format!("{}/token", api.auth_url))?
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form);
    let (status, answer) = api.exchange(req).await?;
    match str_of(&answer, "access_token") {
        Some(t) if status.is_success() => Ok(t),
        _ => Err(ToolError::not_configured(format!(
            "Google refused to refresh the token ({}): {}",
            status.as_u16(),
            str_of(&answer, "error").unwrap_or_default()
        ))),
    }
}

pub(super) fn register(reg: &mut Registry, drives: &Arc<Drives>) {
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_upload_to_drive",
            "Upload a local file to the Google Drive root as a new file, streamed through a resumable \
             session; returns its id.",
        )
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadToDrive| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                upload(&api, &ctx, &d.cfg, &a.file_path, a.file_name.as_deref(), None).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_upload_to_folder",
            "Upload a local file into a Google Drive folder (by id) as a new file, streamed; returns its id.",
        )
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: UploadToFolder| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                let folder = Some(a.folder_id.as_str());
                upload(&api, &ctx, &d.cfg, &a.file_path, a.file_name.as_deref(), folder).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_upload_dir_to_drive",
            "Upload the files of a local directory (not its subdirectories) to the Google Drive root.",
        )
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: DirToDrive| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                let mut out = Vec::new();
                for f in files_in(&d.cfg, &a.dir_path).await? {
                    out.push(upload(&api, &ctx, &d.cfg, &f, None, None).await?);
                }
                Ok::<_, ToolError>(out)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_upload_dir_to_folder",
            "Upload the files of a local directory (not its subdirectories) into a Google Drive folder.",
        )
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: DirToFolder| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                let mut out = Vec::new();
                for f in files_in(&d.cfg, &a.dir_path).await? {
                    out.push(upload(&api, &ctx, &d.cfg, &f, None, Some(&a.folder_id)).await?);
                }
                Ok::<_, ToolError>(out)
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_download_file",
            "Download a Google Drive file (by id) to the local file file_name, streamed and resumed \
             where the connection was cut; a failed download leaves no partial file.",
        )
        .destructive()
        .open_world()
        .timeout_s(TRANSFER_TIMEOUT_S),
        move |ctx: ToolContext, a: Download| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                download(&api, &ctx, &d.cfg, &a.file_id, &a.file_name).await
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_delete_file",
            "Delete a Google Drive file by id (for good, not to the trash).",
        )
        .destructive()
        .open_world()
        .timeout_s(120),
        move |_ctx: ToolContext, a: Delete| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
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
            "FA_drive_add_folder",
            "Make a folder in the Google Drive root; returns its id.",
        )
        .writes()
        .not_idempotent()
        .open_world()
        .timeout_s(60),
        move |_ctx: ToolContext, a: AddFolder| {
            let d = d.clone();
            async move {
                let api = d.api(Service::Google, &a.profile)?;
                let meta = json!({"name": drive_name(&a.folder_name)?, "mimeType": FOLDER_MIME});
                let url = format!("{}/files?fields=id", api.api_url);
                let made = api
                    .json(api.request(Method::POST, &url)?.json(&meta))
                    .await?;
                str_of(&made, "id").ok_or_else(|| {
                    ToolError::tool_failed("Google Drive made a folder without an id")
                })
            }
        },
    );
    let d = drives.clone();
    reg.add(
        ToolMeta::new(
            "FA_drive_later_init",
            "Load a Google Drive token from an authorized-user token file under the roots (refreshed \
             when expired) for this server's lifetime; the token is never echoed or logged.",
        )
            // It reaches beyond the host (it connects, or runs what may).
            .open_world()
        .not_idempotent()
        .timeout_s(60),
        move |_ctx: ToolContext, a: LaterInit| {
            let d = d.clone();
            async move { load_token(&d, &a).await }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drive_names_and_local_names() {
        assert_eq!(drive_name("a/b.txt").unwrap(), "a/b.txt");
        assert!(drive_name(" ").is_err() && drive_name("a\u{7}").is_err());
        assert_eq!(local_name("/x/y/report.pdf"), "report.pdf");
    }
}
