//! The SaaS drives — Dropbox (`FA_dropbox_*`), OneDrive (`FA_onedrive_*`), Box (`FA_box_*`) and
//! Google Drive (`FA_drive_*`) — with automation-file 0.0.55's action and argument names, over
//! each drive's documented HTTP API.
//!
//! What they share lives here: the profiles (`[dropbox.NAME]`… in the storage config, chosen by
//! an optional `profile` argument; `*_later_init` replaces one for this server's lifetime, in
//! memory only), one `Api` per call (in `api.rs`) over the SSRF-guarded reqwest client of
//! `storage::guard` (no proxy, no redirect followed blindly, private addresses only when the
//! operator's table allows them), the mapping of HTTP failures to maljan's error codes, and the
//! local side of a transfer through `storage::transfer` (every path confined to the roots, a
//! download written through `<target>.part` and renamed when whole, resumed with a Range
//! request when the connection is cut, never left half-written).
//!
//! A token is sent only as an `Authorization` header to the profile's own hosts, never logged,
//! never echoed in an answer or an error.
//!
//! One file per drive: `dropbox.rs`, `onedrive.rs` (+ `onedrive_login.rs`, the device-code
//! grant), `boxdrive.rs`, `google.rs` (+ `google_ops.rs`: searches, shares, folder download).
//! What they share beyond this file is in `api.rs`: requests with the bearer token, retries,
//! paged listings (`Api::pages`), uploads in pieces (`Pieces`, `Api::put_pieces`) and
//! resumable downloads (`Api::download`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use maljan_server::{Registry, ToolContext, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    Config,
    storage::{
        default_profile,
        profiles::Secret,
        transfer::{self, Source},
        uri::Location,
    },
};

mod api;
mod boxdrive;
mod dropbox;
mod google;
mod google_ops;
mod onedrive;
mod onedrive_login;
mod profiles;

pub(crate) use api::{Api, MAX_LISTED, Opener, Pieces, content_range, read_json, str_of};
pub use profiles::{DriveProfile, DriveProfiles};

/// Uploads and downloads may take this long (the drive's own limits come first).
pub(crate) const TRANSFER_TIMEOUT_S: u64 = 6 * 3600;

/// How many times a cut download is resumed from where it stopped.
const RESUMES: usize = 3;

/// Registers every drive's actions.
pub(crate) fn register(reg: &mut Registry, cfg: &Arc<Config>) {
    let drives = Arc::new(Drives {
        cfg: cfg.clone(),
        session: Mutex::default(),
    });
    dropbox::register(reg, &drives);
    onedrive::register(reg, &drives);
    onedrive_login::register(reg, &drives);
    boxdrive::register(reg, &drives);
    google::register(reg, &drives);
    google_ops::register(reg, &drives);
}

/// One of the SaaS drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Service {
    Dropbox,
    OneDrive,
    Box,
    Google,
}

impl Service {
    pub(crate) const ALL: [Service; 4] = [
        Service::Dropbox,
        Service::OneDrive,
        Service::Box,
        Service::Google,
    ];

    /// The storage config's table.
    pub(crate) fn table(self) -> &'static str {
        match self {
            Self::Dropbox => "dropbox",
            Self::OneDrive => "onedrive",
            Self::Box => "box",
            Self::Google => "drive",
        }
    }

    /// Refuses an upload the drive answered with another size than the file's.
    pub(crate) fn stored(self, answer: &Value, size: u64) -> Result<(), ToolError> {
        match size_of(answer) {
            Some(got) if got == size => Ok(()),
            got => Err(ToolError::tool_failed(format!(
                "{} stored {} bytes of {size}",
                self.label(),
                got.map_or("an unknown number of".into(), |g| g.to_string())
            ))),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Dropbox => "Dropbox",
            Self::OneDrive => "OneDrive",
            Self::Box => "Box",
            Self::Google => "Google Drive",
        }
    }

    /// The public hosts: API, content uploads, login.
    fn hosts(self) -> [&'static str; 3] {
        match self {
            Self::Dropbox => [
                "https://api.dropboxapi.com",
                "https://content.dropboxapi.com",
                "https://api.dropboxapi.com",
            ],
            Self::OneDrive => [
                "https://graph.microsoft.com/v1.0",
                "https://graph.microsoft.com/v1.0",
                "https://login.microsoftonline.com",
            ],
            Self::Box => [
                "https://api.box.com/2.0",
                "https://upload.box.com/api/2.0",
                "https://api.box.com",
            ],
            Self::Google => [
                "https://www.googleapis.com/drive/v3",
                "https://www.googleapis.com/upload/drive/v3",
                "https://oauth2.googleapis.com",
            ],
        }
    }
}

