//! WebDAV (RFC 4918) over the files server's SSRF-guarded reqwest client: PROPFIND to stat and
//! list, GET (with Range) to read, PUT with a streamed body to write, MKCOL, DELETE and MOVE.
//! Only the multistatus answer is parsed by hand (with quick-xml), and only the four properties
//! used: href, resourcetype, getcontentlength, getlastmodified.
//!
//! A path is the URL path on the profile's host (`/dav/a.txt`), as in automation-file's
//! `webdav://host/dav/a.txt`; a relative one is under the profile's URL.

use std::io;

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use maljan_server::ToolError;
use reqwest::{Method, StatusCode, header};
use url::Url;

use super::{
    guard::{check_endpoint, guarded_client},
    remote_fs::{ByteStream, Entry, RemoteFs},
    remote_profiles::WebdavProfile,
};

/// The largest PROPFIND answer read (a directory of ~100k entries).
const MAX_MULTISTATUS: usize = 64 << 20;

pub(crate) struct Webdav {
    profile: WebdavProfile,
    base: Url,
    client: reqwest::Client,
}

impl std::fmt::Debug for Webdav {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Webdav({})", self.base.host_str().unwrap_or(""))
    }
}

fn http_io(e: reqwest::Error) -> io::Error {
    // Without the URL: the profile's may carry a token in its query.
    io::Error::other(e.without_url().to_string())
}

fn status_io(status: StatusCode, what: &str, path: &str) -> io::Error {
    let kind = match status {
        StatusCode::NOT_FOUND | StatusCode::GONE => io::ErrorKind::NotFound,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => io::ErrorKind::PermissionDenied,
        StatusCode::METHOD_NOT_ALLOWED if what == "MKCOL" => io::ErrorKind::AlreadyExists,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{what} {path}: the server answered {status}"))
}

impl Webdav {
    pub(crate) fn new(profile: WebdavProfile) -> Result<Self, ToolError> {
        check_endpoint(&profile.url, &profile.network)?;
        let mut base = Url::parse(&profile.url).map_err(|e| {
            ToolError::not_configured(format!("the [webdav] url is not a URL: {e}"))
        })?;
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        base.set_query(None);
        let client = guarded_client(&profile.network, profile.ca_file.as_deref())?;
        Ok(Self {
            profile,
            base,
            client,
        })
    }

    /// One PROPFIND of depth 0 on the collection, so a refused endpoint or login is clear.
    pub(crate) async fn check(&self) -> Result<(), ToolError> {
        let shown = self.base.path().to_string();
        match self.propfind(&shown, 0).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(ToolError::not_configured(format!(
                "the [webdav] url's collection {shown} does not exist"
            ))),
            Err(e) => Err(ToolError::tool_failed(format!(
                "WebDAV at {}: {e}",
                self.host()
            ))),
        }
    }

    fn host(&self) -> String {
        self.base.host_str().unwrap_or("").to_string()
    }

    fn url(&self, path: &str) -> Url {
        let mut u = self.base.clone();
        if path.starts_with('/') {
            u.set_path("/");
        }
        if let Ok(mut segs) = u.path_segments_mut() {
            segs.pop_if_empty();
            for s in path.split('/').filter(|s| !s.is_empty() && *s != ".") {
                segs.push(s);
            }
            if path.ends_with('/') {
                segs.push("");
            }
        }
        u
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, self.url(path));
        match &self.profile.username {
            Some(user) => r.basic_auth(user, self.profile.password.as_ref().map(|p| p.expose())),
            None => r,
        }
    }

    async fn propfind(&self, path: &str, depth: u8) -> io::Result<Option<Vec<(String, Entry)>>> {
        const BODY: &str = r#"<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/><d:getcontentlength/><d:getlastmodified/></d:prop></d:propfind>"#;
        let resp = self
            .request(Method::from_bytes(b"PROPFIND").expect("a method"), path)
            .header("Depth", depth.to_string())
            .header(header::CONTENT_TYPE, "application/xml")
            .body(BODY)
            .send()
            .await
            .map_err(http_io)?;
        match resp.status() {
            StatusCode::MULTI_STATUS => {}
            StatusCode::NOT_FOUND => return Ok(None),
            s => return Err(status_io(s, "PROPFIND", path)),
        }
        let mut body = Vec::new();
        let mut chunks = resp.bytes_stream();
        while let Some(c) = chunks.next().await {
            body.extend_from_slice(&c.map_err(http_io)?);
            if body.len() > MAX_MULTISTATUS {
                return Err(io::Error::other(format!(
                    "the PROPFIND answer for {path} is larger than {MAX_MULTISTATUS} bytes"
                )));
            }
        }
        let text = String::from_utf8_lossy(&body);
        multistatus(&text).map(Some)
    }
}

