//! The SaaS drives — Dropbox (`FA_dropbox_*`), OneDrive (`FA_onedrive_*`), Box (`FA_box_*`) and
//! Google Drive (`FA_drive_*`) — with automation-file 0.0.55's action and argument names, over
//! each drive's documented HTTP API.
//!
//! What they share lives here: the profiles (`[dropbox.NAME]`… in the storage config, chosen by
//! an optional `profile` argument; `*_later_init` replaces one for this server's lifetime, in
//! memory only), one [`Api`] per call over the SSRF-guarded reqwest client of
//! `storage::guard` (no proxy, no redirect followed blindly, private addresses only when the
//! operator's table allows them), the mapping of HTTP failures to maljan's error codes, and the
//! local side of a transfer through `storage::transfer` (every path confined to the roots, a
//! download written through `<target>.part` and renamed when whole, resumed with a Range
//! request when the connection is cut, never left half-written).
//!
//! A token is sent only as an `Authorization` header to the profile's own hosts, never logged,
//! never echoed in an answer or an error.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt, stream::BoxStream};
use maljan_server::{Registry, ToolContext, ToolError};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;

use crate::{
    Config,
    storage::{
        guard::{GuardedConnector, check_endpoint},
        profiles::{Network, Secret},
        transfer::{self, Source},
        uri::Location,
    },
};

mod dropbox;
mod profiles;

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

    pub(crate) fn set_session(&self, drive: Service, name: &str, profile: DriveProfile) {
        self.session
            .lock()
            .unwrap()
            .insert((drive, name.to_string()), profile);
    }

    /// Forgets what this session set (the operator's table stays).
    #[allow(dead_code)] // FA_onedrive_close, next.
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
    #[allow(dead_code)] // FA_onedrive_device_code_login, next.
    pub(crate) fn anonymous_api(&self, drive: Service, name: &str) -> Result<Api, ToolError> {
        let mut p = self.profile(drive, name).unwrap_or_default();
        p.access_token = None;
        Api::new(drive, name, p, self.cfg.storage.config.max_object_bytes)
    }
}

/// One drive profile's HTTP side.
#[derive(Clone)]
#[allow(dead_code)] // auth_url and settings: the OneDrive login, next.
pub(crate) struct Api {
    drive: Service,
    profile: String,
    http: reqwest::Client,
    token: Option<Secret>,
    pub(crate) api_url: String,
    pub(crate) upload_url: String,
    pub(crate) auth_url: String,
    pub(crate) settings: DriveProfile,
    net: Network,
    /// The storage config's max_object_bytes.
    max_bytes: u64,
}

impl Api {
    fn new(
        drive: Service,
        profile: &str,
        p: DriveProfile,
        max_bytes: u64,
    ) -> Result<Self, ToolError> {
        let [api, upload, auth] = drive.hosts();
        let api_url = p.api_url.clone().unwrap_or_else(|| api.into());
        let upload_url = p.upload_url.clone().unwrap_or_else(|| upload.into());
        let auth_url = p.auth_url.clone().unwrap_or_else(|| auth.into());
        for url in [&api_url, &upload_url, &auth_url] {
            check_endpoint(url, &p.network)?;
        }
        let http = GuardedConnector::new(&p.network)
            .reqwest_client()
            .map_err(|e| ToolError::tool_failed(format!("HTTP client: {}", e.without_url())))?;
        Ok(Self {
            drive,
            profile: profile.into(),
            http,
            token: p.access_token.clone(),
            api_url,
            upload_url,
            auth_url,
            net: p.network.clone(),
            settings: p,
            max_bytes,
        })
    }

    /// A request to one of the profile's URLs, with the token.
    pub(crate) fn request(&self, method: Method, url: &str) -> Result<RequestBuilder, ToolError> {
        check_endpoint(url, &self.net)?;
        let req = self.http.request(method, url);
        Ok(match &self.token {
            Some(t) => req.bearer_auth(t.expose()),
            None => req,
        })
    }

    /// A request to a URL a drive handed out (an upload session, a pre-authenticated download
    /// link): checked like every endpoint, and sent without the token.
    pub(crate) fn bare(&self, method: Method, url: &str) -> Result<RequestBuilder, ToolError> {
        check_endpoint(url, &self.net).map_err(|e| {
            ToolError::tool_failed(format!(
                "{} handed out a link this server may not follow: {}",
                self.drive.label(),
                e.message
            ))
        })?;
        Ok(self.http.request(method, url))
    }

