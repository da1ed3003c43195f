//! Who may use the console, and the guard every request passes.
//!
//! - On a loopback address the console needs no login (whoever reaches it is on this machine);
//!   anywhere else every request needs a session (the admin password, set with `maljan console
//!   set-password`, stored as an argon2 hash) or a bearer token (`maljan console token`, stored as
//!   its SHA-256: a leaked file does not give the token away).
//! - Sessions live in memory (a restart logs everyone out) behind an HttpOnly, SameSite=Strict
//!   cookie.
//! - Every state-changing request made with a cookie (or on loopback) carries the CSRF token of
//!   its session, from a form's `_csrf` field or the `X-CSRF-Token` header, and must not come
//!   from another site (Origin, Sec-Fetch-Site). Bearer requests carry no ambient authority and
//!   need neither.
//! - The Host header must name this console (a DNS-rebinding page gets refused), and every answer
//!   gets the security headers (a CSP without inline script, frame-ancestors 'none').

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier, password_hash::SaltString};
use axum::{
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::state::AppState;

pub const SESSION_COOKIE: &str = "maljan_session";
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// The CSP of every page: scripts and styles from the console itself only, no inline script.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

#[derive(Debug, Default, Serialize, Deserialize)]
struct AuthFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    password_hash: Option<String>,
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenEntry {
    pub sha256: String,
    pub label: String,
    pub created_at: String,
}

/// The admin password, the API tokens and the sessions.
pub struct AuthStore {
    path: PathBuf,
    file: Mutex<AuthFile>,
    sessions: Mutex<HashMap<String, Instant>>,
    csrf_key: [u8; 32],
}

/// Who a request is from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// On a loopback console, with no login.
    Loopback,
    Session(String),
    Token,
}

/// The CSRF token a page embeds in its forms (an extension on every request).
#[derive(Debug, Clone)]
pub struct Csrf(pub String);

/// Set on a multipart request whose CSRF token is in a form field: the handler checks it.
#[derive(Debug, Clone)]
pub struct CsrfInForm(pub String);

impl AuthStore {
    pub fn file_in(data_dir: &Path) -> PathBuf {
        data_dir.join("console-auth.toml")
    }