/// The entries of a multistatus answer: each response's decoded href path and properties.
pub(crate) fn multistatus(xml: &str) -> io::Result<Vec<(String, Entry)>> {
    use quick_xml::events::Event;
    let bad = |e: &dyn std::fmt::Display| {
        io::Error::other(format!("the multistatus answer cannot be read: {e}"))
    };
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = Vec::new();
    let mut current: Option<(String, Entry)> = None;
    let mut field = String::new();
    let mut text = String::new();
    loop {
        match reader.read_event().map_err(|e| bad(&e))? {
            Event::Start(s) => {
                let name = String::from_utf8_lossy(s.local_name().as_ref()).to_string();
                if name == "response" {
                    current = Some((
                        String::new(),
                        Entry {
                            name: String::new(),
                            is_dir: false,
                            size: 0,
                            modified: None,
                        },
                    ));
                }
                if name == "collection"
                    && let Some((_, e)) = current.as_mut()
                {
                    e.is_dir = true;
                }
                field = name;
                text.clear();
            }
            Event::Empty(s) => {
                if s.local_name().as_ref() == b"collection"
                    && let Some((_, e)) = current.as_mut()
                {
                    e.is_dir = true;
                }
            }
            Event::Text(t) => text.push_str(&t.decode().map_err(|e| bad(&e))?),
            Event::CData(t) => text.push_str(&t.decode().map_err(|e| bad(&e))?),
            Event::GeneralRef(r) => {
                let named = match &*r {
                    b"amp" => Some('&'),
                    b"lt" => Some('<'),
                    b"gt" => Some('>'),
                    b"quot" => Some('"'),
                    b"apos" => Some('\''),
                    _ => r.resolve_char_ref().ok().flatten(),
                };
                if let Some(c) = named {
                    text.push(c);
                }
            }
            Event::End(e) => {
                let name = String::from_utf8_lossy(e.local_name().as_ref()).to_string();
                if let Some((href, entry)) = current.as_mut() {
                    let value = text.trim();
                    match (name.as_str(), field.as_str()) {
                        ("href", "href") => {
                            // An absolute URL or a path; percent-decoded.
                            let path = match Url::parse(value) {
                                Ok(u) => u.path().to_string(),
                                Err(_) => value.to_string(),
                            };
                            *href = percent_decode(&path);
                        }
                        ("getcontentlength", "getcontentlength") => {
                            entry.size = value.parse().unwrap_or(0);
                        }
                        ("getlastmodified", "getlastmodified") => {
                            entry.modified = chrono::DateTime::parse_from_rfc2822(value)
                                .ok()
                                .map(|d| d.with_timezone(&chrono::Utc));
                        }
                        _ => {}
                    }
                }
                if name == "response"
                    && let Some((href, mut entry)) = current.take()
                {
                    entry.name = href
                        .trim_end_matches('/')
                        .rsplit('/')
                        .next()
                        .unwrap_or("")
                        .to_string();
                    out.push((href, entry));
                }
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

/// `%XX` decoded (a literal `+` or `&` stays itself).
fn percent_decode(s: &str) -> String {
    let escaped = s.replace('+', "%2B").replace('&', "%26");
    url::form_urlencoded::parse(format!("x={escaped}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

#[async_trait]
impl RemoteFs for Webdav {
    fn max_retries(&self) -> usize {
        self.profile.network.max_retries
    }

    fn scheme(&self) -> &'static str {
        "webdav"
    }

    async fn stat(&self, path: &str) -> io::Result<Option<Entry>> {
        Ok(self
            .propfind(path, 0)
            .await?
            .and_then(|mut all| all.pop())
            .map(|(_, e)| e))
    }

    async fn list_dir(&self, path: &str) -> io::Result<Vec<Entry>> {
        let dir = format!("{}/", path.trim_end_matches('/'));
        let Some(all) = self.propfind(&dir, 1).await? else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{path} does not exist"),
            ));
        };
        let own = self.url(&dir).path().trim_end_matches('/').to_string();
        let own = percent_decode(&own);
        Ok(all
            .into_iter()
            .filter(|(href, _)| href.trim_end_matches('/') != own)
            .map(|(_, e)| e)
            .collect())
    }

    async fn read(&self, path: &str, offset: u64) -> io::Result<ByteStream> {
        let mut r = self.request(Method::GET, path);
        if offset > 0 {
            r = r.header(header::RANGE, format!("bytes={offset}-"));
        }
        let resp = r.send().await.map_err(http_io)?;
        match resp.status() {
            StatusCode::OK if offset == 0 => {}
            StatusCode::PARTIAL_CONTENT if offset > 0 => {}
            s => return Err(status_io(s, "GET", path)),
        }
        Ok(resp.bytes_stream().map_err(http_io).boxed())
    }

    async fn write(&self, path: &str, data: ByteStream) -> io::Result<()> {
        let resp = self
            .request(Method::PUT, path)
            .body(reqwest::Body::wrap_stream(data))
            .send()
            .await
            .map_err(http_io)?;
        if !resp.status().is_success() {
            return Err(status_io(resp.status(), "PUT", path));
        }
        Ok(())
    }

    async fn mkdir(&self, path: &str) -> io::Result<()> {
        let dir = format!("{}/", path.trim_end_matches('/'));
        let resp = self
            .request(Method::from_bytes(b"MKCOL").expect("a method"), &dir)
            .send()
            .await
            .map_err(http_io)?;
        if !resp.status().is_success() {
            return Err(status_io(resp.status(), "MKCOL", path));
        }
        Ok(())
    }

    async fn remove_file(&self, path: &str) -> io::Result<()> {
        let resp = self
            .request(Method::DELETE, path)
            .send()
            .await
            .map_err(http_io)?;
        if !resp.status().is_success() {
            return Err(status_io(resp.status(), "DELETE", path));
        }
        Ok(())
    }

    async fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let resp = self
            .request(Method::from_bytes(b"MOVE").expect("a method"), from)
            .header("Destination", self.url(to).as_str())
            .header("Overwrite", "T")
            .send()
            .await
            .map_err(http_io)?;
        if !resp.status().is_success() {
            return Err(status_io(resp.status(), "MOVE", from));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multistatus_answer() {
        let xml = r#"<?xml version="1.0" encoding="utf-8" ?>
<d:multistatus xmlns:d="DAV:">
<d:response><d:href>/dav/</d:href><d:propstat><d:prop><d:resourcetype><d:collection /></d:resourcetype></d:prop></d:propstat></d:response>
<d:response><d:href>http://h/dav/a%20b.txt</d:href><d:propstat><d:prop><d:resourcetype/>
<d:getcontentlength>42</d:getcontentlength><d:getlastmodified>Wed, 02 Dec 2026 04:00:00 GMT</d:getlastmodified></d:prop></d:propstat></d:response>
<d:response><d:href>/dav/R&amp;D/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop></d:propstat></d:response>
</d:multistatus>"#;
        let got = multistatus(xml).unwrap();
        assert_eq!(got.len(), 3);
        assert!(got[0].1.is_dir);
        assert_eq!(got[1].0, "/dav/a b.txt");
        assert_eq!((got[1].1.name.as_str(), got[1].1.size), ("a b.txt", 42));
        assert!(got[1].1.modified.is_some() && !got[1].1.is_dir);
        assert_eq!((got[2].1.name.as_str(), got[2].1.is_dir), ("R&D", true));
    }

    proptest::proptest! {
        #[test]
        fn any_answer_is_an_answer_never_a_panic(xml in ".{0,300}") {
            let _ = multistatus(&xml);
        }
    }
}