    /// Sends a request (retried after a 429 or a 5xx when its body can be replayed — not a
    /// streamed upload — honouring Retry-After up to a minute); a failure status becomes the
    /// matching error. Redirects come back as they are, for the caller to check.
    pub(crate) async fn send(&self, mut req: RequestBuilder) -> Result<Response, ToolError> {
        let mut tries = 0;
        loop {
            let replay = req.try_clone();
            let resp = req.send().await.map_err(|e| self.transport(e))?;
            let status = resp.status();
            if (status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error())
                && tries < self.net.max_retries
                && let Some(next) = replay
            {
                tries += 1;
                let wait = retry_after(&resp).unwrap_or(Duration::from_millis(250 << tries));
                tokio::time::sleep(wait.min(Duration::from_secs(60))).await;
                req = next;
                continue;
            }
            if status.is_success() || status.is_redirection() {
                return Ok(resp);
            }
            return Err(self.status_error(resp).await);
        }
    }

    /// Sends and reads a JSON answer.
    pub(crate) async fn json(&self, req: RequestBuilder) -> Result<Value, ToolError> {
        let resp = self.send(req).await?;
        read_json(self.drive, resp).await
    }

    fn transport(&self, e: reqwest::Error) -> ToolError {
        // Without the URL: a pre-authenticated link carries its credential in the query.
        let e = e.without_url();
        if e.is_timeout() {
            ToolError::timeout(format!("{} did not answer in time", self.drive.label()))
        } else {
            let mut msg = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                msg = format!("{msg}: {s}");
                source = s.source();
            }
            ToolError::tool_failed(format!(
                "{} could not be reached: {msg}",
                self.drive.label()
            ))
        }
    }

    async fn status_error(&self, resp: Response) -> ToolError {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        let why = error_text(&text);
        let label = self.drive.label();
        match status.as_u16() {
            401 => ToolError::not_configured(format!(
                "{label} refused the access token of profile {} (401): {why}",
                self.profile
            ))
            .with_remediation(format!(
                "give a valid token in [{}.{}] or through FA_{}_later_init",
                self.drive.table(),
                self.profile,
                self.drive.table()
            )),
            404 => ToolError::no_such_file(format!("{label}: not found: {why}")),
            // Dropbox says "not found" with a 409 and a path/not_found summary.
            409 if why.contains("not_found") => {
                ToolError::no_such_file(format!("{label}: not found: {why}"))
            }
            s => ToolError::tool_failed(format!("{label} answered {s}: {why}")),
        }
    }

    /// Streams a file's bytes from `open(offset)` (a request the drive answers with the content,
    /// possibly by redirecting to a link), resuming with a Range request when the connection
    /// is cut. `size` is the file's size when the drive said so before.
    pub(crate) async fn download(
        &self,
        open: Opener,
        size: Option<u64>,
    ) -> Result<(Source, Value), ToolError> {
        let resp = self.open_at(&open, 0).await?;
        let meta = resp
            .headers()
            .get("dropbox-api-result")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| serde_json::from_str::<Value>(v).ok())
            .unwrap_or(Value::Null);
        let size = size
            .or_else(|| meta.get("size").and_then(Value::as_u64))
            .or_else(|| resp.content_length())
            .ok_or_else(|| {
                ToolError::tool_failed(format!(
                    "{} did not say the file's size",
                    self.drive.label()
                ))
            })?;
        let max = self.max_bytes();
        if size > max {
            return Err(ToolError::bad_argument(format!(
                "the file is {size} bytes, more than the server's max_object_bytes {max}"
            )));
        }
        let state = Resume {
            api: self.clone(),
            open,
            body: resp.bytes_stream().boxed(),
            offset: 0,
            size,
            resumes: RESUMES,
        };
        let chunks = futures::stream::try_unfold(state, |mut s| async move {
            loop {
                if s.offset >= s.size {
                    return Ok(None);
                }
                match s.body.next().await {
                    Some(Ok(chunk)) => {
                        s.offset += chunk.len() as u64;
                        return Ok(Some((chunk, s)));
                    }
                    Some(Err(_)) | None => {
                        if s.resumes == 0 {
                            return Err(ToolError::tool_failed(format!(
                                "the download was cut at {} of {} bytes, {RESUMES} resumes failed; \
                                 no partial file is left",
                                s.offset, s.size
                            )));
                        }
                        s.resumes -= 1;
                        let resp = s.api.open_at(&s.open, s.offset).await?;
                        s.body = resp.bytes_stream().boxed();
                    }
                }
            }
        })
        .boxed();
        Ok((Source { chunks, size }, meta))
    }

    /// Sends `open` from `offset` on, following one redirect to a link (checked, without the
    /// token); a resumed request must be answered with the bytes from `offset`.
    async fn open_at(&self, open: &Opener, offset: u64) -> Result<Response, ToolError> {
        let ranged = |req: RequestBuilder| {
            if offset > 0 {
                req.header("range", format!("bytes={offset}-"))
            } else {
                req
            }
        };
        let mut resp = self.send(ranged(open()?)).await?;
        if resp.status().is_redirection() {
            let to = resp
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| {
                    ToolError::tool_failed(format!(
                        "{} redirected without a location",
                        self.drive.label()
                    ))
                })?;
            let to = resp.url().join(&to).map_err(|e| {
                ToolError::tool_failed(format!(
                    "{} redirected to a bad link: {e}",
                    self.drive.label()
                ))
            })?;
            resp = self
                .send(ranged(self.bare(Method::GET, to.as_str())?))
                .await?;
            if resp.status().is_redirection() {
                return Err(ToolError::tool_failed(format!(
                    "{} redirected twice; not followed",
                    self.drive.label()
                )));
            }
        }
        if offset > 0 && resp.status() != StatusCode::PARTIAL_CONTENT {
            return Err(ToolError::tool_failed(format!(
                "{} could not resume the download at byte {offset} (answered {})",
                self.drive.label(),
                resp.status().as_u16()
            )));
        }
        Ok(resp)
    }

    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }
}

