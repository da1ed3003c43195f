//! The guard every request passes, in this order:
//!
//! 1. The Host header must name this console (a DNS-rebinding page is refused).
//! 2. A body whose `Content-Length` is over what the endpoint takes is refused with 413 before a
//!    byte of it is read (a sample's size plus 1 MiB for a job submission, 1 MiB elsewhere).
//! 3. Every request is authenticated, on loopback too (see `auth`): a session cookie (the
//!    owner's login URL, the admin password, or an API token pasted into the login form) or a
//!    bearer token. Without one, a page redirects to `/login` and anything else gets 401 with a
//!    JSON error that names `Authorization: Bearer`. Only `/login` and `/assets/` are public.
//! 4. Each request needs a scope ([`required_scope`]): reading needs `read`, submitting and
//!    cancelling jobs `submit`, and every other change — a server added, changed, tested or
//!    removed, the settings — `admin`. Unknown changes need `admin` too.
//! 5. Every state-changing request made with a cookie carries its session's CSRF token, whatever
//!    its content type: the `X-CSRF-Token` header, or a form's `_csrf` field (urlencoded, or a
//!    multipart form's first field, read before the rest of the body), and must not come from
//!    another site (Origin, Sec-Fetch-Site). Bearer requests carry no ambient authority and
//!    need neither.
//! 6. Every answer gets the security headers (a CSP without inline script, frame-ancestors
//!    'none', no-store).

use std::{net::IpAddr, sync::Arc};

use axum::{
    body::{Body, Bytes},
    extract::{ConnectInfo, Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use futures::StreamExt;
use subtle::ConstantTimeEq;

pub use crate::auth::{AuthStore, Identity, SESSION_TTL, Scope, TokenEntry};
use crate::state::AppState;

pub const SESSION_COOKIE: &str = "maljan_session";
/// The CSP of every page: scripts and styles from the console itself only, no inline script.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
/// The largest body of a request that is not a job submission (a form, a server's JSON).
pub const FORM_BODY_CAP: u64 = 1 << 20;
/// How far into a multipart body its first field (`_csrf`) is looked for.
const MULTIPART_PEEK: usize = 64 << 10;

/// What a page needs to know of whoever asks for it (an extension on every request).
#[derive(Debug, Clone)]
pub struct Viewer {
    /// The CSRF token the page embeds in its forms.
    pub csrf: String,
    /// None on the login page before a login.
    pub scope: Option<Scope>,
    /// Whether the request came with a session (it can log out).
    pub session: bool,
}

/// The client's address, when the listener told it (the login back-off is per client).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub Option<IpAddr>);

pub fn csrf_matches(expected: &str, given: &str) -> bool {
    bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case, RFC 9110).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Who a request is from; `Err` for an Authorization header that names nobody (a wrong or
/// revoked token is refused, even with a session cookie beside it: the caller meant to use it).
fn identify(state: &AppState, headers: &HeaderMap) -> Result<Option<Identity>, ()> {
    if let Some(auth) = headers.get(header::AUTHORIZATION) {
        return auth
            .to_str()
            .ok()
            .and_then(bearer)
            .and_then(|t| state.auth.check_token(t))
            .map(Some)
            .ok_or(());
    }
    Ok(cookie(headers, SESSION_COOKIE).and_then(|sid| state.auth.session(&sid)))
}

/// Whether `host` (a Host header) names this console.
fn host_allowed(state: &AppState, host: &str) -> bool {
    let listen = state.opts.listen;
    if !listen.ip().is_loopback() {
        return !host.is_empty();
    }
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) if !n.ends_with(']') || n.starts_with('[') => (n, p.parse::<u16>().ok()),
        _ => (host, Some(80)),
    };
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
        && (listen.port() == 0 || port == Some(listen.port()))
}

/// A state-changing request from another site (a page elsewhere posting to the console).
fn cross_site(headers: &HeaderMap, host: &str) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return true;
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        None => false,
        Some(origin) => origin != format!("http://{host}") && origin != format!("https://{host}"),
    }
}

fn refuse(api: bool, status: StatusCode, message: &str) -> Response {
    if api {
        (status, axum::Json(serde_json::json!({"error": message}))).into_response()
    } else {
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{message}\n"),
        )
            .into_response()
    }
}

/// What a script without a credential is told (also in the `WWW-Authenticate` challenge).
pub const USE_BEARER: &str = "authentication required: a script sends `Authorization: Bearer <token>` (make one with `maljan console token`); a browser opens the login URL that `maljan console` printed";