/// The drives' state in one files server: profiles set by `*_later_init` (or a login).
pub(crate) struct Drives {
    pub(crate) cfg: Arc<Config>,
    session: Mutex<HashMap<(Service, String), DriveProfile>>,
}

impl Drives {
    /// The profile a call names: the one set this session, else the operator's, else none.
    pub(crate) fn profile(&self, drive: Service, name: &str) -> Option<DriveProfile> {
        if let Some(p) = self.session.lock().unwrap().get(&(drive, name.to_string())) {
            return Some(p.clone());
        }
        self.file_profile(drive, name)
    }

    /// The operator's table of this name (the private-endpoint permission comes only from it).
    pub(crate) fn file_profile(&self, drive: Service, name: &str) -> Option<DriveProfile> {
        self.cfg.storage.config.drives.of(drive).get(name).cloned()
    }

    /// `*_later_init`: the named profile's token for this server's lifetime (the operator's hosts
    /// and private-endpoint permission stay); the answer names what was set, never a value.
    pub(crate) fn install_token(
        &self,
        drive: Service,
        name: &str,
        token: String,
        argument: &'static str,
    ) -> Result<Configured, ToolError> {
        if token.trim().is_empty() {
            return Err(ToolError::bad_argument(format!("{argument} is empty")));
        }
        let mut p = self.file_profile(drive, name).unwrap_or_default();
        p.access_token = Some(Secret::new(token));
        self.set_session(drive, name, p);
        Ok(Configured {
            backend: drive.table(),
            profile: name.to_string(),
            set: vec![argument],
        })
    }

    pub(crate) fn set_session(&self, drive: Service, name: &str, profile: DriveProfile) {
        self.session
            .lock()
            .unwrap()
            .insert((drive, name.to_string()), profile);
    }

    /// Forgets what this session set (the operator's table stays).
    pub(crate) fn clear_session(&self, drive: Service, name: &str) -> bool {
        self.session
            .lock()
            .unwrap()
            .remove(&(drive, name.to_string()))
            .is_some()
    }

    /// A client for one call under the named profile, which must hold a token.
    pub(crate) fn api(&self, drive: Service, name: &str) -> Result<Api, ToolError> {
        let p = self.profile(drive, name).unwrap_or_default();
        if p.access_token.is_none() {
            return Err(ToolError::not_configured(format!(
                "no {} access token for profile {name}",
                drive.label()
            ))
            .with_remediation(format!(
                "set access_token (or access_token_file / access_token_env) in a [{}.{name}] table of \
                 the storage config given with `maljan serve files --storage-config FILE`, or call \
                 FA_{}_later_init",
                drive.table(),
                drive.table()
            )));
        }
        Api::new(drive, name, p, self.cfg.storage.config.max_object_bytes)
    }

    /// A client without a token (a login), under the named profile's hosts and network.
    pub(crate) fn anonymous_api(&self, drive: Service, name: &str) -> Result<Api, ToolError> {
        let mut p = self.profile(drive, name).unwrap_or_default();
        p.access_token = None;
        Api::new(drive, name, p, self.cfg.storage.config.max_object_bytes)
    }
}