/// Makes the request that answers with a file's content (called again to resume).
pub(crate) type Opener = Arc<dyn Fn() -> Result<RequestBuilder, ToolError> + Send + Sync>;

struct Resume {
    api: Api,
    open: Opener,
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    offset: u64,
    size: u64,
    resumes: usize,
}

fn retry_after(resp: &Response) -> Option<Duration> {
    resp.headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The drive's own words for a failure (its JSON error, else the start of its answer).
fn error_text(body: &str) -> String {
    let v: Option<Value> = serde_json::from_str(body).ok();
    let picked = v.as_ref().and_then(|v| {
        v.get("error_summary")
            .or_else(|| v.pointer("/error/message"))
            .or_else(|| v.get("error_description"))
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
    });
    let text = picked.unwrap_or_else(|| body.to_string());
    let text: String = text.chars().take(300).collect();
    if text.is_empty() {
        "no message".into()
    } else {
        text
    }
}

pub(crate) async fn read_json(drive: Service, resp: Response) -> Result<Value, ToolError> {
    let bytes = resp.bytes().await.map_err(|e| {
        ToolError::tool_failed(format!(
            "{} answer cut short: {}",
            drive.label(),
            e.without_url()
        ))
    })?;
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ToolError::tool_failed(format!(
            "{} answered something that is not JSON: {e}",
            drive.label()
        ))
    })
}

/// A confined local file, opened for an upload: its size and its bytes as a request body that
/// reports progress and stops when the call is cancelled.
pub(crate) struct LocalFile {
    pub(crate) size: u64,
    pub(crate) chunks: transfer::Chunks,
}

impl LocalFile {
    pub(crate) async fn open(c: &Config, path: &str) -> Result<Self, ToolError> {
        let Source { chunks, size } = transfer::open(
            c,
            &Location::Local {
                path: path.to_string(),
            },
        )
        .await?;
        Ok(Self { size, chunks })
    }

    /// The whole stream as a body, with progress over `done..done + size` of `total`.
    pub(crate) fn body(self, ctx: &ToolContext, done: u64, total: u64) -> reqwest::Body {
        body_of(self.chunks, ctx, done, total)
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
    fn error_text_prefers_the_drives_words_and_is_bounded() {
        assert_eq!(
            error_text(r#"{"error_summary": "path/not_found/..", "error": {}}"#),
            "path/not_found/.."
        );
        assert_eq!(
            error_text(r#"{"error": {"code": "itemNotFound", "message": "gone"}}"#),
            "gone"
        );
        assert_eq!(error_text(&"x".repeat(1000)).len(), 300);
        assert_eq!(error_text(""), "no message");
    }
}
