//! One drive profile's HTTP side, shared by the four drives: the SSRF-guarded client with the
//! profile's bearer token (sent only to the profile's own hosts), retries, the mapping of HTTP
//! failures to maljan's error codes, paged listings, uploads in pieces and resumable downloads.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use futures::{StreamExt, stream::BoxStream};
use maljan_server::{ToolContext, ToolError};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;

use super::{DriveProfile, LocalFile, RESUMES, Service};
use crate::storage::{
    guard::{GuardedConnector, check_endpoint},
    profiles::{Network, Secret},
    transfer::Source,
};

/// The most entries one listing gathers before it asks for a narrower folder.
pub(crate) const MAX_LISTED: usize = 100_000;

/// One drive profile's HTTP side.
#[derive(Clone)]
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
    pub(super) fn new(
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

    /// Sends once and reads the JSON answer whatever its status (an OAuth token endpoint says
    /// "not yet" with a 400 and an error code the caller acts on).
    pub(crate) async fn exchange(
        &self,
        req: RequestBuilder,
    ) -> Result<(StatusCode, Value), ToolError> {
        let resp = req.send().await.map_err(|e| self.transport(e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| self.transport(e))?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
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
        self.failure(status, &text)
    }

    /// The error for a failure answer the caller read itself (see [`Api::exchange`]).
    pub(crate) fn refusal(&self, status: StatusCode, answer: &Value) -> ToolError {
        self.failure(status, &answer.to_string())
    }

    fn failure(&self, status: StatusCode, text: &str) -> ToolError {
        let why = error_text(text);
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

impl Api {
    /// A request with the token to a link the drive handed out for its own API (a next page):
    /// it must lie under the profile's API URL, so the token never goes anywhere else.
    pub(crate) fn follow(&self, method: Method, url: &str) -> Result<RequestBuilder, ToolError> {
        let under = url
            .strip_prefix(&self.api_url)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?']));
        if !under {
            return Err(ToolError::tool_failed(format!(
                "{} handed out a next-page link outside its API; not followed",
                self.drive.label()
            )));
        }
        self.request(method, url)
    }

    /// Every item of a paged listing: `first` answers a page whose `items` key holds an array;
    /// `next` makes the request for the page after (None at the end). At most [`MAX_LISTED`].
    pub(crate) async fn pages(
        &self,
        first: RequestBuilder,
        items: &str,
        mut next: impl FnMut(&Value) -> Result<Option<RequestBuilder>, ToolError>,
    ) -> Result<Vec<Value>, ToolError> {
        let mut page = self.json(first).await?;
        let mut out = Vec::new();
        loop {
            if let Some(Value::Array(found)) = page.get_mut(items).map(Value::take) {
                out.extend(found);
            }
            if out.len() > MAX_LISTED {
                return Err(ToolError::tool_failed(format!(
                    "the folder holds more than {MAX_LISTED} entries; list a folder inside it"
                )));
            }
            match next(&page)? {
                Some(req) => page = self.json(req).await?,
                None => return Ok(out),
            }
        }
    }
}

/// A local file read in pieces of `piece` bytes for an upload session: `next` gives them in
/// order (None after the last), reporting progress for the ones sent before; a cancelled call
/// stops at the next piece.
pub(crate) struct Pieces<'a> {
    file: &'a mut LocalFile,
    ctx: &'a ToolContext,
    piece: usize,
    offset: u64,
    done: bool,
}

pub(crate) struct Piece {
    pub(crate) offset: u64,
    pub(crate) bytes: Vec<u8>,
    pub(crate) last: bool,
}

impl<'a> Pieces<'a> {
    pub(crate) fn new(file: &'a mut LocalFile, ctx: &'a ToolContext, piece: usize) -> Self {
        Self {
            file,
            ctx,
            piece,
            offset: 0,
            done: false,
        }
    }

    pub(crate) async fn next(&mut self) -> Result<Option<Piece>, ToolError> {
        let size = self.file.size;
        if self.offset > 0 || self.done {
            self.ctx
                .progress(self.offset as f64, Some(size as f64), None);
        }
        if self.done {
            return Ok(None);
        }
        if self.ctx.is_cancelled() {
            return Err(crate::paths::cancelled());
        }
        let bytes = self.file.take(self.piece).await?;
        let n = bytes.len() as u64;
        let last = self.offset + n >= size;
        if n == 0 && !last {
            return Err(ToolError::tool_failed(
                "the local file ended before its size; it changed during the upload",
            ));
        }
        let piece = Piece {
            offset: self.offset,
            bytes,
            last,
        };
        self.offset += n;
        self.done = last;
        Ok(Some(piece))
    }
}

impl Api {
    /// Sends a local file in `piece`-byte pieces `PUT` to an upload session's link (Graph's
    /// `uploadUrl`, Google's session URI; without the token), each with its `Content-Range`;
    /// answers the drive's reply to the last piece (the file's metadata).
    pub(crate) async fn put_pieces(
        &self,
        ctx: &ToolContext,
        file: &mut LocalFile,
        url: &str,
        piece: usize,
    ) -> Result<Value, ToolError> {
        let size = file.size;
        let mut pieces = Pieces::new(file, ctx, piece);
        let mut reply = Value::Null;
        while let Some(p) = pieces.next().await? {
            let req = self
                .bare(Method::PUT, url)?
                .header("content-length", p.bytes.len())
                .header(
                    "content-range",
                    content_range(p.offset, p.bytes.len(), size),
                )
                .body(p.bytes);
            // Before the last piece: Graph's 202, Google's 308 (Resume Incomplete), no file yet.
            reply = read_json(self.drive, self.send(req).await?).await?;
        }
        Ok(reply)
    }
}

/// `bytes FIRST-LAST/TOTAL` for the piece at `offset` (Graph, Google and Box sessions).
pub(crate) fn content_range(offset: u64, len: usize, total: u64) -> String {
    if len == 0 {
        return format!("bytes */{total}");
    }
    format!("bytes {offset}-{}/{total}", offset + len as u64 - 1)
}

/// A string field of a drive's answer.
pub(crate) fn str_of(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn content_ranges_name_the_last_byte() {
        assert_eq!(content_range(0, 10, 25), "bytes 0-9/25");
        assert_eq!(content_range(20, 5, 25), "bytes 20-24/25");
        assert_eq!(content_range(0, 0, 0), "bytes */0");
    }
}