/// A confined local file, opened for an upload: its size and its bytes as a request body that
/// reports progress and stops when the call is cancelled.
pub(crate) struct LocalFile {
    pub(crate) size: u64,
    pub(crate) chunks: transfer::Chunks,
}

impl LocalFile {
    /// Opens a confined local file of at most `max` bytes (the storage config's max_object_bytes).
    pub(crate) async fn open(c: &Config, path: &str, max: u64) -> Result<Self, ToolError> {
        let Source { chunks, size } = transfer::open(
            c,
            &Location::Local {
                path: path.to_string(),
            },
        )
        .await?;
        if size > max {
            return Err(ToolError::bad_argument(format!(
                "{path} is {size} bytes, more than the server's max_object_bytes {max}"
            )));
        }
        Ok(Self { size, chunks })
    }

    /// The whole stream as a body, with progress over `done..done + size` of `total`.
    pub(crate) fn body(self, ctx: &ToolContext, done: u64, total: u64) -> reqwest::Body {
        body_of(self.chunks, ctx, done, total)
    }

    /// The stream between `head` and `tail` (a multipart form around the file), with progress.
    pub(crate) fn framed_body(
        self,
        ctx: &ToolContext,
        head: Vec<u8>,
        tail: Vec<u8>,
    ) -> reqwest::Body {
        let total = self.size + (head.len() + tail.len()) as u64;
        let framed = futures::stream::once(async move { Ok(Bytes::from(head)) })
            .chain(self.chunks)
            .chain(futures::stream::once(async move { Ok(Bytes::from(tail)) }))
            .boxed();
        body_of(framed, ctx, 0, total)
    }

    /// The next `n` bytes (or fewer at the end), gathered for one chunk of an upload session.
    pub(crate) async fn take(&mut self, n: usize) -> Result<Vec<u8>, ToolError> {
        let mut buf = Vec::with_capacity(n.min(64 << 20));
        while buf.len() < n {
            match self.chunks.next().await {
                Some(chunk) => buf.extend_from_slice(&chunk?),
                None => break,
            }
        }
        if buf.len() > n {
            // Put the rest back in front of the stream.
            let rest = Bytes::from(buf.split_off(n));
            let tail = std::mem::replace(&mut self.chunks, futures::stream::empty().boxed());
            self.chunks = futures::stream::once(async move { Ok(rest) })
                .chain(tail)
                .boxed();
        }
        Ok(buf)
    }
}

fn body_of(chunks: transfer::Chunks, ctx: &ToolContext, done: u64, total: u64) -> reqwest::Body {
    let ctx = ctx.clone();
    let mut sent = done;
    let stream = chunks
        .and_then(move |chunk| {
            sent += chunk.len() as u64;
            ctx.progress(sent as f64, Some(total as f64), None);
            let cancelled = ctx.is_cancelled();
            async move {
                if cancelled {
                    Err(crate::paths::cancelled())
                } else {
                    Ok(chunk)
                }
            }
        })
        .map_err(|e| std::io::Error::other(e.sentence()));
    reqwest::Body::wrap_stream(stream)
}

/// Writes a download to a confined local file (through `.part`, renamed when whole).
pub(crate) async fn save(
    c: &Config,
    ctx: &ToolContext,
    source: Source,
    target_path: &str,
) -> Result<u64, ToolError> {
    transfer::write(
        c,
        ctx,
        &Location::Local {
            path: target_path.to_string(),
        },
        source,
        true,
    )
    .await
}