fn unauthenticated(message: &str) -> Response {
    let mut resp = refuse(true, StatusCode::UNAUTHORIZED, message);
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"maljan console\""),
    );
    resp
}

/// Paths anyone may fetch: the login form and the style sheet and script it uses.
fn public(path: &str) -> bool {
    path == "/login" || path.starts_with("/assets/")
}

fn changes(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The endpoints that take a sample (their body may be as large as a sample).
fn submission(method: &Method, path: &str) -> bool {
    *method == Method::POST && matches!(path, "/api/v1/jobs" | "/jobs/new")
}

/// The scope a request needs; None for the login and logout forms (anyone may try them).
/// One table for the pages and the API alike; a change it does not name needs `admin`.
pub fn required_scope(method: &Method, path: &str) -> Option<Scope> {
    if !changes(method) {
        return Some(Scope::Read);
    }
    if matches!(path, "/login" | "/logout") {
        return None;
    }
    if submission(method, path) {
        return Some(Scope::Submit);
    }
    let segments: Vec<&str> = path.split('/').collect();
    let cancel = *method == Method::POST
        && matches!(
            segments.as_slice(),
            ["", "jobs", id, "cancel"] | ["", "api", "v1", "jobs", id, "cancel"] if !id.is_empty()
        );
    Some(if cancel { Scope::Submit } else { Scope::Admin })
}

/// The largest body `path` takes (see the module's comment).
fn body_cap(state: &AppState, method: &Method, path: &str) -> u64 {
    if submission(method, path) {
        state.opts.max_sample_bytes.saturating_add(1 << 20)
    } else {
        FORM_BODY_CAP
    }
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The guard around every route (see the module's comment).
pub async fn guard(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let api = path.starts_with("/api/");
    let method = req.method().clone();
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    if !host_allowed(&state, &host) {
        return refuse(
            api,
            StatusCode::MISDIRECTED_REQUEST,
            "this console answers only to its own address (the Host header names another)",
        );
    }
    let cap = body_cap(&state, &method, &path);
    if let Some(length) = declared_length(req.headers()).filter(|l| *l > cap) {
        let mut resp = refuse(
            true,
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the request body is {length} bytes: this endpoint takes at most {cap}"),
        );
        // Its body is never read: the connection cannot carry another request.
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return resp;
    }
    let client = req
        .extensions()
        .get::<ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let identity = match identify(&state, req.headers()) {
        Ok(identity) => identity,
        Err(()) => {
            return unauthenticated(
                "the bearer token is not valid (mistyped or revoked): make one with `maljan console token`",
            );
        }
    };
    let changing = changes(&method);
    let bearer = matches!(identity, Some(Identity::Token { .. }));
    if changing && !bearer && cross_site(req.headers(), &host) {
        return refuse(
            api,
            StatusCode::FORBIDDEN,
            "cross-site request refused (Origin / Sec-Fetch-Site is not this console)",
        );
    }
    let sid = match &identity {
        Some(Identity::Session { sid, .. }) => sid.clone(),
        Some(Identity::Token { .. }) => String::new(),
        None if public(&path) => "login".into(),
        None if api => return unauthenticated(USE_BEARER),
        // A browser is sent to the login form; a script is told how to authenticate.
        None if !changing || accepts_html(req.headers()) => {
            return Redirect::to("/login").into_response();
        }
        None => return unauthenticated(USE_BEARER),
    };
    if let (Some(needed), Some(who)) = (required_scope(&method, &path), &identity)
        && who.scope() < needed
    {
        return refuse(api, StatusCode::FORBIDDEN, &scope_refusal(needed, who));
    }
    let expected = state.auth.csrf_for(&sid);
    let mut req = req;
    if changing && !bearer {
        req = match check_csrf(req, &expected).await {
            Ok(r) => r,
            Err(why) => return refuse(api, StatusCode::FORBIDDEN, why),
        };
    }
    req.extensions_mut().insert(Viewer {
        csrf: expected,
        scope: identity.as_ref().map(Identity::scope),
        session: matches!(identity, Some(Identity::Session { .. })),
    });
    req.extensions_mut().insert(ClientAddr(client));
    if let Some(id) = identity {
        req.extensions_mut().insert(id);
    }
    let mut resp = next.run(req).await;
    harden(resp.headers_mut(), &path);
    resp
}

fn accepts_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"))
}

fn scope_refusal(needed: Scope, who: &Identity) -> String {
    let what = match who {
        Identity::Session { .. } => "this session",
        Identity::Token { .. } => "this token",
    };
    let why = match needed {
        Scope::Admin => {
            " Adding, changing, testing or removing a server (a stdio server is a program the console starts as its owner) and the settings need admin: the owner's login URL, the admin password, or a token from `maljan console token --scope admin`."
        }
        _ => {
            " Submitting and cancelling jobs needs a token from `maljan console token --scope submit`."
        }
    };
    format!(
        "this needs the {needed} scope; {what} has {}.{why}",
        who.scope()
    )
}

const FORM_FORGED: &str = "missing or wrong CSRF token: reload the page and submit the form again";
const HEADER_MISSING: &str = "missing or wrong CSRF token: a page's request carries its X-CSRF-Token header; a script sends `Authorization: Bearer <token>` instead (make one with `maljan console token`)";

/// The one CSRF check of every state-changing request with a cookie: the header, else the
/// form's `_csrf` field (an urlencoded body is put back; a multipart body is read only as far
/// as its first field, then put back whole). Any other body needs the header.
async fn check_csrf(req: Request, expected: &str) -> Result<Request, &'static str> {
    if let Some(given) = req.headers().get("x-csrf-token") {
        let given = given.to_str().unwrap_or("");
        return if csrf_matches(expected, given) {
            Ok(req)
        } else {
            Err(HEADER_MISSING)
        };
    }
    let ctype = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let essence = ctype
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "multipart/form-data" => {
            let boundary = multipart_boundary(&ctype).ok_or(FORM_FORGED)?;
            let (req, given) = peek_first_field(req, &boundary).await?;
            match given {
                Some(g) if csrf_matches(expected, &g) => Ok(req),
                _ => Err(FORM_FORGED),
            }
        }
        "application/x-www-form-urlencoded" => {
            let (parts, body) = req.into_parts();
            let bytes = axum::body::to_bytes(body, FORM_BODY_CAP as usize)
                .await
                .map_err(|_| "the form is larger than 1 MiB")?;
            let given = serde_urlencoded_pairs(&bytes)
                .into_iter()
                .find(|(k, _)| k == "_csrf")
                .map(|(_, v)| v)
                .unwrap_or_default();
            if !csrf_matches(expected, &given) {
                return Err(FORM_FORGED);
            }
            Ok(Request::from_parts(parts, Body::from(bytes)))
        }
        _ => Err(HEADER_MISSING),
    }
}