    pub fn load(data_dir: &Path) -> anyhow::Result<Self> {
        let path = Self::file_in(data_dir);
        let file = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => AuthFile::default(),
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        };
        Ok(Self {
            path,
            file: Mutex::new(file),
            sessions: Mutex::default(),
            csrf_key: rand::random(),
        })
    }

    fn save(&self, file: &AuthFile) -> anyhow::Result<()> {
        use std::{io::Write, os::unix::fs::OpenOptionsExt};
        if let Some(dir) = self.path.parent() {
            maljan_client::paths::ensure_private_dir(dir)?;
        }
        let tmp = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(toml::to_string_pretty(file)?.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        Ok(())
    }

    pub fn has_password(&self) -> bool {
        self.lock().password_hash.is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AuthFile> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores the argon2 hash of `password` (at least 8 characters).
    pub fn set_password(&self, password: &str) -> anyhow::Result<()> {
        if password.chars().count() < 8 {
            anyhow::bail!("the password needs at least 8 characters");
        }
        let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
            .map_err(|e| anyhow::anyhow!("salt: {e}"))?;
        let hash = Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map_err(|e| anyhow::anyhow!("argon2: {e}"))?
            .to_string();
        let mut file = self.lock();
        file.password_hash = Some(hash);
        self.save(&file)
    }

    pub fn check_password(&self, password: &str) -> bool {
        let Some(stored) = self.lock().password_hash.clone() else {
            return false;
        };
        PasswordHash::new(&stored).is_ok_and(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
    }

    /// Makes a new API token; returns it (shown once, only its hash is kept).
    pub fn create_token(&self, label: &str) -> anyhow::Result<String> {
        let token = format!("mjc_{}", hex::encode(rand::random::<[u8; 32]>()));
        let mut file = self.lock();
        file.tokens.push(TokenEntry {
            sha256: hex::encode(Sha256::digest(token.as_bytes())),
            label: label.to_string(),
            created_at: maljan_client::time::rfc3339(std::time::SystemTime::now()),
        });
        self.save(&file)?;
        Ok(token)
    }

    pub fn tokens(&self) -> Vec<TokenEntry> {
        self.lock().tokens.clone()
    }

    fn token_valid(&self, token: &str) -> bool {
        let digest = hex::encode(Sha256::digest(token.as_bytes()));
        self.lock()
            .tokens
            .iter()
            .any(|t| bool::from(t.sha256.as_bytes().ct_eq(digest.as_bytes())))
    }

    pub fn new_session(&self) -> String {
        let id = hex::encode(rand::random::<[u8; 32]>());
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        sessions.retain(|_, at| now.duration_since(*at) < SESSION_TTL);
        sessions.insert(id.clone(), now);
        id
    }

    pub fn end_session(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    fn session_valid(&self, id: &str) -> bool {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .is_some_and(|at| at.elapsed() < SESSION_TTL)
    }

    /// The CSRF token of a session ("loopback" and "login" are the sessionless ones).
    pub fn csrf_for(&self, sid: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.csrf_key);
        h.update(b"csrf:");
        h.update(sid.as_bytes());
        hex::encode(h.finalize())
    }
}

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

fn identify(state: &AppState, headers: &HeaderMap) -> Option<Identity> {
    if let Some(auth) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        // A wrong token is no identity at all, even on loopback: the caller meant to use one.
        return auth
            .strip_prefix("Bearer ")
            .filter(|t| state.auth.token_valid(t.trim()))
            .map(|_| Identity::Token);
    }
    if let Some(sid) = cookie(headers, SESSION_COOKIE)
        && state.auth.session_valid(&sid)
    {
        return Some(Identity::Session(sid));
    }
    (!state.auth_required()).then_some(Identity::Loopback)
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

/// Paths anyone may fetch: the login form and the style sheet and script it uses.
fn public(path: &str) -> bool {
    path == "/login" || path.starts_with("/assets/")
}

/// The guard around every route (see the module's comment).
pub async fn guard(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let api = path.starts_with("/api/");
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
    let identity = identify(&state, req.headers());
    let changes = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let bearer = identity == Some(Identity::Token);
    if changes && !bearer && cross_site(req.headers(), &host) {
        return refuse(
            api,
            StatusCode::FORBIDDEN,
            "cross-site request refused (Origin / Sec-Fetch-Site is not this console)",
        );
    }
    let sid = match &identity {
        Some(Identity::Session(s)) => s.clone(),
        Some(Identity::Loopback) => "loopback".into(),
        Some(Identity::Token) => String::new(),
        None if public(&path) => "login".into(),
        None if api => {
            return refuse(
                true,
                StatusCode::UNAUTHORIZED,
                "authentication required: a bearer token (maljan console token) or a login session",
            );
        }
        None => return Redirect::to("/login").into_response(),
    };
    let expected = state.auth.csrf_for(&sid);
    let mut req = req;
    if changes && !bearer {
        req = match check_csrf(req, &expected).await {
            Ok(r) => r,
            Err(why) => return refuse(api, StatusCode::FORBIDDEN, why),
        };
    }
    req.extensions_mut().insert(Csrf(expected));
    if let Some(id) = identity {
        req.extensions_mut().insert(id);
    }
    let mut resp = next.run(req).await;
    harden(resp.headers_mut(), &path);
    resp
}

/// The token from the header, else from a urlencoded form's `_csrf` (the body is put back); a
/// multipart form's is checked by its handler (it reads the fields anyway).
async fn check_csrf(req: Request, expected: &str) -> Result<Request, &'static str> {
    const MISSING: &str = "missing or wrong CSRF token: reload the page and submit the form again";
    if let Some(given) = req
        .headers()
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
    {
        return if csrf_matches(expected, given) {
            Ok(req)
        } else {
            Err(MISSING)
        };
    }
    let ctype = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ctype.starts_with("multipart/form-data") {
        let mut req = req;
        req.extensions_mut()
            .insert(CsrfInForm(expected.to_string()));
        return Ok(req);
    }
    if !ctype.starts_with("application/x-www-form-urlencoded") {
        return Err(MISSING);
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .map_err(|_| "the form is larger than 1 MiB")?;
    let given = form_urlencoded_field(&bytes, "_csrf").unwrap_or_default();
    if !csrf_matches(expected, &given) {
        return Err(MISSING);
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

fn form_urlencoded_field(body: &[u8], name: &str) -> Option<String> {
    serde_urlencoded_pairs(body)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
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