/// JSON for an HTTP header (Dropbox's `Dropbox-API-Arg`): every non-ASCII character escaped.
pub(crate) fn header_json(v: &Value) -> String {
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

/// The files under a confined local directory: (the path to open, the path relative to it,
/// '/'-joined), in a stable order. Each is opened through the roots again when uploaded.
pub(crate) async fn files_under(
    c: &Config,
    ctx: &ToolContext,
    dir_path: &str,
) -> Result<Vec<(String, String)>, ToolError> {
    let root = c.existing_dir(dir_path)?;
    let stop = ctx.clone();
    let found =
        maljan_server::blocking(move || crate::paths::walk_files(&root, &|| stop.is_cancelled()))
            .await?;
    let mut out: Vec<(String, String)> = found
        .into_iter()
        .map(|f| (crate::paths::show(&f.abs), f.rel))
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

/// A file's place in a drive and on this host: the shared arguments of `*_upload_file`
/// (Dropbox, OneDrive).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UploadFile {
    /// The local file to upload.
    pub(crate) file_path: String,
    /// Where it goes in the drive, e.g. `/reports/a.pdf` (replaced when it exists).
    pub(crate) remote_path: String,
    /// The drive profile (a `[DRIVE.NAME]` table of the server's storage config).
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    pub(crate) profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DownloadFile {
    /// The file in the drive (a path; Dropbox also takes an `id:…`).
    pub(crate) remote_path: String,
    /// The local file written (through `<target_path>.part`, renamed when complete).
    pub(crate) target_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    pub(crate) profile: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeletePath {
    /// The file or folder deleted (a folder with everything in it).
    pub(crate) remote_path: String,
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    pub(crate) profile: String,
}

/// Only the profile (`*_close`, the Google searches).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProfileOnly {
    #[serde(default = "default_profile")]
    #[schemars(default = "default_profile")]
    pub(crate) profile: String,
}

/// One file moved between this host and a drive.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Transferred {
    /// The file in the drive: its path as the drive spells it (Dropbox, OneDrive) or its name
    /// (Box, Google Drive).
    #[serde(rename = "remote_path")]
    pub(crate) remote: String,
    /// The drive's id of the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<String>,
    /// The local file.
    pub(crate) path: String,
    pub(crate) bytes: u64,
    /// The drive's own checksum when it said it: Dropbox's content hash (SHA-256 over 4 MiB
    /// blocks), OneDrive's quickXorHash, Box's SHA-1, Google Drive's MD5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) content_hash: Option<String>,
}

/// A drive's size field (a number, or a string as in Google Drive's int64s).
pub(crate) fn size_of(v: &Value) -> Option<u64> {
    match v.get("size")? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Refuses an id that is not a plain token (ids go into URL paths).
pub(crate) fn plain_id(what: &str, id: &str) -> Result<String, ToolError> {
    let id = id.trim();
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        || id == "."
        || id == ".."
    {
        return Err(ToolError::bad_argument(format!(
            "{what} must be a drive id (letters, digits, - _ .)"
        )));
    }
    Ok(id.to_string())
}

/// A path segment percent-encoded for a URL (everything but unreserved characters).
pub(crate) fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[derive(serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Configured {
    pub(crate) backend: &'static str,
    pub(crate) profile: String,
    /// What the call set (names only, never values).
    pub(crate) set: Vec<&'static str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn header_json_is_ascii() {
        let h = header_json(&json!({"path": "/résumé 😀.txt"}));
        assert!(h.is_ascii(), "{h}");
        assert_eq!(
            serde_json::from_str::<Value>(&h).unwrap()["path"],
            "/résumé 😀.txt"
        );
    }

    #[test]
    fn ids_and_segments_stay_inside_their_url_part() {
        assert_eq!(plain_id("file_id", " 12345 ").unwrap(), "12345");
        for bad in ["", "..", "a/b", "1?x=2", "a b"] {
            assert!(plain_id("file_id", bad).is_err(), "{bad}");
        }
        assert_eq!(encode_segment("a b/c?#%:é"), "a%20b%2Fc%3F%23%25%3A%C3%A9");
        assert_eq!(size_of(&serde_json::json!({"size": "42"})), Some(42));
        assert_eq!(size_of(&serde_json::json!({"size": 7})), Some(7));
    }
}