/// The `boundary` parameter of a multipart Content-Type (quoted or not).
fn multipart_boundary(ctype: &str) -> Option<String> {
    ctype.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
            .filter(|b| !b.is_empty() && b.len() <= 200)
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What the start of a multipart body says of its first field.
#[derive(Debug, PartialEq, Eq)]
enum FirstField {
    /// The first field is `_csrf`, with this value.
    Csrf(String),
    /// The first field is another one (or the body is not multipart).
    Other,
    /// More of the body is needed.
    NotYet,
}

fn first_field(buf: &[u8], boundary: &str) -> FirstField {
    let delimiter = format!("--{boundary}");
    let Some(start) = find(buf, delimiter.as_bytes()) else {
        return if buf.len() > delimiter.len() + 2 && !buf.starts_with(b"\r\n") {
            FirstField::Other
        } else {
            FirstField::NotYet
        };
    };
    // Only a CRLF may come before the first delimiter (no preamble: browsers send none).
    if !matches!(&buf[..start], b"" | b"\r\n") {
        return FirstField::Other;
    }
    let after = &buf[start + delimiter.len()..];
    let Some(heads_end) = find(after, b"\r\n\r\n") else {
        return FirstField::NotYet;
    };
    let heads = String::from_utf8_lossy(&after[..heads_end]);
    let named_csrf = heads.lines().any(|line| {
        let line = line.trim();
        line.to_ascii_lowercase()
            .starts_with("content-disposition:")
            && line.split(';').skip(1).any(|p| {
                p.split_once('=').is_some_and(|(k, v)| {
                    k.trim().eq_ignore_ascii_case("name") && v.trim().trim_matches('"') == "_csrf"
                })
            })
    });
    if !named_csrf {
        return FirstField::Other;
    }
    let value = &after[heads_end + 4..];
    let closing = format!("\r\n{delimiter}");
    match find(value, closing.as_bytes()) {
        Some(end) => FirstField::Csrf(String::from_utf8_lossy(&value[..end]).trim().to_string()),
        None => FirstField::NotYet,
    }
}

/// Reads a multipart body until its first field is known (at most [`MULTIPART_PEEK`] bytes),
/// then gives the request back with the whole body: what was read, then the rest.
async fn peek_first_field(
    req: Request,
    boundary: &str,
) -> Result<(Request, Option<String>), &'static str> {
    let (parts, body) = req.into_parts();
    let mut stream = body.into_data_stream();
    let mut read: Vec<Bytes> = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let given = loop {
        match first_field(&buf, boundary) {
            FirstField::Csrf(v) => break Some(v),
            FirstField::Other => break None,
            FirstField::NotYet if buf.len() >= MULTIPART_PEEK => break None,
            FirstField::NotYet => {}
        }
        match stream.next().await {
            Some(Ok(chunk)) => {
                buf.extend_from_slice(&chunk);
                read.push(chunk);
            }
            Some(Err(_)) => return Err("the request body could not be read"),
            None => break None,
        }
    };
    let whole = futures::stream::iter(read.into_iter().map(Ok::<Bytes, axum::Error>)).chain(stream);
    Ok((Request::from_parts(parts, Body::from_stream(whole)), given))
}

/// Decodes `a=b&c=d` (an urlencoded form body) into its pairs, in order.
pub fn serde_urlencoded_pairs(body: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(body).into_owned().collect()
}

fn harden(headers: &mut HeaderMap, path: &str) {
    let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
        h.entry(k).or_insert(HeaderValue::from_static(v));
    };
    set(headers, "content-security-policy", CSP);
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "x-frame-options", "DENY");
    // same-origin, not no-referrer: under no-referrer Chromium sends `Origin: null` on a form POST,
    // and the cross-site check could not tell the console's own forms from a stranger's.
    set(headers, "referrer-policy", "same-origin");
    set(headers, "cross-origin-opener-policy", "same-origin");
    set(headers, "cross-origin-resource-policy", "same-origin");
    if !path.starts_with("/assets/") {
        set(headers, "cache-control", "no-store");
    }
}

/// The Set-Cookie value of a new session.
pub fn session_cookie(sid: &str) -> String {
    format!(
        "{SESSION_COOKIE}={sid}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_TTL.as_secs()
    )
}

pub fn session_of(headers: &HeaderMap) -> Option<String> {
    cookie(headers, SESSION_COOKIE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_table() {
        let post = Method::POST;
        assert_eq!(
            required_scope(&Method::GET, "/api/v1/jobs"),
            Some(Scope::Read)
        );
        assert_eq!(required_scope(&post, "/api/v1/jobs"), Some(Scope::Submit));
        assert_eq!(required_scope(&post, "/jobs/new"), Some(Scope::Submit));
        assert_eq!(
            required_scope(&post, "/jobs/j1/cancel"),
            Some(Scope::Submit)
        );
        assert_eq!(
            required_scope(&post, "/api/v1/jobs/j1/cancel"),
            Some(Scope::Submit)
        );
        for admin in [
            "/api/v1/servers",
            "/api/v1/servers/test",
            "/api/v1/servers/echo/test",
            "/servers/new",
            "/servers/echo",
            "/servers/echo/test",
            "/settings/llm-test",
            "/jobs//cancel",
            "/api/v1/jobs/a/b/cancel",
            "/something/new",
        ] {
            assert_eq!(required_scope(&post, admin), Some(Scope::Admin), "{admin}");
        }
        assert_eq!(
            required_scope(&Method::PATCH, "/api/v1/servers/echo"),
            Some(Scope::Admin)
        );
        assert_eq!(
            required_scope(&Method::DELETE, "/api/v1/jobs/j1"),
            Some(Scope::Admin)
        );
        assert_eq!(required_scope(&post, "/login"), None);
    }

    #[test]
    fn the_first_multipart_field() {
        let b = "zz";
        let body = "--zz\r\nContent-Disposition: form-data; name=\"_csrf\"\r\n\r\nabc\r\n--zz\r\n";
        assert_eq!(
            first_field(body.as_bytes(), b),
            FirstField::Csrf("abc".into())
        );
        assert_eq!(first_field(&body.as_bytes()[..30], b), FirstField::NotYet);
        let other = "--zz\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\n{}\r\n--zz--";
        assert_eq!(first_field(other.as_bytes(), b), FirstField::Other);
        assert_eq!(
            first_field(b"{\"name\":\"p\"}", b),
            FirstField::Other,
            "JSON"
        );
        let preamble =
            "junk\r\n--zz\r\nContent-Disposition: form-data; name=_csrf\r\n\r\nabc\r\n--zz";
        assert_eq!(first_field(preamble.as_bytes(), b), FirstField::Other);
        assert_eq!(
            multipart_boundary("multipart/form-data; boundary=\"z z\""),
            Some("z z".into())
        );
        assert_eq!(multipart_boundary("multipart/form-data"), None);
    }

    #[test]
    fn bearer_scheme_in_any_case() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
    }
}
